package storage

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

// segmentsLog opens a log with about six 1 KiB segments on fsys, sharing
// cache, and returns it with what was written at each offset.
func segmentsLog(t *testing.T, fsys vfs.FS, dir string, cache *segmentCache) (*Log, map[int64][]byte) {
	t.Helper()
	cfg := smallConfig()
	cfg.SegmentBytes = 1024
	cfg.IndexIntervalBytes = 100
	l := openTest(t, fsys, dir, cfg, func(o *LogOptions) { o.segments = cache })
	written := map[int64][]byte{}
	for l.NumSegments() < 6 {
		res := mustAppend(t, l, plainBatch(t, 2))
		r, err := l.Read(res.FirstOffset, 1, res.FirstOffset+1, true)
		if err != nil {
			t.Fatal(err)
		}
		written[res.FirstOffset] = readRange(t, r)
	}
	l.bg.Wait()
	return l, written
}

func isOpen(s *segment) bool {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	return s.log != nil
}

// The cache closes the least recently used segments beyond its bound, but
// never one in use, and a closed segment reopens on its next use with its
// indexes intact.
func TestSegmentCacheEvictsIdleSegmentsOnly(t *testing.T) {
	cache := newSegmentCache(2)
	l, written := segmentsLog(t, vfs.NewMemFS(), "/d/t-0", cache)
	defer l.Close()
	if n := cache.openCount(); n > 2 {
		t.Fatalf("%d segments open, bound 2", n)
	}
	pinned := l.segments[0]
	if err := pinned.pin(); err != nil {
		t.Fatal(err)
	}
	checkLog(t, l, written) // uses every segment
	if !isOpen(pinned) {
		t.Fatal("a segment in use was closed")
	}
	if n := cache.openCount(); n > 3 {
		t.Fatalf("%d segments open with one in use, want at most 3", n)
	}
	pinned.unpin()
	if n := cache.openCount(); n > 2 {
		t.Fatalf("%d segments open after the release, bound 2", n)
	}
	// Least recently used first: the last segments read stay open.
	if !isOpen(l.active()) {
		t.Fatal("the most recently used segment was closed")
	}
	// Appends and timestamp lookups reopen what they need.
	res := mustAppend(t, l, plainBatch(t, 2))
	r, _ := l.Read(res.FirstOffset, 1, res.FirstOffset+1, true)
	written[res.FirstOffset] = readRange(t, r)
	if _, _, _, found, err := l.OffsetForTimestamp(testNowMs); err != nil || !found {
		t.Fatalf("offset for timestamp: %v %v", found, err)
	}
	checkLog(t, l, written)
}

// Idle segments close; everything reopens on demand: reads, appends to the
// active segment (its indexes stay preallocated), rolls, flushes, close
// and a clean reopen.
func TestIdleSegmentsCloseAndReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	cache := newSegmentCache(100)
	l, written := segmentsLog(t, vfs.OSFS{}, dir, cache)
	if n := cache.closeIdle(time.Now().Add(time.Hour)); n == 0 || cache.openCount() != 0 {
		t.Fatalf("closed %d, %d still open", n, cache.openCount())
	}
	if n := openDescriptorsOf(t, dir); n != 0 {
		t.Fatalf("%d descriptors open on an idle log", n)
	}
	if l.active().tail.Load() != nil {
		t.Fatal("an idle segment keeps its tail batches")
	}
	checkLog(t, l, written)
	cache.closeIdle(time.Now().Add(time.Hour))
	for i := 0; i < 20; i++ {
		res := mustAppend(t, l, plainBatch(t, 2))
		r, _ := l.Read(res.FirstOffset, 1, res.FirstOffset+1, true)
		written[res.FirstOffset] = readRange(t, r)
		cache.closeIdle(time.Now().Add(time.Hour))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	checkLog(t, l, written)
	leo := l.LogEndOffset()
	cache.closeIdle(time.Now().Add(time.Hour))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := openDescriptorsOf(t, dir); n != 0 {
		t.Fatalf("%d descriptors open after close", n)
	}
	l2 := openTest(t, vfs.OSFS{}, dir, l.Config(), func(o *LogOptions) { o.CleanShutdown = true; o.RecoveryPoint = leo })
	defer l2.Close()
	checkLog(t, l2, written)
}

// A range handed out keeps its file open when the cache closes the
// segment, reads the right bytes, and closes it when released.
func TestRangeSurvivesEvictionOfItsSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	cache := newSegmentCache(1)
	l, written := segmentsLog(t, vfs.OSFS{}, dir, cache)
	defer l.Close()
	r, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
	if err != nil || r.Size == 0 {
		t.Fatalf("read: %v", err)
	}
	checkLog(t, l, written) // evicts segment 0
	if isOpen(l.segments[0]) {
		t.Fatal("segment 0 still open with a bound of 1")
	}
	name := filepath.Base(segmentFileName(dir, 0, logSuffix))
	if n := openDescriptorsOf(t, name); n != 1 {
		t.Fatalf("%d descriptors on segment 0 while a range holds it, want 1", n)
	}
	got := make([]byte, len(written[0]))
	if _, err := r.File.ReadAt(got, r.Pos); err != nil || string(got) != string(written[0]) {
		t.Fatalf("range after eviction: %v", err)
	}
	r.Release()
	if n := openDescriptorsOf(t, name); n != 0 {
		t.Fatalf("%d descriptors on segment 0 after the release", n)
	}
}

