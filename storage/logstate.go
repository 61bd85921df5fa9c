package storage

// The log state file (gregor-log-state, one per log dir) lets a clean
// start build every log without touching its files. A clean shutdown
// writes it, next to the clean-shutdown marker, with what loading a log
// otherwise learns from its directory: the segments and what each one's
// tail scan yields, the leader epochs, the producer state and the topic
// ID. A start that finds the marker takes each log from the file and
// opens a segment's files only when something uses it (the segment
// cache reopens closed segments already); a log the file does not
// describe, or describes at another log end than the recovery-point
// checkpoint, is loaded from its directory as before.
//
// Kafka has no such file: its start lists every partition directory,
// maps or reads each log's indexes (LazyIndex defers only the mapping),
// scans the active segment's tail and reads each producer snapshot. A
// node with 100,000 partitions spent most of a 30 s clean restart here.
//
// Correctness rests on the marker: the file is written before the
// filesystem sync that precedes the marker and is trusted only when the
// marker is there, and the marker is removed (and the removal synced)
// before anything of the dir changes. A log untouched since its load
// closes without opening anything (segment.untouched), so the next clean
// shutdown describes it from memory again.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// LogStateFile is the per-log-dir state written at a clean shutdown.
const LogStateFile = "gregor-log-state"

const (
	logStateMagic   = "GLST"
	logStateVersion = 1
)

// logState is one log as a clean shutdown left it.
type logState struct {
	tp      TopicPartition
	topicID [16]byte
	logEnd  int64
	epochs  []EpochEntry
	// producers is the producer state, encoded as a snapshot file is;
	// producersEnd and lastSnapshot are the state's mapEndOffset and the
	// offset of the newest snapshot file.
	producers    []byte
	producersEnd int64
	lastSnapshot int64
	segments     []segmentState
}

// segmentState is one segment's in-memory state (what openSegment and
// loadTrusted compute from its files).
type segmentState struct {
	base, size, next            int64
	maxTimestamp, offsetOfMaxTs int64
	firstBatchTs, bytesSinceIdx int64
	offsetEntries, timeEntries  int32
	txnIndexBytes               int64
}

// restartState describes the log for the log state file; the caller holds
// mu, after the close has written what it writes and before the segments
// are closed. ok is false when the log must be loaded from its directory
// (a segment's transaction index is corrupt).
func (l *Log) restartState() (*logState, bool) {
	st := &logState{
		tp:           l.tp,
		topicID:      l.topicID,
		logEnd:       l.logEndOffset.Load(),
		epochs:       l.epochs.snapshot(),
		producers:    encodeSnapshot(l.producers.producers),
		producersEnd: l.producers.mapEndOffset,
		lastSnapshot: l.producers.lastSnapOffset,
		segments:     make([]segmentState, 0, len(l.segments)),
	}
	for _, s := range l.segments {
		s.txns.mu.Lock()
		txnBytes, corrupt := s.txns.size, s.txns.corrupt
		s.txns.mu.Unlock()
		if corrupt || s.suffix != "" {
			return nil, false
		}
		st.segments = append(st.segments, segmentState{
			base:          s.baseOffset,
			size:          s.size.Load(),
			next:          s.nextOffset,
			maxTimestamp:  s.maxTimestamp.Load(),
			offsetOfMaxTs: s.offsetOfMaxTs,
			firstBatchTs:  s.firstBatchTs,
			bytesSinceIdx: s.bytesSinceIndex,
			offsetEntries: int32(s.offsets.count()),
			timeEntries:   int32(s.times.count()),
			txnIndexBytes: txnBytes,
		})
	}
	return st, true
}

// usable reports whether st may stand for the log that opts opens: the
// log end is the checkpointed recovery point (a clean shutdown moves it
// there), and the segments are in order and end there.
func (st *logState) usable(opts LogOptions) bool {
	if len(st.segments) == 0 || st.logEnd != opts.RecoveryPoint {
		return false
	}
	if opts.TopicID != ([16]byte{}) && opts.TopicID != st.topicID {
		return false // loading from the directory reports it
	}
	prev := int64(-1)
	for _, s := range st.segments {
		if s.base <= prev || s.next < s.base || s.size < 0 || s.offsetEntries < 0 || s.timeEntries < 0 || s.txnIndexBytes < 0 {
			return false
		}
		prev = s.next - 1
		if s.next == s.base {
			prev = s.base
		}
	}
	if st.segments[len(st.segments)-1].next != st.logEnd {
		return false
	}
	return st.producersEnd >= 0 && st.lastSnapshot >= 0
}

