package storage

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"math/rand"
	"testing"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestSequenceArithmeticWraps(t *testing.T) {
	if got := incrementSequence(math.MaxInt32-1, 3); got != 1 {
		t.Fatalf("increment wrap: %d", got)
	}
	if got := decrementSequence(1, 3); got != math.MaxInt32-1 {
		t.Fatalf("decrement wrap: %d", got)
	}
	if !inSequence(math.MaxInt32, 0) || !inSequence(-1, 0) || inSequence(5, 7) {
		t.Fatal("inSequence")
	}
}

func TestIdempotentProducerRules(t *testing.T) {
	type step struct {
		epoch  int16
		seq    int32
		n      int
		origin AppendOrigin
		err    *kerr.Error
		dupOf  int // index of the step whose offsets a duplicate returns
		isDup  bool
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"in order", []step{{epoch: 0, seq: 0, n: 2}, {epoch: 0, seq: 2, n: 3}, {epoch: 0, seq: 5, n: 1}}},
		{"retry of the last batch is a duplicate", []step{{epoch: 0, seq: 0, n: 2}, {epoch: 0, seq: 2, n: 3}, {epoch: 0, seq: 2, n: 3, isDup: true, dupOf: 1}}},
		{"retry of an older retained batch", []step{{epoch: 0, seq: 0, n: 1}, {epoch: 0, seq: 1, n: 1}, {epoch: 0, seq: 2, n: 1}, {epoch: 0, seq: 0, n: 1, isDup: true, dupOf: 0}}},
		{"retry past the 5 retained batches", []step{{epoch: 0, seq: 0, n: 1}, {epoch: 0, seq: 1, n: 1}, {epoch: 0, seq: 2, n: 1}, {epoch: 0, seq: 3, n: 1}, {epoch: 0, seq: 4, n: 1}, {epoch: 0, seq: 5, n: 1}, {epoch: 0, seq: 0, n: 1, err: kerr.OutOfOrderSequenceNumber}}},
		{"gap", []step{{epoch: 0, seq: 0, n: 2}, {epoch: 0, seq: 3, n: 1, err: kerr.OutOfOrderSequenceNumber}}},
		{"same range different epoch is not a duplicate", []step{{epoch: 0, seq: 0, n: 2}, {epoch: 1, seq: 0, n: 2}}},
		{"stale epoch", []step{{epoch: 2, seq: 0, n: 1}, {epoch: 1, seq: 1, n: 1, err: kerr.InvalidProducerEpoch}}},
		{"epoch bump must restart at 0", []step{{epoch: 0, seq: 0, n: 1}, {epoch: 1, seq: 1, n: 1, err: kerr.OutOfOrderSequenceNumber}}},
		{"epoch bump at 0", []step{{epoch: 0, seq: 0, n: 1}, {epoch: 1, seq: 0, n: 1}, {epoch: 1, seq: 1, n: 1}}},
		{"unknown producer may start anywhere", []step{{epoch: 4, seq: 77, n: 2}, {epoch: 4, seq: 79, n: 1}}},
		{"wrap around", []step{{epoch: 0, seq: math.MaxInt32 - 1, n: 2}, {epoch: 0, seq: 0, n: 2}, {epoch: 0, seq: 2, n: 1}}},
		{"batch spanning the wrap", []step{{epoch: 0, seq: math.MaxInt32 - 1, n: 4}, {epoch: 0, seq: 2, n: 1}, {epoch: 0, seq: math.MaxInt32 - 1, n: 4, isDup: true, dupOf: 0}}},
		{"replication skips sequence checks", []step{{epoch: 0, seq: 0, n: 1}, {epoch: 0, seq: 9, n: 1, origin: AppendReplication}}},
		{"coordinator checks the epoch only", []step{{epoch: 3, seq: 0, n: 1}, {epoch: 3, seq: 9, n: 1, origin: AppendCoordinator}, {epoch: 2, seq: 10, n: 1, origin: AppendCoordinator, err: kerr.InvalidProducerEpoch}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := openTest(t, vfs.NewMemFS(), "/d/t-0", smallConfig())
			defer l.Close()
			var results []AppendResult
			for i, s := range c.steps {
				b := makeBatch(t, batchSpec{n: s.n, pid: 42, epoch: s.epoch, seq: s.seq})
				leoBefore := l.LogEndOffset()
				if s.origin == AppendReplication {
					// A follower's batch arrives with its offsets already set.
					binary.BigEndian.PutUint64(b, uint64(leoBefore))
				}
				res, _, err := l.Append(b, 0, s.origin)
				results = append(results, res)
				if s.err != nil {
					if kerrOf(err) != s.err {
						t.Fatalf("step %d: got %v, want %v", i, err, s.err)
					}
					if l.LogEndOffset() != leoBefore {
						t.Fatalf("step %d: refused append moved the log end", i)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if res.Duplicate != s.isDup {
					t.Fatalf("step %d: duplicate=%v", i, res.Duplicate)
				}
				if s.isDup {
					orig := results[s.dupOf]
					if res.FirstOffset != orig.FirstOffset || res.LastOffset != orig.LastOffset || l.LogEndOffset() != leoBefore {
						t.Fatalf("step %d: duplicate answered %d-%d, original %d-%d", i, res.FirstOffset, res.LastOffset, orig.FirstOffset, orig.LastOffset)
					}
				}
			}
		})
	}
}

func TestProducerStateSurvivesRestartAndCrash(t *testing.T) {
	for _, clean := range []bool{true, false} {
		fsys := vfs.NewMemFS()
		cfg := smallConfig()
		cfg.SegmentBytes = 1024
		l := openTest(t, fsys, "/d/t-0", cfg)
		var last AppendResult
		for i := int32(0); i < 20; i++ {
			last = mustAppend(t, l, makeBatch(t, batchSpec{n: 2, pid: 7, epoch: 1, seq: 2 * i, value: 30}))
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		if clean {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			l.bg.Wait()
			fsys.Crash(true, rand.New(rand.NewSource(1)))
		}
		l2 := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.CleanShutdown = clean })
		res, _, err := l2.Append(makeBatch(t, batchSpec{n: 2, pid: 7, epoch: 1, seq: 38, value: 30}), 0, AppendClient)
		if err != nil || !res.Duplicate || res.FirstOffset != last.FirstOffset {
			t.Fatalf("clean=%v: retry after restart: %+v %v", clean, res, err)
		}
		if _, _, err := l2.Append(makeBatch(t, batchSpec{n: 1, pid: 7, epoch: 1, seq: 41}), 0, AppendClient); kerrOf(err) != kerr.OutOfOrderSequenceNumber {
			t.Fatalf("clean=%v: gap after restart: %v", clean, err)
		}
		mustAppend(t, l2, makeBatch(t, batchSpec{n: 1, pid: 7, epoch: 1, seq: 40}))
		l2.Close()
	}
}

