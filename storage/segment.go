package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// Segment file suffixes, as Kafka names them.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	txnIndexSuffix  = ".txnindex"
	snapshotSuffix  = ".snapshot"
	deletedSuffix   = ".deleted"
	cleanedSuffix   = ".cleaned"
	swapSuffix      = ".swap"
)

// segmentFileName is <dir>/<20-digit base offset><suffix>.
func segmentFileName(dir string, baseOffset int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", baseOffset, suffix))
}

// segmentFile names one of a segment's files by its parts, joined when a
// file is opened: the joined paths of a segment's indexes, kept, were
// ~300 bytes of heap a segment (30 MB at 100,000 partitions), while dir
// shares the log's string and the suffixes are constants.
type segmentFile struct {
	dir    string
	base   int64
	suffix string
}

func (f segmentFile) String() string { return segmentFileName(f.dir, f.base, f.suffix) }

// errCorruptBatch marks where recovery stops: a torn or corrupt batch.
var errCorruptBatch = errors.New("corrupt or torn record batch")

// headerBuf is scratch for one batch header read.
type headerBuf [protocol.BatchHeaderSize]byte

// segment is one <base>.log with its offset, time and transaction
// indexes.
//
// The log's appender (holding Log.mu) is the only goroutine that writes a
// segment or changes the appender-owned fields below. Readers use size,
// maxTimestamp, tail and the indexes (which have their own locks); size
// is stored only after the bytes it covers are written, so a reader never
// sees a partial batch.
//
// The files are open only while the segment is in use and for a while
// after (segmentcache.go): every method that touches them pins the
// segment (pin/unpin), which opens them if needed and keeps the cache from
// closing them; the internal helpers they call assume a pin.
type segment struct {
	fsys       vfs.FS
	dir        string
	baseOffset int64
	suffix     string // after Kafka's suffixes: "" for a live segment
	cache      *segmentCache

	// fmu guards the open state: pins, closed, log, shared and whether the
	// indexes' files are open. Lock order: fmu, then the cache's mu; an
	// index's own lock is taken under fmu only to open or close it.
	fmu  sync.Mutex
	pins int
	// closed is for good: the log closed or the segment was deleted.
	closed bool
	// untouched: built from the log state file (logstate.go) and not
	// opened since, so its files are as the last clean shutdown left
	// them; the first open checks the log file's size against it.
	untouched bool
	// log is the segment file while open, for the segment's own I/O;
	// shared owns it and hands out the ranges that readers send, which keep
	// it open after the segment closes until they are released.
	log    vfs.File
	shared *vfs.SharedFile
	// idle is the segment's place in the cache's idle list (guarded by the
	// cache's mu).
	idle idleLinks

	offsets *offsetIndex
	times   *timeIndex
	// txns is the transaction index (txnindex.go): it keeps no file open.
	txns *txnIndex

	size         atomic.Int64 // bytes of whole batches
	maxTimestamp atomic.Int64 // largest batch max timestamp, -1 if none
	deleted      atomic.Bool  // renamed to *.deleted, awaiting removal
	// tail is where the last batches appended are, nil until the first
	// append and again once the segment is inactive or truncated; the
	// appender stores it, readers load it.
	tail atomic.Pointer[tailBatches]
	// truncations is odd while a truncation rewrites the file, and moves
	// on with each: a log move's copy made without the log's lock is
	// valid only if it did not change (logmove.go).
	truncations atomic.Int64

	// Appender-owned.
	nextOffset      int64 // offset after the last batch
	offsetOfMaxTs   int64 // last offset of the batch holding maxTimestamp
	bytesSinceIndex int64
	firstBatchTs    int64 // max timestamp of the first batch, -1 if none (segment.ms)
	createdMs       int64 // wall clock at creation, for segment.ms of empty-timestamp batches
	rollJitterMs    int64
	// indexesPending: an index of this new segment may not exist yet;
	// indexCreated: the append in progress created one (the log's next
	// flush syncs the directory).
	indexesPending, indexCreated bool
}

// errSegmentClosed refuses to use a segment closed for good.
var errSegmentClosed = errors.New("segment is closed")

// openSegment opens (creating) a segment's files. indexBytes > 0
// preallocates the indexes for an active segment; 0 keeps their length.
// The caller then either recovers the segment or loads it as trusted. The
// segment is returned open and unused: the cache may close it.
func openSegment(fsys vfs.FS, dir string, baseOffset int64, indexBytes int64, nowMs int64, cache *segmentCache) (*segment, error) {
	return openSegmentNamed(fsys, dir, baseOffset, "", indexBytes, nowMs, cache)
}

