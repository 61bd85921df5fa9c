package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"syscall"

	"github.com/gregorbroker/gregor/vfs"
)

const (
	offsetIndexEntrySize = 8  // relative offset u32, position u32
	timeIndexEntrySize   = 12 // timestamp i64, relative offset u32
)

var errIndexFull = errors.New("index is full")

// indexFile is a file of fixed-size entries kept in memory: memory-mapped
// when the file has a real descriptor (as Kafka does), otherwise a heap copy
// that every append also writes through to the file (MemFS in tests).
//
// mu guards data, mapped, entries and maxEntries. The log's appender is the
// only writer; readers (fetch, ListOffsets) take the read lock, so a lookup
// never sees a half-written entry or a region being remapped.
type indexFile struct {
	file      segmentFile
	fsys      vfs.FS
	f         vfs.File // nil while closed (the segment's files are closed)
	entrySize int

	mu     sync.RWMutex
	data   []byte // capacity region: mapped file or heap copy
	mapped bool
	// changed: written, cut or resized by this process. A closed index
	// that changed (a later flush must sync it) is opened with its
	// segment; any other stays closed until a reader needs its entries
	// (rlockData) or it takes one (appendEntry), so that a segment's
	// first use after a start, or after the cache closed it, opens one
	// file rather than three.
	changed bool
	// absent: the index of a segment created by this process, whose
	// file is created with its first entry (or when a roll trims it):
	// a new partition creates its log file only.
	absent     bool
	entries    int
	maxEntries int
}

// openIndexFile opens (creating) an index file. When size > 0 the file is
// resized to it (rounded down to whole entries): an active segment's index
// is preallocated to segment.index.bytes. With size 0 the file keeps its
// length. Entries are taken from the file's length; the caller validates and
// trims them.
func openIndexFile(fsys vfs.FS, file segmentFile, entrySize int, size int64) (*indexFile, error) {
	name := file.String()
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening index %s: %w", name, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat index %s: %w", name, err)
	}
	length := st.Size() - st.Size()%int64(entrySize)
	idx := &indexFile{file: file, fsys: fsys, f: f, entrySize: entrySize, entries: int(length) / entrySize}
	target := length
	if size > 0 {
		target = size - size%int64(entrySize)
		if target < length {
			// Never cut live entries when the configured size shrank;
			// Kafka rolls the segment instead (the index reports full).
			target = length
		}
	}
	if err := idx.mapLocked(target, st.Size() != target); err != nil {
		f.Close()
		return nil, err
	}
	return idx, nil
}

