package storage

// Crash tests for each directory operation and fsync the log relies on.
// The strict MemFS forgets, at a crash, every directory entry that no
// SyncDir made durable and every byte that no Sync did; each test below
// fails when one of the log's Sync or SyncDir calls is skipped (see
// vfs/teeth for the mechanical check).

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

func crash(fsys *vfs.MemFS) {
	fsys.Inject(nil)
	fsys.Crash(true, rand.New(rand.NewSource(7)))
}

// segmentedLog opens a log at /d/t-0 holding 30 batches of 2 records over
// several 1 KiB segments, not flushed.
func segmentedLog(t *testing.T, fsys *vfs.MemFS) (*Log, config.Topic) {
	t.Helper()
	cfg := smallConfig()
	cfg.SegmentBytes = 1024
	l := openTest(t, fsys, "/d/t-0", cfg)
	for i := 0; i < 30; i++ {
		mustAppend(t, l, plainBatch(t, 2))
	}
	return l, cfg
}

// A clean-shutdown marker removed at start-up must stay removed: after a
// crash the next start must see an unclean shutdown (the broker reports it
// to the controller, which trusts a clean one's data).
func TestCleanShutdownMarkerRemovalSurvivesCrash(t *testing.T) {
	fsys := vfs.NewMemFS()
	m := openTestManager(t, fsys, "/a")
	m.SetBrokerEpoch(5)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := openTestManager(t, fsys, "/a")
	if epoch, ok := m2.PreviousBrokerEpoch(); !ok || epoch != 5 {
		t.Fatalf("clean shutdown not seen: %d %v", epoch, ok)
	}
	crash(fsys)
	m3 := openTestManager(t, fsys, "/a")
	defer m3.Close()
	if _, ok := m3.PreviousBrokerEpoch(); ok {
		t.Fatal("a crash after start-up reported as a clean shutdown")
	}
}

// A deleted partition stays deleted after a crash.
func TestManagerDeleteSurvivesCrash(t *testing.T) {
	fsys := vfs.NewMemFS()
	m := openTestManager(t, fsys, "/a")
	createAndDelete(t, m)
	crash(fsys)
	m2 := openTestManager(t, fsys, "/a")
	defer m2.Close()
	if got := m2.OnDisk(); len(got) != 0 {
		t.Fatalf("deleted partition back after a crash: %v", got)
	}
}

// Segments deleted below a new log start stay deleted after a crash, even
// before the log-start checkpoint is written (it lags by
// log.flush.start.offset.checkpoint.interval.ms): DeleteRecords was
// acknowledged.
func TestDeletedSegmentsStayDeletedAfterCrash(t *testing.T) {
	fsys := vfs.NewMemFS()
	l, cfg := segmentedLog(t, fsys)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.AdvanceHighWatermark(l.LogEndOffset())
	if _, err := l.DeleteRecordsBefore(40); err != nil {
		t.Fatal(err)
	}
	firstBase := l.segments[0].baseOffset
	if firstBase == 0 {
		t.Fatal("no segment was deleted")
	}
	l.bg.Wait()
	crash(fsys)
	l2 := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.RecoveryPoint = 60 })
	defer l2.Close()
	if l2.LogStartOffset() < firstBase {
		t.Fatalf("log start %d after a crash: segments below %d came back", l2.LogStartOffset(), firstBase)
	}
	if l2.LogEndOffset() != 60 {
		t.Fatalf("log end %d", l2.LogEndOffset())
	}
}

// Segments removed by a truncation do not come back after a crash, and
// what was appended after the truncation (a new leader's batches) is what
// the log holds.
func TestTruncationSurvivesCrash(t *testing.T) {
	fsys := vfs.NewMemFS()
	l, cfg := segmentedLog(t, fsys)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(20); err != nil {
		t.Fatal(err)
	}
	written := map[int64][]byte{}
	for off := int64(0); off < 20; {
		r, _ := l.Read(off, 1, off+1, true)
		data := readRange(t, r)
		written[off] = data
		off = batchesIn(t, data)[0].LastOffset() + 1
	}
	for i := 0; i < 3; i++ {
		res := mustAppend(t, l, makeBatch(t, batchSpec{n: 1, value: 5, pid: -1}))
		r, _ := l.Read(res.FirstOffset, 1, res.FirstOffset+1, true)
		written[res.FirstOffset] = readRange(t, r)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.bg.Wait()
	crash(fsys)
	l2 := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.RecoveryPoint = 23 })
	defer l2.Close()
	if l2.LogEndOffset() != 23 {
		t.Fatalf("log end %d after a crash, want 23", l2.LogEndOffset())
	}
	checkLog(t, l2, written)
}

