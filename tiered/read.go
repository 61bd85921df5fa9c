package tiered

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Reads from remote storage, for fetches below the local log start and for
// offset lookups by timestamp older than the local log: the segment holding
// the offset is found in the partition's metadata, its offset index (or
// time index) is read whole and cached, and its log is read in chunks
// (cache.go) from the indexed position, walking batch headers to the first
// batch holding the offset. The answer is whole batches, as a local read
// gives them (the first one whatever its size, KIP-74), in memory: a
// remote fetch costs at most its max bytes (or its first batch) of heap
// beyond the shared cache.

// ReadResult is a remote read's answer.
type ReadResult struct {
	// Records are whole batches from the fetch offset on, held in memory.
	Records vfs.FileRange
	// Aborted are, for read_committed, the aborted transactions that
	// overlap Records.
	Aborted []storage.AbortedTransaction
	// Local: no remote segment holds the offset or anything after it
	// (they were all deleted, or the offset is in a gap compaction left
	// before the local log): the caller reads the local log from its
	// start.
	Local bool
}

// Read reads whole batches of a tiered partition from offset on, below
// maxOffset (the high watermark, or the last stable offset), up to
// maxBytes unless minOne lets the first batch pass it.
//
// At most remote.log.reader.threads reads run at once, each on a
// goroutine of its own, and the fetch waits for its read up to
// remote.fetch.max.wait.ms: past that (or when no reader frees up in
// time) the partition is answered without records, as Kafka's
// DelayedRemoteFetch answers, and the read goes on into the cache, where
// the consumer's next fetch finds it.
func (m *Manager) Read(ctx context.Context, l *storage.Log, topicID [16]byte, offset int64, maxBytes int32, maxOffset int64, minOne, readCommitted bool) (ReadResult, error) {
	timer := time.NewTimer(m.opts.FetchMaxWait)
	defer timer.Stop()
	select {
	case m.readers <- struct{}{}:
	case <-timer.C:
		return ReadResult{}, nil
	case <-ctx.Done():
		return ReadResult{}, ctx.Err()
	}
	type answer struct {
		res ReadResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		defer func() { <-m.readers }()
		res, err := m.read(context.WithoutCancel(ctx), l, topicID, offset, maxBytes, maxOffset, minOne, readCommitted)
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		return a.res, a.err
	case <-timer.C:
		return ReadResult{}, nil
	case <-ctx.Done():
		return ReadResult{}, ctx.Err()
	}
}

// read is Read on the reader's goroutine.
func (m *Manager) read(ctx context.Context, l *storage.Log, topicID [16]byte, offset int64, maxBytes int32, maxOffset int64, minOne, readCommitted bool) (res ReadResult, err error) {
	tp := l.TopicPartition()
	defer func() {
		if err != nil {
			m.metrics.fetchFailed(tp.Topic)
		} else if res.Records.Size > 0 {
			m.metrics.fetched(tp.Topic, res.Records.Size)
			m.fetchQuota.Record(res.Records.Size, m.opts.Now())
		}
	}()
	segs, err := m.segments(ctx, tp, topicID, false)
	if err != nil {
		return res, err
	}
	i := containing(segs, offset)
	if i < 0 {
		// Copied since this node last listed (a follower serving a
		// consumer), or deleted.
		if segs, err = m.segments(ctx, tp, topicID, true); err != nil {
			return res, err
		}
		if i = containing(segs, offset); i < 0 {
			if offset < l.LogStartOffset() {
				return res, fmt.Errorf("offset %d of %s is below the log start %d: %w", offset, tp, l.LogStartOffset(), kerr.OffsetOutOfRange)
			}
			return ReadResult{Local: true}, nil
		}
	}
	for ; i < len(segs); i++ {
		s := segs[i]
		if s.StartOffset >= maxOffset {
			return res, nil
		}
		b, next, found, err := m.readSegment(ctx, s, offset, maxBytes, maxOffset, minOne)
		if err != nil {
			return res, err
		}
		if found {
			res.Records = vfs.FileRange{File: newBytesFile(b, tp.String()), Size: int64(len(b))}
			if readCommitted && len(b) > 0 {
				res.Aborted, err = m.abortedFrom(ctx, l, segs[i:], offset, next)
			}
			return res, err
		}
		if i+1 < len(segs) {
			offset = max(offset, segs[i+1].StartOffset)
		}
	}
	return ReadResult{Local: true}, nil
}

