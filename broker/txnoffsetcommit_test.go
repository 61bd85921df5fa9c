package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/gregorbroker/gregor/coordinator/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func txnOffsetCommitReq(group string, tx openTxn, topic string, offsets ...int64) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = tx.id, group, tx.pid, tx.epoch
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = topic
	for p, o := range offsets {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = int32(p), o
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	return req
}

// openTxn is a transaction the coordinator began, with the group's
// __consumer_offsets partition added (AddOffsetsToTxn), so that its
// TxnOffsetCommit passes verification.
type openTxn struct {
	id    string
	pid   int64
	epoch int16
}

func beginOffsetsTxn(t *testing.T, n *testNode, id, groupID string) openTxn {
	t.Helper()
	c := dialRaw(t, n.addr)
	corr := int32(0)
	findTxnCoordinator(t, c, &corr, id)
	ctx := context.Background()
	pid, epoch, code := n.b.txns.coord.InitProducerID(ctx, id, 60000, -1, -1)
	if code != 0 {
		t.Fatalf("InitProducerId %s: %v", id, kerr.ErrorForCode(code))
	}
	tp := txn.TopicPartition{Topic: group.OffsetsTopic, Partition: n.b.groups.coord.PartitionFor(groupID)}
	if code := n.b.txns.coord.AddPartitions(ctx, id, pid, epoch, []txn.TopicPartition{tp}); code != 0 {
		t.Fatalf("AddOffsetsToTxn %s: %v", id, kerr.ErrorForCode(code))
	}
	return openTxn{id: id, pid: pid, epoch: epoch}
}

// fetchOffsets asks OffsetFetch v7 for partitions 0..n-1 of topic and
// returns each partition's offset and error code.
func fetchOffsets(c *groupConn, group, topic string, n int32, requireStable bool) (offsets []int64, codes []int16) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group, req.RequireStable = 7, group, requireStable
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic = topic
	for p := range n {
		ft.Partitions = append(ft.Partitions, p)
	}
	req.Topics = append(req.Topics, ft)
	resp := c.roundTrip(req).(*kmsg.OffsetFetchResponse)
	for _, p := range resp.Topics[0].Partitions {
		offsets, codes = append(offsets, p.Offset), append(codes, p.ErrorCode)
	}
	return offsets, codes
}

// stableOffset asks ListOffsets for the last stable offset (latest, with
// read_committed) and the log end offset of a __consumer_offsets
// partition.
func stableOffset(c *groupConn, partition int32) (lso, end int64) {
	for i, isolation := range []int8{1, 0} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID, req.IsolationLevel = 7, -1, isolation
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = group.OffsetsTopic
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = partition, -1
		lt.Partitions = append(lt.Partitions, lp)
		req.Topics = append(req.Topics, lt)
		resp := c.roundTrip(req).(*kmsg.ListOffsetsResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			c.t.Fatalf("ListOffsets of %s-%d: %v", group.OffsetsTopic, partition, kerr.ErrorForCode(p.ErrorCode))
		}
		if i == 0 {
			lso = p.Offset
		} else {
			end = p.Offset
		}
	}
	return lso, end
}

