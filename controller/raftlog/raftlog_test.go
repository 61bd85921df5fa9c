package raftlog

import (
	"encoding/hex"
	"errors"
	"math/rand"
	"os"
	"path"
	"strings"
	"syscall"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

const dir = "/m/__cluster_metadata-0"

func ent(index, term uint64, data string) *pb.Entry {
	typ := pb.EntryNormal
	return &pb.Entry{Index: new(index), Term: new(term), Type: &typ, Data: []byte(data)}
}

func hs(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

func open(t *testing.T, fsys vfs.FS) *Log {
	t.Helper()
	l, err := Open(Options{FS: fsys, Dir: dir, InitialConfState: &pb.ConfState{Voters: []uint64{1}}, RollBytes: 200})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func entries(t *testing.T, l *Log) []string {
	t.Helper()
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	if last < first {
		return nil
	}
	ents, err := l.Entries(first, last+1, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, string(e.GetData()))
	}
	return out
}

func TestSaveAndReopen(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := open(t, fsys)
	if h, cs, _ := l.InitialState(); !raft.IsEmptyHardState(h) || len(cs.GetVoters()) != 1 {
		t.Fatalf("fresh state %v %v", h, cs)
	}
	for i := uint64(1); i <= 20; i++ {
		if err := l.Save(hs(1, 1, i-1), []*pb.Entry{ent(i, 1, strings.Repeat("x", int(i)))}, true); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	l = open(t, fsys)
	defer l.Close()
	if got := entries(t, l); len(got) != 20 || got[19] != strings.Repeat("x", 20) {
		t.Fatalf("entries after reopen: %v", got)
	}
	h, _, _ := l.InitialState()
	if h.GetCommit() != 19 || h.GetTerm() != 1 || h.GetVote() != 1 {
		t.Fatalf("hard state %v", h)
	}
	if term, _ := l.Term(7); term != 1 {
		t.Fatalf("term(7) = %d", term)
	}
	segs := 0
	des, _ := fsys.ReadDir(dir)
	for _, d := range des {
		if strings.HasPrefix(d.Name(), segmentPrefix) {
			segs++
		}
	}
	if segs < 2 {
		t.Fatalf("segments did not roll: %d", segs)
	}
}

func TestConflictingEntriesReplaceTheTail(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := open(t, fsys)
	var es []*pb.Entry
	for i := uint64(1); i <= 5; i++ {
		es = append(es, ent(i, 1, "a"))
	}
	if err := l.Save(hs(1, 0, 2), es, true); err != nil {
		t.Fatal(err)
	}
	if err := l.Save(hs(2, 0, 2), []*pb.Entry{ent(3, 2, "b"), ent(4, 2, "b")}, true); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log) {
		t.Helper()
		if got := strings.Join(entries(t, l), ""); got != "aabb" {
			t.Fatalf("entries %q, want aabb", got)
		}
		if term, _ := l.Term(4); term != 2 {
			t.Fatalf("term(4) = %d", term)
		}
	}
	check(l)
	l.Close()
	l = open(t, fsys)
	defer l.Close()
	check(l)
}

func TestTornTailIsCut(t *testing.T) {
	for seed := int64(0); seed < 30; seed++ {
		fsys := vfs.NewMemFS()
		l, err := Open(Options{FS: fsys, Dir: dir, RollBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		for i := uint64(1); i <= 10; i++ {
			if err := l.Save(hs(1, 0, i), []*pb.Entry{ent(i, 1, "durable")}, true); err != nil {
				t.Fatal(err)
			}
		}
		// Unsynced writes: raft did not ask for a sync (it would have
		// for entries; this simulates the window before the fsync).
		for i := uint64(11); i <= 20; i++ {
			if err := l.Save(nil, []*pb.Entry{ent(i, 1, "maybe")}, false); err != nil {
				t.Fatal(err)
			}
		}
		fsys.Crash(true, rand.New(rand.NewSource(seed)))
		l2, err := Open(Options{FS: fsys, Dir: dir, RollBytes: 1 << 20})
		if err != nil {
			t.Fatalf("seed %d: reopen after torn write: %v", seed, err)
		}
		got := entries(t, l2)
		if len(got) < 10 {
			t.Fatalf("seed %d: lost synced entries: %d", seed, len(got))
		}
		for i, g := range got {
			if i < 10 && g != "durable" || i >= 10 && g != "maybe" {
				t.Fatalf("seed %d: entry %d = %q", seed, i+1, g)
			}
		}
		// The log keeps working after the cut.
		last, _ := l2.LastIndex()
		if err := l2.Save(hs(1, 0, last), []*pb.Entry{ent(last+1, 1, "after")}, true); err != nil {
			t.Fatal(err)
		}
		l2.Close()
		l3, err := Open(Options{FS: fsys, Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if got := entries(t, l3); got[len(got)-1] != "after" {
			t.Fatalf("seed %d: append after torn tail lost", seed)
		}
		l3.Close()
	}
}

func TestCorruptionBeforeTheTailIsAnError(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := open(t, fsys)
	for i := uint64(1); i <= 20; i++ {
		if err := l.Save(hs(1, 0, i), []*pb.Entry{ent(i, 1, "0123456789")}, true); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	des, _ := fsys.ReadDir(dir)
	first := path.Join(dir, des[0].Name())
	f, err := fsys.OpenFile(first, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff}, 30)
	f.Sync()
	f.Close()
	if _, err := Open(Options{FS: fsys, Dir: dir, RollBytes: 200}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
}

func TestSnapshotCompactsAndSurvivesReopen(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := open(t, fsys)
	for i := uint64(1); i <= 30; i++ {
		if err := l.Save(hs(2, 1, i), []*pb.Entry{ent(i, 2, "e")}, true); err != nil {
			t.Fatal(err)
		}
	}
	cs := &pb.ConfState{Voters: []uint64{1}}
	if err := l.CreateSnapshot(25, cs, []byte("image@25")); err != nil {
		t.Fatal(err)
	}
	if err := l.CreateSnapshot(20, cs, nil); !errors.Is(err, raft.ErrSnapOutOfDate) {
		t.Fatalf("older snapshot: %v", err)
	}
	check := func(l *Log) {
		t.Helper()
		if first, _ := l.FirstIndex(); first != 26 {
			t.Fatalf("first index %d", first)
		}
		if last, _ := l.LastIndex(); last != 30 {
			t.Fatalf("last index %d", last)
		}
		if _, err := l.Entries(10, 12, 100); !errors.Is(err, raft.ErrCompacted) {
			t.Fatalf("compacted entries: %v", err)
		}
		if term, err := l.Term(25); err != nil || term != 2 {
			t.Fatalf("term(25) = %d %v", term, err)
		}
		snap, _ := l.Snapshot()
		if string(snap.GetData()) != "image@25" || snap.GetMetadata().GetIndex() != 25 {
			t.Fatalf("snapshot %v", snap)
		}
	}
	check(l)
	l.Close()
	des, _ := fsys.ReadDir(dir)
	segs := 0
	for _, d := range des {
		if strings.HasPrefix(d.Name(), segmentPrefix) {
			segs++
		}
	}
	if segs != 1 {
		t.Fatalf("%d segments after compaction, want 1", segs)
	}
	l = open(t, fsys)
	defer l.Close()
	check(l)
	if h, _, _ := l.InitialState(); h.GetCommit() != 30 {
		t.Fatalf("commit after reopen: %d", h.GetCommit())
	}
}

func TestApplySnapshotFromLeader(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := open(t, fsys)
	if err := l.Save(hs(1, 0, 1), []*pb.Entry{ent(1, 1, "a"), ent(2, 1, "b")}, true); err != nil {
		t.Fatal(err)
	}
	snap := &pb.Snapshot{
		Metadata: &pb.SnapshotMetadata{Index: new(uint64(100)), Term: new(uint64(3)), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}},
		Data:     []byte("leader image"),
	}
	if err := l.ApplySnapshot(snap); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = open(t, fsys)
	defer l.Close()
	if first, _ := l.FirstIndex(); first != 101 {
		t.Fatalf("first %d", first)
	}
	if last, _ := l.LastIndex(); last != 100 {
		t.Fatalf("last %d", last)
	}
	h, cs, _ := l.InitialState()
	if h.GetCommit() != 100 || len(cs.GetVoters()) != 3 {
		t.Fatalf("state %v %v", h, cs)
	}
}

func TestFullDiskIsReported(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := open(t, fsys)
	fsys.SetCapacity(300)
	var err error
	for i := uint64(1); i <= 100 && err == nil; i++ {
		err = l.Save(hs(1, 0, i), []*pb.Entry{ent(i, 1, "0123456789")}, true)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err = %v, want ENOSPC", err)
	}
}

// TestReadsFrozenSegmentFormat: a segment written by the first version of
// this format stays readable.
func TestReadsFrozenSegmentFormat(t *testing.T) {
	raw, err := os.ReadFile("testdata/wal-v1.hex")
	if err != nil {
		t.Fatal(err)
	}
	data, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	fsys := vfs.NewMemFS()
	fsys.MkdirAll(dir, 0o755)
	f, _ := fsys.OpenFile(path.Join(dir, "wal-00000000000000000001.log"), os.O_CREATE|os.O_WRONLY, 0o644)
	f.Write(data)
	f.Sync()
	f.Close()
	l := open(t, fsys)
	defer l.Close()
	if got := strings.Join(entries(t, l), ","); got != "one,two,three" {
		t.Fatalf("entries %q", got)
	}
	if h, _, _ := l.InitialState(); h.GetTerm() != 4 || h.GetVote() != 2 || h.GetCommit() != 3 {
		t.Fatalf("hard state %v", h)
	}
}

// frozenSegment is how testdata/wal-v1.hex was made.
func frozenSegment() []byte {
	var b []byte
	b = appendEntry(b, ent(1, 4, "one"))
	b = appendEntry(b, ent(2, 4, "two"))
	b = appendEntry(b, ent(3, 4, "three"))
	return appendHardState(b, hs(4, 2, 3))
}

func TestFrozenSegmentMatchesWriter(t *testing.T) {
	raw, _ := os.ReadFile("testdata/wal-v1.hex")
	if strings.TrimSpace(string(raw)) != hex.EncodeToString(frozenSegment()) {
		t.Fatal("the writer no longer produces the frozen segment format; add a new frame kind instead of changing one")
	}
}

// crashReopen simulates a power loss and opens the log again.
func crashReopen(t *testing.T, fsys *vfs.MemFS, rollBytes int64) *Log {
	t.Helper()
	fsys.Inject(nil)
	fsys.Crash(true, rand.New(rand.NewSource(1)))
	l, err := Open(Options{FS: fsys, Dir: dir, InitialConfState: &pb.ConfState{Voters: []uint64{1}}, RollBytes: rollBytes})
	if err != nil {
		t.Fatalf("open after crash: %v", err)
	}
	return l
}

func saveEntries(t *testing.T, l *Log, from, to, term uint64, data string) {
	t.Helper()
	for i := from; i <= to; i++ {
		if err := l.Save(hs(term, 1, i), []*pb.Entry{ent(i, term, data)}, true); err != nil {
			t.Fatal(err)
		}
	}
}

// Entries synced into the segment that compaction starts survive a crash:
// the compacted segment's directory entry is durable before anything is
// written to it.
func TestCompactionThenSaveSurvivesCrash(t *testing.T) {
	fsys := vfs.NewMemFS()
	l, err := Open(Options{FS: fsys, Dir: dir, InitialConfState: &pb.ConfState{Voters: []uint64{1}}, RollBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	saveEntries(t, l, 1, 10, 1, "before")
	if err := l.CreateSnapshot(8, &pb.ConfState{Voters: []uint64{1}}, []byte("image@8")); err != nil {
		t.Fatal(err)
	}
	saveEntries(t, l, 11, 15, 1, "after")
	l2 := crashReopen(t, fsys, 1<<20)
	defer l2.Close()
	if got := strings.Join(entries(t, l2), ","); got != "before,before,after,after,after,after,after" {
		t.Fatalf("entries after crash: %s", got)
	}
	if h, _, _ := l2.InitialState(); h.GetCommit() != 15 {
		t.Fatalf("commit after crash: %d", h.GetCommit())
	}
}

// A snapshot whose compaction fails (here: the fsync of the segment being
// written) loses nothing: the removals of the previous compaction became
// durable with the new snapshot file, so the segment that compaction wrote
// must have been durable on its own.
func TestInterruptedCompactionLosesNothing(t *testing.T) {
	fsys := vfs.NewMemFS()
	l, err := Open(Options{FS: fsys, Dir: dir, InitialConfState: &pb.ConfState{Voters: []uint64{1}}, RollBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	saveEntries(t, l, 1, 30, 2, "e")
	cs := &pb.ConfState{Voters: []uint64{1}}
	if err := l.CreateSnapshot(25, cs, []byte("image@25")); err != nil {
		t.Fatal(err)
	}
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.HasPrefix(path.Base(name), segmentPrefix) {
			return syscall.EIO
		}
		return nil
	})
	if err := l.CreateSnapshot(28, cs, []byte("image@28")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("compaction with a failing fsync: %v", err)
	}
	l2 := crashReopen(t, fsys, 1<<20)
	defer l2.Close()
	if last, _ := l2.LastIndex(); last != 30 {
		t.Fatalf("last index after crash %d, want 30", last)
	}
	if h, _, _ := l2.InitialState(); h.GetCommit() != 30 {
		t.Fatalf("commit after crash: %d", h.GetCommit())
	}
}

// Close makes the last hard state durable, including a commit index that
// raft did not ask to sync.
func TestCleanCloseKeepsCommitIndex(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := open(t, fsys)
	for i := uint64(1); i <= 5; i++ {
		if err := l.Save(hs(1, 1, i-1), []*pb.Entry{ent(i, 1, "x")}, true); err != nil {
			t.Fatal(err)
		}
	}
	// Raft does not sync a hard state whose only change is the commit.
	if err := l.Save(hs(1, 1, 5), nil, false); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := crashReopen(t, fsys, 200)
	defer l2.Close()
	if h, _, _ := l2.InitialState(); h.GetCommit() != 5 {
		t.Fatalf("commit after a clean close and a crash: %d, want 5", h.GetCommit())
	}
}

// Only the last segment may end in a torn frame. A segment is synced when
// the log rolls past it, even if its last frames (commit-only hard states)
// were saved without a sync, so that a crash cannot tear it.
func TestRolledSegmentIsWholeAfterCrash(t *testing.T) {
	for seed := int64(1); seed <= 5; seed++ {
		fsys := vfs.NewMemFS()
		l := open(t, fsys) // rolls after 200 bytes
		if err := l.Save(hs(1, 1, 0), []*pb.Entry{ent(1, 1, "first")}, true); err != nil {
			t.Fatal(err)
		}
		segs := func() int { return len(l.segments) }
		for c := uint64(1); segs() == 1; c++ {
			if err := l.Save(hs(1, 1, c%2), nil, false); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Save(hs(1, 1, 1), []*pb.Entry{ent(2, 1, "second")}, true); err != nil {
			t.Fatal(err)
		}
		fsys.Crash(true, rand.New(rand.NewSource(seed)))
		l2, err := Open(Options{FS: fsys, Dir: dir, InitialConfState: &pb.ConfState{Voters: []uint64{1}}, RollBytes: 200})
		if err != nil {
			t.Fatalf("seed %d: open after crash: %v", seed, err)
		}
		if got := strings.Join(entries(t, l2), ","); got != "first,second" {
			t.Fatalf("seed %d: entries %s", seed, got)
		}
		l2.Close()
	}
}

// Segments that compaction removes may come back after a crash (their
// removal is not synced); they must then be whole, although their last
// frames were saved without a sync.
func TestCompactedSegmentsComeBackWhole(t *testing.T) {
	for seed := int64(1); seed <= 5; seed++ {
		fsys := vfs.NewMemFS()
		l, err := Open(Options{FS: fsys, Dir: dir, InitialConfState: &pb.ConfState{Voters: []uint64{1}}, RollBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		saveEntries(t, l, 1, 10, 1, "e")
		if err := l.Save(hs(1, 1, 10), nil, false); err != nil {
			t.Fatal(err)
		}
		if err := l.CreateSnapshot(5, &pb.ConfState{Voters: []uint64{1}}, []byte("image@5")); err != nil {
			t.Fatal(err)
		}
		fsys.Crash(true, rand.New(rand.NewSource(seed)))
		l2, err := Open(Options{FS: fsys, Dir: dir, InitialConfState: &pb.ConfState{Voters: []uint64{1}}, RollBytes: 1 << 20})
		if err != nil {
			t.Fatalf("seed %d: open after crash: %v", seed, err)
		}
		if last, _ := l2.LastIndex(); last != 10 {
			t.Fatalf("seed %d: last index %d", seed, last)
		}
		l2.Close()
	}
}
