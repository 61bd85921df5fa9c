package txn

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/gregorbroker/gregor/protocol"
)

// The Jepsen finding KIP-890 fixes: a producer's EndTxn(commit) whose
// answer was lost is retried after the coordinator restarted, by which
// time the producer has begun its next transaction. Under Transactions V2
// (transaction.version 2, upgraded here with kafka-features' request) the
// retry carries the epoch before the first commit's bump and is fenced:
// it does not commit the next transaction, whose records stay invisible
// to read_committed once it is aborted.
func TestLateEndTxnRetryAfterCoordinatorRestart(t *testing.T) {
	n := node.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, id = "txlate", "late-retry"
	adm := kadm.NewClient(n.Client())
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	topicID := details[topic].ID
	res, err := adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 2, UpgradeType: 1})
	if err != nil || res["transaction.version"].Err != nil {
		t.Fatalf("upgrading transaction.version to 2: %v %v", err, res)
	}
	n.Stop()
	n.Restart()
	cl := n.Client()
	txnID := id
	do := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		var last error // the retriable answer retried, if any
		for {
			resp, err := cl.Request(ctx, req)
			if err != nil {
				t.Fatalf("%T: %v (retrying after %v)", req, err, last)
			}
			// Retry while the coordinator loads, until ctx ends.
			last = kerr.ErrorForCode(responseCode(resp))
			switch responseCode(resp) {
			case kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code, kerr.ConcurrentTransactions.Code:
			default:
				return resp
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis, init.ProducerID, init.ProducerEpoch = &txnID, 60000, -1, -1
	ir := do(init).(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(ir.ErrorCode))
	}
	pid, epoch := ir.ProducerID, ir.ProducerEpoch
	add := func(epoch int16) {
		t.Helper()
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.SetVersion(3)
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, pid, epoch
		req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: []int32{0}}}
		resp := do(req).(*kmsg.AddPartitionsToTxnResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("AddPartitionsToTxn at epoch %d: %v", epoch, kerr.ErrorForCode(code))
		}
	}
	endTxn := func(epoch int16, commit bool) *kmsg.EndTxnResponse {
		t.Helper()
		req := kmsg.NewPtrEndTxnRequest()
		req.SetVersion(5)
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, pid, epoch, commit
		return do(req).(*kmsg.EndTxnResponse)
	}
	produce := func(epoch int16, seq int32, value string) {
		t.Helper()
		// The record goes in as the transactional producer would write it
		// (producer id, epoch, sequence; transactional attribute), by name
		// and topic id so that any Produce version the client picks works.
		req := kmsg.NewPtrProduceRequest()
		req.TransactionID, req.Acks, req.TimeoutMillis = &txnID, -1, 10000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, TopicID: topicID, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0,
			Records: txnBatch(pid, epoch, seq, value)}}}}
		resp := do(req).(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce at epoch %d: %v", epoch, kerr.ErrorForCode(code))
		}
	}

	add(epoch)
	produce(epoch, 0, "first transaction")
	first := endTxn(epoch, true)
	if first.ErrorCode != 0 || first.ProducerEpoch != epoch+1 {
		t.Fatalf("first commit: %v epoch %d, want the epoch bumped to %d", kerr.ErrorForCode(first.ErrorCode), first.ProducerEpoch, epoch+1)
	}
	waitStable(t, adm, topic, 20*time.Second)
	n.Stop()
	n.Restart()
	cl = n.Client()
	next := first.ProducerEpoch
	add(next)
	produce(next, 0, "second transaction")
	if late := endTxn(epoch, true); late.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("the first commit's late retry: %v, want PRODUCER_FENCED", kerr.ErrorForCode(late.ErrorCode))
	}
	if ab := endTxn(next, false); ab.ErrorCode != 0 {
		t.Fatalf("aborting the second transaction: %v", kerr.ErrorForCode(ab.ErrorCode))
	}
	adm = kadm.NewClient(n.Client())
	waitStable(t, adm, topic, 20*time.Second)
	seen := readCommittedAll(t, n, topic, 1)
	if seen["first transaction"] != 1 || seen["second transaction"] != 0 {
		t.Fatalf("read_committed saw %v: want the first transaction's record once and not the second's", seen)
	}
}

// txnBatch is one transactional record batch as a producer writes it.
func txnBatch(pid int64, epoch int16, seq int32, value string) []byte {
	b := protocol.NewBatchBuilder(protocol.CodecNone).SetProducer(pid, epoch, seq).SetTransactional(true)
	b.Add(nil, []byte(value), nil, time.Now().UnixMilli())
	out, err := b.Build()
	if err != nil {
		panic(err)
	}
	return out
}

// responseCode is the first error code of the responses this test sends.
func responseCode(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.InitProducerIDResponse:
		return r.ErrorCode
	case *kmsg.EndTxnResponse:
		return r.ErrorCode
	case *kmsg.AddPartitionsToTxnResponse:
		return r.Topics[0].Partitions[0].ErrorCode
	case *kmsg.ProduceResponse:
		return r.Topics[0].Partitions[0].ErrorCode
	}
	return 0
}
