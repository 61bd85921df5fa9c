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

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleDescribeQuorum(ctx context.Context, r *network.Request) {
	b.forwardRequest(ctx, r, nil)
}

func (b *Broker) handleUpdateFeatures(ctx context.Context, r *network.Request) {
	b.forwardRequest(ctx, r, nil)
}

func (b *Broker) handleElectLeaders(ctx context.Context, r *network.Request) {
	b.forwardRequest(ctx, r, nil)
}

func (b *Broker) handleUnregisterBroker(ctx context.Context, r *network.Request) {
	b.forwardRequest(ctx, r, nil)
}

func (b *Broker) handlePartitionReassignments(ctx context.Context, r *network.Request) {
	b.forwardRequest(ctx, r, nil)
}

func init() {
	register(api{
		key: kmsg.DescribeQuorum, min: 0, max: 2,
		listeners:        allListeners,
		authorizedAs:     "DESCRIBE on the cluster",
		clusterOperation: kmsg.ACLOperationDescribe,
		errorAnswer: errorAnswerOf(func(_ *kmsg.DescribeQuorumRequest, out *kmsg.DescribeQuorumResponse, e apiErr) {
			out.ErrorCode, out.ErrorMessage = e.code, defaultMessage(e.code)
		}),
		forward: &forwarding{},
		handle:  (*Broker).handleDescribeQuorum,
	})
	register(api{
		key: kmsg.ElectLeaders, min: 0, max: 2,
		listeners:        allListeners,
		authorizedAs:     "ALTER on the cluster",
		clusterOperation: kmsg.ACLOperationAlter,
		errorAnswer: errorAnswerOf(func(r *kmsg.ElectLeadersRequest, out *kmsg.ElectLeadersResponse, e apiErr) {
			out.ErrorCode = e.code
			for _, t := range r.Topics {
				rt := kmsg.NewElectLeadersResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewElectLeadersResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, e.code, e.msg
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
		}),
		forward: &forwarding{timeoutMillis: func(req kmsg.Request) int32 { return req.(*kmsg.ElectLeadersRequest).TimeoutMillis }},
		handle:  (*Broker).handleElectLeaders,
	})
	register(api{
		key: kmsg.UpdateFeatures, min: 0, max: 2,
		listeners:        allListeners,
		authorizedAs:     "ALTER on the cluster",
		clusterOperation: kmsg.ACLOperationAlter,
		errorAnswer: errorAnswerOf(func(_ *kmsg.UpdateFeaturesRequest, out *kmsg.UpdateFeaturesResponse, e apiErr) {
			out.ErrorCode, out.ErrorMessage = e.code, e.msg
		}),
		forward: &forwarding{timeoutMillis: func(req kmsg.Request) int32 { return req.(*kmsg.UpdateFeaturesRequest).TimeoutMillis }},
		handle:  (*Broker).handleUpdateFeatures,
	})
	register(api{
		key: kmsg.UnregisterBroker, min: 0, max: 0,
		listeners:        allListeners,
		authorizedAs:     "ALTER on the cluster",
		clusterOperation: kmsg.ACLOperationAlter,
		errorAnswer: errorAnswerOf(func(_ *kmsg.UnregisterBrokerRequest, out *kmsg.UnregisterBrokerResponse, e apiErr) {
			out.ErrorCode, out.ErrorMessage = e.code, e.msg
			if out.ErrorMessage == nil {
				out.ErrorMessage = defaultMessage(e.code)
			}
		}),
		forward: &forwarding{},
		handle:  (*Broker).handleUnregisterBroker,
	})
	register(api{
		key: kmsg.AlterPartitionAssignments, min: 0, max: 1,
		listeners:        allListeners,
		authorizedAs:     "ALTER on the cluster",
		clusterOperation: kmsg.ACLOperationAlter,
		errorAnswer: errorAnswerOf(func(r *kmsg.AlterPartitionAssignmentsRequest, out *kmsg.AlterPartitionAssignmentsResponse, e apiErr) {
			out.ErrorCode, out.ErrorMessage = e.code, e.msg
			for _, t := range r.Topics {
				rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.ErrorMessage = p.Partition, e.code, e.msg
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
		}),
		forward: &forwarding{
			timeoutMillis: func(req kmsg.Request) int32 { return req.(*kmsg.AlterPartitionAssignmentsRequest).TimeoutMillis },
			timedOut: func(req kmsg.Request, resp kmsg.Response) {
				r := req.(*kmsg.AlterPartitionAssignmentsRequest)
				resp.(*kmsg.AlterPartitionAssignmentsResponse).AllowReplicationFactorChange = r.Version < 1 || r.AllowReplicationFactorChange
			},
		},
		handle: (*Broker).handlePartitionReassignments,
	})
	register(api{
		key: kmsg.ListPartitionReassignments, min: 0, max: 0,
		listeners:        allListeners,
		authorizedAs:     "DESCRIBE on the cluster",
		clusterOperation: kmsg.ACLOperationDescribe,
		errorAnswer: errorAnswerOf(func(r *kmsg.ListPartitionReassignmentsRequest, out *kmsg.ListPartitionReassignmentsResponse, e apiErr) {
			out.ErrorCode, out.ErrorMessage = e.code, e.msg
			for _, t := range r.Topics {
				rt := kmsg.NewListPartitionReassignmentsResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
					rp.Partition = p
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
		}),
		forward: &forwarding{timeoutMillis: func(req kmsg.Request) int32 { return req.(*kmsg.ListPartitionReassignmentsRequest).TimeoutMillis }},
		handle:  (*Broker).handlePartitionReassignments,
	})
}