// Closing a segment's files does not make them durable, as on Linux: a
// crash loses what was never synced, and a flush after the close reopens
// the segment and syncs it.
func TestClosedSegmentsAreSyncedByTheNextFlush(t *testing.T) {
	for _, flush := range []bool{false, true} {
		fsys := vfs.NewMemFS()
		cache := newSegmentCache(100)
		cfg := smallConfig()
		l := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.segments = cache })
		for i := 0; i < 5; i++ {
			mustAppend(t, l, plainBatch(t, 2))
		}
		cache.closeIdle(time.Now().Add(time.Hour))
		if cache.openCount() != 0 {
			t.Fatal("segment still open")
		}
		if flush {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		fsys.Crash(false, nil)
		l2 := openTest(t, fsys, "/d/t-0", cfg)
		want := int64(0)
		if flush {
			want = 10
		}
		if l2.LogEndOffset() != want {
			t.Fatalf("flush=%v: log end %d after a crash, want %d", flush, l2.LogEndOffset(), want)
		}
		l2.Close()
	}
}

// Many idle partitions hold no more descriptors than the cache allows, and
// none once idle; every one of them still reads and appends.
func TestManyIdlePartitionsHoldFewDescriptors(t *testing.T) {
	partitions := 2000
	if testing.Short() {
		partitions = 300
	}
	const maxOpen = 64
	dir := t.TempDir()
	m, err := OpenManager(ManagerOptions{FS: vfs.OSFS{}, Dirs: []string{dir}, MaxOpenSegments: maxOpen})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := smallConfig()
	logs := make([]*Log, partitions)
	for i := range logs {
		l, err := m.GetOrCreate(TopicPartition{fmt.Sprintf("t%d", i), 0}, [16]byte{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, plainBatch(t, 1))
		logs[i] = l
	}
	if n := openDescriptorsOf(t, dir); n > 3*maxOpen {
		t.Fatalf("%d descriptors open for %d partitions, bound %d", n, partitions, 3*maxOpen)
	}
	m.CloseIdleSegments(0)
	if n := openDescriptorsOf(t, dir); n != 0 {
		t.Fatalf("%d descriptors open for %d idle partitions", n, partitions)
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 200; i++ {
		l := logs[rng.Intn(partitions)]
		res := mustAppend(t, l, plainBatch(t, 1))
		r, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		if hs := batchesIn(t, readRange(t, r)); len(hs) == 0 || hs[len(hs)-1].BaseOffset != res.FirstOffset {
			t.Fatalf("read back %d batches", len(hs))
		}
	}
	if n := openDescriptorsOf(t, dir); n > 3*maxOpen {
		t.Fatalf("%d descriptors open after reads and appends, bound %d", n, 3*maxOpen)
	}
}

// Appends, reads, flushes and timestamp lookups on logs sharing a cache
// with room for two segments, while idle segments are closed all the
// time: nothing is closed under a user, and every log reads back whole.
func TestConcurrentUseWithEvictions(t *testing.T) {
	fsys := vfs.NewMemFS()
	cache := newSegmentCache(2)
	cfg := smallConfig()
	cfg.SegmentBytes = 2048
	var logs []*Log
	for i := 0; i < 3; i++ {
		logs = append(logs, openTest(t, fsys, fmt.Sprintf("/d/t-%d", i), cfg, func(o *LogOptions) { o.segments = cache }))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the idle sweep, run far too often
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				cache.closeIdle(time.Now().Add(time.Hour))
			}
		}
	}()
	var writers sync.WaitGroup
	for i, l := range logs {
		writers.Add(2)
		go func() {
			defer writers.Done()
			for j := 0; j < 150; j++ {
				if _, _, err := l.Append(makeBatch(t, batchSpec{n: 1 + j%3, value: 40, pid: -1}), 1, AppendClient); err != nil {
					t.Error(err)
					return
				}
				if j%40 == 0 {
					if err := l.Flush(); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
		go func(seed int64) {
			defer writers.Done()
			rng := rand.New(rand.NewSource(seed))
			for j := 0; j < 300; j++ {
				leo := l.LogEndOffset()
				if leo == 0 {
					continue
				}
				r, err := l.Read(rng.Int63n(leo), int32(rng.Intn(3000)), leo, true)
				if err != nil {
					t.Error(err)
					return
				}
				batchesIn(t, readRange(t, r))
				l.OffsetForTimestamp(testNowMs)
			}
		}(int64(i))
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	for _, l := range logs {
		if l.Err() != nil {
			t.Fatal(l.Err())
		}
		next := int64(0)
		for next < l.LogEndOffset() {
			r, err := l.Read(next, 1<<20, l.LogEndOffset(), true)
			if err != nil {
				t.Fatal(err)
			}
			hs := batchesIn(t, readRange(t, r))
			if len(hs) == 0 || hs[0].BaseOffset != next {
				t.Fatalf("offsets not dense at %d", next)
			}
			next = hs[len(hs)-1].LastOffset() + 1
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := cache.openCount(); n != 0 {
		t.Fatalf("%d segments open after every log closed", n)
	}
}

// The manager's background work closes the files of idle segments.
func TestManagerRunClosesIdleSegments(t *testing.T) {
	m, err := OpenManager(ManagerOptions{FS: vfs.NewMemFS(), Dirs: []string{"/a"}, SegmentIdleTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.GetOrCreate(TopicPartition{"t", 0}, [16]byte{1}, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, plainBatch(t, 1))
	if m.OpenSegments() == 0 {
		t.Fatal("no open segment after an append")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	for deadline := time.Now().Add(10 * time.Second); m.OpenSegments() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d segments still open", m.OpenSegments())
		}
	}
	cancel()
	<-done
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
