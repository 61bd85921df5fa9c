package storage

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// txnIndexEntries is every segment's transaction index, by base offset.
func txnIndexEntries(l *Log) map[int64][]abortedTxn {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	out := map[int64][]abortedTxn{}
	for _, s := range l.segments {
		if e := s.txns.all(); len(e) > 0 {
			out[s.baseOffset] = append([]abortedTxn(nil), e...)
		}
	}
	return out
}

// txnIndexFiles lists the dir's transaction index files (live or
// renamed by a swap; not those awaiting deletion).
func txnIndexFiles(t *testing.T, fsys vfs.FS, dir string) []string {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), txnIndexSuffix) && !strings.HasSuffix(e.Name(), deletedSuffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func rollNow(t *testing.T, l *Log) {
	t.Helper()
	l.mu.Lock()
	err := l.roll(l.logEndOffset.Load(), testNowMs)
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	l.bg.Wait() // the roll's flush
}

func abortMarker(pid int64) []byte { return protocol.EndTxnMarkerBatch(pid, 0, false, 1, testNowMs) }
func commitMarker(pid int64) []byte {
	return protocol.EndTxnMarkerBatch(pid, 0, true, 1, testNowMs)
}

// formatLog writes, from offset 0: a plain batch, producer 7's
// transaction (1 and 3) interleaved with producer 8's (2), 7's abort (4)
// while 8's is open, 8's commit (5), then producer 2^40+3's transaction
// (6) and its abort (7) with nothing else open.
func formatLog(t *testing.T, l *Log) {
	t.Helper()
	now := int64(testNowMs)
	appendReplicated(t, l, keyedBatch(t, protocol.CodecNone, now, kv{"k", val("v")}))
	appendReplicated(t, l, txnBatch(t, 7, 0, now, kv{"a", val("1")}))
	appendReplicated(t, l, txnBatch(t, 8, 0, now, kv{"b", val("1")}))
	appendReplicated(t, l, txnBatch(t, 7, 1, now, kv{"a", val("2")}))
	appendReplicated(t, l, abortMarker(7))
	appendReplicated(t, l, commitMarker(8))
	appendReplicated(t, l, txnBatch(t, 1<<40+3, 0, now, kv{"c", val("1")}))
	appendReplicated(t, l, abortMarker(1<<40+3))
}

// Gregor's .txnindex is Kafka's: 34-byte entries of version int16 0,
// producer id, first offset, last offset (the abort marker) and the last
// stable offset when the marker was written, all big-endian; only aborts
// of transactions with data are indexed; a segment without one has no
// file.
func TestTxnIndexFileFormat(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := openTest(t, fsys, "/d/t-0", smallConfig())
	defer l.Close()
	formatLog(t, l)
	data, err := vfs.ReadFile(fsys, "/d/t-0/00000000000000000000.txnindex")
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		// version 0, producer 7, first offset 1, abort marker 4, and the
		// LSO 2: producer 8's transaction is still open.
		"0000" + "0000000000000007" + "0000000000000001" + "0000000000000004" + "0000000000000002" +
		// producer 2^40+3, first 6, marker 7, LSO 8 (nothing else open).
		"0000" + "0000010000000003" + "0000000000000006" + "0000000000000007" + "0000000000000008"
	if got := hex.EncodeToString(data); got != want {
		t.Fatalf("txnindex bytes\n got %s\nwant %s", got, want)
	}
	rollNow(t, l)
	appendReplicated(t, l, txnBatch(t, 9, 0, testNowMs, kv{"d", val("1")}))
	appendReplicated(t, l, commitMarker(9))
	// An abort that ends no transaction with data here (Kafka emits no
	// completed transaction for it).
	appendReplicated(t, l, abortMarker(10))
	if files := txnIndexFiles(t, fsys, "/d/t-0"); !reflect.DeepEqual(files, []string{"00000000000000000000.txnindex"}) {
		t.Fatalf("txnindex files %v: a segment with commits and empty aborts only has none", files)
	}
}

// txnModel drives random transactions over several segments and keeps
// the aborted ones, in marker order.
type txnModel struct {
	aborted []abortedTxn // lastStableOffset unused
}

// want is what AbortedTransactions must answer: every aborted
// transaction overlapping [from, upper), in marker order.
func (m *txnModel) want(from, upper int64) []AbortedTransaction {
	var out []AbortedTransaction
	for _, a := range m.aborted {
		if a.lastOffset >= from && a.firstOffset < upper {
			out = append(out, AbortedTransaction{ProducerID: a.producerID, FirstOffset: a.firstOffset})
		}
	}
	return out
}

func randomTransactions(t *testing.T, l *Log, seed int64, steps int) *txnModel {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	m := &txnModel{}
	open := map[int64]int64{} // producer → first offset
	seqs := map[int64]int32{}
	for step := 0; step < steps; step++ {
		if step%17 == 16 {
			rollNow(t, l)
		}
		pid := int64(1 + rng.Intn(4))
		first, isOpen := open[pid]
		switch r := rng.Intn(10); {
		case r < 3:
			appendReplicated(t, l, keyedBatch(t, protocol.CodecNone, testNowMs, kv{"plain", val("p")}))
		case !isOpen || r < 6:
			off := l.LogEndOffset()
			appendReplicated(t, l, txnBatch(t, pid, seqs[pid], testNowMs, kv{"k", val("v")}, kv{"k2", val("v")}))
			seqs[pid] += 2
			if !isOpen {
				open[pid] = off
			}
		case r < 8:
			appendReplicated(t, l, commitMarker(pid))
			delete(open, pid)
		default:
			off := l.LogEndOffset()
			appendReplicated(t, l, abortMarker(pid))
			m.aborted = append(m.aborted, abortedTxn{producerID: pid, firstOffset: first, lastOffset: off})
			delete(open, pid)
		}
	}
	return m
}

// AbortedTransactions answers every range over several segments as the
// model does, though the search stops at the first entry whose last
// stable offset reaches the upper bound; a read_committed read reports
// the transactions overlapping what it returns; and the indexes are the
// same after a clean reopen (read from the files) and after recovery
// (rebuilt from the markers).
func TestAbortedTransactionsMatchTheModel(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	l := openTest(t, fsys, "/d/t-0", cfg)
	m := randomTransactions(t, l, 1, 400)
	if n := l.NumSegments(); n < 10 {
		t.Fatalf("%d segments; the test wants many", n)
	}
	if len(m.aborted) < 20 {
		t.Fatalf("%d aborted transactions; the test wants many", len(m.aborted))
	}
	leo := l.LogEndOffset()
	check := func(l *Log, what string) {
		t.Helper()
		for from := int64(0); from < leo; from++ {
			for _, upper := range []int64{from + 1, from + 3, from + 20, leo} {
				got := l.AbortedTransactions(from, upper, nil)
				if want := m.want(from, upper); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: AbortedTransactions(%d, %d) = %v, want %v", what, from, upper, got, want)
				}
			}
			for _, maxBytes := range []int32{1, 300, 1 << 20} {
				r, aborted, err := l.ReadWithAborted(from, maxBytes, leo, true, nil)
				if err != nil {
					t.Fatal(err)
				}
				hs := batchesIn(t, readRange(t, r))
				next := hs[len(hs)-1].LastOffset() + 1
				if want := m.want(from, next); !reflect.DeepEqual(aborted, want) {
					t.Fatalf("%s: ReadWithAborted(%d, %d) read up to %d and reports %v, want %v", what, from, maxBytes, next, aborted, want)
				}
			}
		}
	}
	check(l, "written")
	written := txnIndexEntries(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, clean := range []bool{true, false} {
		l := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.CleanShutdown = clean })
		what := fmt.Sprintf("reopened (clean %v)", clean)
		if got := txnIndexEntries(l); !reflect.DeepEqual(got, written) {
			t.Fatalf("%s: indexes %v, want %v", what, got, written)
		}
		check(l, what)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// syncLogFiles makes the partition's .log files and its directory
// durable behind the log's back, and nothing else.
func syncLogFiles(t *testing.T, fsys *vfs.MemFS, dir string) {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), logSuffix) {
			continue
		}
		f, err := fsys.OpenFile(filepath.Join(dir, e.Name()), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}