// TestTxnOffsetCommitOverTheWire commits offsets in a transaction, sees
// them pending (UNSTABLE_OFFSET_COMMIT with require_stable, the last
// stable offset of __consumer_offsets held back), commits the transaction
// through the marker path and sees them; then aborts a second one.
func TestTxnOffsetCommitOverTheWire(t *testing.T) {
	n := startGroupTestNode(t, 1)
	const g, topic = "txn-wire-group", "txn-wire-topic"
	createTopic(t, n, topic, 2, nil)
	c := n.dial(t)
	waitGroupCoordinator(t, n, c, g)
	partition := n.b.groups.coord.PartitionFor(g)
	ctx := context.Background()
	t1, t2, t3 := beginOffsetsTxn(t, n, "txn-wire-1", g), beginOffsetsTxn(t, n, "txn-wire-2", g), beginOffsetsTxn(t, n, "txn-wire-3", g)

	resp := c.roundTrip(txnOffsetCommitReq(g, t1, topic, 42, 43)).(*kmsg.TxnOffsetCommitResponse)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("TxnOffsetCommit partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	if offsets, codes := fetchOffsets(c, g, topic, 2, false); offsets[0] != -1 || offsets[1] != -1 || codes[0] != 0 {
		t.Fatalf("pending offsets visible: %v %v", offsets, codes)
	}
	if _, codes := fetchOffsets(c, g, topic, 2, true); codes[0] != kerr.UnstableOffsetCommit.Code || codes[1] != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require_stable: codes %v", codes)
	}
	if lso, end := stableOffset(c, partition); lso >= end {
		t.Fatalf("the open transaction does not hold the last stable offset back: lso %d, end %d", lso, end)
	}

	if err := n.b.completeGroupTransaction(ctx, partition, t1.pid, t1.epoch, 0, true); err != nil {
		t.Fatalf("committing: %v", err)
	}
	if offsets, codes := fetchOffsets(c, g, topic, 2, true); offsets[0] != 42 || offsets[1] != 43 || codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("after the commit: %v %v", offsets, codes)
	}
	if lso, end := stableOffset(c, partition); lso != end {
		t.Fatalf("the marker did not end the transaction in the log: lso %d, end %d", lso, end)
	}
	// A retried marker is written and answered like the first.
	if err := n.b.completeGroupTransaction(ctx, partition, t1.pid, t1.epoch, 0, true); err != nil {
		t.Fatalf("retried marker: %v", err)
	}

	resp = c.roundTrip(txnOffsetCommitReq(g, t2, topic, 100)).(*kmsg.TxnOffsetCommitResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("second TxnOffsetCommit: %v", kerr.ErrorForCode(code))
	}
	if err := n.b.completeGroupTransaction(ctx, partition, t2.pid, t2.epoch, 0, false); err != nil {
		t.Fatalf("aborting: %v", err)
	}
	if offsets, codes := fetchOffsets(c, g, topic, 2, true); offsets[0] != 42 || codes[0] != 0 {
		t.Fatalf("after the abort: %v %v", offsets, codes)
	}

	// Unknown topics, and partitions this node does not coordinate.
	resp = c.roundTrip(txnOffsetCommitReq(g, t3, "no-such-topic", 1)).(*kmsg.TxnOffsetCommitResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", kerr.ErrorForCode(code))
	}
	if err := n.b.completeGroupTransaction(ctx, 99, t1.pid, t1.epoch, 0, true); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("a partition not loaded here: %v", err)
	}
}

// KIP-890 part 1 for offsets: a TxnOffsetCommit whose transaction never
// added the group's partition (no AddOffsetsToTxn) is refused, and v5
// (Transactions V2) adds the partition itself.
func TestTxnOffsetCommitVerified(t *testing.T) {
	n := startGroupTestNode(t, 1)
	const g, topic = "txn-verify-group", "txn-verify-topic"
	createTopic(t, n, topic, 1, nil)
	c := n.dial(t)
	waitGroupCoordinator(t, n, c, g)
	raw := dialRaw(t, n.addr)
	corr := int32(0)
	findTxnCoordinator(t, raw, &corr, "txn-verify")
	pid, epoch, code := n.b.txns.coord.InitProducerID(context.Background(), "txn-verify", 60000, -1, -1)
	if code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	tx := openTxn{id: "txn-verify", pid: pid, epoch: epoch}
	resp := c.roundTrip(txnOffsetCommitReq(g, tx, topic, 5)).(*kmsg.TxnOffsetCommitResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTxnState.Code {
		t.Fatalf("TxnOffsetCommit v3 outside the transaction: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	v5 := txnOffsetCommitReq(g, tx, topic, 5)
	v5.Version = 5
	resp = c.roundTrip(v5).(*kmsg.TxnOffsetCommitResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("TxnOffsetCommit v5: %v", kerr.ErrorForCode(code))
	}
	d, _ := n.b.txns.coord.Describe("txn-verify")
	if d.State != "Ongoing" || len(d.Partitions) != 1 || d.Partitions[0].Topic != group.OffsetsTopic {
		t.Fatalf("after TxnOffsetCommit v5: %+v, want the offsets partition in the transaction", d)
	}
}
