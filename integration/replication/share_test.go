package replication

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/coordinator/share"
	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareGroupSurvivesShareCoordinatorKill: two share consumers work
// through a replicated topic; kill -9 of the node that coordinates the
// partition's share state (and of whatever else it led) loses nothing:
// every record is eventually accepted, none is delivered more than
// share.delivery.count.limit (5) times. Redeliveries (records acquired
// from the dead node's view of the state, or whose acknowledgement did
// not reach the state) are allowed: share groups deliver at least once.
func TestShareGroupSurvivesShareCoordinatorKill(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, "offsets.topic.replication.factor=3", "offsets.topic.num.partitions=3",
		"share.coordinator.state.topic.replication.factor=3", "share.coordinator.state.topic.min.isr=2",
		"share.coordinator.state.topic.num.partitions=3", "group.share.record.lock.duration.ms=15000")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	addrs := node.Addrs(nodes)
	adm := kadm.NewClient(node.NewClient(t, addrs))
	const topic, group, total = "shared-work", "workers", 1000
	createReplicated(ctx, t, adm, topic, 1)
	setGroup := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Value: kmsg.StringPtr("earliest")}}
	setGroup.Resources = append(setGroup.Resources, res)
	if resp, err := setGroup.RequestWith(ctx, node.NewClient(t, addrs)); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("setting share.auto.offset.reset: %v %+v", err, resp)
	}
	prod := node.NewClient(t, addrs, kgo.DefaultProduceTopic(topic))
	for i := 0; i < total; i += 20 {
		var rs []*kgo.Record
		for j := i; j < i+20; j++ {
			rs = append(rs, kgo.StringRecord(fmt.Sprint(j)))
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	accepted := map[string]int{}
	maxDeliveries := int32(0)
	var wg sync.WaitGroup
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	for _, name := range []string{"w1", "w2"} {
		cl := node.NewClient(t, addrs, kgo.ClientID(name), kgo.ConsumeTopics(topic), kgo.ShareGroup(group), kgo.ShareMaxRecords(20))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cctx.Err() == nil {
				fs := cl.PollFetches(cctx)
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					accepted[string(r.Value)]++
					maxDeliveries = max(maxDeliveries, r.DeliveryCount())
					r.Ack(kgo.AckAccept)
				})
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	progress := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted)
	}
	node.WaitFor(t, 60*time.Second, "a third of the records consumed", func() bool { return progress() >= total/3 })

	// The node that coordinates the partition's share state dies.
	topicID := topicIDOf(ctx, t, adm, topic)
	key := share.Key{Group: group, TopicID: topicID, Partition: 0}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 2
	req.CoordinatorKeys = []string{key.CoordinatorKey()}
	var coordinator int32 = -1
	node.WaitFor(t, 30*time.Second, "the share coordinator of the partition", func() bool {
		resp, err := req.RequestWith(ctx, node.NewClient(t, addrs))
		if err != nil || resp.Coordinators[0].ErrorCode != 0 {
			return false
		}
		coordinator = resp.Coordinators[0].NodeID
		return true
	})
	victim := nodeByID(nodes, coordinator)
	t.Logf("killing node %d, the share coordinator, after %d records", victim.ID, progress())
	victim.Kill()
	node.WaitFor(t, 120*time.Second, "every record accepted", func() bool { return progress() == total })
	ccancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	again := 0
	for _, n := range accepted {
		again += n - 1
	}
	if maxDeliveries > 5 {
		t.Fatalf("a record was delivered %d times, past the delivery limit of 5", maxDeliveries)
	}
	t.Logf("%d records accepted, %d of them more than once, most deliveries of one record %d", len(accepted), again, maxDeliveries)
}

func topicIDOf(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) [16]byte {
	t.Helper()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("describing %s: %v %v", topic, err, td[topic].Err)
	}
	return td[topic].ID
}