// newSegment creates an active segment where none of its files exist (a
// new log, a roll, a log emptied): the log file now, the indexes with
// their first entry (indexFile.absent), the transaction index with its
// first abort.
func newSegment(fsys vfs.FS, dir string, baseOffset int64, indexBytes int64, nowMs int64, cache *segmentCache) (*segment, error) {
	name := segmentFileName(dir, baseOffset, logSuffix)
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating segment %s: %w", name, err)
	}
	txns := &txnIndex{baseOffset: baseOffset, file: segmentFile{dir, baseOffset, txnIndexSuffix}}
	return segmentWithAbsentIndexes(fsys, dir, baseOffset, f, 0, txns, indexBytes, nowMs, cache), nil
}

// openSegmentToRecover opens a segment that recovery rescans: its log
// file and transaction index now, while its offset and time indexes,
// which the rescan rebuilds, are written afresh from their first entries
// (the old files are truncated then, or when a roll trims them). A
// crash leaves an active segment's preallocated indexes full of zeros:
// opening and clearing them cost four ftruncates and two mappings per
// partition at every start after kill -9.
func openSegmentToRecover(fsys vfs.FS, dir string, baseOffset int64, indexBytes int64, nowMs int64, cache *segmentCache) (*segment, error) {
	name := segmentFileName(dir, baseOffset, logSuffix)
	f, size, err := openLogFile(fsys, name)
	if err != nil {
		return nil, err
	}
	txns, err := openTxnIndex(fsys, segmentFile{dir, baseOffset, txnIndexSuffix}, baseOffset)
	if err != nil {
		f.Close()
		return nil, err
	}
	return segmentWithAbsentIndexes(fsys, dir, baseOffset, f, size, txns, indexBytes, nowMs, cache), nil
}

// segmentWithAbsentIndexes builds an open, unused segment over its log
// file f of size bytes, whose indexes are created (or truncated) when
// they take their first entries.
func segmentWithAbsentIndexes(fsys vfs.FS, dir string, baseOffset int64, f vfs.File, size int64, txns *txnIndex, indexBytes int64, nowMs int64, cache *segmentCache) *segment {
	absentIndex := func(suffix string, entrySize int) *indexFile {
		return &indexFile{file: segmentFile{dir, baseOffset, suffix}, fsys: fsys, entrySize: entrySize, maxEntries: int(indexBytes) / entrySize, absent: true}
	}
	s := &segment{
		fsys:           fsys,
		dir:            dir,
		baseOffset:     baseOffset,
		cache:          cache,
		log:            f,
		shared:         vfs.NewSharedFile(f),
		offsets:        &offsetIndex{indexFile: absentIndex(indexSuffix, offsetIndexEntrySize), baseOffset: baseOffset},
		times:          &timeIndex{indexFile: absentIndex(timeIndexSuffix, timeIndexEntrySize), baseOffset: baseOffset},
		txns:           txns,
		nextOffset:     baseOffset,
		offsetOfMaxTs:  baseOffset,
		firstBatchTs:   -1,
		createdMs:      nowMs,
		indexesPending: true,
	}
	s.size.Store(size)
	s.maxTimestamp.Store(-1)
	s.registerOpened()
	return s
}

// openSegmentNamed is openSegment for files whose names carry a further
// suffix after Kafka's (.cleaned: the log cleaner's output, which is
// renamed into place when it is swapped in).
func openSegmentNamed(fsys vfs.FS, dir string, baseOffset int64, suffix string, indexBytes int64, nowMs int64, cache *segmentCache) (*segment, error) {
	name := segmentFileName(dir, baseOffset, logSuffix+suffix)
	f, size, err := openLogFile(fsys, name)
	if err != nil {
		return nil, err
	}
	oi, err := openIndexFile(fsys, segmentFile{dir, baseOffset, indexSuffix + suffix}, offsetIndexEntrySize, indexBytes)
	if err != nil {
		f.Close()
		return nil, err
	}
	ti, err := openIndexFile(fsys, segmentFile{dir, baseOffset, timeIndexSuffix + suffix}, timeIndexEntrySize, indexBytes)
	if err != nil {
		oi.close()
		f.Close()
		return nil, err
	}
	txns, err := openTxnIndex(fsys, segmentFile{dir, baseOffset, txnIndexSuffix + suffix}, baseOffset)
	if err != nil {
		ti.close()
		oi.close()
		f.Close()
		return nil, err
	}
	s := &segment{
		fsys:          fsys,
		dir:           dir,
		baseOffset:    baseOffset,
		suffix:        suffix,
		cache:         cache,
		log:           f,
		shared:        vfs.NewSharedFile(f),
		offsets:       &offsetIndex{indexFile: oi, baseOffset: baseOffset},
		times:         &timeIndex{indexFile: ti, baseOffset: baseOffset},
		txns:          txns,
		nextOffset:    baseOffset,
		offsetOfMaxTs: baseOffset,
		firstBatchTs:  -1,
		createdMs:     nowMs,
	}
	s.size.Store(size)
	s.maxTimestamp.Store(-1)
	s.registerOpened()
	return s, nil
}

