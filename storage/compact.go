package storage

// One cleaning of one log (cleanup.policy=compact), as Kafka's Cleaner
// does it:
//
//  1. The dirty section runs from the first dirty offset (the cleaner
//     checkpoint, or the log start) to the first uncleanable offset: the
//     base of the segment holding the smallest of the last stable offset,
//     the active segment's base and the first segment still within
//     min.compaction.lag.ms.
//  2. An offset map is built over the dirty section: each key's latest
//     offset, until the map is full (the round then ends there and the
//     next round goes on from it).
//  3. The log from its start to the end of the map is rewritten in groups
//     of consecutive segments that together fit segment.bytes and
//     segment.index.bytes. A record stays when it is its key's latest
//     version (or lies past the map); a tombstone stays until the delete
//     horizon stamped in its batch on the first cleaning that kept it
//     (KIP-534: now + delete.retention.ms) has passed; keyless records go.
//     Aborted transactional data goes; a transaction marker stays while
//     data of its transaction remains, then until its own delete horizon.
//     A batch that loses all its records is kept empty (header only) when
//     it is its producer's last, so that idempotence survives, and when it
//     ends the round, so that the log end is remembered. Batches keep
//     their offsets and are re-encoded in their own codec; batches that
//     lose nothing are copied as they are.
//  4. Each group's output is written to <base>.log.cleaned (with its
//     indexes), synced, and swapped in under the log's lock with renames
//     that a crash at any point leaves recoverable (swapCleaned).
//
// Aborted transactions come from the transaction indexes (txnindex.go),
// read the first time a transactional batch is met, as Kafka's cleaner
// reads them; each cleaned segment gets a transaction index of its own
// with the aborted transactions whose abort marker it keeps because the
// walk met their data (Kafka's CleanedTransactionMetadata.cleanedIndex).

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// errCleaningAborted ends a cleaning whose log changed under it (closed,
// deleted, truncated, its segments deleted by retention): nothing of it is
// kept, and a later round starts over.
var errCleaningAborted = errors.New("cleaning aborted")

// cleanable is one compacted log's state as the cleaner sees it.
type cleanable struct {
	log              *Log
	firstDirty       int64
	firstUncleanable int64 // a segment base: the dirty range is whole segments
	cleanBytes       int64 // segments before the first dirty offset
	cleanableBytes   int64 // segments in [firstDirty, firstUncleanable)
	// needNow: a dirty segment's records are older than
	// max.compaction.lag.ms (Kafka's needCompactionNow).
	needNow bool
	// horizonDue: tombstones or markers kept by an earlier round have
	// reached their delete horizon (Gregor cleans for them; Kafka waits
	// for the log to get dirty again).
	horizonDue bool
	// resetCheckpoint: the checkpointed offset was out of the log's range.
	resetCheckpoint bool
}

func (c cleanable) ratio() float64 {
	total := c.cleanBytes + c.cleanableBytes
	if total == 0 {
		return 0
	}
	return float64(c.cleanableBytes) / float64(total)
}

// cleanableRange computes what a cleaning of l could clean, given the
// cleaner checkpoint (checkpointed false: none).
func (l *Log) cleanableRange(checkpoint int64, checkpointed bool, nowMs int64) (cleanable, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := cleanable{log: l}
	if l.closed || l.Err() != nil {
		return c, false
	}
	cfg := l.config()
	start, leo := l.logStartOffset.Load(), l.logEndOffset.Load()
	c.firstDirty = start
	if checkpointed {
		if checkpoint < start || checkpoint > leo {
			c.resetCheckpoint = true
		} else {
			c.firstDirty = checkpoint
		}
	}
	segs := l.segments
	active := segs[len(segs)-1]
	uncleanable := min(l.LastStableOffset(), active.baseOffset)
	if cfg.MinCompactionLagMs > 0 {
		for _, s := range segs[l.floorSegment(c.firstDirty) : len(segs)-1] {
			if s.largestTimestamp() > nowMs-cfg.MinCompactionLagMs {
				uncleanable = min(uncleanable, s.baseOffset)
				break
			}
		}
	}
	// Round down to the base of the segment holding it.
	c.firstUncleanable = segs[l.floorSegment(uncleanable)].baseOffset
	if uncleanable >= active.baseOffset {
		c.firstUncleanable = active.baseOffset
	}
	c.firstUncleanable = max(c.firstUncleanable, c.firstDirty)
	earliestDirty := int64(math.MaxInt64)
	for i, s := range segs {
		next := leo
		if i+1 < len(segs) {
			next = segs[i+1].baseOffset
		}
		// The segment holding the first dirty offset counts as clean and
		// as cleanable, as Kafka counts it.
		if s.baseOffset < c.firstDirty {
			c.cleanBytes += s.size.Load()
		}
		if next > c.firstDirty && s.baseOffset < c.firstUncleanable {
			c.cleanableBytes += s.size.Load()
			if ts := s.firstBatchTs; ts > 0 && i < len(segs)-1 {
				earliestDirty = min(earliestDirty, ts)
			}
		}
	}
	if c.cleanableBytes > 0 && earliestDirty < nowMs-max(cfg.MaxCompactionLagMs, 0) {
		c.needNow = true
	}
	if h := l.cleanerHorizonMs.Load(); h <= nowMs && c.firstDirty > start {
		c.horizonDue = true
	}
	return c, true
}

