package quorum

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/integration/node"
)

// rollingGapBound is the longest a partition may go without an
// acknowledgement while a node restarts. A node stopped with SIGTERM hands
// its leaderships over before it stops (controlled shutdown, through the
// heartbeat's WantShutDown), so the clients lose a partition only for one
// NOT_LEADER answer and a metadata refresh. Without the handover the
// partitions would wait for the stopped broker's session to lapse,
// broker.session.timeout.ms (9 s by default, which this test keeps) and
// more (the test keeps the node down until its partitions are led
// elsewhere), so the bound tells the two apart with room for a busy
// machine.
const rollingGapBound = 5 * time.Second

// TestRollingRestartUnderLoad restarts each node of a 3-node cluster in
// turn, as an operator rolls a cluster, while a producer writes with
// acks=all to a topic with replication factor 3 and min.insync.replicas=2.
// Each node goes only once every partition is back in full ISR. No
// partition goes without an acknowledgement for longer than
// rollingGapBound, and every acknowledged record is read back at its
// offset afterwards, once.
func TestRollingRestartUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of gregor processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	nodes := node.StartQuorum(t, 3)
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				t.Log(n.AllOutput())
			}
		}
	})
	waitUnfenced(ctx, t, nodes)
	const topic, partitions = "rolling", 6
	adm := kadm.NewClient(node.NewClient(t, addrsOf(nodes)))
	resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("creating %s: %v %v", topic, err, resp.Err)
	}
	waitFullISR(ctx, t, adm, topic, partitions)

	load := startAckedLoad(t, nodes, topic)
	load.awaitAcks(t, 200)
	for _, n := range nodes {
		before := load.acked()
		t.Logf("stopping node %d at %s", n.ID, time.Now().Format("15:04:05.000"))
		if err := n.Stop(); err != nil {
			t.Fatalf("stopping node %d: %v", n.ID, err)
		}
		t.Logf("node %d stopped at %s", n.ID, time.Now().Format("15:04:05.000"))
		// The node stays down until the others lead all its partitions,
		// as long as an operator's restart may take: with the handover
		// that is at once, without it a session timeout later.
		other := nodes[int(n.ID)%len(nodes)]
		node.WaitFor(t, time.Minute, fmt.Sprintf("node %d's partitions led elsewhere", n.ID), func() bool {
			led := leaders(ctx, t, other.Addr(), topic)
			for _, l := range led {
				if l == n.ID || l < 0 {
					return false
				}
			}
			return len(led) == partitions
		})
		n.Restart()
		t.Logf("node %d serves again at %s", n.ID, time.Now().Format("15:04:05.000"))
		waitFullISR(ctx, t, adm, topic, partitions)
		load.awaitAcks(t, before+200)
		t.Logf("node %d restarted; %d records acknowledged so far", n.ID, load.acked())
	}
	gaps, failed := load.stop()
	for p, g := range gaps {
		t.Logf("partition %d: longest time without an acknowledgement %v, until %s", p, g.Round(time.Millisecond), load.gapEnd[p].Format("15:04:05.000"))
		if g > rollingGapBound {
			t.Errorf("partition %d went %v without an acknowledgement during the rolling restart (bound %v)", p, g.Round(time.Millisecond), rollingGapBound)
		}
	}
	if failed != nil {
		t.Fatalf("a produce failed during the rolling restart: %v", failed)
	}
	checkAllReadBack(ctx, t, nodes, topic, load.offsets)
}

func addrsOf(nodes []*node.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Addr())
	}
	return out
}

// waitFullISR waits until every partition of topic has its whole replica
// set in sync.
func waitFullISR(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, partitions int) {
	t.Helper()
	node.WaitFor(t, time.Minute, "every partition of "+topic+" in full ISR", func() bool {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil || td[topic].Err != nil || len(td[topic].Partitions) != partitions {
			return false
		}
		for _, p := range td[topic].Partitions {
			if p.Err != nil || p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
				return false
			}
		}
		return true
	})
}