// mapLocked sizes the file to length bytes and maps (or loads) it.
func (x *indexFile) mapLocked(length int64, truncate bool) error {
	if truncate {
		if err := x.f.Truncate(length); err != nil {
			return fmt.Errorf("resizing index %s: %w", x.f.Name(), err)
		}
	}
	x.maxEntries = int(length) / x.entrySize
	if x.entries > x.maxEntries {
		x.entries = x.maxEntries
	}
	if length == 0 {
		x.data, x.mapped = nil, false
		return nil
	}
	if of, ok := x.f.(vfs.OSFiler); ok {
		data, err := syscall.Mmap(int(of.OSFile().Fd()), 0, int(length), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err == nil {
			// Entries are appended one page at a time and looked up
			// by binary search: neither gains from readahead. Without
			// this advice the first touch of a page of a preallocated
			// (sparse) index faults in a whole readahead window of
			// zeroed pages, which made zero-filling index pages a
			// tenth of the broker's CPU time while it took produce
			// traffic on many partitions. Advice only: an error
			// changes nothing that matters.
			_ = syscall.Madvise(data, syscall.MADV_RANDOM)
			x.data, x.mapped = data, true
			return nil
		}
		// Fall through to the heap copy: some filesystems refuse mmap.
	}
	data := make([]byte, length)
	n, err := x.f.ReadAt(data, 0)
	if err != nil && int64(n) < length {
		// A short file after a crash: the missing tail reads as zeros.
		clear(data[n:])
	}
	x.data, x.mapped = data, false
	return nil
}

func (x *indexFile) unmapLocked() error {
	var err error
	if x.mapped && x.data != nil {
		err = syscall.Munmap(x.data)
	}
	x.data, x.mapped = nil, false
	return err
}

// resize changes the file's capacity (trim on roll and close, grow back to
// segment.index.bytes when a segment becomes active again after truncation).
func (x *indexFile) resize(fsys vfs.FS, length int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	length -= length % int64(x.entrySize)
	if length < int64(x.entries*x.entrySize) {
		length = int64(x.entries * x.entrySize)
	}
	if length == int64(x.maxEntries*x.entrySize) {
		return nil
	}
	if x.f == nil {
		// Trimmed or grown on disk now: a reader of the files (a
		// restart, Kafka's tools) takes the entries from the length.
		if err := x.openLocked(fsys); err != nil {
			return err
		}
	}
	x.changed = true
	if err := x.unmapLocked(); err != nil {
		return fmt.Errorf("unmapping index %s: %w", x.f.Name(), err)
	}
	return x.mapLocked(length, true)
}

func (x *indexFile) trim(fsys vfs.FS) error {
	x.mu.Lock()
	if x.absent && x.entries == 0 {
		// An inactive segment's index file holds its entries, none
		// here: it is created empty, or a stale one a crash left is
		// emptied, without mapping anything.
		f, err := fsys.OpenFile(x.file.String(), os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			x.mu.Unlock()
			return fmt.Errorf("creating index %s: %w", x.file, err)
		}
		x.absent, x.maxEntries = false, 0
		x.mu.Unlock()
		return nil
	}
	if x.absent {
		// An inactive segment's index file holds its entries: it is
		// created, or a stale one left by a crash truncated, now.
		if err := x.openLocked(fsys); err != nil {
			x.mu.Unlock()
			return err
		}
		x.changed = true
	}
	n := x.entries
	x.mu.Unlock()
	return x.resize(fsys, int64(n*x.entrySize))
}

// appendEntry writes one whole entry after the last one.
func (x *indexFile) appendEntry(fsys vfs.FS, entry []byte) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.entries >= x.maxEntries {
		return errIndexFull
	}
	if x.f == nil {
		if err := x.openLocked(fsys); err != nil {
			if isNoSpace(err) {
				// No room to create or size the file: the entry is
				// skipped (the index is sparse), and the next one
				// tries again.
				return fmt.Errorf("%w: %w", errIndexFull, err)
			}
			return err
		}
	}
	x.changed = true
	off := x.entries * x.entrySize
	// The file is written from data, not from entry: handing entry to
	// the File interface would make every caller's entry escape to the
	// heap, an allocation per indexed append.
	copy(x.data[off:off+x.entrySize], entry)
	if !x.mapped {
		if _, err := x.f.WriteAt(x.data[off:off+x.entrySize], int64(off)); err != nil {
			clear(x.data[off : off+x.entrySize])
			return fmt.Errorf("writing index %s: %w", x.f.Name(), err)
		}
	}
	x.entries++
	return nil
}

// truncateEntries keeps the first n entries and zeroes the rest, so that a
// crash cannot resurrect stale entries past the new end.
func (x *indexFile) truncateEntries(n int) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if n >= x.entries {
		return nil
	}
	if x.f == nil {
		if err := x.openLocked(x.fsys); err != nil {
			return err
		}
	}
	from, to := n*x.entrySize, x.entries*x.entrySize
	x.entries = n
	x.changed = true
	if x.mapped && to-from > os.Getpagesize() {
		// Cut the file at the new end and extend it again: the kernel
		// drops the pages past the cut (zeroing the tail of the one it
		// keeps), and the hole reads as zeros. Zeroing them through the
		// mapping instead faults in and dirties every page: after a
		// crash every active segment's preallocated index counts as
		// full, and its recovery zeroed segment.index.bytes (10 MiB) of
		// each of its two indexes, gigabytes of writeback on a node with
		// a few hundred partitions, before the broker served. The
		// mapping stays valid: nothing reads past the cut before the
		// file is whole again (x.mu is held).
		if err := x.f.Truncate(int64(from)); err != nil {
			return fmt.Errorf("truncating index %s: %w", x.f.Name(), err)
		}
		if err := x.f.Truncate(int64(len(x.data))); err != nil {
			// Past the cut the mapping has no file behind it: the
			// index takes no entry there (it reports full, and the
			// segment rolls).
			x.maxEntries = n
			return fmt.Errorf("truncating index %s: %w", x.f.Name(), err)
		}
		return nil
	}
	clear(x.data[from:to])
	if !x.mapped {
		if _, err := x.f.WriteAt(x.data[from:to], int64(from)); err != nil {
			return fmt.Errorf("truncating index %s: %w", x.f.Name(), err)
		}
	}
	return nil
}

func (x *indexFile) count() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.entries
}

func (x *indexFile) full() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.entries >= x.maxEntries
}

