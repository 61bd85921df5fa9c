package broker

// DeleteRecords (key 21), versions 0-2.
//
// The replica manager moves each partition's log start offset forward (-1
// means the high watermark) and deletes the segments wholly below it. An
// offset past the high watermark is OFFSET_OUT_OF_RANGE; a topic whose
// cleanup.policy does not include delete refuses with POLICY_VIOLATION, as
// in Kafka. The answer carries the new low watermark: the smallest log
// start over the replicas on live brokers, once each follower has moved
// its own (the answer waits up to the request's timeout, then says
// REQUEST_TIMED_OUT, as Kafka's DelayedDeleteRecords). A topic the
// principal may not DELETE gets TOPIC_AUTHORIZATION_FAILED on each of its
// partitions.

import (
	"context"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleDeleteRecords(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		allowed := b.can(r, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic, t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition = p.Partition
			if !allowed {
				rp.LowWatermark, rp.ErrorCode = -1, kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			low, ke, msg := b.replicas.DeleteRecords(replica.TopicPartition{Topic: t.Topic, Partition: p.Partition}, p.Offset)
			rp.LowWatermark = low
			if ke != nil {
				rp.ErrorCode = ke.Code
				if msg != "" {
					b.log.Info(msg)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	// What the followers have not caught up with yet: they move their log
	// starts on their next fetch.
	var waits []*kmsg.DeleteRecordsResponseTopicPartition
	var waitTPs []replica.TopicPartition
	for ti := range resp.Topics {
		rt := &resp.Topics[ti]
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			tp := replica.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			if low, ke := b.replicas.LowWatermark(tp); rp.ErrorCode == 0 && ke == nil && low < rp.LowWatermark {
				waits, waitTPs = append(waits, rp), append(waitTPs, tp)
			}
		}
	}
	if len(waits) == 0 {
		r.Respond(resp)
		return
	}
	// The answer waits for them (Kafka's DelayedDeleteRecords), up to the
	// request's timeout.
	r.GoAsync(func() {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
		for i, rp := range waits {
			low, ke := b.replicas.WaitLowWatermark(wctx, waitTPs[i], rp.LowWatermark)
			rp.LowWatermark = low
			if ke != nil {
				rp.ErrorCode = ke.Code
			}
		}
		r.Respond(resp)
	})
}

func init() {
	register(api{
		key: kmsg.DeleteRecords, min: 0, max: 2,
		listeners:    clientListeners,
		authorizedAs: "DELETE on each topic",
		handle:       (*Broker).handleDeleteRecords,
	})
}
