package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// checkLog reads the whole log back and checks the invariants: whole
// batches only, CRCs good, offsets dense from the log start to the end,
// and every batch identical to what was appended at its offset.
func checkLog(t *testing.T, l *Log, written map[int64][]byte) {
	t.Helper()
	next := l.LogStartOffset()
	for next < l.LogEndOffset() {
		r, err := l.Read(next, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			t.Fatalf("read at %d: %v", next, err)
		}
		data := readRange(t, r)
		if len(data) == 0 {
			t.Fatalf("nothing at %d below log end %d", next, l.LogEndOffset())
		}
		for len(data) > 0 {
			batch, rest, h, err := protocol.NextBatch(data)
			if err != nil || !protocol.CheckBatchCRC(batch) {
				t.Fatalf("bad batch at %d: %v", next, err)
			}
			if h.BaseOffset != next {
				t.Fatalf("batch at %d, want %d (offsets not dense)", h.BaseOffset, next)
			}
			if want, ok := written[h.BaseOffset]; !ok || string(want) != string(batch) {
				t.Fatalf("batch at %d differs from what was appended", h.BaseOffset)
			}
			next = h.LastOffset() + 1
			data = rest
		}
	}
	if next != l.LogEndOffset() {
		t.Fatalf("read up to %d, log end %d", next, l.LogEndOffset())
	}
}

func TestCrashRecoveryProperty(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { crashRecoveryRounds(t, int64(seed), nil) })
	}
}

// The same with room for a single open segment: every use of another
// segment closes the previous one's files, so appends, reads, rolls,
// flushes and recovery all run on segments reopened on demand, and
// crashes hit files that were closed without a sync.
func TestCrashRecoveryPropertyWithOneOpenSegment(t *testing.T) {
	seeds := 20
	if testing.Short() {
		seeds = 5
	}
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { crashRecoveryRounds(t, int64(seed), newSegmentCache(1)) })
	}
}

// crashRecoveryRounds appends random batches over four rounds, flushing now
// and then and crashing at the end of each, and checks after each restart
// that everything flushed survived and the log reads back as written.
func crashRecoveryRounds(t *testing.T, seed int64, cache *segmentCache) {
	rng := rand.New(rand.NewSource(seed))
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	cfg.SegmentBytes = int32(1500 + rng.Intn(3000))
	cfg.IndexIntervalBytes = int32(rng.Intn(600))
	written := map[int64][]byte{}
	var recoveryPoint, durable int64
	var seq int32
	for round := 0; round < 4; round++ {
		full := rng.Intn(3) == 0
		l := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) {
			if !full {
				o.RecoveryPoint = recoveryPoint
			}
			o.segments = cache
		})
		if l.LogEndOffset() < durable {
			t.Fatalf("round %d: log end %d below the durable end %d", round, l.LogEndOffset(), durable)
		}
		checkLog(t, l, written)
		t.Logf("round %d: durable %d recovered %d full=%v", round, durable, l.LogEndOffset(), full)
		// After recovery the producer continues from what survived.
		seq = 0
		for off := int64(0); off < l.LogEndOffset(); {
			r, _ := l.Read(off, 1<<20, l.LogEndOffset(), true)
			for _, h := range batchesIn(t, readRange(t, r)) {
				if h.ProducerID == 9 {
					seq = h.BaseSequence + h.LastOffsetDelta + 1
				}
				off = h.LastOffset() + 1
			}
		}
		n := rng.Intn(40)
		for i := 0; i < n; i++ {
			spec := batchSpec{n: 1 + rng.Intn(5), value: rng.Intn(200), pid: -1}
			if rng.Intn(2) == 0 {
				spec.pid, spec.epoch, spec.seq = 9, 0, seq
			}
			res, _, err := l.Append(makeBatch(t, spec), int32(round), AppendClient)
			if err != nil {
				t.Fatalf("round %d append %d: %v", round, i, err)
			}
			if spec.pid == 9 {
				seq += int32(spec.n)
			}
			r, err := l.Read(res.FirstOffset, 1, res.FirstOffset+1, true)
			if err != nil {
				t.Fatal(err)
			}
			written[res.FirstOffset] = readRange(t, r)
			if rng.Intn(6) == 0 {
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		l.bg.Wait()
		if cache != nil && cache.openCount() > 1 {
			t.Fatalf("round %d: %d segments open, bound 1", round, cache.openCount())
		}
		recoveryPoint = l.RecoveryPoint()
		durable = recoveryPoint
		fsys.Crash(true, rng)
	}
}

