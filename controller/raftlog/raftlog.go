// Package raftlog is the durable raft log of the metadata quorum: a
// write-ahead log of raft entries and hard state plus snapshot files, kept in
// one directory on a vfs.FS. It implements raft.Storage so the raft
// state machine can read what was persisted.
//
// Layout of the directory:
//
//	wal-<20-digit sequence>.log   segments, replayed in sequence order
//	snap-<20-digit index>-<20-digit term>.snap   snapshots
//
// A segment is a sequence of frames:
//
//	length:uint32 crc:uint32 (CRC-32C of payload) payload
//	payload := kind:uint8 body
//	entry     (kind 1) := term:uint64 index:uint64 type:uint8 data
//	hardstate (kind 2) := term:uint64 vote:uint64 commit:uint64
//
// An entry supersedes every entry at its index or later (raft log
// truncation), on replay exactly as when it was written. Every Save is
// fsynced when raft asks for it, so what is acknowledged is durable. On open a
// torn or corrupt tail of the last segment (a crash in the middle of a
// write) is cut off; damage anywhere else is an error. Snapshots are written
// to a temporary file, synced and renamed, so a snapshot file is whole or
// absent.
//
// It imports, of Gregor's packages, only vfs.
package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gregorbroker/gregor/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

const (
	frameHeaderSize  = 8
	kindEntry        = 1
	kindHardState    = 2
	maxFrameSize     = 128 << 20
	snapshotMagic    = "GRSNAP01"
	segmentPrefix    = "wal-"
	segmentSuffix    = ".log"
	snapshotPrefix   = "snap-"
	snapshotSuffix   = ".snap"
	defaultRollBytes = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is returned when the log is damaged somewhere other than its
// tail.
var ErrCorrupt = errors.New("raft log corrupt")

// Log is the persistent raft log. All methods are safe for concurrent use;
// in practice the raft driver goroutine writes and reads, and status
// queries (DescribeQuorum) read.
type Log struct {
	fs  vfs.FS
	dir string

	mu        sync.Mutex
	snap      *pb.Snapshot // latest snapshot; metadata only when index is 0
	ents      []*pb.Entry  // entries after snap's index, contiguous
	hardState *pb.HardState
	seg       vfs.File // segment being appended to
	segName   string
	segSize   int64
	segments  []string // all segment names, oldest first
	rollBytes int64
	buf       []byte
	// bytesSinceSnapshot counts entry payload bytes written since the last
	// snapshot (the snapshot policy reads it).
	bytesSinceSnapshot int64
}

// Options opens a Log.
type Options struct {
	FS  vfs.FS
	Dir string
	// InitialConfState is the voter set used when no snapshot exists yet
	// (from the format's initial voters).
	InitialConfState *pb.ConfState
	// RollBytes is the size after which a new segment is started
	// (default 64 MiB).
	RollBytes int64
}

// Open opens (creating if needed) the log in opts.Dir and replays it.
func Open(opts Options) (*Log, error) {
	l := &Log{fs: opts.FS, dir: opts.Dir, rollBytes: opts.RollBytes}
	if l.rollBytes <= 0 {
		l.rollBytes = defaultRollBytes
	}
	if err := vfs.MkdirAllDurable(l.fs, l.dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating raft log dir %s: %w", l.dir, err)
	}
	dirents, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("listing raft log dir %s: %w", l.dir, err)
	}
	var snaps []string
	for _, de := range dirents {
		name := de.Name()
		switch {
		case strings.HasSuffix(name, ".tmp"):
			// A snapshot that was being written when the process died.
			if err := l.fs.Remove(path.Join(l.dir, name)); err != nil {
				return nil, fmt.Errorf("removing leftover %s: %w", name, err)
			}
		case strings.HasPrefix(name, segmentPrefix) && strings.HasSuffix(name, segmentSuffix):
			l.segments = append(l.segments, name)
		case strings.HasPrefix(name, snapshotPrefix) && strings.HasSuffix(name, snapshotSuffix):
			snaps = append(snaps, name)
		}
	}
	sort.Strings(l.segments)
	sort.Strings(snaps)
	if err := l.loadSnapshot(snaps, opts.InitialConfState); err != nil {
		return nil, err
	}
	if err := l.replaySegments(); err != nil {
		return nil, err
	}
	l.fixHardState()
	if err := l.openTail(); err != nil {
		return nil, err
	}
	return l, nil
}

