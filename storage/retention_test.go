package storage

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

const day = int64(24 * 3600 * 1000)

// movingClock is a test clock the log's background work may read while
// the test moves it.
type movingClock struct{ ms atomic.Int64 }

func newMovingClock() *movingClock    { c := &movingClock{}; c.ms.Store(testNowMs); return c }
func (c *movingClock) now() time.Time { return time.UnixMilli(c.ms.Load()) }
func (c *movingClock) set(ms int64)   { c.ms.Store(ms) }

// appendAt appends a batch of n records stamped ts and advances the high
// watermark past it.
func appendAt(t *testing.T, l *Log, ts int64, n int) {
	t.Helper()
	mustAppend(t, l, makeBatch(t, batchSpec{n: n, ts: ts, value: 400, pid: -1}))
	l.AdvanceHighWatermark(l.LogEndOffset())
}

// retentionLog opens a log whose segments hold about two batches each, on
// a clock the test moves.
func retentionLog(t *testing.T, retentionMs, retentionBytes int64) (*Log, *movingClock) {
	t.Helper()
	cfg := smallConfig()
	cfg.SegmentBytes = 10 << 10
	cfg.RetentionMs = retentionMs
	cfg.RetentionBytes = retentionBytes
	clock := newMovingClock()
	l := openTest(t, vfs.NewMemFS(), "/data/t-0", cfg, func(o *LogOptions) { o.Now = clock.now })
	t.Cleanup(func() { l.Close() })
	return l, clock
}

func TestRetentionDeletesSegmentsOlderThanRetentionMs(t *testing.T) {
	l, clock := retentionLog(t, 7*day, -1)
	for i := range 12 {
		clock.set(testNowMs + int64(i)*day) // one day apart
		appendAt(t, l, clock.ms.Load(), 10)
	}
	segsBefore := l.NumSegments()
	if segsBefore < 4 {
		t.Fatalf("%d segments; the test needs several", segsBefore)
	}
	clock.set(testNowMs + 12*day)
	res, err := l.DeleteRetainedSegments()
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments == 0 || l.NumSegments() != segsBefore-res.Segments {
		t.Fatalf("deleted %d of %d segments, %d left", res.Segments, segsBefore, l.NumSegments())
	}
	// What is left starts at a segment boundary, and every record older
	// than seven days is in a segment that also holds newer ones.
	if l.LogStartOffset() != res.LogStartOffset || l.LogStartOffset() == 0 {
		t.Fatalf("log start %d, result %d", l.LogStartOffset(), res.LogStartOffset)
	}
	if _, err := l.Read(l.LogStartOffset()-1, 1<<20, l.LogEndOffset(), true); kerrOf(err) == nil {
		t.Fatal("read below the new log start succeeded")
	}
	// The newest record survives, and a second pass deletes nothing more.
	if again, _ := l.DeleteRetainedSegments(); again.Segments != 0 {
		t.Fatalf("second pass deleted %d segments", again.Segments)
	}
}

func TestRetentionKeepsEverythingWhenUnlimited(t *testing.T) {
	l, clock := retentionLog(t, -1, -1)
	for i := range 8 {
		appendAt(t, l, testNowMs+int64(i), 10)
	}
	clock.set(testNowMs + 1000*day)
	if res, _ := l.DeleteRetainedSegments(); res.Segments != 0 || l.LogStartOffset() != 0 {
		t.Fatalf("unlimited retention deleted %d segments", res.Segments)
	}
}

func TestRetentionBytesKeepsAtLeastTheLimit(t *testing.T) {
	l, _ := retentionLog(t, -1, 20<<10)
	for i := range 16 {
		appendAt(t, l, testNowMs+int64(i), 10)
	}
	before := l.Size()
	res, err := l.DeleteRetainedSegments()
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments == 0 {
		t.Fatalf("nothing deleted from %d bytes with retention.bytes 20 KiB", before)
	}
	if after := l.Size(); after < 20<<10 || after != before-res.Bytes {
		t.Fatalf("size %d after deleting %d of %d; want at least 20 KiB left", after, res.Bytes, before)
	}
}

