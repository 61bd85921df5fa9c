package broker

// DeleteRecords (key 21), versions 0-2.
//
// The replica manager moves each partition's log start offset forward (-1
// means the high watermark) and deletes the segments wholly below it. An
// offset past the high watermark is OFFSET_OUT_OF_RANGE; a topic whose
// cleanup.policy does not include delete refuses with POLICY_VIOLATION, as
// in Kafka. The answer carries the new low watermark.

import (
	"context"

	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleDeleteRecords(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition = p.Partition
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
	r.respond(resp)
}
