package storage

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The local side of tiered storage (KIP-405). The remote log manager
// (package tiered) copies rolled segments to an object store and keeps
// their metadata; this file is what it needs of the local log:
//
//   - Two starts. The log start offset is the first offset of the whole
//     log, remote or local; the local log start offset is the first offset
//     of the first local segment. Without tiering they are the same. With
//     tiering the local segments of copied data go by local.retention.*
//     (DeleteRetainedSegments), which moves the local start and leaves the
//     log start alone; remote retention moves the log start
//     (AdvanceLogStartOffset) and leaves the local segments alone.
//   - A read between the two starts is OFFSET_MOVED_TO_TIERED_STORAGE: the
//     caller reads the remote segment instead.
//   - The highest offset in remote storage (-1: none), which local
//     retention may not pass: a local segment is deleted only once all of
//     it is in the store.
//   - The segments to copy (NextTieringSegment): a rolled segment whose
//     records are all below the last stable offset, with its indexes, the
//     producer snapshot at its end and the leader epochs up to its end.

// EncodeEpochCheckpoint renders entries as Kafka's leader-epoch-checkpoint
// file (what a remote segment's epoch index holds).
func EncodeEpochCheckpoint(entries []EpochEntry) []byte { return encodeEpochCheckpoint(entries) }

// DecodeEpochCheckpoint parses a leader-epoch-checkpoint file.
func DecodeEpochCheckpoint(data []byte) ([]EpochEntry, error) { return decodeEpochCheckpoint(data) }

// SetTiered says whether the remote log manager keeps this log's older
// segments in remote storage: retention then deletes local segments by
// local.retention.* once they are copied, and remote retention is the
// manager's. Off, the log is an ordinary local log again.
func (l *Log) SetTiered(on bool) { l.tiered.Store(on) }

// Tiered reports SetTiered.
func (l *Log) Tiered() bool { return l.tiered.Load() }

// LocalLogStartOffset is the first offset held on local disk.
func (l *Log) LocalLogStartOffset() int64 {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	start := l.logStartOffset.Load()
	if len(l.segments) == 0 {
		return start
	}
	return max(start, l.segments[0].baseOffset)
}

// HighestRemoteOffset is the last offset copied to remote storage, -1 when
// none is.
func (l *Log) HighestRemoteOffset() int64 { return l.highestRemote.Load() }

// SetHighestRemoteOffset records the last offset in remote storage (the
// remote log manager's, from its metadata).
func (l *Log) SetHighestRemoteOffset(offset int64) { l.highestRemote.Store(offset) }

// AdvanceLogStartOffset moves the log start offset to offset when that is
// ahead of it (remote retention deleted the remote segments below it),
// dropping the local segments wholly below, as DeleteRecords does. It
// never passes the high watermark.
func (l *Log) AdvanceLogStartOffset(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.Err(); err != nil {
		return err
	}
	offset = min(offset, l.highWatermark.Load())
	if offset <= l.logStartOffset.Load() {
		return nil
	}
	return l.advanceLogStart(offset)
}

// TieringSegment is a rolled local segment to copy to remote storage, and
// what goes with it. Release gives its log file back.
type TieringSegment struct {
	BaseOffset   int64
	NextOffset   int64 // the offset after its last batch: the next segment's base
	Size         int64
	MaxTimestamp int64 // -1: no timestamps
	// Log is the whole segment file; it holds the file open until
	// Release, even if retention deletes the segment meanwhile.
	Log         vfs.FileRange
	OffsetIndex []byte
	TimeIndex   []byte
	TxnIndex    []byte // nil when the segment has no aborted transaction
	// ProducerSnapshot is the producer state at NextOffset (Kafka's
	// snapshot file there), nil when there is none.
	ProducerSnapshot []byte
	// LeaderEpochs is the leader epoch cache up to NextOffset.
	LeaderEpochs []EpochEntry
}

// Release gives back the segment file.
func (t *TieringSegment) Release() { t.Log.Release() }

