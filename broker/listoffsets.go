package broker

// ListOffsets (key 2), versions 1-11.
//
// Answered by the replica manager (replica.Manager.ListOffset), which has
// Kafka's special timestamps and visibility rules: -1 latest (the high
// watermark, or the last stable offset for read_committed), -2 earliest
// (log start), -3 max timestamp (v7+, the exact record, KAFKA-16310; -1/-1
// when that record is not below the high watermark yet, as in Kafka), -4
// earliest local (v8+, the first offset on local disk: the log start
// without tiered storage), -5 latest tiered (v9+, the last offset in remote
// storage) and -6 earliest pending upload (v11+, the first offset not
// copied yet), both -1 without tiered storage. Any other timestamp finds
// the first record at or after it (in remote storage first when it is
// older than the local log). A
// partition named twice is INVALID_REQUEST. Leader epochs are checked
// (v4+) and reported. A topic the principal may not DESCRIBE gets
// TOPIC_AUTHORIZATION_FAILED on each of its partitions, listed after the
// others as Kafka lists them.

import (
	"context"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleListOffsets(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	seen := map[replica.TopicPartition]int{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			seen[replica.TopicPartition{Topic: t.Topic, Partition: p.Partition}]++
		}
	}
	isolation := replica.ReadUncommitted
	if req.IsolationLevel == 1 {
		isolation = replica.ReadCommitted
	}
	var denied []kmsg.ListOffsetsResponseTopic
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		allowed := b.can(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.Timestamp, rp.Offset, rp.LeaderEpoch = -1, -1, -1
			tp := replica.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if !allowed {
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if seen[tp] > 1 {
				rp.ErrorCode = kerr.InvalidRequest.Code
			} else {
				lo := b.replicas.ListOffset(tp, p.CurrentLeaderEpoch, p.Timestamp, isolation, req.ReplicaID)
				if lo.Err != nil {
					rp.ErrorCode = lo.Err.Code
				} else {
					rp.Offset, rp.Timestamp, rp.LeaderEpoch = lo.Offset, lo.Timestamp, lo.LeaderEpoch
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		if !allowed {
			denied = append(denied, rt)
			continue
		}
		resp.Topics = append(resp.Topics, rt)
	}
	resp.Topics = append(resp.Topics, denied...)
	r.Respond(resp)
}

func init() {
	register(api{
		key: kmsg.ListOffsets, min: 1, max: 11,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE on each topic",
		handle:       (*Broker).handleListOffsets,
	})
}
