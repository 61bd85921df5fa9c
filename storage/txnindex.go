package storage

// The transaction index: <base>.txnindex, Kafka's TransactionIndex.
//
// A segment's txnindex lists the aborted transactions whose abort marker
// the segment holds, in marker order. Each entry is 34 bytes, big-endian:
// version int16 (0), producer id int64, first offset int64 (of the
// transaction's first batch on this partition), last offset int64 (the
// abort marker's), last stable offset int64 (the LSO when the marker was
// written, ignoring the high watermark: the first offset of the oldest
// other open transaction, or the marker's offset plus one). Commits are
// not indexed, nor aborts of transactions without data here. A read_committed fetch reports the aborted transactions
// that overlap the data it returns (Log.ReadWithAborted), and the
// consumer drops their records; the cleaner finds the transactions whose
// data it may discard here (compact.go).
//
// As in Kafka the file exists only once a segment has an entry: most
// segments have none, and a segment without one costs neither a file nor
// a lookup. The entries are also kept in memory, published through an
// atomic pointer: fetches read them without a lock and without I/O, the
// appender alone adds to them (under Log.mu), and a segment's entries
// are few (one per aborted transaction whose marker it holds).
//
// Durability follows the segment's: the file is synced with it
// (segment.sync), a segment rescanned by recovery gets its txnindex
// rebuilt from its markers and the producer state (Log.load), truncation
// cuts the entries of the markers it removes, and the file is renamed,
// deleted and moved with its segment (it is among segmentSuffixes).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

const (
	txnIndexEntrySize = 34
	txnIndexVersion   = 0
)

// abortedTxn is one entry of a transaction index (Kafka's AbortedTxn).
type abortedTxn struct {
	producerID       int64
	firstOffset      int64
	lastOffset       int64 // the abort marker
	lastStableOffset int64
}

// AbortedTransaction is an aborted transaction as a read_committed fetch
// reports it: the consumer drops the producer's transactional records from
// FirstOffset until it meets the producer's abort marker.
type AbortedTransaction struct {
	ProducerID  int64
	FirstOffset int64
}

func (a abortedTxn) encode(b *[txnIndexEntrySize]byte) {
	be := binary.BigEndian
	be.PutUint16(b[0:], txnIndexVersion)
	be.PutUint64(b[2:], uint64(a.producerID))
	be.PutUint64(b[10:], uint64(a.firstOffset))
	be.PutUint64(b[18:], uint64(a.lastOffset))
	be.PutUint64(b[26:], uint64(a.lastStableOffset))
}

var errCorruptTxnIndex = errors.New("corrupt transaction index")

func decodeAbortedTxn(b []byte) (abortedTxn, error) {
	be := binary.BigEndian
	if v := int16(be.Uint16(b)); v != txnIndexVersion {
		// Kafka refuses versions above its own; 0 is the only one.
		return abortedTxn{}, fmt.Errorf("%w: entry version %d", errCorruptTxnIndex, v)
	}
	return abortedTxn{
		producerID:       int64(be.Uint64(b[2:])),
		firstOffset:      int64(be.Uint64(b[10:])),
		lastOffset:       int64(be.Uint64(b[18:])),
		lastStableOffset: int64(be.Uint64(b[26:])),
	}, nil
}

// txnIndex is one segment's transaction index.
//
// mu serialises the file's writes, truncations and syncs (an append by the
// appender, a sync by a flush) and guards name, size and dirty. It is an
// index lock: nothing is taken under it. entries are read without it.
type txnIndex struct {
	baseOffset int64

	mu   sync.Mutex
	file segmentFile
	// size is the bytes of whole entries in the file, 0 when there is
	// none (or no file); a torn entry after it is written over.
	size int64
	// dirty: written or truncated since the last sync.
	dirty bool
	// corrupt: the file held an entry of an unknown version; the segment
	// is recovered, which rebuilds the index (validFor refuses it).
	corrupt bool

	// entries are published whole: the appender stores a slice that
	// extends the previous one (readers never look past their own
	// length), and a truncation or reset stores a fresh copy, so no
	// element a reader may see is ever written again.
	entries atomic.Pointer[[]abortedTxn]
}

// openTxnIndex reads the index file if there is one. A torn last entry
// (a crash in the middle of an append) is ignored; an entry of an unknown
// version marks the index corrupt (Kafka fails the read; the segment's
// recovery rebuilds it here).
func openTxnIndex(fsys vfs.FS, file segmentFile, baseOffset int64) (*txnIndex, error) {
	x := &txnIndex{baseOffset: baseOffset, file: file}
	name := file.String()
	data, err := vfs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return x, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading transaction index %s: %w", name, err)
	}
	n := len(data) / txnIndexEntrySize
	if n == 0 {
		return x, nil
	}
	entries := make([]abortedTxn, 0, n)
	for i := 0; i < n; i++ {
		a, err := decodeAbortedTxn(data[i*txnIndexEntrySize:])
		if err != nil {
			x.corrupt = true
			return x, nil
		}
		entries = append(entries, a)
	}
	x.size = int64(n * txnIndexEntrySize)
	x.entries.Store(&entries)
	return x, nil
}

