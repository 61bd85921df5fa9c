package txn

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A transaction's whole life: InitProducerId, partitions added, commit;
// the markers carry the producer id, epoch and coordinator epoch, and the
// log holds Kafka's state records in order.
func TestCommitLifecycle(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("a")
	if epoch != 0 {
		t.Fatalf("first epoch %d, want 0", epoch)
	}
	e.add("a", pid, epoch, tp("t", 1), tp("t", 0))
	e.add("a", pid, epoch, tp("u", 0), tp("t", 0))
	d := e.waitState("a", StateOngoing)
	if len(d.Partitions) != 3 || d.Partitions[0] != tp("t", 0) || d.Partitions[2] != tp("u", 0) || d.StartTimeMs != e.clock.Now().UnixMilli() {
		t.Fatalf("ongoing %+v", d)
	}
	gotPID, gotEpoch, code := e.c.EndTxn(context.Background(), "a", pid, epoch, true, 0)
	if code != 0 || gotPID != pid || gotEpoch != epoch {
		t.Fatalf("EndTxn: %d/%d %s", gotPID, gotEpoch, codeName(code))
	}
	e.waitState("a", StateCompleteCommit)
	ms := e.markers.markers()
	if len(ms) != 1 || !ms[0].Commit || ms[0].ProducerID != pid || ms[0].ProducerEpoch != epoch || ms[0].CoordinatorEpoch != 3 || len(ms[0].Partitions) != 3 {
		t.Fatalf("markers %+v", ms)
	}
	_, states := e.log.records(t)
	var seq []State
	for _, s := range states {
		seq = append(seq, s.state)
	}
	want := []State{StateEmpty, StateOngoing, StateOngoing, StatePrepareCommit, StateCompleteCommit}
	if len(seq) != len(want) {
		t.Fatalf("log states %v, want %v", seq, want)
	}
	for i := range want {
		if seq[i] != want[i] {
			t.Fatalf("log states %v, want %v", seq, want)
		}
	}
	// A retried EndTxn of the completed commit succeeds; an abort of it
	// is INVALID_TXN_STATE.
	if _, _, code := e.c.EndTxn(context.Background(), "a", pid, epoch, true, 0); code != 0 {
		t.Fatalf("retried commit: %s", codeName(code))
	}
	if _, _, code := e.c.EndTxn(context.Background(), "a", pid, epoch, false, 0); code != kerr.InvalidTxnState.Code {
		t.Fatalf("abort after commit: %s", codeName(code))
	}
	// Partitions already in the open transaction are not written again.
	e.add("a", pid, epoch, tp("t", 0))
	n := len(e.log.batches)
	e.add("a", pid, epoch, tp("t", 0))
	if len(e.log.batches) != n {
		t.Fatal("re-adding a partition of the open transaction wrote a record")
	}
}

// The records are Kafka's: key version 0 with the id, value version 0
// (transaction.version 0) with every field, partitions null when Empty.
func TestRecordsInKafkaSchema(t *testing.T) {
	st := txnState{producerID: 7, prevProducerID: -1, nextProducerID: -1, epoch: 2, timeoutMs: 60000, state: StateOngoing,
		partitions: []TopicPartition{tp("a", 0), tp("a", 2), tp("b", 1)}, startMs: 10, updateMs: 20}
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(encodeValue(&st, 0)); err != nil {
		t.Fatal(err)
	}
	if v.Version != 0 || v.ProducerID != 7 || v.ProducerEpoch != 2 || v.TimeoutMillis != 60000 || v.State != 1 ||
		v.StartTimestamp != 10 || v.LastUpdateTimestamp != 20 || len(v.Topics) != 2 || len(v.Topics[0].Partitions) != 2 {
		t.Fatalf("decoded %+v", v)
	}
	empty := txnState{producerID: 7, epoch: 3, state: StateEmpty, startMs: -1}
	raw := encodeValue(&empty, 0)
	// version, pid, epoch, timeout, state, then the partitions array: null.
	if arr := raw[2+8+2+4+1:][:4]; arr[0] != 0xff || arr[1] != 0xff || arr[2] != 0xff || arr[3] != 0xff {
		t.Fatalf("Empty state's partitions are % x, want null", arr)
	}
	flex := encodeValue(&st, 1)
	if got, err := decodeValue(flex); err != nil || got.state != StateOngoing || len(got.partitions) != 3 || got.prevProducerID != -1 {
		t.Fatalf("version 1 round trip: %+v %v", got, err)
	}
	k := kmsg.NewTxnMetadataKey()
	if err := k.ReadFrom(encodeKey("my-id")); err != nil || k.Version != 0 || k.TransactionalID != "my-id" {
		t.Fatalf("key %+v %v", k, err)
	}
	future := append([]byte{0, 9}, raw[2:]...)
	if _, err := decodeValue(future); err == nil {
		t.Fatal("a value version this broker cannot read was accepted")
	}
}