// openLogFile opens (creating) a segment's log file and returns its size.
func openLogFile(fsys vfs.FS, name string) (vfs.File, int64, error) {
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("opening segment %s: %w", name, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("stat segment %s: %w", name, err)
	}
	return f, st.Size(), nil
}

// registerOpened counts a segment built with its files open in the cache,
// as open and unused (the cache may close it).
func (s *segment) registerOpened() {
	s.fmu.Lock()
	s.cache.opened()
	over := s.cache.released(s, time.Now())
	s.fmu.Unlock()
	if over {
		s.cache.evict()
	}
}

// pin opens the segment's files if they are closed and keeps them open
// until the matching unpin.
func (s *segment) pin() error {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	if s.closed || (s.log == nil && s.deleted.Load()) {
		// A deleted segment's name may belong to a newer segment already.
		return fmt.Errorf("segment %d in %s: %w", s.baseOffset, s.dir, errSegmentClosed)
	}
	if s.log == nil {
		if err := s.openFilesLocked(); err != nil {
			return err
		}
		s.untouched = false
		s.cache.opened()
	} else if s.pins == 0 {
		s.cache.inUse(s)
	}
	s.pins++
	return nil
}

// unpin ends a use. A segment closed for good meanwhile closes its files
// now; otherwise it stays open, idle, and the cache may close others.
func (s *segment) unpin() {
	s.fmu.Lock()
	s.pins--
	over := false
	if s.pins == 0 {
		if s.closed {
			// Nobody to report to: the log or the deletion that closed
			// the segment has returned.
			_ = s.closeFilesLocked()
			s.cache.closed()
		} else {
			over = s.cache.released(s, time.Now())
		}
	}
	s.fmu.Unlock()
	if over {
		s.cache.evict()
	}
}

// openFilesLocked reopens the files of a segment the cache closed. The
// sizes are the segment's own (kept while closed): nothing else writes its
// files. The caller holds fmu.
func (s *segment) openFilesLocked() error {
	name := segmentFileName(s.dir, s.baseOffset, logSuffix+s.suffix)
	f, err := s.fsys.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("reopening segment %s: %w", name, err)
	}
	if s.untouched {
		st, err := f.Stat()
		if err == nil && st.Size() != s.size.Load() {
			err = fmt.Errorf("%d bytes where the log state file says %d: %w", st.Size(), s.size.Load(), errStaleLogState)
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("stat segment %s: %w", name, err)
		}
	}
	// An index without entries or unsynced changes opens when it takes
	// its first entry (indexFile.appendEntry).
	if s.offsets.openedWithSegment() {
		if err := s.offsets.reopen(s.fsys); err != nil {
			f.Close()
			return err
		}
	}
	if s.times.openedWithSegment() {
		if err := s.times.reopen(s.fsys); err != nil {
			s.offsets.close()
			f.Close()
			return err
		}
	}
	s.log, s.shared = f, vfs.NewSharedFile(f)
	return nil
}

// closeFilesLocked closes the files (the .log only once the ranges handed
// out are released). The caller holds fmu.
func (s *segment) closeFilesLocked() error {
	err := s.offsets.close()
	if terr := s.times.close(); err == nil {
		err = terr
	}
	// The file itself closes when the last range handed out is released.
	if lerr := s.shared.Close(); err == nil {
		err = lerr
	}
	s.log, s.shared = nil, nil
	return err
}

// closeIfIdle closes the files of a segment the cache took out of its
// idle list, unless it was used again meanwhile. It reports whether it
// closed them.
func (s *segment) closeIfIdle() bool {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	if s.closed || s.log == nil || s.pins > 0 || s.cache.isIdle(s) {
		return false
	}
	// Closing does not sync: dirty pages stay in the page cache, and the
	// next flush reopens and fsyncs the file. An error closing a file we
	// only read or wrote through is not actionable here.
	_ = s.closeFilesLocked()
	// An idle segment keeps no memory for consumers at its tail either;
	// nothing uses it without a pin, so nothing reads it meanwhile.
	s.tail.Store(nil)
	s.cache.closed()
	return true
}

