package group

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// txnCommitReq is a TxnOffsetCommit v3 of producer pid (epoch 0) for
// group's member (generation -1 and no member: a simple consumer).
func txnCommitReq(group string, pid int64, gen int32, member string, topic string, offsets map[int32]int64) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version = 3
	r.TransactionalID = "txn"
	r.Group, r.ProducerID, r.ProducerEpoch = group, pid, 0
	r.Generation, r.MemberID = gen, member
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic = topic
	for p, o := range offsets {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, o, 4, strPtr("txn-meta")
		t.Partitions = append(t.Partitions, rp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

// txnCommit commits offsets of foo in pid's transaction and fails the test
// on any error.
func (h *harness) txnCommit(group string, pid int64, offsets map[int32]int64) {
	h.t.Helper()
	resp := h.c.TxnOffsetCommit(context.Background(), txnCommitReq(group, pid, -1, "", "foo", offsets))
	for _, p := range resp.Topics[0].Partitions {
		wantCode(h.t, "txn commit", p.ErrorCode, nil)
	}
}

func (h *harness) endTxn(c *Coordinator, group string, pid int64, commit bool) {
	h.t.Helper()
	if err := c.CompleteTransaction(context.Background(), c.PartitionFor(group), pid, 0, 1, commit); err != nil {
		h.t.Fatalf("completing the transaction of %d: %v", pid, err)
	}
}

// stableFetch is an OffsetFetch v9 with require_stable.
func stableFetch(c *Coordinator, group, topic string, partitions ...int32) kmsg.OffsetFetchResponseGroup {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 9
	req.RequireStable = true
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group, rg.MemberEpoch = group, -1
	if topic != "" {
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: partitions}}
	}
	req.Groups = append(req.Groups, rg)
	return c.OffsetFetch(context.Background(), req).Groups[0]
}

// offsetsOf is what a fetch answered, partition by partition (-1 for none).
func offsetsOf(g kmsg.OffsetFetchResponseGroup) []int64 {
	var out []int64
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.Offset)
		}
	}
	return out
}

func wantOffsets(t *testing.T, what string, g kmsg.OffsetFetchResponseGroup, want ...int64) {
	t.Helper()
	got := offsetsOf(g)
	if len(got) != len(want) {
		t.Fatalf("%s: offsets %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: offsets %v, want %v", what, got, want)
		}
	}
}