// A second InitProducerId bumps the epoch: the older producer is fenced
// from every request. KIP-360: a producer that names its current epoch
// gets it bumped; one naming the epoch before (a retry whose answer was
// lost) gets the same epoch again; one naming an older epoch is fenced.
func TestInitProducerIDFencesAndRecovers(t *testing.T) {
	e := newEnv(t)
	pid, epoch0 := e.init("a")
	_, epoch1 := e.init("a")
	if epoch1 != epoch0+1 {
		t.Fatalf("epoch after re-init %d, want %d", epoch1, epoch0+1)
	}
	if code := e.c.AddPartitions(context.Background(), "a", pid, epoch0, []TopicPartition{tp("t", 0)}); code != kerr.ProducerFenced.Code {
		t.Fatalf("zombie AddPartitions: %s", codeName(code))
	}
	if code := e.c.AddPartitions(context.Background(), "a", pid+5, epoch1, []TopicPartition{tp("t", 0)}); code != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("AddPartitions with another producer id: %s", codeName(code))
	}
	_, e2, code := e.c.InitProducerID(context.Background(), "a", 60000, pid, epoch1)
	if code != 0 || e2 != epoch1+1 {
		t.Fatalf("KIP-360 bump: epoch %d %s", e2, codeName(code))
	}
	if _, again, code := e.c.InitProducerID(context.Background(), "a", 60000, pid, epoch1); code != 0 || again != e2 {
		t.Fatalf("retried KIP-360 bump: epoch %d %s, want %d", again, codeName(code), e2)
	}
	if _, _, code := e.c.InitProducerID(context.Background(), "a", 60000, pid, epoch0); code != kerr.ProducerFenced.Code {
		t.Fatalf("KIP-360 with a stale epoch: %s", codeName(code))
	}
	if _, _, code := e.c.InitProducerID(context.Background(), "a", 60000, pid+99, 0); code != kerr.ProducerFenced.Code {
		t.Fatalf("KIP-360 with another producer id: %s", codeName(code))
	}
	if _, _, code := e.c.InitProducerID(context.Background(), "a", 900001, -1, -1); code != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("timeout above the maximum: %s", codeName(code))
	}
	if _, _, code := e.c.InitProducerID(context.Background(), "", 1000, -1, -1); code != kerr.InvalidRequest.Code {
		t.Fatalf("empty transactional id: %s", codeName(code))
	}
}

// InitProducerId on an open transaction aborts it at a bumped epoch and
// answers CONCURRENT_TRANSACTIONS; the retry then gets the epoch after
// that, so the open transaction's producer is fenced.
func TestInitProducerIDAbortsOpenTransaction(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("a")
	e.add("a", pid, epoch, tp("t", 0))
	if _, _, code := e.c.InitProducerID(context.Background(), "a", 60000, -1, -1); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("InitProducerId on an open transaction: %s", codeName(code))
	}
	e.waitState("a", StateCompleteAbort)
	ms := e.markers.markers()
	if len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != epoch+1 {
		t.Fatalf("abort markers %+v, want one abort at epoch %d", ms, epoch+1)
	}
	_, next := e.init("a")
	if next != epoch+2 {
		t.Fatalf("epoch after the fencing abort %d, want %d", next, epoch+2)
	}
	if _, _, code := e.c.EndTxn(context.Background(), "a", pid, epoch, true, 0); code != kerr.ProducerFenced.Code {
		t.Fatalf("the fenced producer's commit: %s", codeName(code))
	}
}

