package replica

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Isolation is a fetch's isolation level.
type Isolation int8

const (
	ReadUncommitted Isolation = 0
	ReadCommitted   Isolation = 1
)

// FetchParams are a fetch request's limits.
type FetchParams struct {
	// ReplicaID is -1 for consumers, the follower's broker id for a
	// follower fetch.
	ReplicaID int32
	// ReplicaEpoch is the follower's broker epoch (ReplicaState, Fetch
	// v15+; -1 before).
	ReplicaEpoch int64
	MaxWait      time.Duration
	MinBytes     int32
	MaxBytes     int32
	Isolation    Isolation
	// ClientMetadata says the fetch is Fetch v11+ (KIP-392): a consumer's
	// fetch may then be served by a follower, and a leader with a replica
	// selector may point it at a preferred read replica. ClientRack is the
	// consumer's client.rack.
	ClientMetadata bool
	ClientRack     string
}

// FetchEntry is one partition to read, and what was read.
type FetchEntry struct {
	TopicPartition     TopicPartition
	FetchOffset        int64
	MaxBytes           int32
	CurrentLeaderEpoch int32 // -1: none
	// LastFetchedEpoch is the epoch of the last batch the fetcher has
	// (Fetch v12+), checked for divergence when HasLastFetchedEpoch.
	LastFetchedEpoch    int32
	HasLastFetchedEpoch bool
	// LogStartOffset is a follower's log start (Fetch v5+; -1: none).
	LogStartOffset int64

	// Result is filled by Fetch. An entry whose Result.Err is set when
	// it is handed to Fetch (the caller could not resolve it, e.g. an
	// unknown topic ID) is kept as it is and counts as an error.
	Result FetchResult
	preset bool
	// hwMoved: a follower's fetch moved the high watermark; hwNews: it
	// answers the follower with a high watermark (or a divergence) it has
	// not been sent, so the fetch is answered without waiting for data.
	hwMoved, hwNews bool
}

// FetchResult is one partition's answer.
type FetchResult struct {
	Err              *kerr.Error
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	// Records are whole batches, sent with sendfile.
	Records vfs.FileRange
	// AbortedTransactions are, for a read_committed fetch, the aborted
	// transactions that overlap Records (nil for read_uncommitted, and
	// when none do).
	AbortedTransactions []AbortedTransaction
	// CurrentLeader names the leader with NOT_LEADER_OR_FOLLOWER and
	// FENCED_LEADER_EPOCH.
	CurrentLeader LeaderHint
	// Diverging tells a follower (or a consumer, Fetch v12+) where its
	// log left the leader's.
	Diverging Divergence
	// PreferredReadReplica is the replica the consumer should fetch from
	// instead (KIP-392; -1: none). Records are then empty.
	PreferredReadReplica int32
}

// FetchCompletion receives the results of a Fetch, exactly once.
type FetchCompletion interface {
	FetchCompleted(entries []FetchEntry)
}

// Fetch reads every entry (whole batches below the high watermark, or the
// last stable offset for read_committed; the first partition with data
// gets at least one batch even beyond the limits, KIP-74) and hands the
// entries to done. When less than MinBytes is there and nothing failed, it
// waits in the fetch purgatory for up to MaxWait: done then runs on the
// goroutine whose append moved a high watermark far enough, or whose
// metadata change failed a partition, or at the deadline with what there
// is. A fetch that can be answered at once is answered on the caller's
// goroutine before Fetch returns. entries must not be touched until done
// has them.
func (m *Manager) Fetch(params FetchParams, entries []FetchEntry, done FetchCompletion) {
	for i := range entries {
		entries[i].preset = entries[i].Result.Err != nil
	}
	complete := m.readFetch(params, entries)
	var moved []TopicPartition
	for i := range entries {
		if !entries[i].preset {
			// Once per partition of the request, on its first read.
			m.stats.fetched(entries[i].TopicPartition.Topic, entries[i].Result.Err)
		}
		if entries[i].hwMoved {
			moved = append(moved, entries[i].TopicPartition)
		}
	}
	if complete {
		done.FetchCompleted(entries)
	} else {
		dropReads(entries)
		keys := make([]TopicPartition, 0, len(entries))
		for i := range entries {
			if !entries[i].preset {
				keys = append(keys, entries[i].TopicPartition)
			}
		}
		waits := m.fetchWaits
		if params.ReplicaID >= 0 {
			waits = m.replicaWaits
		}
		waits.TryCompleteElseWatch(&delayedFetch{m: m, params: params, entries: entries, done: done}, params.MaxWait, keys...)
	}
	// A follower's fetch that moved a high watermark wakes what waits on
	// it (acks=all produces, consumers' fetches, other followers).
	for _, tp := range moved {
		m.wake(tp)
	}
}

