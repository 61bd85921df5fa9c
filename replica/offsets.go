package replica

import (
	"context"
	"fmt"
	"time"

	"github.com/gregorbroker/gregor/storage"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Special ListOffsets timestamps.
const (
	LatestTimestamp                = -1
	EarliestTimestamp              = -2
	MaxTimestamp                   = -3
	EarliestLocalTimestamp         = -4
	LatestTieredTimestamp          = -5
	EarliestPendingUploadTimestamp = -6
)

// Replica ids a request may carry.
const (
	ConsumerReplicaID  = -1
	DebuggingReplicaID = -2
)

// ListedOffset is one partition's ListOffsets answer; Offset, Timestamp and
// LeaderEpoch are -1 when nothing matches.
type ListedOffset struct {
	Err         *kerr.Error
	Offset      int64
	Timestamp   int64
	LeaderEpoch int32
}

// ListOffset answers ListOffsets for one partition, as Kafka's
// Partition.fetchOffsetForTimestamp and ReplicaManager.fetchOffset do.
// Only the leader answers, except to the debugging replica id (-2). A
// consumer (replica id -1) sees only what its isolation lets it fetch
// (below the high watermark, or the last stable offset): a found record
// at or beyond that is answered -1/-1, for the max-timestamp record as for
// a timestamp search (the max is not taken over the visible records
// alone). Other replica ids see up to the log end.
//
// Special timestamps: -1 latest (that visible end, with the current leader
// epoch), -2 earliest, -4 earliest local (the first offset on local disk),
// -3 the record with the largest timestamp (KIP-734, the exact
// record since KAFKA-16310), -5 latest tiered and -6 earliest pending
// upload (-1 without tiered storage, as in Kafka). Any other negative
// timestamp is INVALID_REQUEST.
func (m *Manager) ListOffset(tp TopicPartition, currentEpoch int32, timestamp int64, isolation Isolation, replicaID int32) ListedOffset {
	out := ListedOffset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}
	p, ke, _ := m.leaderPartition(tp, currentEpoch, replicaID != DebuggingReplicaID)
	if ke != nil {
		out.Err = ke
		return out
	}
	l := p.log
	_, epoch := p.leadership()
	visible := visibleEnd(l, replicaID, isolation)
	var off, ts int64
	var ep int32
	switch timestamp {
	case LatestTimestamp:
		out.Offset, out.LeaderEpoch = visible, epoch
		return out
	case EarliestTimestamp:
		out.Offset = l.LogStartOffset()
		if e, ok := l.EpochForOffset(out.Offset); ok {
			out.LeaderEpoch = e
		}
		return out
	case EarliestLocalTimestamp:
		out.Offset = l.LocalLogStartOffset()
		if e, ok := l.EpochForOffset(out.Offset); ok {
			out.LeaderEpoch = e
		}
		return out
	case LatestTieredTimestamp:
		if !m.tieredLog(l) {
			return out
		}
		out.Offset = l.HighestRemoteOffset()
		if e, ok := l.EpochForOffset(out.Offset); ok && out.Offset >= 0 {
			out.LeaderEpoch = e
		}
		return out
	case EarliestPendingUploadTimestamp:
		// Kafka's fetchEarliestPendingUploadOffset.
		if !m.tieredLog(l) {
			return out
		}
		start, copied := l.LogStartOffset(), l.HighestRemoteOffset()
		switch {
		case copied >= 0:
			out.Offset = max(copied+1, start)
		case l.LocalLogStartOffset() == start:
			out.Offset = start // nothing copied yet
		default:
			return out // this leader does not know the remote segments yet
		}
		out.LeaderEpoch = -1
		if e, ok := l.EpochForOffset(out.Offset); ok {
			out.LeaderEpoch = e
		}
		return out
	case MaxTimestamp:
		off, ts, ep = l.MaxTimestamp()
	default:
		if timestamp < 0 {
			out.Err = kerr.InvalidRequest
			return out
		}
		var found bool
		var err error
		if m.tieredLog(l) && l.LocalLogStartOffset() > l.LogStartOffset() {
			off, ts, ep, found, err = m.tiered.FindOffsetByTimestamp(context.Background(), l, p.topicID, timestamp)
			if err != nil {
				out.Err = storageErr(err)
				return out
			}
		}
		if !found {
			off, ts, ep, found, err = l.OffsetForTimestamp(timestamp)
		}
		if err != nil {
			out.Err = storageErr(err)
			return out
		}
		if !found {
			return out
		}
	}
	if off < 0 || off >= visible {
		return out
	}
	out.Offset, out.Timestamp, out.LeaderEpoch = off, ts, ep
	return out
}

// EpochEndOffset is one partition's OffsetForLeaderEpoch answer.
type EpochEndOffset struct {
	Err         *kerr.Error
	LeaderEpoch int32
	EndOffset   int64
}

// OffsetForLeaderEpoch answers OffsetForLeaderEpoch from the leader epoch
// cache: the largest epoch <= leaderEpoch and the offset where it ended
// (the log end for the current one). Only the leader answers, as in Kafka
// (fetchOnlyFromLeader is always set there); currentEpoch -1 skips the
// epoch check.
func (m *Manager) OffsetForLeaderEpoch(tp TopicPartition, currentEpoch, leaderEpoch int32) EpochEndOffset {
	p, ke, _ := m.leaderPartition(tp, currentEpoch, true)
	if ke != nil {
		return EpochEndOffset{Err: ke, LeaderEpoch: -1, EndOffset: -1}
	}
	e, off := p.log.EndOffsetForEpoch(leaderEpoch)
	return EpochEndOffset{LeaderEpoch: e, EndOffset: off}
}

