package replica

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Origin says who appends: a client (Produce) or a coordinator writing its
// own records. Replication will add the follower's origin.
type Origin = storage.AppendOrigin

const (
	OriginClient      = storage.AppendClient
	OriginCoordinator = storage.AppendCoordinator
)

// SkipTxnVerification is the VerificationGuard of an append that needs no
// verification (transaction.partition.verification.enable=false).
const SkipTxnVerification = storage.SkipTxnVerification

// AppendEntry is one partition's records in an append, and what became of
// them.
type AppendEntry struct {
	TopicPartition TopicPartition
	// Batch is the partition's one record batch with its header already
	// parsed (a Produce v3+ handler's protocol.ParseProduceBatch): the
	// header travels to the segment without being parsed again. When
	// Batch.Bytes is nil, Records are split into batches and parsed by the
	// log instead. Either way the append stamps offsets and epochs into
	// the bytes in place.
	Batch   protocol.Batch
	Records []byte
	// LeaderEpoch binds the append to a leader epoch (a coordinator writes
	// at the epoch it loaded its shard at): unless this node leads the
	// partition at that epoch, before the append and until the high
	// watermark passes it, the answer is NOT_LEADER_OR_FOLLOWER. -1 (a
	// client's produce) accepts any epoch of this node's leadership.
	LeaderEpoch int32
	// VerificationGuard is what StartTxnVerification returned for the
	// batch's producer, once the transaction coordinator confirmed the
	// partition is in its transaction (0: no verification).
	VerificationGuard uint64

	Result AppendResult

	// While an acks=all append waits: the partition appended to and the
	// offset the high watermark must reach (nil once resolved).
	waitOn  *Partition
	waitFor int64
}

// AppendResult is one partition's outcome.
type AppendResult struct {
	Err          *kerr.Error // nil on success
	ErrorMessage string      // the message beyond Err's own, if any
	RecordErrors []protocol.RecordError
	// BaseOffset, LastOffset, LogAppendTime and LogStartOffset are -1 on
	// error.
	BaseOffset     int64
	LastOffset     int64
	LogAppendTime  int64
	LogStartOffset int64
	// CurrentLeader names the leader with NOT_LEADER_OR_FOLLOWER.
	CurrentLeader LeaderHint
}

// AppendCompletion receives the results of a PendingAppend, exactly once.
type AppendCompletion interface {
	AppendCompleted(entries []AppendEntry)
}

// Append appends every entry's records as the partition's leader, in
// order, on the caller's goroutine, and fills each entry's Result. acks is
// the request's: 0 and 1 are answered once the records are in the
// leader's log, -1 (all) once the high watermark has passed each
// partition's batches (an ISR below the effective min.insync.replicas
// refuses the append with NOT_ENOUGH_REPLICAS first).
//
// Append returns nil when every result is final: always for acks 0 and 1,
// and for acks=all when the batches are already committed (this node the
// only in-sync replica) or failed. That path, produce's hot path, keeps
// nothing of entries and starts no timer and no goroutine. Otherwise it
// returns the pending append, which waits in the produce purgatory with a
// copy of the entries, and whose Then hands them with their final results
// to a completion: on the goroutine that moves the high watermark past the
// last batch or changes the partition's leadership
// (NOT_LEADER_OR_FOLLOWER), or at timeout (REQUEST_TIMED_OUT for what is
// still waiting).
func (m *Manager) Append(acks int16, timeout time.Duration, origin Origin, entries []AppendEntry) *PendingAppend {
	waiting := 0
	for i := range entries {
		e := &entries[i]
		e.Result = AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1, LogStartOffset: -1, CurrentLeader: noLeaderHint}
		e.waitOn = nil
		p, ke, hint := m.leaderPartition(e.TopicPartition, -1, true)
		if ke != nil {
			e.Result.Err, e.Result.CurrentLeader = ke, hint
			m.stats.produced(e.TopicPartition.Topic, ke, 0, 0)
			continue
		}
		size := uint64(len(e.Records))
		if e.Batch.Bytes != nil {
			size = uint64(len(e.Batch.Bytes))
		}
		res, recErrs, msg, err, hwMoved := p.appendAsLeader(e, acks, origin)
		if err != nil {
			m.appendFailed(e, p, err, recErrs, msg)
			m.stats.produced(e.TopicPartition.Topic, e.Result.Err, 0, 0)
			continue
		}
		m.stats.produced(e.TopicPartition.Topic, nil, uint64(res.LastOffset-res.FirstOffset+1), size)
		if hwMoved {
			m.wake(e.TopicPartition)
		} else {
			// Followers waiting at the old log end fetch the new batch.
			m.replicaWaits.CheckAndComplete(e.TopicPartition)
		}
		e.Result.BaseOffset, e.Result.LastOffset = res.FirstOffset, res.LastOffset
		e.Result.LogAppendTime, e.Result.LogStartOffset = res.LogAppendTime, res.LogStartOffset
		if acks != -1 {
			continue
		}
		// Kafka's checkEnoughReplicasReachOffset, first try inline.
		committed, ke := p.committed(res.LastOffset+1, e.LeaderEpoch)
		switch {
		case !committed:
			e.waitOn, e.waitFor = p, res.LastOffset+1
			waiting++
		case ke != nil:
			m.failWaiting(e, p, ke)
		}
	}
	if waiting == 0 {
		return nil
	}
	pa := &PendingAppend{m: m, entries: slices.Clone(entries)}
	keys := make([]TopicPartition, 0, waiting)
	for i := range entries {
		entries[i].waitOn = nil
		if pa.entries[i].waitOn != nil {
			keys = append(keys, entries[i].TopicPartition)
		}
	}
	m.produceWaits.TryCompleteElseWatch(pa, timeout, keys...)
	return pa
}