// A segment created by a roll and flushed survives a crash. Here the roll
// is the first append after a restart at the offset of the snapshot taken
// at close, so no producer snapshot (whose write would sync the directory
// too) is written: only the flush makes the new segment's entry durable.
func TestRolledSegmentAfterRestartSurvivesCrash(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	cfg.SegmentBytes = 1024
	l := openTest(t, fsys, "/d/t-0", cfg)
	b := plainBatch(t, 2)
	for l.active().size.Load()+int64(len(b)) <= int64(cfg.SegmentBytes) {
		mustAppend(t, l, plainBatch(t, 2))
	}
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.CleanShutdown = true; o.RecoveryPoint = leo })
	written := map[int64][]byte{}
	for i := 0; i < 3; i++ {
		res := mustAppend(t, l2, plainBatch(t, 2))
		r, _ := l2.Read(res.FirstOffset, 1, res.FirstOffset+1, true)
		written[res.FirstOffset] = readRange(t, r)
	}
	if l2.NumSegments() != 2 {
		t.Fatalf("%d segments, want a roll", l2.NumSegments())
	}
	if err := l2.Flush(); err != nil {
		t.Fatal(err)
	}
	rp := l2.RecoveryPoint()
	l2.bg.Wait()
	crash(fsys)
	l3 := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.RecoveryPoint = rp })
	defer l3.Close()
	if l3.LogEndOffset() < rp {
		t.Fatalf("log end %d below the flushed recovery point %d", l3.LogEndOffset(), rp)
	}
	for off, want := range written {
		r, err := l3.Read(off, 1, off+1, true)
		if err != nil || string(readRange(t, r)) != string(want) {
			t.Fatalf("batch at %d lost or changed after a crash: %v", off, err)
		}
	}
}

// A rolled segment's time index is durable: after a crash a segment whose
// largest timestamp is in an early batch still answers ListOffsets by
// timestamp and max timestamp correctly.
func TestTimeIndexSurvivesCrash(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	cfg.SegmentBytes = 1024
	cfg.IndexIntervalBytes = 1
	l := openTest(t, fsys, "/d/t-0", cfg)
	mustAppend(t, l, makeBatch(t, batchSpec{n: 1, ts: 500_000, pid: -1}))
	for i := int64(0); l.NumSegments() < 3; i++ {
		mustAppend(t, l, makeBatch(t, batchSpec{n: 1, ts: 100_000 + i, pid: -1}))
	}
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	crash(fsys)
	l2 := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.CleanShutdown = true; o.RecoveryPoint = leo })
	defer l2.Close()
	if o, ts, _ := l2.MaxTimestamp(); o != 0 || ts != 500_000 {
		t.Fatalf("max timestamp after a crash: offset %d ts %d, want 0 500000", o, ts)
	}
	if o, _, _, found, err := l2.OffsetForTimestamp(400_000); err != nil || !found || o != 0 {
		t.Fatalf("offset for timestamp after a crash: %d %v %v", o, found, err)
	}
}

