package broker

// Produce (key 0), versions 3-13 served; advertised from v0 because older
// librdkafka disables compression when v0 is missing (KAFKA-18659), and
// v0-2 are answered with UNSUPPORTED_VERSION as Kafka 4 does.
//
// Each partition's records must be exactly one v2 batch (Kafka's rule for
// v3+). The handler checks the request (acks, topics, internal topics,
// the batch rule, parsing the batch's header once for everything below)
// and hands the rest to the replica manager, which checks
// leadership, appends (validation, idempotent sequence checks and offset
// assignment happen in the partition's log) and answers acks=all once the
// high watermark passes each batch; the handler maps the results to the
// response, with per-record errors from v8 and the current leader of a
// NOT_LEADER_OR_FOLLOWER partition from v10. v13 addresses topics by ID
// only. acks=0 gets no response, and a failure closes the connection so
// that the client notices, as in Kafka. Appends run inline on the
// connection's reader goroutine, in request order (idempotent producers
// pipeline); so does the answer unless an acks=all append has to wait.
//
// Transactional batches: the first one of a transaction on a partition is
// verified with the transaction coordinator (KIP-890 part 1,
// transactions.go) and appended with the verification's guard; the log
// refuses, with INVALID_TXN_STATE, one that no verified transaction covers
// (storage/producerstate.go).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/broker/quota"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// adminClientID is the client id Kafka allows to write internal topics.
const adminClientID = "__admin_client"

func (b *Broker) produceUnsupportedVersion(r *network.Request) {
	req := r.Body.(*kmsg.ProduceRequest)
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
		r.CloseConnection()
		return
	}
	r.Respond(resp)
}

