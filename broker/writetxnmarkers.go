package broker

// WriteTxnMarkers (key 27), versions 0-2.
//
// A transaction coordinator (or kafka-transactions abort, through Admin's
// abortTransaction) asks the leader of each partition to end a producer's
// transaction there: an end-transaction control batch (COMMIT or ABORT,
// with the coordinator epoch) is appended with acks=all, which moves the
// partition's last stable offset. Markers on __consumer_offsets partitions
// go through the group coordinator so that the transaction's offset
// commits are applied or dropped with them. Per partition:
// UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist,
// NOT_LEADER_OR_FOLLOWER where this node does not lead, the append's error
// otherwise. v0 (removed in Kafka 4) has the same semantics and is served.
//
// markerWriter is the same path for this node's own coordinator: markers
// for partitions led here are appended in process; those for partitions
// led by other brokers go to their leaders as WriteTxnMarkers v2, one
// request per leader, sent in parallel. An offline partition, or a leader
// that does not answer, gets NOT_LEADER_OR_FOLLOWER, and the coordinator
// tries again.
//
// Authorization: ALTER or CLUSTER_ACTION on the cluster; without either
// every partition gets CLUSTER_AUTHORIZATION_FAILED.

import (
	"context"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/gregorbroker/gregor/coordinator/txn"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleWriteTxnMarkers(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	if who := identityOf(r); b.authz != nil && !b.allowedQuiet(who, kmsg.ACLOperationAlter, kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName) &&
		!b.clusterAllowed(who, kmsg.ACLOperationClusterAction) {
		r.Respond(errorResponse(req, clusterDenied(who, kmsg.ACLOperationClusterAction)))
		return
	}
	r.GoAsync(func() {
		img := b.meta.Image()
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			marker := txn.Marker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: m.CoordinatorEpoch,
				Commit: m.Committed, TransactionVersion: int16(m.TransactionVersion)}
			var codes []int16
			var exists []bool
			for _, t := range m.Topics {
				topic := img.Topic(t.Topic)
				for _, p := range t.Partitions {
					ok := topic != nil && p >= 0 && int(p) < topic.Partitions.Len()
					exists = append(exists, ok)
					if ok {
						marker.Partitions = append(marker.Partitions, txn.TopicPartition{Topic: t.Topic, Partition: p})
					}
				}
			}
			written := b.writeMarkers(ctx, marker)
			for _, ok := range exists {
				if !ok {
					codes = append(codes, kerr.UnknownTopicOrPartition.Code)
					continue
				}
				codes = append(codes, written[0])
				written = written[1:]
			}
			i := 0
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, codes[i]
					i++
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		r.Respond(resp)
	})
}

// markerTimeout bounds one round of marker appends (Kafka's coordinator
// uses request.timeout.ms for its WriteTxnMarkers).
const markerTimeout = 30 * time.Second

// writeMarkers appends m's marker to each of its partitions, which exist,
// and returns a code per partition.
func (b *Broker) writeMarkers(ctx context.Context, m txn.Marker) []int16 {
	codes := make([]int16, len(m.Partitions))
	ctx, cancel := context.WithTimeout(ctx, markerTimeout)
	defer cancel()
	nowMs := b.now().UnixMilli()
	var entries []replica.AppendEntry
	var at []int
	for i, tp := range m.Partitions {
		if tp.Topic == group.OffsetsTopic {
			codes[i] = b.groupMarker(ctx, tp.Partition, m)
			continue
		}
		entries = append(entries, replica.AppendEntry{
			TopicPartition: replica.TopicPartition{Topic: tp.Topic, Partition: tp.Partition},
			Records:        protocol.EndTxnMarkerBatch(m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch, nowMs),
			LeaderEpoch:    -1,
		})
		at = append(at, i)
	}
	if len(entries) == 0 {
		return codes
	}
	if err := b.replicas.AppendWait(ctx, -1, replica.OriginCoordinator, entries); err != nil {
		return fillCodes(codes, kerr.RequestTimedOut.Code)
	}
	for j, e := range entries {
		if e.Result.Err != nil {
			codes[at[j]] = e.Result.Err.Code
		}
	}
	return codes
}

// groupMarker ends the transaction on a __consumer_offsets partition
// through the group coordinator (txnoffsetcommit.go), which applies the
// transaction's offset commits with the marker.
func (b *Broker) groupMarker(ctx context.Context, partition int32, m txn.Marker) int16 {
	if b.groups == nil {
		return kerr.NotLeaderForPartition.Code
	}
	return codeOf(b.completeGroupTransaction(ctx, partition, m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Commit))
}

