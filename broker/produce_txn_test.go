package broker

import (
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A transactional batch that no transaction covers is refused with
// INVALID_TXN_STATE, as Kafka's log refuses it, and leaves nothing behind:
// no records, no open transaction in the producer state, and the producer
// can go on writing idempotent batches (DESIGN.md §10).
func TestTransactionalBatchWithoutTransactionRefused(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "txn-refused", 1, nil)
	now := time.Now().UnixMilli()
	txn := protocol.NewBatchBuilder(protocol.CodecNone).SetProducer(42, 0, 0).SetTransactional(true)
	txn.Add([]byte("k"), []byte("in a transaction nobody began"), nil, now)
	batch, err := txn.Build()
	if err != nil {
		t.Fatal(err)
	}
	if code := produceRaw(t, n, "txn-refused", 0, batch); code != kerr.InvalidTxnState.Code {
		t.Fatalf("transactional batch without a transaction: want INVALID_TXN_STATE (%d), got %d", kerr.InvalidTxnState.Code, code)
	}
	plain := protocol.NewBatchBuilder(protocol.CodecNone).SetProducer(42, 0, 0)
	plain.Add([]byte("k"), []byte("idempotent"), nil, now)
	batch, err = plain.Build()
	if err != nil {
		t.Fatal(err)
	}
	if code := produceRaw(t, n, "txn-refused", 0, batch); code != 0 {
		t.Fatalf("idempotent batch after the refused one: error %d", code)
	}

	c := dialRaw(t, n.addr)
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.SetVersion(7)
	lo.ReplicaID, lo.IsolationLevel = -1, 1
	lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "txn-refused", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: -1, Timestamp: -1}}}}
	c.send(lo, 1)
	loResp := kmsg.NewPtrListOffsetsResponse()
	loResp.SetVersion(7)
	c.recv(loResp)
	if p := loResp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 1 {
		t.Fatalf("read_committed latest offset: error %d offset %d, want offset 1 (only the idempotent record, nothing pinned)", p.ErrorCode, p.Offset)
	}

	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "txn-refused", Partitions: []int32{0}}}
	c.send(dp, 2)
	dpResp := kmsg.NewPtrDescribeProducersResponse()
	c.recv(dpResp)
	p := dpResp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.ActiveProducers) != 1 {
		t.Fatalf("DescribeProducers: error %d, %d producers", p.ErrorCode, len(p.ActiveProducers))
	}
	if ap := p.ActiveProducers[0]; ap.ProducerID != 42 || ap.CurrentTxnStartOffset != -1 || ap.LastSequence != 0 {
		t.Fatalf("producer 42: %+v, want no open transaction and last sequence 0", ap)
	}
}
