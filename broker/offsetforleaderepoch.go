package broker

// OffsetForLeaderEpoch (key 23), versions 2-4.
//
// Answers from the partition log's leader epoch cache: the largest epoch
// <= the requested one and the offset where it ended (the log end offset
// for the current epoch). Consumers use it to detect truncation after a
// leader change; followers will use it for the same when replication lands.
// The current leader epoch is checked (FENCED_LEADER_EPOCH /
// UNKNOWN_LEADER_EPOCH) as in Kafka.

import (
	"context"

	"github.com/gregorbroker/gregor/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleOffsetForLeaderEpoch(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	img := b.ctrl.Image()
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = p.Partition
			rp.LeaderEpoch, rp.EndOffset = -1, -1
			rp.ErrorCode = b.offsetForLeaderEpoch(img.Topics[t.Topic] != nil, storage.TopicPartition{Topic: t.Topic, Partition: p.Partition}, p, &rp)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.respond(resp)
}

func (b *Broker) offsetForLeaderEpoch(topicExists bool, tp storage.TopicPartition, p kmsg.OffsetForLeaderEpochRequestTopicPartition, rp *kmsg.OffsetForLeaderEpochResponseTopicPartition) int16 {
	part := b.replicas.get(tp)
	if part == nil {
		if topicExists {
			return kerr.NotLeaderForPartition.Code
		}
		return kerr.UnknownTopicOrPartition.Code
	}
	leader, epoch := part.leadership()
	if leader != b.opts.NodeID {
		return kerr.NotLeaderForPartition.Code
	}
	if p.CurrentLeaderEpoch >= 0 {
		if p.CurrentLeaderEpoch > epoch {
			return kerr.UnknownLeaderEpoch.Code
		}
		if p.CurrentLeaderEpoch < epoch {
			return kerr.FencedLeaderEpoch.Code
		}
	}
	rp.LeaderEpoch, rp.EndOffset = part.log.EndOffsetForEpoch(p.LeaderEpoch)
	return 0
}
