package broker

// The client quotas' glue in the broker: following the image's quotas,
// and the controller mutation quota a request brings to the controller
// (KIP-599), whose throttle the answer then carries. What the quotas
// measure of a request and its connection is broker/network's
// (requestquota.go); the quotas themselves are broker/quota's.

import (
	"context"

	"github.com/gregorbroker/gregor/broker/quota"
	"github.com/gregorbroker/gregor/metadata"
)

// followQuotas keeps the quota managers on the metadata image's quotas.
func (b *Broker) followQuotas() {
	if b.meta == nil {
		return
	}
	b.stopQuotas = b.quotas.Follow(b.meta)
}

// withMutationQuota attaches the controller mutation quota of a request
// (API key and version) from (user, clientID) to ctx for the controller
// deciding it; the quota is nil when the request mutates nothing or no
// quota applies.
func withMutationQuota(ctx context.Context, q *quota.Manager, key, version int16, user, clientID string) (context.Context, *quota.Mutation) {
	a := apiFor(key)
	if a == nil || !a.quota.mutates {
		return ctx, nil
	}
	mq := q.NewMutation(user, clientID, version >= a.quota.strictSince)
	if mq == nil {
		return ctx, nil
	}
	return metadata.WithMutationQuota(ctx, mq), mq
}