func (b *Broker) handleProduce(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.ProduceRequest)
	if b.authz != nil && hasTransactionalRecords(req) &&
		(req.TransactionID == nil || !b.can(r, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, *req.TransactionID)) {
		b.refuseProduce(r, req, kerr.TransactionalIDAuthorizationFailed)
		return
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	img := b.meta.Image()
	// The entries live on the stack for the common request (one
	// partition): the append keeps nothing of them unless it must wait.
	var entryBuf [1]replica.AppendEntry
	entries := entryBuf[:0]
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		topic := b.produceTopic(img, r.Version(), t)
		denied := false
		if b.authz != nil && (topic != nil || r.Version() < 13) {
			name := t.Topic
			if topic != nil {
				name = topic.Name
			}
			denied = !b.can(r, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, name)
		}
		for _, p := range t.Partitions {
			rp, batch, ok := checkProducePartition(r, req, topic, p, denied)
			if ok {
				tp := replica.TopicPartition{Topic: topic.Name, Partition: p.Partition}
				var guard uint64
				if h := batch.Header; h.IsTransactional() && !h.IsControl() {
					var ke *kerr.Error
					var msg string
					if guard, ke, msg = b.verifyTxnBatch(r.Version(), req.TransactionID, tp, h); ke != nil {
						setProduceError(r, &rp, ke, msg)
						ok = false
					}
				}
				if ok {
					entries = append(entries, replica.AppendEntry{TopicPartition: tp, Batch: batch, LeaderEpoch: -1, VerificationGuard: guard})
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	pending := b.replicas.Append(req.Acks, time.Duration(req.TimeoutMillis)*time.Millisecond, replica.OriginClient, entries)
	if pending != nil {
		// acks=all waiting for the high watermark: answered by whoever
		// completes it.
		pending.Then(&producePending{b: b, r: r, req: req, resp: resp, img: img})
		return
	}
	b.respondProduce(r, req, resp, img, entries)
}

// producePending answers a produce whose append had to wait.
type producePending struct {
	b    *Broker
	r    *network.Request
	req  *kmsg.ProduceRequest
	resp *kmsg.ProduceResponse
	img  *metadata.Image
}

func (p *producePending) AppendCompleted(entries []replica.AppendEntry) {
	p.b.respondProduce(p.r, p.req, p.resp, p.img, entries)
}

// produceTopic resolves a request topic by name (v3-12) or ID (v13).
func (b *Broker) produceTopic(img *metadata.Image, version int16, t kmsg.ProduceRequestTopic) *metadata.Topic {
	if version >= 13 {
		return img.TopicByID(protocol.UUID(t.TopicID))
	}
	return img.Topic(t.Topic)
}

// checkProducePartition applies the request-level rules Kafka's handler
// applies before the replica manager sees a partition (KafkaApis and
// ReplicaManager.appendRecords), in its order: a known topic ID (v13),
// WRITE on the topic (denied: TOPIC_AUTHORIZATION_FAILED, whether or not
// it exists), a known topic and partition, one v2 batch (whose header is
// parsed here, once, for the log to use), valid acks, no client writes to
// internal topics. ok means the partition goes to the append, with rp a
// placeholder (error 0) that the append's result fills.
func checkProducePartition(r *network.Request, req *kmsg.ProduceRequest, topic *metadata.Topic, p kmsg.ProduceRequestTopicPartition, denied bool) (rp kmsg.ProduceResponseTopicPartition, batch protocol.Batch, ok bool) {
	rp = kmsg.NewProduceResponseTopicPartition()
	rp.Partition = p.Partition
	rp.BaseOffset = -1
	rp.LogAppendTime = -1
	rp.LogStartOffset = -1
	fail := func(err *kerr.Error, msg string) (kmsg.ProduceResponseTopicPartition, protocol.Batch, bool) {
		setProduceError(r, &rp, err, msg)
		return rp, protocol.Batch{}, false
	}
	v := r.Version()
	switch {
	case topic == nil && v >= 13:
		return fail(kerr.UnknownTopicID, "")
	case denied:
		return fail(kerr.TopicAuthorizationFailed, "")
	case topic == nil, p.Partition < 0 || int(p.Partition) >= topic.Partitions.Len():
		return fail(kerr.UnknownTopicOrPartition, "")
	}
	batch, err := protocol.ParseProduceBatch(p.Records, v)
	if err != nil {
		var ve *protocol.ValidationError
		if !errors.As(err, &ve) {
			return fail(kerr.CorruptMessage, err.Error())
		}
		return fail(ve.Code, ve.Message)
	}
	switch acks := req.Acks; {
	case acks != -1 && acks != 0 && acks != 1:
		return fail(kerr.InvalidRequiredAcks, "")
	case isInternalTopic(topic.Name) && r.Header.ClientID != adminClientID:
		return fail(kerr.InvalidTopicException, fmt.Sprintf("Cannot append to internal topic %s", topic.Name))
	}
	return rp, batch, true
}

// hasTransactionalRecords reports whether any batch of the request is
// transactional (Kafka refuses such a request as a whole when the
// principal may not WRITE its transactional id).
func hasTransactionalRecords(req *kmsg.ProduceRequest) bool {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			for rec := p.Records; ; {
				h, err := protocol.ParseBatchHeader(rec)
				if err != nil || h.Magic != 2 {
					break
				}
				if h.IsTransactional() {
					return true
				}
				n := h.TotalSize()
				if h.Length <= 0 || n > int64(len(rec)) {
					break
				}
				rec = rec[n:]
			}
		}
	}
	return false
}

// refuseProduce answers every partition of the request with err
// (ProduceRequest.getErrorResponse); acks=0 gets the connection closed.
func (b *Broker) refuseProduce(r *network.Request, req *kmsg.ProduceRequest, err *kerr.Error) {
	if req.Acks == 0 {
		r.CloseConnection()
		return
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, err.Code
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}

// setProduceError sets a partition's error, with the message from v8.
func setProduceError(r *network.Request, rp *kmsg.ProduceResponseTopicPartition, err *kerr.Error, msg string) {
	rp.ErrorCode = err.Code
	if msg != "" && r.Version() >= 8 {
		rp.ErrorMessage = &msg
	}
}

// respondProduce answers the request: the placeholders take the append
// results in order. acks=0 gets no response, and a failure closes the
// connection so that the client notices, as in Kafka.
func (b *Broker) respondProduce(r *network.Request, req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse, img *metadata.Image, entries []replica.AppendEntry) {
	v := r.Version()
	failed := false
	var leaders map[int32]bool
	next := 0
	for i := range resp.Topics {
		parts := resp.Topics[i].Partitions
		for j := range parts {
			rp := &parts[j]
			if rp.ErrorCode != 0 {
				failed = true
				continue
			}
			res := &entries[next].Result
			next++
			if res.Err == nil {
				rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
				continue
			}
			failed = true
			setProduceError(r, rp, res.Err, res.ErrorMessage)
			if v >= 8 {
				for _, re := range res.RecordErrors {
					e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
					e.RelativeOffset = re.BatchIndex
					if re.Message != "" {
						msg := re.Message
						e.ErrorMessage = &msg
					}
					rp.ErrorRecords = append(rp.ErrorRecords, e)
				}
			}
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = res.CurrentLeader.ID, res.CurrentLeader.Epoch
			if res.CurrentLeader.ID >= 0 {
				if leaders == nil {
					leaders = map[int32]bool{}
				}
				leaders[res.CurrentLeader.ID] = true
			}
		}
	}
	// Every produce counts, refused or not (Kafka records the request's
	// size before it answers).
	r.RecordSize(quota.Produce)
	if req.Acks == 0 {
		if failed {
			r.CloseConnection()
		} else {
			r.NoResponse()
		}
		return
	}
	if v >= 10 && len(leaders) > 0 {
		resp.Brokers = b.nodeEndpoints(img, r.Listener(), leaders)
	}
	r.Respond(resp)
}

// nodeEndpoints lists the endpoints of the given brokers on a listener,
// for the NodeEndpoints fields of Produce v10+ and Fetch v16+.
func (b *Broker) nodeEndpoints(img *metadata.Image, listenerName string, ids map[int32]bool) []kmsg.ProduceResponseBroker {
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

func init() {
	register(api{
		key: kmsg.Produce, min: 3, max: 13,
		advertisedMin: 0, unsupported: (*Broker).produceUnsupportedVersion,
		listeners:    clientListeners,
		authorizedAs: "WRITE on each topic, WRITE on the transactional id",
		handle:       (*Broker).handleProduce,
	})
}