// DelayedFetches is how many fetches wait in the purgatory (Kafka's
// PurgatorySize of delayed fetches).
func (m *Manager) DelayedFetches() int { return m.fetchWaits.Watched() }

// readFetch reads every entry once and reports whether the fetch can be
// answered now.
func (m *Manager) readFetch(params FetchParams, entries []FetchEntry) (complete bool) {
	budget := int64(params.MaxBytes)
	minOne := true
	var bytes int64
	anyError := false
	for i := range entries {
		e := &entries[i]
		if !e.preset {
			m.readPartition(params, e, &budget, &minOne)
		}
		if e.Result.Err != nil || e.hwNews {
			anyError = true
		}
		bytes += e.Result.Records.Size
	}
	return params.MaxWait <= 0 || len(entries) == 0 || anyError || bytes >= int64(params.MinBytes)
}

func (m *Manager) readPartition(params FetchParams, e *FetchEntry, budget *int64, minOne *bool) {
	// A fetch read again (woken in the purgatory) reuses its list.
	aborted := e.Result.AbortedTransactions[:0]
	e.Result = FetchResult{HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1, CurrentLeader: noLeaderHint, Diverging: noDivergence, PreferredReadReplica: -1}
	e.hwMoved, e.hwNews = false, false
	// Followers fetch from the leader only; consumers may fetch from a
	// follower from Fetch v11 on (Kafka's fetchOnlyFromLeader).
	fromFollowerOK := params.ReplicaID < 0 && params.ClientMetadata
	p, ke, hint := m.leaderPartition(e.TopicPartition, e.CurrentLeaderEpoch, !fromFollowerOK)
	if ke != nil {
		e.Result.Err, e.Result.CurrentLeader = ke, hint
		return
	}
	if params.ReplicaID >= 0 {
		m.readForFollower(p, params, e, budget, minOne)
		return
	}
	l := p.log
	if params.ClientMetadata {
		if id := m.preferredReadReplica(p, params.ClientRack, e.FetchOffset); id >= 0 {
			e.Result.PreferredReadReplica = id
			e.Result.HighWatermark, e.Result.LastStableOffset = l.HighWatermark(), lastStableOffset(l)
			e.Result.LogStartOffset = l.LogStartOffset()
			return
		}
	}
	if div, ok := diverged(l, e); ok {
		// KIP-320: a consumer whose last fetched epoch this log does not
		// have as it does is told where it diverged (log truncation).
		e.Result.Diverging = div
		e.Result.HighWatermark, e.Result.LastStableOffset = l.HighWatermark(), lastStableOffset(l)
		e.Result.LogStartOffset = l.LogStartOffset()
		return
	}
	// The offsets are read before the records, as Kafka's readRecords
	// does: an append landing meanwhile shows up in the next fetch.
	hw, lso := l.HighWatermark(), lastStableOffset(l)
	e.Result.HighWatermark, e.Result.LastStableOffset = hw, lso
	e.Result.LogStartOffset = l.LogStartOffset()
	limit := max(min(int64(e.MaxBytes), *budget), 0)
	var fr vfs.FileRange
	var err error
	if params.Isolation == ReadCommitted {
		fr, aborted, err = l.ReadWithAborted(e.FetchOffset, int32(limit), lso, *minOne, aborted)
		if len(aborted) > 0 {
			e.Result.AbortedTransactions = aborted
		}
	} else {
		fr, err = l.Read(e.FetchOffset, int32(limit), hw, *minOne)
	}
	if err != nil && isTieredRead(err) {
		maxOffset := hw
		if params.Isolation == ReadCommitted {
			maxOffset = lso
		}
		if m.readRemote(p, params, e, limit, maxOffset, *minOne) {
			if e.Result.Err == nil && e.Result.Records.Size > 0 {
				*budget -= e.Result.Records.Size
				*minOne = false
			}
			return
		}
		// Nothing remote from there on: the local log's start is next.
		local := l.LocalLogStartOffset()
		if params.Isolation == ReadCommitted {
			fr, aborted, err = l.ReadWithAborted(local, int32(limit), lso, *minOne, aborted)
			if len(aborted) > 0 {
				e.Result.AbortedTransactions = aborted
			}
		} else {
			fr, err = l.Read(local, int32(limit), hw, *minOne)
		}
	}
	if err != nil {
		e.Result.Err = storageErr(err)
		return
	}
	if fr.Size > 0 {
		e.Result.Records = fr
		*budget -= fr.Size
		*minOne = false
	}
}