func TestProducerExpiry(t *testing.T) {
	clock := &testClock{ms: testNowMs}
	l := openTest(t, vfs.NewMemFS(), "/d/t-0", smallConfig(), func(o *LogOptions) {
		o.Now = clock.now
		o.ProducerIDExpirationMs = 1000
	})
	defer l.Close()
	mustAppend(t, l, makeBatch(t, batchSpec{n: 1, pid: 1, epoch: 0, seq: 0, ts: testNowMs}))
	mustAppend(t, l, makeBatch(t, batchSpec{n: 1, pid: 2, epoch: 0, seq: 0, ts: testNowMs + 900}))
	clock.ms = testNowMs + 1000
	if n := l.RemoveExpiredProducers(); n != 1 || l.ProducerCount() != 1 {
		t.Fatalf("removed %d, left %d", n, l.ProducerCount())
	}
	// An expired producer is unknown again: any sequence is accepted.
	mustAppend(t, l, makeBatch(t, batchSpec{n: 1, pid: 1, epoch: 0, seq: 50}))
}

func TestProducerSnapshotFormat(t *testing.T) {
	e := emptyProducerEntry()
	e.addBatch(3, producerBatch{lastSeq: 9, lastOffset: 100, offsetDelta: 4, timestamp: 1234})
	e.coordinatorEpoch = 6
	empty := emptyProducerEntry()
	empty.epoch = 2
	buf := encodeSnapshot(map[int64]*producerEntry{5: &e, 1: &empty})
	be := binary.BigEndian
	if be.Uint16(buf) != 1 || len(buf) != 10+2*46 || be.Uint32(buf[6:]) != 2 {
		t.Fatalf("header: % x", buf[:10])
	}
	if crc := crc32.Checksum(buf[6:], crc32.MakeTable(crc32.Castagnoli)); crc != be.Uint32(buf[2:]) {
		t.Fatal("CRC-32C over the entries")
	}
	// Entries sorted by producer id; the first (id 1) has no batch.
	first := buf[10:56]
	want := []byte{
		0, 0, 0, 0, 0, 0, 0, 1, // producer id
		0, 2, // epoch
		0xff, 0xff, 0xff, 0xff, // last sequence -1
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // last offset -1
		0, 0, 0, 0, // offset delta
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // timestamp -1
		0xff, 0xff, 0xff, 0xff, // coordinator epoch -1
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // no open transaction
	}
	if string(first) != string(want) {
		t.Fatalf("entry bytes\n% x\nwant\n% x", first, want)
	}
	got, err := decodeSnapshot(buf)
	if err != nil {
		t.Fatal(err)
	}
	if g := got[5]; g.epoch != 3 || g.n != 1 || g.batches[0] != (producerBatch{9, 100, 4, 1234}) || g.coordinatorEpoch != 6 || g.currentTxnFirstOffset != -1 {
		t.Fatalf("round trip %+v", g)
	}
	if g := got[1]; g.n != 0 || g.epoch != 2 {
		t.Fatalf("round trip of an entry without batches %+v", g)
	}
	buf[20] ^= 1
	if _, err := decodeSnapshot(buf); err == nil {
		t.Fatal("corrupt snapshot accepted")
	}
}