// activeProducerLast is what Kafka's lastRecordsOfActiveProducers gives
// per producer: the last offset of its last data batch (-1 if none) and
// its epoch.
type activeProducerLast struct {
	lastDataOffset int64
	epoch          int16
}

func (l *Log) activeProducersLast() map[int64]activeProducerLast {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int64]activeProducerLast, len(l.producers.producers))
	for pid, e := range l.producers.producers {
		last := activeProducerLast{lastDataOffset: -1, epoch: e.epoch}
		if b, ok := e.last(); ok {
			last.lastDataOffset = b.lastOffset
		}
		out[pid] = last
	}
	return out
}

// segmentsBefore copies the segments whose base is below offset.
func (l *Log) segmentsBefore(offset int64) []*segment {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	var out []*segment
	for _, s := range l.segments {
		if s.baseOffset >= offset {
			break
		}
		out = append(out, s)
	}
	return out
}

// CleanerStats is what one cleaning round did (logged as Kafka logs it).
type CleanerStats struct {
	BytesRead, BytesWritten       int64
	MessagesRead, MessagesWritten int64
	MapBytesRead, MapMessagesRead int64
	InvalidMessages               int64 // keyless records dropped
	MapUtilization                float64
	Elapsed, MapElapsed           time.Duration
}

// cleaner is the per-thread state of one cleaning: its offset map, its
// buffers, and the throttle it shares with the other threads.
type cleaner struct {
	offsets  *offsetMap
	throttle *throttler
	readBuf  []byte
	scratch  []byte
	records  []retainedRecord
	headers  []protocol.RecordHeader
	builder  *protocol.BatchBuilder
	rebuilt  []byte
	now      func() time.Time
	// beforeSwap, when set, runs before each group is swapped in (tests
	// change the log there).
	beforeSwap func()
}

// cleanerReadChunk is how much of a segment one read takes.
const cleanerReadChunk = 1 << 20

// clean runs one cleaning round over c and returns the offset the next
// round starts from.
func (cl *cleaner) clean(c cleanable) (int64, CleanerStats, error) {
	l := c.log
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	started := time.Now()
	var stats CleanerStats
	nowMs := cl.now().UnixMilli()
	cfg := l.config()
	segs := l.segmentsBefore(c.firstUncleanable)
	if len(segs) == 0 {
		return c.firstDirty, stats, nil
	}
	txns := &txnScan{}
	cl.offsets.clear()
	if err := cl.buildOffsetMap(l, segs, c.firstDirty, c.firstUncleanable, txns, &stats); err != nil {
		return c.firstDirty, stats, err
	}
	// Everything below the first dirty offset was mapped by an earlier
	// round: a horizon-only round (nothing dirty) still covers it.
	cl.offsets.updateLatest(c.firstDirty - 1)
	end := cl.offsets.latest + 1
	stats.MapElapsed = time.Since(started)
	stats.MapUtilization = cl.offsets.utilization()

	var toClean []*segment
	for _, s := range segs {
		if s.baseOffset < end {
			toClean = append(toClean, s)
		}
	}
	producers := l.activeProducersLast()
	txns.reset()
	pass := &cleaningPass{
		cl: cl, log: l, nowMs: nowMs, deleteRetentionMs: cfg.DeleteRetentionMs,
		upperBound: c.firstUncleanable, producers: producers, txns: txns,
		stats: &stats, nextHorizon: math.MaxInt64,
	}
	for _, group := range groupSegments(toClean, int64(cfg.SegmentBytes), int64(cfg.SegmentIndexBytes), c.firstUncleanable) {
		if err := pass.cleanGroup(group, segs); err != nil {
			return c.firstDirty, stats, err
		}
	}
	l.cleanerHorizonMs.Store(pass.nextHorizon)
	stats.Elapsed = time.Since(started)
	return end, stats, nil
}