// A transaction index a crash lost is rebuilt by the rescan of its
// segment, with the first offsets of transactions that began in earlier
// segments (from the producer snapshot, or replayed without one) and the
// same last stable offsets.
func TestTxnIndexRebuiltAfterCrash(t *testing.T) {
	for _, snapshots := range []bool{true, false} {
		t.Run(fmt.Sprintf("snapshots=%v", snapshots), func(t *testing.T) {
			fsys := vfs.NewMemFS()
			cfg := smallConfig()
			l := openTest(t, fsys, "/d/t-0", cfg)
			now := int64(testNowMs)
			appendReplicated(t, l, txnBatch(t, 5, 0, now, kv{"a", val("1")}))                 // 0
			appendReplicated(t, l, txnBatch(t, 6, 0, now, kv{"b", val("1")}))                 // 1
			rollNow(t, l)                                                                     // flushed up to 2
			appendReplicated(t, l, keyedBatch(t, protocol.CodecNone, now, kv{"k", val("v")})) // 2
			appendReplicated(t, l, abortMarker(5))                                            // 3: LSO 1
			appendReplicated(t, l, txnBatch(t, 7, 0, now, kv{"c", val("1")}))                 // 4
			appendReplicated(t, l, abortMarker(6))                                            // 5: LSO 4
			appendReplicated(t, l, abortMarker(7))                                            // 6: LSO 7
			written := txnIndexEntries(l)
			want := map[int64][]abortedTxn{2: {{5, 0, 3, 1}, {6, 1, 5, 4}, {7, 4, 6, 7}}}
			if !reflect.DeepEqual(written, want) {
				t.Fatalf("indexes %v, want %v", written, want)
			}
			recoveryPoint := l.RecoveryPoint()
			syncLogFiles(t, fsys, "/d/t-0")
			fsys.Crash(false, nil)
			if data, err := vfs.ReadFile(fsys, "/d/t-0/00000000000000000002.txnindex"); err == nil && len(data) > 0 {
				t.Fatalf("the crash kept %d bytes of the unsynced txnindex: the test needs it lost", len(data))
			}
			if !snapshots {
				offs, err := listSnapshots(fsys, "/d/t-0")
				if err != nil {
					t.Fatal(err)
				}
				for _, off := range offs {
					if err := fsys.Remove(snapshotFileName("/d/t-0", off)); err != nil {
						t.Fatal(err)
					}
				}
			}
			l = openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.RecoveryPoint = recoveryPoint })
			defer l.Close()
			if got := txnIndexEntries(l); !reflect.DeepEqual(got, want) {
				t.Fatalf("rebuilt indexes %v, want %v", got, want)
			}
			if got := l.AbortedTransactions(0, l.LogEndOffset(), nil); len(got) != 3 {
				t.Fatalf("aborted transactions after recovery: %v", got)
			}
		})
	}
}

