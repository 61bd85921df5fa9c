package broker

// Produce (key 0), versions 3-13 served; advertised from v0 because older
// librdkafka disables compression when v0 is missing (KAFKA-18659), and
// v0-2 are answered with UNSUPPORTED_VERSION as Kafka 4 does.
//
// Each partition's records must be exactly one v2 batch (Kafka's rule for
// v3+). Validation, idempotent sequence checks and offset assignment happen
// in the partition's log; the handler maps its errors to Kafka's codes,
// with per-record errors from v8. v13 addresses topics by ID only.
// acks=0 gets no response, and a failure closes the connection so that the
// client notices, as in Kafka. Appends run inline on the connection's
// reader goroutine, in request order (idempotent producers pipeline).
//
// Deliberate deviation: transactional produce is not served until the
// transaction coordinator exists.

import (
	"context"
	"errors"
	"fmt"

	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// adminClientID is the client id Kafka allows to write internal topics.
const adminClientID = "__admin_client"

func (b *Broker) produceUnsupportedVersion(r *request) {
	req := r.kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = kerr.UnsupportedVersion.Code
			rp.BaseOffset = -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.Acks == 0 {
		r.closeConnection()
		return
	}
	r.respond(resp)
}

func (b *Broker) handleProduce(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	img := b.ctrl.Image()
	failed := false
	leaders := map[int32]bool{}

	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		topic := b.produceTopic(img, r.version(), t)
		for _, p := range t.Partitions {
			rp := b.producePartition(img, r, req, topic, t.Topic, p)
			if rp.ErrorCode != 0 {
				failed = true
				if rp.CurrentLeader.LeaderID >= 0 {
					leaders[rp.CurrentLeader.LeaderID] = true
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}

	if req.Acks == 0 {
		if failed {
			r.closeConnection()
		} else {
			r.noResponse()
		}
		return
	}
	if r.version() >= 10 {
		resp.Brokers = b.nodeEndpoints(img, r.conn.listener.Name, leaders)
	}
	r.respond(resp)
}

// produceTopic resolves a request topic by name (v3-12) or ID (v13).
func (b *Broker) produceTopic(img *controller.Image, version int16, t kmsg.ProduceRequestTopic) *controller.Topic {
	if version >= 13 {
		return img.TopicsByID[controller.UUID(t.TopicID)]
	}
	return img.Topics[t.Topic]
}

func (b *Broker) producePartition(img *controller.Image, r *request, req *kmsg.ProduceRequest, topic *controller.Topic, name string, p kmsg.ProduceRequestTopicPartition) kmsg.ProduceResponseTopicPartition {
	rp := kmsg.NewProduceResponseTopicPartition()
	rp.Partition = p.Partition
	rp.BaseOffset = -1
	rp.LogAppendTime = -1
	rp.LogStartOffset = -1
	fail := func(err *kerr.Error, msg string) kmsg.ProduceResponseTopicPartition {
		rp.ErrorCode = err.Code
		if msg != "" && r.version() >= 8 {
			rp.ErrorMessage = &msg
		}
		return rp
	}

	if req.Acks != -1 && req.Acks != 0 && req.Acks != 1 {
		return fail(kerr.InvalidRequiredAcks, "")
	}
	if topic == nil {
		if r.version() >= 13 {
			return fail(kerr.UnknownTopicID, "")
		}
		return fail(kerr.UnknownTopicOrPartition, "")
	}
	if isInternalTopic(topic.Name) && r.hdr.ClientID != adminClientID {
		return fail(kerr.InvalidTopicException, fmt.Sprintf("Cannot append to internal topic %s", topic.Name))
	}
	if p.Partition < 0 || int(p.Partition) >= len(topic.Partitions) {
		return fail(kerr.UnknownTopicOrPartition, "")
	}
	tp := storage.TopicPartition{Topic: topic.Name, Partition: p.Partition}
	part := b.replicas.get(tp)
	leader, epoch := int32(-1), int32(-1)
	if part != nil {
		leader, epoch = part.leadership()
	}
	if part == nil || leader != b.opts.NodeID {
		meta := topic.Partitions[p.Partition]
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = meta.Leader, meta.LeaderEpoch
		return fail(kerr.NotLeaderForPartition, "")
	}
	if err := checkSingleBatch(p.Records, r.version()); err != nil {
		if err == errZstdNeedsV7 {
			return fail(kerr.UnsupportedCompressionType, "")
		}
		return fail(kerr.InvalidRecord, err.Error())
	}
	if req.Acks == -1 {
		cfg := part.logConfig()
		if part.isrSize() < int(cfg.MinInsyncReplicas) {
			return fail(kerr.NotEnoughReplicas, fmt.Sprintf("The size of the current ISR %d is insufficient to satisfy the min.isr requirement of %d for partition %s-%d", part.isrSize(), cfg.MinInsyncReplicas, tp.Topic, tp.Partition))
		}
	}

	res, recErrs, err := part.log.Append(p.Records, epoch, storage.AppendClient)
	if err != nil {
		var ke *kerr.Error
		if !errors.As(err, &ke) {
			b.log.Error("append failed", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			return fail(kerr.KafkaStorageError, "")
		}
		if r.version() >= 8 {
			for _, re := range recErrs {
				e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
				e.RelativeOffset = re.BatchIndex
				msg := re.Message
				if msg != "" {
					e.ErrorMessage = &msg
				}
				rp.ErrorRecords = append(rp.ErrorRecords, e)
			}
		}
		return fail(ke, errMessage(err, ke))
	}
	part.advanceHighWatermark()
	rp.BaseOffset = res.FirstOffset
	rp.LogAppendTime = res.LogAppendTime
	rp.LogStartOffset = res.LogStartOffset
	return rp
}

// errMessage is the human message for a wrapped Kafka error: the wrapping
// text, unless it is just the code's own description.
func errMessage(err error, ke *kerr.Error) string {
	if err == error(ke) {
		return ""
	}
	return err.Error()
}

// errZstdNeedsV7 is Kafka's rule that zstd batches need Produce v7+.
var errZstdNeedsV7 = errors.New("zstd compression needs produce v7 or later")

// checkSingleBatch applies Kafka's ProduceRequest rule for v3+: exactly one
// record batch, with magic 2.
func checkSingleBatch(records []byte, version int16) error {
	if len(records) == 0 {
		return fmt.Errorf("Produce requests with version %d must have at least one record batch per partition", version)
	}
	batch, rest, h, err := protocol.NextBatch(records)
	if err == nil && h.Codec() == protocol.CodecZstd && version < 7 {
		return errZstdNeedsV7
	}
	if err != nil {
		if batch != nil {
			return fmt.Errorf("Produce requests with version %d are only allowed to contain record batches with magic version 2", version)
		}
		return fmt.Errorf("invalid record batch: %v", err)
	}
	if len(rest) != 0 {
		return fmt.Errorf("Produce requests with version %d are only allowed to contain exactly one record batch per partition", version)
	}
	return nil
}

// nodeEndpoints lists the endpoints of the given brokers on a listener,
// for the NodeEndpoints fields of Produce v10+ and Fetch v16+.
func (b *Broker) nodeEndpoints(img *controller.Image, listenerName string, ids map[int32]bool) []kmsg.ProduceResponseBroker {
	var out []kmsg.ProduceResponseBroker
	for id := range ids {
		br := img.Brokers[id]
		if br == nil {
			continue
		}
		ep, ok := endpointFor(br, listenerName)
		if !ok {
			continue
		}
		nb := kmsg.NewProduceResponseBroker()
		nb.NodeID, nb.Host, nb.Port, nb.Rack = id, ep.Host, ep.Port, br.Rack
		out = append(out, nb)
	}
	return out
}
