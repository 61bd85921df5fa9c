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
	// ReplicaID is -1 for consumers; follower fetches (replication) are
	// not served yet.
	ReplicaID int32
	MaxWait   time.Duration
	MinBytes  int32
	MaxBytes  int32
	Isolation Isolation
}

// FetchEntry is one partition to read, and what was read.
type FetchEntry struct {
	TopicPartition     TopicPartition
	FetchOffset        int64
	MaxBytes           int32
	CurrentLeaderEpoch int32 // -1: none

	// Result is filled by Fetch. An entry whose Result.Err is set when
	// it is handed to Fetch (the caller could not resolve it, e.g. an
	// unknown topic ID) is kept as it is and counts as an error.
	Result FetchResult
	preset bool
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
	if m.readFetch(params, entries) {
		done.FetchCompleted(entries)
		return
	}
	dropReads(entries)
	keys := make([]TopicPartition, 0, len(entries))
	for i := range entries {
		if !entries[i].preset {
			keys = append(keys, entries[i].TopicPartition)
		}
	}
	m.fetchWaits.TryCompleteElseWatch(&delayedFetch{m: m, params: params, entries: entries, done: done}, params.MaxWait, keys...)
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
		if e.Result.Err != nil {
			anyError = true
		}
		bytes += e.Result.Records.Size
	}
	return params.MaxWait <= 0 || len(entries) == 0 || anyError || bytes >= int64(params.MinBytes)
}

func (m *Manager) readPartition(params FetchParams, e *FetchEntry, budget *int64, minOne *bool) {
	// A fetch read again (woken in the purgatory) reuses its list.
	aborted := e.Result.AbortedTransactions[:0]
	e.Result = FetchResult{HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1, CurrentLeader: noLeaderHint}
	p, ke, hint := m.leaderPartition(e.TopicPartition, e.CurrentLeaderEpoch, true)
	if ke != nil {
		e.Result.Err, e.Result.CurrentLeader = ke, hint
		return
	}
	l := p.log
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
	if !d.m.readFetch(d.params, d.entries) {
		dropReads(d.entries)
		return false
	}
	d.done.FetchCompleted(d.entries)
	return true
}

func (d *delayedFetch) Expire() {
	d.m.readFetch(d.params, d.entries)
	d.done.FetchCompleted(d.entries)
}

// ReadCommitted copies whole batches of tp below the high watermark from
// offset on into a fresh buffer (the caller may keep slices of it): the
// first batch whatever its size, then up to maxBytes. At the high
// watermark it returns nothing. An offset below the log start (retention
// or DeleteRecords moved it) reads from the log start. Coordinators replay
// their partitions with it.
func (m *Manager) ReadCommitted(tp TopicPartition, offset int64, maxBytes int32) ([]byte, error) {
	p, ke := m.partitionOrError(tp)
	if ke != nil {
		return nil, fmt.Errorf("reading %s: %w", tp, ke)
	}
	l := p.log
	for {
		pos := max(offset, l.LogStartOffset())
		hw := l.HighWatermark()
		if pos >= hw {
			return nil, nil
		}
		fr, err := l.Read(pos, maxBytes, hw, true)
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