// loadSnapshot reads the newest readable snapshot. Snapshot files are
// written atomically, so an unreadable one means damage; the older one is
// used instead only if it exists (and the damaged one is reported in the
// error otherwise).
func (l *Log) loadSnapshot(names []string, initial *pb.ConfState) error {
	var firstErr error
	for i := len(names) - 1; i >= 0; i-- {
		snap, err := readSnapshotFile(l.fs, path.Join(l.dir, names[i]))
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		l.snap = snap
		return nil
	}
	if firstErr != nil {
		return firstErr
	}
	cs := proto.Clone(pb.EnsureConfState(initial)).(*pb.ConfState)
	if initial == nil {
		cs = pb.EnsureConfState(nil)
	}
	l.snap = &pb.Snapshot{Metadata: &pb.SnapshotMetadata{ConfState: cs, Index: new(uint64(0)), Term: new(uint64(0))}}
	return nil
}

func (l *Log) snapIndex() uint64 { return l.snap.GetMetadata().GetIndex() }
func (l *Log) snapTerm() uint64  { return l.snap.GetMetadata().GetTerm() }

func (l *Log) lastIndex() uint64 { return l.snapIndex() + uint64(len(l.ents)) }

// replaySegments reads every segment. A frame whose length or checksum is
// bad at the end of the last segment is a torn write, and the segment is
// truncated there; a frame with a good checksum but impossible content, or
// a bad frame in an older segment, is corruption.
func (l *Log) replaySegments() error {
	for i, name := range l.segments {
		last := i == len(l.segments)-1
		full := path.Join(l.dir, name)
		data, err := vfs.ReadFile(l.fs, full)
		if err != nil {
			return fmt.Errorf("reading raft log segment %s: %w", name, err)
		}
		good, torn, err := l.replayFrames(data)
		if err == nil {
			continue
		}
		if !last || !torn {
			return fmt.Errorf("raft log segment %s at byte %d: %w: %w", name, good, ErrCorrupt, err)
		}
		if err := l.truncateFile(full, int64(good)); err != nil {
			return err
		}
	}
	return nil
}

// replayFrames applies the frames of one segment and returns how many bytes
// were good and whether the first bad frame looks torn (short, or failing
// its checksum) rather than corrupt.
func (l *Log) replayFrames(data []byte) (good int, torn bool, err error) {
	pos := 0
	for pos < len(data) {
		if len(data)-pos < frameHeaderSize {
			return pos, true, errors.New("short frame header")
		}
		n := binary.BigEndian.Uint32(data[pos:])
		sum := binary.BigEndian.Uint32(data[pos+4:])
		if n == 0 || n > maxFrameSize || int(n) > len(data)-pos-frameHeaderSize {
			return pos, true, fmt.Errorf("bad frame length %d", n)
		}
		payload := data[pos+frameHeaderSize : pos+frameHeaderSize+int(n)]
		if crc32.Checksum(payload, castagnoli) != sum {
			return pos, true, errors.New("frame checksum mismatch")
		}
		if err := l.replayPayload(payload); err != nil {
			return pos, false, err
		}
		pos += frameHeaderSize + int(n)
	}
	return pos, false, nil
}

func (l *Log) replayPayload(p []byte) error {
	switch p[0] {
	case kindEntry:
		if len(p) < 18 {
			return errors.New("short entry frame")
		}
		term := binary.BigEndian.Uint64(p[1:])
		index := binary.BigEndian.Uint64(p[9:])
		typ := pb.EntryType(p[17])
		data := slices.Clone(p[18:])
		e := &pb.Entry{Term: new(term), Index: new(index), Type: &typ, Data: data}
		if index <= l.snapIndex() {
			return nil // covered by the snapshot
		}
		return l.appendMem([]*pb.Entry{e})
	case kindHardState:
		if len(p) != 25 {
			return errors.New("bad hard state frame")
		}
		l.hardState = &pb.HardState{
			Term:   new(binary.BigEndian.Uint64(p[1:])),
			Vote:   new(binary.BigEndian.Uint64(p[9:])),
			Commit: new(binary.BigEndian.Uint64(p[17:])),
		}
		return nil
	}
	return fmt.Errorf("unknown frame kind %d", p[0])
}

