package broker

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
)

// writeTransactions appends, through the replication path (transactional
// batches from clients need the transaction coordinator): "before" (0),
// producer 42's transaction (1-2), "middle" (3), 42's abort marker (4),
// producer 43's transaction (5) and its commit (6), "after" (7); and moves
// the high watermark to the end.
func writeTransactions(t *testing.T, n *testNode, topic string) {
	t.Helper()
	l, ok := n.logs.Get(storage.TopicPartition{Topic: topic, Partition: 0})
	if !ok {
		t.Fatalf("no log of %s-0", topic)
	}
	now := time.Now().UnixMilli()
	build := func(pid int64, txn bool, values ...string) []byte {
		b := protocol.NewBatchBuilder(protocol.CodecNone)
		if pid >= 0 {
			b.SetProducer(pid, 0, 0).SetTransactional(txn)
		}
		for _, v := range values {
			b.Add(nil, []byte(v), nil, now)
		}
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, batch := range [][]byte{
		build(-1, false, "before"),
		build(42, true, "aborted-1", "aborted-2"),
		build(-1, false, "middle"),
		protocol.EndTxnMarkerBatch(42, 0, false, 0, now),
		build(43, true, "committed"),
		protocol.EndTxnMarkerBatch(43, 0, true, 0, now),
		build(-1, false, "after"),
	} {
		protocol.SetBaseOffset(batch, l.LogEndOffset())
		if _, _, err := l.Append(batch, 0, storage.AppendReplication); err != nil {
			t.Fatal(err)
		}
	}
	l.AdvanceHighWatermark(l.LogEndOffset())
}

// A read_committed fetch lists the aborted transaction that overlaps the
// data it returns, in the flexible and the older encodings; a
// read_uncommitted one sends the list as null; and a fetch past the abort
// marker lists nothing.
func TestFetchReadCommittedListsAbortedTransactions(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "txn-fetch", 1, nil)
	writeTransactions(t, n, "txn-fetch")
	c := dialRaw(t, n.addr)
	corr := int32(0)
	fetch := func(version int16, isolation int8, offset int64) kmsg.FetchResponseTopicPartition {
		t.Helper()
		corr++
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(version)
		req.ReplicaID, req.MaxBytes, req.IsolationLevel = -1, 1<<20, isolation
		req.SessionEpoch = -1 // no session
		rt := kmsg.FetchRequestTopic{Topic: "txn-fetch"}
		if version >= 13 {
			rt.TopicID = topicID(t, n, "txn-fetch")
		}
		rt.Partitions = []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: offset, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1}}
		req.Topics = []kmsg.FetchRequestTopic{rt}
		c.send(req, corr)
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(version)
		c.recv(resp)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: response %+v", version, resp)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", version, p.ErrorCode)
		}
		return p
	}
	for _, v := range []int16{4, 11, 12, 16} {
		p := fetch(v, 1, 0)
		if want := []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 42, FirstOffset: 1}}; !reflect.DeepEqual(p.AbortedTransactions, want) {
			t.Fatalf("v%d read_committed: aborted %+v, want %+v", v, p.AbortedTransactions, want)
		}
		if p.LastStableOffset != 8 || len(p.RecordBatches) == 0 {
			t.Fatalf("v%d read_committed: LSO %d, %d bytes", v, p.LastStableOffset, len(p.RecordBatches))
		}
		if p := fetch(v, 0, 0); p.AbortedTransactions != nil {
			t.Fatalf("v%d read_uncommitted: aborted %+v, want null", v, p.AbortedTransactions)
		}
		if p := fetch(v, 1, 5); p.AbortedTransactions == nil || len(p.AbortedTransactions) != 0 {
			t.Fatalf("v%d read_committed from 5: aborted %#v, want an empty list", v, p.AbortedTransactions)
		}
	}
}

// topicID is the topic's ID in the node's metadata image.
func topicID(t *testing.T, n *testNode, topic string) [16]byte {
	t.Helper()
	tp := n.b.meta.Image().Topic(topic)
	if tp == nil {
		t.Fatalf("no topic %s in the metadata image", topic)
	}
	return [16]byte(tp.ID)
}

// A franz-go consumer reading committed drops the aborted records with
// the list the fetch gives; one reading uncommitted sees them.
func TestConsumerReadCommittedDropsAbortedRecords(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "txn-consume", 1, nil)
	writeTransactions(t, n, "txn-consume")
	consume := func(isolation kgo.IsolationLevel) []string {
		t.Helper()
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(n.addr),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"txn-consume": {0: kgo.NewOffset().AtStart()}}),
			kgo.FetchIsolationLevel(isolation),
		)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var got []string
		for {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consumed %q, then: %v", got, err)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetching %s-%d: %v", topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			if len(got) > 0 && got[len(got)-1] == "after" {
				return got
			}
		}
	}
	if got, want := consume(kgo.ReadCommitted()), []string{"before", "middle", "committed", "after"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("read_committed consumed %q, want %q", got, want)
	}
	if got, want := consume(kgo.ReadUncommitted()), []string{"before", "aborted-1", "aborted-2", "middle", "committed", "after"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("read_uncommitted consumed %q, want %q", got, want)
	}
}
