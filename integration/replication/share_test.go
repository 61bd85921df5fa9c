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
// partition's share state (and of whatever else it led) loses nothing
// (see shareWorkSurvivesKill).
func TestShareGroupSurvivesShareCoordinatorKill(t *testing.T) {
	t.Parallel()
	shareWorkSurvivesKill(t, "the share coordinator", func(ctx context.Context, t *testing.T, addrs []string, key share.Key) int32 {
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
		return coordinator
	})
}

// TestShareGroupSurvivesPartitionLeaderKill: as above, with kill -9 of
// the partition's leader, which holds the share partition's in-flight
// records and acquisition locks: its successor rebuilds them from the
// share coordinator's state.
func TestShareGroupSurvivesPartitionLeaderKill(t *testing.T) {
	t.Parallel()
	shareWorkSurvivesKill(t, "the partition leader", func(ctx context.Context, t *testing.T, addrs []string, key share.Key) int32 {
		adm := kadm.NewClient(node.NewClient(t, addrs))
		var leader int32 = -1
		node.WaitFor(t, 30*time.Second, "the partition's leader", func() bool {
			td, err := adm.ListTopics(ctx, "shared-work")
			if err != nil || td["shared-work"].Err != nil {
				return false
			}
			leader = td["shared-work"].Partitions[0].Leader
			return leader >= 0
		})
		return leader
	})
}

// shareWorkSurvivesKill: two share consumers work through a replicated
// one-partition topic, accepting every record and flushing their
// acknowledgements after each poll; a quarter of the way through, the node
// victim names dies with kill -9. Nothing is lost: every record is
// handed over and the share-partition start offset moves past the last
// (every record accepted or archived). No record is handed over again once a consumer
// saw its acceptance confirmed (the flush returned and the broker's
// answer had no error), and none with a delivery count past
// share.delivery.count.limit (5). Other redeliveries (records acquired
// from the dead node's view, acceptances whose answer never came) are
// allowed: share groups deliver at least once.
func shareWorkSurvivesKill(t *testing.T, what string, victim func(ctx context.Context, t *testing.T, addrs []string, key share.Key) int32) {
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
	delivered := map[string]int{}
	confirmed := map[string]bool{} // acceptance confirmed to a consumer
	var violations []string
	maxDeliveries := int32(0)
	var wg sync.WaitGroup
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	for _, name := range []string{"w1", "w2"} {
		var ackMu sync.Mutex
		var ackErrs []error
		cl := node.NewClient(t, addrs, kgo.ClientID(name), kgo.ConsumeTopics(topic), kgo.ShareGroup(group), kgo.ShareMaxRecords(20),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				ackMu.Lock()
				defer ackMu.Unlock()
				if err := rs.Error(); err != nil {
					ackErrs = append(ackErrs, err)
				}
			}))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cctx.Err() == nil {
				fs := cl.PollFetches(cctx)
				var values []string
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					v := string(r.Value)
					values = append(values, v)
					delivered[v]++
					maxDeliveries = max(maxDeliveries, r.DeliveryCount())
					if confirmed[v] {
						violations = append(violations, fmt.Sprintf("%s handed to %s (delivery %d) after its acceptance was confirmed", v, name, r.DeliveryCount()))
					}
					r.Ack(kgo.AckAccept)
				})
				mu.Unlock()
				if len(values) == 0 {
					continue
				}
				ackMu.Lock()
				ackErrs = nil
				ackMu.Unlock()
				fctx, fcancel := context.WithTimeout(cctx, 15*time.Second)
				err := cl.FlushAcks(fctx)
				fcancel()
				ackMu.Lock()
				ok := err == nil && len(ackErrs) == 0
				ackMu.Unlock()
				if ok {
					mu.Lock()
					for _, v := range values {
						confirmed[v] = true
					}
					mu.Unlock()
				}
				// Paced (about 400 records/s between the two), so
				// that the kill lands with most of the work ahead.
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	progress := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(confirmed)
	}
	node.WaitFor(t, 60*time.Second, "a quarter of the records accepted", func() bool { return progress() >= total/4 })

	topicID := topicIDOf(ctx, t, adm, topic)
	id := victim(ctx, t, addrs, share.Key{Group: group, TopicID: topicID, Partition: 0})
	killed := nodeByID(nodes, id)
	t.Logf("killing node %d, %s, after %d records accepted", killed.ID, what, progress())
	killed.Kill()
	// A record whose acceptance reached the state but whose answer died
	// with the node is never confirmed, and not handed over again: done
	// is every record handed over and the share-partition start offset
	// past the last.
	node.WaitFor(t, 120*time.Second, "every record handed over and the start offset at the end", func() bool {
		mu.Lock()
		all := len(delivered) == total
		mu.Unlock()
		if !all {
			return false
		}
		offs, err := adm.DescribeShareGroupOffsets(ctx, group)
		if err != nil || offs.Error() != nil {
			return false
		}
		o, ok := offs[group].Offsets.Lookup(topic, 0)
		return ok && o.Err == nil && o.StartOffset == total
	})
	ccancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	again := 0
	for _, n := range delivered {
		again += n - 1
	}
	if len(violations) > 0 {
		t.Fatalf("%d records handed over again after a confirmed acceptance, the first: %s", len(violations), violations[0])
	}
	if maxDeliveries > 5 {
		t.Fatalf("a record was delivered %d times, past the delivery limit of 5", maxDeliveries)
	}
	t.Logf("%d records handed over, %d with a confirmed acceptance, %d deliveries after a record's first, most deliveries of one record %d",
		len(delivered), len(confirmed), again, maxDeliveries)
}

func topicIDOf(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) [16]byte {
	t.Helper()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("describing %s: %v %v", topic, err, td[topic].Err)
	}
	return td[topic].ID
}
