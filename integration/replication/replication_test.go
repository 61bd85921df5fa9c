// Package replication tests partitions replicated over several Gregor
// brokers (Kafka's ISR model): acks=all waits for the ISR, followers copy
// the leader's log byte for byte, a killed leader loses nothing
// acknowledged, and the ISR shrinks and grows back.
package replication

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Shorter than Kafka's defaults, so that fencing and ISR changes are seen
// within a test's time.
var clusterOverrides = []string{
	"broker.session.timeout.ms=3000",
	"broker.heartbeat.interval.ms=500",
	"replica.lag.time.max.ms=4000",
}

func startCluster(t *testing.T, extra ...string) []*node.Node {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a cluster of gregor processes")
	}
	return node.StartQuorum(t, 3, append(slices.Clone(clusterOverrides), extra...)...)
}

// partitionState is what Metadata says of one partition.
type partitionState struct {
	leader   int32
	replicas []int32
	isr      []int32
}

func describe(ctx context.Context, adm *kadm.Client, topic string) (map[int32]partitionState, error) {
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	d := td[topic]
	if d.Err != nil {
		return nil, d.Err
	}
	out := map[int32]partitionState{}
	for _, p := range d.Partitions {
		isr := slices.Clone(p.ISR)
		slices.Sort(isr)
		out[p.Partition] = partitionState{leader: p.Leader, replicas: p.Replicas, isr: isr}
	}
	return out, nil
}

// fullISR reports whether every partition has all three replicas in its
// ISR.
func fullISR(st map[int32]partitionState) bool {
	for _, p := range st {
		if len(p.isr) != 3 {
			return false
		}
	}
	return true
}

// describeAt is describe as one broker answers it (a fresh client's
// Metadata to that broker alone: nothing cached, no dead broker tried).
func describeAt(ctx context.Context, t *testing.T, addr, topic string) (map[int32]partitionState, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		return nil, fmt.Errorf("no metadata for %s", topic)
	}
	out := map[int32]partitionState{}
	for _, p := range resp.Topics[0].Partitions {
		isr := slices.Clone(p.ISR)
		slices.Sort(isr)
		out[p.Partition] = partitionState{leader: p.Leader, replicas: p.Replicas, isr: isr}
	}
	return out, nil
}

func createReplicated(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	minISR := "2"
	res, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": &minISR}, topic)
	if err != nil || res.Err != nil {
		t.Fatalf("creating %s: %v %v", topic, err, res.Err)
	}
	node.WaitFor(t, 15*time.Second, "every partition led with a full ISR", func() bool {
		st, err := describe(ctx, adm, topic)
		if err != nil || len(st) != int(partitions) {
			return false
		}
		for _, p := range st {
			if p.leader < 0 || len(p.isr) != 3 {
				return false
			}
		}
		return true
	})
}

// produceValues sends n records with values prefix-i, acks=all, and fails
// the test on any error.
func produceValues(ctx context.Context, t *testing.T, cl *kgo.Client, topic, prefix string, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 17)), Value: []byte(fmt.Sprintf("%s%d", prefix, i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}
}

// consumeAll reads topic from the start until every value with prefix has
// been seen want times in total, and returns how often each was seen.
func consumeAll(ctx context.Context, t *testing.T, addrs []string, topic, prefix string, want int) map[string]int {
	t.Helper()
	cl := node.NewClient(t, addrs, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	total := 0
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for total < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", total, want)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if strings.HasPrefix(string(r.Value), prefix) {
				seen[string(r.Value)]++
				total++
			}
		})
	}
	return seen
}