// A producer snapshot removed by a truncation stays removed: if it came
// back after the log grew past its offset again with other batches, it
// would be loaded as the producer state of a history that no longer
// exists.
func TestTruncatedProducerSnapshotStaysRemoved(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	one := makeBatch(t, batchSpec{n: 1, pid: 7, epoch: 0, seq: 0, value: 10})
	cfg.SegmentBytes = int32(5 * len(one)) // five batches per segment
	l := openTest(t, fsys, "/d/t-0", cfg)
	for seq := int32(0); seq < 8; seq++ {
		mustAppend(t, l, makeBatch(t, batchSpec{n: 1, pid: 7, epoch: 0, seq: seq, value: 10}))
	}
	if _, err := fsys.Stat(snapshotFileName("/d/t-0", 5)); err != nil {
		t.Fatalf("no producer snapshot at the roll: %v", err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// A new leader's history from offset 3: producer 8 instead of 7.
	if err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	for seq := int32(0); seq < 2; seq++ {
		mustAppend(t, l, makeBatch(t, batchSpec{n: 1, pid: 8, epoch: 0, seq: seq, value: 10}))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.bg.Wait()
	crash(fsys)
	l2 := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.RecoveryPoint = 5 })
	defer l2.Close()
	got := map[int64]int32{}
	for _, p := range l2.ActiveProducers() {
		got[p.ProducerID] = p.LastSequence
	}
	if len(got) != 2 || got[7] != 2 || got[8] != 1 {
		t.Fatalf("producer state after a crash %v, want 7 at seq 2 and 8 at seq 1", got)
	}
}

// What recovery claims is durable: a process that died with appends in
// the page cache restarts and recovers them; the recovery point stays
// where the checkpoint had it (Kafka's LogLoader advances it only with a
// flush), and the flush that advances it makes the recovered data durable
// first, so a power loss afterwards keeps all it claims.
func TestRecoveredDataIsDurableBeforeItIsClaimed(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	l := openTest(t, fsys, "/d/t-0", cfg)
	for i := 0; i < 5; i++ {
		mustAppend(t, l, plainBatch(t, 2))
	}
	_ = l // the process dies: no flush, no close, no crash of the machine
	l2 := openTest(t, fsys, "/d/t-0", cfg)
	if rp := l2.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d right after recovery, want the checkpoint's 0", rp)
	}
	if l2.LogEndOffset() != 10 {
		t.Fatalf("log end %d after recovery, want 10", l2.LogEndOffset())
	}
	if err := l2.Flush(); err != nil {
		t.Fatal(err)
	}
	claimed := l2.RecoveryPoint()
	if claimed != 10 {
		t.Fatalf("recovery point %d after the flush, want 10", claimed)
	}
	crash(fsys) // now the machine loses power
	l3 := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.RecoveryPoint = claimed })
	defer l3.Close()
	if l3.LogEndOffset() < claimed {
		t.Fatalf("log end %d below the recovery point %d claimed before the crash", l3.LogEndOffset(), claimed)
	}
}

// Segments after a corrupt batch are removed by recovery, and stay removed
// after a crash: otherwise they would come back behind a gap in the
// offsets.
func TestRecoveryRemovalsSurviveCrash(t *testing.T) {
	fsys := vfs.NewMemFS()
	l, cfg := segmentedLog(t, fsys)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Damage the second batch of the first segment, durably.
	name := segmentFileName("/d/t-0", 0, logSuffix)
	data, err := vfs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	first := batchesIn(t, data[:len(plainBatch(t, 2))])
	data[len(plainBatch(t, 2))+70] ^= 0xff
	if err := vfs.WriteFileAtomic(fsys, name, data); err != nil {
		t.Fatal(err)
	}
	l2 := openTest(t, fsys, "/d/t-0", cfg)
	if l2.LogEndOffset() != first[0].LastOffset()+1 || l2.NumSegments() != 1 {
		t.Fatalf("recovery kept log end %d in %d segments", l2.LogEndOffset(), l2.NumSegments())
	}
	crash(fsys)
	l3 := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.RecoveryPoint = l2.RecoveryPoint() })
	defer l3.Close()
	if l3.NumSegments() != 1 || l3.LogEndOffset() != 2 {
		t.Fatalf("after a crash: %d segments, log end %d", l3.NumSegments(), l3.LogEndOffset())
	}
}

// A checkpoint is written to a temporary file and renamed over the old
// one: it survives a crash only once its directory is synced, and until
// then a crash gives back the previous checkpoint.
func TestCheckpointSurvivesCrashOnlyOnceItsDirIsSynced(t *testing.T) {
	fsys := vfs.NewMemFS()
	m := openTestManager(t, fsys, "/a")
	tp := TopicPartition{"t", 0}
	l, err := m.GetOrCreate(tp, [16]byte{1}, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, plainBatch(t, 2))
	l.AdvanceHighWatermark(2)
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, plainBatch(t, 2))
	l.AdvanceHighWatermark(4)
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpSyncDir && name == "/a" {
			return syscall.EIO
		}
		return nil
	})
	if err := m.Checkpoint(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("checkpoint with a failing directory sync: %v", err)
	}
	// The new content is visible before the crash...
	hw, err := readOffsetCheckpoint(fsys, "/a/"+ReplicationCheckpointFile)
	if err != nil || hw[tp] != 4 {
		t.Fatalf("checkpoint before the crash: %v %v", hw, err)
	}
	crash(fsys)
	// ...and gone after it: the rename was not durable.
	hw, err = readOffsetCheckpoint(fsys, "/a/"+ReplicationCheckpointFile)
	if err != nil || hw[tp] != 2 {
		t.Fatalf("checkpoint after the crash: %v %v, want the previous one (2)", hw, err)
	}
	ents, _ := fsys.ReadDir("/a")
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("temporary file %s survived without a directory sync", e.Name())
		}
	}
}

