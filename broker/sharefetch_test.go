package broker

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/coordinator/share"
	"github.com/gregorbroker/gregor/metrics"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startShareNode is a node with share groups on (share.version 1).
func startShareNode(t *testing.T) *testNode {
	t.Helper()
	return startTestNodeWithFeatures(t, map[string]string{
		"offsets.topic.num.partitions":                 "3",
		"share.coordinator.state.topic.num.partitions": "3",
		"group.share.assignment.interval.ms":           "0",
		// Pruned often, cold partitions included: the state read back
		// after a prune must be whole.
		"share.coordinator.state.topic.prune.interval.ms":       "200",
		"share.coordinator.cold.partition.snapshot.interval.ms": "1",
	}, map[string]int16{"group.version": 1, "transaction.version": 2, "share.version": 1}, nil, nil)
}

// produceStrings produces "0".."n-1" in batches of ten records (records
// are acquired whole log batch by whole log batch).
func produceStrings(t *testing.T, addr, topic string, n int) {
	t.Helper()
	produceStringsPaced(t, addr, topic, n, 0)
}

// produceStringsPaced waits gap after each batch, so that consumers
// polling meanwhile each get some.
func produceStringsPaced(t *testing.T, addr, topic string, n int, gap time.Duration) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < n; i += 10 {
		var rs []*kgo.Record
		for j := i; j < min(i+10, n); j++ {
			rs = append(rs, kgo.StringRecord(fmt.Sprint(j)))
		}
		if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(gap)
	}
}

func setGroupConfig(t *testing.T, addr, group, key, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: key, Value: kmsg.StringPtr(value)}}
	req.Resources = append(req.Resources, res)
	resp := call[*kmsg.IncrementalAlterConfigsResponse](t, addr, req)
	if code := resp.Resources[0].ErrorCode; code != 0 {
		t.Fatalf("setting %s=%s on group %s: %v %v", key, value, group, kerr.ErrorForCode(code), resp.Resources[0].ErrorMessage)
	}
}

// TestShareGroupTwoConsumersShareAPartition: two kgo share consumers of
// one group read one partition at once; between them they get every
// record exactly once (all are accepted, no lock expires).
func TestShareGroupTwoConsumersShareAPartition(t *testing.T) {
	n := startShareNode(t)
	reg := metrics.NewRegistry()
	n.b.RegisterMetrics(reg, true)
	n.b.replicas.RegisterMetrics(reg, true)
	createTopicOn(t, n, "queue", 1)
	const total = 300
	setGroupConfig(t, n.addr, "q", "share.auto.offset.reset", "earliest")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := map[string]int{}
	by := map[string]int{}
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ClientID(name), kgo.ConsumeTopics("queue"), kgo.ShareGroup("q"), kgo.ShareMaxRecords(20))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				for _, e := range fs.Errors() {
					if e.Err != context.DeadlineExceeded && e.Err != context.Canceled {
						t.Errorf("%s: %v", name, e.Err)
					}
				}
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					seen[string(r.Value)]++
					by[name]++
				})
				done := len(seen) == total
				mu.Unlock()
				if done {
					cancel()
				}
				// Slow enough for the other member to get a share.
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	// Both members hold the partition before a record is produced:
	// otherwise the first to poll may take them all, as with Kafka.
	deadline := time.Now().Add(30 * time.Second)
	for {
		d := kmsg.NewPtrShareGroupDescribeRequest()
		d.SetVersion(1)
		d.GroupIDs = []string{"q"}
		g := call[*kmsg.ShareGroupDescribeResponse](t, n.addr, d).Groups[0]
		assigned := 0
		for _, m := range g.Members {
			if len(m.Assignment.TopicPartitions) == 1 {
				assigned++
			}
		}
		if assigned == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the two members were never both assigned the partition: %+v", g)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Paced over about 1.5 s: on a loaded machine one member could
	// otherwise take every batch before the other's first poll.
	produceStringsPaced(t, n.addr, "queue", total, 50*time.Millisecond)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != total {
		t.Fatalf("consumed %d distinct records of %d (a %d, b %d)", len(seen), total, by["a"], by["b"])
	}
	for v, c := range seen {
		if c != 1 {
			t.Fatalf("record %s delivered %d times", v, c)
		}
	}
	if by["a"] == 0 || by["b"] == 0 {
		t.Fatalf("one member got nothing: a %d, b %d", by["a"], by["b"])
	}
	t.Logf("a %d, b %d", by["a"], by["b"])

	// The share metrics saw it: the fetches and acknowledgements of the
	// topic, the accepted records (all but the last polls', accepted when
	// the members poll again or close), the stable group with its
	// partition's window.
	want := map[string]func(float64) bool{
		`kafka_server_brokertopicmetrics_totalsharefetchrequests_total{topic="queue"}`:                   func(v float64) bool { return v >= 2 },
		`kafka_server_brokertopicmetrics_totalshareacknowledgementrequests_total{topic="queue"}`:         func(v float64) bool { return v >= 1 },
		`kafka_server_brokertopicmetrics_failedsharefetchrequests_total{topic="queue"}`:                  func(v float64) bool { return v == 0 },
		`kafka_server_sharegroupmetrics_recordacknowledgements_total{ackType="Accept"}`:                  func(v float64) bool { return v >= total/2 },
		`kafka_server_sharegroupmetrics_recordacknowledgements_total{ackType="Reject"}`:                  func(v float64) bool { return v == 0 },
		`kafka_server_group_coordinator_metrics_share_group_count{state="Stable"}`:                       func(v float64) bool { return v == 1 },
		`kafka_server_group_coordinator_metrics_share_group_rebalance_count`:                             func(v float64) bool { return v >= 1 },
		`kafka_server_sharepartitionmetrics_inflightmessagecount{group="q",topic="queue",partition="0"}`: func(v float64) bool { return v >= 0 && v <= total },
	}
	var text bytes.Buffer
	if err := reg.Write(&text, false); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, line := range strings.Split(text.String(), "\n") {
		if name, value, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") {
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				got[name] = v
			}
		}
	}
	for series, ok := range want {
		if v, found := got[series]; !found || !ok(v) {
			t.Errorf("%s = %v (found %v)", series, v, found)
		}
	}
}

