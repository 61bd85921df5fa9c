package storage

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/vfs"
)

func moveConfig() config.Topic {
	cfg := smallConfig()
	cfg.SegmentBytes = 1024 // several segments
	return cfg
}

// moveTestLog opens a manager over /a and /b with one log in /a holding
// 60 batches, its log start moved inside the first segment and its high
// watermark below its end, all flushed and checkpointed.
func moveTestLog(t *testing.T, fsys *vfs.MemFS) (*Manager, *Log, map[int64][]byte) {
	t.Helper()
	m := openTestManager(t, fsys, "/a", "/b")
	tp := TopicPartition{"t", 0}
	l, err := m.GetOrCreate(tp, [16]byte{9}, moveConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l.Dir(), "/a/") {
		t.Fatalf("first log in %s", l.Dir())
	}
	written := map[int64][]byte{}
	for range 60 {
		res := mustAppend(t, l, plainBatch(t, 2))
		written[res.FirstOffset] = readRange(t, mustRead(t, l, res.FirstOffset))
	}
	l.AdvanceHighWatermark(100)
	if _, err := l.DeleteRecordsBefore(4); err != nil {
		t.Fatal(err)
	}
	delete(written, 0)
	delete(written, 2)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	return m, l, written
}

// waitMoved waits until tp's log has moved into dir.
func waitMoved(t *testing.T, m *Manager, l *Log, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m.mu.Lock()
		moving := m.moves[l.tp] != nil
		m.mu.Unlock()
		if !moving && strings.HasPrefix(l.Dir(), dir+"/") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log still in %s (moving %v)", l.Dir(), moving)
		}
		time.Sleep(time.Millisecond)
	}
}

// A log moves to another dir while appends go on: DescribeDirs shows the
// future replica while it is copied, the same *Log then serves from the
// new dir with nothing lost, the old dir goes, and a restart finds the log
// in its new dir with its offsets.
func TestMoveLogWhileAppending(t *testing.T) {
	fsys := vfs.NewMemFS()
	m, l, written := moveTestLog(t, fsys)
	var mu sync.Mutex
	sawFuture := false
	m.moveHook = func(point string) {
		if point != "pass" {
			return
		}
		for _, d := range m.DescribeDirs() {
			for _, p := range d.Partitions {
				if d.Path == "/b" && p.IsFuture && p.TopicPartition == l.tp && p.Size > 0 {
					mu.Lock()
					sawFuture = true
					mu.Unlock()
				}
			}
		}
	}
	stop := make(chan struct{})
	appended := make(chan map[int64][]byte)
	go func() {
		more := map[int64][]byte{}
		defer func() { appended <- more }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, _, err := l.Append(plainBatch(t, 2), 3, AppendClient)
			if err != nil {
				t.Errorf("append during the move: %v", err)
				return
			}
			r, err := l.Read(res.FirstOffset, 1<<20, res.LastOffset+1, true)
			if err != nil {
				t.Errorf("read during the move: %v", err)
				return
			}
			more[res.FirstOffset] = readRange(t, r)
		}
	}()
	if err := m.MoveLog(l.tp, "/b"); err != nil {
		t.Fatal(err)
	}
	waitMoved(t, m, l, "/b")
	close(stop)
	for off, b := range <-appended {
		written[off] = b
	}
	mu.Lock()
	if !sawFuture {
		t.Error("DescribeDirs never showed the future replica in /b")
	}
	mu.Unlock()
	checkLog(t, l, written)
	res := mustAppend(t, l, plainBatch(t, 2))
	written[res.FirstOffset] = readRange(t, mustRead(t, l, res.FirstOffset))
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, d := range m.DescribeDirs() {
		var tps []TopicPartition
		for _, p := range d.Partitions {
			tps = append(tps, p.TopicPartition)
		}
		if (d.Path == "/b") != (len(tps) == 1) {
			t.Fatalf("dir %s holds %v after the move", d.Path, tps)
		}
	}
	// The old dir is renamed, then removed (file.delete.delay.ms 0).
	deadline := time.Now().Add(5 * time.Second)
	for {
		ents, _ := fsys.ReadDir("/a")
		left := false
		for _, e := range ents {
			left = left || strings.HasPrefix(e.Name(), "t-0")
		}
		if !left {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/a still holds %v", ents)
		}
		time.Sleep(time.Millisecond)
	}
	leo, start := l.LogEndOffset(), l.LogStartOffset()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := openTestManager(t, fsys, "/a", "/b")
	defer m2.Close()
	l2, err := m2.GetOrCreate(l.tp, [16]byte{9}, moveConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l2.Dir(), "/b/") || l2.LogEndOffset() != leo || l2.LogStartOffset() != start {
		t.Fatalf("after a restart: %s, log end %d (want %d), start %d (want %d)", l2.Dir(), l2.LogEndOffset(), leo, l2.LogStartOffset(), start)
	}
	checkLog(t, l2, written)
}

