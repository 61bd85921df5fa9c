package storage

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// stateTestLogs fills three logs in m: one of several segments with an
// idempotent producer and two leader epochs, one with an aborted and a
// committed transaction (a transaction index), one empty.
func stateTestLogs(t *testing.T, m *Manager) map[TopicPartition]*Log {
	t.Helper()
	cfg := smallConfig()
	cfg.SegmentBytes = 2048
	logs := map[TopicPartition]*Log{}
	for i, tp := range []TopicPartition{{"multi", 0}, {"txn", 1}, {"empty", 2}} {
		l, err := m.GetOrCreate(tp, [16]byte{byte(i + 1)}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		logs[tp] = l
	}
	multi := logs[TopicPartition{"multi", 0}]
	for i := range 40 {
		epoch := int32(3)
		if i >= 25 {
			epoch = 5
		}
		b := makeBatch(t, batchSpec{n: 3, value: 40, pid: 7, seq: int32(i * 3), ts: testNowMs + int64(i)*10})
		if _, _, err := multi.Append(b, epoch, AppendClient); err != nil {
			t.Fatal(err)
		}
	}
	multi.AdvanceHighWatermark(multi.LogEndOffset() - 2)
	txn := logs[TopicPartition{"txn", 1}]
	appendReplicated(t, txn, keyedBatch(t, protocol.CodecNone, testNowMs, kv{"a", val("before")}))
	appendReplicated(t, txn, txnBatch(t, 9, 0, testNowMs, kv{"a", val("aborted")}))
	appendReplicated(t, txn, protocol.EndTxnMarkerBatch(9, 0, false, 1, testNowMs))
	appendReplicated(t, txn, txnBatch(t, 11, 0, testNowMs, kv{"b", val("open")}))
	return logs
}

// closedStateLogs is a file system holding stateTestLogs's logs after a
// clean shutdown (with the log state file).
func closedStateLogs(t *testing.T) *vfs.MemFS {
	t.Helper()
	fsys := vfs.NewMemFS()
	m := openTestManager(t, fsys, "/a")
	stateTestLogs(t, m)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	return fsys
}

// describeLog is what a loaded log shows of itself, for comparing two
// loads of the same files.
func describeLog(t *testing.T, l *Log) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "topicID %x start %d end %d hw %d rp %d lso %d\n", l.TopicID(), l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark(), l.RecoveryPoint(), l.LastStableOffset())
	fmt.Fprintf(&b, "epochs %v\n", l.epochs.snapshot())
	l.mu.Lock()
	fmt.Fprintf(&b, "producers %x end %d snap %d\n", encodeSnapshot(l.producers.producers), l.producers.mapEndOffset, l.producers.lastSnapOffset)
	fmt.Fprintf(&b, "ongoing %v\n", l.producers.ongoing)
	for _, s := range l.segments {
		fmt.Fprintf(&b, "segment %d size %d next %d maxTs %d at %d first %d sinceIndex %d offsets %d/%d times %d/%d txns %v\n",
			s.baseOffset, s.size.Load(), s.nextOffset, s.maxTimestamp.Load(), s.offsetOfMaxTs, s.firstBatchTs, s.bytesSinceIndex,
			s.offsets.count(), s.offsets.maxEntries, s.times.count(), s.times.maxEntries, s.txns.all())
	}
	l.mu.Unlock()
	fmt.Fprintf(&b, "aborted %v\n", l.AbortedTransactions(0, l.LogEndOffset(), nil))
	off, ts, ep := l.MaxTimestamp()
	fmt.Fprintf(&b, "max timestamp %d at %d epoch %d\n", ts, off, ep)
	for _, q := range []int64{testNowMs, testNowMs + 105, testNowMs + 1000} {
		o, ts, ep, found, err := l.OffsetForTimestamp(q)
		fmt.Fprintf(&b, "for %d: %d %d %d %v %v\n", q, o, ts, ep, found, err)
	}
	for _, o := range []int64{0, 17, 60, l.LogEndOffset() - 1} {
		r, err := l.Read(o, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			fmt.Fprintf(&b, "read %d: %v\n", o, err)
			continue
		}
		data := readRange(t, r)
		fmt.Fprintf(&b, "read %d: %d bytes %x\n", o, len(data), data[:min(len(data), 61)])
	}
	return b.String()
}

