package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/internal/await"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// kv is one record of a test batch; a nil value is a tombstone.
type kv struct {
	key   string
	value []byte
}

func val(s string) []byte { return []byte(s) }

func compactConfig() config.Topic {
	c := smallConfig()
	c.Compact, c.Delete = true, false
	c.SegmentBytes = 4 << 10
	c.DeleteRetentionMs = day
	return c
}

// keyedBatch builds a batch of records stamped ts (a nil key is keyless).
func keyedBatch(t testing.TB, codec protocol.Codec, ts int64, recs ...kv) []byte {
	t.Helper()
	b := protocol.NewBatchBuilder(codec)
	for _, r := range recs {
		var key []byte
		if r.key != "" {
			key = []byte(r.key)
		}
		b.Add(key, r.value, []protocol.RecordHeader{{Key: []byte("h"), Value: []byte(r.key)}}, ts)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readRec is a record as a consumer reads it back.
type readRec struct {
	offset int64
	key    string
	value  string
	tomb   bool
	header string
}

// readAll reads every record of l from its start to its end.
func readAll(t testing.TB, l *Log) []readRec {
	t.Helper()
	var out []readRec
	next := l.LogStartOffset()
	for next < l.LogEndOffset() {
		r, err := l.Read(next, 1<<30, l.LogEndOffset(), true)
		if err != nil {
			t.Fatalf("Read(%d): %v", next, err)
		}
		data := readRange(t, r)
		if len(data) == 0 {
			break
		}
		for len(data) > 0 {
			batch, rest, h, err := protocol.NextBatch(data)
			if err != nil {
				t.Fatalf("bad batch at %d: %v", next, err)
			}
			if !protocol.CheckBatchCRC(batch) {
				t.Fatalf("batch at %d fails its CRC", h.BaseOffset)
			}
			if h.BaseOffset < next && h.LastOffset() < next {
				t.Fatalf("batch %d-%d read again from %d", h.BaseOffset, h.LastOffset(), next)
			}
			if !h.IsControl() {
				err = protocol.ForEachRecord(batch, nil, func(rec *protocol.Record) error {
					rr := readRec{offset: h.BaseOffset + int64(rec.OffsetDelta), key: string(rec.Key), value: string(rec.Value), tomb: rec.Value == nil}
					if len(rec.Headers) == 1 {
						rr.header = string(rec.Headers[0].Value)
					}
					out = append(out, rr)
					return nil
				})
				if err != nil {
					t.Fatalf("records of batch %d: %v", h.BaseOffset, err)
				}
			}
			next = h.LastOffset() + 1
			data = rest
		}
	}
	for i := 1; i < len(out); i++ {
		if out[i].offset <= out[i-1].offset {
			t.Fatalf("offsets out of order: %d after %d", out[i].offset, out[i-1].offset)
		}
	}
	return out
}

// latestPerKey is what a compacted log must keep of recs: each key's last
// record (tombstones included, until removed).
func latestPerKey(recs []readRec) map[string]readRec {
	out := map[string]readRec{}
	for _, r := range recs {
		if r.key != "" {
			out[r.key] = r
		}
	}
	return out
}

func newTestCleaner(l *Log, mapBytes int64) *cleaner {
	return &cleaner{offsets: newOffsetMap(mapBytes, 0.9), now: l.now}
}

// cleanRound runs one cleaning round from firstDirty (-1: the log start)
// and returns where the next starts.
func cleanRound(t testing.TB, cl *cleaner, l *Log, firstDirty int64) (int64, CleanerStats) {
	t.Helper()
	c, ok := l.cleanableRange(firstDirty, firstDirty >= 0, l.now().UnixMilli())
	if !ok {
		t.Fatal("log cannot be cleaned")
	}
	end, stats, err := cl.clean(c)
	if err != nil {
		t.Fatalf("clean: %v", err)
	}
	return end, stats
}

// writeVersions writes rounds of every key in keys, values "<key>@<round>",
// some batches compressed, and rolls so that all of it is cleanable.
func writeVersions(t *testing.T, l *Log, clock *movingClock, keys, rounds int) {
	t.Helper()
	codecs := []protocol.Codec{protocol.CodecNone, protocol.CodecZstd, protocol.CodecLZ4, protocol.CodecGzip, protocol.CodecSnappy}
	for r := range rounds {
		for k := 0; k < keys; k += 5 {
			var recs []kv
			for j := k; j < min(k+5, keys); j++ {
				recs = append(recs, kv{fmt.Sprintf("key-%03d", j), val(fmt.Sprintf("key-%03d@%d", j, r))})
			}
			mustAppend(t, l, keyedBatch(t, codecs[(r+k)%len(codecs)], clock.ms.Load(), recs...))
		}
	}
	rollAndCommit(t, l)
}

// rollAndCommit makes everything written so far cleanable: the high
// watermark at the end and a new active segment.
func rollAndCommit(t testing.TB, l *Log) {
	t.Helper()
	l.mu.Lock()
	err := l.roll(l.logEndOffset.Load(), l.now().UnixMilli())
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	l.AdvanceHighWatermark(l.LogEndOffset())
}

func compactLog(t *testing.T, fsys vfs.FS, cfg config.Topic) (*Log, *movingClock) {
	t.Helper()
	clock := newMovingClock()
	l := openTest(t, fsys, "/data/t-0", cfg, func(o *LogOptions) { o.Now = clock.now })
	t.Cleanup(func() { l.Close() })
	return l, clock
}

func TestCleanerKeepsTheLatestValueOfEveryKeyAtItsOffset(t *testing.T) {
	l, clock := compactLog(t, vfs.NewMemFS(), compactConfig())
	writeVersions(t, l, clock, 40, 12)
	before := readAll(t, l)
	want := latestPerKey(before)
	sizeBefore, segsBefore := l.Size(), l.NumSegments()

	end, stats := cleanRound(t, newTestCleaner(l, 1<<20), l, -1)
	if end != l.LogEndOffset() {
		t.Fatalf("round ended at %d, want the log end %d", end, l.LogEndOffset())
	}
	after := readAll(t, l)
	if len(after) != len(want) {
		t.Fatalf("%d records after cleaning, want %d (one per key)", len(after), len(want))
	}
	for _, r := range after {
		if w := want[r.key]; r != w {
			t.Fatalf("kept %+v, want %+v", r, w)
		}
	}
	if l.Size() >= sizeBefore/4 {
		t.Fatalf("size %d -> %d: the log did not shrink", sizeBefore, l.Size())
	}
	// Segments are grouped by their size before cleaning (as Kafka
	// groups them): the next round merges the now small ones.
	cleanRound(t, newTestCleaner(l, 1<<20), l, end)
	if l.NumSegments() != 2 || len(readAll(t, l)) != len(want) {
		t.Fatalf("%d segments (from %d) after a second round, want the cleaned one and the active one", l.NumSegments(), segsBefore)
	}
	if stats.MessagesRead != int64(len(before)) || stats.MessagesWritten != int64(len(want)) {
		t.Fatalf("stats read %d written %d, want %d and %d", stats.MessagesRead, stats.MessagesWritten, len(before), len(want))
	}
	// The log end and everything a consumer relies on stay.
	if l.LogStartOffset() != 0 {
		t.Fatalf("log start moved to %d", l.LogStartOffset())
	}
	// A read from an offset that cleaning removed gets the next record.
	r, err := l.Read(1, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	if hs := batchesIn(t, readRange(t, r)); len(hs) == 0 || hs[0].LastOffset() < 1 {
		t.Fatalf("read from a cleaned-away offset returned %+v", hs)
	}
}

func TestCleanerSurvivesReopen(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := compactConfig()
	clock := newMovingClock()
	l := openTest(t, fsys, "/data/t-0", cfg, func(o *LogOptions) { o.Now = clock.now })
	writeVersions(t, l, clock, 30, 6)
	want := latestPerKey(readAll(t, l))
	cleanRound(t, newTestCleaner(l, 1<<20), l, -1)
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, clean := range []bool{true, false} {
		l2 := openTest(t, fsys, "/data/t-0", cfg, func(o *LogOptions) { o.Now = clock.now; o.CleanShutdown = clean; o.HighWatermark = leo })
		got := readAll(t, l2)
		if len(got) != len(want) || l2.LogEndOffset() != leo {
			t.Fatalf("clean=%v: %d records, log end %d; want %d, %d", clean, len(got), l2.LogEndOffset(), len(want), leo)
		}
		for _, r := range got {
			if want[r.key] != r {
				t.Fatalf("clean=%v: read %+v, want %+v", clean, r, want[r.key])
			}
		}
		// Appends continue after the cleaned log.
		res := mustAppend(t, l2, keyedBatch(t, protocol.CodecNone, clock.ms.Load(), kv{"key-000", val("new")}))
		if res.FirstOffset != leo {
			t.Fatalf("append after reopen at %d, want %d", res.FirstOffset, leo)
		}
		if err := l2.TruncateTo(leo); err != nil {
			t.Fatal(err)
		}
		if err := l2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCleanerTombstonesStayUntilTheDeleteHorizon(t *testing.T) {
	cfg := compactConfig()
	l, clock := compactLog(t, vfs.NewMemFS(), cfg)
	writeVersions(t, l, clock, 10, 3)
	mustAppend(t, l, keyedBatch(t, protocol.CodecNone, clock.ms.Load(), kv{"key-001", nil}, kv{"key-004", nil}))
	rollAndCommit(t, l)
	cl := newTestCleaner(l, 1<<20)
	end, _ := cleanRound(t, cl, l, -1)

	got := latestPerKey(readAll(t, l))
	if len(got) != 10 || !got["key-001"].tomb || !got["key-004"].tomb {
		t.Fatalf("after the first cleaning: %+v; the tombstones must stay", got)
	}
	if h := l.cleanerHorizonMs.Load(); h != clock.ms.Load()+cfg.DeleteRetentionMs {
		t.Fatalf("next delete horizon %d, want now+delete.retention.ms %d", h, clock.ms.Load()+cfg.DeleteRetentionMs)
	}
	// Before the horizon a new round keeps them.
	clock.set(clock.ms.Load() + cfg.DeleteRetentionMs - 1)
	end, _ = cleanRound(t, cl, l, end)
	if got := latestPerKey(readAll(t, l)); len(got) != 10 {
		t.Fatalf("tombstones removed before their horizon: %+v", got)
	}
	// The horizon makes the log due for cleaning by itself.
	clock.set(clock.ms.Load() + 1)
	c, _ := l.cleanableRange(end, true, clock.ms.Load())
	if !c.horizonDue {
		t.Fatalf("a passed delete horizon does not make the log due: %+v", c)
	}
	cleanRound(t, cl, l, end)
	got = latestPerKey(readAll(t, l))
	if len(got) != 8 || got["key-001"].key != "" || got["key-004"].key != "" {
		t.Fatalf("after the horizon: %+v; the tombstoned keys must be gone", got)
	}
	for k, r := range got {
		if r.tomb || r.value != k+"@2" {
			t.Fatalf("key %s: %+v", k, r)
		}
	}
}

func TestCleanerWithASmallOffsetMapCleansInSeveralRounds(t *testing.T) {
	l, clock := compactLog(t, vfs.NewMemFS(), compactConfig())
	writeVersions(t, l, clock, 100, 5)
	want := latestPerKey(readAll(t, l))
	// 40 slots: 36 keys a round.
	cl := newTestCleaner(l, 40*offsetMapSlotBytes)
	dirty, rounds := int64(-1), 0
	for dirty < l.LogEndOffset() && rounds < 100 {
		dirty, _ = cleanRound(t, cl, l, dirty)
		rounds++
	}
	if rounds < 3 {
		t.Fatalf("%d rounds: the map should have filled", rounds)
	}
	// A last round over the whole log with the remaining keys.
	for range 3 {
		cleanRound(t, cl, l, -1)
	}
	got := readAll(t, l)
	perKey := map[string]int{}
	for _, r := range got {
		perKey[r.key]++
		if want[r.key].offset > r.offset {
			continue // an older version a full map left behind; not lost data
		}
		if want[r.key] != r {
			t.Fatalf("read %+v, want %+v", r, want[r.key])
		}
	}
	for k, w := range want {
		found := false
		for _, r := range got {
			found = found || r == w
		}
		if !found {
			t.Fatalf("latest version of %s lost: want %+v", k, w)
		}
	}
}

func TestCleanerDropsKeylessRecordsAndCompactedLogsRefuseThem(t *testing.T) {
	cfg := compactConfig()
	cfg.Compact, cfg.Delete = false, true
	l, clock := compactLog(t, vfs.NewMemFS(), cfg)
	mustAppend(t, l, keyedBatch(t, protocol.CodecNone, clock.ms.Load(), kv{"", val("no key")}, kv{"a", val("1")}))
	mustAppend(t, l, keyedBatch(t, protocol.CodecNone, clock.ms.Load(), kv{"a", val("2")}))
	rollAndCommit(t, l)
	cfg.Compact, cfg.Delete = true, false
	l.SetConfig(&cfg)
	_, _, err := l.Append(keyedBatch(t, protocol.CodecNone, clock.ms.Load(), kv{"", val("no key")}), 3, AppendClient)
	if ke := kerrOf(err); ke != kerr.InvalidRecord {
		t.Fatalf("keyless append to a compacted log: %v, want INVALID_RECORD", err)
	}
	_, stats := cleanRound(t, newTestCleaner(l, 1<<20), l, -1)
	got := readAll(t, l)
	if len(got) != 1 || got[0].value != "2" || stats.InvalidMessages != 1 {
		t.Fatalf("after cleaning %+v (invalid %d), want only a=2", got, stats.InvalidMessages)
	}
}

func TestCleanerKeepsTheLastBatchOfAnActiveProducer(t *testing.T) {
	l, clock := compactLog(t, vfs.NewMemFS(), compactConfig())
	// An idempotent producer writes key a twice; a plain producer then
	// supersedes it.
	for seq := range int32(2) {
		b := protocol.NewBatchBuilder(protocol.CodecNone).SetProducer(7, 0, seq)
		b.Add([]byte("a"), val(fmt.Sprint(seq)), nil, clock.ms.Load())
		batch, _ := b.Build()
		mustAppend(t, l, batch)
	}
	mustAppend(t, l, keyedBatch(t, protocol.CodecNone, clock.ms.Load(), kv{"a", val("plain")}))
	rollAndCommit(t, l)
	cleanRound(t, newTestCleaner(l, 1<<20), l, -1)
	r, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	hs := batchesIn(t, readRange(t, r))
	if len(hs) != 2 || hs[0].ProducerID != 7 || hs[0].NumRecords != 0 || hs[0].BaseOffset != 1 || hs[0].BaseSequence != 1 {
		t.Fatalf("batches after cleaning %+v; want the producer's last batch kept empty, then the plain one", hs)
	}
	// The producer's next sequence is still accepted, a retry of its last
	// one is a duplicate.
	b := protocol.NewBatchBuilder(protocol.CodecNone).SetProducer(7, 0, 1)
	b.Add([]byte("a"), val("1"), nil, clock.ms.Load())
	dup, _ := b.Build()
	if res, _, err := l.Append(dup, 3, AppendClient); err != nil || !res.Duplicate {
		t.Fatalf("retry of the last batch: %+v %v, want a duplicate", res, err)
	}
}

// appendReplicated appends a batch as a follower would, at the log end.
func appendReplicated(t testing.TB, l *Log, batch []byte) {
	t.Helper()
	protocol.SetBaseOffset(batch, l.LogEndOffset())
	if _, _, err := l.Append(batch, 3, AppendReplication); err != nil {
		t.Fatalf("replicated append: %v", err)
	}
}

func txnBatch(t testing.TB, pid int64, seq int32, ts int64, recs ...kv) []byte {
	t.Helper()
	b := protocol.NewBatchBuilder(protocol.CodecNone).SetProducer(pid, 0, seq).SetTransactional(true)
	for _, r := range recs {
		b.Add([]byte(r.key), r.value, nil, ts)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCleanerRemovesAbortedDataAndThenItsMarker(t *testing.T) {
	cfg := compactConfig()
	l, clock := compactLog(t, vfs.NewMemFS(), cfg)
	now := clock.ms.Load()
	appendReplicated(t, l, keyedBatch(t, protocol.CodecNone, now, kv{"a", val("committed-before")}))
	appendReplicated(t, l, txnBatch(t, 5, 0, now, kv{"a", val("aborted")}, kv{"b", val("aborted")}))
	appendReplicated(t, l, protocol.EndTxnMarkerBatch(5, 0, false, 1, now))
	appendReplicated(t, l, txnBatch(t, 6, 0, now, kv{"c", val("committed")}))
	appendReplicated(t, l, protocol.EndTxnMarkerBatch(6, 0, true, 1, now))
	appendReplicated(t, l, keyedBatch(t, protocol.CodecNone, now, kv{"z", val("last")}))
	rollAndCommit(t, l)
	cl := newTestCleaner(l, 1<<20)
	end, _ := cleanRound(t, cl, l, -1)
	got := latestPerKey(readAll(t, l))
	if got["a"].value != "committed-before" || got["b"].key != "" || got["c"].value != "committed" {
		t.Fatalf("after cleaning %+v: aborted data must go, committed data stay, and a's aborted version must not hide its committed one", got)
	}
	markers := func() (n int) {
		r, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range batchesIn(t, readRange(t, r)) {
			if h.IsControl() && h.NumRecords > 0 {
				n++
			}
		}
		return n
	}
	if n := markers(); n != 2 {
		t.Fatalf("%d markers after the first cleaning, want both kept (their data was there)", n)
	}
	// While producer 5 is active its last batch stays (empty), and with
	// it the abort marker; the commit marker stays while c's committed
	// value does. Once the producers expire and c is overwritten, a round
	// removes the data, the next finds the markers alone and gives them a
	// delete horizon, and they go once it passes.
	end, _ = cleanRound(t, cl, l, end)
	if n := markers(); n != 2 {
		t.Fatalf("%d markers while their data is there", n)
	}
	appendReplicated(t, l, keyedBatch(t, protocol.CodecNone, now, kv{"c", val("plain")}))
	rollAndCommit(t, l)
	clock.set(clock.ms.Load() + DefaultProducerIDExpirationMs + 1)
	if n := l.RemoveExpiredProducers(); n != 2 {
		t.Fatalf("%d producers expired, want 2", n)
	}
	for range 2 {
		end, _ = cleanRound(t, cl, l, end)
	}
	if n := markers(); n != 2 {
		t.Fatalf("%d markers before their delete horizon, want 2", n)
	}
	clock.set(clock.ms.Load() + cfg.DeleteRetentionMs + 1)
	cleanRound(t, cl, l, end)
	if n := markers(); n != 0 {
		t.Fatalf("%d markers left after their delete horizon", n)
	}
	if got := latestPerKey(readAll(t, l)); len(got) != 3 || got["a"].value != "committed-before" || got["c"].value != "plain" || got["z"].value != "last" {
		t.Fatalf("after the markers went: %+v", got)
	}
}

func TestCleanerAbortsWhenRetentionDeletesItsSegments(t *testing.T) {
	cfg := compactConfig()
	cfg.Delete = true
	l, clock := compactLog(t, vfs.NewMemFS(), cfg)
	writeVersions(t, l, clock, 20, 12)
	c, _ := l.cleanableRange(0, false, clock.ms.Load())
	segs := l.segmentsBefore(c.firstUncleanable)
	cl := newTestCleaner(l, 1<<20)
	// Retention removes the first segment while its cleaned copy is
	// being written.
	cl.beforeSwap = func() {
		if _, err := l.DeleteRecordsBefore(segs[1].baseOffset); err != nil {
			t.Error(err)
		}
	}
	if _, _, err := cl.clean(c); !errors.Is(err, errCleaningAborted) {
		t.Fatalf("clean over deleted segments: %v, want aborted", err)
	}
	// Nothing of the aborted round is left, and the next round works.
	ents, _ := l.fsys.ReadDir(l.dir)
	for _, e := range ents {
		if n := e.Name(); len(n) > 8 && (n[len(n)-8:] == ".cleaned" || n[len(n)-5:] == ".swap") {
			t.Fatalf("leftover %s", n)
		}
	}
	cl.beforeSwap = nil
	cleanRound(t, cl, l, -1)
	if got := latestPerKey(readAll(t, l)); len(got) != 20 {
		t.Fatalf("%d keys after cleaning", len(got))
	}
}

// TestCleanerCrashAtEveryStep kills the cleaning at each of its
// filesystem operations in turn (every later operation fails, as after
// kill -9), crashes the filesystem (unsynced data and names are lost,
// torn) and reopens: the log must open, keep every record's offset, hold
// the latest value of every key, and never a record it did not have.
func TestCleanerCrashAtEveryStep(t *testing.T) {
	cfg := compactConfig()
	for step := 1; ; step++ {
		fsys := vfs.NewMemFS()
		clock := newMovingClock()
		l := openTest(t, fsys, "/data/t-0", cfg, func(o *LogOptions) { o.Now = clock.now })
		writeVersions(t, l, clock, 25, 6)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := fsys.SyncDir("/data/t-0"); err != nil {
			t.Fatal(err)
		}
		before := readAll(t, l)
		want := latestPerKey(before)
		all := map[readRec]bool{}
		for _, r := range before {
			all[r] = true
		}
		leo := l.LogEndOffset()
		l2, finished := cleanAndCrash(t, fsys, l, clock, step, func(o *LogOptions) { o.HighWatermark = leo })
		got := readAll(t, l2)
		if l2.LogEndOffset() != leo {
			t.Fatalf("step %d: log end %d after the crash, want %d", step, l2.LogEndOffset(), leo)
		}
		for _, r := range got {
			if !all[r] {
				t.Fatalf("step %d: read %+v, which was never written at that offset", step, r)
			}
		}
		kept := map[readRec]bool{}
		for _, r := range got {
			kept[r] = true
		}
		for k, w := range want {
			if !kept[w] {
				t.Fatalf("step %d: latest record of %s lost: %+v", step, k, w)
			}
		}
		// A cleaning that returned is durable.
		if finished && len(got) != len(want) {
			t.Fatalf("step %d: the cleaning returned, yet after the crash %d records remain, want %d", step, len(got), len(want))
		}
		l2.Close()
		l.Close()
		if crashedAtEveryStep(t, step, finished) {
			return
		}
	}
}

// cleanAndCrash runs a cleaning of l (at /data/t-0) whose filesystem
// fails from its step-th operation on, crashes, and reopens the log with
// mod applied to its options. finished: the cleaning returned.
func cleanAndCrash(t *testing.T, fsys *vfs.MemFS, l *Log, clock *movingClock, step int, mod func(*LogOptions)) (*Log, bool) {
	t.Helper()
	ops := 0
	fsys.Inject(func(op vfs.Op, name string) error {
		ops++
		if ops >= step {
			return errors.New("killed")
		}
		return nil
	})
	c, _ := l.cleanableRange(0, false, clock.ms.Load())
	_, _, err := newTestCleaner(l, 1<<20).clean(c)
	fsys.Crash(true, rand.New(rand.NewSource(int64(step))))
	fsys.Inject(nil)
	l2 := openTest(t, fsys, "/data/t-0", l.config(), func(o *LogOptions) { o.Now = clock.now; mod(o) })
	return l2, err == nil
}

// crashedAtEveryStep ends a crash-at-every-step loop once the cleaning
// finished, checking that faults were injected before.
func crashedAtEveryStep(t *testing.T, step int, finished bool) bool {
	t.Helper()
	if !finished {
		return false
	}
	if step < 5 {
		t.Fatalf("cleaning finished after %d operations: the test injects nothing", step)
	}
	t.Logf("crashed the cleaning at each of its %d filesystem operations", step-1)
	return true
}

func TestOffsetMapFillsAtItsBudget(t *testing.T) {
	m := newOffsetMap(100*offsetMapSlotBytes, 0.9)
	n := 0
	for ; n < 1000; n++ {
		if !m.put([]byte(fmt.Sprint("k", n)), int64(n)) {
			break
		}
	}
	if n != 90 {
		t.Fatalf("map took %d keys, want 90 (100 slots at load factor 0.9)", n)
	}
	// Known keys are still updated when full.
	if !m.put([]byte("k5"), 5000) || m.get([]byte("k5")) != 5000 || m.latest != 5000 {
		t.Fatalf("update of a known key in a full map: get %d latest %d", m.get([]byte("k5")), m.latest)
	}
	for i := range 90 {
		if i != 5 && m.get([]byte(fmt.Sprint("k", i))) != int64(i) {
			t.Fatalf("k%d lost", i)
		}
	}
	if m.get([]byte("absent")) != -1 {
		t.Fatal("absent key found")
	}
	big := newOffsetMap(1<<24, 0.9)
	keys := make([]string, 50000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
		big.put([]byte(keys[i]), int64(i))
	}
	sort.Strings(keys)
	for _, k := range keys[:100] {
		var i int
		fmt.Sscanf(k, "key-%d", &i)
		if big.get([]byte(k)) != int64(i) {
			t.Fatalf("%s lost after growth", k)
		}
	}
	if len(big.table) >= 1<<24 {
		t.Fatalf("the table took its whole budget (%d bytes) for 50000 keys", len(big.table))
	}
}

func TestManagerCleanerRunsAndCheckpoints(t *testing.T) {
	fsys := vfs.NewMemFS()
	clock := newMovingClock()
	opts := ManagerOptions{FS: fsys, Dirs: []string{"/data"}, Now: clock.now,
		Cleaner: CleanerOptions{Enable: true, Threads: 2, DedupeBufferSize: 1 << 20, IOBufferLoadFactor: 0.9, IOMaxBytesPerSecond: 1 << 30, Backoff: 5 * time.Millisecond}}
	m, err := OpenManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := compactConfig()
	cfg.MinCleanableRatio = 0.1
	l, err := m.GetOrCreate(TopicPartition{"compacted", 0}, [16]byte{1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := m.GetOrCreate(TopicPartition{"plain", 0}, [16]byte{2}, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	writeVersions(t, l, clock, 30, 10)
	writeVersions(t, plain, clock, 30, 10)
	want := latestPerKey(readAll(t, l))
	plainBefore := len(readAll(t, plain))
	rounds := m.CleanerRounds()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := m.WaitCleaned(wctx, rounds+1); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	if got := readAll(t, l); len(got) != len(want) {
		t.Fatalf("%d records in the compacted log after the cleaner ran, want %d", len(got), len(want))
	}
	if got := len(readAll(t, plain)); got != plainBefore {
		t.Fatalf("the cleaner touched a delete-policy log: %d records, had %d", got, plainBefore)
	}
	offsets, err := readOffsetCheckpoint(fsys, "/data/"+CleanerOffsetCheckpointFile)
	if err != nil {
		t.Fatal(err)
	}
	if off, ok := offsets[TopicPartition{"compacted", 0}]; !ok || off != l.LogEndOffset() {
		t.Fatalf("cleaner checkpoint %v, want compacted-0 at %d", offsets, l.LogEndOffset())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened, the checkpoint says there is nothing dirty.
	m2, err := OpenManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	l2, err := m2.GetOrCreate(TopicPartition{"compacted", 0}, [16]byte{1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if off, ok := m2.cleanerCheckpoint(l2); !ok || off != l2.LogEndOffset() {
		t.Fatalf("checkpoint after reopen %d %v", off, ok)
	}
	if _, ok := m2.grabFilthiest(); ok {
		t.Fatal("a clean log is picked for cleaning again")
	}
}

func TestCleanerOptionsChangeAtRunTime(t *testing.T) {
	clock := newMovingClock()
	opts := ManagerOptions{FS: vfs.NewMemFS(), Dirs: []string{"/data"}, Now: clock.now,
		Cleaner: CleanerOptions{Enable: true, Threads: 1, DedupeBufferSize: 1 << 20, IOBufferLoadFactor: 0.9, IOMaxBytesPerSecond: math.MaxFloat64, Backoff: time.Hour}}
	m, err := OpenManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// The one thread finds nothing and sleeps for an hour.
	await.Until(t, 5*time.Second, "the cleaner thread to find nothing and sleep", func() error {
		m.cleaner.mu.Lock()
		defer m.cleaner.mu.Unlock()
		if m.cleaner.idle == 0 {
			return fmt.Errorf("idle %d times, %d rounds", m.cleaner.idle, m.cleaner.rounds)
		}
		return nil
	})
	cfg := compactConfig()
	l, err := m.GetOrCreate(TopicPartition{"c", 0}, [16]byte{1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeVersions(t, l, clock, 20, 5)
	// New options wake it, and two threads with a smaller map clean.
	next := opts.Cleaner
	next.Threads, next.Backoff, next.DedupeBufferSize = 2, 10*time.Millisecond, 200*offsetMapSlotBytes
	rounds := m.CleanerRounds()
	m.SetCleanerOptions(next)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := m.WaitCleaned(wctx, rounds+1); err != nil {
		t.Fatal(err)
	}
	if got := len(readAll(t, l)); got != 20 {
		t.Fatalf("%d records after cleaning, want 20", got)
	}
	// Disabling stops the threads (Run still returns at once when asked).
	next.Enable = false
	m.SetCleanerOptions(next)
}

func TestCleanerSkipsALogItFailedOn(t *testing.T) {
	fsys := vfs.NewMemFS()
	clock := newMovingClock()
	m, err := OpenManager(ManagerOptions{FS: fsys, Dirs: []string{"/data"}, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.GetOrCreate(TopicPartition{"c", 0}, [16]byte{1}, compactConfig())
	if err != nil {
		t.Fatal(err)
	}
	writeVersions(t, l, clock, 20, 5)
	// A corrupt record section in the first segment (the CRC is not what
	// the cleaner checks; the record structure is).
	first := l.segments[0]
	if _, err := first.log.WriteAt([]byte{0xff, 0xff, 0xff, 0xff}, protocol.BatchHeaderSize+2); err != nil {
		t.Fatal(err)
	}
	cl := newTestCleaner(l, 1<<20)
	if !m.cleanFilthiest(cl, 0) {
		t.Fatal("the log was not picked")
	}
	if _, ok := m.grabFilthiest(); ok {
		t.Fatal("a log the cleaner failed on is picked again")
	}
}

// The throttle keeps the cleaner's bytes per second at
// log.cleaner.io.max.bytes.per.second, on a clock the test moves.
func TestThrottlerHoldsTheRate(t *testing.T) {
	now := time.UnixMilli(testNowMs)
	var slept time.Duration
	th := &throttler{rate: 1e6, now: func() time.Time { return now }, sleep: func(d time.Duration) { slept += d; now = now.Add(d) }, periodStart: now}
	// 10 MB in 1 MB reads, each taking 10 ms of I/O: at 1 MB/s that is
	// 10 s, of which 0.1 s was the I/O.
	for range 10 {
		now = now.Add(10 * time.Millisecond)
		th.wait(1e6)
	}
	total := now.Sub(time.UnixMilli(testNowMs))
	if total < 9*time.Second || total > 11*time.Second {
		t.Fatalf("10 MB at 1 MB/s took %s (slept %s)", total, slept)
	}
	// No limit: no sleep.
	slept = 0
	th.setRate(math.MaxFloat64)
	for range 10 {
		now = now.Add(time.Second)
		th.wait(1e9)
	}
	if slept != 0 {
		t.Fatalf("unlimited throttle slept %s", slept)
	}
}

func TestCompactionLags(t *testing.T) {
	cfg := compactConfig()
	cfg.MinCleanableRatio = 0.99
	l, clock := compactLog(t, vfs.NewMemFS(), cfg)
	writeVersions(t, l, clock, 20, 6)
	start := clock.ms.Load()
	// Below the ratio and within max.compaction.lag.ms: not needed.
	c, _ := l.cleanableRange(l.LogEndOffset(), true, start)
	if c.needNow || c.cleanableBytes != 0 {
		t.Fatalf("a clean log: %+v", c)
	}
	// A second batch of versions, dirty but below the 0.99 ratio...
	writeVersions(t, l, clock, 20, 1)
	dirtyFrom := l.LogEndOffset() - 20
	cfg.MaxCompactionLagMs = 60_000
	l.SetConfig(&cfg)
	c, _ = l.cleanableRange(dirtyFrom, true, start+30_000)
	if c.needNow || c.ratio() > 0.99 {
		t.Fatalf("within max.compaction.lag.ms: %+v", c)
	}
	// ...is due once its records are older than max.compaction.lag.ms.
	c, _ = l.cleanableRange(dirtyFrom, true, start+61_000)
	if !c.needNow || c.cleanableBytes == 0 {
		t.Fatalf("past max.compaction.lag.ms the log is not due: %+v", c)
	}
	// min.compaction.lag.ms keeps records that young out of the range.
	cfg.MinCompactionLagMs = 10_000
	l.SetConfig(&cfg)
	c, _ = l.cleanableRange(0, true, start+5_000)
	if c.firstUncleanable != 0 {
		t.Fatalf("records younger than min.compaction.lag.ms are cleanable: first uncleanable %d", c.firstUncleanable)
	}
	c, _ = l.cleanableRange(0, true, start+11_000)
	if c.firstUncleanable != l.active().baseOffset {
		t.Fatalf("records older than min.compaction.lag.ms are not cleanable: first uncleanable %d, active base %d", c.firstUncleanable, l.active().baseOffset)
	}
}

// The first transactional batch of a round makes the cleaner scan the
// whole range for aborted transactions, in the middle of its walk; the
// walk must go on over the bytes it was reading.
func TestCleanerTransactionsAcrossSegments(t *testing.T) {
	cfg := compactConfig()
	l, clock := compactLog(t, vfs.NewMemFS(), cfg)
	now := clock.ms.Load()
	for round := range 6 {
		// Transactional batches first in their segments: the walk has
		// batches left to read after the scan.
		if round == 2 {
			appendReplicated(t, l, txnBatch(t, 5, 0, now, kv{"key-001", val("aborted")}))
		}
		if round == 4 {
			appendReplicated(t, l, protocol.EndTxnMarkerBatch(5, 0, false, 1, now))
		}
		for k := 0; k < 40; k += 5 {
			var recs []kv
			for j := k; j < k+5; j++ {
				recs = append(recs, kv{fmt.Sprintf("key-%03d", j), val(fmt.Sprintf("plain-%d-%d", round, j))})
			}
			appendReplicated(t, l, keyedBatch(t, protocol.CodecNone, now, recs...))
		}
		l.mu.Lock()
		_ = l.roll(l.logEndOffset.Load(), now)
		l.mu.Unlock()
	}
	rollAndCommit(t, l)
	if l.NumSegments() < 5 {
		t.Fatalf("%d segments; the test needs several", l.NumSegments())
	}
	cleanRound(t, newTestCleaner(l, 1<<20), l, -1)
	got := latestPerKey(readAll(t, l))
	if len(got) != 40 {
		t.Fatalf("%d keys after cleaning, want 40", len(got))
	}
	for k, r := range got {
		if want := "plain-5-" + strings.TrimLeft(strings.TrimPrefix(k, "key-"), "0"); r.value != want && !(k == "key-000" && r.value == "plain-5-0") {
			t.Fatalf("key %s reads %q, want %s", k, r.value, want)
		}
	}
	if n := len(readAll(t, l)); n != 40 {
		t.Fatalf("%d records after cleaning, want 40 (the aborted one removed)", n)
	}
}