// restoredSegment builds a segment from its state with its files closed;
// the first pin opens them. An active segment's indexes get
// segment.index.bytes of capacity then (indexBytes > 0), as
// becomeActive gives them.
func restoredSegment(l *Log, ss segmentState, indexBytes int64, nowMs int64) (*segment, error) {
	txns := &txnIndex{baseOffset: ss.base, file: segmentFile{l.dir, ss.base, txnIndexSuffix}}
	if ss.txnIndexBytes > 0 {
		var err error
		if txns, err = openTxnIndex(l.fsys, txns.file, ss.base); err != nil {
			return nil, err
		}
		if txns.corrupt || txns.size != ss.txnIndexBytes {
			return nil, errStaleLogState
		}
	}
	capacity := func(entries int32, entrySize int) int {
		n := int(entries)
		if indexBytes > 0 {
			n = max(n, int(indexBytes)/entrySize)
		}
		return n
	}
	s := &segment{
		fsys:       l.fsys,
		dir:        l.dir,
		baseOffset: ss.base,
		cache:      l.segCache,
		offsets: &offsetIndex{indexFile: &indexFile{
			file: segmentFile{l.dir, ss.base, indexSuffix}, fsys: l.fsys, entrySize: offsetIndexEntrySize,
			entries: int(ss.offsetEntries), maxEntries: capacity(ss.offsetEntries, offsetIndexEntrySize),
		}, baseOffset: ss.base},
		times: &timeIndex{indexFile: &indexFile{
			file: segmentFile{l.dir, ss.base, timeIndexSuffix}, fsys: l.fsys, entrySize: timeIndexEntrySize,
			entries: int(ss.timeEntries), maxEntries: capacity(ss.timeEntries, timeIndexEntrySize),
		}, baseOffset: ss.base},
		txns:            txns,
		nextOffset:      ss.next,
		offsetOfMaxTs:   ss.offsetOfMaxTs,
		bytesSinceIndex: ss.bytesSinceIdx,
		firstBatchTs:    ss.firstBatchTs,
		createdMs:       nowMs,
		untouched:       true,
	}
	s.size.Store(ss.size)
	s.maxTimestamp.Store(ss.maxTimestamp)
	return s, nil
}

// errStaleLogState: the log state does not match the files; the log is
// loaded from its directory.
var errStaleLogState = errors.New("the log state file does not match the log's files")

// loadState builds the log from st. It reports false, having changed
// nothing on disk, when the log must be loaded from its directory.
func (l *Log) loadState(opts LogOptions, st *logState) (bool, error) {
	if !st.usable(opts) {
		return false, nil
	}
	cfg := l.config()
	start := l.logStartFor(opts, st.segments[0].base)
	if start > st.logEnd {
		return false, nil
	}
	entries, err := decodeSnapshot(st.producers)
	if err != nil {
		return false, nil
	}
	nowMs := l.now().UnixMilli()
	segs := make([]*segment, 0, len(st.segments))
	for i, ss := range st.segments {
		indexBytes := int64(0)
		if i == len(st.segments)-1 {
			indexBytes = int64(cfg.SegmentIndexBytes)
		}
		s, err := restoredSegment(l, ss, indexBytes, nowMs)
		if errors.Is(err, errStaleLogState) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		segs = append(segs, s)
	}
	l.topicID = st.topicID
	l.epochs = &epochCache{fsys: l.fsys, dir: l.dir, entries: slices.Clone(st.epochs)}
	l.producers = newProducerState(l.fsys, l.dir)
	l.producers.restore(entries, nowMs, l.expiryMs)
	l.producers.mapEndOffset, l.producers.lastSnapOffset = st.producersEnd, st.lastSnapshot
	l.segments = segs
	l.active().rollJitterMs = jitter(cfg)
	if err := l.settle(opts, start, nowMs, true); err != nil {
		return false, err
	}
	// Everything was synced by the shutdown that wrote the state.
	l.dirDirty.Store(false)
	return true, nil
}

