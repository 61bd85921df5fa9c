// Package txn tests transactions over the built binary: kill -9 in the
// middle of many open transactions, zombie fencing, and the late EndTxn
// retry KIP-890 fixes.
package txn

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/gregorbroker/gregor/internal/await"
)

// txnOutcome is what a producer knows of one of its transactions.
type txnOutcome int

const (
	txnOpen       txnOutcome = iota // records sent, no EndTxn sent
	txnCommitting                   // EndTxn(commit) sent, no answer
	txnCommitted
	txnAborted
)

type txnRecord struct {
	values  []string
	outcome txnOutcome
}

// ledger is every transaction the producers ran, by id.
type ledger struct {
	mu   sync.Mutex
	txns map[string]*txnRecord
}

func (l *ledger) set(id string, r *txnRecord) {
	l.mu.Lock()
	l.txns[id] = r
	l.mu.Unlock()
}

func (l *ledger) mark(id string, o txnOutcome) {
	l.mu.Lock()
	l.txns[id].outcome = o
	l.mu.Unlock()
}

// runProducer runs transactions until ctx ends: each writes a few
// records across the topic's partitions and commits, every fourth one
// aborts.
func runProducer(ctx context.Context, cl *kgo.Client, name, topic string, partitions int32, l *ledger) {
	for i := 0; ctx.Err() == nil; i++ {
		if err := cl.BeginTransaction(); err != nil {
			return
		}
		id := fmt.Sprintf("%s/%d", name, i)
		rec := &txnRecord{}
		var recs []*kgo.Record
		for j := 0; j < 3+rand.IntN(8); j++ {
			v := fmt.Sprintf("%s/%d", id, j)
			rec.values = append(rec.values, v)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: rand.Int32N(partitions), Value: []byte(v)})
		}
		l.set(id, rec)
		if !produceAll(ctx, cl, recs) {
			return
		}
		commit := i%4 != 3
		if commit {
			l.mark(id, txnCommitting)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			return
		}
		if commit {
			l.mark(id, txnCommitted)
		} else {
			l.mark(id, txnAborted)
		}
	}
}

// produceAll produces recs and waits for every acknowledgement; false
// when one failed or ctx ended first (a dead broker: kgo may hold the
// records until their delivery timeout, and the caller must not wait).
func produceAll(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) bool {
	results := make(chan error, len(recs))
	for _, r := range recs {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) { results <- err })
	}
	for range recs {
		select {
		case err := <-results:
			if err != nil {
				return false
			}
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// readCommittedAll reads every partition of topic with read_committed
// from the start until nothing more comes.
func readCommittedAll(t *testing.T, n *node.Node, topic string, partitions int32) map[string]int {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	c := n.Client(kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	defer c.Close()
	seen := map[string]int{}
	for idle := 0; idle < 3; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := c.PollFetches(ctx)
		cancel()
		got := 0
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; got++ })
		if got == 0 {
			idle++
		} else {
			idle = 0
		}
	}
	return seen
}

