package controller

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
)

func (q *isrCluster) reassign(t *testing.T, version int16, allowRF bool, replicas []int32) kmsg.AlterPartitionAssignmentsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.Version = version
	req.AllowReplicationFactorChange = allowRF
	req.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: "t", Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0, Replicas: replicas}}}}
	resp := q.c.AlterPartitionReassignments(ctxT(t), req)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.AllowReplicationFactorChange != (version < 1 || allowRF) {
		t.Fatalf("response %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

func (q *isrCluster) listReassignments(t *testing.T, topics []kmsg.ListPartitionReassignmentsRequestTopic) []kmsg.ListPartitionReassignmentsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.Topics = topics
	resp := q.c.ListPartitionReassignments(ctxT(t), req)
	if resp.ErrorCode != 0 {
		t.Fatalf("list: %d", resp.ErrorCode)
	}
	return resp.Topics
}

// spareBroker is the registered broker that holds no replica of t-0.
func (q *isrCluster) spareBroker() int32 {
	p := q.partition()
	for id := int32(1); id <= 4; id++ {
		if !containsInt32(p.Replicas, id) {
			return id
		}
	}
	return -1
}

// startMoveOffTheLeader starts, on four brokers, a reassignment of t-0
// that replaces its leader with the spare broker (the last target
// replica); it returns the partition as it was before and the target.
func startMoveOffTheLeader(t *testing.T) (*isrCluster, metadata.Partition, []int32) {
	t.Helper()
	q := startISRCluster(t, 4)
	before := q.partition()
	target := append(withoutAll(before.Replicas, []int32{before.Leader}), q.spareBroker())
	if rp := q.reassign(t, 1, true, target); rp.ErrorCode != 0 {
		t.Fatalf("reassign: %d %v", rp.ErrorCode, rp.ErrorMessage)
	}
	return q, before, target
}

// TestReassignmentMovesOffTheLeader: the target replaces the leader with a
// new broker; the union is the replicas until the new broker joins the
// ISR, and the AlterPartition that brings it in completes the move and
// elects a leader from the target set.
func TestReassignmentMovesOffTheLeader(t *testing.T) {
	q, before, target := startMoveOffTheLeader(t)
	leader, spare := before.Leader, target[len(target)-1]
	p := q.partition()
	if !slices.Equal(p.Replicas, append(slices.Clone(target), leader)) || !slices.Equal(p.AddingReplicas, []int32{spare}) ||
		!slices.Equal(p.RemovingReplicas, []int32{leader}) || !slices.Equal(p.ISR, before.ISR) || p.Leader != leader ||
		p.LeaderEpoch != before.LeaderEpoch || p.PartitionEpoch != before.PartitionEpoch+1 {
		t.Fatalf("during the move: %+v (before %+v)", p, before)
	}
	listed := q.listReassignments(t, nil)
	if len(listed) != 1 || listed[0].Topic != "t" || len(listed[0].Partitions) != 1 ||
		!slices.Equal(listed[0].Partitions[0].Replicas, p.Replicas) || !slices.Equal(listed[0].Partitions[0].AddingReplicas, []int32{spare}) ||
		!slices.Equal(listed[0].Partitions[0].RemovingReplicas, []int32{leader}) {
		t.Fatalf("listed %+v", listed)
	}
	named := q.listReassignments(t, []kmsg.ListPartitionReassignmentsRequestTopic{{Topic: "t", Partitions: []int32{0, 7}}, {Topic: "nope", Partitions: []int32{0}}})
	if len(named) != 1 || len(named[0].Partitions) != 1 {
		t.Fatalf("listed by name %+v", named)
	}

	// The leader adds the new replica to the ISR: the move completes, the
	// old leader leaves, and it is told NEW_LEADER_ELECTED.
	rp := onlyPartition(t, q.c.AlterPartition(ctxT(t), q.alterISR(append(slices.Clone(before.ISR), spare)...)))
	if rp.ErrorCode != kerr.NewLeaderElected.Code {
		t.Fatalf("completing AlterPartition: %+v", rp)
	}
	p = q.partition()
	if !slices.Equal(p.Replicas, target) || p.Reassigning() || containsInt32(p.ISR, leader) || !containsAll(p.ISR, target) ||
		p.Leader != target[0] || p.LeaderEpoch != before.LeaderEpoch+1 {
		t.Fatalf("after the move: %+v", p)
	}
	if listed := q.listReassignments(t, nil); len(listed) != 0 {
		t.Fatalf("still listed: %+v", listed)
	}
	// Nothing left to cancel.
	if rp := q.reassign(t, 0, true, nil); rp.ErrorCode != kerr.NoReassignmentInProgress.Code {
		t.Fatalf("cancel with none in progress: %d", rp.ErrorCode)
	}
}

// TestReassignmentReorderCompletesAtOnce: a target that only reorders
// the replicas needs no catching up.
func TestReassignmentReorderCompletesAtOnce(t *testing.T) {
	q := startISRCluster(t, 4)
	before := q.partition()
	target := slices.Clone(before.Replicas)
	slices.Reverse(target)
	if rp := q.reassign(t, 0, true, target); rp.ErrorCode != 0 {
		t.Fatalf("reorder: %d", rp.ErrorCode)
	}
	if p := q.partition(); !slices.Equal(p.Replicas, target) || p.Reassigning() || p.Leader != before.Leader {
		t.Fatalf("after the reorder: %+v", p)
	}
	// The same target again writes nothing.
	offset := q.c.Image().Offset
	if rp := q.reassign(t, 0, true, target); rp.ErrorCode != 0 || q.c.Image().Offset != offset {
		t.Fatalf("same target: %d, offset %d -> %d", rp.ErrorCode, offset, q.c.Image().Offset)
	}
}

// TestReassignmentCancel: null replicas revert to the original replicas,
// and the adding replicas leave the ISR too.
func TestReassignmentCancel(t *testing.T) {
	q := startISRCluster(t, 4)
	before := q.partition()
	spare := q.spareBroker()
	if rp := q.reassign(t, 1, true, append(slices.Clone(before.Replicas), spare)); rp.ErrorCode != 0 {
		t.Fatalf("reassign: %d", rp.ErrorCode)
	}
	// The new replica joins the ISR while the others drop out: not every
	// target replica is in it, so the move goes on.
	if rp := onlyPartition(t, q.c.AlterPartition(ctxT(t), q.alterISR(before.Leader, spare))); rp.ErrorCode != 0 {
		t.Fatalf("ISR change: %d", rp.ErrorCode)
	}
	if p := q.partition(); !p.Reassigning() || !slices.Equal(p.ISR, []int32{before.Leader, spare}) {
		t.Fatalf("during the move: %+v", p)
	}
	if rp := q.reassign(t, 1, true, nil); rp.ErrorCode != 0 {
		t.Fatalf("cancel: %d %v", rp.ErrorCode, rp.ErrorMessage)
	}
	p := q.partition()
	// The adding replica leaves, so the leader epoch moves.
	if !slices.Equal(p.Replicas, before.Replicas) || p.Reassigning() || !slices.Equal(p.ISR, []int32{before.Leader}) || p.Leader != before.Leader ||
		p.LeaderEpoch != before.LeaderEpoch+1 {
		t.Fatalf("after cancelling: %+v (before %+v)", p, before)
	}
	if rp := q.reassign(t, 1, true, nil); rp.ErrorCode != kerr.NoReassignmentInProgress.Code {
		t.Fatalf("second cancel: %d", rp.ErrorCode)
	}
}

// TestReassignmentCancelNeedsUncleanElection: when only adding replicas
// are in the ISR, cancelling is an unclean election, refused unless the
// topic allows one.
func TestReassignmentCancelNeedsUncleanElection(t *testing.T) {
	q := startISRCluster(t, 4)
	id := q.c.Image().Topic("t").ID
	// Replicas 1 (original) and 4 (adding); only 4 is in the ISR.
	if _, err := q.c.submit(ctxT(t), func(img *metadata.Image, _ int64) ([]metadata.Record, any) {
		return []metadata.Record{&metadata.PartitionChangeRecord{TopicID: id, Leader: 4, Replicas: []int32{4, 1}, ISR: []int32{4}, AddingReplicas: []int32{4}, RemovingReplicas: []int32{}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if rp := q.reassign(t, 0, true, nil); rp.ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("unclean cancel without permission: %d", rp.ErrorCode)
	}
	if _, err := q.c.submit(ctxT(t), func(img *metadata.Image, _ int64) ([]metadata.Record, any) {
		return []metadata.Record{&metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: "t", Name: uncleanLeaderElectionConfig, Value: strPtr("true")}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if rp := q.reassign(t, 0, true, nil); rp.ErrorCode != 0 {
		t.Fatalf("unclean cancel allowed by the topic: %d", rp.ErrorCode)
	}
	if p := q.partition(); !slices.Equal(p.Replicas, []int32{1}) || !slices.Equal(p.ISR, []int32{1}) || p.Leader != 1 || p.Reassigning() {
		t.Fatalf("after the unclean cancel: %+v", p)
	}
}

func TestReassignmentRefusals(t *testing.T) {
	q := startISRCluster(t, 4)
	p := q.partition()
	spare := q.spareBroker()
	for _, tc := range []struct {
		name     string
		version  int16
		allowRF  bool
		replicas []int32
		code     int16
		msg      string
	}{
		{"empty", 0, true, []int32{}, kerr.InvalidReplicaAssignment.Code, "The manual partition assignment includes an empty replica list."},
		{"duplicate", 0, true, []int32{1, 1}, kerr.InvalidReplicaAssignment.Code, "The manual partition assignment includes the broker 1 more than once."},
		{"unregistered", 0, true, []int32{1, 9}, kerr.InvalidReplicaAssignment.Code, "The manual partition assignment includes broker 9, but no such broker is registered."},
		{"smaller without permission", 1, false, p.Replicas[:2], kerr.InvalidReplicationFactor.Code, "The replication factor is changed from 3 to 2"},
		{"larger without permission", 1, false, append(slices.Clone(p.Replicas), spare), kerr.InvalidReplicationFactor.Code, "The replication factor is changed from 3 to 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rp := q.reassign(t, tc.version, tc.allowRF, tc.replicas)
			if rp.ErrorCode != tc.code || rp.ErrorMessage == nil || *rp.ErrorMessage != tc.msg {
				t.Fatalf("error %d %v, want %d %q", rp.ErrorCode, rp.ErrorMessage, tc.code, tc.msg)
			}
		})
	}
	// Unknown topic and partition.
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{
		{Topic: "nope", Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0, Replicas: []int32{1}}}},
		{Topic: "t", Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 3, Replicas: []int32{1}}}},
	}
	resp := q.c.AlterPartitionReassignments(ctxT(t), req)
	for _, rt := range resp.Topics {
		if rt.Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("%s: %d", rt.Topic, rt.Partitions[0].ErrorCode)
		}
	}
	if got := q.partition(); got.PartitionEpoch != p.PartitionEpoch {
		t.Fatalf("refusals changed the partition: %+v", got)
	}
	// With permission, and a move in progress, the factor is that of
	// the replica set the partition is headed for.
	if rp := q.reassign(t, 1, true, append(p.Replicas[1:], spare)); rp.ErrorCode != 0 {
		t.Fatalf("move: %d", rp.ErrorCode)
	}
	if rp := q.reassign(t, 1, false, []int32{spare, p.Replicas[1], p.Replicas[2]}); rp.ErrorCode != 0 {
		t.Fatalf("same factor during a move: %d %v", rp.ErrorCode, rp.ErrorMessage)
	}
}