// Nothing at or above the high watermark is deleted, however old.
func TestRetentionStopsAtTheHighWatermark(t *testing.T) {
	l, clock := retentionLog(t, day, -1)
	for i := range 10 {
		mustAppend(t, l, makeBatch(t, batchSpec{n: 10, ts: testNowMs + int64(i), value: 400, pid: -1}))
	}
	l.AdvanceHighWatermark(20) // inside the first segments only
	clock.set(testNowMs + 30*day)
	if _, err := l.DeleteRetainedSegments(); err != nil {
		t.Fatal(err)
	}
	if ls := l.LogStartOffset(); ls > 20 {
		t.Fatalf("log start %d passed the high watermark 20", ls)
	}
	if l.LogEndOffset() != 100 {
		t.Fatalf("log end %d", l.LogEndOffset())
	}
}

// When every segment has expired, the active one is rolled and deleted
// too: the log is empty and starts at its end.
func TestRetentionOfEverythingRollsTheActiveSegment(t *testing.T) {
	l, clock := retentionLog(t, day, -1)
	for i := range 6 {
		appendAt(t, l, testNowMs+int64(i), 10)
	}
	clock.set(testNowMs + 3*day)
	if _, err := l.DeleteRetainedSegments(); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 60 || l.LogEndOffset() != 60 || l.Size() != 0 {
		t.Fatalf("log start %d, end %d, size %d; want an empty log at 60", l.LogStartOffset(), l.LogEndOffset(), l.Size())
	}
	appendAt(t, l, clock.ms.Load(), 5)
	if l.LogEndOffset() != 65 {
		t.Fatalf("append after retention ended at %d", l.LogEndOffset())
	}
}

func TestRetentionSkipsCompactOnlyTopics(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 10 << 10
	cfg.RetentionMs = day
	cfg.Delete, cfg.Compact = false, true
	clock := newMovingClock()
	l := openTest(t, vfs.NewMemFS(), "/data/t-0", cfg, func(o *LogOptions) { o.Now = clock.now })
	defer l.Close()
	for i := range 6 {
		appendAt(t, l, testNowMs+int64(i), 10)
	}
	clock.set(testNowMs + 3*day)
	if res, _ := l.DeleteRetainedSegments(); res.Segments != 0 {
		t.Fatalf("cleanup.policy=compact deleted %d segments", res.Segments)
	}
}