// TestShareGroupReleaseRejectAndRestart: records one member releases go to
// the other, delivered a second time; rejected ones never come back; the
// share state survives a restart of the node's coordinators (it is read
// back from __share_group_state): accepted records are not delivered
// again.
func TestShareGroupReleaseRejectAndRestart(t *testing.T) {
	n := startShareNode(t)
	createTopicOn(t, n, "jobs", 1)
	produceStrings(t, n.addr, "jobs", 40)
	setGroupConfig(t, n.addr, "q", "share.auto.offset.reset", "earliest")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	member := func(name string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ClientID(name), kgo.ConsumeTopics("jobs"), kgo.ShareGroup("q"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	a := member("a")
	// a releases even values and rejects odd ones, of what it gets first.
	var first []*kgo.Record
	for len(first) == 0 && ctx.Err() == nil {
		first = a.PollFetches(ctx).Records()
	}
	released, rejected := map[string]bool{}, map[string]bool{}
	for _, r := range first {
		var v int
		fmt.Sscan(string(r.Value), &v)
		if v%2 == 0 {
			r.Ack(kgo.AckRelease)
			released[string(r.Value)] = true
		} else {
			r.Ack(kgo.AckReject)
			rejected[string(r.Value)] = true
		}
	}
	if err := a.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b := member("b")
	got := map[string]int32{}
	for len(got) < 40-len(rejected) && ctx.Err() == nil {
		b.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if rejected[string(r.Value)] {
				t.Errorf("rejected record %s delivered again", r.Value)
			}
			got[string(r.Value)] = r.DeliveryCount()
			r.Ack(kgo.AckAccept)
		})
	}
	if err := b.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	// Delivered at least twice (a's client may have fetched them again
	// before it closed, releasing them once more), never past the limit.
	for v := range released {
		if got[v] < 2 || got[v] > 5 {
			t.Fatalf("released record %s delivered with count %d, want 2 to 5", v, got[v])
		}
	}
	if len(got) != 40-len(rejected) {
		t.Fatalf("b got %d records, want %d", len(got), 40-len(rejected))
	}
	b.Close()
	// The state is read back when the partition is taken up again: a new
	// leader epoch (here: the share partitions forgotten, as a restart
	// would) delivers nothing already accepted or rejected.
	n.b.shareParts.mu.Lock()
	n.b.shareParts.parts = map[share.Key]*sharePart{}
	n.b.shareParts.mu.Unlock()
	produceStrings(t, n.addr, "jobs", 1) // "0" again, at offset 40
	c := member("c")
	var after []string
	for len(after) == 0 && ctx.Err() == nil {
		c.PollFetches(ctx).EachRecord(func(r *kgo.Record) { after = append(after, fmt.Sprintf("%s@%d", r.Value, r.Offset)) })
	}
	if len(after) != 1 || after[0] != "0@40" {
		t.Fatalf("after the share state was read back: %v, want only the new record 0@40", after)
	}
	// The state topic was pruned meanwhile (every 200 ms here).
	key := share.Key{Group: "q", TopicID: n.ctrl.Image().Topic("jobs").ID, Partition: 0}
	tp := replica.TopicPartition{Topic: share.StateTopic, Partition: share.PartitionFor(key, 3)}
	waitFor(t, "the share state topic pruned", func() bool {
		lo := n.b.replicas.ListOffset(tp, -1, -2, replica.ReadUncommitted, -1)
		return lo.Err == nil && lo.Offset > 0
	})
}

