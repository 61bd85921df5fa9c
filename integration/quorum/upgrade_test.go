package quorum

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/integration/node"
)

// TestFeatureUpgradeOfARunningCluster formats a 3-node cluster at Kafka
// 3.9's metadata.version (3.9-IV0, transaction.version and group.version
// 0, as kafka-storage format --release-version 3.9 does) and upgrades it
// with the stock kafka-features while a producer writes with acks=all to a
// topic with replication factor 3 and min.insync.replicas=2:
// metadata.version to 4.3-IV0, then transaction.version 2, group.version 1
// and eligible.leader.replicas.version 1. ELR is refused before the
// metadata.version it needs. Every node reports the new levels, a
// transaction commits before and after (Transactions V2 after), no produce
// fails or stalls, and every acknowledged record is read back.
func TestFeatureUpgradeOfARunningCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of gregor processes and runs the Java tools")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tool := node.StockTool(ctx, t)
	nodes := node.StartQuorumWith(t, 3, func(n *node.Node) []string {
		n.FormatFlags = []string{"--release-version", "3.9"}
		return nil
	})
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Log(n.AllOutput())
			}
		}
	})
	waitUnfenced(ctx, t, nodes)
	at39 := map[string]int16{"metadata.version": 21, "kraft.version": 1}
	for _, n := range nodes {
		if got := finalizedFeatures(ctx, t, n.Addr()); !maps.Equal(got, at39) {
			t.Fatalf("node %d finalized %v after a 3.9 format, want %v", n.ID, got, at39)
		}
	}

	const topic, partitions = "upgrading", 6
	cl := node.NewClient(t, addrsOf(nodes))
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("creating %s: %v %v", topic, err, resp.Err)
	}
	waitFullISR(ctx, t, adm, topic, partitions)
	commitTransaction(ctx, t, nodes, "before-upgrade")

	load := startAckedLoad(t, nodes, topic)
	load.awaitAcks(t, 200)

	// ELR needs metadata.version 4.0-IV1: refused at 3.9-IV0, nothing
	// changes.
	req := kmsg.NewPtrUpdateFeaturesRequest()
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = "eligible.leader.replicas.version", 1, 1
	req.FeatureUpdates = append(req.FeatureUpdates, u)
	ufResp, err := req.RequestWith(ctx, cl)
	if err != nil || ufResp.ErrorCode != kerr.InvalidUpdateVersion.Code || ufResp.ErrorMessage == nil ||
		!strings.Contains(*ufResp.ErrorMessage, "requires metadata.version at least 4.0-IV1 (23)") {
		t.Fatalf("ELR at metadata.version 3.9-IV0: %v %+v", err, ufResp)
	}

	before := load.acked()
	out := tool("FeatureCommand", "--bootstrap-server", nodes[1].Addr(), "upgrade", "--metadata", "4.3")
	if !strings.Contains(out, "metadata.version was upgraded to 30.") {
		t.Fatalf("kafka-features upgrade --metadata 4.3 printed %q", out)
	}
	load.awaitAcks(t, before+200)
	before = load.acked()
	out = tool("FeatureCommand", "--bootstrap-server", nodes[2].Addr(), "upgrade",
		"--feature", "transaction.version=2", "--feature", "group.version=1", "--feature", "eligible.leader.replicas.version=1")
	for _, want := range []string{"transaction.version was upgraded to 2.", "group.version was upgraded to 1.", "eligible.leader.replicas.version was upgraded to 1."} {
		if !strings.Contains(out, want) {
			t.Fatalf("kafka-features upgrade printed %q, want %q", out, want)
		}
	}
	at43 := map[string]int16{"metadata.version": 30, "kraft.version": 1, "transaction.version": 2, "group.version": 1, "eligible.leader.replicas.version": 1}
	for _, n := range nodes {
		node.WaitFor(t, 10*time.Second, fmt.Sprintf("node %d at the upgraded levels", n.ID), func() bool {
			return maps.Equal(finalizedFeatures(ctx, t, n.Addr()), at43)
		})
	}
	load.awaitAcks(t, before+200)
	commitTransaction(ctx, t, nodes, "after-upgrade")

	gaps, failed := load.stop()
	for p, g := range gaps {
		if g > rollingGapBound {
			t.Errorf("partition %d went %v without an acknowledgement during the upgrade (bound %v)", p, g.Round(time.Millisecond), rollingGapBound)
		}
	}
	if failed != nil {
		t.Fatalf("a produce failed during the upgrade: %v", failed)
	}
	checkAllReadBack(ctx, t, nodes, topic, load.offsets)
}

// finalizedFeatures are the nonzero finalized feature levels the node at
// addr reports in ApiVersions.
func finalizedFeatures(ctx context.Context, t *testing.T, addr string) map[string]int16 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil
	}
	out := map[string]int16{}
	for _, f := range resp.FinalizedFeatures {
		if f.MaxVersionLevel != 0 {
			out[f.Name] = f.MaxVersionLevel
		}
	}
	return out
}

// commitTransaction commits a transaction of ten records to a topic of
// its own with a fresh transactional producer and reads them back with
// read_committed.
func commitTransaction(ctx context.Context, t *testing.T, nodes []*node.Node, name string) {
	t.Helper()
	adm := kadm.NewClient(node.NewClient(t, addrsOf(nodes)))
	if resp, err := adm.CreateTopic(ctx, 1, 3, nil, name); err != nil || resp.Err != nil {
		t.Fatalf("creating %s: %v %v", name, err, resp.Err)
	}
	pr := node.NewClient(t, addrsOf(nodes), kgo.TransactionalID(name), kgo.DefaultProduceTopic(name))
	if err := pr.BeginTransaction(); err != nil {
		t.Fatalf("%s: beginning: %v", name, err)
	}
	for i := range 10 {
		if err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("%s: producing: %v", name, err)
		}
	}
	if err := pr.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("%s: committing: %v", name, err)
	}
	cl := node.NewClient(t, addrsOf(nodes), kgo.ConsumeTopics(name), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 10 && ctx.Err() == nil {
		got += len(cl.PollFetches(ctx).Records())
	}
	if got != 10 {
		t.Fatalf("%s: read %d committed records, want 10", name, got)
	}
}