func TestCleanCloseReopenSkipsRecovery(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	cfg.SegmentBytes = 1024
	l := openTest(t, fsys, "/d/t-0", cfg)
	written := map[int64][]byte{}
	for i := 0; i < 50; i++ {
		res := mustAppend(t, l, plainBatch(t, 3))
		r, _ := l.Read(res.FirstOffset, 1, res.FirstOffset+1, true)
		written[res.FirstOffset] = readRange(t, r)
	}
	rp := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.RecoveryPoint() != rp {
		t.Fatalf("close did not flush: recovery point %d", l.RecoveryPoint())
	}
	fsys.Crash(true, rand.New(rand.NewSource(2)))
	reads := 0
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpRead && strings.HasSuffix(name, ".log") {
			reads++
		}
		return nil
	})
	l2 := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.CleanShutdown = true; o.RecoveryPoint = rp })
	defer l2.Close()
	if reads > 3*l2.NumSegments()+10 {
		t.Fatalf("clean open read the logs %d times for %d segments", reads, l2.NumSegments())
	}
	fsys.Inject(nil)
	checkLog(t, l2, written)
}

func TestTornTailIsCut(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := openTest(t, fsys, "/d/t-0", smallConfig())
	written := map[int64][]byte{}
	for i := 0; i < 5; i++ {
		res := mustAppend(t, l, plainBatch(t, 2))
		r, _ := l.Read(res.FirstOffset, 1, res.FirstOffset+1, true)
		written[res.FirstOffset] = readRange(t, r)
	}
	l.Flush()
	l.Close()
	// Append garbage and a partial batch behind the log's back.
	f, _ := fsys.OpenFile("/d/t-0/00000000000000000000.log", os.O_RDWR|os.O_APPEND, 0)
	half := plainBatch(t, 3)
	f.Write(half[:len(half)/2])
	f.Close()
	l2 := openTest(t, fsys, "/d/t-0", smallConfig())
	defer l2.Close()
	if l2.LogEndOffset() != 10 {
		t.Fatalf("log end %d", l2.LogEndOffset())
	}
	checkLog(t, l2, written)
	if st, _ := fsys.Stat("/d/t-0/00000000000000000000.log"); st.Size() != l2.Size() {
		t.Fatalf("torn tail not cut: file %d, log %d", st.Size(), l2.Size())
	}
	// A corrupt batch in the middle ends the log there.
	l2.Close()
	data, _ := vfs.ReadFile(fsys, "/d/t-0/00000000000000000000.log")
	data[len(written[0])+len(written[2])+70] ^= 0x55
	vfs.WriteFileAtomic(fsys, "/d/t-0/00000000000000000000.log", data)
	l3 := openTest(t, fsys, "/d/t-0", smallConfig())
	defer l3.Close()
	if l3.LogEndOffset() != 4 {
		t.Fatalf("log end after a corrupt batch %d", l3.LogEndOffset())
	}
}

func TestAppendFaults(t *testing.T) {
	boom := errors.New("injected I/O error")
	cases := []struct {
		name    string
		setup   func(*vfs.MemFS)
		offline bool
		// atFlush: the append succeeds and the flush that writes what
		// it changed fails (a new epoch is written by the next flush).
		atFlush bool
	}{
		{"disk full", func(m *vfs.MemFS) {
			used := int64(0)
			ents, _ := m.ReadDir("/d/t-0")
			for _, e := range ents {
				info, _ := e.Info()
				used += info.Size()
			}
			m.SetCapacity(used + 10)
		}, false, false},
		{"write error", func(m *vfs.MemFS) {
			m.Inject(func(op vfs.Op, name string) error {
				if op == vfs.OpWrite && strings.HasSuffix(name, ".log") {
					return syscall.EIO
				}
				return nil
			})
		}, true, false}, // Kafka: any IOException takes the dir offline; only a full disk is refused and survived
		{"epoch checkpoint write error", func(m *vfs.MemFS) {
			m.Inject(func(op vfs.Op, name string) error {
				if op == vfs.OpOpen && strings.Contains(name, "leader-epoch-checkpoint") {
					return boom
				}
				return nil
			})
		}, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := vfs.NewMemFS()
			l := openTest(t, fsys, "/d/t-0", smallConfig())
			defer l.Close()
			written := map[int64][]byte{}
			res := mustAppend(t, l, plainBatch(t, 2))
			r, _ := l.Read(0, 1, 1, true)
			written[res.FirstOffset] = readRange(t, r)
			c.setup(fsys)
			_, _, err := l.Append(makeBatch(t, batchSpec{n: 2, value: 100, pid: -1}), 7, AppendClient)
			if c.atFlush {
				if err != nil {
					t.Fatalf("append: %v", err)
				}
				err = l.Flush()
			}
			if kerrOf(err) != kerr.KafkaStorageError {
				t.Fatalf("got %v, want KAFKA_STORAGE_ERROR", err)
			}
			fsys.SetCapacity(0)
			fsys.Inject(nil)
			if c.offline {
				if l.Err() == nil {
					t.Fatal("log not offline")
				}
				if _, _, err := l.Append(plainBatch(t, 1), 7, AppendClient); kerrOf(err) != kerr.KafkaStorageError {
					t.Fatalf("offline log took an append: %v", err)
				}
				return
			}
			if l.LogEndOffset() != 2 || l.Err() != nil {
				t.Fatalf("log end %d err %v after a refused write", l.LogEndOffset(), l.Err())
			}
			checkLog(t, l, written)
			res = mustAppend(t, l, plainBatch(t, 1))
			if res.FirstOffset != 2 {
				t.Fatalf("next append at %d", res.FirstOffset)
			}
		})
	}
}