// appendMem adds entries to the in-memory log, replacing any at or after
// the first new index.
func (l *Log) appendMem(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	first := ents[0].GetIndex()
	if first <= l.snapIndex() {
		// Entries already covered by the snapshot are dropped.
		skip := l.snapIndex() - first + 1
		if skip >= uint64(len(ents)) {
			return nil
		}
		ents = ents[skip:]
		first = ents[0].GetIndex()
	}
	if first > l.lastIndex()+1 {
		return fmt.Errorf("entry %d leaves a gap after %d", first, l.lastIndex())
	}
	keep := first - l.snapIndex() - 1
	// Never reuse the old backing array: raft may hold entries it got from
	// Entries.
	l.ents = append(l.ents[:keep:keep], ents...)
	return nil
}

// fixHardState keeps the commit index consistent with what survived: not
// below the snapshot, not past the last entry.
func (l *Log) fixHardState() {
	if l.hardState == nil {
		if l.snapIndex() == 0 {
			return
		}
		l.hardState = &pb.HardState{Term: new(l.snapTerm()), Vote: new(uint64(0)), Commit: new(l.snapIndex())}
		return
	}
	commit := l.hardState.GetCommit()
	if commit < l.snapIndex() {
		commit = l.snapIndex()
	}
	if commit > l.lastIndex() {
		commit = l.lastIndex()
	}
	term := max(l.hardState.GetTerm(), l.snapTerm())
	l.hardState = &pb.HardState{Term: new(term), Vote: new(l.hardState.GetVote()), Commit: new(commit)}
}

// truncateFile cuts a torn tail. The cut needs no fsync of its own: until
// it is durable a crash only brings back the torn frames, which the next
// Open cuts again, and the first fsync of the segment after new frames are
// written makes the cut durable with them.
func (l *Log) truncateFile(name string, size int64) error {
	f, err := l.fs.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("opening %s to cut a torn tail: %w", name, err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("cutting torn tail of %s at %d: %w", name, size, err)
	}
	return nil
}