// A flushed transaction index survives a crash, its name included, and a
// trusted segment's is read back: flushing syncs the file and, when the
// file is new, the directory.
func TestTxnIndexDurableOnceFlushed(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	l := openTest(t, fsys, "/d/t-0", cfg)
	appendReplicated(t, l, keyedBatch(t, protocol.CodecNone, testNowMs, kv{"k", val("v")}))
	if err := l.Flush(); err != nil { // the dir is synced now
		t.Fatal(err)
	}
	appendReplicated(t, l, txnBatch(t, 5, 0, testNowMs, kv{"a", val("1")}))
	appendReplicated(t, l, abortMarker(5))
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	fsys.Crash(false, nil)
	l = openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.CleanShutdown = true; o.RecoveryPoint = leo })
	defer l.Close()
	if got, want := txnIndexEntries(l), map[int64][]abortedTxn{0: {{5, 1, 2, 3}}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after a crash, the flushed index holds %v, want %v", got, want)
	}
}

// Truncation removes the entries of the markers it removes, from memory
// and from the file; a truncation below the log start removes the files.
func TestTxnIndexTruncation(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := openTest(t, fsys, "/d/t-0", smallConfig())
	formatLog(t, l)
	name := "/d/t-0/00000000000000000000.txnindex"
	size := func() int {
		data, err := vfs.ReadFile(fsys, name)
		if err != nil {
			t.Fatal(err)
		}
		return len(data)
	}
	if err := l.TruncateTo(7); err != nil { // the second abort marker goes
		t.Fatal(err)
	}
	if got := l.AbortedTransactions(0, 100, nil); !reflect.DeepEqual(got, []AbortedTransaction{{7, 1}}) || size() != txnIndexEntrySize {
		t.Fatalf("after truncating to 7: %v, file of %d bytes", got, size())
	}
	if err := l.TruncateTo(4); err != nil { // and the first
		t.Fatal(err)
	}
	if got := l.AbortedTransactions(0, 100, nil); got != nil || size() != 0 || l.abortedEnd.Load() != -1 {
		t.Fatalf("after truncating to 4: %v, file of %d bytes, aborted end %d", got, size(), l.abortedEnd.Load())
	}
	// Producer 7's transaction is open again (its marker went) and ends
	// again; the new entry goes where the old ones were.
	appendReplicated(t, l, abortMarker(7)) // 4
	if got := txnIndexEntries(l); !reflect.DeepEqual(got, map[int64][]abortedTxn{0: {{7, 1, 4, 2}}}) || size() != txnIndexEntrySize {
		t.Fatalf("after aborting again: %v, file of %d bytes", got, size())
	}
	// Below the log start: Kafka's truncateFullyAndStartAt.
	l.AdvanceHighWatermark(l.LogEndOffset())
	if _, err := l.DeleteRecordsBefore(3); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(1); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil { // runs the pending deletions
		t.Fatal(err)
	}
	if files := txnIndexFiles(t, fsys, "/d/t-0"); len(files) != 0 {
		t.Fatalf("txnindex files %v after truncating below the log start", files)
	}
}

