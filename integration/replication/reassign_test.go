package replication

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReassignPartitionsUnderLoad: the stock kafka-reassign-partitions
// moves every partition of a topic (RF 2) to other brokers while an
// acks=all producer writes to it: --generate proposes a plan, --execute
// (with --throttle) starts it, the new replicas catch up and join the ISR,
// --verify reports it complete and removes the throttles, and every
// acknowledged record is on the new replicas.
func TestReassignPartitionsUnderLoad(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tool := node.StockTool(ctx, t)
	addrs := node.Addrs(nodes)
	cl := node.NewClient(t, addrs, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("moving"))
	adm := kadm.NewClient(cl)
	const topic = "moving"
	one := "1"
	if res, err := adm.CreateTopic(ctx, 3, 2, map[string]*string{"min.insync.replicas": &one}, topic); err != nil || res.Err != nil {
		t.Fatalf("creating %s: %v %v", topic, err, res.Err)
	}
	produceValues(ctx, t, cl, topic, "before-", 2000)
	before, err := describe(ctx, adm, topic)
	if err != nil {
		t.Fatal(err)
	}

	var acked sync.Map
	var wg sync.WaitGroup
	loadCtx, stopLoad := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; loadCtx.Err() == nil; i++ {
			v := fmt.Sprintf("during-%d", i)
			cl.Produce(loadCtx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
				if err == nil {
					acked.Store(v, true)
				}
			})
			time.Sleep(3 * time.Millisecond)
		}
	}()

	dir := t.TempDir()
	topicsFile := filepath.Join(dir, "topics.json")
	os.WriteFile(topicsFile, []byte(`{"version":1,"topics":[{"topic":"moving"}]}`), 0o644)
	out := tool("reassign.ReassignPartitionsCommand", "--bootstrap-server", addrs[0], "--generate",
		"--topics-to-move-json-file", topicsFile, "--broker-list", "1,2,3")
	if !strings.Contains(out, "Current partition replica assignment") || !strings.Contains(out, "Proposed partition reassignment configuration") {
		t.Fatalf("--generate printed:\n%s", out)
	}
	// The proposal may equal the current placement: the test writes its
	// own plan, each partition moved to the brokers it is not on.
	var parts []string
	want := map[int32][]int32{}
	for p, st := range before {
		var target []int32
		for _, id := range []int32{1, 2, 3} {
			if !slices.Contains(st.replicas, id) {
				target = append(target, id)
			}
		}
		target = append(target, st.replicas[0])
		want[p] = target
		parts = append(parts, fmt.Sprintf(`{"topic":"moving","partition":%d,"replicas":[%d,%d],"log_dirs":["any","any"]}`, p, target[0], target[1]))
	}
	plan := filepath.Join(dir, "plan.json")
	os.WriteFile(plan, []byte(`{"version":1,"partitions":[`+strings.Join(parts, ",")+`]}`), 0o644)
	out = tool("reassign.ReassignPartitionsCommand", "--bootstrap-server", addrs[0], "--execute",
		"--reassignment-json-file", plan, "--throttle", "50000000")
	if !strings.Contains(out, "Successfully started partition reassignment") {
		t.Fatalf("--execute printed:\n%s", out)
	}
	node.WaitFor(t, 90*time.Second, "--verify reporting every partition moved", func() bool {
		out := tool("reassign.ReassignPartitionsCommand", "--bootstrap-server", addrs[0], "--verify",
			"--reassignment-json-file", plan)
		return strings.Count(out, "is completed") == 3
	})
	stopLoad()
	wg.Wait()
	cl.Flush(ctx)

	// --verify saw the move complete on the broker it asked; every broker's
	// metadata follows within moments.
	node.WaitFor(t, 30*time.Second, "every broker's metadata showing the new replicas, all in the ISR", func() bool {
		for _, n := range nodes {
			after, err := describeAt(ctx, t, n.Addr(), topic)
			if err != nil {
				return false
			}
			for p, st := range after {
				got, w := slices.Sorted(slices.Values(st.replicas)), slices.Sorted(slices.Values(want[p]))
				if !slices.Equal(got, w) || len(st.isr) != 2 {
					return false
				}
			}
		}
		return true
	})
	// --verify removed the throttles.
	rc, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc[0].Configs {
		if strings.HasSuffix(c.Key, ".replication.throttled.replicas") && c.Value != nil && *c.Value != "" {
			t.Fatalf("%s still %q after --verify", c.Key, *c.Value)
		}
	}
	n := 0
	acked.Range(func(_, _ any) bool { n++; return true })
	seen := consumeAll(ctx, t, addrs, topic, "", 2000+n)
	for i := range 2000 {
		if seen[fmt.Sprintf("before-%d", i)] == 0 {
			t.Fatalf("before-%d lost in the move", i)
		}
	}
	acked.Range(func(k, _ any) bool {
		if seen[k.(string)] == 0 {
			t.Fatalf("%s acknowledged during the move and lost", k)
		}
		return true
	})
	t.Logf("%d records acknowledged during the move, all there", n)
}