// cleaningStopped reports whether the cleaning of l must stop (the log
// is closing).
func (l *Log) cleaningStopped() bool { return l.stopCleaning.Load() }

// eachBatch calls fn for every batch of s from position pos on, reading
// the file in large chunks; the batch slice is valid only during fn.
func (cl *cleaner) eachBatch(l *Log, s *segment, pos int64, fn func(batch []byte, h protocol.BatchHeader) error) error {
	if err := s.pin(); err != nil {
		return fmt.Errorf("%w: %w", errCleaningAborted, err)
	}
	defer s.unpin()
	limit := s.size.Load()
	for pos < limit {
		if l.cleaningStopped() {
			return errCleaningAborted
		}
		n := min(int64(max(len(cl.readBuf), cleanerReadChunk)), limit-pos)
		if int64(cap(cl.readBuf)) < n {
			cl.readBuf = make([]byte, n)
		}
		buf := cl.readBuf[:n]
		if _, err := s.log.ReadAt(buf, pos); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading %s at %d: %w", s.log.Name(), pos, err)
		}
		cl.throttle.wait(len(buf))
		off := int64(0)
		for off < n {
			if n-off < protocol.BatchHeaderSize {
				if off == 0 {
					return fmt.Errorf("segment %s at %d: %w", s.log.Name(), pos, errCorruptBatch)
				}
				break
			}
			h, err := protocol.ParseBatchHeader(buf[off:])
			if err != nil || h.Magic != 2 || h.TotalSize() < protocol.BatchHeaderSize || pos+off+h.TotalSize() > limit {
				return fmt.Errorf("segment %s at %d: %w", s.log.Name(), pos+off, errCorruptBatch)
			}
			if off+h.TotalSize() > n {
				if off == 0 {
					// A batch larger than the buffer: read it whole.
					cl.readBuf = make([]byte, h.TotalSize())
				}
				break
			}
			if err := fn(buf[off:off+h.TotalSize()], h); err != nil {
				return err
			}
			off += h.TotalSize()
		}
		pos += off
	}
	return nil
}

// errMapFull ends the building of the offset map.
var errMapFull = errors.New("offset map full")

// buildOffsetMap maps the keys of [firstDirty, firstUncleanable) to their
// latest offsets, stopping when the map is full.
func (cl *cleaner) buildOffsetMap(l *Log, segs []*segment, firstDirty, firstUncleanable int64, txns *txnScan, stats *CleanerStats) error {
	for i, s := range segs {
		next := firstUncleanable
		if i+1 < len(segs) {
			next = segs[i+1].baseOffset
		}
		if next <= firstDirty {
			continue
		}
		pos := int64(0)
		if s.baseOffset < firstDirty {
			// The index is mapped only while the segment is pinned
			// (the cache may have closed its files).
			if err := s.pin(); err != nil {
				return fmt.Errorf("%w: %w", errCleaningAborted, err)
			}
			_, pos = s.offsets.lookup(firstDirty)
			s.unpin()
		}
		err := cl.eachBatch(l, s, pos, func(batch []byte, h protocol.BatchHeader) error {
			stats.MapBytesRead += h.TotalSize()
			if h.IsTransactional() {
				txns.collect(l, segs[0].baseOffset, firstUncleanable)
			}
			if h.IsControl() {
				txns.onControl(h, controlType(batch))
				stats.MapMessagesRead++
				return nil
			}
			if txns.onData(h) {
				stats.MapMessagesRead += int64(h.NumRecords)
				return nil
			}
			full := false
			err := protocol.ForEachRecord(batch, &cl.scratch, func(r *protocol.Record) error {
				offset := h.BaseOffset + int64(r.OffsetDelta)
				if r.Key != nil && offset >= firstDirty {
					if !cl.offsets.put(r.Key, offset) {
						full = true
						return errMapFull
					}
				}
				stats.MapMessagesRead++
				return nil
			})
			if full {
				return errMapFull
			}
			if err != nil {
				return fmt.Errorf("reading batch at offset %d: %w", h.BaseOffset, err)
			}
			if h.LastOffset() >= firstDirty {
				cl.offsets.updateLatest(h.LastOffset())
			}
			return nil
		})
		if errors.Is(err, errMapFull) {
			return nil
		}
		if err != nil {
			return err
		}
		// Offsets without records up to the next segment are covered too.
		cl.offsets.updateLatest(next - 1)
	}
	return nil
}