// appendTimeout bounds an AppendWait whose context has no deadline.
const appendTimeout = 30 * time.Second

// AppendWait is Append for a caller that waits on its own goroutine (a
// coordinator shard writing its records): it returns once every entry's
// result is final, with the results in entries, or when ctx ends (the
// append may still complete then). ctx's deadline is the acks=all
// timeout.
func (m *Manager) AppendWait(ctx context.Context, acks int16, origin Origin, entries []AppendEntry) error {
	timeout := appendTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	pa := m.Append(acks, timeout, origin, entries)
	if pa == nil {
		return nil
	}
	done := make(appendWait, 1)
	pa.Then(done)
	select {
	case final := <-done:
		copy(entries, final)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// appendWait receives a pending append's entries.
type appendWait chan []AppendEntry

func (w appendWait) AppendCompleted(entries []AppendEntry) { w <- entries }

// PendingAppend is an acks=all append waiting for the high watermark.
type PendingAppend struct {
	m *Manager

	mu       sync.Mutex
	entries  []AppendEntry
	complete bool
	done     AppendCompletion
}

// Then hands the entries to done once every result is final, at once (on
// the caller's goroutine) if they already are.
func (pa *PendingAppend) Then(done AppendCompletion) {
	pa.mu.Lock()
	if !pa.complete {
		pa.done = done
		pa.mu.Unlock()
		return
	}
	pa.mu.Unlock()
	done.AppendCompleted(pa.entries)
}

// finish marks the results final and delivers them if Then was called.
func (pa *PendingAppend) finish() {
	pa.mu.Lock()
	pa.complete = true
	done := pa.done
	pa.mu.Unlock()
	if done != nil {
		done.AppendCompleted(pa.entries)
	}
}

// TryComplete resolves the entries whose batches the high watermark has
// passed or whose partition's leadership moved (the purgatory's
// Operation).
func (pa *PendingAppend) TryComplete() bool {
	waiting := false
	for i := range pa.entries {
		e := &pa.entries[i]
		if e.waitOn == nil {
			continue
		}
		committed, ke := e.waitOn.committed(e.waitFor, e.LeaderEpoch)
		switch {
		case !committed:
			waiting = true
		case ke != nil:
			pa.m.failWaiting(e, e.waitOn, ke)
		default:
			e.waitOn = nil
		}
	}
	if waiting {
		return false
	}
	pa.finish()
	return true
}

// Expire answers REQUEST_TIMED_OUT for what still waits.
func (pa *PendingAppend) Expire() {
	if pa.TryComplete() {
		return
	}
	for i := range pa.entries {
		if e := &pa.entries[i]; e.waitOn != nil {
			pa.m.failWaiting(e, e.waitOn, kerr.RequestTimedOut)
		}
	}
	pa.finish()
}

// appendFailed records a refused or failed append.
func (m *Manager) appendFailed(e *AppendEntry, p *Partition, err error, recErrs []protocol.RecordError, msg string) {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		m.log.Error("append failed", "topic", e.TopicPartition.Topic, "partition", e.TopicPartition.Partition, "err", err)
		e.Result.Err = kerr.KafkaStorageError
		return
	}
	e.Result.Err, e.Result.RecordErrors = ke, recErrs
	if msg == "" && err != error(ke) {
		msg = err.Error()
	}
	e.Result.ErrorMessage = msg
	e.Result.CurrentLeader = m.hintFor(e.TopicPartition, ke, p)
}

// failWaiting ends an acks=all wait with ke: the records are in the log,
// but the request failed.
func (m *Manager) failWaiting(e *AppendEntry, p *Partition, ke *kerr.Error) {
	e.Result = AppendResult{Err: ke, BaseOffset: -1, LastOffset: -1, LogAppendTime: -1, LogStartOffset: -1, CurrentLeader: m.hintFor(e.TopicPartition, ke, p)}
	e.waitOn = nil
}