// Near the end of the epoch space the producer id rotates, so no client
// ever holds MaxInt16 (kept for fencing).
func TestProducerIDRotatesWhenEpochsRunOut(t *testing.T) {
	e := newEnv(t)
	pid, _ := e.init("a")
	s, _ := e.c.shardFor("a")
	s.mu.Lock()
	s.txns["a"].epoch = math.MaxInt16 - 1
	s.mu.Unlock()
	newPID, epoch := e.init("a")
	if newPID == pid || epoch != 0 {
		t.Fatalf("after exhaustion: producer %d epoch %d, want a new producer id at epoch 0", newPID, epoch)
	}
}

// The other answers of EndTxn and AddPartitions, by state.
func TestStateErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, _, code := e.c.EndTxn(ctx, "unknown", 1, 0, true, 0); code != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("EndTxn of an unknown id: %s", codeName(code))
	}
	pid, epoch := e.init("a")
	if _, _, code := e.c.EndTxn(ctx, "a", pid, epoch, true, 0); code != kerr.InvalidTxnState.Code {
		t.Fatalf("EndTxn with nothing open: %s", codeName(code))
	}
	e.add("a", pid, epoch, tp("t", 0))
	// Hold the markers so the transaction stays in PrepareCommit.
	block := make(chan struct{})
	e.markers.mu.Lock()
	e.markers.answer = func(TopicPartition) int16 {
		select {
		case <-block:
			return 0
		default:
			return kerr.NotLeaderForPartition.Code
		}
	}
	e.markers.mu.Unlock()
	if _, _, code := e.c.EndTxn(ctx, "a", pid, epoch, true, 0); code != 0 {
		t.Fatal(codeName(code))
	}
	if _, _, code := e.c.EndTxn(ctx, "a", pid, epoch, true, 0); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("commit during PrepareCommit: %s", codeName(code))
	}
	// Kafka marks the transaction's completion pending (CompleteCommit)
	// until its markers are written, so every EndTxn waits for it.
	if _, _, code := e.c.EndTxn(ctx, "a", pid, epoch, false, 0); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("abort during PrepareCommit: %s", codeName(code))
	}
	if code := e.c.AddPartitions(ctx, "a", pid, epoch, []TopicPartition{tp("t", 1)}); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("AddPartitions during PrepareCommit: %s", codeName(code))
	}
	if codes := e.c.VerifyPartitions("a", pid, epoch, []TopicPartition{tp("t", 0)}); codes[0] != kerr.ConcurrentTransactions.Code {
		t.Fatalf("verify during PrepareCommit: %s", codeName(codes[0]))
	}
	close(block)
	e.waitState("a", StateCompleteCommit)
	e.add("a", pid, epoch, tp("t", 0))
	codes := e.c.VerifyPartitions("a", pid, epoch, []TopicPartition{tp("t", 0), tp("t", 9)})
	if codes[0] != 0 || codes[1] != kerr.TransactionAbortable.Code {
		t.Fatalf("verify: %s %s, want NONE and TRANSACTION_ABORTABLE", codeName(codes[0]), codeName(codes[1]))
	}
}