// controlType is the type of a control batch's record (-1 when it has
// none: an empty batch an earlier cleaning left).
func controlType(batch []byte) protocol.ControlRecordType {
	typ, _, _ := endTxnMarker(batch)
	return typ
}

// groupSegments splits segs into runs that one cleaned segment can hold
// (Kafka's groupSegmentsBySize): at most maxBytes of log and maxIndexBytes
// of each index, and offsets within 32 bits of the group's base.
func groupSegments(segs []*segment, maxBytes, maxIndexBytes, firstUncleanable int64) [][]*segment {
	var groups [][]*segment
	for len(segs) > 0 {
		group := []*segment{segs[0]}
		size := segs[0].size.Load()
		idx := int64(segs[0].offsets.count() * offsetIndexEntrySize)
		tidx := int64(segs[0].times.count() * timeIndexEntrySize)
		segs = segs[1:]
		for len(segs) > 0 {
			s := segs[0]
			last := firstUncleanable - 1
			if len(segs) > 1 {
				last = segs[1].baseOffset - 1
			}
			if size+s.size.Load() > maxBytes ||
				idx+int64(s.offsets.count()*offsetIndexEntrySize) > maxIndexBytes ||
				tidx+int64(s.times.count()*timeIndexEntrySize) > maxIndexBytes ||
				(s.size.Load() > 0 && last-group[0].baseOffset > math.MaxInt32) {
				break
			}
			group = append(group, s)
			size += s.size.Load()
			idx += int64(s.offsets.count() * offsetIndexEntrySize)
			tidx += int64(s.times.count() * timeIndexEntrySize)
			segs = segs[1:]
		}
		groups = append(groups, group)
	}
	return groups
}

// retainedRecord is a record kept from a batch being rewritten (its slices
// alias the batch or the cleaner's scratch until the batch is written).
type retainedRecord struct {
	offsetDelta int32
	timestamp   int64
	key, value  []byte
	// The record's headers are cleaner.headers[firstHeader:][:headerCount].
	firstHeader, headerCount int
}

// cleaningPass rewrites the groups of one round.
type cleaningPass struct {
	cl                *cleaner
	log               *Log
	nowMs             int64
	deleteRetentionMs int64
	upperBound        int64
	producers         map[int64]activeProducerLast
	txns              *txnScan
	stats             *CleanerStats
	// nextHorizon is the earliest delete horizon of what the round kept.
	nextHorizon int64

	out     *segment
	pending []byte
	batches []appendedBatch
}

// cleanerWriteChunk is how much output is buffered before a write.
const cleanerWriteChunk = 1 << 20

func (p *cleaningPass) cleanGroup(group, all []*segment) error {
	l := p.log
	cfg := l.config()
	base := group[0].baseOffset
	// Debris of an earlier attempt would be appended to.
	if err := removeSegmentFilesNamed(l.fsys, l.dir, base, cleanedSuffix); err != nil {
		return err
	}
	out, err := openSegmentNamed(l.fsys, l.dir, base, cleanedSuffix, int64(cfg.SegmentIndexBytes), p.nowMs, l.segCache)
	if err != nil {
		return fmt.Errorf("creating cleaned segment: %w", err)
	}
	// Pinned for its whole life: the cache must never close and reopen it.
	if err := out.pin(); err != nil {
		return err
	}
	p.out = out
	discard := func(cause error) error {
		out.unpin()
		_ = out.close()
		_ = removeSegmentFilesNamed(l.fsys, l.dir, base, cleanedSuffix)
		return cause
	}
	for _, s := range group {
		out.createdMs = max(out.createdMs, s.createdMs)
		if err := p.cl.eachBatch(l, s, 0, func(batch []byte, h protocol.BatchHeader) error {
			return p.cleanBatch(batch, h, all)
		}); err != nil {
			return discard(err)
		}
	}
	if err := p.flush(); err != nil {
		return discard(err)
	}
	if err := out.onBecomeInactive(); err != nil {
		return discard(err)
	}
	if err := out.sync(); err != nil {
		return discard(err)
	}
	out.unpin()
	if err := out.close(); err != nil {
		return discard(err)
	}
	p.out = nil
	if p.cl.beforeSwap != nil {
		p.cl.beforeSwap()
	}
	if err := l.swapCleaned(group, base, out.createdMs); err != nil {
		_ = removeSegmentFilesNamed(l.fsys, l.dir, base, cleanedSuffix)
		return err
	}
	return nil
}