// all returns the entries, in marker order; the caller must not change
// them.
func (x *txnIndex) all() []abortedTxn {
	if p := x.entries.Load(); p != nil {
		return *p
	}
	return nil
}

// lastMarker is the offset of the last abort marker indexed, -1 if none.
func (x *txnIndex) lastMarker() int64 {
	if e := x.all(); len(e) > 0 {
		return e[len(e)-1].lastOffset
	}
	return -1
}

// validFor reports whether the entries fit a segment whose batches end
// before nextOffset (Kafka's sanityCheck, plus order and range): markers
// strictly increasing, within the segment, each after its transaction's
// start.
func (x *txnIndex) validFor(nextOffset int64) bool {
	if x.corrupt {
		return false
	}
	last := int64(-1)
	for _, a := range x.all() {
		if a.lastOffset < x.baseOffset || a.lastOffset >= nextOffset || a.lastOffset <= last || a.firstOffset > a.lastOffset {
			return false
		}
		last = a.lastOffset
	}
	return true
}

// append adds an entry at the end of the file (creating it: created
// reports a new directory entry, which the log's next flush syncs) and
// publishes it. The appender calls it, with markers in increasing order.
func (x *txnIndex) append(fsys vfs.FS, a abortedTxn) (created bool, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if last := x.lastMarker(); a.lastOffset <= last {
		return false, fmt.Errorf("transaction index %s: marker %d does not follow %d", x.file, a.lastOffset, last)
	}
	flag := os.O_RDWR
	if x.size == 0 {
		// The first entry: the file may be absent, or hold a torn entry
		// or stale bytes of a truncation a crash undid.
		flag |= os.O_CREATE
		if _, serr := fsys.Stat(x.file.String()); errors.Is(serr, fs.ErrNotExist) {
			created = true
		}
	}
	f, err := fsys.OpenFile(x.file.String(), flag, 0o644)
	if err != nil {
		return false, fmt.Errorf("opening transaction index %s: %w", x.file, err)
	}
	var buf [txnIndexEntrySize]byte
	a.encode(&buf)
	_, werr := f.WriteAt(buf[:], x.size)
	if werr == nil {
		// Anything past the new entry is debris (a torn entry).
		werr = truncateIfLonger(f, x.size+txnIndexEntrySize)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return created, fmt.Errorf("writing transaction index %s: %w", x.file, werr)
	}
	x.size += txnIndexEntrySize
	x.dirty = true
	next := append(x.all(), a)
	x.entries.Store(&next)
	return created, nil
}

func truncateIfLonger(f vfs.File, size int64) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() > size {
		return f.Truncate(size)
	}
	return nil
}

// truncateTo drops the entries of markers at or after offset (Kafka's
// TransactionIndex.truncateTo).
func (x *txnIndex) truncateTo(fsys vfs.FS, offset int64) error {
	cur := x.all()
	n := sort.Search(len(cur), func(i int) bool { return cur[i].lastOffset >= offset })
	if n == len(cur) {
		return nil
	}
	return x.keep(fsys, n)
}

// reset drops every entry (a segment about to be rescanned).
func (x *txnIndex) reset(fsys vfs.FS) error {
	if len(x.all()) == 0 && x.size == 0 && !x.corrupt {
		return nil
	}
	return x.keep(fsys, 0)
}

// keep cuts the index to its first n entries.
func (x *txnIndex) keep(fsys vfs.FS, n int) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	kept := slices.Clone(x.all()[:n])
	size := int64(n * txnIndexEntrySize)
	f, err := fsys.OpenFile(x.file.String(), os.O_RDWR, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("opening transaction index %s: %w", x.file, err)
	default:
		terr := f.Truncate(size)
		if cerr := f.Close(); terr == nil {
			terr = cerr
		}
		if terr != nil {
			return fmt.Errorf("truncating transaction index %s: %w", x.file, terr)
		}
		x.dirty = true
	}
	x.size, x.corrupt = size, false
	x.entries.Store(&kept)
	return nil
}

