package quorum

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestTransactionsAcrossBrokers: a transaction's partitions are led by all
// three brokers and its coordinator by one of them, so its markers go to
// the other leaders over the wire (WriteTxnMarkers) and its partitions are
// verified with the coordinator remotely (KIP-890). Committed
// transactions are read whole by a read_committed consumer, aborted ones
// not at all, for Transactions V2 (Produce v12+ adds partitions itself)
// and for V1 producers (AddPartitionsToTxn) alike.
func TestTransactionsAcrossBrokers(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitUnfenced(ctx, t, nodes)
	adm := kadm.NewClient(node.NewClient(t, node.Addrs(nodes)))
	const topic = "txn-spread"
	createSpread(ctx, t, adm, nodes, topic)
	for _, v1 := range []bool{false, true} {
		opts := []kgo.Opt{kgo.TransactionalID(fmt.Sprintf("spread-%v", v1)), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}
		if v1 {
			// Produce v11 and below: the client adds partitions with
			// AddPartitionsToTxn and the leader only verifies them.
			opts = append(opts, kgo.MaxVersions(kversionsBelowTV2()))
		}
		pcl := node.NewClient(t, node.Addrs(nodes), opts...)
		committed := 0
		for i := range 10 {
			if err := pcl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			recs := make([]*kgo.Record, 12)
			for j := range recs {
				recs[j] = &kgo.Record{Value: []byte(fmt.Sprintf("%v-%d-%d", v1, i, j))}
			}
			// Bounded per transaction: a marker that never lands keeps the
			// next transaction waiting (CONCURRENT_TRANSACTIONS).
			tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
			defer tcancel()
			if err := pcl.ProduceSync(tctx, recs...).FirstErr(); err != nil {
				t.Fatalf("v1=%v transaction %d: producing: %v", v1, i, err)
			}
			commit := i%2 == 0
			if err := pcl.EndTransaction(tctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatalf("v1=%v transaction %d: ending (commit %v): %v", v1, i, commit, err)
			}
			if commit {
				committed += len(recs)
			}
		}
		ccl := node.NewClient(t, node.Addrs(nodes), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		prefix := fmt.Sprintf("%v-", v1)
		got := map[string]bool{}
		deadline := time.Now().Add(30 * time.Second)
		for len(got) < committed && time.Now().Before(deadline) {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			fs := ccl.PollFetches(pctx)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) {
				v := string(r.Value)
				if len(v) > len(prefix) && v[:len(prefix)] == prefix {
					var i, j int
					fmt.Sscanf(v[len(prefix):], "%d-%d", &i, &j)
					if i%2 != 0 {
						t.Errorf("v1=%v: read_committed returned %s of an aborted transaction", v1, v)
					}
					got[v] = true
				}
			})
		}
		if len(got) != committed {
			t.Fatalf("v1=%v: read %d committed records, want %d", v1, len(got), committed)
		}
	}
}

// kversionsBelowTV2 caps the client below Transactions V2: Produce v11,
// EndTxn v4, AddPartitionsToTxn v3.
func kversionsBelowTV2() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(0, 11) // Produce
	v.SetMaxKeyVersion(26, 4) // EndTxn
	v.SetMaxKeyVersion(24, 3) // AddPartitionsToTxn
	return v
}

// TestGroupsAcrossBrokers: consumer groups whose coordinators live on
// different brokers (the __consumer_offsets partitions are spread over
// all three) consume a topic spread over all three and commit; the
// committed offsets are read back through the admin client.
func TestGroupsAcrossBrokers(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitUnfenced(ctx, t, nodes)
	adm := kadm.NewClient(node.NewClient(t, node.Addrs(nodes)))
	const topic = "grouped"
	createSpread(ctx, t, adm, nodes, topic)
	produceAndConsume(ctx, t, node.Addrs(nodes), topic, 300)
	for g := range 6 {
		group := fmt.Sprintf("group-%d", g)
		cl := node.NewClient(t, node.Addrs(nodes), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		n := 0
		for n < 300 {
			pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
			fs := cl.PollFetches(pctx)
			pcancel()
			if err := fs.Err0(); err != nil {
				t.Fatalf("%s: polling: %v", group, err)
			}
			n += fs.NumRecords()
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("%s: committing: %v", group, err)
		}
		cl.Close()
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil || offs.Error() != nil {
			t.Fatalf("%s: fetching offsets: %v %v", group, err, offs.Error())
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		if sum != 300 {
			t.Fatalf("%s: committed offsets sum to %d, want 300", group, sum)
		}
	}
}
