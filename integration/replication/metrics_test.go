package replication

import (
	"context"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sumMetric is a metric's value summed over the nodes that answer.
func sumMetric(nodes []*node.Node, name string) (float64, bool) {
	var sum float64
	for _, n := range nodes {
		m, err := n.Metrics()
		if err != nil {
			return 0, false
		}
		sum += m[name]
	}
	return sum, true
}

// TestMetricsTellTheReplicasState: the replica manager's and the
// controller's gauges follow the cluster: a follower killed makes
// UnderReplicatedPartitions, summed over the live nodes, the partitions it
// held once replica.lag.time.max.ms has passed, with as many committed ISR
// shrinks; it is 0 again with ISR expansions once the node is back; and
// ActiveControllerCount is 1 on exactly one node, the new one after the
// active controller is killed.
func TestMetricsTellTheReplicasState(t *testing.T) {
	t.Parallel()
	// A session longer than replica.lag.time.max.ms (4 s), so that a
	// paused follower is shrunk out by its leaders before it is fenced.
	nodes := startCluster(t, "broker.session.timeout.ms=30000")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := node.NewClient(t, node.Addrs(nodes), kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(cl)
	const topic = "metered"
	createReplicated(ctx, t, adm, topic, 4)
	produceValues(ctx, t, cl, topic, "a-", 100)

	gauge := func(among []*node.Node, name string, want float64) func() bool {
		return func() bool {
			v, ok := sumMetric(among, name)
			return ok && v == want
		}
	}
	node.WaitFor(t, 30*time.Second, "all 4 partitions led, none under-replicated, one active controller", func() bool {
		return gauge(nodes, "kafka_server_replicamanager_leadercount", 4)() &&
			gauge(nodes, "kafka_server_replicamanager_underreplicatedpartitions", 0)() &&
			gauge(nodes, "kafka_controller_kafkacontroller_activecontrollercount", 1)()
	})
	// Every node reports the cluster the same: 3 brokers, 1 topic, 4
	// partitions (the controller gauges count the image).
	for _, n := range nodes {
		m, err := n.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		if m["kafka_controller_kafkacontroller_activebrokercount"] != 3 || m["kafka_controller_kafkacontroller_globalpartitioncount"] != 4 ||
			m["kafka_controller_kafkacontroller_globaltopiccount"] != 1 || m["kafka_server_replicamanager_partitioncount"] != 4 {
			t.Fatalf("node %d's view: %v", n.ID, m)
		}
	}

	// A node that is not the active controller stops (SIGSTOP): its
	// session outlives replica.lag.time.max.ms, so the leaders shrink it
	// out of their ISRs themselves, and count it.
	var victim *node.Node
	var live []*node.Node
	for _, n := range nodes {
		m, _ := n.Metrics()
		if victim == nil && m["kafka_controller_kafkacontroller_activecontrollercount"] == 0 {
			victim = n
			continue
		}
		live = append(live, n)
	}
	shrinksBefore, _ := sumMetric(live, "kafka_server_replicamanager_isrshrinks_total")
	victim.Pause()
	t.Logf("paused node %d", victim.ID)
	took := node.WaitFor(t, 30*time.Second, "ISR shrinks counted, every partition the live nodes lead under-replicated", func() bool {
		shrinks, ok1 := sumMetric(live, "kafka_server_replicamanager_isrshrinks_total")
		urp, ok2 := sumMetric(live, "kafka_server_replicamanager_underreplicatedpartitions")
		leading, ok3 := sumMetric(live, "kafka_server_replicamanager_leadercount")
		return ok1 && ok2 && ok3 && shrinks > shrinksBefore && urp == leading && urp > 0
	})
	t.Logf("shrunk after %s", took)
	expandsBefore, _ := sumMetric(live, "kafka_server_replicamanager_isrexpands_total")
	victim.Resume()
	took = node.WaitFor(t, 30*time.Second, "ISR expansions counted, nothing under-replicated once it is back", func() bool {
		expands, ok := sumMetric(nodes, "kafka_server_replicamanager_isrexpands_total")
		return ok && expands > expandsBefore && gauge(nodes, "kafka_server_replicamanager_underreplicatedpartitions", 0)()
	})
	t.Logf("expanded after %s", took)

	// kill -9: the controller fences it at once and takes it out of the
	// ISRs (no leader counts a shrink, as in Kafka); the live nodes lead
	// everything, under-replicated.
	victim.Kill()
	t.Logf("killed node %d", victim.ID)
	took = node.WaitFor(t, 30*time.Second, "the 4 partitions led by the live nodes, under-replicated, the broker fenced", func() bool {
		return gauge(live, "kafka_server_replicamanager_underreplicatedpartitions", 4)() &&
			gauge(live, "kafka_server_replicamanager_leadercount", 4)() &&
			gauge(live, "kafka_controller_kafkacontroller_fencedbrokercount", 2)() // each live node counts 1
	})
	t.Logf("under-replicated after %s", took)
	victim.Restart()
	took = node.WaitFor(t, 60*time.Second, "no partition under-replicated once the node is back", func() bool {
		return gauge(nodes, "kafka_server_replicamanager_underreplicatedpartitions", 0)() &&
			gauge(nodes, "kafka_controller_kafkacontroller_fencedbrokercount", 0)()
	})
	t.Logf("caught up after %s", took)

	// The active controller goes away: another takes over.
	var active *node.Node
	var rest []*node.Node
	for _, n := range nodes {
		m, _ := n.Metrics()
		if m["kafka_controller_kafkacontroller_activecontrollercount"] == 1 {
			active = n
		} else {
			rest = append(rest, n)
		}
	}
	active.Kill()
	node.WaitFor(t, 30*time.Second, "one active controller among the others", gauge(rest, "kafka_controller_kafkacontroller_activecontrollercount", 1))
}

// TestFollowersFetchInSessions: followers fetch in incremental fetch
// sessions (KIP-227), as Kafka's do, so that a fetch of thousands of idle
// partitions lists none of them. With 30 partitions of replication factor 3
// the leaders' FetchSessionCache holds every followed partition once (60:
// two followers each) in at most one session per follower and leader (6),
// and acks=all writes go on being acknowledged through them (followers
// list a partition again only when its fetch position moved). Without
// sessions the cache holds none.
func TestFollowersFetchInSessions(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := node.NewClient(t, node.Addrs(nodes), kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(cl)
	const topic = "sessions"
	createReplicated(ctx, t, adm, topic, 30)
	produceValues(ctx, t, cl, topic, "a-", 300)
	var sessions, cached float64
	node.WaitFor(t, 30*time.Second, "every followed partition in a follower's fetch session", func() bool {
		var ok1, ok2 bool
		sessions, ok1 = sumMetric(nodes, "kafka_server_fetchsessioncache_numincrementalfetchsessions")
		cached, ok2 = sumMetric(nodes, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached")
		return ok1 && ok2 && cached == 60 && sessions >= 2 && sessions <= 6
	})
	// Writes go on through the sessions: each acks=all record needs both
	// followers to fetch it in an incremental fetch.
	produceValues(ctx, t, cl, topic, "b-", 300)
	seen := consumeAll(ctx, t, node.Addrs(nodes), topic, "b-", 300)
	if len(seen) != 300 {
		t.Fatalf("read %d distinct values of 300", len(seen))
	}
	st, err := describe(ctx, adm, topic)
	if err != nil || !fullISR(st) {
		t.Fatalf("after writing through the sessions: ISR not full (%v)", err)
	}
	t.Logf("%v sessions hold %v partitions", sessions, cached)
}