// readHeader reads the batch header at pos; the batch must end by limit.
func (s *segment) readHeader(pos, limit int64, buf *headerBuf) (protocol.BatchHeader, error) {
	if limit-pos < protocol.BatchHeaderSize {
		return protocol.BatchHeader{}, errCorruptBatch
	}
	if _, err := s.log.ReadAt(buf[:], pos); err != nil && !errors.Is(err, io.EOF) {
		return protocol.BatchHeader{}, fmt.Errorf("reading %s at %d: %w", s.log.Name(), pos, err)
	}
	h, err := protocol.ParseBatchHeader(buf[:])
	if err != nil || h.Magic != 2 || h.TotalSize() < protocol.BatchHeaderSize || pos+h.TotalSize() > limit {
		return h, errCorruptBatch
	}
	return h, nil
}

// scan calls fn for each whole batch from pos up to limit, stopping when fn
// returns false. It returns the position where it stopped.
func (s *segment) scan(pos, limit int64, buf *headerBuf, fn func(pos int64, h protocol.BatchHeader) bool) (int64, error) {
	for pos < limit {
		h, err := s.readHeader(pos, limit, buf)
		if err != nil {
			return pos, err
		}
		if !fn(pos, h) {
			return pos, nil
		}
		pos += h.TotalSize()
	}
	return pos, nil
}

// findBatch finds the first batch whose last offset is >= target (the one
// containing target, or the next one after a gap), below limit.
func (s *segment) findBatch(target, limit int64, buf *headerBuf) (pos int64, h protocol.BatchHeader, found bool, err error) {
	_, start := s.offsets.lookup(target)
	pos, err = s.scan(start, limit, buf, func(_ int64, bh protocol.BatchHeader) bool {
		if bh.LastOffset() >= target {
			h, found = bh, true
			return false
		}
		return true
	})
	return pos, h, found, err
}

// read returns whole batches starting with the one holding target, and
// next, the offset after the last of them. found is false when the segment
// holds no batch at or after target. A range with batches holds a
// reference to the segment file (the caller releases it).
func (s *segment) read(target int64, maxBytes int32, maxOffset int64, minOneBatch bool) (r vfs.FileRange, next int64, found bool, err error) {
	if err := s.pin(); err != nil {
		return vfs.FileRange{}, 0, false, err
	}
	defer s.unpin()
	if t := s.tail.Load(); t != nil {
		if pos, size, next, found, ok := t.read(target, maxBytes, maxOffset, minOneBatch); ok {
			if size == 0 {
				return vfs.FileRange{}, 0, found, nil
			}
			r, err := s.shared.Range(pos, size)
			return r, next, true, err
		}
	}
	// Declared here, not by the caller: it escapes (the file's ReadAt
	// keeps it), and a read at the tail needs none.
	buf := new(headerBuf)
	limit := s.size.Load()
	pos, h, found, err := s.findBatch(target, limit, buf)
	if err != nil || !found {
		return vfs.FileRange{}, 0, found, err
	}
	if h.BaseOffset >= maxOffset {
		return vfs.FileRange{}, 0, true, nil
	}
	if h.TotalSize() > int64(maxBytes) && !minOneBatch {
		return vfs.FileRange{}, 0, true, nil
	}
	end, next := pos+h.TotalSize(), h.LastOffset()+1
	// A header that fails to parse past the first batch only ends the
	// range; the committed size guarantees it is not a torn write.
	_, scanErr := s.scan(end, limit, buf, func(p int64, bh protocol.BatchHeader) bool {
		if bh.BaseOffset >= maxOffset || p+bh.TotalSize()-pos > int64(maxBytes) {
			return false
		}
		end, next = p+bh.TotalSize(), bh.LastOffset()+1
		return true
	})
	r, err = s.shared.Range(pos, end-pos)
	if err != nil {
		return vfs.FileRange{}, 0, true, err
	}
	return r, next, true, scanErr
}

// tailBatchCount is how many of its last batches an active segment
// remembers.
const tailBatchCount = 4

// tailBatches are the last batches appended to a segment, oldest first:
// consecutive, and ending where the segment ended after its last append.
// A consumer that keeps up reads only these, and finding them here spares
// it reading their headers from the file one pread at a time, from the
// offset index's entry on (index.interval.bytes apart, so several batches
// of small records). Only an active segment remembers them (a few dozen
// bytes per partition written to since it was opened).
//
// mu is taken by the appender to add batches and by readers to look them
// up, each for a few loads and stores; it is the segment's last lock.
type tailBatches struct {
	mu sync.Mutex
	n  int
	b  [tailBatchCount]tailBatch
}