// logBatches lists the headers of the batches in l.
func logBatches(t *testing.T, l *memLog) []protocol.BatchHeader {
	t.Helper()
	var out []protocol.BatchHeader
	err := l.ReadFrom(context.Background(), 0, func(b []byte) error {
		h, err := protocol.ParseBatchHeader(b)
		out = append(out, h)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTxnOffsetCommitVisibleOnceCommitted(t *testing.T) {
	h := newHarness(t, nil)
	const g, pid = "txn-commit", 4000
	h.txnCommit(g, pid, map[int32]int64{0: 10, 1: 20})

	wantOffsets(t, "pending offsets are invisible", h.fetch(h.c, g, "foo", 0, 1), -1, -1)
	wantOffsets(t, "fetch all sees no pending offset", h.fetch(h.c, g, ""))
	st := stableFetch(h.c, g, "foo", 0, 1, 2)
	wantCode(t, "stable fetch, pending partition", st.Topics[0].Partitions[0].ErrorCode, kerr.UnstableOffsetCommit)
	wantCode(t, "stable fetch, pending partition", st.Topics[0].Partitions[1].ErrorCode, kerr.UnstableOffsetCommit)
	wantCode(t, "stable fetch, other partition", st.Topics[0].Partitions[2].ErrorCode, nil)
	// The group exists as a simple group from the commit on, as in Kafka.
	if s := h.classicState(g); s != "Empty" {
		t.Fatalf("group state %s", s)
	}

	// The offsets went out as one transactional batch of the producer.
	bs := logBatches(t, h.logFor(g))
	if len(bs) != 1 || !bs[0].IsTransactional() || bs[0].IsControl() || bs[0].ProducerID != pid || bs[0].ProducerEpoch != 0 || bs[0].NumRecords != 2 {
		t.Fatalf("batches %+v", bs)
	}

	h.endTxn(h.c, g, pid, true)
	for _, c := range []*Coordinator{h.c, h.reload()} {
		f := h.fetch(c, g, "foo", 0, 1)
		wantOffsets(t, "committed", f, 10, 20)
		if p := f.Topics[0].Partitions[0]; *p.Metadata != "txn-meta" || p.LeaderEpoch != 4 {
			t.Fatalf("partition %+v", p)
		}
		st := stableFetch(c, g, "foo", 0, 1)
		wantCode(t, "stable after commit", st.Topics[0].Partitions[0].ErrorCode, nil)
		wantOffsets(t, "stable after commit", st, 10, 20)
		wantOffsets(t, "fetch all after commit", stableFetch(c, g, ""), 10, 20)
	}
	bs = logBatches(t, h.logFor(g))
	if len(bs) != 2 || !bs[1].IsControl() || bs[1].ProducerID != pid {
		t.Fatalf("the marker is not the partition's second batch: %+v", bs)
	}
}

func TestTxnOffsetCommitAborted(t *testing.T) {
	h := newHarness(t, nil)
	const g, pid = "txn-abort", 4001
	h.c.OffsetCommit(context.Background(), commitReq(g, -1, "", "foo", map[int32]int64{0: 5}, ""))
	h.txnCommit(g, pid, map[int32]int64{0: 10, 3: 30})
	wantOffsets(t, "before the marker", h.fetch(h.c, g, "foo", 0, 3), 5, -1)
	h.endTxn(h.c, g, pid, false)
	for _, c := range []*Coordinator{h.c, h.reload()} {
		wantOffsets(t, "aborted", h.fetch(c, g, "foo", 0, 3), 5, -1)
		st := stableFetch(c, g, "foo", 0, 3)
		wantCode(t, "nothing pending after the abort", st.Topics[0].Partitions[0].ErrorCode, nil)
		wantCode(t, "nothing pending after the abort", st.Topics[0].Partitions[1].ErrorCode, nil)
	}
}

// TestTxnOffsetsReplay loads a partition holding a committed, an aborted
// and an open transaction: the first is visible, the second gone, the
// third still pending, and it can be finished after the load.
func TestTxnOffsetsReplay(t *testing.T) {
	h := newHarness(t, nil)
	const g = "txn-replay"
	h.txnCommit(g, 1, map[int32]int64{0: 100})
	h.txnCommit(g, 2, map[int32]int64{1: 200})
	h.txnCommit(g, 3, map[int32]int64{2: 300})
	h.endTxn(h.c, g, 2, false)
	h.endTxn(h.c, g, 1, true)

	c := h.reload()
	wantOffsets(t, "after reload", h.fetch(c, g, "foo", 0, 1, 2), 100, -1, -1)
	st := stableFetch(c, g, "foo", 0, 1, 2)
	for i, want := range []*kerr.Error{nil, nil, kerr.UnstableOffsetCommit} {
		wantCode(t, "stable fetch after reload", st.Topics[0].Partitions[i].ErrorCode, want)
	}
	// The open transaction ends on the reloaded coordinator.
	h.endTxn(c, g, 3, true)
	wantOffsets(t, "open transaction committed after reload", h.fetch(c, g, "foo", 0, 1, 2), 100, -1, 300)
	wantOffsets(t, "and once more reloaded", h.fetch(h.reload(), g, "foo", 0, 1, 2), 100, -1, 300)
}

// TestTxnOffsetsAndPlainCommits: of a transactional and a plain commit of
// one partition, the one written later wins when the transaction commits.
func TestTxnOffsetsAndPlainCommits(t *testing.T) {
	h := newHarness(t, nil)
	const g, pid = "txn-mixed", 4002
	h.txnCommit(g, pid, map[int32]int64{0: 10, 1: 11})
	// A plain commit after the pending one: visible at once, and kept
	// when the transaction commits.
	h.c.OffsetCommit(context.Background(), commitReq(g, -1, "", "foo", map[int32]int64{0: 50}, ""))
	wantOffsets(t, "plain commit while pending", h.fetch(h.c, g, "foo", 0, 1), 50, -1)
	wantCode(t, "still unstable", stableFetch(h.c, g, "foo", 0).Topics[0].Partitions[0].ErrorCode, kerr.UnstableOffsetCommit)
	// A plain commit before a pending one is overridden by it.
	h.c.OffsetCommit(context.Background(), commitReq(g, -1, "", "foo", map[int32]int64{2: 60}, ""))
	h.txnCommit(g, pid, map[int32]int64{2: 12})
	h.endTxn(h.c, g, pid, true)
	for _, c := range []*Coordinator{h.c, h.reload()} {
		wantOffsets(t, "after the commit", h.fetch(c, g, "foo", 0, 1, 2), 50, 11, 12)
	}
}

// TestCompleteTransactionRetried: a marker for a transaction already
// ended, or one with no offsets here, is written and succeeds.
func TestCompleteTransactionRetried(t *testing.T) {
	h := newHarness(t, nil)
	const g, pid = "txn-retry", 4003
	h.txnCommit(g, pid, map[int32]int64{0: 7})
	h.endTxn(h.c, g, pid, true)
	h.c.OffsetCommit(context.Background(), commitReq(g, -1, "", "foo", map[int32]int64{0: 9}, ""))
	h.endTxn(h.c, g, pid, true)  // a retried marker changes nothing
	h.endTxn(h.c, g, 777, false) // a producer that committed no offsets here
	wantOffsets(t, "after the retries", h.fetch(h.c, g, "foo", 0), 9)
	markers := 0
	for _, b := range logBatches(t, h.logFor(g)) {
		if b.IsControl() {
			markers++
		}
	}
	if markers != 3 {
		t.Fatalf("%d markers written, want 3", markers)
	}
	wantOffsets(t, "after reload", h.fetch(h.reload(), g, "foo", 0), 9)
}

func TestCompleteTransactionErrors(t *testing.T) {
	h := newHarness(t, nil)
	const g, pid = "txn-errors", 4004
	p := h.c.PartitionFor(g)
	h.txnCommit(g, pid, map[int32]int64{0: 7})

	// A failed append leaves the transaction open, to be retried.
	h.logFor(g).setFail(kerr.NotLeaderForPartition)
	err := h.c.CompleteTransaction(context.Background(), p, pid, 0, 1, true)
	if !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("failed append: %v", err)
	}
	h.logFor(g).setFail(nil)
	wantCode(t, "still pending", stableFetch(h.c, g, "foo", 0).Topics[0].Partitions[0].ErrorCode, kerr.UnstableOffsetCommit)
	h.endTxn(h.c, g, pid, true)
	wantOffsets(t, "after the retry", h.fetch(h.c, g, "foo", 0), 7)

	h.c.Unload(p)
	if err := h.c.CompleteTransaction(context.Background(), p, pid, 0, 1, true); !errors.Is(err, kerr.NotCoordinator) {
		t.Fatalf("unloaded partition: %v", err)
	}
	h.c.Prepare(p)
	if err := h.c.CompleteTransaction(context.Background(), p, pid, 0, 1, true); !errors.Is(err, kerr.CoordinatorLoadInProgress) {
		t.Fatalf("loading partition: %v", err)
	}
}

func TestTxnOffsetCommitValidation(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.OffsetMetadataMaxBytes = 8 })
	ctx := context.Background()
	const g = "txn-classic"
	a, aJoin := h.joinNew(joinReq(g, ""))
	recv(t, aJoin)
	one := map[int32]int64{0: 1}

	tests := []struct {
		name string
		req  *kmsg.TxnOffsetCommitRequest
		want *kerr.Error
	}{
		// The group is completing its rebalance: transactional commits
		// do not care about the group's state.
		{"member while completing rebalance", txnCommitReq(g, 1, 1, a, "foo", one), nil},
		{"no member (v0-v2 carry none)", txnCommitReq(g, 1, -1, "", "foo", one), nil},
		{"unknown member", txnCommitReq(g, 1, 1, "someone", "foo", one), kerr.UnknownMemberID},
		{"wrong generation", txnCommitReq(g, 1, 3, a, "foo", one), kerr.IllegalGeneration},
		{"missing group with a generation", txnCommitReq("txn-missing", 1, 2, "m", "foo", one), kerr.IllegalGeneration},
		{"empty group id", txnCommitReq("", 1, -1, "", "foo", one), kerr.InvalidGroupID},
		{"no producer id", txnCommitReq(g, -1, 1, a, "foo", one), kerr.InvalidProducerIDMapping},
		{"unknown topic", txnCommitReq(g, 1, 1, a, "nope", one), kerr.UnknownTopicOrPartition},
		{"unknown topic of an invalid group", txnCommitReq("", 1, -1, "", "nope", one), kerr.UnknownTopicOrPartition},
		{"unknown partition", txnCommitReq(g, 1, 1, a, "foo", map[int32]int64{6: 1}), kerr.UnknownTopicOrPartition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.c.TxnOffsetCommit(ctx, tc.req)
			wantCode(t, tc.name, resp.Topics[0].Partitions[0].ErrorCode, tc.want)
		})
	}

	tooLong := txnCommitReq(g, 1, 1, a, "foo", one)
	tooLong.Topics[0].Partitions[0].Metadata = strPtr("much too long")
	tooLong.Topics = append(tooLong.Topics, txnCommitReq(g, 1, 1, a, "foo", map[int32]int64{1: 1}).Topics[0])
	resp := h.c.TxnOffsetCommit(ctx, tooLong)
	wantCode(t, "metadata too large", resp.Topics[0].Partitions[0].ErrorCode, kerr.OffsetMetadataTooLarge)
	wantCode(t, "the other partition", resp.Topics[1].Partitions[0].ErrorCode, nil)

	// Static members: another member id under the instance id is fenced.
	const sg = "txn-static"
	js := recv(t, async(func() *kmsg.JoinGroupResponse { return h.c.JoinGroup(ctx, client, staticJoin(sg, "", "i-1")) }))
	wantCode(t, "static join", js.ErrorCode, nil)
	fenced := txnCommitReq(sg, 1, js.Generation, "impostor", "foo", one)
	fenced.InstanceID = strPtr("i-1")
	wantCode(t, "fenced instance", h.c.TxnOffsetCommit(ctx, fenced).Topics[0].Partitions[0].ErrorCode, kerr.FencedInstanceID)
	own := txnCommitReq(sg, 1, js.Generation, js.MemberID, "foo", one)
	own.InstanceID = strPtr("i-1")
	wantCode(t, "static member", h.c.TxnOffsetCommit(ctx, own).Topics[0].Partitions[0].ErrorCode, nil)

	// Consumer-protocol members: a stale epoch is ILLEGAL_GENERATION.
	const cg = "txn-kip848"
	m := newKip(cg, "member-k", "foo")
	wantCode(t, "heartbeat", h.hb(m, true).ErrorCode, nil)
	wantCode(t, "stale epoch", h.c.TxnOffsetCommit(ctx, txnCommitReq(cg, 1, m.epoch+1, m.id, "foo", one)).Topics[0].Partitions[0].ErrorCode, kerr.IllegalGeneration)
	wantCode(t, "current epoch", h.c.TxnOffsetCommit(ctx, txnCommitReq(cg, 1, m.epoch, m.id, "foo", one)).Topics[0].Partitions[0].ErrorCode, nil)

	// Partitions not served here; versions 0-1 get
	// COORDINATOR_NOT_AVAILABLE for a partition still loading.
	p := h.c.PartitionFor(g)
	h.c.Unload(p)
	wantCode(t, "unloaded", h.c.TxnOffsetCommit(ctx, txnCommitReq(g, 1, -1, "", "foo", one)).Topics[0].Partitions[0].ErrorCode, kerr.NotCoordinator)
	h.c.Prepare(p)
	wantCode(t, "loading", h.c.TxnOffsetCommit(ctx, txnCommitReq(g, 1, -1, "", "foo", one)).Topics[0].Partitions[0].ErrorCode, kerr.CoordinatorLoadInProgress)
	v1 := txnCommitReq(g, 1, -1, "", "foo", one)
	v1.Version = 1
	wantCode(t, "loading, v1", h.c.TxnOffsetCommit(ctx, v1).Topics[0].Partitions[0].ErrorCode, kerr.CoordinatorNotAvailable)
}

