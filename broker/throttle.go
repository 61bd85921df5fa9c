package broker

// The client quotas' glue to requests and connections: what broker/quota
// measures of a request (its size and handler time, in its slot), which
// requests the request quota leaves alone, the throttle a response
// carries and the muting of its connection (KIP-219), and the controller
// mutation quota a request brings to the controller (KIP-599). The
// quotas themselves (the table from the image, the sensors, the
// arithmetic) are broker/quota's.

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/broker/quota"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// followQuotas keeps the quota managers on the metadata image's quotas.
func (b *Broker) followQuotas() {
	if b.meta == nil {
		return
	}
	b.stopQuotas = b.quotas.Follow(b.meta)
}

// requestQuotaExempt reports whether the request quota leaves the
// request alone: what brokers and controllers send each other (Kafka's
// cluster actions and the controller listener's APIs).
func (r *request) requestQuotaExempt() bool {
	if r.conn.listener.Controller {
		return true
	}
	a := apiFor(r.hdr.APIKey)
	return a != nil && a.quota.requestExempt
}

// requestQuota is what the client quotas measure of one request.
type requestQuota struct {
	// size is the request's frame length without its size prefix
	// (Kafka's request size, which the produce quota counts).
	size int
	// start is when the handler was called and localEnd when it
	// returned (conn.monotonic; start 0: not measured).
	start    int64
	localEnd atomic.Int64
	// bandwidthThrottle is the byte-rate quota's throttle time for the
	// request, decided by its handler (produce).
	bandwidthThrottle int32
}

// requestTime is how long the request's handler ran on the connection's
// goroutine (Kafka's request handler thread time): from dispatch until
// the handler returned, or until now while it still runs.
func (r *request) requestTime() time.Duration {
	rq := r.slot.quota
	if rq == nil || rq.start == 0 {
		return 0
	}
	end := rq.localEnd.Load()
	if end == 0 {
		end = r.conn.monotonic()
	}
	return time.Duration(max(end-rq.start, 0))
}

// requestThrottle records the request's handler time against the
// client's request quota and returns its throttle time (0 when exempt or
// within quota).
func (r *request) requestThrottle() int32 {
	q := r.conn.srv.quotas
	if q == nil || r.slot.quota == nil || r.slot.quota.start == 0 || r.requestQuotaExempt() {
		return 0
	}
	return q.RecordRequestTime(r.principal().Name, r.hdr.ClientID, r.requestTime())
}

// applyQuotas is the last step before a response is encoded: the
// throttle time is the largest of what the handler decided (bandwidth),
// what the response already carries (a controller's mutation throttle)
// and the request quota's; a throttled response says so and the
// connection is muted for that long (KIP-219: the answer goes out at
// once, the next request waits). resp is nil for an acks=0 produce,
// which only a bandwidth throttle can mute.
func (r *request) applyQuotas(resp kmsg.Response) {
	q := r.conn.srv.quotas
	if q == nil || !q.Active() {
		return
	}
	var throttle int32
	if r.slot.quota != nil {
		throttle = r.slot.quota.bandwidthThrottle
	}
	if resp != nil {
		if tr, ok := resp.(kmsg.ThrottleResponse); ok {
			t, _ := tr.Throttle()
			throttle = max(throttle, t)
		}
		throttle = max(throttle, r.requestThrottle())
	}
	if throttle <= 0 {
		return
	}
	if st, ok := resp.(kmsg.SetThrottleResponse); ok {
		st.SetThrottle(throttle)
	}
	r.conn.mute(throttle)
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