// encodeLogStates encodes a log dir's state file: the magic, a version,
// the count and the logs, then a CRC-32C of everything before it.
func encodeLogStates(states []*logState) []byte {
	var b []byte
	b = append(b, logStateMagic...)
	b = binary.BigEndian.AppendUint16(b, logStateVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(states)))
	for _, st := range states {
		name := st.tp.String()
		b = binary.BigEndian.AppendUint16(b, uint16(len(name)))
		b = append(b, name...)
		b = append(b, st.topicID[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(st.logEnd))
		b = binary.BigEndian.AppendUint64(b, uint64(st.producersEnd))
		b = binary.BigEndian.AppendUint64(b, uint64(st.lastSnapshot))
		b = binary.BigEndian.AppendUint32(b, uint32(len(st.producers)))
		b = append(b, st.producers...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(st.epochs)))
		for _, e := range st.epochs {
			b = binary.BigEndian.AppendUint32(b, uint32(e.Epoch))
			b = binary.BigEndian.AppendUint64(b, uint64(e.StartOffset))
		}
		b = binary.BigEndian.AppendUint32(b, uint32(len(st.segments)))
		for _, s := range st.segments {
			for _, v := range [...]int64{s.base, s.size, s.next, s.maxTimestamp, s.offsetOfMaxTs, s.firstBatchTs, s.bytesSinceIdx, s.txnIndexBytes} {
				b = binary.BigEndian.AppendUint64(b, uint64(v))
			}
			b = binary.BigEndian.AppendUint32(b, uint32(s.offsetEntries))
			b = binary.BigEndian.AppendUint32(b, uint32(s.timeEntries))
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32c))
}

const (
	segmentStateBytes = 8*8 + 4 + 4
	epochEntryBytes   = 4 + 8
)

var errCorruptLogState = errors.New("corrupt log state file")

// stateReader reads big-endian fields, remembering the first short read.
type stateReader struct {
	b   []byte
	err bool
}

func (r *stateReader) take(n int) []byte {
	if r.err || n < 0 || len(r.b) < n {
		r.err = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *stateReader) u16() uint16 {
	if p := r.take(2); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (r *stateReader) u32() uint32 {
	if p := r.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (r *stateReader) i64() int64 {
	if p := r.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

// count reads a count of items of at least itemBytes each, refusing one
// the rest of the file cannot hold.
func (r *stateReader) count(itemBytes int) int {
	n := r.u32()
	if r.err || uint64(n)*uint64(max(itemBytes, 1)) > uint64(len(r.b)) || n > math.MaxInt32 {
		r.err = true
		return 0
	}
	return int(n)
}

// decodeLogStates decodes a log state file; the states own their memory.
func decodeLogStates(data []byte) (map[TopicPartition]*logState, error) {
	if len(data) < len(logStateMagic)+2+4+4 {
		return nil, fmt.Errorf("%w: %d bytes", errCorruptLogState, len(data))
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, crc32c) != sum {
		return nil, fmt.Errorf("%w: CRC mismatch", errCorruptLogState)
	}
	if !bytes.Equal(body[:len(logStateMagic)], []byte(logStateMagic)) {
		return nil, fmt.Errorf("%w: bad magic", errCorruptLogState)
	}
	r := &stateReader{b: body[len(logStateMagic):]}
	if v := r.u16(); v != logStateVersion {
		return nil, fmt.Errorf("%w: unknown version %d", errCorruptLogState, v)
	}
	n := r.count(2 + 16 + 3*8 + 3*4)
	out := make(map[TopicPartition]*logState, n)
	for range n {
		name := string(r.take(int(r.u16())))
		tp, ok := parsePartitionDir(name)
		if !ok && !r.err {
			return nil, fmt.Errorf("%w: partition dir name %q", errCorruptLogState, name)
		}
		st := &logState{tp: tp}
		copy(st.topicID[:], r.take(16))
		st.logEnd = r.i64()
		st.producersEnd = r.i64()
		st.lastSnapshot = r.i64()
		st.producers = bytes.Clone(r.take(int(r.u32())))
		ne := r.count(epochEntryBytes)
		st.epochs = make([]EpochEntry, 0, ne)
		for range ne {
			st.epochs = append(st.epochs, EpochEntry{Epoch: int32(r.u32()), StartOffset: r.i64()})
		}
		ns := r.count(segmentStateBytes)
		st.segments = make([]segmentState, 0, ns)
		for range ns {
			var s segmentState
			s.base, s.size, s.next = r.i64(), r.i64(), r.i64()
			s.maxTimestamp, s.offsetOfMaxTs, s.firstBatchTs = r.i64(), r.i64(), r.i64()
			s.bytesSinceIdx, s.txnIndexBytes = r.i64(), r.i64()
			s.offsetEntries, s.timeEntries = int32(r.u32()), int32(r.u32())
			st.segments = append(st.segments, s)
		}
		if r.err {
			return nil, fmt.Errorf("%w: truncated", errCorruptLogState)
		}
		if _, dup := out[tp]; dup {
			return nil, fmt.Errorf("%w: %s twice", errCorruptLogState, name)
		}
		out[tp] = st
	}
	if r.err || len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes left over", errCorruptLogState, len(r.b))
	}
	return out, nil
}
