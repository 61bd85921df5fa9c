package storage

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/vfs"
)

// dirTestManager opens a manager over dirs with a partition per entry of
// tps, each holding one batch, and reports AllDirsOffline on the channel.
func dirTestManager(t *testing.T, fsys *vfs.MemFS, dirs []string, tps []TopicPartition) (*Manager, map[TopicPartition]*Log, <-chan error) {
	t.Helper()
	allOffline := make(chan error, 1)
	m, err := OpenManager(ManagerOptions{
		FS: fsys, Dirs: dirs, Now: (&testClock{ms: testNowMs}).now,
		AllDirsOffline: func(err error) { allOffline <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	logs := map[TopicPartition]*Log{}
	for _, tp := range tps {
		l, err := m.GetOrCreate(tp, [16]byte{1}, smallConfig())
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, plainBatch(t, 2))
		logs[tp] = l
	}
	return m, logs, allOffline
}

// inDir splits the logs by the log dir holding them.
func inDir(logs map[TopicPartition]*Log, dir string) (in, out []*Log) {
	for _, l := range logs {
		if strings.HasPrefix(l.Dir(), dir+"/") {
			in = append(in, l)
		} else {
			out = append(out, l)
		}
	}
	return in, out
}

// failWritesUnder makes every write, sync and open under dir fail with EIO.
func failWritesUnder(fsys *vfs.MemFS, dir string) {
	fsys.Inject(func(op vfs.Op, name string) error {
		if strings.HasPrefix(name, dir+"/") && (op == vfs.OpWrite || op == vfs.OpSync || op == vfs.OpOpen) {
			return syscall.EIO
		}
		return nil
	})
}

func waitDirOffline(t *testing.T, m *Manager, dir string) {
	t.Helper()
	for _, d := range m.DescribeDirs() {
		if d.Path == dir {
			if kerrOf(d.Err) != kerr.KafkaStorageError {
				t.Fatalf("dir %s described with %v, want KAFKA_STORAGE_ERROR", dir, d.Err)
			}
			return
		}
	}
	t.Fatalf("dir %s not described", dir)
}

// One log's write error takes its whole dir offline: every log of the dir
// refuses appends, reads and timestamp searches with KAFKA_STORAGE_ERROR,
// the dir's checkpoints and clean-shutdown marker are no longer written,
// its partitions are not recreated elsewhere, and the other dir serves on.
func TestWriteErrorTakesTheWholeDirOffline(t *testing.T) {
	fsys := vfs.NewMemFS()
	tps := []TopicPartition{{"t", 0}, {"t", 1}, {"t", 2}, {"t", 3}}
	m, logs, allOffline := dirTestManager(t, fsys, []string{"/a", "/b"}, tps)
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	inA, inB := inDir(logs, "/a")
	if len(inA) != 2 || len(inB) != 2 {
		t.Fatalf("placement: %d in /a, %d in /b", len(inA), len(inB))
	}
	checkpointBefore, _ := vfs.ReadFile(fsys, "/a/"+RecoveryPointCheckpointFile)

	failWritesUnder(fsys, "/a")
	if _, _, err := inA[0].Append(plainBatch(t, 1), 3, AppendClient); kerrOf(err) != kerr.KafkaStorageError {
		t.Fatalf("append with a failing write: %v", err)
	}
	fsys.Inject(nil) // the disk is back, the dir stays offline
	for _, l := range inA {
		if _, _, err := l.Append(plainBatch(t, 1), 3, AppendClient); kerrOf(err) != kerr.KafkaStorageError {
			t.Fatalf("%s: append in an offline dir: %v", l.tp, err)
		}
		if _, err := l.Read(0, 1<<20, 2, true); kerrOf(err) != kerr.KafkaStorageError {
			t.Fatalf("%s: read in an offline dir: %v", l.tp, err)
		}
		if _, _, _, _, err := l.OffsetForTimestamp(0); kerrOf(err) != kerr.KafkaStorageError {
			t.Fatalf("%s: timestamp search in an offline dir: %v", l.tp, err)
		}
	}
	for _, l := range inB {
		mustAppend(t, l, plainBatch(t, 1))
		if r, err := l.Read(0, 1<<20, 3, true); err != nil || len(batchesIn(t, readRange(t, r))) != 2 {
			t.Fatalf("%s: read in the online dir: %v", l.tp, err)
		}
	}
	waitDirOffline(t, m, "/a")
	for _, d := range m.DescribeDirs() {
		if d.Path == "/b" && (d.Err != nil || len(d.Partitions) != 2) {
			t.Fatalf("/b described as %+v", d)
		}
	}
	// A partition of the offline dir is not recreated in the other one;
	// a new partition goes to the online dir.
	if l, err := m.GetOrCreate(inA[1].tp, [16]byte{1}, smallConfig()); err != nil || l != inA[1] {
		t.Fatalf("GetOrCreate of an open partition of the offline dir: %v, another log %v", err, l != inA[1])
	}
	m.mu.Lock()
	delete(m.logs, inA[1].tp) // as if it had not been opened before the failure
	m.mu.Unlock()
	if _, err := m.GetOrCreate(inA[1].tp, [16]byte{1}, smallConfig()); kerrOf(err) != kerr.KafkaStorageError {
		t.Fatalf("GetOrCreate of an unopened partition of the offline dir: %v", err)
	}
	fresh, err := m.GetOrCreate(TopicPartition{"u", 0}, [16]byte{2}, smallConfig())
	if err != nil || !strings.HasPrefix(fresh.Dir(), "/b/") {
		t.Fatalf("new partition: %v in %v", err, fresh)
	}
	select {
	case err := <-allOffline:
		t.Fatalf("AllDirsOffline with a dir online: %v", err)
	default:
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if after, _ := vfs.ReadFile(fsys, "/a/"+RecoveryPointCheckpointFile); string(after) != string(checkpointBefore) {
		t.Fatalf("checkpoint of the offline dir rewritten:\n%s", after)
	}
	if err := m.Close(); err == nil {
		t.Fatal("Close reported no failed log")
	}
	if _, err := fsys.Stat("/a/" + CleanShutdownFile); err == nil {
		t.Fatal("clean-shutdown marker written in the offline dir")
	}
	if _, err := fsys.Stat("/b/" + CleanShutdownFile); err != nil {
		t.Fatal("no clean-shutdown marker in the online dir")
	}
}

// The last dir going offline is reported once, for the binary to stop.
func TestLastDirOfflineIsReported(t *testing.T) {
	fsys := vfs.NewMemFS()
	tps := []TopicPartition{{"t", 0}, {"t", 1}}
	m, logs, allOffline := dirTestManager(t, fsys, []string{"/a", "/b"}, tps)
	defer m.Close()
	inA, inB := inDir(logs, "/a")
	failWritesUnder(fsys, "/a")
	inA[0].Append(plainBatch(t, 1), 3, AppendClient)
	select {
	case err := <-allOffline:
		t.Fatalf("AllDirsOffline with /b online: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	// An fsync failure is not survivable either.
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpSync {
			return syscall.EIO
		}
		return nil
	})
	if err := inB[0].Flush(); kerrOf(err) != kerr.KafkaStorageError {
		t.Fatalf("flush with a failing fsync: %v", err)
	}
	select {
	case err := <-allOffline:
		if kerrOf(err) != kerr.KafkaStorageError || !strings.Contains(err.Error(), "/b") {
			t.Fatalf("AllDirsOffline(%v)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("AllDirsOffline not called")
	}
}

// A read that fails with an I/O error takes the dir offline too, as in
// Kafka.
func TestReadErrorTakesTheDirOffline(t *testing.T) {
	fsys := vfs.NewMemFS()
	tps := []TopicPartition{{"t", 0}, {"t", 1}}
	m, logs, _ := dirTestManager(t, fsys, []string{"/a", "/b"}, tps)
	defer m.Close()
	inA, inB := inDir(logs, "/a")
	// A read below the tail goes to the file (the tail is kept in memory).
	for range 20 {
		mustAppend(t, inA[0], plainBatch(t, 2))
	}
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpRead && strings.HasPrefix(name, "/a/") {
			return syscall.EIO
		}
		return nil
	})
	if _, err := inA[0].Read(0, 1<<20, inA[0].LogEndOffset(), true); kerrOf(err) != kerr.KafkaStorageError {
		t.Fatalf("read with a failing disk: %v", err)
	}
	waitDirOffline(t, m, "/a")
	mustAppend(t, inB[0], plainBatch(t, 1))
}

// A checkpoint that cannot be written takes its dir offline, unless the
// disk is only full: the old checkpoint is whole, the next one is tried
// at the next interval.
func TestCheckpointFailures(t *testing.T) {
	fsys := vfs.NewMemFS()
	m, _, _ := dirTestManager(t, fsys, []string{"/a", "/b"}, []TopicPartition{{"t", 0}, {"t", 1}})
	defer m.Close()
	total, free, _ := fsys.DiskUsage("/")
	fsys.SetCapacity(total - free) // not a byte more
	if err := m.Checkpoint(); err == nil {
		t.Fatal("checkpoint on a full disk reported no error")
	}
	for _, d := range m.DescribeDirs() {
		if d.Err != nil {
			t.Fatalf("full disk took %s offline: %v", d.Path, d.Err)
		}
	}
	fsys.SetCapacity(0)
	if err := m.Checkpoint(); err != nil {
		t.Fatalf("checkpoint once space is free: %v", err)
	}
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpOpen && strings.HasPrefix(name, "/b/") && strings.HasSuffix(name, ".tmp") {
			return syscall.EIO
		}
		return nil
	})
	if err := m.Checkpoint(); err == nil {
		t.Fatal("failed checkpoint reported no error")
	}
	waitDirOffline(t, m, "/b")
	fsys.Inject(nil)
}

// logFileBytes sums the sizes of a log's .log files on disk.
func logFileBytes(t *testing.T, fsys vfs.FS, dir string) int64 {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), logSuffix) {
			info, _ := e.Info()
			n += info.Size()
		}
	}
	return n
}

