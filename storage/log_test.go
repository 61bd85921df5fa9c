package storage

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestAppendAssignsDenseOffsetsAndReadsWholeBatches(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := openTest(t, fsys, "/d/t-0", smallConfig())
	defer l.Close()
	var want [][2]int64
	for i := 1; i <= 30; i++ {
		res := mustAppend(t, l, plainBatch(t, i%4+1))
		if len(want) > 0 && res.FirstOffset != want[len(want)-1][1]+1 {
			t.Fatalf("append %d starts at %d after %d", i, res.FirstOffset, want[len(want)-1][1])
		}
		if res.LogAppendTime != -1 || res.Duplicate {
			t.Fatalf("unexpected result %+v", res)
		}
		want = append(want, [2]int64{res.FirstOffset, res.LastOffset})
	}
	if want[0][0] != 0 || l.LogEndOffset() != want[len(want)-1][1]+1 {
		t.Fatalf("offsets %v, LEO %d", want, l.LogEndOffset())
	}
	// A fetch from any offset, including inside a batch, starts with the
	// batch holding it.
	for _, w := range want {
		for off := w[0]; off <= w[1]; off++ {
			r, err := l.Read(off, 1, l.LogEndOffset(), true)
			if err != nil {
				t.Fatal(err)
			}
			hs := batchesIn(t, readRange(t, r))
			if len(hs) != 1 || hs[0].BaseOffset != w[0] || hs[0].LastOffset() != w[1] {
				t.Fatalf("read at %d got %+v, want batch %v", off, hs, w)
			}
			if hs[0].PartitionLeaderEpoch != 3 {
				t.Fatalf("leader epoch %d not stamped", hs[0].PartitionLeaderEpoch)
			}
		}
	}
}

func TestReadLimits(t *testing.T) {
	l := openTest(t, vfs.NewMemFS(), "/d/t-0", smallConfig())
	defer l.Close()
	var sizes []int64
	for i := 0; i < 5; i++ {
		b := plainBatch(t, 2)
		sizes = append(sizes, int64(len(b)))
		mustAppend(t, l, b)
	}
	leo := l.LogEndOffset() // 10
	cases := []struct {
		name     string
		offset   int64
		maxBytes int32
		maxOff   int64
		minOne   bool
		batches  int
		errCode  int16
	}{
		{"all", 0, 1 << 20, leo, true, 5, 0},
		{"kip74 first batch over maxBytes", 0, 1, leo, true, 1, 0},
		{"no batch fits without minOneBatch", 0, 1, leo, false, 0, 0},
		{"exactly two", 0, int32(sizes[0] + sizes[1]), leo, false, 2, 0},
		{"two and a bit", 0, int32(sizes[0] + sizes[1] + 10), leo, false, 2, 0},
		{"high watermark stops", 0, 1 << 20, 4, true, 2, 0},
		{"hw inside range start", 5, 1 << 20, 4, true, 0, 0},
		{"from inside a batch", 3, 1 << 20, leo, true, 4, 0},
		{"at log end", leo, 1 << 20, leo, true, 0, 0},
		{"past log end", leo + 1, 1 << 20, leo, true, 0, kerr.OffsetOutOfRange.Code},
		{"negative", -1, 1 << 20, leo, true, 0, kerr.OffsetOutOfRange.Code},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := l.Read(c.offset, c.maxBytes, c.maxOff, c.minOne)
			if c.errCode != 0 {
				if ke := kerrOf(err); ke == nil || ke.Code != c.errCode {
					t.Fatalf("got %v, want error code %d", err, c.errCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if hs := batchesIn(t, readRange(t, r)); len(hs) != c.batches {
				t.Fatalf("got %d batches, want %d", len(hs), c.batches)
			}
		})
	}
}

func TestRollsBySizeAndNamesSegmentsLikeKafka(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	cfg.SegmentBytes = 2048
	l := openTest(t, fsys, "/d/t-0", cfg)
	for i := 0; i < 40; i++ {
		mustAppend(t, l, makeBatch(t, batchSpec{n: 3, value: 50, pid: -1}))
	}
	if l.NumSegments() < 5 {
		t.Fatalf("only %d segments", l.NumSegments())
	}
	ents, _ := fsys.ReadDir("/d/t-0")
	var logs []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			logs = append(logs, e.Name())
		}
	}
	if logs[0] != "00000000000000000000.log" || len(logs[1]) != len("00000000000000000000.log") {
		t.Fatalf("segment names %v", logs)
	}
	// Reads cross segment boundaries: every offset is readable.
	for off := int64(0); off < l.LogEndOffset(); off++ {
		r, err := l.Read(off, 100000, l.LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		hs := batchesIn(t, readRange(t, r))
		if len(hs) == 0 || hs[0].BaseOffset > off || hs[0].LastOffset() < off {
			t.Fatalf("read at %d got %+v", off, hs)
		}
	}
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Inactive segments' indexes are trimmed to their entries.
	for _, name := range logs {
		base := strings.TrimSuffix(name, ".log")
		st, err := fsys.Stat(filepath.Join("/d/t-0", base+".index"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size()%8 != 0 || st.Size() >= int64(cfg.SegmentIndexBytes) {
			t.Fatalf("index %s has %d bytes after close", base, st.Size())
		}
	}
	l2 := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.CleanShutdown = true; o.RecoveryPoint = leo })
	defer l2.Close()
	if l2.LogEndOffset() != leo || l2.NumSegments() != len(logs) {
		t.Fatalf("reopened LEO %d segments %d, want %d %d", l2.LogEndOffset(), l2.NumSegments(), leo, len(logs))
	}
	res := mustAppend(t, l2, plainBatch(t, 1))
	if res.FirstOffset != leo {
		t.Fatalf("append after reopen at %d, want %d", res.FirstOffset, leo)
	}
}