func (x *indexFile) sync() error {
	// The appender may open the file meanwhile (appendEntry); one it
	// opens now holds entries of batches after those being flushed.
	x.mu.RLock()
	f := x.f
	x.mu.RUnlock()
	if f == nil {
		// Never changed by this process (openedWithSegment).
		return nil
	}
	// fsync also writes back pages dirtied through a shared mapping.
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing index %s: %w", f.Name(), err)
	}
	return nil
}

// isAbsent reports whether the file is still to be created.
func (x *indexFile) isAbsent() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.absent
}

// openedWithSegment says whether a closed index must be opened when its
// segment's files are: it has changes a flush must sync.
func (x *indexFile) openedWithSegment() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.changed
}

// rlockData read-locks x with its entries readable: a closed index with
// entries is opened first (the caller holds a pin on the segment). The
// read lock is held on return, also with an error (the entries are then
// not readable: the caller treats the index as empty or fails).
func (x *indexFile) rlockData() error {
	x.mu.RLock()
	if x.entries == 0 || x.data != nil {
		return nil
	}
	x.mu.RUnlock()
	x.mu.Lock()
	var err error
	if x.entries > 0 && x.data == nil {
		err = x.openLocked(x.fsys)
	}
	x.mu.Unlock()
	x.mu.RLock()
	if err == nil && x.entries > 0 && x.data == nil {
		err = fmt.Errorf("index %s closed while in use", x.file)
	}
	return err
}

// close unmaps and closes the file, keeping the entry count and capacity
// for reopen.
func (x *indexFile) close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return nil
	}
	err := x.unmapLocked()
	if cerr := x.f.Close(); err == nil {
		err = cerr
	}
	x.f = nil
	return err
}

// reopen opens and maps the file again at the capacity it had when it was
// closed (an active segment's index stays preallocated).
func (x *indexFile) reopen(fsys vfs.FS) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.openLocked(fsys)
}

// openLocked is reopen with x.mu held; it creates an absent index.
func (x *indexFile) openLocked(fsys vfs.FS) error {
	flags := os.O_RDWR
	if x.absent {
		// Nothing of a file left at this name counts (a roll removes
		// leftovers first, but truncating costs nothing here).
		flags |= os.O_CREATE | os.O_TRUNC
	}
	f, err := fsys.OpenFile(x.file.String(), flags, 0o644)
	if err != nil {
		return fmt.Errorf("reopening index %s: %w", x.file, err)
	}
	x.absent = false
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat index %s: %w", x.file, err)
	}
	if st.Size() < int64(x.entries*x.entrySize) {
		f.Close()
		return fmt.Errorf("index %s shrank to %d bytes under %d entries", x.file, st.Size(), x.entries)
	}
	x.f = f
	length := int64(x.maxEntries * x.entrySize)
	if err := x.mapLocked(length, st.Size() != length); err != nil {
		x.f = nil
		f.Close()
		return err
	}
	return nil
}

// entryAt returns entry i; the caller holds mu.
func (x *indexFile) entryAt(i int) []byte {
	return x.data[i*x.entrySize : (i+1)*x.entrySize]
}

// lastEntry is the last entry, ok false when there is none (or it
// cannot be read).
func (x *offsetIndex) lastEntry() (offset, pos int64, ok bool) {
	err := x.rlockData()
	defer x.mu.RUnlock()
	if err != nil || x.entries == 0 {
		return 0, 0, false
	}
	offset, pos = x.entry(x.entries - 1)
	return offset, pos, true
}

// offsetIndex maps offsets to file positions: each entry names the last
// offset of a batch (relative to the segment's base) and where that batch
// starts, as Kafka's OffsetIndex does.
type offsetIndex struct {
	*indexFile
	baseOffset int64
}

func (x *offsetIndex) entry(i int) (offset int64, pos int64) {
	e := x.entryAt(i)
	return x.baseOffset + int64(binary.BigEndian.Uint32(e)), int64(binary.BigEndian.Uint32(e[4:]))
}

// lookup returns the last entry whose offset is <= target, or the segment
// start when there is none.
func (x *offsetIndex) lookup(target int64) (offset, pos int64) {
	err := x.rlockData()
	defer x.mu.RUnlock()
	if err != nil {
		return x.baseOffset, 0 // a scan from the start finds it too
	}
	i := sort.Search(x.entries, func(i int) bool {
		o, _ := x.entry(i)
		return o > target
	}) - 1
	if i < 0 {
		return x.baseOffset, 0
	}
	return x.entry(i)
}

func (x *offsetIndex) append(fsys vfs.FS, offset, pos int64) error {
	var e [offsetIndexEntrySize]byte
	binary.BigEndian.PutUint32(e[:], uint32(offset-x.baseOffset))
	binary.BigEndian.PutUint32(e[4:], uint32(pos))
	return x.appendEntry(fsys, e[:])
}