// DeleteRecords moves the partition's log start offset to offset (-1: the
// high watermark) and deletes the segments wholly below it, answering the
// leader's new log start. Only the leader deletes; a topic whose
// cleanup.policy lacks delete refuses with POLICY_VIOLATION, an offset past
// the high watermark is OFFSET_OUT_OF_RANGE (Kafka's deleteRecordsOnLeader).
// Followers move theirs when their next fetch tells them;
// WaitLowWatermark waits for that.
func (m *Manager) DeleteRecords(tp TopicPartition, offset int64) (lowWatermark int64, ke *kerr.Error, msg string) {
	p, ke, _ := m.leaderPartition(tp, -1, true)
	if ke != nil {
		return -1, ke, ""
	}
	p.mu.RLock()
	deletable := p.config.Delete
	p.mu.RUnlock()
	if !deletable {
		return -1, kerr.PolicyViolation, fmt.Sprintf("Records of partition %s can not be deleted due to the configured policy", tp)
	}
	if offset == -1 {
		offset = p.log.HighWatermark()
	}
	before := p.log.LogStartOffset()
	low, err := p.log.DeleteRecordsBefore(offset)
	if err != nil {
		return low, storageErr(err), ""
	}
	if low > before {
		// Durable before the answer (storage.Manager.CheckpointLogStartOffsets).
		if err := m.logs.CheckpointLogStartOffsets(); err != nil {
			m.log.Error("writing the log start offsets after DeleteRecords", "partition", tp.String(), "err", err)
			return low, kerr.KafkaStorageError, ""
		}
	}
	// A fetch waiting below the new log start answers OFFSET_OUT_OF_RANGE.
	m.wake(tp)
	return low, nil, ""
}

// LowWatermark is the smallest log start offset over the partition's
// replicas on live brokers (Kafka's lowWatermarkIfLeader): the leader's,
// and each follower's as its last fetch reported it.
func (m *Manager) LowWatermark(tp TopicPartition) (int64, *kerr.Error) {
	p, ke, _ := m.leaderPartition(tp, -1, true)
	if ke != nil {
		return -1, ke
	}
	img := m.image.Load()
	low := p.log.LogStartOffset()
	p.mu.RLock()
	defer p.mu.RUnlock()
	for id, r := range p.remotes {
		if b := img.Brokers[id]; b == nil || b.Fenced {
			continue
		}
		low = min(low, r.logStartOffset.Load())
	}
	return low, nil
}

// WaitLowWatermark waits until every live replica's log start has reached
// offset (Kafka's DelayedDeleteRecords) or ctx ends, and returns the low
// watermark then, with REQUEST_TIMED_OUT when it has not reached offset.
func (m *Manager) WaitLowWatermark(ctx context.Context, tp TopicPartition, offset int64) (int64, *kerr.Error) {
	w := &lowWatermarkWait{m: m, tp: tp, offset: offset, done: make(chan struct{})}
	m.lowWaits.TryCompleteElseWatch(w, time.Until(deadlineOr(ctx, time.Minute)), tp)
	select {
	case <-w.done:
	case <-ctx.Done():
	}
	low, ke := m.LowWatermark(tp)
	if ke == nil && low < offset {
		ke = kerr.RequestTimedOut
	}
	return low, ke
}

// lowWatermarkWait is a DeleteRecords waiting for the followers' log
// starts, checked again by each follower fetch that moves one.
type lowWatermarkWait struct {
	m      *Manager
	tp     TopicPartition
	offset int64
	done   chan struct{}
}

func (w *lowWatermarkWait) TryComplete() bool {
	if low, ke := w.m.LowWatermark(w.tp); ke == nil && low < w.offset {
		return false
	}
	close(w.done)
	return true
}

func (w *lowWatermarkWait) Expire() { close(w.done) }

func deadlineOr(ctx context.Context, d time.Duration) time.Time {
	if t, ok := ctx.Deadline(); ok {
		return t
	}
	return time.Now().Add(d)
}

// ProducerInfo describes one producer a partition tracks.
type ProducerInfo = storage.ProducerInfo

// ActiveProducers lists the producers a partition's log tracks
// (DescribeProducers). As in Kafka it is answered by any replica with the
// log, the leader or not.
func (m *Manager) ActiveProducers(tp TopicPartition) ([]ProducerInfo, *kerr.Error) {
	p, ke, _ := m.leaderPartition(tp, -1, false)
	if ke != nil {
		return nil, ke
	}
	return p.log.ActiveProducers(), nil
}

// LogDirDescription is one log dir for DescribeLogDirs.
type LogDirDescription = storage.DirDescription

// DescribeLogDirs reports every log dir with its usage and partitions.
func (m *Manager) DescribeLogDirs() []LogDirDescription { return m.logs.DescribeDirs() }

// StartTxnVerification begins verifying a producer's first transactional
// batch on tp (KIP-890 part 1, storage.Log.StartTxnVerification): the
// guard its append must carry once the transaction coordinator confirms
// the partition is in the transaction, 0 when the producer has a
// transaction open on tp already.
func (m *Manager) StartTxnVerification(tp TopicPartition, pid int64, epoch int16) (uint64, *kerr.Error) {
	p, ke, _ := m.leaderPartition(tp, -1, false)
	if ke != nil {
		return 0, ke
	}
	return p.log.StartTxnVerification(pid, epoch), nil
}

// TxnVerificationHolds is storage.Log.TxnVerificationHolds for tp; false
// when this node no longer leads it.
func (m *Manager) TxnVerificationHolds(tp TopicPartition, pid int64, guard uint64) bool {
	p, ke, _ := m.leaderPartition(tp, -1, false)
	return ke == nil && p.log.TxnVerificationHolds(pid, guard)
}