func TestTxnOffsetCommitFailedAppend(t *testing.T) {
	h := newHarness(t, nil)
	const g = "txn-append"
	h.logFor(g).setFail(kerr.NotEnoughReplicas)
	resp := h.c.TxnOffsetCommit(context.Background(), txnCommitReq(g, 9, -1, "", "foo", map[int32]int64{0: 1}))
	wantCode(t, "failed append", resp.Topics[0].Partitions[0].ErrorCode, kerr.CoordinatorNotAvailable)
	h.logFor(g).setFail(nil)
	wantCode(t, "nothing pending", stableFetch(h.c, g, "foo", 0).Topics[0].Partitions[0].ErrorCode, nil)
}

func TestPendingOffsetsExpiryAndDeletion(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.OffsetsRetentionMinutes = 10
		c.OffsetsRetentionCheckIntervalMs = 1000
	})
	ctx := context.Background()
	const mixed, pendingOnly = "txn-expiry-mixed", "txn-expiry-pending"
	h.c.OffsetCommit(ctx, commitReq(mixed, -1, "", "foo", map[int32]int64{0: 1, 1: 1}, ""))
	h.txnCommit(mixed, 50, map[int32]int64{0: 2})
	h.txnCommit(pendingOnly, 51, map[int32]int64{0: 2})
	h.advance(11 * time.Minute)
	// The offset of a partition with a pending commit does not expire;
	// the others do; neither group goes while it has pending offsets.
	wantOffsets(t, "after retention", h.fetch(h.c, mixed, "foo", 0, 1), 1, -1)
	if s := h.classicState(pendingOnly); s != "Empty" {
		t.Fatalf("a group with pending offsets only was deleted: %s", s)
	}
	// Once the transactions end, expiry takes them.
	h.endTxn(h.c, mixed, 50, false)
	h.endTxn(h.c, pendingOnly, 51, false)
	h.advance(2 * time.Second)
	wantOffsets(t, "after the abort", h.fetch(h.c, mixed, "foo", 0), -1)
	for _, g := range []string{mixed, pendingOnly} {
		if s := h.classicState(g); s != "Dead" {
			t.Fatalf("group %s not deleted: %s", g, s)
		}
	}

	// OffsetDelete tombstones a partition that has only a pending offset,
	// and drops that offset: the transaction's commit brings nothing back.
	const del = "txn-offset-delete"
	h.txnCommit(del, 52, map[int32]int64{0: 3, 1: 4})
	od := h.c.OffsetDelete(ctx, &kmsg.OffsetDeleteRequest{Group: del, Topics: []kmsg.OffsetDeleteRequestTopic{
		{Topic: "foo", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
	}})
	wantCode(t, "offset delete", od.ErrorCode, nil)
	wantCode(t, "offset delete", od.Topics[0].Partitions[0].ErrorCode, nil)
	st := stableFetch(h.c, del, "foo", 0, 1)
	wantCode(t, "deleted partition", st.Topics[0].Partitions[0].ErrorCode, nil)
	wantCode(t, "other partition", st.Topics[0].Partitions[1].ErrorCode, kerr.UnstableOffsetCommit)
	h.endTxn(h.c, del, 52, true)
	for _, c := range []*Coordinator{h.c, h.reload()} {
		wantOffsets(t, "after offset delete and commit", h.fetch(c, del, "foo", 0, 1), -1, 4)
	}

	// DeleteGroups deletes pending offsets with the group.
	const dg = "txn-delete-group"
	h.c.OffsetCommit(ctx, commitReq(dg, -1, "", "foo", map[int32]int64{0: 1}, ""))
	h.txnCommit(dg, 53, map[int32]int64{0: 5, 2: 6})
	resp := h.c.DeleteGroups(ctx, &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{dg}})
	wantCode(t, "delete group", resp.Groups[0].ErrorCode, nil)
	tombstones := 0
	for _, r := range h.logFor(dg).records(t) {
		if k, _ := parseKey(r.key); k.typ == recOffsetCommit && k.group == dg && r.value == nil {
			tombstones++
		}
	}
	if tombstones != 2 {
		t.Fatalf("%d offset tombstones, want one per partition (2)", tombstones)
	}
	h.endTxn(h.c, dg, 53, true)
	for _, c := range []*Coordinator{h.c, h.reload()} {
		wantOffsets(t, "after delete group and commit", stableFetch(c, dg, "foo", 0, 2), -1, -1)
	}
}
