package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/integration/node"
)

// The log start offset that DeleteRecords sets survives kill -9 at once
// (Gregor writes log-start-offset-checkpoint before answering; Kafka writes
// it every minute and loses it in a crash), and everything honours it: a
// fetch below it is OFFSET_OUT_OF_RANGE, ListOffsets earliest answers it,
// and a consumer with auto.offset.reset=earliest starts there.
func TestLogStartOffsetSurvivesKillAndIsHonoured(t *testing.T) {
	n := node.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "logstart"
	cl := n.Client(kgo.DefaultProduceTopic(topic))
	adm := kadm.NewClient(cl)
	created, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
	if err != nil || created.Err != nil {
		t.Fatalf("creating the topic: %v %v", err, created.Err)
	}
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: 13})
	deleted, err := adm.DeleteRecords(ctx, offsets)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := deleted.Lookup(topic, 0); d.Err != nil || d.LowWatermark != 13 {
		t.Fatalf("DeleteRecords: %+v", d)
	}
	cl.Close()
	n.Kill()
	n.Restart()
	cl = n.Client(kgo.DefaultProduceTopic(topic))
	adm = kadm.NewClient(cl)

	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := starts.Lookup(topic, 0); s.Err != nil || s.Offset != 13 {
		t.Fatalf("earliest offset after kill -9: %+v, want 13", s)
	}
	// A fetch below the log start.
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes = 100, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, created.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.LogStartOffset, rp.CurrentLeaderEpoch = 0, 5, 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	// Kafka's error answer carries no offsets (-1), as its readFromLocalLog
	// answers an exception.
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != -1 {
		t.Fatalf("fetch at 5: error %d, log start %d; want OFFSET_OUT_OF_RANGE and -1", p.ErrorCode, p.LogStartOffset)
	}
	// A consumer reset to the earliest offset starts at 13.
	c := n.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer c.Close()
	fetches := c.PollFetches(ctx)
	if err := fetches.Err(); err != nil {
		t.Fatal(err)
	}
	first := int64(-1)
	fetches.EachRecord(func(r *kgo.Record) {
		if first < 0 {
			first = r.Offset
		}
	})
	if first != 13 {
		t.Fatalf("consumer from the earliest offset starts at %d, want 13", first)
	}
}