// diverged reports where the fetcher's log left this one, when it did: the
// fetcher has an epoch this log does not, or more of it (Kafka's
// validateFetchOffsetAndMaybeGetDivergingEpoch).
func diverged(l *storage.Log, e *FetchEntry) (Divergence, bool) {
	if !e.HasLastFetchedEpoch {
		return noDivergence, false
	}
	epoch, end := l.EndOffsetForEpoch(e.LastFetchedEpoch)
	if epoch < e.LastFetchedEpoch || end < e.FetchOffset {
		return Divergence{Epoch: epoch, EndOffset: end}, true
	}
	return noDivergence, false
}

// lastStableOffset is where read_committed consumers stop: the first
// offset of the oldest open (or not yet replicated) transaction, or the
// high watermark.
func lastStableOffset(l *storage.Log) int64 { return l.LastStableOffset() }

// visibleEnd is the end of what a reader may see: the log end for a
// replica, the high watermark or the last stable offset for a consumer.
func visibleEnd(l *storage.Log, replicaID int32, isolation Isolation) int64 {
	switch {
	case replicaID != ConsumerReplicaID:
		return l.LogEndOffset()
	case isolation == ReadCommitted:
		return lastStableOffset(l)
	}
	return l.HighWatermark()
}

// storageErr is the Kafka error for a failed log operation: the
// *kerr.Error it wraps, KAFKA_STORAGE_ERROR for anything else (an I/O
// error).
func storageErr(err error) *kerr.Error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke
	}
	return kerr.KafkaStorageError
}

// dropReads releases the ranges of a read that is not answered (the fetch
// waits and reads again when woken): a range holds its segment file open
// until released. It is the one place read ranges are discarded unsent.
func dropReads(entries []FetchEntry) {
	for i := range entries {
		entries[i].Result.Records.Release()
		entries[i].Result.Records = vfs.FileRange{}
	}
}

// delayedFetch is a fetch waiting for MinBytes.
type delayedFetch struct {
	m       *Manager
	params  FetchParams
	entries []FetchEntry
	done    FetchCompletion
}

func (d *delayedFetch) TryComplete() bool {
	d.m.parkedRereads.Add(1)
	complete := d.m.readFetch(d.params, d.entries)
	d.wakeProduces()
	if !complete {
		dropReads(d.entries)
		return false
	}
	d.done.FetchCompleted(d.entries)
	return true
}

// wakeProduces wakes the acks=all produces of the partitions whose high
// watermark a follower's fetch, read again here, moved. Only those: the
// fetch purgatories would call back into this operation, whose lock the
// purgatory holds.
func (d *delayedFetch) wakeProduces() {
	for i := range d.entries {
		if d.entries[i].hwMoved {
			d.m.produceWaits.CheckAndComplete(d.entries[i].TopicPartition)
		}
	}
}

func (d *delayedFetch) Expire() {
	d.m.readFetch(d.params, d.entries)
	d.wakeProduces()
	d.done.FetchCompleted(d.entries)
}

// ReadForLoad copies whole batches of tp below the log end from offset on
// into a fresh buffer (the caller may keep slices of it): the first batch
// whatever its size, then up to maxBytes. At the log end it returns
// nothing. An offset below the log start (retention or DeleteRecords moved
// it) reads from the log start. Coordinators replay their partitions with
// it when this node becomes the leader: up to the log end, not the high
// watermark, as Kafka's coordinator loader does, because a new leader's
// log is what every replica will have, and the records of the previous
// leader's term above this node's high watermark may have been
// acknowledged already (an offset commit whose high watermark this
// follower had not heard of yet).
func (m *Manager) ReadForLoad(tp TopicPartition, offset int64, maxBytes int32) ([]byte, error) {
	p, ke := m.partitionOrError(tp)
	if ke != nil {
		return nil, fmt.Errorf("reading %s: %w", tp, ke)
	}
	l := p.log
	for {
		pos := max(offset, l.LogStartOffset())
		end := l.LogEndOffset()
		if pos >= end {
			return nil, nil
		}
		fr, err := l.Read(pos, maxBytes, end, true)
		if err != nil {
			if errors.Is(err, kerr.OffsetOutOfRange) && pos < l.LogStartOffset() {
				continue // the log start moved past pos meanwhile
			}
			return nil, fmt.Errorf("reading %s at offset %d: %w", tp, pos, err)
		}
		return copyRange(fr)
	}
}

// copyRange copies a read range into memory and releases it (with
// dropReads, the other place a range's life ends here).
func copyRange(fr vfs.FileRange) ([]byte, error) {
	defer fr.Release()
	if fr.Size == 0 {
		return nil, nil
	}
	buf := make([]byte, fr.Size)
	if n, err := fr.File.ReadAt(buf, fr.Pos); n < len(buf) {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("copying %d bytes at position %d: %w", fr.Size, fr.Pos, err)
	}
	return buf, nil
}