// waitStable waits until no partition's last stable offset lags its high
// watermark: every transaction has ended, committed or aborted.
func waitStable(t *testing.T, adm *kadm.Client, topic string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		hw, err1 := adm.ListEndOffsets(ctx, topic)
		lso, err2 := adm.ListCommittedOffsets(ctx, topic)
		cancel()
		stable := err1 == nil && err2 == nil
		var lag []string
		if stable {
			hw.Each(func(o kadm.ListedOffset) {
				if l, ok := lso.Lookup(o.Topic, o.Partition); !ok || l.Offset != o.Offset {
					stable = false
					lag = append(lag, fmt.Sprintf("p%d lso %d hw %d", o.Partition, l.Offset, o.Offset))
				}
			})
		}
		if stable {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("transactions still open after %s: %v %v %v", within, lag, err1, err2)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Kill -9 in the middle of many open transactions. After the restart:
// nothing from an aborted or unfinished transaction is ever visible to
// read_committed, every committed transaction is there whole and once, a
// commit whose answer was lost is all or nothing, and the transactions
// the dead producers left open are aborted after their timeout (the last
// stable offset catches up with the high watermark).
func TestKillMidTransactions(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 with open transactions")
	}
	n := node.Start(t, "transaction.abort.timed.out.transaction.cleanup.interval.ms=500")
	const topic, partitions, producers = "txkill", 3, 6
	adm := kadm.NewClient(n.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cancel()
	l := &ledger{txns: map[string]*txnRecord{}}
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var clients []*kgo.Client
	for i := 0; i < producers; i++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.TransactionalID(fmt.Sprintf("killer-%d", i)),
			kgo.TransactionTimeout(3*time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			// Records buffered when the broker dies fail instead of
			// waiting for it forever.
			kgo.RecordDeliveryTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			runProducer(runCtx, cl, fmt.Sprintf("p%d", i), topic, partitions, l)
		}(i)
	}
	// The kill comes once every producer has ended (committed or aborted)
	// 100 transactions, about what three seconds of this workload ran
	// here: a log of some length behind the open ones, and each producer
	// running, in its next transaction. Every fourth one aborts.
	const ended = 100
	await.Until(t, time.Minute, fmt.Sprintf("%d committed or aborted transactions from every producer", ended), func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		counts := map[string]map[txnOutcome]int{}
		for id, r := range l.txns {
			name, _, _ := strings.Cut(id, "/")
			if counts[name] == nil {
				counts[name] = map[txnOutcome]int{}
			}
			counts[name][r.outcome]++
		}
		for i := 0; i < producers; i++ {
			c := counts[fmt.Sprintf("p%d", i)]
			if c[txnCommitted]+c[txnAborted] < ended {
				return fmt.Errorf("producer p%d: %d committed, %d aborted", i, c[txnCommitted], c[txnAborted])
			}
		}
		return nil
	})
	n.Kill()
	stop()
	for _, cl := range clients {
		abortCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cl.AbortBufferedRecords(abortCtx)
		cancel()
	}
	wg.Wait()
	for _, cl := range clients {
		cl.Close()
	}
	n.Restart()
	adm = kadm.NewClient(n.Client())
	waitStable(t, adm, topic, 30*time.Second)
	seen := readCommittedAll(t, n, topic, partitions)

	counts := map[txnOutcome]int{}
	for id, r := range l.txns {
		counts[r.outcome]++
		present := 0
		for _, v := range r.values {
			if c := seen[v]; c > 1 {
				t.Errorf("%s: %s read %d times", id, v, c)
			} else if c == 1 {
				present++
			}
		}
		switch {
		case r.outcome == txnCommitted && present != len(r.values):
			t.Errorf("committed transaction %s: %d of its %d records visible", id, present, len(r.values))
		case (r.outcome == txnAborted || r.outcome == txnOpen) && present != 0:
			t.Errorf("transaction %s (outcome %d, never committed): %d records visible to read_committed", id, r.outcome, present)
		case r.outcome == txnCommitting && present != 0 && present != len(r.values):
			t.Errorf("transaction %s whose commit had no answer: %d of %d records visible, want all or none", id, present, len(r.values))
		}
	}
	if counts[txnCommitted] == 0 || counts[txnAborted] == 0 {
		t.Fatalf("the producers ran too little to test anything: %v", counts)
	}
	t.Logf("transactions: %d committed, %d aborted, %d open at the kill, %d committing at the kill; %d values read",
		counts[txnCommitted], counts[txnAborted], counts[txnOpen], counts[txnCommitting], len(seen))
}

// A zombie producer (an older instance with the same transactional id)
// is fenced by its successor: its open transaction is aborted, its commit
// fails, and read_committed never sees its records.
func TestZombieProducerFenced(t *testing.T) {
	n := node.Start(t)
	const topic = "txzombie"
	adm := kadm.NewClient(n.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	zombie := n.Client(kgo.TransactionalID("zombie"), kgo.TransactionTimeout(30*time.Second))
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("from the zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	successor := n.Client(kgo.TransactionalID("zombie"), kgo.TransactionTimeout(30*time.Second))
	if err := successor.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := successor.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("from the successor")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := successor.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := zombie.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the zombie committed after its successor started")
	}
	waitStable(t, adm, topic, 20*time.Second)
	seen := readCommittedAll(t, n, topic, 1)
	if seen["from the zombie"] != 0 || seen["from the successor"] != 1 || len(seen) != 1 {
		t.Fatalf("read_committed saw %v, want only the successor's record", seen)
	}
}