// shareFetchReq is a ShareFetch v2 of one partition.
func shareFetchReq(member string, epoch int32, topic [16]byte, maxWait int32, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.SetVersion(2)
	req.GroupID, req.MemberID = kmsg.StringPtr("q"), kmsg.StringPtr(member)
	req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = epoch, maxWait, 1, 1<<20, 100, 100
	req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: topic, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, AcknowledgementBatches: acks}}}}
	return req
}

func acquiredOf(resp *kmsg.ShareFetchResponse) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	var out []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.AcquiredRecords...)
		}
	}
	return out
}

// joinShareGroup has member join group, subscribed to topic, and returns
// once it is assigned a partition (the group's share state of the
// partition is initialized once a member subscribes; the member is
// assigned it afterwards).
func joinShareGroup(t *testing.T, n *testNode, group, member, topic string) {
	t.Helper()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.SetVersion(1)
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = group, member, []string{topic}
	call[*kmsg.FindCoordinatorResponse](t, n.addr, findCoordinatorReq(4, 0, group)) // creates __consumer_offsets
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp := call[*kmsg.ShareGroupHeartbeatResponse](t, n.addr, hb)
		switch resp.ErrorCode {
		case 0, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
		default:
			t.Fatalf("heartbeat: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		if resp.ErrorCode == 0 {
			hb.MemberEpoch = resp.MemberEpoch
			if resp.Assignment != nil && len(resp.Assignment.TopicPartitions) >= 1 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the member was never assigned the partition")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestShareFetchRecordLimitMode: ShareFetch v2's record_limit acquire
// mode hands out exactly MaxRecords records, splitting a log batch; the
// rest of the batch goes to the next fetch. An unknown mode is refused.
func TestShareFetchRecordLimitMode(t *testing.T) {
	n := startShareNode(t)
	createTopicOn(t, n, "limited", 1)
	produceStrings(t, n.addr, "limited", 10) // one batch of ten
	setGroupConfig(t, n.addr, "q", "share.auto.offset.reset", "earliest")
	topic := n.ctrl.Image().Topic("limited").ID
	joinShareGroup(t, n, "q", "member-a", "limited")

	req := shareFetchReq("member-a", 0, topic, 2000)
	req.MaxRecords, req.ShareAcquireMode = 3, 1
	resp := call[*kmsg.ShareFetchResponse](t, n.addr, req)
	if got := acquiredOf(resp); resp.ErrorCode != 0 || len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 2 {
		t.Fatalf("record_limit of 3 acquired %+v (error %v)", got, kerr.ErrorForCode(resp.ErrorCode))
	}
	req = shareFetchReq("member-a", 1, topic, 2000)
	req.MaxRecords, req.ShareAcquireMode = 3, 1
	if got := acquiredOf(call[*kmsg.ShareFetchResponse](t, n.addr, req)); len(got) != 1 || got[0].FirstOffset != 3 || got[0].LastOffset != 5 || got[0].DeliveryCount != 1 {
		t.Fatalf("the next record_limit fetch acquired %+v, want 3-5", got)
	}
	// batch_optimized takes the rest of the batch whatever the limit.
	req = shareFetchReq("member-a", 2, topic, 2000)
	req.MaxRecords = 1
	if got := acquiredOf(call[*kmsg.ShareFetchResponse](t, n.addr, req)); len(got) != 1 || got[0].FirstOffset != 6 || got[0].LastOffset != 9 {
		t.Fatalf("batch_optimized acquired %+v, want 6-9", got)
	}
	req = shareFetchReq("member-a", 3, topic, 100)
	req.ShareAcquireMode = 2
	if code := call[*kmsg.ShareFetchResponse](t, n.addr, req).ErrorCode; code != kerr.InvalidRequest.Code {
		t.Fatalf("acquire mode 2: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}
}

// TestShareLockExpiryRedelivers: records a member acquires and never
// acknowledges go to another member once their lock expires, delivered a
// second time; the first member's late acknowledgement is refused.
func TestShareLockExpiryRedelivers(t *testing.T) {
	n := startTestNodeWithFeatures(t, map[string]string{
		"offsets.topic.num.partitions":                 "1",
		"share.coordinator.state.topic.num.partitions": "1",
		"group.share.assignment.interval.ms":           "0",
		"group.share.min.record.lock.duration.ms":      "1000",
		"group.share.record.lock.duration.ms":          "1000",
	}, map[string]int16{"group.version": 1, "transaction.version": 2, "share.version": 1}, nil, nil)
	createTopicOn(t, n, "locks", 1)
	produceStrings(t, n.addr, "locks", 10)
	setGroupConfig(t, n.addr, "q", "share.auto.offset.reset", "earliest")
	topic := n.ctrl.Image().Topic("locks").ID

	joinShareGroup(t, n, "q", "member-a", "locks")
	a := call[*kmsg.ShareFetchResponse](t, n.addr, shareFetchReq("member-a", 0, topic, 2000))
	if got := acquiredOf(a); a.ErrorCode != 0 || len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 9 || got[0].DeliveryCount != 1 {
		t.Fatalf("a acquired %+v (error %v)", got, kerr.ErrorForCode(a.ErrorCode))
	}
	if a.AcquisitionLockTimeoutMillis != 1000 {
		t.Fatalf("lock timeout %d, want 1000", a.AcquisitionLockTimeoutMillis)
	}
	b := call[*kmsg.ShareFetchResponse](t, n.addr, shareFetchReq("member-b", 0, topic, 100))
	if got := acquiredOf(b); len(got) != 0 {
		t.Fatalf("b acquired records a holds: %+v", got)
	}
	// b's next fetch waits up to 10 s for records; a's lock expiring
	// wakes it (long before the wait ends), as Kafka completes a delayed
	// share fetch when records become acquirable again.
	start := time.Now()
	b = call[*kmsg.ShareFetchResponse](t, n.addr, shareFetchReq("member-b", 1, topic, 10000))
	if got := acquiredOf(b); len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 9 || got[0].DeliveryCount != 2 {
		t.Fatalf("after a's lock expired b acquired %+v", got)
	}
	if waited := time.Since(start); waited > 8*time.Second {
		t.Fatalf("b's fetch was answered after %s: the lock's expiry did not wake it", waited)
	}
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.SetVersion(2)
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = kmsg.StringPtr("q"), kmsg.StringPtr("member-a"), 1
	ack.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: topic, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0,
		AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 9, AcknowledgeTypes: []int8{1}}}}}}}
	if code := call[*kmsg.ShareAcknowledgeResponse](t, n.addr, ack).Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRecordState.Code {
		t.Fatalf("a's late acknowledgement: %v", kerr.ErrorForCode(code))
	}
	// Session epochs: a's session is at 2 now; a stale epoch is refused.
	if code := call[*kmsg.ShareAcknowledgeResponse](t, n.addr, ack).ErrorCode; code != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("a stale session epoch: %v", kerr.ErrorForCode(code))
	}
	ack.MemberID = kmsg.StringPtr("nobody")
	if code := call[*kmsg.ShareAcknowledgeResponse](t, n.addr, ack).ErrorCode; code != kerr.ShareSessionNotFound.Code {
		t.Fatalf("no session: %v", kerr.ErrorForCode(code))
	}
}

// TestShareGroupReadCommitted: with share.isolation.level=read_committed a
// share group gets the committed transactions' records and never an
// aborted one's.
func TestShareGroupReadCommitted(t *testing.T) {
	n := startShareNode(t)
	createTopicOn(t, n, "txns", 1)
	setGroupConfig(t, n.addr, "q", "share.auto.offset.reset", "earliest")
	setGroupConfig(t, n.addr, "q", "share.isolation.level", "read_committed")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.DefaultProduceTopic("txns"), kgo.TransactionalID("share-txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i, commit := range []bool{true, false, true, false, true} {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var rs []*kgo.Record
		for j := range 5 {
			rs = append(rs, kgo.StringRecord(fmt.Sprintf("%v-%d-%d", commit, i, j)))
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ConsumeTopics("txns"), kgo.ShareGroup("q"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]bool{}
	for len(got) < 15 && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			if !strings.HasPrefix(string(r.Value), "true-") {
				t.Errorf("an aborted transaction's record was delivered: %s", r.Value)
			}
			got[string(r.Value)] = true
		})
		pcancel()
	}
	if len(got) != 15 {
		t.Fatalf("got %d committed records, want 15: %v", len(got), got)
	}
}