// A crash at any point of a move leaves exactly one copy of the log, with
// everything that was flushed and the log start offset.
func TestMoveLogCrashAtEveryStep(t *testing.T) {
	// "relocated": batches appended and flushed in the new dir before
	// the manager has written any checkpoint; "appended": the same once
	// the move is all done.
	points := []string{"pass", "copied", "marked", "renamed", "linked", "unlinked", "committed", "relocated", "checkpointed", "appended"}
	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			fsys := vfs.NewMemFS()
			m, l, written := moveTestLog(t, fsys)
			// A marker left in the source by an earlier move into it
			// must be gone, durably, before the new one exists.
			stale := "/a/t-0" + moveMarkerSuffix
			if err := vfs.WriteFileAtomic(fsys, stale, []byte("0 0 0\n")); err != nil {
				t.Fatal(err)
			}
			var crashed *vfs.MemFS
			appendAndCrash := func() {
				for range 5 {
					res := mustAppend(t, l, plainBatch(t, 2))
					written[res.FirstOffset] = readRange(t, mustRead(t, l, res.FirstOffset))
				}
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				crashed = fsys.CrashClone()
			}
			m.moveHook = func(p string) {
				switch {
				case p != point || crashed != nil:
				case p == "relocated":
					appendAndCrash()
				default:
					crashed = fsys.CrashClone()
				}
			}
			if err := m.MoveLog(l.tp, "/b"); err != nil {
				t.Fatal(err)
			}
			waitMoved(t, m, l, "/b")
			if point == "appended" {
				appendAndCrash()
			}
			leo, start := l.LogEndOffset(), l.LogStartOffset()
			m.Close()
			if crashed == nil {
				t.Fatalf("the move never reached %s", point)
			}
			if point != "pass" && point != "copied" {
				if _, err := crashed.Stat(stale); err == nil {
					t.Fatalf("crash at %s: the stale marker in the source came back", point)
				}
			}
			m2 := openTestManager(t, crashed, "/a", "/b")
			defer m2.Close()
			if got := m2.OnDisk(); len(got) != 1 {
				t.Fatalf("partitions on disk after the crash: %v", got)
			}
			l2, err := m2.GetOrCreate(l.tp, [16]byte{9}, moveConfig())
			if err != nil {
				t.Fatal(err)
			}
			if l2.LogEndOffset() != leo || l2.LogStartOffset() != start {
				t.Fatalf("crash at %s: %s with log end %d (want %d), start %d (want %d)", point, l2.Dir(), l2.LogEndOffset(), leo, l2.LogStartOffset(), start)
			}
			checkLog(t, l2, written)
			t.Logf("crash at %s: the log is in %s", point, l2.Dir())
			for _, d := range []string{"/a", "/b"} {
				ents, _ := crashed.ReadDir(d)
				for _, e := range ents {
					if strings.Contains(e.Name(), "-future") || strings.Contains(e.Name(), moveMarkerSuffix) && !strings.HasPrefix(l2.Dir(), d+"/") {
						t.Fatalf("crash at %s: %s/%s left behind", point, d, e.Name())
					}
				}
			}
			// Appends go on, and survive another restart.
			mustAppend(t, l2, plainBatch(t, 2))
		})
	}
}