// cleanBatch decides one batch's fate and writes what stays.
func (p *cleaningPass) cleanBatch(batch []byte, h protocol.BatchHeader, all []*segment) error {
	st := p.stats
	st.BytesRead += h.TotalSize()
	if h.IsTransactional() {
		p.txns.collect(p.log, all[0].baseOffset, p.upperBound)
	}
	horizon, hasHorizon := h.DeleteHorizon()
	var canDiscard bool
	if h.IsControl() {
		var kept abortedTxn
		var isKept bool
		if canDiscard, kept, isKept = p.txns.onControl(h, controlType(batch)); isKept {
			if _, err := p.out.txns.append(p.log.fsys, kept); err != nil {
				return fmt.Errorf("writing cleaned transaction index: %w", err)
			}
		}
	} else {
		canDiscard = p.txns.onData(h)
	}
	discardRecords := canDiscard
	if h.IsControl() {
		discardRecords = canDiscard && hasHorizon && horizon <= p.nowMs
	}
	lastOfProducer := false
	if h.HasProducerID() {
		if last, ok := p.producers[h.ProducerID]; ok {
			if last.lastDataOffset >= 0 {
				lastOfProducer = h.LastOffset() == last.lastDataOffset
			} else {
				lastOfProducer = h.IsControl() && h.ProducerEpoch == last.epoch
			}
		}
	}
	retainEmpty := lastOfProducer || h.LastOffset()+1 == p.upperBound
	if discardRecords && !retainEmpty {
		st.MessagesRead += int64(h.NumRecords)
		return nil
	}
	markerForEmptyTxn := canDiscard && h.IsControl()

	p.cl.records = p.cl.records[:0]
	keptAll := true
	tombstones := false
	p.cl.headers = p.cl.headers[:0]
	err := protocol.ForEachRecord(batch, &p.cl.scratch, func(r *protocol.Record) error {
		st.MessagesRead++
		offset := h.BaseOffset + int64(r.OffsetDelta)
		keep := !discardRecords && (h.IsControl() || p.retainRecord(offset, r, hasHorizon, horizon))
		if !keep {
			keptAll = false
			return nil
		}
		if r.Value == nil {
			tombstones = true
		}
		// The reader reuses its header slice: keep a copy.
		first := len(p.cl.headers)
		p.cl.headers = append(p.cl.headers, r.Headers...)
		p.cl.records = append(p.cl.records, retainedRecord{
			offsetDelta: r.OffsetDelta, timestamp: h.BaseTimestamp + r.TimestampDelta,
			key: r.Key, value: r.Value, firstHeader: first, headerCount: len(r.Headers),
		})
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading batch at offset %d: %w", h.BaseOffset, err)
	}
	kept := p.cl.records
	switch {
	case len(kept) > 0:
		needHorizon := (tombstones || markerForEmptyTxn) && !hasHorizon
		if needHorizon {
			horizon, hasHorizon = p.nowMs+p.deleteRetentionMs, true
		}
		// Only horizons still ahead make the log due again: one that has
		// passed belongs to a record kept for another reason (past the
		// map's end), and would have the log cleaned over and over.
		if hasHorizon && horizon > p.nowMs && (tombstones || h.IsControl()) {
			p.nextHorizon = min(p.nextHorizon, horizon)
		}
		if keptAll && !needHorizon {
			st.MessagesWritten += int64(len(kept))
			return p.write(batch, h)
		}
		rebuilt, err := p.rebuild(h, kept, hasHorizon, horizon)
		if err != nil {
			return err
		}
		nh, err := protocol.ParseBatchHeader(rebuilt)
		if err != nil {
			return err
		}
		st.MessagesWritten += int64(len(kept))
		return p.write(rebuilt, nh)
	case retainEmpty:
		empty := protocol.EmptyBatch(h)
		nh, _ := protocol.ParseBatchHeader(empty)
		return p.write(empty, nh)
	}
	return nil
}

// retainRecord is Kafka's shouldRetainRecord for a v2 data record.
func (p *cleaningPass) retainRecord(offset int64, r *protocol.Record, hasHorizon bool, horizon int64) bool {
	if offset > p.cl.offsets.latest {
		return true
	}
	if r.Key == nil {
		p.stats.InvalidMessages++
		return false
	}
	if offset < p.cl.offsets.get(r.Key) {
		return false
	}
	return r.Value != nil || !hasHorizon || p.nowMs < horizon
}

// rebuild re-encodes a batch with only the kept records, in its codec,
// with its offsets, producer fields and leader epoch. The result is valid
// until the next rebuild.
func (p *cleaningPass) rebuild(h protocol.BatchHeader, kept []retainedRecord, hasHorizon bool, horizon int64) ([]byte, error) {
	if p.cl.builder == nil {
		p.cl.builder = protocol.NewBatchBuilder(h.Codec())
	}
	b := p.cl.builder.ResetFor(h.Codec()).
		SetProducer(h.ProducerID, h.ProducerEpoch, h.BaseSequence).
		SetTransactional(h.IsTransactional()).
		SetControl(h.IsControl()).
		SetLastOffsetDelta(h.LastOffsetDelta)
	if h.LogAppendTime() {
		b.SetLogAppendTime(h.MaxTimestamp)
	}
	if hasHorizon {
		b.SetDeleteHorizon(horizon)
	}
	for _, r := range kept {
		headers := p.cl.headers[r.firstHeader : r.firstHeader+r.headerCount]
		if err := b.AddWithOffsetDelta(r.offsetDelta, r.key, r.value, headers, r.timestamp); err != nil {
			return nil, fmt.Errorf("rewriting batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	out, err := b.AppendBuild(p.cl.rebuilt[:0])
	if err != nil {
		return nil, fmt.Errorf("rewriting batch at offset %d: %w", h.BaseOffset, err)
	}
	p.cl.rebuilt = out // reused: write copies it
	protocol.SetBaseOffset(out, h.BaseOffset)
	protocol.SetPartitionLeaderEpoch(out, h.PartitionLeaderEpoch)
	return out, nil
}

// write buffers a batch for the cleaned segment.
func (p *cleaningPass) write(batch []byte, h protocol.BatchHeader) error {
	p.pending = append(p.pending, batch...)
	p.batches = append(p.batches, appendedBatch{
		size: h.TotalSize(), baseOffset: h.BaseOffset, lastOffset: h.LastOffset(),
		maxTimestamp: h.MaxTimestamp, leaderEpoch: h.PartitionLeaderEpoch,
	})
	p.stats.BytesWritten += h.TotalSize()
	if len(p.pending) >= cleanerWriteChunk {
		return p.flush()
	}
	return nil
}

func (p *cleaningPass) flush() error {
	if len(p.pending) == 0 {
		return nil
	}
	p.cl.throttle.wait(len(p.pending))
	if _, _, err := p.out.append(p.pending, p.batches, int64(p.log.config().IndexIntervalBytes)); err != nil {
		return fmt.Errorf("writing cleaned segment: %w", err)
	}
	p.pending, p.batches = p.pending[:0], p.batches[:0]
	return nil
}

// removeSegmentFilesNamed removes a segment's files that carry suffix
// after Kafka's (".cleaned", ".swap").
func removeSegmentFilesNamed(fsys vfs.FS, dir string, base int64, suffix string) error {
	for _, suf := range segmentSuffixes {
		name := segmentFileName(dir, base, suf+suffix)
		if err := fsys.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing %s: %w", name, err)
		}
	}
	return nil
}

// swapCleaned replaces group with the cleaned segment written at base
// (and synced), under the log's lock. The renames, in the order a crash
// must see them:
//
//  1. the cleaned indexes, then the cleaned log, to *.swap: once
//     <base>.log.swap exists the swap is decided, and opening the log
//     finishes it (completeSwaps);
//  2. the group's segments to *.deleted (removed after
//     file.delete.delay.ms), the *.swap files to their final names, the
//     log last;
//  3. a sync of the dir, after which the swap is durable (the cleaner
//     checkpoint written next relies on it).
//
// A crash before 3 leaves some prefix of these renames (a journaling
// filesystem persists a directory's operations in order): before the log's
// .swap the old segments stand and the .cleaned and index .swap files are
// debris; from it on the swap completes at the next open. Readers are
// kept out only while the names change and the new segment opens; fetches
// holding ranges of the old segments keep reading them.
func (l *Log) swapCleaned(group []*segment, base int64, createdMs int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.Err() != nil || l.cleaningStopped() {
		return errCleaningAborted
	}
	l.segMu.RLock()
	i := l.floorSegment(base)
	same := i+len(group) < len(l.segments)
	for k := 0; same && k < len(group); k++ {
		same = l.segments[i+k] == group[k]
	}
	l.segMu.RUnlock()
	if !same {
		return errCleaningAborted
	}
	for _, suf := range swapOrder {
		from := segmentFileName(l.dir, base, suf+cleanedSuffix)
		if err := l.fsys.Rename(from, segmentFileName(l.dir, base, suf+swapSuffix)); err != nil && !absentTxnIndex(suf, err) {
			return l.fail(fmt.Errorf("renaming %s: %w", from, err))
		}
	}
	cfg := l.config()
	l.segMu.Lock()
	for _, s := range group {
		s.deleted.Store(true)
		if err := s.renameDeleted(); err != nil {
			l.segMu.Unlock()
			return l.fail(err)
		}
	}
	for _, suf := range swapOrder {
		from := segmentFileName(l.dir, base, suf+swapSuffix)
		if err := l.fsys.Rename(from, segmentFileName(l.dir, base, suf)); err != nil && !absentTxnIndex(suf, err) {
			l.segMu.Unlock()
			return l.fail(fmt.Errorf("renaming %s: %w", from, err))
		}
	}
	seg, err := openSegment(l.fsys, l.dir, base, 0, createdMs, l.segCache)
	if err == nil {
		var bad bool
		if bad, err = seg.loadTrusted(int64(cfg.IndexIntervalBytes)); err == nil && bad {
			err = fmt.Errorf("cleaned segment %d failed its sanity check", base)
		}
	}
	if err != nil {
		l.segMu.Unlock()
		return l.fail(fmt.Errorf("opening cleaned segment: %w", err))
	}
	segs := make([]*segment, 0, len(l.segments)-len(group)+1)
	segs = append(segs, l.segments[:i]...)
	segs = append(segs, seg)
	segs = append(segs, l.segments[i+len(group):]...)
	l.segments = segs
	l.segMu.Unlock()
	// The cleaned indexes keep only the aborted transactions whose data
	// the walk met.
	l.refreshAbortedEnd()
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("syncing %s: %w", l.dir, err))
	}
	l.scheduleRemoval(group)
	return nil
}

// swapOrder is the order a cleaned segment's files are renamed in: the
// log last, so that its .swap decides the swap (swapCleaned).
var swapOrder = []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix}

