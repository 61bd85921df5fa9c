package broker

// DeleteRecords (key 21), versions 0-2.
//
// Moves each partition's log start offset forward (-1 means the high
// watermark) and deletes the segments wholly below it. An offset past the
// high watermark is OFFSET_OUT_OF_RANGE; a topic whose cleanup.policy does
// not include delete refuses with POLICY_VIOLATION, as in Kafka. The answer
// carries the new low watermark.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleDeleteRecords(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	img := b.ctrl.Image()
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.LowWatermark = -1
			rp.ErrorCode = b.deleteRecords(img.Topics[t.Topic] != nil, t.Topic, p, &rp)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.respond(resp)
}

func (b *Broker) deleteRecords(topicExists bool, topic string, p kmsg.DeleteRecordsRequestTopicPartition, rp *kmsg.DeleteRecordsResponseTopicPartition) int16 {
	part := b.replicas.get(topicPartition(topic, p.Partition))
	if part == nil {
		if topicExists {
			return kerr.NotLeaderForPartition.Code
		}
		return kerr.UnknownTopicOrPartition.Code
	}
	if leader, _ := part.leadership(); leader != b.opts.NodeID {
		return kerr.NotLeaderForPartition.Code
	}
	if !part.logConfig().Delete {
		b.log.Info(fmt.Sprintf("Records of partition %s can not be deleted due to the configured policy", part.tp))
		return kerr.PolicyViolation.Code
	}
	offset := p.Offset
	if offset == -1 {
		offset = part.log.HighWatermark()
	}
	low, err := part.log.DeleteRecordsBefore(offset)
	rp.LowWatermark = low
	if err != nil {
		if code := codeOf(err); code != kerr.UnknownServerError.Code {
			return code
		}
		return kerr.KafkaStorageError.Code
	}
	part.wake()
	return 0
}