// markerWriter is the transaction coordinator's MarkerWriter: partitions
// that no longer exist are done (Kafka's coordinator drops them from the
// transaction), the others get their markers.
type markerWriter struct{ b *Broker }

func (w markerWriter) WriteMarkers(ctx context.Context, m txn.Marker) []int16 {
	img := w.b.meta.Image()
	codes := make([]int16, len(m.Partitions))
	local := m
	local.Partitions = nil
	var at []int
	remote := map[int32][]int{} // leader -> indexes into m.Partitions
	for i, tp := range m.Partitions {
		t := img.Topic(tp.Topic)
		if t == nil || int(tp.Partition) >= t.Partitions.Len() {
			w.b.log.Info("transaction marker for a partition that no longer exists: dropped", "partition", tp, "producer_id", m.ProducerID)
			continue
		}
		switch leader := t.Partitions.At(int(tp.Partition)).Leader; {
		case leader == w.b.opts.NodeID:
			local.Partitions = append(local.Partitions, tp)
			at = append(at, i)
		case leader < 0:
			// Offline: the coordinator tries again.
			codes[i] = kerr.NotLeaderForPartition.Code
		default:
			remote[leader] = append(remote[leader], i)
		}
	}
	var wg sync.WaitGroup
	for leader, idx := range remote {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, code := range w.b.sendMarkers(ctx, leader, m, idx) {
				codes[idx[j]] = code
			}
		}()
	}
	for j, code := range w.b.writeMarkers(ctx, local) {
		codes[at[j]] = code
	}
	wg.Wait()
	return codes
}

// sendMarkers asks broker leader, with WriteTxnMarkers, to write m's
// marker to the partitions of m at idx, and returns their codes.
func (b *Broker) sendMarkers(ctx context.Context, leader int32, m txn.Marker, idx []int) []int16 {
	ctx, cancel := context.WithTimeout(ctx, markerTimeout)
	defer cancel()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(2)
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	rm.TransactionVersion = int8(m.TransactionVersion)
	byTopic := map[string]int{}
	for _, i := range idx {
		tp := m.Partitions[i]
		ti, ok := byTopic[tp.Topic]
		if !ok {
			ti = len(rm.Topics)
			byTopic[tp.Topic] = ti
			rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			rt.Topic = tp.Topic
			rm.Topics = append(rm.Topics, rt)
		}
		rm.Topics[ti].Partitions = append(rm.Topics[ti].Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, rm)
	codes := make([]int16, len(idx))
	answer, err := b.peers.send(ctx, leader, laneMarkers, req)
	if err != nil {
		b.log.Debug("sending transaction markers", "broker", leader, "err", err)
		return fillCodes(codes, kerr.NotLeaderForPartition.Code)
	}
	got := map[txn.TopicPartition]int16{}
	for _, am := range answer.(*kmsg.WriteTxnMarkersResponse).Markers {
		for _, t := range am.Topics {
			for _, p := range t.Partitions {
				got[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	for j, i := range idx {
		code, ok := got[m.Partitions[i]]
		if !ok {
			code = kerr.UnknownServerError.Code
		}
		codes[j] = code
	}
	return codes
}

func init() {
	register(api{
		key: kmsg.WriteTxnMarkers, min: 0, max: 2,
		listeners:    clientListeners,
		authorizedAs: "CLUSTER_ACTION",
		errorAnswer: errorAnswerOf(func(r *kmsg.WriteTxnMarkersRequest, out *kmsg.WriteTxnMarkersResponse, e apiErr) {
			for _, m := range r.Markers {
				rm := kmsg.NewWriteTxnMarkersResponseMarker()
				rm.ProducerID = m.ProducerID
				for _, t := range m.Topics {
					rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
					rt.Topic = t.Topic
					for _, p := range t.Partitions {
						rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
						rp.Partition, rp.ErrorCode = p, e.code
						rt.Partitions = append(rt.Partitions, rp)
					}
					rm.Topics = append(rm.Topics, rt)
				}
				out.Markers = append(out.Markers, rm)
			}
		}),
		quota:  quotaTreatment{requestExempt: true},
		handle: (*Broker).handleWriteTxnMarkers,
	})
}