func TestRollsOnIndexFullAndSegmentMs(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentIndexBytes = 8 * 3 // three offset index entries
	cfg.IndexIntervalBytes = 1
	l := openTest(t, vfs.NewMemFS(), "/d/t-0", cfg)
	defer l.Close()
	for i := 0; i < 12; i++ {
		mustAppend(t, l, plainBatch(t, 1))
	}
	if l.NumSegments() < 3 {
		t.Fatalf("index-full rolls: %d segments", l.NumSegments())
	}

	cfg = smallConfig()
	cfg.SegmentMs = 1000
	l2 := openTest(t, vfs.NewMemFS(), "/d/t-1", cfg)
	defer l2.Close()
	mustAppend(t, l2, makeBatch(t, batchSpec{n: 1, ts: testNowMs, pid: -1}))
	mustAppend(t, l2, makeBatch(t, batchSpec{n: 1, ts: testNowMs + 500, pid: -1}))
	if l2.NumSegments() != 1 {
		t.Fatalf("rolled too early")
	}
	mustAppend(t, l2, makeBatch(t, batchSpec{n: 1, ts: testNowMs + 1001, pid: -1}))
	if l2.NumSegments() != 2 {
		t.Fatalf("segment.ms by record timestamp did not roll: %d", l2.NumSegments())
	}
}

