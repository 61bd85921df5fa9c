package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestBrokerDrill is the broker drill of Kafka's lab guides, on the lab
// layout (3 controllers, 3 brokers): a topic of 6 partitions, RF 3,
// min.insync.replicas=2. Stopping a partition's leader moves its
// leadership to an ISR member and shrinks the ISR to 2 while an acks=all
// producer and a group consumer carry on; stopping a second replica makes
// acks=all writes fail with NOT_ENOUGH_REPLICAS; restarting both with
// their data brings them back into the ISR. Every acknowledged record is
// consumed.
func TestBrokerDrill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a cluster of gregor processes")
	}
	_, brokers := node.StartSplit(t, 3, 3, clusterOverrides...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	addrs := node.Addrs(brokers)
	adm := kadm.NewClient(node.NewClient(t, addrs))
	const topic = "drill"
	createReplicated(ctx, t, adm, topic, 6)

	// The workload: one acks=all idempotent producer writing unique
	// values, one consumer in a group.
	var acked sync.Map
	var ackedN, failedN atomic.Int64
	var lastErr atomic.Value
	pcl := node.NewClient(t, addrs, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(5*time.Second), kgo.ProducerLinger(0))
	prodCtx, stopProducing := context.WithCancel(ctx)
	var prodWG sync.WaitGroup
	prodWG.Add(1)
	go func() {
		defer prodWG.Done()
		for i := 0; prodCtx.Err() == nil; i++ {
			v := fmt.Sprintf("v-%d", i)
			pcl.Produce(prodCtx, &kgo.Record{Key: []byte(fmt.Sprint(i % 31)), Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err != nil {
					failedN.Add(1)
					lastErr.Store(err)
					return
				}
				acked.Store(v, true)
				ackedN.Add(1)
			})
			time.Sleep(2 * time.Millisecond)
		}
	}()
	var consumed sync.Map
	ccl := node.NewClient(t, addrs, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("drill-group"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	consCtx, stopConsuming := context.WithCancel(ctx)
	var consWG sync.WaitGroup
	consWG.Add(1)
	go func() {
		defer consWG.Done()
		for consCtx.Err() == nil {
			fs := ccl.PollFetches(consCtx)
			fs.EachRecord(func(r *kgo.Record) { consumed.Store(string(r.Value), true) })
		}
	}()
	progress := func(what string) {
		t.Helper()
		before := ackedN.Load()
		node.WaitFor(t, 30*time.Second, "acknowledged writes "+what, func() bool { return ackedN.Load() > before+200 })
	}
	progress("before the drill")

	st, err := describe(ctx, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	first := nodeByID(brokers, st[0].leader)
	if err := first.Stop(); err != nil {
		t.Fatalf("stopping broker %d: %v", first.ID, err)
	}
	t.Logf("stopped broker %d, the leader of partition 0", first.ID)
	var rest []string
	for _, b := range brokers {
		if b != first {
			rest = append(rest, b.Addr())
		}
	}
	radm := kadm.NewClient(node.NewClient(t, rest))
	node.WaitFor(t, 30*time.Second, "every partition led by a live broker with an ISR of 2", func() bool {
		st, err := describe(ctx, radm, topic)
		if err != nil {
			return false
		}
		for _, p := range st {
			if p.leader == first.ID || p.leader < 0 || len(p.isr) != 2 || slices.Contains(p.isr, first.ID) {
				return false
			}
		}
		return true
	})
	progress("with one broker stopped")

	st, _ = describe(ctx, radm, topic)
	var second *node.Node
	for _, b := range brokers {
		if b != first && b.ID != st[0].leader {
			second = b
		}
	}
	if err := second.Stop(); err != nil {
		t.Fatalf("stopping broker %d: %v", second.ID, err)
	}
	t.Logf("stopped broker %d, a replica of every partition", second.ID)
	last := nodeByID(brokers, st[0].leader)
	lcl := node.NewClient(t, []string{last.Addr()}, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(3*time.Second), kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	node.WaitFor(t, 30*time.Second, "acks=all refused with NOT_ENOUGH_REPLICAS", func() bool {
		err := lcl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("refused")}).FirstErr()
		return errors.Is(err, kerr.NotEnoughReplicas)
	})

	first.Restart()
	second.Restart()
	node.WaitFor(t, 90*time.Second, "both brokers back in every ISR", func() bool {
		st, err := describe(ctx, adm, topic)
		return err == nil && fullISR(st)
	})
	progress("after the restarts")
	stopProducing()
	prodWG.Wait()
	pcl.Flush(ctx)
	// Every acknowledged value reaches the consumer.
	missing := func() (n int, example string) {
		acked.Range(func(k, _ any) bool {
			if _, ok := consumed.Load(k); !ok {
				n++
				example = k.(string)
			}
			return true
		})
		return n, example
	}
	var missingN int
	var missingExample string
	node.WaitFor(t, 60*time.Second, "every acknowledged record consumed", func() bool {
		missingN, missingExample = missing()
		if missingN > 0 {
			t.Logf("%d acknowledged records not consumed yet, for example %s", missingN, missingExample)
		}
		return missingN == 0
	})
	stopConsuming()
	consWG.Wait()
	t.Logf("%d records acknowledged, %d failed (last error: %v), all acknowledged ones consumed", ackedN.Load(), failedN.Load(), lastErr.Load())
}