// ackedLoad produces to every partition in turn with acks=all and
// records when each partition last had an acknowledgement.
type ackedLoad struct {
	stopping atomic.Bool
	done     chan struct{}
	cl       *kgo.Client

	mu      sync.Mutex
	offsets map[string]kgo.EpochOffset // value -> partition (as Epoch) and offset
	last    map[int32]time.Time
	gaps    map[int32]time.Duration
	gapEnd  map[int32]time.Time
	failed  error
}

func startAckedLoad(t *testing.T, nodes []*node.Node, topic string) *ackedLoad {
	t.Helper()
	// Metadata is refreshed as soon as a NOT_LEADER answer asks for it
	// (franz-go's default waits up to 5 s between refreshes).
	cl := node.NewClient(t, addrsOf(nodes), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.ProducerLinger(time.Millisecond))
	l := &ackedLoad{done: make(chan struct{}), cl: cl,
		offsets: map[string]kgo.EpochOffset{}, last: map[int32]time.Time{}, gaps: map[int32]time.Duration{}, gapEnd: map[int32]time.Time{}}
	go func() {
		defer close(l.done)
		for i := 0; !l.stopping.Load(); i++ {
			v := fmt.Sprintf("r%d", i)
			l.cl.Produce(context.Background(), &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				l.mu.Lock()
				defer l.mu.Unlock()
				if err != nil {
					if l.failed == nil {
						l.failed = fmt.Errorf("record %s: %w", v, err)
					}
					return
				}
				now := time.Now()
				if prev, ok := l.last[r.Partition]; ok && now.Sub(prev) > l.gaps[r.Partition] {
					l.gaps[r.Partition], l.gapEnd[r.Partition] = now.Sub(prev), now
				}
				l.last[r.Partition] = now
				l.offsets[v] = kgo.EpochOffset{Epoch: r.Partition, Offset: r.Offset}
			})
			if i%20 == 0 {
				time.Sleep(2 * time.Millisecond)
			}
		}
	}()
	return l
}

func (l *ackedLoad) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.offsets)
}

func (l *ackedLoad) awaitAcks(t *testing.T, n int) {
	t.Helper()
	node.WaitFor(t, time.Minute, fmt.Sprintf("%d acknowledged records", n), func() bool { return l.acked() >= n })
}

// stop ends the load once what is buffered is acknowledged.
func (l *ackedLoad) stop() (map[int32]time.Duration, error) {
	l.stopping.Store(true)
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.cl.Flush(ctx); err != nil {
		l.mu.Lock()
		if l.failed == nil {
			l.failed = fmt.Errorf("flushing the producer: %w", err)
		}
		l.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gaps, l.failed
}

// checkAllReadBack reads topic from the start and checks that each
// acknowledged value is at its partition and offset, and no value is
// there twice.
func checkAllReadBack(ctx context.Context, t *testing.T, nodes []*node.Node, topic string, acked map[string]kgo.EpochOffset) {
	t.Helper()
	cl := node.NewClient(t, addrsOf(nodes), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]kgo.EpochOffset{}
	found := 0
	deadline, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for found < len(acked) && deadline.Err() == nil {
		fs := cl.PollFetches(deadline)
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			at := kgo.EpochOffset{Epoch: r.Partition, Offset: r.Offset}
			if prev, dup := seen[v]; dup {
				t.Errorf("%s is in the log twice: partition %d offset %d and partition %d offset %d", v, prev.Epoch, prev.Offset, at.Epoch, at.Offset)
			}
			seen[v] = at
			if want, ok := acked[v]; ok {
				found++
				if want != at {
					t.Errorf("%s was acknowledged at partition %d offset %d, read at partition %d offset %d", v, want.Epoch, want.Offset, at.Epoch, at.Offset)
				}
			}
		})
	}
	if found < len(acked) {
		t.Fatalf("%d of %d acknowledged records read back", found, len(acked))
	}
	t.Logf("all %d acknowledged records read back at their offsets (%d records in the log)", len(acked), len(seen))
}