// A client's transactional batch no transaction covers is refused before
// any state changes: nothing is written, the producer has no open
// transaction (so none reaches a snapshot), and its sequence is not
// consumed. A follower copies whatever its leader wrote, and a coordinator
// (the group coordinator writing a TxnOffsetCommit) starts the
// transaction it writes for.
func TestTransactionalBatchNeedsATransaction(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := openTest(t, fsys, "/d/t-0", smallConfig())
	txn := makeBatch(t, batchSpec{n: 2, pid: 9, epoch: 0, seq: 0, txn: true})
	if _, _, err := l.Append(append([]byte(nil), txn...), 3, AppendClient); kerrOf(err) != kerr.InvalidTxnState {
		t.Fatalf("unverified client batch: want INVALID_TXN_STATE, got %v", err)
	}
	if _, _, err := l.AppendVerified(append([]byte(nil), txn...), 3, AppendClient, 12345); kerrOf(err) != kerr.InvalidTxnState {
		t.Fatalf("client batch with a guard nobody issued: want INVALID_TXN_STATE, got %v", err)
	}
	if leo := l.LogEndOffset(); leo != 0 {
		t.Fatalf("log end %d after refused appends", leo)
	}
	if n := l.ProducerCount(); n != 0 {
		t.Fatalf("%d producers tracked after refused appends", n)
	}
	mustAppend(t, l, makeBatch(t, batchSpec{n: 1, pid: 9, epoch: 0, seq: 0}))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, fsys, "/d/t-0", smallConfig(), func(o *LogOptions) { o.CleanShutdown = true })
	defer l.Close()
	for _, p := range l.ActiveProducers() {
		if p.CurrentTxnStartOffset != -1 {
			t.Fatalf("producer %d has an open transaction at %d after restart", p.ProducerID, p.CurrentTxnStartOffset)
		}
	}

	replicated := makeBatch(t, batchSpec{n: 2, pid: 10, epoch: 0, seq: 0, txn: true})
	protocol.SetBaseOffset(replicated, l.LogEndOffset())
	if _, _, err := l.Append(replicated, 3, AppendReplication); err != nil {
		t.Fatalf("replicated transactional batch: %v", err)
	}

	start := l.LogEndOffset()
	if _, _, err := l.Append(makeBatch(t, batchSpec{n: 1, pid: 11, epoch: 0, seq: 0, txn: true}), 3, AppendCoordinator); err != nil {
		t.Fatalf("coordinator transactional batch: %v", err)
	}
	opened := false
	for _, p := range l.ActiveProducers() {
		if p.ProducerID == 11 && p.CurrentTxnStartOffset == start {
			opened = true
		}
	}
	if !opened {
		t.Fatalf("the coordinator's batch opened no transaction at %d: %+v", start, l.ActiveProducers())
	}
}