// Retention deletes a segment's transaction index with it.
func TestTxnIndexDeletedWithItsSegment(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := openTest(t, fsys, "/d/t-0", smallConfig())
	formatLog(t, l)
	rollNow(t, l)
	appendReplicated(t, l, txnBatch(t, 9, 0, testNowMs, kv{"d", val("1")}))
	appendReplicated(t, l, abortMarker(9))
	l.AdvanceHighWatermark(l.LogEndOffset())
	if files := txnIndexFiles(t, fsys, "/d/t-0"); len(files) != 2 {
		t.Fatalf("txnindex files %v, want one per segment", files)
	}
	if _, err := l.DeleteRecordsBefore(8); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if files := txnIndexFiles(t, fsys, "/d/t-0"); !reflect.DeepEqual(files, []string{"00000000000000000008.txnindex"}) {
		t.Fatalf("txnindex files %v after the first segment was deleted", files)
	}
}

// A trusted segment whose transaction index cannot be read (a version
// Kafka does not know) is recovered, which rebuilds the index.
func TestCorruptTxnIndexIsRebuilt(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	l := openTest(t, fsys, "/d/t-0", cfg)
	formatLog(t, l)
	written := txnIndexEntries(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	name := "/d/t-0/00000000000000000000.txnindex"
	data, err := vfs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	data[txnIndexEntrySize+1] = 1 // the second entry's version
	if err := vfs.WriteFileSynced(fsys, name, data); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.CleanShutdown = true })
	defer l.Close()
	if got := txnIndexEntries(l); !reflect.DeepEqual(got, written) {
		t.Fatalf("indexes %v after opening a corrupt one, want %v", got, written)
	}
	if data, _ := vfs.ReadFile(fsys, name); len(data) != 2*txnIndexEntrySize || data[txnIndexEntrySize+1] != 0 {
		t.Fatalf("the file was not rewritten: % x", data)
	}
}