// absentTxnIndex reports a rename that failed only because the segment
// has no transaction index (the file exists only once it has an entry).
func absentTxnIndex(suffix string, err error) bool {
	return suffix == txnIndexSuffix && errors.Is(err, os.ErrNotExist)
}

// completeSwaps finishes the swaps a crash interrupted (swapCleaned's
// step 2) when the log is opened: for each <base>.log.swap, the segments
// it replaces (bases from base to its last offset) are removed and the
// swap files take their final names. It returns the bases swapped in,
// whose indexes the caller rebuilds.
func (l *Log) completeSwaps(swaps []int64) (map[int64]bool, error) {
	done := map[int64]bool{}
	if len(swaps) == 0 {
		return done, nil
	}
	ents, err := l.fsys.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", l.dir, err)
	}
	for _, base := range swaps {
		last, err := lastOffsetIn(l.fsys, segmentFileName(l.dir, base, logSuffix+swapSuffix), base)
		if err != nil {
			return nil, err
		}
		for _, ent := range ents {
			name := ent.Name()
			if !strings.HasSuffix(name, logSuffix) {
				continue
			}
			b, err := strconv.ParseInt(strings.TrimSuffix(name, logSuffix), 10, 64)
			if err != nil {
				continue
			}
			if b >= base && b <= max(last, base) {
				if err := removeSegmentFiles(l.fsys, l.dir, b); err != nil {
					return nil, err
				}
			}
		}
		for _, suf := range swapOrder {
			from := segmentFileName(l.dir, base, suf+swapSuffix)
			if err := l.fsys.Rename(from, segmentFileName(l.dir, base, suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("completing the swap of %s: %w", from, err)
			}
		}
		l.logger().Info("completed a cleaned segment's swap interrupted by a crash", "segment", base, "last_offset", last)
		done[base] = true
	}
	// Not synced here: a crash before the log's first flush (which syncs
	// the dir, load leaves it dirty) finds the .swap again and completes
	// it again.
	return done, nil
}