// NextTieringSegment returns the oldest rolled segment that holds an offset
// at or above from and whose records are all below the last stable offset
// (so below the high watermark, and never rewritten by a truncation):
// Kafka's candidate segments for copying. ok is false when there is none
// yet.
func (l *Log) NextTieringSegment(from int64) (seg TieringSegment, ok bool, err error) {
	if err := l.Err(); err != nil {
		return seg, false, err
	}
	lso := l.LastStableOffset()
	l.segMu.RLock()
	var s *segment
	var next int64
	for i := 0; i+1 < len(l.segments); i++ {
		if l.segments[i+1].baseOffset > from && l.segments[i].size.Load() > 0 {
			s, next = l.segments[i], l.segments[i+1].baseOffset
			break
		}
	}
	l.segMu.RUnlock()
	if s == nil || next > lso {
		return seg, false, nil
	}
	seg = TieringSegment{BaseOffset: s.baseOffset, NextOffset: next, Size: s.size.Load(), MaxTimestamp: s.maxTimestamp.Load()}
	if err := s.pin(); err != nil {
		return seg, false, fmt.Errorf("opening segment %d of %s to copy it: %w", s.baseOffset, l.tp, err)
	}
	seg.Log, err = s.shared.Range(0, seg.Size)
	s.unpin()
	if err != nil {
		return seg, false, fmt.Errorf("opening segment %d of %s to copy it: %w", s.baseOffset, l.tp, err)
	}
	read := func(suffix string, optional bool) ([]byte, error) {
		name := segmentFileName(l.dir, s.baseOffset, suffix)
		b, err := vfs.ReadFile(l.fsys, name)
		if optional && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s to copy it: %w", name, err)
		}
		return b, nil
	}
	if seg.OffsetIndex, err = read(indexSuffix, false); err == nil {
		if seg.TimeIndex, err = read(timeIndexSuffix, false); err == nil {
			seg.TxnIndex, err = read(txnIndexSuffix, true)
		}
	}
	if err != nil {
		seg.Release()
		return TieringSegment{}, false, err
	}
	snap, err := vfs.ReadFile(l.fsys, snapshotFileName(l.dir, next))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		seg.Release()
		return TieringSegment{}, false, fmt.Errorf("reading the producer snapshot at %d of %s to copy it: %w", next, l.tp, err)
	}
	seg.ProducerSnapshot = snap
	for _, e := range l.epochs.snapshot() {
		if e.StartOffset < next {
			seg.LeaderEpochs = append(seg.LeaderEpochs, e)
		}
	}
	return seg, true, nil
}

// errTiered is a read between the log start and the local log start.
func (l *Log) errTiered(offset int64) error {
	return fmt.Errorf("offset %d of %s is in remote storage (local log start %d): %w", offset, l.tp, l.segments[0].baseOffset, kerr.OffsetMovedToTieredStorage)
}

// localRetention is local.retention.ms and local.retention.bytes with
// Kafka's -2 ("as retention.*") resolved.
func localRetention(ms, bytes, retentionMs, retentionBytes int64) (int64, int64) {
	if ms == -2 {
		ms = retentionMs
	}
	if bytes == -2 {
		bytes = retentionBytes
	}
	return ms, bytes
}

// LocalSizeAbove is the size of the local segments whose base offset is
// above offset: what is local only when offset is the highest offset in
// remote storage (Kafka's onlyLocalLogSegmentsSize).
func (l *Log) LocalSizeAbove(offset int64) int64 {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	var n int64
	for _, s := range l.segments {
		if s.baseOffset > offset {
			n += s.size.Load()
		}
	}
	return n
}

// StartOverFromRemote empties the log and starts it at localStart, the
// leader's local log start, with what the remote segment ending there
// says came before: the leader epochs and the producer state (Kafka's
// buildRemoteLogAuxState for a follower behind the leader's local log).
// The log start is set to logStart, the leader's, below which nothing
// is; the offsets between are in remote storage.
func (l *Log) StartOverFromRemote(localStart, logStart int64, epochs []EpochEntry, producerSnapshot []byte) error {
	if err := l.TruncateFullyAndStartAt(localStart); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.Err(); err != nil {
		return err
	}
	for _, e := range epochs {
		if e.StartOffset <= localStart {
			l.epochs.assign(e.Epoch, e.StartOffset)
		}
	}
	l.epochs.truncateFromStart(min(max(logStart, 0), localStart))
	if err := l.epochs.write(); err != nil {
		return l.fail(err)
	}
	if producerSnapshot != nil {
		if _, err := decodeSnapshot(producerSnapshot); err != nil {
			return fmt.Errorf("the remote producer snapshot of %s at %d: %w", l.tp, localStart, err)
		}
		if err := vfs.WriteFileAtomic(l.fsys, snapshotFileName(l.dir, localStart), producerSnapshot); err != nil {
			return l.fail(err)
		}
		if err := l.rebuildProducerState(localStart, localStart, l.now().UnixMilli()); err != nil {
			return l.fail(err)
		}
	}
	if logStart >= 0 && logStart < localStart {
		l.hwMu.Lock()
		l.logStartOffset.Store(logStart)
		l.hwMu.Unlock()
	}
	return nil
}

// TieringLag is what is ready to copy and not in remote storage yet: the
// rolled segments above copied whose records are all below the last
// stable offset (Kafka's RemoteCopyLagBytes and RemoteCopyLagSegments).
func (l *Log) TieringLag(copied int64) (bytes int64, segments int) {
	lso := l.LastStableOffset()
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	for i := 0; i+1 < len(l.segments); i++ {
		if next := l.segments[i+1].baseOffset; next-1 > copied && next <= lso {
			bytes += l.segments[i].size.Load()
			segments++
		}
	}
	return bytes, segments
}