// A coordinator that dies after PrepareCommit is written, before the
// markers are, finishes the commit when the partition is loaded again:
// nothing a client was told committed is lost.
func TestReloadFinishesPreparedCommit(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("a")
	e.add("a", pid, epoch, tp("t", 0), tp("t", 1))
	e.markers.mu.Lock()
	e.markers.answer = func(TopicPartition) int16 { return kerr.NotLeaderForPartition.Code }
	e.markers.mu.Unlock()
	if _, _, code := e.c.EndTxn(context.Background(), "a", pid, epoch, true, 0); code != 0 {
		t.Fatal(codeName(code))
	}
	<-e.markers.calls
	e.c.Unload(0)
	e.markers.mu.Lock()
	e.markers.answer = nil
	e.markers.mu.Unlock()
	e.log.epoch = 4
	e.load()
	d := e.waitState("a", StateCompleteCommit)
	if d.ProducerID != pid || d.Epoch != epoch {
		t.Fatalf("after reload %+v", d)
	}
	ms := e.markers.markers()
	if len(ms) == 0 || !ms[len(ms)-1].Commit || ms[len(ms)-1].CoordinatorEpoch != 4 || len(ms[len(ms)-1].Partitions) != 2 {
		t.Fatalf("markers after reload %+v, want a commit of both partitions at coordinator epoch 4", ms)
	}
}

// Replay rebuilds every transactional id's state, tombstones included.
func TestReplayRebuildsState(t *testing.T) {
	e := newEnv(t)
	pidA, epochA := e.init("a")
	e.add("a", pidA, epochA, tp("t", 0))
	pidB, _ := e.init("b")
	e.init("b")
	e.c.Unload(0)
	e.load()
	a := e.waitState("a", StateOngoing)
	if a.ProducerID != pidA || a.Epoch != epochA || len(a.Partitions) != 1 || a.TimeoutMs != 60000 {
		t.Fatalf("a after replay %+v", a)
	}
	b := e.waitState("b", StateEmpty)
	if b.ProducerID != pidB || b.Epoch != 1 {
		t.Fatalf("b after replay %+v", b)
	}
	// The ongoing transaction continues after the reload.
	if _, _, code := e.c.EndTxn(context.Background(), "a", pidA, epochA, false, 0); code != 0 {
		t.Fatal(codeName(code))
	}
	e.waitState("a", StateCompleteAbort)
}

// A transaction open longer than its timeout is aborted by the
// coordinator at a bumped epoch: the producer that left it is fenced.
func TestTimedOutTransactionAborted(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("a")
	e.add("a", pid, epoch, tp("t", 0))
	e.c.AbortTimedOut(context.Background())
	e.waitState("a", StateOngoing)
	e.clock.advance(61 * time.Second)
	e.c.AbortTimedOut(context.Background())
	d := e.waitState("a", StateCompleteAbort)
	if d.Epoch != epoch+1 {
		t.Fatalf("epoch after the timeout abort %d, want %d", d.Epoch, epoch+1)
	}
	ms := e.markers.markers()
	if len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != epoch+1 {
		t.Fatalf("markers %+v", ms)
	}
	if _, _, code := e.c.EndTxn(context.Background(), "a", pid, epoch, true, 0); code != kerr.ProducerFenced.Code {
		t.Fatalf("the timed-out producer's commit: %s", codeName(code))
	}
}

// Transactional ids idle longer than transactional.id.expiration.ms are
// removed with a tombstone; open transactions are not.
func TestTransactionalIDExpiry(t *testing.T) {
	e := newEnv(t)
	e.init("idle")
	pid, epoch := e.init("busy")
	e.add("busy", pid, epoch, tp("t", 0))
	e.clock.advance(8 * 24 * time.Hour)
	e.c.ExpireTransactionalIDs(context.Background())
	if _, code := e.c.Describe("idle"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("idle id after expiry: %s", codeName(code))
	}
	e.waitState("busy", StateOngoing)
	ids, states := e.log.records(t)
	if ids[len(ids)-1] != "idle" || states[len(states)-1] != nil {
		t.Fatalf("last record %s %+v, want idle's tombstone", ids[len(ids)-1], states[len(states)-1])
	}
	e.c.Unload(0)
	e.load()
	if _, code := e.c.Describe("idle"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("idle id after replaying its tombstone: %s", codeName(code))
	}
}