// A flush never moves the recovery point past the log end, even when it
// was asked to (a roll's flush that runs after a truncation), and a flush
// in progress during a truncation cannot move it over what the truncation
// removed. Otherwise later appends would be taken as durable without an
// fsync.
func TestFlushNeverClaimsPastTheLogEnd(t *testing.T) {
	fsys := vfs.NewMemFS()
	l, _ := segmentedLog(t, fsys)
	defer l.Close()
	l.bg.Wait()
	if err := l.flushUpTo(l.LogEndOffset() + 100); err != nil {
		t.Fatal(err)
	}
	if rp, leo := l.RecoveryPoint(), l.LogEndOffset(); rp != leo {
		t.Fatalf("recovery point %d, log end %d", rp, leo)
	}

	// A flush blocked in its fsync while a truncation runs.
	mustAppend(t, l, plainBatch(t, 2))
	syncing, release := make(chan struct{}), make(chan struct{})
	var once bool
	defer fsys.Inject(nil) // before the deferred Close
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && !once {
			once = true
			close(syncing)
			<-release
		}
		return nil
	})
	flushed := make(chan error, 1)
	go func() { flushed <- l.Flush() }()
	select {
	case <-syncing:
	case err := <-flushed:
		t.Fatalf("flush returned without an fsync: %v", err)
	}
	truncated := make(chan error, 1)
	go func() { truncated <- l.TruncateTo(20) }()
	// Correct code makes the truncation wait for the flush; give a wrong
	// one the time to truncate under it. (The wait cannot fail the test.)
	var truncErr error
	select {
	case truncErr = <-truncated:
		truncated <- truncErr
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if err := <-truncated; err != nil {
		t.Fatal(err)
	}
	fsys.Inject(nil)
	if rp, leo := l.RecoveryPoint(), l.LogEndOffset(); rp > leo || leo != 20 {
		t.Fatalf("after a flush racing a truncation: recovery point %d, log end %d", rp, leo)
	}
}

// New partitions' dirs are created in a batch and the log dir synced once
// for all of them: that sync is what keeps a flushed partition's dir
// after a crash (a flush syncs the partition dir, not its entry in the log
// dir).
func TestNewPartitionDirsSurviveCrashOnceFlushed(t *testing.T) {
	fsys := vfs.NewMemFS()
	m := openTestManager(t, fsys, "/a")
	res := m.OpenLogs(partitionRequests(3))
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		mustAppend(t, r.Log, plainBatch(t, 2))
		if err := r.Log.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	crash(fsys)
	m2 := openTestManager(t, fsys, "/a")
	defer m2.Close()
	if got := m2.OnDisk(); len(got) != 3 {
		t.Fatalf("on disk after a crash: %v", got)
	}
	for i, r := range m2.OpenLogs(partitionRequests(3)) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if r.Log.LogEndOffset() != 2 {
			t.Fatalf("partition %d lost flushed data: end %d", i, r.Log.LogEndOffset())
		}
	}
}

// A crash before a new partition's first flush may lose its files (the
// metadata image recreates the partition at the next start) but never
// leaves something that fails to open: whatever instant the crash hits
// between creation and the first flush, the partition reopens.
func TestNewPartitionCrashBeforeItsFirstFlushReopens(t *testing.T) {
	for _, appended := range []bool{false, true} {
		fsys := vfs.NewMemFS()
		m := openTestManager(t, fsys, "/a")
		for _, r := range m.OpenLogs(partitionRequests(4)) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if appended {
				mustAppend(t, r.Log, plainBatch(t, 2))
			}
		}
		crash(fsys)
		m2 := openTestManager(t, fsys, "/a")
		for i, r := range m2.OpenLogs(partitionRequests(4)) {
			if r.Err != nil {
				t.Fatalf("appended %v, partition %d after a crash: %v", appended, i, r.Err)
			}
			if r.Log.TopicID() != [16]byte{1} {
				t.Fatalf("topic ID %x", r.Log.TopicID())
			}
		}
		m2.Close()
	}
}