// truncateToPosition drops the entries for batches at or after pos.
func (x *offsetIndex) truncateToPosition(pos int64) error {
	if err := x.rlockData(); err != nil {
		x.mu.RUnlock()
		return err
	}
	n := sort.Search(x.entries, func(i int) bool {
		_, p := x.entry(i)
		return p >= pos
	})
	x.mu.RUnlock()
	return x.truncateEntries(n)
}

// validPrefix keeps the entries that can be trusted against a log of
// logSize bytes: positions strictly increasing, above 0 (the first batch is
// never indexed) and inside the log, offsets strictly increasing. A
// preallocated file left by a crash ends in zero entries, which this drops.
func (x *offsetIndex) validPrefix(logSize int64) error {
	if err := x.rlockData(); err != nil {
		x.mu.RUnlock()
		return err
	}
	n := 0
	lastOff, lastPos := int64(-1), int64(0)
	for ; n < x.entries; n++ {
		o, p := x.entry(n)
		if p <= lastPos || p >= logSize || o <= lastOff || o < x.baseOffset {
			break
		}
		lastOff, lastPos = o, p
	}
	x.mu.RUnlock()
	return x.truncateEntries(n)
}

// timeIndex maps timestamps to offsets: each entry is the largest timestamp
// seen so far in the segment and the last offset of the batch holding it.
type timeIndex struct {
	*indexFile
	baseOffset int64
}

func (x *timeIndex) entry(i int) (ts int64, offset int64) {
	e := x.entryAt(i)
	return int64(binary.BigEndian.Uint64(e)), x.baseOffset + int64(binary.BigEndian.Uint32(e[8:]))
}

// full reserves the last slot for the entry written on roll, like Kafka.
func (x *timeIndex) full() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.entries >= x.maxEntries-1
}

func (x *timeIndex) last() (ts, offset int64, ok bool) {
	err := x.rlockData()
	defer x.mu.RUnlock()
	if x.entries == 0 || err != nil {
		return -1, x.baseOffset, false
	}
	ts, offset = x.entry(x.entries - 1)
	return ts, offset, true
}

// lookup returns the last entry whose timestamp is <= ts, or (-1, base).
func (x *timeIndex) lookup(ts int64) (timestamp, offset int64) {
	err := x.rlockData()
	defer x.mu.RUnlock()
	if err != nil {
		return -1, x.baseOffset // a scan from the start finds it too
	}
	i := sort.Search(x.entries, func(i int) bool {
		t, _ := x.entry(i)
		return t > ts
	}) - 1
	if i < 0 {
		return -1, x.baseOffset
	}
	return x.entry(i)
}

// maybeAppend adds an entry when ts is larger than the last one. With
// onRoll the reserved last slot may be used.
func (x *timeIndex) maybeAppend(fsys vfs.FS, ts, offset int64, onRoll bool) error {
	if lastTs, lastOff, ok := x.last(); ok && (ts <= lastTs || offset < lastOff) {
		return nil
	}
	if !onRoll && x.full() {
		return errIndexFull
	}
	var e [timeIndexEntrySize]byte
	binary.BigEndian.PutUint64(e[:], uint64(ts))
	binary.BigEndian.PutUint32(e[8:], uint32(offset-x.baseOffset))
	return x.appendEntry(fsys, e[:])
}

// truncateToOffset drops entries whose offset is >= offset.
func (x *timeIndex) truncateToOffset(offset int64) error {
	if err := x.rlockData(); err != nil {
		x.mu.RUnlock()
		return err
	}
	n := sort.Search(x.entries, func(i int) bool {
		_, o := x.entry(i)
		return o >= offset
	})
	x.mu.RUnlock()
	return x.truncateEntries(n)
}

// validPrefix keeps entries with strictly increasing timestamps and
// non-decreasing offsets below nextOffset. An all-zero entry is the
// unwritten preallocated tail (a real entry of timestamp 0 at the base offset
// is dropped too; the index is sparse, so that only costs a longer scan).
func (x *timeIndex) validPrefix(nextOffset int64) error {
	if err := x.rlockData(); err != nil {
		x.mu.RUnlock()
		return err
	}
	n := 0
	lastTs, lastOff := int64(-1<<63), x.baseOffset
	for ; n < x.entries; n++ {
		if isZero(x.entryAt(n)) {
			break
		}
		ts, o := x.entry(n)
		if ts <= lastTs || o < lastOff || o >= nextOffset {
			break
		}
		lastTs, lastOff = ts, o
	}
	x.mu.RUnlock()
	return x.truncateEntries(n)
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