func TestTruncateTo(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 1024
	l := openTest(t, vfs.NewMemFS(), "/d/t-0", cfg)
	defer l.Close()
	for i := 0; i < 30; i++ {
		mustAppend(t, l, plainBatch(t, 2))
	}
	segs := l.NumSegments()
	l.AdvanceHighWatermark(l.LogEndOffset())
	if err := l.TruncateTo(31); err != nil { // inside the batch 30-31
		t.Fatal(err)
	}
	if l.LogEndOffset() != 30 || l.HighWatermark() != 30 {
		t.Fatalf("LEO %d HW %d after truncating inside a batch", l.LogEndOffset(), l.HighWatermark())
	}
	if l.NumSegments() >= segs {
		t.Fatalf("segments above the truncation point remain: %d", l.NumSegments())
	}
	if r, err := l.Read(30, 1000, 100, true); err != nil {
		t.Fatal(err)
	} else {
		r.Release()
	}
	if _, err := l.Read(31, 1000, 100, true); kerrOf(err) != kerr.OffsetOutOfRange {
		t.Fatalf("read past the truncated end: %v", err)
	}
	res := mustAppend(t, l, plainBatch(t, 2))
	if res.FirstOffset != 30 {
		t.Fatalf("append after truncation at %d", res.FirstOffset)
	}
	r, _ := l.Read(0, 1<<20, l.LogEndOffset(), true)
	_ = batchesIn(t, readRange(t, r))
	// Truncate below the log start: the log restarts empty there.
	if _, err := l.DeleteRecordsBefore(10); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 4 || l.LogEndOffset() != 4 {
		t.Fatalf("start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
	if res := mustAppend(t, l, plainBatch(t, 1)); res.FirstOffset != 4 {
		t.Fatalf("append at %d", res.FirstOffset)
	}
}

func TestDeleteRecordsBefore(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 1024
	fsys := vfs.NewMemFS()
	l := openTest(t, fsys, "/d/t-0", cfg)
	defer l.Close()
	for i := 0; i < 30; i++ {
		mustAppend(t, l, plainBatch(t, 2))
	}
	if _, err := l.DeleteRecordsBefore(10); kerrOf(err) != kerr.OffsetOutOfRange {
		t.Fatalf("beyond the high watermark: %v", err)
	}
	l.AdvanceHighWatermark(l.LogEndOffset())
	segs := l.NumSegments()
	start, err := l.DeleteRecordsBefore(25)
	if err != nil || start != 25 || l.LogStartOffset() != 25 {
		t.Fatalf("start %d err %v", start, err)
	}
	if l.NumSegments() >= segs {
		t.Fatalf("no segment deleted (%d of %d)", l.NumSegments(), segs)
	}
	if _, err := l.Read(24, 100, 100, true); kerrOf(err) != kerr.OffsetOutOfRange {
		t.Fatalf("read below the log start: %v", err)
	}
	r, err := l.Read(25, 100, 100, true)
	if err != nil {
		t.Fatal(err)
	}
	if hs := batchesIn(t, readRange(t, r)); hs[0].BaseOffset != 24 {
		t.Fatalf("read at 25 starts with batch %d", hs[0].BaseOffset)
	}
	// Deleting everything rolls the active segment.
	if _, err := l.DeleteRecordsBefore(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() != 1 || l.Size() != 0 {
		t.Fatalf("segments %d size %d after deleting all", l.NumSegments(), l.Size())
	}
	if res := mustAppend(t, l, plainBatch(t, 1)); res.FirstOffset != 60 {
		t.Fatalf("append at %d", res.FirstOffset)
	}
}

func TestOffsetForTimestampAndMaxTimestamp(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 1024
	cfg.IndexIntervalBytes = 100
	l := openTest(t, vfs.NewMemFS(), "/d/t-0", cfg)
	defer l.Close()
	if o, ts, e := l.MaxTimestamp(); o != -1 || ts != -1 || e != -1 {
		t.Fatalf("empty log max timestamp %d %d %d", o, ts, e)
	}
	// Batch i holds 3 records at 1000*i + {0,1,2}; batch 7 holds the max
	// timestamp in its middle record.
	for i := int64(0); i < 20; i++ {
		b := makeBatch(t, batchSpec{n: 3, ts: 100_000 + 1000*i, pid: -1})
		if i == 7 {
			bb := makeBatch(t, batchSpec{n: 1, ts: 900_000, pid: -1})
			mustAppend(t, l, b)
			b = bb
		}
		mustAppend(t, l, b)
	}
	cases := []struct {
		ts     int64
		offset int64
		found  bool
	}{
		{0, 0, true},
		{100_000, 0, true},
		{100_001, 1, true},
		{101_000, 3, true},
		{101_002, 5, true},
		{101_003, 6, true},
		{107_002, 23, true},
		{107_003, 24, true}, // the 900000 batch holds it
		{108_000, 24, true},
		{900_000, 24, true},
		{900_001, -1, false},
	}
	for _, c := range cases {
		off, ts, epoch, found, err := l.OffsetForTimestamp(c.ts)
		if err != nil || found != c.found || off != c.offset {
			t.Fatalf("ts %d: got %d %v %v, want %d %v", c.ts, off, found, err, c.offset, c.found)
		}
		if found && (ts < c.ts || epoch != 3) {
			t.Fatalf("ts %d: record ts %d epoch %d", c.ts, ts, epoch)
		}
	}
	if o, ts, e := l.MaxTimestamp(); o != 24 || ts != 900_000 || e != 3 {
		t.Fatalf("max timestamp %d %d %d", o, ts, e)
	}
}

func TestLogAppendTime(t *testing.T) {
	cfg := smallConfig()
	cfg.LogAppendTime = true
	l := openTest(t, vfs.NewMemFS(), "/d/t-0", cfg)
	defer l.Close()
	res := mustAppend(t, l, makeBatch(t, batchSpec{n: 3, ts: 5, pid: -1}))
	if res.LogAppendTime != testNowMs {
		t.Fatalf("log append time %d", res.LogAppendTime)
	}
	r, _ := l.Read(0, 1000, 100, true)
	hs := batchesIn(t, readRange(t, r))
	if !hs[0].LogAppendTime() || hs[0].MaxTimestamp != testNowMs {
		t.Fatalf("batch not stamped: %+v", hs[0])
	}
	if off, ts, _, found, _ := l.OffsetForTimestamp(testNowMs); !found || off != 0 || ts != testNowMs {
		t.Fatalf("by timestamp: %d %d %v", off, ts, found)
	}
}

func TestEndOffsetForEpoch(t *testing.T) {
	l := openTest(t, vfs.NewMemFS(), "/d/t-0", smallConfig())
	defer l.Close()
	for _, e := range []struct {
		epoch int32
		n     int
	}{{1, 2}, {1, 3}, {3, 4}, {5, 1}} {
		if _, _, err := l.Append(plainBatch(t, e.n), e.epoch, AppendClient); err != nil {
			t.Fatal(err)
		}
	}
	// epoch 1 starts at 0, epoch 3 at 5, epoch 5 at 9; LEO 10.
	cases := []struct {
		req, epoch int32
		end        int64
	}{
		{-1, -1, -1},
		{0, 0, 0},
		{1, 1, 5},
		{2, 1, 5},
		{3, 3, 9},
		{4, 3, 9},
		{5, 5, 10},
		{6, -1, -1},
	}
	for _, c := range cases {
		if e, o := l.EndOffsetForEpoch(c.req); e != c.epoch || o != c.end {
			t.Errorf("epoch %d: got (%d, %d), want (%d, %d)", c.req, e, o, c.epoch, c.end)
		}
	}
	if err := l.TruncateTo(6); err != nil {
		t.Fatal(err)
	}
	if e, o := l.EndOffsetForEpoch(5); e != -1 || o != -1 {
		t.Errorf("epoch 5 after truncation: (%d, %d)", e, o)
	}
	// Truncation inside epoch 3's only batch removes the epoch: the log
	// ends at 5 in epoch 1.
	if e, o := l.EndOffsetForEpoch(3); e != -1 || o != -1 {
		t.Errorf("epoch 3 after truncation: (%d, %d)", e, o)
	}
	if e, o := l.EndOffsetForEpoch(1); e != 1 || o != 5 {
		t.Errorf("epoch 1 after truncation: (%d, %d)", e, o)
	}
}

func TestPartitionMetadataTopicID(t *testing.T) {
	fsys := vfs.NewMemFS()
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	l := openTest(t, fsys, "/d/t-0", smallConfig(), func(o *LogOptions) { o.TopicID = id })
	l.Close()
	data, _ := vfs.ReadFile(fsys, "/d/t-0/partition.metadata")
	if want := "version: 0\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA"; string(data) != want {
		t.Fatalf("partition.metadata %q, want %q", data, want)
	}
	_, err := OpenLog(LogOptions{FS: fsys, Dir: "/d/t-0", Config: smallConfig(), TopicID: [16]byte{9}})
	if kerrOf(err) != kerr.InconsistentTopicID {
		t.Fatalf("other topic id: %v", err)
	}
	l2 := openTest(t, fsys, "/d/t-0", smallConfig())
	defer l2.Close()
	if l2.TopicID() != id {
		t.Fatalf("topic id not read back")
	}
}

func TestAppendRejectsGarbage(t *testing.T) {
	l := openTest(t, vfs.NewMemFS(), "/d/t-0", smallConfig())
	defer l.Close()
	b := plainBatch(t, 2)
	b[len(b)-1] ^= 0xff
	if _, _, err := l.Append(b, 0, AppendClient); kerrOf(err) != kerr.CorruptMessage {
		t.Fatalf("bad CRC: %v", err)
	}
	if _, _, err := l.Append(plainBatch(t, 2)[:30], 0, AppendClient); kerrOf(err) != kerr.CorruptMessage {
		t.Fatalf("truncated: %v", err)
	}
	if _, _, err := l.Append(b, 0, AppendReplication); kerrOf(err) != kerr.CorruptMessage {
		t.Fatalf("replicated bad CRC: %v", err)
	}
	if l.LogEndOffset() != 0 || l.Size() != 0 {
		t.Fatalf("refused appends changed the log")
	}
	if _, _, err := l.Append(fmt.Appendf(nil, "%070d", 0), 0, AppendClient); err == nil {
		t.Fatal("zero batch accepted")
	}
}

func TestReplicationAppendKeepsOffsets(t *testing.T) {
	leader := openTest(t, vfs.NewMemFS(), "/d/t-0", smallConfig())
	defer leader.Close()
	for i := 0; i < 5; i++ {
		if _, _, err := leader.Append(plainBatch(t, 3), int32(i/2), AppendClient); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := leader.Read(0, 1<<20, leader.LogEndOffset(), true)
	data := readRange(t, r)
	follower := openTest(t, vfs.NewMemFS(), "/d/t-0", smallConfig())
	defer follower.Close()
	if _, _, err := follower.Append(append([]byte(nil), data...), 99, AppendReplication); err != nil {
		t.Fatal(err)
	}
	if follower.LogEndOffset() != 15 {
		t.Fatalf("follower LEO %d", follower.LogEndOffset())
	}
	if e, o := follower.EndOffsetForEpoch(1); e != 1 || o != 12 {
		t.Fatalf("follower epoch cache: %d %d", e, o)
	}
	if _, _, err := follower.Append(append([]byte(nil), data...), 99, AppendReplication); err == nil {
		t.Fatal("replicated batches below the log end were accepted")
	}
}

// The high watermark only moves forward: a slower caller storing an older
// value after a faster one must not hide acknowledged records again
// (DESIGN.md §10). Truncation (a follower's) is the one way down.
func TestHighWatermarkOnlyMovesForward(t *testing.T) {
	l := openTest(t, vfs.NewMemFS(), "/d/t-0", smallConfig())
	defer l.Close()
	for range 3 {
		mustAppend(t, l, plainBatch(t, 2))
	}
	if !l.AdvanceHighWatermark(6) {
		t.Fatal("the high watermark did not move to 6")
	}
	if l.AdvanceHighWatermark(2) { // a stale caller, computed before the last append
		t.Fatal("a stale update reports a move")
	}
	if hw := l.HighWatermark(); hw != 6 {
		t.Fatalf("high watermark %d after a stale update, want 6", hw)
	}
	l.AdvanceHighWatermark(100) // clamped to the log end
	if hw := l.HighWatermark(); hw != 6 {
		t.Fatalf("high watermark %d beyond the log end 6", hw)
	}
	if err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	if hw := l.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d after truncating to 4", hw)
	}
}

// Concurrent updaters race the way an appender on one goroutine and a
// coordinator on another do: whatever order their stores land in, the
// high watermark ends at the largest value and a reader never sees it go
// back.
func TestHighWatermarkConcurrentUpdates(t *testing.T) {
	l := openTest(t, vfs.NewMemFS(), "/d/t-0", smallConfig())
	defer l.Close()
	for range 100 {
		mustAppend(t, l, plainBatch(t, 1))
	}
	stop := make(chan struct{})
	backwards := make(chan int64, 1)
	go func() {
		last := int64(0)
		for {
			select {
			case <-stop:
				close(backwards)
				return
			default:
			}
			hw := l.HighWatermark()
			if hw < last {
				backwards <- hw
				close(backwards)
				return
			}
			last = hw
		}
	}()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := int64(g); v <= 100; v += 4 {
				l.AdvanceHighWatermark(v)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if hw, ok := <-backwards; ok {
		t.Fatalf("a reader saw the high watermark go back to %d", hw)
	}
	if hw := l.HighWatermark(); hw != 100 {
		t.Fatalf("high watermark %d, want 100", hw)
	}
}