// A clean restart builds each log from the log state file, and the log
// it builds is the one loading the directory builds: the same offsets,
// epochs, producer and transaction state, segments and indexes, answers
// to reads and timestamp lookups; then both take the same appends alike.
func TestLogStateRestartMatchesDirectoryLoad(t *testing.T) {
	fsys := closedStateLogs(t)
	// The copy loads from the directories: the marker without the state.
	plain := fsys.CrashClone()
	if err := plain.Remove(filepath.Join("/a", LogStateFile)); err != nil {
		t.Fatal(err)
	}
	var opens atomic.Int64
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpOpen && strings.Count(name, "/") > 2 {
			opens.Add(1)
		}
		return nil
	})
	fromState := openTestManager(t, fsys, "/a")
	defer fromState.Close()
	fromDir := openTestManager(t, plain, "/a")
	defer fromDir.Close()
	cfg := smallConfig()
	cfg.SegmentBytes = 2048
	for i, tp := range []TopicPartition{{"multi", 0}, {"txn", 1}, {"empty", 2}} {
		a, err := fromState.GetOrCreate(tp, [16]byte{byte(i + 1)}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if n := opens.Load(); tp.Topic != "txn" && n != 0 {
			t.Fatalf("%s: the load from the log state opened %d files in partition dirs", tp, n)
		}
		b, err := fromDir.GetOrCreate(tp, [16]byte{byte(i + 1)}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if tp.Topic == "txn" {
			// Only a transaction index with entries is read.
			if n := opens.Load(); n != 1 {
				t.Fatalf("txn: %d files opened, want the transaction index only", n)
			}
		}
		opens.Store(-1 << 40) // the comparison reads files
		if got, want := describeLog(t, a), describeLog(t, b); got != want {
			t.Fatalf("%s from the log state:\n%s\nfrom the directory:\n%s", tp, got, want)
		}
		for _, l := range []*Log{a, b} {
			for j := range 30 {
				batch := makeBatch(t, batchSpec{n: 3, value: 40, pid: 7, seq: int32(120 + j*3), ts: testNowMs + 1000 + int64(j)})
				if tp.Topic != "multi" {
					batch = plainBatch(t, 2)
				}
				if _, _, err := l.Append(batch, 6, AppendClient); err != nil {
					t.Fatalf("%s: append %d after the restart: %v", tp, j, err)
				}
			}
			if tp.Topic == "multi" {
				// The producer state came back: a retried batch is a
				// duplicate, not a new write.
				dup := makeBatch(t, batchSpec{n: 3, value: 40, pid: 7, seq: 120 + 29*3, ts: testNowMs + 1029})
				res, _, err := l.Append(dup, 6, AppendClient)
				if err != nil || !res.Duplicate {
					t.Fatalf("retry after the restart: %+v %v", res, err)
				}
			}
		}
		for _, l := range []*Log{a, b} {
			// The flushes after rolls run in the background: settle the
			// recovery points.
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := describeLog(t, a), describeLog(t, b); got != want {
			t.Fatalf("%s after appends, from the log state:\n%s\nfrom the directory:\n%s", tp, got, want)
		}
		opens.Store(0)
	}
}

// A log the state file describes, untouched since the start, closes
// without any I/O in its directory, and the next clean start takes it
// from the new state file, unchanged.
func TestLogStateUntouchedLogClosesWithoutIO(t *testing.T) {
	fsys := closedStateLogs(t)
	req := []LogRequest{{TopicPartition: TopicPartition{"multi", 0}, TopicID: [16]byte{1}, Config: ptr(smallConfig())}}
	load := func() (*Manager, *Log) {
		m := openTestManager(t, fsys, "/a")
		res := m.OpenLogs(req)
		if res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
		return m, res[0].Log
	}
	m, l := load()
	want := describeLog(t, l) // reads the segments: no longer untouched
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, _ = load()
	var partitionIO []string
	fsys.Inject(func(op vfs.Op, name string) error {
		if strings.HasPrefix(name, "/a/multi-0/") {
			partitionIO = append(partitionIO, string(op)+" "+name)
		}
		return nil
	})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	fsys.Inject(nil)
	if len(partitionIO) != 0 {
		t.Fatalf("closing an untouched log did I/O in its dir: %v", partitionIO)
	}
	m, l = load()
	defer m.Close()
	if got := describeLog(t, l); got != want {
		t.Fatalf("after an untouched round:\n%s\nbefore:\n%s", got, want)
	}
}

// The state file is trusted only beside the clean-shutdown marker: after
// a crash that followed a clean start and further appends, the logs are
// recovered from their directories, with every acknowledged batch.
func TestLogStateIgnoredAfterCrash(t *testing.T) {
	fsys := closedStateLogs(t)
	m := openTestManager(t, fsys, "/a")
	l, err := m.GetOrCreate(TopicPartition{"multi", 0}, [16]byte{1}, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		mustAppend(t, l, plainBatch(t, 2+i%3))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	if _, err := fsys.Stat(filepath.Join("/a", LogStateFile)); err == nil {
		t.Fatal("the state file survived the start that used it")
	}
	// Its removal is durable with the marker's: a crash cannot bring back
	// the file beside a later shutdown's marker.
	if _, err := fsys.CrashClone().Stat(filepath.Join("/a", LogStateFile)); err == nil {
		t.Fatal("a crash after the start brings the state file back")
	}
	crash(fsys)
	m2 := openTestManager(t, fsys, "/a")
	defer m2.Close()
	l2, err := m2.GetOrCreate(TopicPartition{"multi", 0}, [16]byte{1}, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	if l2.LogEndOffset() != leo {
		t.Fatalf("log end %d after the crash, %d flushed", l2.LogEndOffset(), leo)
	}
}

// A state that does not match the files (a segment grown or cut behind
// the broker's back, a log end other than the recovery point) is not used,
// or fails the segment's first open; it never serves wrong data.
func TestLogStateMismatchFallsBack(t *testing.T) {
	fsys := closedStateLogs(t)
	data, err := vfs.ReadFile(fsys, filepath.Join("/a", LogStateFile))
	if err != nil {
		t.Fatal(err)
	}
	states, err := decodeLogStates(data)
	if err != nil {
		t.Fatal(err)
	}
	st := states[TopicPartition{"multi", 0}]
	opts := LogOptions{RecoveryPoint: st.logEnd, TopicID: [16]byte{1}}
	if !st.usable(opts) {
		t.Fatal("the written state is not usable")
	}
	for name, o := range map[string]LogOptions{
		"recovery point below": {RecoveryPoint: st.logEnd - 1, TopicID: [16]byte{1}},
		"other topic ID":       {RecoveryPoint: st.logEnd, TopicID: [16]byte{2}},
	} {
		if st.usable(o) {
			t.Fatalf("%s: usable", name)
		}
	}
	// The active segment's file cut behind the broker's back: its first
	// open fails instead of serving a log end that is not there.
	active := st.segments[len(st.segments)-1]
	f, err := fsys.OpenFile(segmentFileName("/a/multi-0", active.base, logSuffix), 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(active.size - 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m := openTestManager(t, fsys, "/a")
	defer m.Close()
	l, err := m.GetOrCreate(TopicPartition{"multi", 0}, [16]byte{1}, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(active.next-1, 1<<20, l.LogEndOffset(), true); !errors.Is(err, errStaleLogState) {
		t.Fatalf("read from a segment shorter than the state says: %v", err)
	}
}

// The file round-trips, and any change to it is refused.
func TestLogStateEncoding(t *testing.T) {
	in := []*logState{
		{tp: TopicPartition{"a-b.c", 7}, topicID: [16]byte{9}, logEnd: 50, epochs: []EpochEntry{{1, 0}, {4, 20}},
			producers: encodeSnapshot(map[int64]*producerEntry{}), producersEnd: 50, lastSnapshot: 50,
			segments: []segmentState{{base: 0, size: 100, next: 20, maxTimestamp: 5, offsetOfMaxTs: 19, firstBatchTs: 1, bytesSinceIdx: 3, offsetEntries: 2, timeEntries: 1}, {base: 20, next: 50, txnIndexBytes: 34}}},
		{tp: TopicPartition{"x", 0}, logEnd: 0, producers: encodeSnapshot(nil), segments: []segmentState{{maxTimestamp: -1, firstBatchTs: -1}}},
	}
	data := encodeLogStates(in)
	out, err := decodeLogStates(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range in {
		got := out[st.tp]
		if got == nil || !reflect.DeepEqual(got.segments, st.segments) || !slices.Equal(got.epochs, st.epochs) || !bytes.Equal(got.producers, st.producers) ||
			got.logEnd != st.logEnd || got.topicID != st.topicID || got.producersEnd != st.producersEnd || got.lastSnapshot != st.lastSnapshot {
			t.Fatalf("%s: got %+v, want %+v", st.tp, got, st)
		}
	}
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x40
		if _, err := decodeLogStates(bad); err == nil {
			t.Fatalf("a flipped byte %d was accepted", i)
		}
	}
	for n := range len(data) {
		if _, err := decodeLogStates(data[:n]); err == nil {
			t.Fatalf("a file cut to %d bytes was accepted", n)
		}
	}
}

func FuzzDecodeLogStates(f *testing.F) {
	f.Add(encodeLogStates(nil))
	f.Add(encodeLogStates([]*logState{{tp: TopicPartition{"t", 1}, producers: encodeSnapshot(nil), segments: []segmentState{{base: 3}}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		states, err := decodeLogStates(data)
		if err != nil {
			return
		}
		// What decodes encodes to a file that decodes to the same.
		list := make([]*logState, 0, len(states))
		for _, st := range states {
			list = append(list, st)
		}
		again, err := decodeLogStates(encodeLogStates(list))
		if err != nil || !reflect.DeepEqual(again, states) {
			t.Fatalf("decoded %d states that do not round-trip: %v", len(list), err)
		}
	})
}

// After a clean start, the first small append to a partition opens its
// log file only, whether or not its active segment has index entries
// (the indexes open when a reader needs their entries, or when they take
// one), and the indexes then serve reads of every offset.
func TestFirstAppendAfterCleanStartOpensTheLogOnly(t *testing.T) {
	fsys := closedStateLogs(t)
	m := openTestManager(t, fsys, "/a")
	defer m.Close()
	for _, c := range []struct {
		tp TopicPartition
		id byte
	}{{TopicPartition{"empty", 2}, 3}, {TopicPartition{"multi", 0}, 1}} {
		l, err := m.GetOrCreate(c.tp, [16]byte{c.id}, smallConfig())
		if err != nil {
			t.Fatal(err)
		}
		var opened []string
		prefix := "/a/" + c.tp.String() + "/"
		fsys.Inject(func(op vfs.Op, name string) error {
			if op == vfs.OpOpen && strings.HasPrefix(name, prefix) {
				opened = append(opened, filepath.Base(name))
			}
			return nil
		})
		mustAppend(t, l, makeBatch(t, batchSpec{n: 1, value: 10, pid: -1}))
		if len(opened) != 1 || !strings.HasSuffix(opened[0], logSuffix) {
			t.Fatalf("%s: the first append opened %v", c.tp, opened)
		}
		for range 40 {
			mustAppend(t, l, plainBatch(t, 5))
		}
		fsys.Inject(nil)
		active := l.active()
		if active.offsets.count() == 0 || active.times.count() == 0 {
			t.Fatalf("%s: no index entries after the appends: %d %d", c.tp, active.offsets.count(), active.times.count())
		}
		// Every offset reads back through the indexes.
		for o := l.LogStartOffset(); o < l.LogEndOffset(); o += 7 {
			r, err := l.Read(o, 1<<20, l.LogEndOffset(), false)
			if err != nil {
				t.Fatal(err)
			}
			if hs := batchesIn(t, readRange(t, r)); len(hs) == 0 || hs[0].BaseOffset > o || hs[0].LastOffset() < o {
				t.Fatalf("%s: read at %d: %+v", c.tp, o, hs)
			}
		}
		if off, _, _, found, err := l.OffsetForTimestamp(testNowMs); err != nil || !found || off != l.LogStartOffset() {
			t.Fatalf("%s: timestamp search: %d %v %v", c.tp, off, found, err)
		}
	}
}
