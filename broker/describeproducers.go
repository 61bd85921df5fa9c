package broker

// DescribeProducers (key 61), version 0.
//
// Lists the producers each partition's log tracks for idempotence (and,
// once transactions exist, their open transaction's first offset), as
// kafka-transactions describe-producers shows them. Only the leader
// answers; others get NOT_LEADER_OR_FOLLOWER.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleDescribeProducers(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	img := b.ctrl.Image()
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		for _, idx := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = idx
			part := b.replicas.get(topicPartition(t.Topic, idx))
			switch {
			case part == nil && img.Topics[t.Topic] == nil:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case part == nil:
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				if leader, _ := part.leadership(); leader != b.opts.NodeID {
					rp.ErrorCode = kerr.NotLeaderForPartition.Code
					break
				}
				for _, p := range part.log.ActiveProducers() {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch = p.ProducerID, int32(p.ProducerEpoch)
					ap.LastSequence, ap.LastTimestamp = p.LastSequence, p.LastTimestamp
					ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = p.CoordinatorEpoch, p.CurrentTxnStartOffset
					rp.ActiveProducers = append(rp.ActiveProducers, ap)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.respond(resp)
}