// After a restart the segments below the recovery point are not scanned;
// opening them reads the largest timestamp from the time index and tail,
// so old segments still expire (and new ones are not taken for old).
func TestRetentionAfterRestartUsesTheTimeIndex(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 10 << 10
	cfg.RetentionMs = 7 * day
	fsys := vfs.NewMemFS()
	clock := newMovingClock()
	open := func() *Log {
		return openTest(t, fsys, "/data/t-0", cfg, func(o *LogOptions) { o.Now = clock.now })
	}
	l := open()
	for i := range 12 {
		clock.set(testNowMs + int64(i)*day)
		appendAt(t, l, clock.ms.Load(), 10)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	clock.set(testNowMs + 12*day)
	l = open()
	defer l.Close()
	l.AdvanceHighWatermark(l.LogEndOffset())
	res, err := l.DeleteRetainedSegments()
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments == 0 {
		t.Fatal("nothing expired after a restart")
	}
	// Records of days 5-11 are newer than seven days: kept.
	if _, err := l.Read(70, 1, l.LogEndOffset(), true); err != nil {
		t.Fatalf("offset 70 (day 7) gone: %v (log start %d)", err, l.LogStartOffset())
	}
}

// DeleteRecords into the middle of a segment is known only from
// log-start-offset-checkpoint: once the manager has written it, a crash
// does not bring the deleted records back.
func TestDeleteRecordsLogStartSurvivesCrash(t *testing.T) {
	fsys := vfs.NewMemFS()
	opts := ManagerOptions{FS: fsys, Dirs: []string{"/data"}}
	m, err := OpenManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{"t", 0}
	l, err := m.GetOrCreate(tp, [16]byte{1}, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		mustAppend(t, l, plainBatch(t, 1))
	}
	l.AdvanceHighWatermark(l.LogEndOffset())
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteRecordsBefore(5); err != nil {
		t.Fatal(err)
	}
	if err := m.CheckpointLogStartOffsets(); err != nil {
		t.Fatal(err)
	}
	fsys.Crash(false, nil)
	m2, err := OpenManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	l2, err := m2.GetOrCreate(tp, [16]byte{1}, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	if l2.LogStartOffset() != 5 || l2.LogEndOffset() != 10 {
		t.Fatalf("after the crash: log start %d, end %d; want 5 and 10", l2.LogStartOffset(), l2.LogEndOffset())
	}
	if _, err := l2.Read(4, 1<<20, 10, true); kerrOf(err) != kerr.OffsetOutOfRange {
		t.Fatalf("read below the log start: %v, want OFFSET_OUT_OF_RANGE", err)
	}
}

// segment.jitter.ms takes a random amount, below the jitter and below
// segment.ms, off each segment's segment.ms, so that partitions created
// together do not all roll at once.
func TestSegmentMsRollsWithJitter(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentMs, cfg.SegmentJitterMs = 10_000, 4_000
	clock := newMovingClock()
	seen := map[int64]bool{}
	for range 20 {
		l := openTest(t, vfs.NewMemFS(), "/data/t-0", cfg, func(o *LogOptions) { o.Now = clock.now })
		j := l.active().rollJitterMs
		if j < 0 || j >= cfg.SegmentJitterMs {
			t.Fatalf("jitter %d outside [0, %d)", j, cfg.SegmentJitterMs)
		}
		seen[j] = true
		mustAppend(t, l, makeBatch(t, batchSpec{n: 1, ts: clock.ms.Load(), value: 10, pid: -1}))
		// Not yet at segment.ms - jitter: no roll.
		clock.set(testNowMs + cfg.SegmentMs - j - 1)
		if err := l.MaybeRoll(); err != nil || l.NumSegments() != 1 {
			t.Fatalf("rolled %d ms before segment.ms - jitter (%v)", 1, err)
		}
		clock.set(testNowMs + cfg.SegmentMs - j + 1)
		if err := l.MaybeRoll(); err != nil || l.NumSegments() != 2 {
			t.Fatalf("no roll past segment.ms - jitter (%d segments, %v)", l.NumSegments(), err)
		}
		if nj := l.active().rollJitterMs; nj < 0 || nj >= cfg.SegmentJitterMs {
			t.Fatalf("the new segment's jitter %d is outside [0, %d)", nj, cfg.SegmentJitterMs)
		}
		l.Close()
		clock.set(testNowMs)
	}
	if len(seen) < 5 {
		t.Fatalf("jitter took only %d values in 20 logs", len(seen))
	}
}

// An idle compacted log keeps its active segment past segment.ms, as
// Kafka's (which rolls only on an append): its last record, a tombstone
// here, is never the cleaner's to remove, so a reader that waits for the
// record at the end offset - 1 finds it. An append past segment.ms still
// rolls, into a segment that holds the new last record.
func TestIdleCompactedLogIsNotRolled(t *testing.T) {
	cfg := compactConfig()
	cfg.SegmentMs, cfg.DeleteRetentionMs = 1000, 0
	l, clock := compactLog(t, vfs.NewMemFS(), cfg)
	mustAppend(t, l, keyedBatch(t, protocol.CodecNone, clock.ms.Load(), kv{"k", val("v")}))
	mustAppend(t, l, keyedBatch(t, protocol.CodecNone, clock.ms.Load(), kv{"k", nil}))
	l.AdvanceHighWatermark(l.LogEndOffset())
	clock.set(testNowMs + 10*cfg.SegmentMs)
	if err := l.MaybeRoll(); err != nil || l.NumSegments() != 1 {
		t.Fatalf("an idle compacted log past segment.ms: %d segments (%v), want its one active segment", l.NumSegments(), err)
	}
	if c, ok := l.cleanableRange(-1, false, clock.ms.Load()); ok && c.cleanableBytes > 0 {
		t.Fatalf("%d bytes cleanable in a log whose only segment is the active one", c.cleanableBytes)
	}
	if got := readAll(t, l); len(got) != 2 || got[1].offset != l.LogEndOffset()-1 {
		t.Fatalf("read %+v, want both records, the last at %d", got, l.LogEndOffset()-1)
	}
	mustAppend(t, l, keyedBatch(t, protocol.CodecNone, clock.ms.Load(), kv{"k2", val("v2")}))
	if l.NumSegments() != 2 {
		t.Fatalf("an append past segment.ms left %d segments, want 2", l.NumSegments())
	}
}

// Retention deletes by ExpiryNow, not by Now: a wall clock stepped eight
// days ahead (Now) stamps and ages with that step, but the expiry clock
// that did not follow it (cmd/gregor's step guard) deletes nothing.
func TestRetentionDeletesByTheExpiryClock(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 10 << 10
	cfg.RetentionMs = 7 * day
	wall, expiry := newMovingClock(), newMovingClock()
	l := openTest(t, vfs.NewMemFS(), "/data/t-0", cfg, func(o *LogOptions) { o.Now, o.ExpiryNow = wall.now, expiry.now })
	t.Cleanup(func() { l.Close() })
	for range 8 {
		appendAt(t, l, testNowMs, 10)
	}
	wall.set(testNowMs + 8*day)
	if res, err := l.DeleteRetainedSegments(); err != nil || res.Segments != 0 {
		t.Fatalf("with the wall clock stepped 8 days and the expiry clock not: deleted %d segments (%v), want none", res.Segments, err)
	}
	expiry.set(testNowMs + 8*day)
	if res, err := l.DeleteRetainedSegments(); err != nil || res.Segments == 0 {
		t.Fatalf("with the expiry clock 8 days on: deleted %d segments (%v), want all but the newest", res.Segments, err)
	}
}

// A log forgets its deleted segments once their files are removed. It
// kept every one (the segment, its indexes and their names) in its list
// of pending deletions until it closed: under retention that deletes all
// along, memory grew with every segment the log ever deleted.
func TestDeletedSegmentsAreForgottenOnceRemoved(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 10 << 10
	cfg.RetentionBytes = 20 << 10
	cfg.RetentionMs = -1
	cfg.FileDeleteDelayMs = 0
	l := openTest(t, vfs.NewMemFS(), "/data/t-0", cfg)
	t.Cleanup(func() { l.Close() })
	deleted := 0
	for i := range 40 {
		for range 4 {
			appendAt(t, l, testNowMs+int64(i), 10)
		}
		res, err := l.DeleteRetainedSegments()
		if err != nil {
			t.Fatal(err)
		}
		deleted += res.Segments
		// The removals run on timers: wait for this pass's.
		deadline := time.Now().Add(10 * time.Second)
		for {
			l.mu.Lock()
			pending := 0
			for _, d := range l.deletions {
				if !d.done.Load() {
					pending++
				}
			}
			l.mu.Unlock()
			if pending == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d removals still pending", pending)
			}
			time.Sleep(time.Millisecond)
		}
	}
	l.mu.Lock()
	kept := len(l.deletions)
	l.mu.Unlock()
	if deleted < 40 || kept > deleted/10 {
		t.Fatalf("the log keeps %d of the %d segments it deleted", kept, deleted)
	}
}