func TestMoveLogErrors(t *testing.T) {
	fsys := vfs.NewMemFS()
	m, l, _ := moveTestLog(t, fsys)
	defer m.Close()
	if err := m.MoveLog(l.tp, "/c"); kerrOf(err) != kerr.LogDirNotFound {
		t.Fatalf("move to an unknown dir: %v", err)
	}
	if err := m.MoveLog(TopicPartition{"nope", 0}, "/b"); kerrOf(err) != kerr.ReplicaNotAvailable {
		t.Fatalf("move of a log not here: %v", err)
	}
	if err := m.MoveLog(TopicPartition{strings.Repeat("x", 249), 0}, "/b"); kerrOf(err) != kerr.InvalidTopicException {
		t.Fatalf("move of a log whose future dir name is too long: %v", err)
	}
	if err := m.MoveLog(l.tp, "/a/"); err != nil {
		t.Fatalf("move to the dir it is in: %v", err)
	}
	m.mu.Lock()
	moving := len(m.moves)
	m.mu.Unlock()
	if moving != 0 {
		t.Fatal("a move to the dir the log is in started")
	}
	// An offline destination.
	m.dirs[1].health.fail(syscall.EIO)
	if err := m.MoveLog(l.tp, "/b"); kerrOf(err) != kerr.KafkaStorageError {
		t.Fatalf("move to an offline dir: %v", err)
	}
}

// A copy that fails abandons the move: the log stays, whole and serving,
// and the future dir is removed.
func TestMoveLogFailedCopyIsAbandoned(t *testing.T) {
	fsys := vfs.NewMemFS()
	m, l, written := moveTestLog(t, fsys)
	defer m.Close()
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite && strings.Contains(name, "-future") {
			return syscall.ENOSPC
		}
		return nil
	})
	if err := m.MoveLog(l.tp, "/b"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.mu.Lock()
		moving := len(m.moves)
		m.mu.Unlock()
		if moving == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failed move did not end: %d moves under way", moving)
		}
		time.Sleep(time.Millisecond)
	}
	fsys.Inject(nil)
	if !strings.HasPrefix(l.Dir(), "/a/") || l.Err() != nil {
		t.Fatalf("after a failed move: %s, %v", l.Dir(), l.Err())
	}
	if ents, _ := fsys.ReadDir("/b"); len(ents) > 3 { // the checkpoints only
		t.Fatalf("/b holds %v", ents)
	}
	checkLog(t, l, written)
	mustAppend(t, l, plainBatch(t, 1))
}

// A compacted log moves while the cleaner cleans it: the cleaner's rounds
// and the move's swap do not cross (the swap holds cleanMu), and every
// key keeps its latest value at its offset, across a restart too.
func TestMoveLogWhileTheCleanerRuns(t *testing.T) {
	fsys := vfs.NewMemFS()
	clock := newMovingClock()
	opts := ManagerOptions{FS: fsys, Dirs: []string{"/a", "/b"}, Now: clock.now,
		Cleaner: CleanerOptions{Enable: true, Threads: 1, DedupeBufferSize: 1 << 20, IOBufferLoadFactor: 0.9, IOMaxBytesPerSecond: 1 << 30, Backoff: time.Millisecond}}
	m, err := OpenManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := compactConfig()
	cfg.MinCleanableRatio = 0.1
	tp := TopicPartition{"compacted", 0}
	l, err := m.GetOrCreate(tp, [16]byte{1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeVersions(t, l, clock, 40, 20)
	want := latestPerKey(readAll(t, l))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	to := "/b"
	if strings.HasPrefix(l.Dir(), "/b/") {
		to = "/a"
	}
	if err := m.MoveLog(tp, to); err != nil {
		t.Fatal(err)
	}
	waitMoved(t, m, l, to)
	// The cleaner goes on cleaning the log in its new dir.
	rounds := func() int64 {
		m.cleaner.mu.Lock()
		defer m.cleaner.mu.Unlock()
		return m.cleaner.rounds
	}
	before := rounds()
	writeVersions(t, l, clock, 40, 5)
	want = latestPerKey(readAll(t, l))
	deadline := time.Now().Add(10 * time.Second)
	for rounds() <= before {
		if time.Now().After(deadline) {
			t.Fatal("the cleaner did not clean the moved log")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	check := func(l *Log, when string) {
		t.Helper()
		got := latestPerKey(readAll(t, l))
		if len(got) != len(want) {
			t.Fatalf("%s: %d keys, want %d", when, len(got), len(want))
		}
		for k, r := range want {
			if got[k] != r {
				t.Fatalf("%s: key %s is %+v, want %+v", when, k, got[k], r)
			}
		}
	}
	check(l, "after the move")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2, err := OpenManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	l2, err := m2.GetOrCreate(tp, [16]byte{1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l2.Dir(), to+"/") {
		t.Fatalf("reopened in %s", l2.Dir())
	}
	check(l2, "after a restart")
}