// openTail opens the last segment for appending, or starts one.
func (l *Log) openTail() error {
	if len(l.segments) == 0 {
		return l.startSegment()
	}
	name := l.segments[len(l.segments)-1]
	f, err := l.fs.OpenFile(path.Join(l.dir, name), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("opening raft log segment %s: %w", name, err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return fmt.Errorf("seeking to the end of %s: %w", name, err)
	}
	l.seg, l.segName, l.segSize = f, name, size
	return nil
}

// nextSegmentName names the segment after the newest one. Names carry a
// sequence number, not an entry index: raft may truncate the log, so the
// first index of a later segment can be lower than that of an earlier one.
func (l *Log) nextSegmentName() string {
	var seq uint64
	if n := len(l.segments); n > 0 {
		fmt.Sscanf(strings.TrimPrefix(l.segments[n-1], segmentPrefix), "%d", &seq)
	}
	return fmt.Sprintf("%s%020d%s", segmentPrefix, seq+1, segmentSuffix)
}

// startSegment begins a new segment and writes the current hard state into
// it. The segment's directory entry is made durable at once: frames synced
// into it later are acknowledged to raft. The hard state copy needs no
// fsync: the same hard state is durable in the previous segment (the roll
// synced it), and compaction, the only removal of segments, writes the
// hard state into its own segment and syncs it.
func (l *Log) startSegment() error {
	name := l.nextSegmentName()
	f, err := l.fs.OpenFile(path.Join(l.dir, name), os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("creating raft log segment %s: %w", name, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		f.Close()
		return fmt.Errorf("syncing raft log dir: %w", err)
	}
	if l.seg != nil {
		if err := l.seg.Close(); err != nil {
			f.Close()
			return fmt.Errorf("closing raft log segment %s: %w", l.segName, err)
		}
	}
	l.seg, l.segName, l.segSize = f, name, 0
	l.segments = append(l.segments, name)
	if l.hardState != nil {
		l.buf = appendHardState(l.buf[:0], l.hardState)
		if err := l.writeBuf(); err != nil {
			return err
		}
	}
	return nil
}

func (l *Log) writeBuf() error {
	if len(l.buf) == 0 {
		return nil
	}
	n, err := l.seg.Write(l.buf)
	l.segSize += int64(n)
	if err != nil {
		return fmt.Errorf("writing raft log segment %s: %w", l.segName, err)
	}
	return nil
}

func appendFrame(dst []byte, payload func([]byte) []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = payload(dst)
	p := dst[start+frameHeaderSize:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(p)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(p, castagnoli))
	return dst
}

func appendEntry(dst []byte, e *pb.Entry) []byte {
	return appendFrame(dst, func(b []byte) []byte {
		b = append(b, kindEntry)
		b = binary.BigEndian.AppendUint64(b, e.GetTerm())
		b = binary.BigEndian.AppendUint64(b, e.GetIndex())
		b = append(b, byte(e.GetType()))
		return append(b, e.GetData()...)
	})
}

func appendHardState(dst []byte, hs *pb.HardState) []byte {
	return appendFrame(dst, func(b []byte) []byte {
		b = append(b, kindHardState)
		b = binary.BigEndian.AppendUint64(b, hs.GetTerm())
		b = binary.BigEndian.AppendUint64(b, hs.GetVote())
		return binary.BigEndian.AppendUint64(b, hs.GetCommit())
	})
}

// Save persists entries and the hard state (either may be empty) in one
// write, and fsyncs when sync is set. It must complete before the messages
// of the same raft Ready are sent.
func (l *Log) Save(hs *pb.HardState, ents []*pb.Entry, sync bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seg == nil {
		return errors.New("raft log is closed")
	}
	l.buf = l.buf[:0]
	for _, e := range ents {
		l.buf = appendEntry(l.buf, e)
		l.bytesSinceSnapshot += int64(len(e.GetData()))
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		l.buf = appendHardState(l.buf, hs)
	}
	if err := l.writeBuf(); err != nil {
		return err
	}
	if sync && len(l.buf) > 0 {
		if err := l.seg.Sync(); err != nil {
			return fmt.Errorf("syncing raft log segment %s: %w", l.segName, err)
		}
	}
	if err := l.appendMem(ents); err != nil {
		return err
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		l.hardState = proto.Clone(hs).(*pb.HardState)
	}
	if l.segSize >= l.rollBytes {
		if err := l.seg.Sync(); err != nil {
			return fmt.Errorf("syncing raft log segment %s: %w", l.segName, err)
		}
		return l.startSegment()
	}
	return nil
}

// ApplySnapshot installs a snapshot received from the leader: it replaces
// the log up to the snapshot's index.
func (l *Log) ApplySnapshot(snap *pb.Snapshot) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if snap.GetMetadata().GetIndex() <= l.snapIndex() {
		return raft.ErrSnapOutOfDate
	}
	if err := l.writeSnapshot(snap); err != nil {
		return err
	}
	idx := snap.GetMetadata().GetIndex()
	// Keep entries after the snapshot only if they agree with it.
	var kept []*pb.Entry
	if idx < l.lastIndex() {
		if e := l.ents[idx-l.snapIndex()-1]; e.GetTerm() == snap.GetMetadata().GetTerm() {
			kept = slices.Clone(l.ents[idx-l.snapIndex():])
		}
	}
	l.snap = proto.Clone(snap).(*pb.Snapshot)
	l.ents = kept
	if l.hardState == nil || l.hardState.GetCommit() < idx {
		l.hardState = &pb.HardState{Term: new(max(l.hardState.GetTerm(), snap.GetMetadata().GetTerm())), Vote: new(l.hardState.GetVote()), Commit: new(idx)}
	}
	return l.compactSegments()
}

// CreateSnapshot records a snapshot of the applied state at index (data is
// the state machine's encoding of it) and drops the log up to index.
func (l *Log) CreateSnapshot(index uint64, cs *pb.ConfState, data []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if index <= l.snapIndex() {
		return raft.ErrSnapOutOfDate
	}
	if index > l.lastIndex() {
		return fmt.Errorf("snapshot index %d is past the last index %d", index, l.lastIndex())
	}
	term := l.ents[index-l.snapIndex()-1].GetTerm()
	snap := &pb.Snapshot{
		Metadata: &pb.SnapshotMetadata{ConfState: proto.Clone(pb.EnsureConfState(cs)).(*pb.ConfState), Index: new(index), Term: new(term)},
		Data:     data,
	}
	if err := l.writeSnapshot(snap); err != nil {
		return err
	}
	l.ents = slices.Clone(l.ents[index-l.snapIndex():])
	l.snap = snap
	return l.compactSegments()
}

func snapshotName(index, term uint64) string {
	return fmt.Sprintf("%s%020d-%020d%s", snapshotPrefix, index, term, snapshotSuffix)
}

// writeSnapshot writes the snapshot file durably:
//
//	magic "GRSNAP01" crc:uint32 (CRC-32C of the rest) metaLen:uint32 meta data
func (l *Log) writeSnapshot(snap *pb.Snapshot) error {
	meta, err := proto.Marshal(snap.GetMetadata())
	if err != nil {
		return fmt.Errorf("encoding snapshot metadata: %w", err)
	}
	body := make([]byte, 0, 4+len(meta)+len(snap.GetData()))
	body = binary.BigEndian.AppendUint32(body, uint32(len(meta)))
	body = append(body, meta...)
	body = append(body, snap.GetData()...)
	out := make([]byte, 0, len(snapshotMagic)+4+len(body))
	out = append(out, snapshotMagic...)
	out = binary.BigEndian.AppendUint32(out, crc32.Checksum(body, castagnoli))
	out = append(out, body...)
	name := path.Join(l.dir, snapshotName(snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()))
	if err := vfs.WriteFileAtomic(l.fs, name, out); err != nil {
		return fmt.Errorf("writing snapshot %s: %w", name, err)
	}
	l.bytesSinceSnapshot = 0
	return nil
}

func readSnapshotFile(fsys vfs.FS, name string) (*pb.Snapshot, error) {
	raw, err := vfs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", name, err)
	}
	hdr := len(snapshotMagic) + 4
	if len(raw) < hdr+4 || string(raw[:len(snapshotMagic)]) != snapshotMagic {
		return nil, fmt.Errorf("snapshot %s: bad header: %w", name, ErrCorrupt)
	}
	body := raw[hdr:]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(raw[len(snapshotMagic):]) {
		return nil, fmt.Errorf("snapshot %s: checksum mismatch: %w", name, ErrCorrupt)
	}
	n := binary.BigEndian.Uint32(body)
	if int(n) > len(body)-4 {
		return nil, fmt.Errorf("snapshot %s: bad metadata length: %w", name, ErrCorrupt)
	}
	meta := &pb.SnapshotMetadata{}
	if err := proto.Unmarshal(body[4:4+n], meta); err != nil {
		return nil, fmt.Errorf("snapshot %s: decoding metadata: %w", name, err)
	}
	return &pb.Snapshot{Metadata: pb.EnsureSnapshotMetadata(meta), Data: body[4+n:]}, nil
}

