package broker

// DescribeQuorum (key 55) v0-2, UpdateFeatures (key 57) v0-2, ElectLeaders
// (key 43) v0-2, UnregisterBroker (key 64) v0 (kafka-cluster unregister)
// and ListPartitionReassignments (key 46) v0.
//
// The first four are answered by the active controller (forwarded
// unchanged, broker.go forwardRequest).
// ListPartitionReassignments reports the ongoing reassignments; Gregor has
// no reassignment support yet (AlterPartitionReassignments is not served),
// so there are never any, and the answer is the truthful empty list.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleDescribeQuorum(ctx context.Context, r *request) {
	b.forwardRequest(ctx, r, nil)
}

func (b *Broker) handleUpdateFeatures(ctx context.Context, r *request) {
	b.forwardRequest(ctx, r, nil)
}

func (b *Broker) handleElectLeaders(ctx context.Context, r *request) {
	b.forwardRequest(ctx, r, nil)
}

func (b *Broker) handleUnregisterBroker(ctx context.Context, r *request) {
	b.forwardRequest(ctx, r, nil)
}

func (b *Broker) handleListPartitionReassignments(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.Topics = []kmsg.ListPartitionReassignmentsResponseTopic{}
	r.respond(resp)
}