// KIP-890 part 1: a verification guard lets the producer's first
// transactional batch on the partition open its transaction; later
// batches need none; a marker ends the verification, so a produce that
// arrives late, after its transaction was aborted, is refused instead of
// opening a transaction nothing will end.
func TestTransactionVerificationGuard(t *testing.T) {
	l := openTest(t, vfs.NewMemFS(), "/d/t-0", smallConfig())
	defer l.Close()
	guard := l.StartTxnVerification(9, 0)
	if guard == 0 {
		t.Fatal("no guard for a producer without an open transaction")
	}
	if again := l.StartTxnVerification(9, 0); again != guard {
		t.Fatalf("second verification before the append: guard %d, want the same %d", again, guard)
	}
	late := l.StartTxnVerification(9, 0) // a produce that will arrive after the abort
	if _, _, err := l.AppendVerified(makeBatch(t, batchSpec{n: 2, pid: 9, epoch: 0, seq: 0, txn: true}), 3, AppendClient, guard); err != nil {
		t.Fatalf("verified first batch: %v", err)
	}
	if g := l.StartTxnVerification(9, 0); g != 0 {
		t.Fatalf("guard %d while the transaction is open, want 0 (nothing to verify)", g)
	}
	if _, _, err := l.Append(makeBatch(t, batchSpec{n: 1, pid: 9, epoch: 0, seq: 2, txn: true}), 3, AppendClient); err != nil {
		t.Fatalf("second batch of the open transaction: %v", err)
	}
	abort := protocol.EndTxnMarkerBatch(9, 0, false, 0, l.now().UnixMilli())
	if _, _, err := l.Append(abort, 3, AppendCoordinator); err != nil {
		t.Fatalf("abort marker: %v", err)
	}
	if _, _, err := l.AppendVerified(makeBatch(t, batchSpec{n: 1, pid: 9, epoch: 0, seq: 3, txn: true}), 3, AppendClient, late); kerrOf(err) != kerr.InvalidTxnState {
		t.Fatalf("late batch whose verification the abort ended: want INVALID_TXN_STATE, got %v", err)
	}
	for _, p := range l.ActiveProducers() {
		if p.CurrentTxnStartOffset != -1 {
			t.Fatalf("producer %d has a transaction open at %d: the late batch opened one", p.ProducerID, p.CurrentTxnStartOffset)
		}
	}
}

// A marker from an older transaction coordinator than the last one that
// wrote for the producer is a zombie's: TRANSACTION_COORDINATOR_FENCED,
// and the transaction stays as it was.
func TestMarkerFromOlderCoordinatorFenced(t *testing.T) {
	l := openTest(t, vfs.NewMemFS(), "/d/t-0", smallConfig())
	defer l.Close()
	for i, epoch := range []int32{5, 4} {
		guard := l.StartTxnVerification(9, 0)
		if _, _, err := l.AppendVerified(makeBatch(t, batchSpec{n: 1, pid: 9, epoch: 0, seq: int32(i), txn: true}), 3, AppendClient, guard); err != nil && i == 0 {
			t.Fatalf("transactional batch: %v", err)
		}
		_, _, err := l.Append(protocol.EndTxnMarkerBatch(9, 0, true, epoch, l.now().UnixMilli()), 3, AppendCoordinator)
		if i == 0 && err != nil {
			t.Fatalf("marker at coordinator epoch 5: %v", err)
		}
		if i == 1 && kerrOf(err) != kerr.TransactionCoordinatorFenced {
			t.Fatalf("marker at coordinator epoch 4 after 5: want TRANSACTION_COORDINATOR_FENCED, got %v", err)
		}
	}
	open := false
	for _, p := range l.ActiveProducers() {
		if p.ProducerID == 9 {
			open = p.CurrentTxnStartOffset >= 0
			if p.CoordinatorEpoch != 5 {
				t.Fatalf("coordinator epoch %d, want 5", p.CoordinatorEpoch)
			}
		}
	}
	if !open {
		t.Fatal("the fenced marker ended the transaction")
	}
}