type tailBatch struct {
	pos, size, baseOffset, lastOffset int64
}

// rememberTail adds the batches just written at pos; the caller is the
// appender.
func (s *segment) rememberTail(pos int64, batches []appendedBatch) {
	t := s.tail.Load()
	if t == nil {
		t = &tailBatches{}
		s.tail.Store(t)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range batches {
		if t.n == len(t.b) {
			copy(t.b[:], t.b[1:])
			t.n--
		}
		t.b[t.n] = tailBatch{pos: pos, size: b.size, baseOffset: b.baseOffset, lastOffset: b.lastOffset}
		t.n++
		pos += b.size
	}
}

// read is segment.read answered from the remembered batches: the range
// (pos, size; size 0 for none), next and found as segment.read reports
// them. ok is false when the answer may lie before the oldest remembered
// batch (a reader that is behind), and the caller reads the file instead.
func (t *tailBatches) read(target int64, maxBytes int32, maxOffset int64, minOneBatch bool) (pos, size, next int64, found, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 || t.b[0].baseOffset > target {
		return 0, 0, 0, false, false
	}
	first := 0
	for first < t.n && t.b[first].lastOffset < target {
		first++
	}
	if first == t.n {
		return 0, 0, 0, false, true // nothing at or after target here
	}
	b := t.b[first]
	if b.baseOffset >= maxOffset || (b.size > int64(maxBytes) && !minOneBatch) {
		return 0, 0, 0, true, true
	}
	end, next := b.pos+b.size, b.lastOffset+1
	for _, later := range t.b[first+1 : t.n] {
		if later.baseOffset >= maxOffset || later.pos+later.size-b.pos > int64(maxBytes) {
			break
		}
		end, next = later.pos+later.size, later.lastOffset+1
	}
	return b.pos, end - b.pos, next, true, true
}

// appendedBatch describes one batch of an append, in file order.
type appendedBatch struct {
	size         int64
	baseOffset   int64
	lastOffset   int64
	maxTimestamp int64
	leaderEpoch  int32
}

// canHold reports whether offset fits the index's 32-bit relative offsets.
func (s *segment) canHold(offset int64) bool {
	d := offset - s.baseOffset
	return d >= 0 && d <= math.MaxInt32
}

// append writes data (whole batches described by batches) at the end with
// one write, publishes the new size and updates the indexes. On a failed
// write the file is cut back so that no partial batch stays behind; written
// reports whether the batches are in the log (an error with written set
// came from the indexes, and cutBack false means the partial write may
// still be in the file).
func (s *segment) append(data []byte, batches []appendedBatch, indexInterval int64) (written, cutBack bool, err error) {
	if err := s.pin(); err != nil {
		return false, true, err
	}
	defer s.unpin()
	pos := s.size.Load()
	if _, err := s.log.WriteAt(data, pos); err != nil {
		if terr := s.log.Truncate(pos); terr != nil {
			return false, false, fmt.Errorf("appending to %s: %w (and cutting back the partial write: %v)", s.log.Name(), err, terr)
		}
		return false, true, fmt.Errorf("appending to %s: %w", s.log.Name(), err)
	}
	s.size.Store(pos + int64(len(data)))
	s.rememberTail(pos, batches)
	var indexErr error
	for _, b := range batches {
		if pos == 0 {
			s.firstBatchTs = b.maxTimestamp
		}
		if err := s.indexBatch(pos, b, indexInterval); err != nil && indexErr == nil {
			indexErr = err
		}
		pos += b.size
		s.nextOffset = b.lastOffset + 1
	}
	return true, true, indexErr
}

// indexBatch records a batch at pos in the sparse indexes, as Kafka's
// LogSegment does: an entry once more than index.interval.bytes were
// written since the last one.
func (s *segment) indexBatch(pos int64, b appendedBatch, indexInterval int64) error {
	if b.maxTimestamp > s.maxTimestamp.Load() {
		s.maxTimestamp.Store(b.maxTimestamp)
		s.offsetOfMaxTs = b.lastOffset
	}
	var err error
	if s.bytesSinceIndex > indexInterval {
		if err = s.offsets.append(s.fsys, b.lastOffset, pos); errors.Is(err, errIndexFull) {
			err = nil // the roll check normally prevents this; the index is sparse anyway
		}
		if terr := s.times.maybeAppend(s.fsys, s.maxTimestamp.Load(), s.offsetOfMaxTs, false); terr != nil && !errors.Is(terr, errIndexFull) && err == nil {
			err = terr
		}
		s.bytesSinceIndex = 0
		if s.indexesPending {
			offsetsAbsent, timesAbsent := s.offsets.isAbsent(), s.times.isAbsent()
			s.indexCreated = s.indexCreated || !offsetsAbsent || !timesAbsent
			s.indexesPending = offsetsAbsent || timesAbsent
		}
	}
	s.bytesSinceIndex += b.size
	return err
}

// recover rescans the whole segment: every batch's length and CRC are
// checked, offsets must increase, and the first bad or torn batch ends the
// segment (the file is cut there). The indexes are rebuilt and fn sees each
// good batch (for the leader-epoch cache and producer state). It returns the
// number of bytes cut.
func (s *segment) recover(indexInterval int64, fn func(batch []byte, h protocol.BatchHeader)) (int64, error) {
	if err := s.pin(); err != nil {
		return 0, err
	}
	defer s.unpin()
	if err := s.offsets.truncateEntries(0); err != nil {
		return 0, err
	}
	if err := s.times.truncateEntries(0); err != nil {
		return 0, err
	}
	// Rebuilt by fn's caller, which knows the transactions (Log.load).
	if err := s.txns.reset(s.fsys); err != nil {
		return 0, err
	}
	st, err := s.log.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", s.log.Name(), err)
	}
	fileSize := st.Size()
	s.maxTimestamp.Store(-1)
	s.offsetOfMaxTs, s.bytesSinceIndex, s.firstBatchTs, s.nextOffset = s.baseOffset, 0, -1, s.baseOffset
	var hb headerBuf
	var batch []byte
	pos := int64(0)
	for pos < fileSize {
		h, err := s.readHeader(pos, fileSize, &hb)
		if errors.Is(err, errCorruptBatch) {
			break
		}
		if err != nil {
			return 0, err
		}
		if h.BaseOffset < s.nextOffset || h.LastOffset() < h.BaseOffset || !s.canHold(h.LastOffset()) {
			break
		}
		n := int(h.TotalSize())
		if cap(batch) < n {
			batch = make([]byte, n)
		}
		batch = batch[:n]
		if _, err := s.log.ReadAt(batch, pos); err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("reading %s at %d: %w", s.log.Name(), pos, err)
		}
		if !protocol.CheckBatchCRC(batch) {
			break
		}
		if pos == 0 {
			s.firstBatchTs = h.MaxTimestamp
		}
		if err := s.indexBatch(pos, appendedBatch{size: h.TotalSize(), lastOffset: h.LastOffset(), maxTimestamp: h.MaxTimestamp}, indexInterval); err != nil {
			return 0, err
		}
		s.nextOffset = h.LastOffset() + 1
		if fn != nil {
			fn(batch, h)
		}
		pos += h.TotalSize()
	}
	cut := fileSize - pos
	if cut > 0 {
		if err := s.log.Truncate(pos); err != nil {
			return 0, fmt.Errorf("truncating torn tail of %s: %w", s.log.Name(), err)
		}
	}
	s.size.Store(pos)
	return cut, nil
}

