package broker

// DescribeQuorum (key 55) v0-2, UpdateFeatures (key 57) v0-2, ElectLeaders
// (key 43) v0-2, UnregisterBroker (key 64) v0 (kafka-cluster unregister),
// AlterPartitionReassignments (key 45) v0-1 and ListPartitionReassignments
// (key 46) v0 (KIP-455, kafka-reassign-partitions).
//
// All are answered by the active controller (forwarded unchanged, broker.go
// forwardRequest); the reassignment rules are controller/reassign.go's.

import (
	"context"
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

func (b *Broker) handlePartitionReassignments(ctx context.Context, r *request) {
	b.forwardRequest(ctx, r, nil)
}