func nodeByID(nodes []*node.Node, id int32) *node.Node {
	for _, n := range nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// TestAcksAllSurvivesLeaderKill: records acknowledged with acks=all on a
// topic with three replicas are all there after kill -9 of a partition's
// leader; leadership moves to an ISR member, the ISR drops the dead
// broker, and the broker rejoins every ISR once restarted.
func TestAcksAllSurvivesLeaderKill(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	addrs := node.Addrs(nodes)
	cl := node.NewClient(t, addrs, kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(cl)
	const topic = "drill"
	createReplicated(ctx, t, adm, topic, 6)

	produceValues(ctx, t, cl, topic, "a-", 3000)
	before, err := describe(ctx, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	victim := nodeByID(nodes, before[0].leader)
	victim.Kill()
	t.Logf("killed node %d, the leader of partition 0", victim.ID)
	var others []string
	for _, n := range nodes {
		if n != victim {
			others = append(others, n.Addr())
		}
	}
	ocl := node.NewClient(t, others, kgo.RequiredAcks(kgo.AllISRAcks()))
	oadm := kadm.NewClient(ocl)
	took := node.WaitFor(t, 30*time.Second, "partition 0 led elsewhere, ISR without the dead broker", func() bool {
		st, err := describeAt(ctx, t, others[0], topic)
		if err != nil {
			return false
		}
		p := st[0]
		return p.leader >= 0 && p.leader != victim.ID && !slices.Contains(p.isr, victim.ID) && len(p.isr) == 2
	})
	t.Logf("new leader after %s", took)
	produceValues(ctx, t, ocl, topic, "b-", 1000)
	seen := consumeAll(ctx, t, others, topic, "", 4000)
	for i := range 3000 {
		if seen[fmt.Sprintf("a-%d", i)] != 1 {
			t.Fatalf("a-%d seen %d times", i, seen[fmt.Sprintf("a-%d", i)])
		}
	}

	victim.Restart()
	took = node.WaitFor(t, 60*time.Second, "the restarted broker back in every ISR", func() bool {
		st, err := describe(ctx, oadm, topic)
		return err == nil && fullISR(st)
	})
	t.Logf("ISR full again %s after the restart", took)

}

// TestKilledBrokerFencedAtOnce: a broker killed with kill -9 is fenced,
// and its partitions led by other ISR members, long before its session
// would lapse (broker.session.timeout.ms is 60 s here): the active
// controller sees its heartbeat connection close and its listener refuse
// connections (controller/liveness.go).
func TestKilledBrokerFencedAtOnce(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, "broker.session.timeout.ms=60000")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(node.NewClient(t, node.Addrs(nodes)))
	const topic = "fast"
	createReplicated(ctx, t, adm, topic, 6)
	for _, victim := range []int{0, 1} {
		// The first kill takes a broker that is not the active
		// controller's, the second the one that is: then the new active
		// controller probes the brokers it inherits.
		active := activeControllerID(ctx, t, nodes)
		var n *node.Node
		for _, c := range nodes {
			if (victim == 0) == (c.ID != active) {
				n = c
				break
			}
		}
		var live string
		for _, c := range nodes {
			if c != n {
				live = c.Addr()
			}
		}
		n.Kill()
		took := node.WaitFor(t, 20*time.Second, fmt.Sprintf("broker %d out of every ISR", n.ID), func() bool {
			st, err := describeAt(ctx, t, live, topic)
			if err != nil {
				return false
			}
			for _, p := range st {
				if slices.Contains(p.isr, n.ID) || p.leader == n.ID || p.leader < 0 {
					return false
				}
			}
			return true
		})
		t.Logf("killed broker %d (active controller %d): fenced and its leaderships moved after %s", n.ID, active, took)

		n.Restart()
		node.WaitFor(t, 60*time.Second, "the restarted broker back in every ISR", func() bool {
			st, err := describeAt(ctx, t, live, topic)
			return err == nil && fullISR(st)
		})
	}
}

// activeControllerID is the metadata quorum's leader, from any node.
func activeControllerID(ctx context.Context, t *testing.T, nodes []*node.Node) int32 {
	t.Helper()
	for _, n := range nodes {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrDescribeQuorumRequest()
		tp := kmsg.NewDescribeQuorumRequestTopic()
		tp.Topic = "__cluster_metadata"
		tp.Partitions = append(tp.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
		req.Topics = append(req.Topics, tp)
		kresp, err := req.RequestWith(ctx, cl)
		cl.Close()
		if err == nil && len(kresp.Topics) == 1 && len(kresp.Topics[0].Partitions) == 1 {
			return kresp.Topics[0].Partitions[0].LeaderID
		}
	}
	t.Fatal("no node answered DescribeQuorum")
	return -1
}