// loadTrusted opens a segment below the recovery point without rescanning
// it: the indexes are sanity-checked and the tail after the last index
// entry is read to learn the next offset and max timestamp. A segment that
// fails the checks is recovered instead.
func (s *segment) loadTrusted(indexInterval int64) (needsRecovery bool, err error) {
	if err := s.pin(); err != nil {
		return false, err
	}
	defer s.unpin()
	size := s.size.Load()
	if err := s.offsets.validPrefix(size); err != nil {
		return false, err
	}
	if err := s.reloadTail(indexInterval); err != nil {
		if errors.Is(err, errCorruptBatch) {
			return true, nil
		}
		return false, err
	}
	if err := s.times.validPrefix(s.nextOffset); err != nil {
		return false, err
	}
	if ts, _, ok := s.times.last(); ok && ts > s.maxTimestamp.Load() {
		s.maxTimestamp.Store(ts)
	}
	// A transaction index that does not fit the segment is rebuilt by
	// recovering the segment, as Kafka does when its sanity check fails.
	return !s.txns.validFor(s.nextOffset), nil
}

// reloadTail recomputes the appender-owned fields by scanning from the last
// offset index entry to the end (after load or truncation).
func (s *segment) reloadTail(indexInterval int64) error {
	size := s.size.Load()
	var hb headerBuf
	startOff, startPos := s.baseOffset, int64(0)
	if off, pos, ok := s.offsets.lastEntry(); ok {
		startOff, startPos = off, pos
	}
	maxTs, offOfMax := int64(-1), s.baseOffset
	if ts, off, ok := s.times.last(); ok {
		maxTs, offOfMax = ts, off
	}
	next := s.baseOffset
	if startPos > 0 {
		next = startOff + 1
	}
	end, err := s.scan(startPos, size, &hb, func(_ int64, h protocol.BatchHeader) bool {
		if h.MaxTimestamp > maxTs {
			maxTs, offOfMax = h.MaxTimestamp, h.LastOffset()
		}
		next = h.LastOffset() + 1
		return true
	})
	if err != nil {
		return err
	}
	if end != size {
		return errCorruptBatch
	}
	s.nextOffset = next
	s.maxTimestamp.Store(maxTs)
	s.offsetOfMaxTs = offOfMax
	s.bytesSinceIndex = size - startPos
	if startPos == 0 && size > 0 {
		s.bytesSinceIndex = size
	}
	s.firstBatchTs = -1
	if size > 0 {
		h, err := s.readHeader(0, size, &hb)
		if err != nil {
			return err
		}
		s.firstBatchTs = h.MaxTimestamp
	}
	return nil
}

