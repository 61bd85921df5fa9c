package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/coordinator/txn"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnProducer is a kgo transactional producer on the test node.
func txnProducer(t *testing.T, n *testNode, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(n.addr), kgo.TransactionalID(id), kgo.TransactionTimeout(10 * time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceInTxn writes n records to topic's partition in one transaction
// and ends it.
func produceInTxn(t *testing.T, cl *kgo.Client, topic string, partition int32, prefix string, n int, commit bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("producing in a transaction: %v", err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("ending the transaction (commit %v): %v", commit, err)
	}
}

// readCommitted consumes topic's partition 0 with read_committed until
// want records arrived or the deadline passed, and returns the values.
func readCommitted(t *testing.T, n *testNode, topic string, want int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// A committed transaction becomes visible to read_committed consumers
// whole, after its marker; ListTransactions and DescribeTransactions show
// the transactional id as kafka-transactions does.
func TestTransactionCommitVisibleToReadCommitted(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "txn-commit", 1, nil)
	cl := txnProducer(t, n, "tx-commit")
	produceInTxn(t, cl, "txn-commit", 0, "a", 10, true)
	got := readCommitted(t, n, "txn-commit", 10)
	if len(got) != 10 || got[0] != "a-0" || got[9] != "a-9" {
		t.Fatalf("read_committed got %d records %v, want a-0..a-9", len(got), got)
	}

	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var described kadm.DescribedTransaction
	for {
		ds, err := adm.DescribeTransactions(ctx, "tx-commit")
		if err != nil {
			t.Fatal(err)
		}
		d, ok := ds["tx-commit"]
		if !ok || d.Err != nil {
			t.Fatalf("describe tx-commit: %+v", d)
		}
		described = d
		if d.State == "CompleteCommit" || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if described.State != "CompleteCommit" || described.TimeoutMillis != 10000 || described.ProducerID < 0 || len(described.Topics) != 0 {
		t.Fatalf("described %+v, want CompleteCommit with no partitions and the 10 s timeout", described)
	}
	listed, err := adm.ListTransactions(ctx, nil, []string{"CompleteCommit"})
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := listed["tx-commit"]; !ok || l.State != "CompleteCommit" || l.ProducerID != described.ProducerID {
		t.Fatalf("listed %+v", listed)
	}
}

// A second producer with the same transactional id fences the first: the
// first's next transactional request fails with PRODUCER_FENCED (or its
// pre-v2 spelling, INVALID_PRODUCER_EPOCH).
func TestTransactionZombieFenced(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "txn-fence", 1, nil)
	zombie := txnProducer(t, n, "tx-fence")
	produceInTxn(t, zombie, "txn-fence", 0, "z", 1, true)
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := zombie.ProduceSync(ctx, &kgo.Record{Topic: "txn-fence", Value: []byte("zombie open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	successor := txnProducer(t, n, "tx-fence")
	// The successor's InitProducerId aborts the zombie's open transaction
	// and bumps the epoch.
	produceInTxn(t, successor, "txn-fence", 0, "s", 2, true)
	err := zombie.EndTransaction(ctx, kgo.TryCommit)
	if err == nil {
		t.Fatal("the fenced producer committed")
	}
	got := readCommitted(t, n, "txn-fence", 3)
	want := []string{"z-0", "s-0", "s-1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed %v, want %v (the zombie's open record aborted)", got, want)
	}
}

// The coordinator's answers to EndTxn out of order, over the wire.
func TestEndTxnErrors(t *testing.T) {
	n := startTestNode(t, nil)
	c := dialRaw(t, n.addr)
	corr := int32(0)
	findTxnCoordinator(t, c, &corr, "tx-errors")
	init := kmsg.NewPtrInitProducerIDRequest()
	init.SetVersion(4)
	id := "tx-errors"
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60000
	init.ProducerID, init.ProducerEpoch = -1, -1
	corr++
	c.send(init, corr)
	initResp := kmsg.NewPtrInitProducerIDResponse()
	initResp.SetVersion(4)
	c.recv(initResp)
	if initResp.ErrorCode != 0 || initResp.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId: error %d epoch %d", initResp.ErrorCode, initResp.ProducerEpoch)
	}
	end := func(pid int64, epoch int16, commit bool, version int16) int16 {
		req := kmsg.NewPtrEndTxnRequest()
		req.SetVersion(version)
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
		corr++
		c.send(req, corr)
		resp := kmsg.NewPtrEndTxnResponse()
		resp.SetVersion(version)
		c.recv(resp)
		return resp.ErrorCode
	}
	pid := initResp.ProducerID
	if code := end(pid, 0, true, 3); code != kerr.InvalidTxnState.Code {
		t.Fatalf("EndTxn with no transaction: %d, want INVALID_TXN_STATE", code)
	}
	if code := end(pid+1, 0, true, 3); code != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("EndTxn with another producer id: %d, want INVALID_PRODUCER_ID_MAPPING", code)
	}
	if code := end(pid, 5, true, 3); code != kerr.ProducerFenced.Code {
		t.Fatalf("EndTxn v3 with a wrong epoch: %d, want PRODUCER_FENCED", code)
	}
	if code := end(pid, 5, true, 1); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("EndTxn v1 with a wrong epoch: %d, want INVALID_PRODUCER_EPOCH", code)
	}
	tooLong := kmsg.NewPtrInitProducerIDRequest()
	tooLong.SetVersion(4)
	tooLong.TransactionalID, tooLong.TransactionTimeoutMillis = &id, 900001
	tooLong.ProducerID, tooLong.ProducerEpoch = -1, -1
	corr++
	c.send(tooLong, corr)
	tooLongResp := kmsg.NewPtrInitProducerIDResponse()
	tooLongResp.SetVersion(4)
	c.recv(tooLongResp)
	if tooLongResp.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("transaction.timeout.ms above transaction.max.timeout.ms: %d, want INVALID_TRANSACTION_TIMEOUT", tooLongResp.ErrorCode)
	}
}

