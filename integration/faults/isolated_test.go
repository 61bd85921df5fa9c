package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// TestFaultIsolatedLeaderCannotAcknowledge: a partition's leader cut off
// from the other nodes (clients still reach it) never acknowledges an
// acks=all write, however long it is asked, while the majority elects a
// new leader that does; acks=1 writes it takes meanwhile are its
// unreplicated tail. Once the cut heals it truncates that tail, follows
// the new leader and rejoins the ISR, and the partition holds every
// acknowledged write and none of the tail.
func TestFaultIsolatedLeaderCannotAcknowledge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := start(t, ctx, true)
	f := e.faults
	old, topicID := partitionZero(ctx, t, f)
	oldAddr := f.Cluster.Node(old).Addr()
	// kgo sends a ProduceRequest with its own configured acks: one
	// client each.
	directAll, err := kgo.NewClient(kgo.SeedBrokers(oldAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer directAll.Close()
	directOne, err := kgo.NewClient(kgo.SeedBrokers(oldAddr), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer directOne.Close()
	majority := majorityProducer(t, f, old, 20*time.Second)

	if err := f.Net.Isolate(ctx, old); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Net.Heal(context.Background(), old) })
	t.Logf("isolated node %d, the leader of partition 0", old)

	// For a while after the cut, the old leader is asked directly.
	var tail []string
	attempts, refused, oneRefused := 0, map[string]int{}, map[string]int{}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		attempts++
		v := fmt.Sprintf("isolated-all-%d", attempts)
		code, err := produceTo(ctx, directAll, f.Topic, topicID, v)
		switch {
		case err != nil:
			refused[err.Error()]++
		case code == 0:
			t.Fatalf("the isolated old leader acknowledged acks=all write %s", v)
		case code == kerr.UnknownTopicID.Code || code == kerr.UnknownTopicOrPartition.Code:
			t.Fatalf("the test's produce names no known topic: %v", kerr.ErrorForCode(code))
		default:
			refused[kerr.ErrorForCode(code).Error()]++
		}
		tv := fmt.Sprintf("isolated-one-%d", attempts)
		code, err = produceTo(ctx, directOne, f.Topic, topicID, tv)
		switch {
		case err == nil && code == 0:
			tail = append(tail, tv)
		case err != nil:
			oneRefused[err.Error()]++
		default:
			oneRefused[kerr.ErrorForCode(code).Error()]++
		}
	}
	t.Logf("%d acks=all writes to the isolated leader, none acknowledged (answers: %v); %d acks=1 writes taken (refused: %v)", attempts, refused, len(tail), oneRefused)

	// The majority goes on with a new leader.
	var acked []string
	for i := range 20 {
		v := fmt.Sprintf("majority-%d", i)
		if err := majority.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("acks=all write to the majority: %v", err)
		}
		acked = append(acked, v)
	}

	if err := f.Net.Heal(ctx, old); err != nil {
		t.Fatal(err)
	}
	// Every broker, the old leader included, must see the same leader and
	// a full ISR: until the old leader hears of the new term, its own
	// metadata still names itself.
	leader := waitAgreedInSync(ctx, t, f)
	t.Logf("healed: partition 0 led by %d with a full ISR, as every broker sees it", leader)
	recs, err := readAll(ctx, e.log, strings.Split(f.Cluster.Bootstrap(), ","), f.Admin, f.Topic, false)
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, r := range recs {
		if r.Partition == 0 {
			values = append(values, r.Value)
		}
	}
	have := map[string]bool{}
	for _, v := range values {
		have[v] = true
	}
	for _, v := range acked {
		if !have[v] {
			t.Errorf("acknowledged %s missing after the heal", v)
		}
	}
	for _, v := range values {
		if strings.HasPrefix(v, "isolated-") {
			t.Errorf("%s, written only to the isolated old leader, survived the heal", v)
		}
	}
	t.Logf("partition 0 holds %d records: all %d acknowledged, none of the %d-record tail", len(values), len(acked), len(tail))
}

// partitionZero is the leader of partition 0 of f.Topic and the topic's
// id.
func partitionZero(ctx context.Context, t *testing.T, f *Faults) (int, [16]byte) {
	t.Helper()
	ps, err := Partitions(ctx, f.Admin, f.Topic)
	if err != nil {
		t.Fatal(err)
	}
	md, err := f.Admin.Metadata(ctx, f.Topic)
	if err != nil {
		t.Fatal(err)
	}
	return int(ps[0].Leader), md.Topics[f.Topic].ID
}

// majorityProducer is an acks=all producer to f.Topic, records to the
// partition they name, that knows every broker but node old; it is closed
// when the test ends.
func majorityProducer(t *testing.T, f *Faults, old int, deliveryTimeout time.Duration) *kgo.Client {
	t.Helper()
	var others []string
	for _, n := range f.Cluster.Brokers() {
		if n.ID != old {
			others = append(others, n.Addr())
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(others...), kgo.DefaultProduceTopic(f.Topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(deliveryTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceTo sends one record to partition 0 of topic on the client's seed
// broker alone, with the client's acks, and returns the partition's error
// code.
func produceTo(ctx context.Context, cl *kgo.Client, topic string, topicID [16]byte, value string) (int16, error) {
	bb := protocol.NewBatchBuilder(protocol.CodecNone)
	bb.Add(nil, []byte(value), nil, time.Now().UnixMilli())
	batch, err := bb.Build()
	if err != nil {
		return -1, err
	}
	req := kmsg.NewPtrProduceRequest()
	req.TimeoutMillis = 3000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID // by name up to v12, by id from v13
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 6*time.Second)
	defer cancel()
	kresp, err := cl.SeedBrokers()[0].Request(rctx, req)
	if err != nil {
		return -1, err
	}
	resp := kresp.(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}

// waitAgreedInSync waits until each broker, asked on its own, reports
// every partition of the topic with a full ISR and the same leaders as
// the others, and returns partition 0's leader.
func waitAgreedInSync(ctx context.Context, t *testing.T, f *Faults) int32 {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var first []Partition
		agreed := true
		for _, n := range f.Cluster.Brokers() {
			cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(f.Topic)
			req.Topics = append(req.Topics, rt)
			mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			kresp, err := cl.SeedBrokers()[0].Request(mctx, req)
			cancel()
			cl.Close()
			if err != nil {
				agreed = false
				break
			}
			resp := kresp.(*kmsg.MetadataResponse)
			if len(resp.Topics) != 1 {
				agreed = false
				break
			}
			var ps []Partition
			for _, p := range resp.Topics[0].Partitions {
				if p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
					agreed = false
				}
				ps = append(ps, Partition{ID: p.Partition, Leader: p.Leader})
			}
			if first == nil {
				first = ps
			} else if fmt.Sprint(first) != fmt.Sprint(ps) {
				agreed = false
			}
		}
		if agreed && len(first) > 0 {
			for _, p := range first {
				if p.ID == 0 {
					return p.Leader
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the brokers did not agree on a fully in-sync topic within 2 minutes of the heal")
		}
		time.Sleep(250 * time.Millisecond)
	}
}