// truncateTo removes the batch holding offset and everything after it.
func (s *segment) truncateTo(offset int64, indexInterval int64) error {
	if err := s.pin(); err != nil {
		return err
	}
	defer s.unpin()
	size := s.size.Load()
	var hb headerBuf
	_, start := s.offsets.lookup(offset - 1)
	cut, err := s.scan(start, size, &hb, func(_ int64, h protocol.BatchHeader) bool {
		return h.LastOffset() < offset
	})
	if err != nil {
		return err
	}
	if err := s.txns.truncateTo(s.fsys, offset); err != nil {
		return err
	}
	if cut >= size {
		return nil
	}
	// The remembered batches may be among those cut; readers are kept
	// out meanwhile (Log.TruncateTo holds segMu), and the next append
	// starts remembering afresh.
	s.tail.Store(nil)
	s.truncations.Add(1)
	defer s.truncations.Add(1)
	if err := s.log.Truncate(cut); err != nil {
		return fmt.Errorf("truncating %s: %w", s.log.Name(), err)
	}
	s.size.Store(cut)
	if err := s.offsets.truncateToPosition(cut); err != nil {
		return err
	}
	if err := s.times.truncateToOffset(offset); err != nil {
		return err
	}
	return s.reloadTail(indexInterval)
}

// shouldRoll applies Kafka's roll rules before an append of size bytes whose
// largest offset is lastOffset and largest timestamp maxTs.
func (s *segment) shouldRoll(cfg config.Topic, size int64, lastOffset, maxTs, nowMs int64) bool {
	if !s.canHold(lastOffset) {
		return true
	}
	cur := s.size.Load()
	if cur == 0 {
		return false
	}
	if cur > int64(cfg.SegmentBytes)-size {
		return true
	}
	if s.timeWaitedForRoll(nowMs, maxTs) > cfg.SegmentMs-s.rollJitterMs {
		return true
	}
	return s.offsets.full() || s.times.full()
}

// timeWaitedForRoll measures segment age from the first batch's timestamp
// when there is one, else from creation by the wall clock.
func (s *segment) timeWaitedForRoll(nowMs, messageTs int64) int64 {
	if s.firstBatchTs >= 0 {
		return messageTs - s.firstBatchTs
	}
	return nowMs - s.createdMs
}

// onBecomeInactive adds the final time index entry and trims the indexes
// to their entries, as Kafka does on roll and close.
func (s *segment) onBecomeInactive() error {
	// Consumers at the log's tail read the new active segment: an
	// inactive one keeps no memory for them.
	s.tail.Store(nil)
	s.fmu.Lock()
	untouched := s.untouched
	s.fmu.Unlock()
	if untouched {
		// The shutdown that wrote the log state did this already.
		return nil
	}
	if err := s.pin(); err != nil {
		return err
	}
	defer s.unpin()
	if ts := s.maxTimestamp.Load(); ts >= 0 {
		if err := s.times.maybeAppend(s.fsys, ts, s.offsetOfMaxTs, true); err != nil && !errors.Is(err, errIndexFull) {
			return err
		}
	}
	return s.trimIndexesLocked()
}

// trimIndexes cuts the indexes to their entries (an inactive segment).
func (s *segment) trimIndexes() error {
	if err := s.pin(); err != nil {
		return err
	}
	defer s.unpin()
	return s.trimIndexesLocked()
}