// The cleaner takes aborted transactions from the indexes, so aborted
// data goes even when its marker lies past the cleaned range; the cleaned
// segment's index keeps the transactions whose marker it keeps because
// their data was met, as Kafka's cleaner writes it.
func TestCleanerUsesAndRewritesTheTxnIndex(t *testing.T) {
	cfg := compactConfig()
	fsys := vfs.NewMemFS()
	l, clock := compactLog(t, fsys, cfg)
	now := clock.ms.Load()
	appendReplicated(t, l, keyedBatch(t, protocol.CodecNone, now, kv{"a", val("committed")})) // 0
	appendReplicated(t, l, txnBatch(t, 5, 0, now, kv{"a", val("aborted-5")}))                 // 1
	appendReplicated(t, l, abortMarker(5))                                                    // 2
	appendReplicated(t, l, txnBatch(t, 6, 0, now, kv{"b", val("aborted-6")}))                 // 3
	appendReplicated(t, l, keyedBatch(t, protocol.CodecNone, now, kv{"z", val("z")}))         // 4
	rollNow(t, l)
	// 6's marker is in the active segment, past what is cleaned.
	appendReplicated(t, l, abortMarker(6)) // 5
	appendReplicated(t, l, keyedBatch(t, protocol.CodecNone, now, kv{"y", val("y")}))
	l.AdvanceHighWatermark(l.LogEndOffset())
	cl := newTestCleaner(l, 1<<20)
	end, _ := cleanRound(t, cl, l, -1)
	got := latestPerKey(readAll(t, l))
	if got["a"].value != "committed" || got["b"].key != "" {
		t.Fatalf("after cleaning %+v: the aborted data of both transactions must go", got)
	}
	// Producer 5's marker stays (its data was met), and with it its
	// entry; 6's stays in the uncleaned active segment.
	want := map[int64][]abortedTxn{0: {{5, 1, 2, 3}}, 5: {{6, 3, 5, 6}}}
	if idx := txnIndexEntries(l); !reflect.DeepEqual(idx, want) {
		t.Fatalf("indexes after cleaning %v, want %v", idx, want)
	}
	if files := txnIndexFiles(t, fsys, l.Dir()); !reflect.DeepEqual(files, []string{"00000000000000000000.txnindex", "00000000000000000005.txnindex"}) {
		t.Fatalf("txnindex files after the swap: %v", files)
	}
	// Once producer 5 expires its emptied batch goes, the next round
	// meets no data of the transaction and keeps the marker (until its
	// horizon) without an entry.
	clock.set(clock.ms.Load() + DefaultProducerIDExpirationMs + 1)
	l.RemoveExpiredProducers()
	for range 2 {
		end, _ = cleanRound(t, cl, l, end)
	}
	if idx := txnIndexEntries(l); !reflect.DeepEqual(idx, map[int64][]abortedTxn{5: {{6, 3, 5, 6}}}) {
		t.Fatalf("indexes once the aborted data is gone: %v", idx)
	}
	if files := txnIndexFiles(t, fsys, l.Dir()); !reflect.DeepEqual(files, []string{"00000000000000000005.txnindex"}) {
		t.Fatalf("txnindex files: %v", files)
	}
}

// A read_committed read of a log without aborted transactions, or from
// past the last one, costs what a read_uncommitted one does: no
// allocation and no lock for the transactions.
func TestReadWithAbortedAllocatesNothingMore(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	l := openTest(t, vfs.OSFS{}, filepath.Join(t.TempDir(), "t-0"), smallConfig())
	defer l.Close()
	formatLog(t, l)
	for range 20 {
		mustAppend(t, l, plainBatch(t, 2))
	}
	leo := l.LogEndOffset()
	aborted := make([]AbortedTransaction, 0, 4)
	read := func(committed bool, from int64) func() {
		return func() {
			var r vfs.FileRange
			var err error
			if committed {
				r, aborted, err = l.ReadWithAborted(from, 1<<20, leo, true, aborted[:0])
			} else {
				r, err = l.Read(from, 1<<20, leo, true)
			}
			if err != nil {
				t.Fatal(err)
			}
			r.Release()
		}
	}
	for _, from := range []int64{0, 8, leo - 2} {
		base := testing.AllocsPerRun(50, read(false, from))
		if got := testing.AllocsPerRun(50, read(true, from)); got != base {
			t.Fatalf("read_committed from %d: %v allocations, read_uncommitted %v", from, got, base)
		}
	}
	if len(aborted) != 0 {
		t.Fatalf("reading past the aborts reports %v", aborted)
	}
}

// A log moved to another dir keeps its transaction indexes.
func TestMovedLogKeepsItsTxnIndex(t *testing.T) {
	fsys := vfs.NewMemFS()
	m := openTestManager(t, fsys, "/a", "/b")
	defer m.Close()
	l, err := m.GetOrCreate(TopicPartition{"t", 0}, [16]byte{9}, moveConfig())
	if err != nil {
		t.Fatal(err)
	}
	formatLog(t, l)
	written := txnIndexEntries(l)
	if err := m.MoveLog(l.tp, "/b"); err != nil {
		t.Fatal(err)
	}
	waitMoved(t, m, l, "/b")
	if files := txnIndexFiles(t, fsys, l.Dir()); len(files) != 1 {
		t.Fatalf("txnindex files in the new dir: %v", files)
	}
	appendReplicated(t, l, txnBatch(t, 9, 0, testNowMs, kv{"d", val("1")}))
	appendReplicated(t, l, abortMarker(9))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = openTestManager(t, fsys, "/a", "/b")
	defer m.Close()
	l2, err := m.GetOrCreate(l.tp, [16]byte{9}, moveConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l2.Dir(), "/b/") {
		t.Fatalf("the log reopened in %s", l2.Dir())
	}
	written[0] = append(written[0], abortedTxn{9, 8, 9, 10})
	if got := txnIndexEntries(l2); !reflect.DeepEqual(got, written) {
		t.Fatalf("indexes after the move and a restart %v, want %v", got, written)
	}
	if _, err := fsys.Stat("/a/t-0/00000000000000000000.txnindex"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the old dir's txnindex: %v", err)
	}
}