// lastOffsetIn reads the batch headers of a segment file and returns its
// last offset (base-1 when it is empty). The file was synced whole before
// it was renamed to .swap, so a bad batch means it is not a swap file of
// ours: that is an error.
func lastOffsetIn(fsys vfs.FS, name string, base int64) (int64, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", name, err)
	}
	var hb headerBuf
	last := base - 1
	for pos := int64(0); pos < st.Size(); {
		if _, err := f.ReadAt(hb[:], pos); err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("reading %s: %w", name, err)
		}
		h, err := protocol.ParseBatchHeader(hb[:])
		if err != nil || h.Magic != 2 || h.TotalSize() < protocol.BatchHeaderSize || pos+h.TotalSize() > st.Size() {
			return 0, fmt.Errorf("%s at %d: %w", filepath.Base(name), pos, errCorruptBatch)
		}
		last = h.LastOffset()
		pos += h.TotalSize()
	}
	return last, nil
}

// txnScan is the cleaner's view of transactions (Kafka's
// CleanedTransactionMetadata): the aborted transactions of the cleaned
// range, taken from the transaction indexes the first time a
// transactional batch is met, and the transactions in progress as the
// cleaning walks the log.
type txnScan struct {
	collected bool
	aborted   []abortedTxn // by first offset
	next      int          // aborted[next:] are not reached yet
	// ongoingAborted: producer → the aborted transaction being walked and
	// whether any of its batches was seen.
	ongoingAborted   map[int64]*ongoingAbort
	ongoingCommitted map[int64]bool
}