// partition.metadata is written at creation without its dir sync; the
// first flush syncs the partition dir, so once data is durable the topic ID
// is too, and a log recreated for another topic ID is refused rather than
// served (its content was synced before the rename).
func TestPartitionMetadataDurableWithTheFirstFlush(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := openTest(t, fsys, "/d/t-0", smallConfig(), func(o *LogOptions) { o.TopicID = [16]byte{7} })
	mustAppend(t, l, plainBatch(t, 2))
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	crash(fsys)
	_, err := OpenLog(LogOptions{FS: fsys, Dir: "/d/t-0", TopicPartition: TopicPartition{"t", 0}, TopicID: [16]byte{8}, Config: smallConfig()})
	if kerrOf(err) != kerr.InconsistentTopicID {
		t.Fatalf("opening under another topic ID after a crash: %v, want INCONSISTENT_TOPIC_ID", err)
	}
	l2 := openTest(t, fsys, "/d/t-0", smallConfig(), func(o *LogOptions) { o.TopicID = [16]byte{7} })
	defer l2.Close()
	if l2.LogEndOffset() != 2 {
		t.Fatalf("log end %d", l2.LogEndOffset())
	}
}

// A new leader epoch is not written by the append that starts it; the next
// flush writes the leader-epoch checkpoint before it moves the recovery
// point past that batch. A crash then keeps the epoch even though recovery
// does not rescan the segment that holds it.
func TestLeaderEpochsDurableOnceFlushed(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	cfg.SegmentBytes = 1024
	l := openTest(t, fsys, "/d/t-0", cfg)
	var epoch3Start int64 = -1
	for i := 0; i < 30; i++ {
		epoch := int32(0)
		if i >= 5 {
			epoch = 3
		}
		res, _, err := l.Append(plainBatch(t, 2), epoch, AppendClient)
		if err != nil {
			t.Fatal(err)
		}
		if epoch == 3 && epoch3Start < 0 {
			epoch3Start = res.FirstOffset
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.bg.Wait()
	leo := l.LogEndOffset()
	if l.NumSegments() < 3 {
		t.Fatalf("%d segments: the epoch must start below the last one", l.NumSegments())
	}
	crash(fsys)
	l2 := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.RecoveryPoint = leo })
	defer l2.Close()
	if l2.LogEndOffset() != leo {
		t.Fatalf("log end %d, want %d", l2.LogEndOffset(), leo)
	}
	if e, end := l2.EndOffsetForEpoch(0); e != 0 || end != epoch3Start {
		t.Fatalf("epoch 0 ends at %d (epoch %d), want %d: the leader-epoch checkpoint lost epoch 3", end, e, epoch3Start)
	}
}

// The producer snapshot a clean Close writes at the log end survives a
// crash right after, also when the flush at Close had nothing to sync (the
// log was flushed already): the next start loads it instead of replaying
// every batch. Close syncs the dir for it.
func TestCloseSnapshotSurvivesCrash(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := openTest(t, fsys, "/d/t-0", smallConfig())
	for i := int32(0); i < 3; i++ {
		mustAppend(t, l, makeBatch(t, batchSpec{n: 2, pid: 7, epoch: 1, seq: 2 * i, value: 30}))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	crash(fsys)
	offs, err := listSnapshots(fsys, "/d/t-0")
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) == 0 || offs[len(offs)-1] != leo {
		t.Fatalf("snapshots after a crash following a clean close: %v, want one at %d", offs, leo)
	}
}

// A leader-epoch checkpoint that cannot be decoded (a crash inside a clean
// shutdown, whose writes are synced together at its end, can leave one) is
// rebuilt from the batches' leader epochs: every segment is recovered, even
// below the recovery point and with the clean-shutdown marker.
func TestCorruptEpochCheckpointRebuiltFromTheLog(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	cfg.SegmentBytes = 1024
	l := openTest(t, fsys, "/d/t-0", cfg)
	var epoch3Start int64 = -1
	for i := 0; i < 30; i++ {
		epoch := int32(0)
		if i >= 5 {
			epoch = 3
		}
		res, _, err := l.Append(plainBatch(t, 2), epoch, AppendClient)
		if err != nil {
			t.Fatal(err)
		}
		if epoch == 3 && epoch3Start < 0 {
			epoch3Start = res.FirstOffset
		}
	}
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	name := "/d/t-0/" + LeaderEpochCheckpointFile
	f, err := fsys.OpenFile(name, os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("0\n2\n0 0\n3 ")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l2 := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.RecoveryPoint = leo; o.CleanShutdown = true })
	defer l2.Close()
	if l2.LogEndOffset() != leo {
		t.Fatalf("log end %d, want %d", l2.LogEndOffset(), leo)
	}
	if e, end := l2.EndOffsetForEpoch(0); e != 0 || end != epoch3Start {
		t.Fatalf("epoch 0 ends at %d (epoch %d), want %d", end, e, epoch3Start)
	}
	if e, end := l2.EndOffsetForEpoch(3); e != 3 || end != leo {
		t.Fatalf("epoch 3 ends at %d (epoch %d), want %d", end, e, leo)
	}
	// The next flush saves the rebuilt checkpoint.
	if err := l2.Flush(); err != nil {
		t.Fatal(err)
	}
	data, err := vfs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	if entries, err := decodeEpochCheckpoint(data); err != nil || len(entries) != 2 {
		t.Fatalf("checkpoint after the flush: %v, %v", entries, err)
	}
}