// A failed state write changes nothing in memory and is answered with
// Kafka's mapping of the append error.
func TestFailedWriteLeavesStateAlone(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("a")
	e.log.failNext = errors.Join(errors.New("appending"), kerr.NotEnoughReplicas)
	if code := e.c.AddPartitions(context.Background(), "a", pid, epoch, []TopicPartition{tp("t", 0)}); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("AddPartitions with a failing log: %s", codeName(code))
	}
	e.waitState("a", StateEmpty)
	e.log.failNext = errors.Join(errors.New("appending"), kerr.NotLeaderForPartition)
	if code := e.c.AddPartitions(context.Background(), "a", pid, epoch, []TopicPartition{tp("t", 0)}); code != kerr.NotCoordinator.Code {
		t.Fatalf("AddPartitions after losing leadership: %s", codeName(code))
	}
	e.add("a", pid, epoch, tp("t", 0))
}

// ListTransactions' filters, as kafka-transactions list uses them.
func TestList(t *testing.T) {
	e := newEnv(t)
	pidA, epochA := e.init("app-1")
	e.add("app-1", pidA, epochA, tp("t", 0))
	e.init("app-2")
	e.init("other")
	e.clock.advance(5 * time.Second)
	all, unknown, code := e.c.List(ListFilter{MinDurationMs: -1})
	if code != 0 || len(all) != 3 || len(unknown) != 0 || all[0].TransactionalID != "app-1" {
		t.Fatalf("all: %+v %v %s", all, unknown, codeName(code))
	}
	ongoing, unknown, _ := e.c.List(ListFilter{States: []string{"Ongoing", "Bogus"}, MinDurationMs: -1})
	if len(ongoing) != 1 || ongoing[0].State != "Ongoing" || len(unknown) != 1 || unknown[0] != "Bogus" {
		t.Fatalf("state filter: %+v unknown %v", ongoing, unknown)
	}
	// As in Kafka, ids with no transaction (start time -1) pass the
	// duration filter; kafka-transactions find-hanging adds the state.
	long, _, _ := e.c.List(ListFilter{MinDurationMs: 4000, States: []string{"Ongoing"}})
	if len(long) != 1 || long[0].TransactionalID != "app-1" {
		t.Fatalf("duration filter: %+v", long)
	}
	if short, _, _ := e.c.List(ListFilter{MinDurationMs: 6000, States: []string{"Ongoing"}}); len(short) != 0 {
		t.Fatalf("duration filter above the age: %+v", short)
	}
	pattern := "^app-"
	apps, _, _ := e.c.List(ListFilter{Pattern: &pattern, MinDurationMs: -1})
	if len(apps) != 2 {
		t.Fatalf("pattern filter: %+v", apps)
	}
	byPID, _, _ := e.c.List(ListFilter{ProducerIDs: []int64{pidA}, MinDurationMs: -1})
	if len(byPID) != 1 || byPID[0].ProducerID != pidA {
		t.Fatalf("producer filter: %+v", byPID)
	}
	bad := "("
	if _, _, code := e.c.List(ListFilter{Pattern: &bad, MinDurationMs: -1}); code != kerr.InvalidRegularExpression.Code {
		t.Fatalf("bad pattern: %s", codeName(code))
	}
}

// Requests for a partition that is loading or not led here get the
// coordinator errors clients retry on.
func TestNotCoordinator(t *testing.T) {
	e := newEnv(t)
	e.c.Unload(0)
	if _, _, code := e.c.InitProducerID(context.Background(), "a", 1000, -1, -1); code != kerr.NotCoordinator.Code {
		t.Fatalf("unloaded: %s", codeName(code))
	}
	e.c.Prepare(0)
	if _, code := e.c.CoordinatorFor("a"); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("loading: %s", codeName(code))
	}
	if _, _, code := e.c.List(ListFilter{MinDurationMs: -1}); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("list while loading: %s", codeName(code))
	}
}