// trimIndexesLocked trims; the caller holds a pin.
func (s *segment) trimIndexesLocked() error {
	if err := s.offsets.trim(s.fsys); err != nil {
		return err
	}
	return s.times.trim(s.fsys)
}

// becomeActive preallocates the indexes again (after truncation made an
// older segment the last one).
func (s *segment) becomeActive(indexBytes int64) error {
	if err := s.pin(); err != nil {
		return err
	}
	defer s.unpin()
	if err := s.offsets.resize(s.fsys, indexBytes); err != nil {
		return err
	}
	return s.times.resize(s.fsys, indexBytes)
}

func (s *segment) sync() error {
	if err := s.pin(); err != nil {
		return err
	}
	defer s.unpin()
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", s.log.Name(), err)
	}
	if err := s.offsets.sync(); err != nil {
		return err
	}
	if err := s.times.sync(); err != nil {
		return err
	}
	return s.txns.sync(s.fsys)
}

// close closes the segment for good (the log closes, or the segment is
// deleted). Files in use are closed by the last unpin.
func (s *segment) close() error {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.log == nil || s.pins > 0 {
		return nil
	}
	s.cache.inUse(s) // out of the idle list
	err := s.closeFilesLocked()
	s.cache.closed()
	return err
}

// replay hands fn every batch header from the batch holding from to the
// end (rebuilding producer state).
func (s *segment) replay(from int64, fn func(pos int64, h protocol.BatchHeader) bool) error {
	if err := s.pin(); err != nil {
		return err
	}
	defer s.unpin()
	_, start := s.offsets.lookup(from)
	if s.baseOffset > from {
		start = 0
	}
	var hb headerBuf
	if _, err := s.scan(start, s.size.Load(), &hb, fn); err != nil {
		return fmt.Errorf("replaying %s: %w", s.log.Name(), err)
	}
	return nil
}

// segmentSuffixes are the files that belong to a segment.
var segmentSuffixes = []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix}

// renameDeleted renames the segment's files to *.deleted; open descriptors
// stay valid, so a fetch response already holding a FileRange completes.
func (s *segment) renameDeleted() error {
	for _, suf := range segmentSuffixes {
		name := segmentFileName(s.dir, s.baseOffset, suf)
		if err := s.fsys.Rename(name, name+deletedSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("renaming %s for deletion: %w", name, err)
		}
	}
	return nil
}

// removeDeleted closes the segment and removes its *.deleted files.
func (s *segment) removeDeleted() error {
	err := s.close()
	for _, suf := range segmentSuffixes {
		name := segmentFileName(s.dir, s.baseOffset, suf) + deletedSuffix
		if rerr := s.fsys.Remove(name); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	return err
}

// findByTimestamp finds the first record at or after startOffset whose
// timestamp is >= ts (Kafka's LogSegment.findOffsetByTimestamp): the time
// index narrows the start, then batches whose max timestamp reaches ts are
// opened and their records walked.
func (s *segment) findByTimestamp(ts, startOffset int64) (offset, timestamp int64, leaderEpoch int32, found bool, err error) {
	if err := s.pin(); err != nil {
		return 0, 0, 0, false, err
	}
	defer s.unpin()
	_, idxOffset := s.times.lookup(ts)
	_, pos := s.offsets.lookup(max(idxOffset, startOffset))
	limit := s.size.Load()
	var hb headerBuf
	var batch, scratch []byte
	for pos < limit {
		h, err := s.readHeader(pos, limit, &hb)
		if err != nil {
			return 0, 0, 0, false, err
		}
		if h.MaxTimestamp >= ts && h.LastOffset() >= startOffset {
			n := int(h.TotalSize())
			if cap(batch) < n {
				batch = make([]byte, n)
			}
			batch = batch[:n]
			if _, err := s.log.ReadAt(batch, pos); err != nil && !errors.Is(err, io.EOF) {
				return 0, 0, 0, false, fmt.Errorf("reading %s at %d: %w", s.log.Name(), pos, err)
			}
			err := walkRecordTimestamps(batch, h, &scratch, func(o, t int64) bool {
				if t >= ts && o >= startOffset {
					offset, timestamp, found = o, t, true
					return false
				}
				return true
			})
			if err != nil {
				return 0, 0, 0, false, err
			}
			if found {
				leaderEpoch = h.PartitionLeaderEpoch
				if leaderEpoch < 0 {
					leaderEpoch = -1
				}
				return offset, timestamp, leaderEpoch, true, nil
			}
		}
		pos += h.TotalSize()
	}
	return 0, 0, 0, false, nil
}
