package replication

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCoordinatorsMoveWithTheirPartitions: with __consumer_offsets and
// __transaction_state replicated three ways (Kafka's defaults), kill -9 of
// the node that coordinates a group, then of the one that coordinates a
// transactional id, moves each coordinator to the new leader of its
// partition: the group's committed offsets are still there, the
// transactional producer goes on committing, and FindCoordinator names a
// live broker.
//
// Each next transaction starts once no live broker's Metadata lists the
// dead node any more (broker.session.timeout.ms after its fencing, as
// Kafka lists it until it is fenced) and the producer's client has seen
// that in its own metadata. Before that, a kgo producer whose
// cached transaction coordinator is the dead node retries its
// AddPartitionsToTxn against it in a tight loop, and the moment the node
// leaves Metadata it can race its own coordinator lookup and fail the
// transaction with "unknown broker" (kgo 1.22.3, against Kafka too; see
// FINDINGS.md). Once the node is gone, kgo looks the coordinator up
// again, which is what this test is about.
func TestCoordinatorsMoveWithTheirPartitions(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, "offsets.topic.replication.factor=3", "offsets.topic.num.partitions=3",
		"transaction.state.log.replication.factor=3", "transaction.state.log.min.isr=2", "transaction.state.log.num.partitions=3")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	addrs := node.Addrs(nodes)
	adm := kadm.NewClient(node.NewClient(t, addrs))
	const topic, group, txnID = "coordinated", "moving-group", "moving-txn"
	createReplicated(ctx, t, adm, topic, 3)

	// A group with committed offsets, and a transactional producer (whose
	// log is kept with the nodes' output when the test fails).
	var clientLog syncLog
	keepLogsOnFailure(t, nodes, map[string]*syncLog{"producer": &clientLog})
	pcl := node.NewClient(t, addrs, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic),
		kgo.WithLogger(kgo.BasicLogger(&clientLog, kgo.LogLevelInfo, nil)))
	// Any error fails the test: kgo surfaces each of these to the
	// application, so a broker must not cause one (a coordinator named by
	// a broker whose image lags must stay resolvable through every
	// broker's Metadata; see FINDINGS.md).
	commitTxn := func(i int) {
		t.Helper()
		if err := pcl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := pcl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("txn-%d", i))}).FirstErr(); err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
		if err := pcl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("committing transaction %d: %v", i, err)
		}
	}
	for i := range 5 {
		commitTxn(i)
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: 42, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, group, offsets); err != nil || resp.Error() != nil {
		t.Fatalf("committing offsets: %v %v", err, resp.Error())
	}

	coordinator := func(key string, typ int8) int32 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = typ
		req.CoordinatorKeys = []string{key}
		resp, err := req.RequestWith(ctx, node.NewClient(t, addrs))
		if err != nil || len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != 0 {
			return -1
		}
		return resp.Coordinators[0].NodeID
	}
	groupCoord, txnCoord := coordinator(group, 0), coordinator(txnID, 1)
	t.Logf("group coordinator %d, transaction coordinator %d", groupCoord, txnCoord)
	victim := nodeByID(nodes, groupCoord)
	victim.Kill()
	var live []string
	for _, n := range nodes {
		if n != victim {
			live = append(live, n.Addr())
		}
	}
	// A fresh client each time: kgo keeps a coordinator it found until the
	// coordinator answers NOT_COORDINATOR, even while it cannot dial it.
	node.WaitFor(t, 30*time.Second, "the group's committed offset from its new coordinator", func() bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(live...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		got, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
		if err != nil || got.Error() != nil {
			return false
		}
		o, ok := got.Lookup(topic, 0)
		return ok && o.At == 42
	})
	if c := coordinator(group, 0); c == victim.ID || c < 0 {
		t.Fatalf("FindCoordinator names %d for the group after node %d died", c, victim.ID)
	}
	waitUnlisted(ctx, t, live, pcl, victim.ID)
	for i := 5; i < 10; i++ {
		commitTxn(i)
	}
	// Then the transaction coordinator's node dies (the group's, back
	// first, so that two replicas of everything are alive).
	victim.Restart()
	node.WaitFor(t, 60*time.Second, "the restarted node serving", func() bool { return coordinator(group, 0) >= 0 })
	txnCoord = coordinator(txnID, 1)
	tvictim := nodeByID(nodes, txnCoord)
	tvictim.Kill()
	t.Logf("killed node %d, the transaction coordinator", tvictim.ID)
	live = live[:0]
	for _, n := range nodes {
		if n != tvictim {
			live = append(live, n.Addr())
		}
	}
	waitUnlisted(ctx, t, live, pcl, tvictim.ID)
	for i := 10; i < 15; i++ {
		commitTxn(i)
	}
	if c := coordinator(txnID, 1); c == tvictim.ID || c < 0 {
		t.Fatalf("FindCoordinator names %d for the transactional id after node %d died", c, tvictim.ID)
	}
	ccl := node.NewClient(t, live, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]bool{}
	pctx, pcancel := context.WithTimeout(ctx, 60*time.Second)
	defer pcancel()
	for len(seen) < 15 && pctx.Err() == nil {
		ccl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	if len(seen) != 15 {
		t.Fatalf("read_committed saw %d of the 15 committed transactions: %v", len(seen), seen)
	}
}

// waitUnlisted waits until the Metadata of every broker at addrs no longer
// lists node id, and then until client's own metadata does not either.
func waitUnlisted(ctx context.Context, t *testing.T, addrs []string, client *kgo.Client, id int32) {
	t.Helper()
	node.WaitFor(t, 60*time.Second, fmt.Sprintf("node %d gone from every live broker's Metadata", id), func() bool {
		for _, addr := range addrs {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
			cl.Close()
			if err != nil || lists(resp, id) {
				return false
			}
		}
		return true
	})
	// A Metadata request sent through a client updates its broker list.
	node.WaitFor(t, 30*time.Second, fmt.Sprintf("node %d gone from the producer's metadata", id), func() bool {
		resp, err := client.Request(ctx, kmsg.NewPtrMetadataRequest())
		return err == nil && !lists(resp, id)
	})
}

// lists reports whether a Metadata response lists broker id.
func lists(resp kmsg.Response, id int32) bool {
	for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
		if b.NodeID == id {
			return true
		}
	}
	return false
}

// syncLog collects a client's log lines.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// keepLogsOnFailure writes, when t fails, each node's output (since its
// last start) and each client log into integration/.work/replication/, so
// that an intermittent failure can be read afterwards. Registered after the
// cluster starts, it runs before the nodes are stopped.
func keepLogsOnFailure(t *testing.T, nodes []*node.Node, clients map[string]*syncLog) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		root, err := integration.FindRepoRoot()
		if err != nil {
			t.Logf("keeping the logs: %v", err)
			return
		}
		dir := filepath.Join(root, "integration", ".work", "replication", fmt.Sprintf("%s-%s", t.Name(), time.Now().Format("150405.000")))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Logf("keeping the logs: %v", err)
			return
		}
		write := func(name, text string) {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Logf("keeping %s: %v", name, err)
			}
		}
		for _, n := range nodes {
			write(fmt.Sprintf("node-%d.log", n.ID), n.Output())
		}
		for name, l := range clients {
			write(name+".log", l.String())
		}
		t.Logf("node and client logs kept in %s", dir)
	})
}