func TestFailedSyncTakesLogOffline(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := openTest(t, fsys, "/d/t-0", smallConfig())
	written := map[int64][]byte{}
	for i := 0; i < 3; i++ {
		res := mustAppend(t, l, plainBatch(t, 2))
		r, _ := l.Read(res.FirstOffset, 1, res.FirstOffset+1, true)
		written[res.FirstOffset] = readRange(t, r)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, plainBatch(t, 2))
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpSync {
			return syscall.EIO
		}
		return nil
	})
	if err := l.Flush(); kerrOf(err) != kerr.KafkaStorageError {
		t.Fatalf("flush: %v", err)
	}
	if _, _, err := l.Append(plainBatch(t, 1), 0, AppendClient); kerrOf(err) != kerr.KafkaStorageError {
		t.Fatalf("append after failed sync: %v", err)
	}
	if _, err := l.Read(0, 100, 10, true); kerrOf(err) != kerr.KafkaStorageError {
		t.Fatalf("read after failed sync: %v", err)
	}
	if l.RecoveryPoint() != 6 {
		t.Fatalf("recovery point moved to %d", l.RecoveryPoint())
	}
	l.Close()
	fsys.Inject(nil)
	fsys.Crash(true, rand.New(rand.NewSource(5)))
	l2 := openTest(t, fsys, "/d/t-0", smallConfig(), func(o *LogOptions) { o.RecoveryPoint = 6 })
	defer l2.Close()
	if l2.LogEndOffset() < 6 {
		t.Fatalf("lost synced data: log end %d", l2.LogEndOffset())
	}
	checkLog(t, l2, written)
}

func TestConcurrentAppendRead(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 4096
	l := openTest(t, vfs.NewMemFS(), "/d/t-0", cfg)
	defer l.Close()
	const appends = 300
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := 0; i < appends; i++ {
			if _, _, err := l.Append(makeBatch(t, batchSpec{n: 1 + i%4, value: 64, pid: -1}), 1, AppendClient); err != nil {
				t.Error(err)
				return
			}
			if i%50 == 0 {
				if err := l.Flush(); err != nil {
					t.Error(err)
				}
			}
		}
	}()
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			for {
				select {
				case <-done:
					return
				default:
				}
				leo := l.LogEndOffset()
				if leo == 0 {
					continue
				}
				off := rng.Int63n(leo)
				rg, err := l.Read(off, int32(rng.Intn(2000)), leo, true)
				if err != nil {
					t.Error(err)
					return
				}
				buf := readRange(t, rg)
				for len(buf) > 0 {
					batch, rest, h, err := protocol.NextBatch(buf)
					if err != nil || !protocol.CheckBatchCRC(batch) {
						t.Errorf("read at %d saw a partial batch: %v", off, err)
						return
					}
					if h.LastOffset() >= leo {
						t.Errorf("read past the log end")
					}
					buf = rest
				}
				l.OffsetForTimestamp(testNowMs)
				l.MaxTimestamp()
			}
		}(int64(r))
	}
	wg.Wait()
	if l.LogEndOffset() != int64(appends/4*10) {
		t.Fatalf("log end %d", l.LogEndOffset())
	}
}