// containing is the index of the last segment holding offset, -1 if none.
func containing(segs []SegmentMetadata, offset int64) int {
	for i := len(segs) - 1; i >= 0; i-- {
		if segs[i].StartOffset <= offset && offset <= segs[i].EndOffset {
			return i
		}
	}
	return -1
}

// object reads a whole small object of a segment (an index), cached.
func (m *Manager) object(ctx context.Context, s SegmentMetadata, suffix string, optional bool) ([]byte, error) {
	key := partitionDir(s.Topic, s.Partition, s.TopicID) + segmentStem(s.StartOffset, s.SegmentID) + suffix
	b, err := m.cache.load(cacheKey{segment: s.SegmentID, suffix: suffix}, func() ([]byte, error) {
		b, err := m.opts.Store.Get(ctx, key, 0, -1)
		if optional && errors.Is(err, ErrNotFound) {
			return []byte{}, nil
		}
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the remote %s of %s segment %d: %w", suffix, s.Topic, s.StartOffset, err)
	}
	return b, nil
}

// chunk reads chunk c of a segment's log, cached, and reads the next one
// ahead in the background.
func (m *Manager) chunk(ctx context.Context, s SegmentMetadata, c int64) ([]byte, error) {
	key := partitionDir(s.Topic, s.Partition, s.TopicID) + segmentStem(s.StartOffset, s.SegmentID) + suffixLog
	read := func(c int64) func() ([]byte, error) {
		return func() ([]byte, error) {
			n := min(int64(chunkSize), int64(s.SizeInBytes)-c*chunkSize)
			return m.opts.Store.Get(context.WithoutCancel(ctx), key, c*chunkSize, n)
		}
	}
	b, err := m.cache.load(cacheKey{segment: s.SegmentID, suffix: suffixLog, chunk: c}, read(c))
	if err != nil {
		return nil, fmt.Errorf("reading the remote log of %s segment %d: %w", s.Topic, s.StartOffset, err)
	}
	if next := c + 1; next*chunkSize < int64(s.SizeInBytes) {
		k := cacheKey{segment: s.SegmentID, suffix: suffixLog, chunk: next}
		if !m.cache.cached(k) {
			go func() { _, _ = m.cache.load(k, read(next)) }()
		}
	}
	return b, nil
}

// bytesAt copies n bytes of a segment's log at pos (fewer at its end).
func (m *Manager) bytesAt(ctx context.Context, s SegmentMetadata, pos, n int64) ([]byte, error) {
	n = min(n, int64(s.SizeInBytes)-pos)
	if n <= 0 {
		return nil, nil
	}
	out := make([]byte, 0, n)
	for int64(len(out)) < n {
		at := pos + int64(len(out))
		b, err := m.chunk(ctx, s, at/chunkSize)
		if err != nil {
			return nil, err
		}
		off := at % chunkSize
		if off >= int64(len(b)) {
			return nil, fmt.Errorf("remote log of %s segment %d is shorter than its %d bytes", s.Topic, s.StartOffset, s.SizeInBytes)
		}
		out = append(out, b[off:min(int64(len(b)), off+n-int64(len(out)))]...)
	}
	return out, nil
}

// header reads the batch header at pos.
func (m *Manager) header(ctx context.Context, s SegmentMetadata, pos int64) (protocol.BatchHeader, error) {
	b, err := m.bytesAt(ctx, s, pos, protocol.BatchHeaderSize)
	if err != nil {
		return protocol.BatchHeader{}, err
	}
	h, err := protocol.ParseBatchHeader(b)
	if err != nil || h.Magic != 2 || h.TotalSize() < protocol.BatchHeaderSize {
		return h, fmt.Errorf("remote log of %s segment %d: corrupt batch header at %d", s.Topic, s.StartOffset, pos)
	}
	return h, nil
}

// readSegment returns the whole batches of s from the one holding target
// on; found is false when none in s reaches target. next is the offset
// after the last batch returned.
func (m *Manager) readSegment(ctx context.Context, s SegmentMetadata, target int64, maxBytes int32, maxOffset int64, minOne bool) (b []byte, next int64, found bool, err error) {
	idx, err := m.object(ctx, s, suffixIndex, false)
	if err != nil {
		return nil, 0, false, err
	}
	pos := offsetIndexLookup(idx, s.StartOffset, target)
	size := int64(s.SizeInBytes)
	for pos < size {
		h, err := m.header(ctx, s, pos)
		if err != nil {
			return nil, 0, false, err
		}
		if h.LastOffset() >= target {
			break
		}
		pos += h.TotalSize()
	}
	if pos >= size {
		return nil, 0, false, nil
	}
	start, end := pos, pos
	for end < size {
		h, err := m.header(ctx, s, end)
		if err != nil {
			return nil, 0, false, err
		}
		if h.BaseOffset >= maxOffset {
			break
		}
		if end+h.TotalSize()-start > int64(maxBytes) && !(end == start && minOne) {
			break
		}
		end += h.TotalSize()
		next = h.LastOffset() + 1
	}
	if end == start {
		return nil, 0, true, nil
	}
	b, err = m.bytesAt(ctx, s, start, end-start)
	return b, next, true, err
}

// offsetIndexLookup is the position of the last offset index entry at or
// below target (0 when none): Kafka's OffsetIndex, 8-byte entries of a
// relative offset and a position.
func offsetIndexLookup(idx []byte, base, target int64) int64 {
	n := len(idx) / 8
	i := sort.Search(n, func(i int) bool {
		return base+int64(binary.BigEndian.Uint32(idx[i*8:])) > target
	})
	if i == 0 {
		return 0
	}
	return int64(binary.BigEndian.Uint32(idx[(i-1)*8+4:]))
}

// abortedFrom collects the aborted transactions that overlap [from, upper)
// from the transaction indexes of segs on, then the local log's, until an
// entry's last stable offset reaches upper (Kafka's
// collectAbortedTransactions across tiers).
func (m *Manager) abortedFrom(ctx context.Context, l *storage.Log, segs []SegmentMetadata, from, upper int64) ([]storage.AbortedTransaction, error) {
	var out []storage.AbortedTransaction
	for _, s := range segs {
		idx, err := m.object(ctx, s, suffixTxn, true)
		if err != nil {
			return nil, err
		}
		for e := idx; len(e) >= txnEntrySize; e = e[txnEntrySize:] {
			pid := int64(binary.BigEndian.Uint64(e[2:]))
			first := int64(binary.BigEndian.Uint64(e[10:]))
			last := int64(binary.BigEndian.Uint64(e[18:]))
			lso := int64(binary.BigEndian.Uint64(e[26:]))
			if last >= from && first < upper {
				out = append(out, storage.AbortedTransaction{ProducerID: pid, FirstOffset: first})
			}
			if lso >= upper {
				return out, nil
			}
		}
	}
	return l.AbortedTransactions(from, upper, out), nil
}

// txnEntrySize is a transaction index entry: version, producer id, first
// offset, last offset, last stable offset.
const txnEntrySize = 2 + 8 + 8 + 8 + 8

// FindOffsetByTimestamp looks for the first record at or after ts in the
// remote segments at or above the log start (ListOffsets by timestamp):
// found is false when no remote record is that recent, and the caller
// searches the local log.
func (m *Manager) FindOffsetByTimestamp(ctx context.Context, l *storage.Log, topicID [16]byte, ts int64) (offset, timestamp int64, epoch int32, found bool, err error) {
	segs, err := m.segments(ctx, l.TopicPartition(), topicID, false)
	if err != nil {
		return 0, 0, 0, false, err
	}
	logStart := l.LogStartOffset()
	var scratch []byte
	for _, s := range segs {
		if s.EndOffset < logStart || s.MaxTimestamp < ts {
			continue
		}
		idx, err := m.object(ctx, s, suffixIndex, false)
		if err != nil {
			return 0, 0, 0, false, err
		}
		times, err := m.object(ctx, s, suffixTime, false)
		if err != nil {
			return 0, 0, 0, false, err
		}
		from := max(timeIndexLookup(times, s.StartOffset, ts), logStart)
		pos := offsetIndexLookup(idx, s.StartOffset, from)
		for pos < int64(s.SizeInBytes) {
			h, err := m.header(ctx, s, pos)
			if err != nil {
				return 0, 0, 0, false, err
			}
			if h.MaxTimestamp >= ts && h.LastOffset() >= logStart {
				batch, err := m.bytesAt(ctx, s, pos, h.TotalSize())
				if err != nil {
					return 0, 0, 0, false, err
				}
				off, rts, ok, err := firstRecordAtOrAfter(batch, h, ts, logStart, &scratch)
				if err != nil {
					return 0, 0, 0, false, err
				}
				if ok {
					return off, rts, h.PartitionLeaderEpoch, true, nil
				}
			}
			pos += h.TotalSize()
		}
	}
	return 0, 0, 0, false, nil
}

// timeIndexLookup is the offset of the last time index entry whose
// timestamp is below ts (the segment start when none): Kafka's TimeIndex,
// 12-byte entries of a timestamp and a relative offset.
func timeIndexLookup(idx []byte, base, ts int64) int64 {
	n := len(idx) / 12
	i := sort.Search(n, func(i int) bool { return int64(binary.BigEndian.Uint64(idx[i*12:])) >= ts })
	if i == 0 {
		return base
	}
	return base + int64(binary.BigEndian.Uint32(idx[(i-1)*12+8:]))
}

// firstRecordAtOrAfter is the first record of a batch at or above minOffset
// whose timestamp is at least ts (under LogAppendTime every record has the
// batch's).
func firstRecordAtOrAfter(batch []byte, h protocol.BatchHeader, ts, minOffset int64, scratch *[]byte) (offset, timestamp int64, ok bool, err error) {
	if h.LogAppendTime() {
		return max(h.BaseOffset, minOffset), h.MaxTimestamp, h.MaxTimestamp >= ts, nil
	}
	errDone := errors.New("done")
	err = protocol.ForEachRecord(batch, scratch, func(r *protocol.Record) error {
		off, rts := h.BaseOffset+int64(r.OffsetDelta), h.BaseTimestamp+r.TimestampDelta
		if off >= minOffset && rts >= ts {
			offset, timestamp, ok = off, rts, true
			return errDone
		}
		return nil
	})
	if errors.Is(err, errDone) {
		err = nil
	}
	return offset, timestamp, ok, err
}

// AuxState is what a follower starting at the leader's local log start
// needs of the remote segment holding the offset before it: its leader
// epochs and the producer state at its end (Kafka's
// buildRemoteLogAuxState). found is false when no remote segment holds
// offset.
func (m *Manager) AuxState(ctx context.Context, tp storage.TopicPartition, topicID [16]byte, offset int64) (epochs []storage.EpochEntry, snapshot []byte, found bool, err error) {
	segs, err := m.segments(ctx, tp, topicID, true)
	if err != nil {
		return nil, nil, false, err
	}
	i := -1
	for j, s := range segs {
		if s.StartOffset <= offset && offset <= s.EndOffset && (i < 0 || s.EndOffset == offset) {
			i = j
		}
	}
	if i < 0 {
		return nil, nil, false, nil
	}
	s := segs[i]
	stem := partitionDir(s.Topic, s.Partition, s.TopicID) + segmentStem(s.StartOffset, s.SegmentID)
	b, err := m.opts.Store.Get(ctx, stem+suffixEpochs, 0, -1)
	if err != nil {
		return nil, nil, false, err
	}
	if epochs, err = storage.DecodeEpochCheckpoint(b); err != nil {
		return nil, nil, false, fmt.Errorf("the remote leader epochs of %s segment %d: %w", tp, s.StartOffset, err)
	}
	snapshot, err = m.opts.Store.Get(ctx, stem+suffixSnapshot, 0, -1)
	if errors.Is(err, ErrNotFound) {
		snapshot, err = nil, nil
	}
	if err != nil {
		return nil, nil, false, err
	}
	if s.EndOffset != offset {
		// The snapshot is at the segment's end, past offset: the
		// producer state is rebuilt from what the follower fetches.
		snapshot = nil
	}
	return epochs, snapshot, true, nil
}