// compactSegments starts a fresh segment and removes segments and
// snapshots that the current snapshot makes unnecessary. The newest older
// snapshot is kept as a fallback.
func (l *Log) compactSegments() error {
	// The older segments may come back after a crash (below): each must
	// then be whole, since only the last segment may have a torn tail.
	if err := l.seg.Sync(); err != nil {
		return fmt.Errorf("syncing raft log segment %s: %w", l.segName, err)
	}
	// Rewrite the surviving entries into a new segment, so every older
	// segment can go; the log after a snapshot is short. The new segment is
	// written under a temporary name, synced, renamed, and its directory
	// entry synced before the older ones are removed: a crash before the
	// rename leaves the older segments (Open drops the .tmp), a crash after
	// it leaves both, and replay tolerates the overlap because an entry
	// supersedes any earlier one at its index and entries covered by the
	// snapshot are skipped. For the same reason the removals need no
	// fsync of the directory: old segments and snapshots that come back
	// after a crash are harmless.
	name := l.nextSegmentName()
	tmp := path.Join(l.dir, name+".tmp")
	f, err := l.fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("creating raft log segment %s: %w", name, err)
	}
	buf := make([]byte, 0, 4096)
	if l.hardState != nil {
		buf = appendHardState(buf, l.hardState)
	}
	for _, e := range l.ents {
		buf = appendEntry(buf, e)
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("writing raft log segment %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing raft log segment %s: %w", name, err)
	}
	old := l.segments
	if err := l.seg.Close(); err != nil {
		f.Close()
		return fmt.Errorf("closing raft log segment %s: %w", l.segName, err)
	}
	l.seg = nil
	if err := l.fs.Rename(tmp, path.Join(l.dir, name)); err != nil {
		f.Close()
		return fmt.Errorf("renaming raft log segment %s: %w", name, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		f.Close()
		return fmt.Errorf("syncing raft log dir: %w", err)
	}
	l.seg, l.segName, l.segSize = f, name, int64(len(buf))
	l.segments = []string{name}
	for _, s := range old {
		if s == name {
			continue
		}
		if err := l.fs.Remove(path.Join(l.dir, s)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing compacted raft log segment %s: %w", s, err)
		}
	}
	return l.removeOldSnapshots()
}