// committedValues is what a read_committed consumer reads of l, using the
// aborted transactions the log reports as a consumer uses them: a
// producer's transactional records are dropped from an aborted
// transaction's first offset until the producer's abort marker.
func committedValues(t *testing.T, l *Log) map[string]string {
	t.Helper()
	leo := l.LogEndOffset()
	aborted := l.AbortedTransactions(l.LogStartOffset(), leo, nil)
	r, err := l.Read(l.LogStartOffset(), 1<<30, leo, true)
	if err != nil {
		t.Fatal(err)
	}
	data := readRange(t, r)
	dropping := map[int64]bool{}
	out := map[string]string{}
	for len(data) > 0 {
		batch, rest, h, err := protocol.NextBatch(data)
		if err != nil {
			t.Fatal(err)
		}
		data = rest
		for len(aborted) > 0 && aborted[0].FirstOffset <= h.LastOffset() {
			dropping[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		if h.IsControl() {
			if controlType(batch) == protocol.ControlAbort {
				delete(dropping, h.ProducerID)
			}
			continue
		}
		if h.IsTransactional() && dropping[h.ProducerID] {
			continue
		}
		err = protocol.ForEachRecord(batch, nil, func(rec *protocol.Record) error {
			out[string(rec.Key)] = string(rec.Value)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// A crash at any step of a cleaning that rewrites a transaction index
// (its .cleaned and .swap renames among them) leaves a log whose
// read_committed view is the one before: no aborted record shows.
func TestCleanerCrashKeepsAbortedTransactionsHidden(t *testing.T) {
	cfg := compactConfig()
	for step := 1; ; step++ {
		fsys := vfs.NewMemFS()
		clock := newMovingClock()
		l := openTest(t, fsys, "/data/t-0", cfg, func(o *LogOptions) { o.Now = clock.now })
		now := clock.ms.Load()
		appendReplicated(t, l, keyedBatch(t, protocol.CodecNone, now, kv{"a", val("a0")}, kv{"b", val("b0")}))
		appendReplicated(t, l, txnBatch(t, 5, 0, now, kv{"a", val("aborted")}, kv{"c", val("aborted")}))
		appendReplicated(t, l, keyedBatch(t, protocol.CodecNone, now, kv{"b", val("b1")}))
		appendReplicated(t, l, abortMarker(5))
		appendReplicated(t, l, keyedBatch(t, protocol.CodecNone, now, kv{"b", val("b2")}, kv{"z", val("z")}))
		rollNow(t, l)
		l.AdvanceHighWatermark(l.LogEndOffset())
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"a": "a0", "b": "b2", "z": "z"}
		if got := committedValues(t, l); !reflect.DeepEqual(got, want) {
			t.Fatalf("read_committed view before cleaning %v, want %v", got, want)
		}
		leo := l.LogEndOffset()
		// Everything was flushed: the segments below the recovery point
		// are trusted, with the indexes the cleaning left.
		l2, finished := cleanAndCrash(t, fsys, l, clock, step, func(o *LogOptions) { o.HighWatermark = leo; o.RecoveryPoint = leo })
		if got := committedValues(t, l2); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d (cleaning finished %v): read_committed view %v, want %v", step, finished, got, want)
		}
		if finished {
			// The marker stays with an entry: producer 5 is active, so
			// its emptied batch stays and with it its transaction.
			if got := l2.AbortedTransactions(0, leo, nil); !reflect.DeepEqual(got, []AbortedTransaction{{5, 2}}) {
				t.Fatalf("after the cleaning: aborted %v", got)
			}
		}
		l2.Close()
		l.Close()
		if crashedAtEveryStep(t, step, finished) {
			return
		}
	}
}
