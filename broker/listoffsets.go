package broker

// ListOffsets (key 2), versions 1-11.
//
// Special timestamps: -1 latest (the high watermark, or the last stable
// offset for read_committed), -2 earliest (log start), -3 max timestamp
// (v7+, the exact record, KAFKA-16310), -4 earliest local (v8+, the log
// start: nothing is tiered), -5 latest tiered (v9+) and -6 earliest pending
// upload (v11+), both -1 without tiered storage as in Kafka. Any other
// timestamp finds the first record at or after it. Leader epochs are
// checked (v4+) and reported.

import (
	"context"

	"github.com/gregorbroker/gregor/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	listLatest              = -1
	listEarliest            = -2
	listMaxTimestamp        = -3
	listEarliestLocal       = -4
	listLatestTiered        = -5
	listEarliestPendingUpld = -6
)

func (b *Broker) handleListOffsets(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	img := b.ctrl.Image()
	seen := map[storage.TopicPartition]int{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			seen[storage.TopicPartition{Topic: t.Topic, Partition: p.Partition}]++
		}
	}
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.Timestamp, rp.Offset, rp.LeaderEpoch = -1, -1, -1
			tp := storage.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if seen[tp] > 1 {
				rp.ErrorCode = kerr.InvalidRequest.Code
			} else {
				b.listOffset(img.Topics[t.Topic] != nil, tp, p, &rp)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.respond(resp)
}

func (b *Broker) listOffset(topicExists bool, tp storage.TopicPartition, p kmsg.ListOffsetsRequestTopicPartition, rp *kmsg.ListOffsetsResponseTopicPartition) {
	part := b.replicas.get(tp)
	if part == nil {
		if topicExists {
			rp.ErrorCode = kerr.NotLeaderForPartition.Code
		} else {
			rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		return
	}
	leader, epoch := part.leadership()
	if leader != b.opts.NodeID {
		rp.ErrorCode = kerr.NotLeaderForPartition.Code
		return
	}
	if p.CurrentLeaderEpoch >= 0 {
		if p.CurrentLeaderEpoch > epoch {
			rp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			return
		}
		if p.CurrentLeaderEpoch < epoch {
			rp.ErrorCode = kerr.FencedLeaderEpoch.Code
			return
		}
	}
	l := part.log
	switch p.Timestamp {
	case listLatest:
		// The last stable offset equals the high watermark until
		// transactions exist.
		rp.Offset, rp.LeaderEpoch = l.HighWatermark(), epoch
	case listEarliest, listEarliestLocal:
		start := l.LogStartOffset()
		rp.Offset = start
		if ep, ok := l.EpochForOffset(start); ok {
			rp.LeaderEpoch = ep
		}
	case listMaxTimestamp:
		off, ts, ep := l.MaxTimestamp()
		rp.Offset, rp.Timestamp, rp.LeaderEpoch = off, ts, ep
	case listLatestTiered, listEarliestPendingUpld:
		// No tiered storage: Kafka answers -1.
	default:
		if p.Timestamp < 0 {
			rp.ErrorCode = kerr.InvalidRequest.Code
			return
		}
		off, ts, ep, found, err := l.OffsetForTimestamp(p.Timestamp)
		if err != nil {
			rp.ErrorCode = kerr.KafkaStorageError.Code
			return
		}
		if found && off < l.HighWatermark() {
			rp.Offset, rp.Timestamp, rp.LeaderEpoch = off, ts, ep
		}
	}
}