// Transactions V2's EndTxn table (Kafka's TransactionCoordinator): every
// EndTxn bumps the epoch, an abort with nothing open still bumps it, a
// retry (the epoch before the bump) of a completed transaction answers
// success, and a retry of the wrong kind or an older epoch is refused.
func TestEndTxnV2(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pid, epoch := e.init("a")
	end := func(epoch int16, commit bool) (int16, int16) {
		t.Helper()
		_, got, code := e.c.EndTxn(ctx, "a", pid, epoch, commit, 2)
		return got, code
	}
	// Empty: commit is INVALID_TXN_STATE, abort bumps the epoch.
	if _, code := end(epoch, true); code != kerr.InvalidTxnState.Code {
		t.Fatalf("commit of nothing: %s", codeName(code))
	}
	got, code := end(epoch, false)
	if code != 0 || got != epoch+1 {
		t.Fatalf("empty abort: epoch %d %s, want a bump to %d", got, codeName(code), epoch+1)
	}
	e.waitState("a", StateCompleteAbort)
	if got, code := end(epoch, false); code != 0 || got != epoch+1 {
		t.Fatalf("retried empty abort: epoch %d %s", got, codeName(code))
	}
	if _, code := end(epoch, true); code != kerr.InvalidTxnState.Code {
		t.Fatalf("commit retry of an abort: %s", codeName(code))
	}
	epoch++
	e.add("a", pid, epoch, tp("t", 0))
	got, code = end(epoch, true)
	if code != 0 || got != epoch+1 {
		t.Fatalf("commit: epoch %d %s", got, codeName(code))
	}
	e.waitState("a", StateCompleteCommit)
	if got, code := end(epoch, true); code != 0 || got != epoch+1 {
		t.Fatalf("retried commit: epoch %d %s", got, codeName(code))
	}
	if _, code := end(epoch, false); code != kerr.InvalidTxnState.Code {
		t.Fatalf("abort retry of a commit: %s", codeName(code))
	}
	if _, code := end(epoch+1, true); code != kerr.InvalidTxnState.Code {
		t.Fatalf("commit at the current epoch with nothing open: %s", codeName(code))
	}
	if _, code := end(epoch-1, true); code != kerr.ProducerFenced.Code {
		t.Fatalf("commit at an older epoch: %s", codeName(code))
	}
	if got, code := end(epoch+1, false); code != 0 || got != epoch+2 {
		t.Fatalf("abort after a commit: epoch %d %s, want a bump to %d", got, codeName(code), epoch+2)
	}
	ms := e.markers.markers()
	if len(ms) != 1 || !ms[0].Commit || ms[0].ProducerEpoch != epoch+1 {
		t.Fatalf("markers %+v, want only the commit's, at the bumped epoch %d", ms, epoch+1)
	}
}

// KAFKA-18464, and kgo's TestTxnEtl on three brokers: a V2 client whose
// commit was answered (epoch bumped) may abort an empty next transaction
// at the new epoch while the commit's markers are still being written.
// That abort must wait (CONCURRENT_TRANSACTIONS) and then bump the epoch,
// never fence the producer with PRODUCER_FENCED.
func TestEndTxnV2AbortWhileCommitCompletes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pid, epoch := e.init("a")
	e.add("a", pid, epoch, tp("t", 0))
	block := make(chan struct{})
	e.markers.mu.Lock()
	e.markers.answer = func(TopicPartition) int16 {
		select {
		case <-block:
			return 0
		default:
			return kerr.NotLeaderForPartition.Code
		}
	}
	e.markers.mu.Unlock()
	_, next, code := e.c.EndTxn(ctx, "a", pid, epoch, true, 2)
	if code != 0 || next != epoch+1 {
		t.Fatalf("commit: epoch %d %s", next, codeName(code))
	}
	if _, _, code := e.c.EndTxn(ctx, "a", pid, next, false, 2); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("abort at the new epoch while the commit completes: %s, want CONCURRENT_TRANSACTIONS", codeName(code))
	}
	if _, _, code := e.c.EndTxn(ctx, "a", pid, epoch, true, 2); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("commit retry while the commit completes: %s, want CONCURRENT_TRANSACTIONS", codeName(code))
	}
	close(block)
	e.waitState("a", StateCompleteCommit)
	if _, got, code := e.c.EndTxn(ctx, "a", pid, next, false, 2); code != 0 || got != next+1 {
		t.Fatalf("abort after the commit completed: epoch %d %s, want a bump to %d", got, codeName(code), next+1)
	}
}