// Recovery writes the rescanned segment's indexes afresh instead of
// clearing the old files: a partition with a few records opens no index
// file at all, and an index a crash left full of junk is replaced, so
// that the entries on disk after the next roll are the rebuilt ones.
func TestRecoveryRewritesIndexesAfresh(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	cfg.SegmentBytes = 4096
	small := openTest(t, fsys, "/d/small-0", cfg)
	mustAppend(t, small, plainBatch(t, 2))
	big := openTest(t, fsys, "/d/big-0", cfg)
	written := map[int64][]byte{}
	for range 12 {
		res := mustAppend(t, big, plainBatch(t, 6))
		written[res.FirstOffset] = readRange(t, mustRead(t, big, res.FirstOffset))
	}
	if err := small.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := big.Flush(); err != nil {
		t.Fatal(err)
	}
	active := big.active().baseOffset
	crash(fsys)
	// Junk where the active segment's index entries were.
	junk := make([]byte, cfg.SegmentIndexBytes)
	for i := range junk {
		junk[i] = byte(i*7 + 1)
	}
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		f, err := fsys.OpenFile(segmentFileName("/d/big-0", active, suf), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt(junk, 0)
		f.Close()
	}
	var indexOps []string
	fsys.Inject(func(op vfs.Op, name string) error {
		if strings.HasPrefix(name, "/d/small-0/") && (strings.HasSuffix(name, indexSuffix) || strings.HasSuffix(name, timeIndexSuffix)) {
			indexOps = append(indexOps, string(op)+" "+name)
		}
		return nil
	})
	small = openTest(t, fsys, "/d/small-0", cfg)
	defer small.Close()
	if len(indexOps) != 0 || small.LogEndOffset() != 2 {
		t.Fatalf("recovering a two-record partition: log end %d, index operations %v", small.LogEndOffset(), indexOps)
	}
	fsys.Inject(nil)
	big = openTest(t, fsys, "/d/big-0", cfg)
	defer big.Close()
	checkLog(t, big, written)
	seg := big.active()
	entries := seg.offsets.count()
	if entries == 0 {
		t.Fatal("the rescan indexed nothing")
	}
	for _, e := range []int{0, entries - 1} {
		seg.offsets.mu.RLock()
		o, p := seg.offsets.entry(e)
		seg.offsets.mu.RUnlock()
		if o < seg.baseOffset || p <= 0 || p >= seg.size.Load() {
			t.Fatalf("entry %d: offset %d position %d", e, o, p)
		}
	}
	// A roll trims the rebuilt indexes: the files hold them, no junk.
	for big.NumSegments() < 3 {
		res := mustAppend(t, big, plainBatch(t, 6))
		written[res.FirstOffset] = readRange(t, mustRead(t, big, res.FirstOffset))
	}
	data, err := vfs.ReadFile(fsys, segmentFileName("/d/big-0", active, indexSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != seg.offsets.count()*offsetIndexEntrySize || bytes.Contains(data, junk[:16]) {
		t.Fatalf("the trimmed index is %d bytes for %d entries", len(data), seg.offsets.count())
	}
	checkLog(t, big, written)
}

// A load after a crash lists the partition's directory once: the producer
// snapshots come from the same listing as the segments.
func TestRecoveryListsThePartitionDirOnce(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	cfg.SegmentBytes = 1024
	l := openTest(t, fsys, "/d/t-0", cfg)
	for i := range 20 {
		mustAppend(t, l, makeBatch(t, batchSpec{n: 2, value: 30, pid: 5, seq: int32(2 * i)}))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	crash(fsys)
	listings := 0
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpReadDir && name == "/d/t-0" {
			listings++
		}
		return nil
	})
	l = openTest(t, fsys, "/d/t-0", cfg)
	defer l.Close()
	fsys.Inject(nil)
	if listings != 1 || l.LogEndOffset() != leo {
		t.Fatalf("%d listings, log end %d (want %d)", listings, l.LogEndOffset(), leo)
	}
	// The producer state came back from the snapshots and the rescan.
	res, _, err := l.Append(makeBatch(t, batchSpec{n: 2, value: 30, pid: 5, seq: 38}), 3, AppendClient)
	if err != nil || !res.Duplicate {
		t.Fatalf("the last batch again: %+v %v", res, err)
	}
}