// findTxnCoordinator waits until id's coordinator is loaded here.
func findTxnCoordinator(t *testing.T, c *rawConn, corr *int32, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(4)
		req.CoordinatorType, req.CoordinatorKeys = 1, []string{id}
		*corr++
		c.send(req, *corr)
		resp := kmsg.NewPtrFindCoordinatorResponse()
		resp.SetVersion(4)
		c.recv(resp)
		if resp.Coordinators[0].ErrorCode == 0 {
			// Found; InitProducerId may still see the load in progress.
			init := kmsg.NewPtrDescribeTransactionsRequest()
			init.TransactionalIDs = []string{id}
			*corr++
			c.send(init, *corr)
			d := kmsg.NewPtrDescribeTransactionsResponse()
			c.recv(d)
			if code := d.TransactionStates[0].ErrorCode; code == kerr.TransactionalIDNotFound.Code || code == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no transaction coordinator for %s: %+v", id, resp.Coordinators[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startTV2Node is a node with transaction.version 2 finalized: clients use
// Transactions V2 (KIP-890 part 2).
func startTV2Node(t *testing.T) *testNode {
	t.Helper()
	return startTestNodeWithFeatures(t, nil, map[string]int16{"group.version": 1, "transaction.version": 2}, nil, nil)
}

// Transactions V2: the producer adds partitions through Produce v12+
// and every EndTxn bumps the epoch; consecutive transactions commit.
func TestTransactionsV2CommitWithImplicitPartitions(t *testing.T) {
	n := startTV2Node(t)
	createTopic(t, n, "txn-tv2", 1, nil)
	cl := txnProducer(t, n, "tx-tv2")
	produceInTxn(t, cl, "txn-tv2", 0, "a", 3, true)
	produceInTxn(t, cl, "txn-tv2", 0, "b", 2, true)
	got := readCommitted(t, n, "txn-tv2", 5)
	if fmt.Sprint(got) != "[a-0 a-1 a-2 b-0 b-1]" {
		t.Fatalf("read_committed %v", got)
	}
	d, code := n.b.txns.coord.Describe("tx-tv2")
	if code != 0 || d.Epoch < 2 {
		t.Fatalf("after two TV2 transactions: %+v %d, want the epoch bumped by each EndTxn", d, code)
	}
}

// The Jepsen finding KIP-890 fixes: an EndTxn retried late (after its
// transaction completed and the next one began) must not commit the next
// transaction. Under TV2 the retry carries the old epoch and is fenced.
func TestLateEndTxnRetryDoesNotCommitNextTransaction(t *testing.T) {
	n := startTV2Node(t)
	createTopic(t, n, "txn-late", 1, nil)
	c := dialRaw(t, n.addr)
	corr := int32(0)
	id := "tx-late"
	findTxnCoordinator(t, c, &corr, id)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.SetVersion(5)
	init.TransactionalID, init.TransactionTimeoutMillis, init.ProducerID, init.ProducerEpoch = &id, 60000, -1, -1
	corr++
	c.send(init, corr)
	initResp := kmsg.NewPtrInitProducerIDResponse()
	initResp.SetVersion(5)
	c.recv(initResp)
	pid, epoch := initResp.ProducerID, initResp.ProducerEpoch
	add := func(epoch int16) {
		t.Helper()
		if code := n.b.txns.coord.AddPartitions(context.Background(), id, pid, epoch, []txnTP{{Topic: "txn-late", Partition: 0}}); code != 0 {
			t.Fatalf("AddPartitions at epoch %d: %d", epoch, code)
		}
	}
	endTxn := func(epoch int16, commit bool) (int16, int16) {
		req := kmsg.NewPtrEndTxnRequest()
		req.SetVersion(5)
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
		corr++
		c.send(req, corr)
		resp := kmsg.NewPtrEndTxnResponse()
		resp.SetVersion(5)
		c.recv(resp)
		return resp.ErrorCode, resp.ProducerEpoch
	}
	add(epoch)
	code, next := endTxn(epoch, true)
	if code != 0 || next != epoch+1 {
		t.Fatalf("first commit: error %d epoch %d, want the epoch bumped to %d", code, next, epoch+1)
	}
	waitTxnState(t, n, id, "CompleteCommit")
	add(next)
	// The first commit's retry arrives now, with the epoch it was sent at.
	if code, _ := endTxn(epoch, true); code != kerr.ProducerFenced.Code {
		t.Fatalf("late retry of the first commit: error %d, want PRODUCER_FENCED", code)
	}
	if d, _ := n.b.txns.coord.Describe(id); d.State != "Ongoing" {
		t.Fatalf("the second transaction is %s after the late retry, want Ongoing", d.State)
	}
	// A retry while the first commit is still CompleteCommit (before the
	// second transaction) succeeds: that is the retry KIP-890 allows.
	if code, _ := endTxn(next, false); code != 0 {
		t.Fatalf("aborting the second transaction: %d", code)
	}
	waitTxnState(t, n, id, "CompleteAbort")
	if code, again := endTxn(next, false); code != 0 || again != next+1 {
		t.Fatalf("retried abort: error %d epoch %d, want success at %d", code, again, next+1)
	}
}

type txnTP = txn.TopicPartition

func waitTxnState(t *testing.T, n *testNode, id, state string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, code := n.b.txns.coord.Describe(id)
		if code == 0 && d.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s (error %d), want %s", id, d.State, code, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// transaction.partition.verification.enable=false (dynamic in Kafka):
// transactional batches open transactions without the coordinator being
// asked, as Kafka's log then allows; turned back on, an unverified
// batch is refused again.
func TestTransactionVerificationSwitch(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "txn-switch", 1, nil)
	id := "never-initialized"
	send := func(pid int64) int16 {
		t.Helper()
		b := protocol.NewBatchBuilder(protocol.CodecNone).SetProducer(pid, 0, 0).SetTransactional(true)
		b.Add(nil, []byte("v"), nil, time.Now().UnixMilli())
		batch, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		c := dialRaw(t, n.addr)
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(11)
		req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 5000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "txn-switch", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch}}}}
		c.send(req, 1)
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(11)
		c.recv(resp)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := send(77); code == 0 {
		t.Fatal("an unverified transactional batch was stored with verification on")
	}
	n.b.SetTransactionVerification(false)
	if code := send(78); code != 0 {
		t.Fatalf("with verification off: error %d", code)
	}
	n.b.SetTransactionVerification(true)
	if code := send(79); code == 0 {
		t.Fatal("an unverified transactional batch was stored after verification came back on")
	}
}