// A full disk refuses appends with KAFKA_STORAGE_ERROR and leaves no
// partial batch, across segment rolls too (Gregor's departure from Kafka,
// which takes the dir offline); reads go on, the dir stays online, and
// appends succeed again once space is freed. What was written survives a
// restart whole.
func TestFullDiskRefusesAppendsAndRecovers(t *testing.T) {
	fsys := vfs.NewMemFS()
	m, err := OpenManager(ManagerOptions{FS: fsys, Dirs: []string{"/a"}, Now: (&testClock{ms: testNowMs}).now})
	if err != nil {
		t.Fatal(err)
	}
	cfg := smallConfig()
	cfg.SegmentBytes = 1024 // a roll every few appends
	tp := TopicPartition{"t", 0}
	l, err := m.GetOrCreate(tp, [16]byte{1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	written := map[int64][]byte{}
	pid := int64(7) // an idempotent producer: each roll writes its snapshot
	seq := int32(0)
	appendOne := func() ([]byte, error) {
		batch := makeBatch(t, batchSpec{n: 3, value: 40, pid: pid, seq: seq})
		keep := append([]byte(nil), batch...)
		res, _, err := l.Append(batch, 3, AppendClient)
		if err == nil {
			seq += 3
			r, rerr := l.Read(res.FirstOffset, 1<<20, res.LastOffset+1, true)
			if rerr != nil {
				t.Fatal(rerr)
			}
			written[res.FirstOffset] = readRange(t, r)
		}
		return keep, err
	}
	for i := range 40 {
		leo, size := l.LogEndOffset(), l.Size()
		total, free, _ := fsys.DiskUsage("/a")
		// Full, or nearly, even counting what a roll frees by trimming
		// the active segment's preallocated indexes.
		fsys.SetCapacity(total - free - indexSlack(l.active()) + int64(i%3)*20)
		if _, err := appendOne(); kerrOf(err) != kerr.KafkaStorageError {
			t.Fatalf("append %d on a full disk: %v", i, err)
		}
		if l.Err() != nil || m.DescribeDirs()[0].Err != nil {
			t.Fatalf("append %d: a full disk took the log offline: %v", i, l.Err())
		}
		if l.LogEndOffset() != leo || l.Size() != size || logFileBytes(t, fsys, l.Dir()) != size {
			t.Fatalf("append %d: refused append left log end %d (was %d), size %d (was %d), files %d",
				i, l.LogEndOffset(), leo, l.Size(), size, logFileBytes(t, fsys, l.Dir()))
		}
		checkLog(t, l, written) // reads are served while the disk is full
		fsys.SetCapacity(0)
		if _, err := appendOne(); err != nil {
			t.Fatalf("append %d once space is free: %v", i, err)
		}
	}
	if l.NumSegments() < 5 {
		t.Fatalf("only %d segments: the rolls were not exercised", l.NumSegments())
	}
	// A full disk at a checkpoint does no harm either.
	total, free, _ := fsys.DiskUsage("/a")
	fsys.SetCapacity(total - free)
	m.Checkpoint()
	fsys.SetCapacity(0)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := openTestManager(t, fsys, "/a")
	defer m2.Close()
	l2, err := m2.GetOrCreate(tp, [16]byte{1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l2.LogEndOffset() != 120 {
		t.Fatalf("log end %d after reopening, want 120", l2.LogEndOffset())
	}
	checkLog(t, l2, written)
	// The producer's state survived: its next sequence is taken, a
	// replay is a duplicate.
	l = l2
	if _, err := appendOne(); err != nil {
		t.Fatalf("producer's next batch after reopening: %v", err)
	}
}

// indexSlack is the bytes of a segment's index files past their entries
// (preallocated capacity), which a trim frees.
func indexSlack(s *segment) int64 {
	var n int64
	for _, x := range []*indexFile{s.offsets.indexFile, s.times.indexFile} {
		x.mu.RLock()
		if !x.absent {
			n += int64((x.maxEntries - x.entries) * x.entrySize)
		}
		x.mu.RUnlock()
	}
	return n
}

// A new segment's index that cannot be created for want of space costs
// its entries only: the appends go on, reads find every batch, and once
// there is room the index is created with its next entry.
func TestFullDiskAtIndexCreationSkipsEntries(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	l := openTest(t, fsys, "/d/t-0", cfg)
	defer l.Close()
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpOpen && (strings.HasSuffix(name, indexSuffix) || strings.HasSuffix(name, timeIndexSuffix)) {
			return syscall.ENOSPC
		}
		return nil
	})
	written := map[int64][]byte{}
	for range 30 {
		res := mustAppend(t, l, plainBatch(t, 4))
		written[res.FirstOffset] = readRange(t, mustRead(t, l, res.FirstOffset))
	}
	if l.Err() != nil || l.active().offsets.count() != 0 || !l.active().offsets.isAbsent() {
		t.Fatalf("log err %v, %d index entries", l.Err(), l.active().offsets.count())
	}
	checkLog(t, l, written)
	fsys.Inject(nil)
	for range 30 {
		res := mustAppend(t, l, plainBatch(t, 4))
		written[res.FirstOffset] = readRange(t, mustRead(t, l, res.FirstOffset))
	}
	if l.active().offsets.count() == 0 || l.active().times.count() == 0 {
		t.Fatal("the indexes were not created once there was room")
	}
	checkLog(t, l, written)
}

// A roll that finds no room for the new segment's files leaves the old
// segment active, with its indexes, and the append refused.
func TestFullDiskAtRollKeepsTheActiveSegment(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	cfg.SegmentBytes = 1024
	l := openTest(t, fsys, "/d/t-0", cfg)
	defer l.Close()
	written := map[int64][]byte{}
	for l.NumSegments() == 1 {
		res := mustAppend(t, l, plainBatch(t, 2))
		written[res.FirstOffset] = readRange(t, mustRead(t, l, res.FirstOffset))
	}
	// The next roll's segment cannot be created (a new segment's
	// indexes are created with their first entries: its log file is
	// what the roll creates).
	existing := map[string]bool{}
	for _, s := range l.segments {
		existing[segmentFileName(l.dir, s.baseOffset, logSuffix)] = true
	}
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpOpen && strings.HasSuffix(name, logSuffix) && !existing[name] {
			return syscall.ENOSPC
		}
		return nil
	})
	refused := 0
	for l.NumSegments() == 2 && refused == 0 {
		leo := l.LogEndOffset()
		res, _, err := l.Append(plainBatch(t, 2), 3, AppendClient)
		switch {
		case err == nil:
			written[res.FirstOffset] = readRange(t, mustRead(t, l, res.FirstOffset))
		case kerrOf(err) == kerr.KafkaStorageError && l.Err() == nil && l.LogEndOffset() == leo:
			refused++
		default:
			t.Fatalf("append at a roll with no room: %v (log err %v)", err, l.Err())
		}
	}
	if refused == 0 || l.NumSegments() != 2 {
		t.Fatalf("refused %d, %d segments", refused, l.NumSegments())
	}
	fsys.Inject(nil)
	res := mustAppend(t, l, plainBatch(t, 2))
	written[res.FirstOffset] = readRange(t, mustRead(t, l, res.FirstOffset))
	if l.NumSegments() != 3 {
		t.Fatalf("%d segments after the roll went through", l.NumSegments())
	}
	checkLog(t, l, written)
	if off, _, _, found, err := l.OffsetForTimestamp(testNowMs); err != nil || !found || off != 0 {
		t.Fatalf("timestamp search: %d %v %v", off, found, err)
	}
}