type ongoingAbort struct {
	txn      abortedTxn
	sawBatch bool
}

// reset rewinds the scan for a walk from the log's start (the aborted
// list stays).
func (t *txnScan) reset() {
	t.next = 0
	t.ongoingAborted = nil
	t.ongoingCommitted = nil
}

// collect finds the aborted transactions overlapping [from, to) in the
// transaction indexes, once (Kafka's collectAbortedTransactions over the
// cleaned range: markers past it, in segments not cleaned, count too).
func (t *txnScan) collect(l *Log, from, to int64) {
	if t.collected {
		return
	}
	t.collected = true
	l.segMu.RLock()
	l.eachAbortedLocked(from, to, func(a abortedTxn) { t.aborted = append(t.aborted, a) })
	l.segMu.RUnlock()
	// Found in marker order; walked in first-offset order.
	sort.Slice(t.aborted, func(i, j int) bool { return t.aborted[i].firstOffset < t.aborted[j].firstOffset })
}

func (t *txnScan) reach(offset int64) {
	for t.next < len(t.aborted) && t.aborted[t.next].firstOffset <= offset {
		a := t.aborted[t.next]
		if t.ongoingAborted == nil {
			t.ongoingAborted = map[int64]*ongoingAbort{}
		}
		if _, ok := t.ongoingAborted[a.producerID]; !ok {
			t.ongoingAborted[a.producerID] = &ongoingAbort{txn: a}
		}
		t.next++
	}
}

// onData reports whether a data batch belongs to an aborted transaction.
func (t *txnScan) onData(h protocol.BatchHeader) bool {
	t.reach(h.LastOffset())
	if !h.IsTransactional() {
		return false
	}
	if a, ok := t.ongoingAborted[h.ProducerID]; ok {
		a.sawBatch = true
		return true
	}
	if t.ongoingCommitted == nil {
		t.ongoingCommitted = map[int64]bool{}
	}
	t.ongoingCommitted[h.ProducerID] = true
	return false
}

// onControl reports whether a transaction marker may go: no batch of its
// transaction is left before it. An abort marker that stays because the
// walk met data of its transaction also returns that transaction, which
// the cleaned segment's transaction index keeps (Kafka's cleaner appends
// it to the cleaned index there).
func (t *txnScan) onControl(h protocol.BatchHeader, typ protocol.ControlRecordType) (discard bool, kept abortedTxn, isKept bool) {
	t.reach(h.LastOffset())
	switch typ {
	case protocol.ControlAbort:
		a, ok := t.ongoingAborted[h.ProducerID]
		delete(t.ongoingAborted, h.ProducerID)
		if ok && a.sawBatch {
			return false, a.txn, true
		}
		return true, abortedTxn{}, false
	case protocol.ControlCommit:
		saw := t.ongoingCommitted[h.ProducerID]
		delete(t.ongoingCommitted, h.ProducerID)
		return !saw, abortedTxn{}, false
	case -1:
		return true, abortedTxn{}, false // emptied by an earlier cleaning
	}
	return false, abortedTxn{}, false
}