func (l *Log) removeOldSnapshots() error {
	dirents, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("listing raft log dir: %w", err)
	}
	var snaps []string
	for _, de := range dirents {
		if n := de.Name(); strings.HasPrefix(n, snapshotPrefix) && strings.HasSuffix(n, snapshotSuffix) {
			snaps = append(snaps, n)
		}
	}
	sort.Strings(snaps)
	for len(snaps) > 2 {
		if err := l.fs.Remove(path.Join(l.dir, snaps[0])); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing old snapshot %s: %w", snaps[0], err)
		}
		snaps = snaps[1:]
	}
	return nil
}

// BytesSinceSnapshot is the entry payload written since the last snapshot.
func (l *Log) BytesSinceSnapshot() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytesSinceSnapshot
}

// Close syncs and closes the segment being written.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seg == nil {
		return nil
	}
	err := l.seg.Sync()
	if cerr := l.seg.Close(); err == nil {
		err = cerr
	}
	l.seg = nil
	return err
}

// raft.Storage

// InitialState returns the persisted hard state and the voter set.
func (l *Log) InitialState() (*pb.HardState, *pb.ConfState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var hs *pb.HardState
	if l.hardState != nil {
		hs = proto.Clone(l.hardState).(*pb.HardState)
	}
	return hs, proto.Clone(pb.EnsureConfState(l.snap.GetMetadata().GetConfState())).(*pb.ConfState), nil
}

// Entries returns entries [lo, hi), at most maxSize bytes but at least one.
func (l *Log) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lo <= l.snapIndex() {
		return nil, raft.ErrCompacted
	}
	if hi > l.lastIndex()+1 || lo > hi {
		return nil, raft.ErrUnavailable
	}
	off := l.snapIndex() + 1
	ents := l.ents[lo-off : hi-off]
	var size uint64
	for i, e := range ents {
		size += uint64(len(e.GetData())) + 24
		if i > 0 && size > maxSize {
			ents = ents[:i]
			break
		}
	}
	return slices.Clone(ents), nil
}

// Term returns the term of entry i.
func (l *Log) Term(i uint64) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i == l.snapIndex() {
		return l.snapTerm(), nil
	}
	if i < l.snapIndex() {
		return 0, raft.ErrCompacted
	}
	if i > l.lastIndex() {
		return 0, raft.ErrUnavailable
	}
	return l.ents[i-l.snapIndex()-1].GetTerm(), nil
}

// LastIndex is the index of the last entry.
func (l *Log) LastIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastIndex(), nil
}

// FirstIndex is the index of the first entry still in the log.
func (l *Log) FirstIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.snapIndex() + 1, nil
}

// Snapshot returns the latest snapshot.
func (l *Log) Snapshot() (*pb.Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return proto.Clone(l.snap).(*pb.Snapshot), nil
}

var _ raft.Storage = (*Log)(nil)