// sync makes the file durable when it changed since the last sync.
func (x *txnIndex) sync(fsys vfs.FS) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.dirty {
		return nil
	}
	f, err := fsys.OpenFile(x.file.String(), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		x.dirty = false // removed meanwhile (deleted with its segment)
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening transaction index %s: %w", x.file, err)
	}
	serr := f.Sync()
	if cerr := f.Close(); serr == nil {
		serr = cerr
	}
	if serr != nil {
		return fmt.Errorf("syncing transaction index %s: %w", x.file, serr)
	}
	x.dirty = false
	return nil
}

// relocate names the file in dir (a log move).
func (x *txnIndex) relocate(dir string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.file.dir = dir
}

// bytes is the size of the file's whole entries (a log move copies them).
func (x *txnIndex) bytes() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.size
}

// collect calls fn for each entry whose transaction overlaps
// [fetchOffset, upperBound) and reports whether the search is complete:
// an entry's last stable offset reached upperBound, so no later marker
// can end a transaction that began below it (Kafka's
// TransactionIndex.collectAbortedTxns).
func (x *txnIndex) collect(fetchOffset, upperBound int64, fn func(abortedTxn)) bool {
	entries := x.all()
	// An entry whose marker is below fetchOffset neither overlaps nor
	// completes the search (its last stable offset is at most its
	// marker plus one, not above fetchOffset): skip them all at once.
	i := sort.Search(len(entries), func(i int) bool { return entries[i].lastOffset >= fetchOffset })
	for _, a := range entries[i:] {
		if a.firstOffset < upperBound {
			fn(a)
		}
		if a.lastStableOffset >= upperBound {
			return true
		}
	}
	return false
}

// txnMarker is a transaction marker of the append in progress.
type txnMarker struct {
	producerID int64
	offset     int64
	abort      bool
}

// indexAborts writes the entries of an append's abort markers into seg,
// the segment that holds them (Kafka's updateTxnIndex after each completed
// transaction); ended are the transactions the append's markers ended, in
// marker order. The caller is the appender, after the producer state took
// the append.
func (l *Log) indexAborts(seg *segment, markers []txnMarker, ended []completedTxn) error {
	for _, m := range markers {
		if !m.abort {
			continue
		}
		if err := l.indexAbort(seg, m, markers, ended); err != nil {
			return err
		}
	}
	return nil
}

// indexAbort writes one abort marker's entry. A marker that ends no
// transaction with data here has none: as in Kafka, an empty transaction
// neither holds the last stable offset back nor needs filtering.
func (l *Log) indexAbort(seg *segment, m txnMarker, markers []txnMarker, ended []completedTxn) error {
	a := abortedTxn{producerID: m.producerID, firstOffset: -1, lastOffset: m.offset}
	for _, c := range ended {
		if c.markerOffset == m.offset {
			a.firstOffset = c.firstOffset
		}
	}
	if a.firstOffset < 0 {
		return nil
	}
	// The last stable offset as Kafka's producer state gives it when the
	// marker is applied: the oldest other transaction still open, which
	// includes those that later markers of this same append end.
	a.lastStableOffset = m.offset + 1
	for pid, first := range l.producers.ongoing {
		if pid != m.producerID {
			a.lastStableOffset = min(a.lastStableOffset, first)
		}
	}
	for _, c := range ended {
		if c.markerOffset > m.offset && markerProducer(markers, c.markerOffset) != m.producerID {
			a.lastStableOffset = min(a.lastStableOffset, c.firstOffset)
		}
	}
	created, err := seg.txns.append(l.fsys, a)
	if created {
		l.dirDirty.Store(true)
	}
	if err != nil {
		return err
	}
	l.abortedEnd.Store(max(l.abortedEnd.Load(), m.offset))
	return nil
}

// markerProducer is the producer of the marker at offset.
func markerProducer(markers []txnMarker, offset int64) int64 {
	for _, m := range markers {
		if m.offset == offset {
			return m.producerID
		}
	}
	return -1
}

// recoverTxnIndex replays one batch of a segment being recovered into the
// producer state and indexes the transaction an abort marker ends (Kafka's
// LogSegment.recover with updateProducerState). The caller is loading the
// log, with the producer state at the batch.
func (l *Log) recoverTxnIndex(seg *segment, batch []byte, h protocol.BatchHeader, scratch *producerAppend) error {
	ps := l.producers
	ended := len(ps.completed)
	ps.replay(h, scratch)
	var err error
	if h.HasProducerID() && h.IsControl() && controlType(batch) == protocol.ControlAbort {
		err = l.indexAbort(seg, txnMarker{producerID: h.ProducerID, offset: h.BaseOffset, abort: true}, nil, ps.completed[ended:])
	}
	// The state is rebuilt again once the log is loaded: what ended
	// here is not kept for the last stable offset.
	ps.completed = ps.completed[:0]
	return err
}