// partition.metadata is written unsynced: a crash before the log's first
// flush may leave it torn, and the next open (recovery point 0) writes it
// again; once a flush claimed data, a torn file is an error.
func TestTornPartitionMetadataBeforeTheFirstFlush(t *testing.T) {
	fsys := vfs.NewMemFS()
	id := [16]byte{7}
	l := openTest(t, fsys, "/d/t-0", smallConfig(), func(o *LogOptions) { o.TopicID = id })
	mustAppend(t, l, plainBatch(t, 2))
	name := "/d/t-0/" + PartitionMetadataFile
	tear := func() {
		f, err := fsys.OpenFile(name, os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("version: 0\ntopic")); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	tear()
	l2 := openTest(t, fsys, "/d/t-0", smallConfig(), func(o *LogOptions) { o.TopicID = id })
	if l2.TopicID() != id {
		t.Fatalf("topic ID %v", l2.TopicID())
	}
	if err := l2.Flush(); err != nil {
		t.Fatal(err)
	}
	rp := l2.RecoveryPoint()
	l2.Close()
	data, err := vfs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodePartitionMetadata(data); err != nil || got != id {
		t.Fatalf("partition.metadata after the reopen: %v %v", got, err)
	}
	tear()
	if _, err := OpenLog(LogOptions{FS: fsys, Dir: "/d/t-0", TopicPartition: TopicPartition{"t", 0}, TopicID: id, Config: smallConfig(), RecoveryPoint: rp}); err == nil {
		t.Fatal("a torn partition.metadata of a flushed log was accepted")
	}
}

// A power loss in the middle of a clean shutdown, after the logs were
// closed unsynced and before the filesystem sync: no marker, and every log
// comes back whole up to what was flushed before, with a torn tail cut.
func TestCrashInsideTheCleanShutdownRecovers(t *testing.T) {
	for _, tear := range []bool{false, true} {
		fsys := vfs.NewMemFS()
		m := openTestManager(t, fsys, "/a")
		var flushed []int64
		for i, r := range m.OpenLogs(partitionRequests(8)) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			for j := 0; j < i%3+1; j++ {
				if _, _, err := r.Log.Append(plainBatch(t, 2), int32(j), AppendClient); err != nil {
					t.Fatal(err)
				}
			}
			if i%2 == 0 {
				if err := r.Log.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			flushed = append(flushed, r.Log.RecoveryPoint())
		}
		if err := m.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		fsys.Inject(func(op vfs.Op, name string) error {
			if op == vfs.OpSyncFS {
				return fmt.Errorf("power lost")
			}
			return nil
		})
		if err := m.Close(); err == nil {
			t.Fatal("Close hid the failed filesystem sync")
		}
		fsys.Inject(nil)
		fsys.Crash(tear, rand.New(rand.NewSource(1)))
		m2 := openTestManager(t, fsys, "/a")
		if _, ok := m2.PreviousBrokerEpoch(); ok {
			t.Fatal("a clean shutdown seen after a crash inside it")
		}
		for i, r := range m2.OpenLogs(partitionRequests(8)) {
			if r.Err != nil {
				t.Fatalf("tear %v, partition %d: %v", tear, i, r.Err)
			}
			if r.Log.LogEndOffset() < flushed[i] {
				t.Fatalf("tear %v, partition %d: end %d below the flushed %d", tear, i, r.Log.LogEndOffset(), flushed[i])
			}
		}
		m2.Close()
	}
}
