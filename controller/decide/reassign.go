package decide

// AlterPartitionReassignments (key 45) v0-1 and ListPartitionReassignments
// (key 46) v0: partition reassignment (KIP-455), decided as Kafka's
// ReplicationControlManager does.
//
// A reassignment to target replicas T of a partition whose replicas are R
// writes one PartitionChangeRecord: replicas T followed by the removing
// replicas R−T (ascending), adding replicas T−R, removing replicas R−T.
// The new replicas catch up as followers; the leader's AlterPartition that
// brings every target replica into the ISR completes the move: the
// removing replicas leave the replicas and the ISR, and if the leader was
// one of them a leader is elected from the target set (and the leader
// that asked is answered NEW_LEADER_ELECTED). A target that only reorders
// the replicas, or whose replicas are all in the ISR already, completes at
// once. Replicas that leave always move the leader epoch.
//
// Null replicas cancel the reassignment in progress
// (NO_REASSIGNMENT_IN_PROGRESS without one): the replicas go back to the
// original ones (the adding replicas leave), and so does the ISR; if that
// would leave no ISR member, the first original replica becomes the ISR,
// which is an unclean election and is refused with
// INVALID_REPLICA_ASSIGNMENT unless the topic's
// unclean.leader.election.enable is true.
//
// A target must be non-empty, of registered brokers, each once
// (INVALID_REPLICA_ASSIGNMENT); unknown topics and partitions are
// UNKNOWN_TOPIC_OR_PARTITION. v1's AllowReplicationFactorChange=false
// (KIP-860) refuses a target whose size differs from the partition's
// replication factor (the size of the replica set it is headed for, during
// a reassignment) with INVALID_REPLICATION_FACTOR; the answer echoes the
// flag. All partitions' changes commit together or none does; when they
// are not committed (NOT_CONTROLLER, REQUEST_TIMED_OUT), the request and
// every partition are answered with that error, as in Kafka.
//
// ListPartitionReassignments lists the partitions with a reassignment in
// progress (replicas, adding, removing): all of them for null topics
// (topics in name order), else those of the named partitions; unknown
// names are left out, as in Kafka.
//
// Deviations: an operation that would write more than 10000 records is
// refused as a whole (POLICY_VIOLATION on every partition that would have
// succeeded), as CreatePartitions is. The throttles
// kafka-reassign-partitions sets are enforced by the brokers
// (replica/throttle.go).

import (
	"context"
	"maps"
	"slices"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartitionReassignments decides an AlterPartitionReassignments
// request.
func (e *Env) AlterPartitionReassignments(_ context.Context, img *metadata.Image, _ int64, req *kmsg.AlterPartitionAssignmentsRequest) ([]metadata.Record, *kmsg.AlterPartitionAssignmentsResponse) {
	resp := reassignmentsResponse(req)
	var recs []metadata.Record
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rec, err := e.reassignPartition(img, t.Topic, p, resp.AllowReplicationFactorChange)
			if rec != nil {
				recs = append(recs, rec)
			}
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = err.Code()
			rp.ErrorMessage = err.Message()
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(recs) > maxRecordsPerOp {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if p := &resp.Topics[i].Partitions[j]; p.ErrorCode == 0 {
					p.ErrorCode, p.ErrorMessage = kerr.PolicyViolation.Code, strPtr(excessivelyLargeOperation)
				}
			}
		}
		return nil, resp
	}
	return recs, resp
}

// AlterPartitionReassignmentsFailed answers the request, and every
// partition it names, with e (Kafka's
// AlterPartitionReassignmentsRequest.getErrorResponse).
func AlterPartitionReassignmentsFailed(req *kmsg.AlterPartitionAssignmentsRequest, e *Error) *kmsg.AlterPartitionAssignmentsResponse {
	resp := reassignmentsResponse(req)
	resp.ErrorCode, resp.ErrorMessage = e.Code(), e.Message()
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode, rp.ErrorMessage = e.Code(), e.Message()
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// reassignmentsResponse is the empty response, echoing whether the
// replication factor may change (KIP-860: always before v1).
func reassignmentsResponse(req *kmsg.AlterPartitionAssignmentsRequest) *kmsg.AlterPartitionAssignmentsResponse {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.Version < 1 || req.AllowReplicationFactorChange
	return resp
}

// reassignPartition decides one partition's reassignment: its record (nil
// when nothing changes) or why it is refused.
func (e *Env) reassignPartition(img *metadata.Image, topic string, p kmsg.AlterPartitionAssignmentsRequestTopicPartition, allowRFChange bool) (*metadata.PartitionChangeRecord, *Error) {
	t := img.Topic(topic)
	if t == nil {
		return nil, NewError(kerr.UnknownTopicOrPartition, "Unable to find a topic named %s.", topic)
	}
	if p.Partition < 0 || int(p.Partition) >= t.Partitions.Len() {
		return nil, NewError(kerr.UnknownTopicOrPartition, "Unable to find partition %s:%d.", topic, p.Partition)
	}
	if p.Replicas == nil {
		return e.cancelReassignment(img, t, p.Partition)
	}
	cur := *t.Partitions.At(int(p.Partition))
	if err := validateManualAssignment(img, p.Replicas, -1); err != nil {
		return nil, err
	}
	if !allowRFChange {
		// The replica set the partition is headed for (the adding
		// replicas are among the replicas already).
		rf := len(withoutAll(cur.Replicas, cur.RemovingReplicas))
		if rf != len(p.Replicas) {
			return nil, NewError(kerr.InvalidReplicationFactor, "The replication factor is changed from %d to %d", rf, len(p.Replicas))
		}
	}
	removing := slices.Sorted(maps.Keys(setOf(withoutAll(cur.Replicas, p.Replicas))))
	adding := slices.Sorted(maps.Keys(setOf(withoutAll(p.Replicas, cur.Replicas))))
	pc := e.newPartitionChange(img, t, p.Partition)
	// Starting or changing a reassignment never elects uncleanly (Kafka's
	// changePartitionReassignment).
	pc.election = electOnline
	pc.replicas = append(slices.Clone(p.Replicas), removing...)
	// As in Kafka, a target that removes or adds nothing keeps the
	// removing or adding replicas of the reassignment it replaces.
	if len(removing) > 0 {
		pc.removing = removing
	}
	if len(adding) > 0 {
		pc.adding = adding
	}
	return pc.build(), nil
}

// cancelReassignment reverts the reassignment in progress.
func (e *Env) cancelReassignment(img *metadata.Image, t *metadata.Topic, id int32) (*metadata.PartitionChangeRecord, *Error) {
	cur := *t.Partitions.At(int(id))
	if !cur.Reassigning() {
		return nil, &Error{err: kerr.NoReassignmentInProgress}
	}
	original := withoutAll(cur.Replicas, cur.AddingReplicas)
	isr := withoutAll(cur.ISR, cur.AddingReplicas)
	unclean := e.uncleanElectionEnabled(img, t.Name)
	if len(isr) == 0 {
		if len(original) == 0 {
			return nil, NewError(kerr.InvalidReplicaAssignment, "Invalid replica assignment: addingReplicas contains all replicas.")
		}
		if !unclean {
			return nil, NewError(kerr.InvalidReplicaAssignment, "Unable to revert partition assignment for %s:%d because it would require an unclean leader election.", t.Name, id)
		}
		isr = original[:1]
	}
	pc := e.newPartitionChange(img, t, id)
	pc.isr, pc.replicas, pc.adding, pc.removing = isr, original, nil, nil
	return pc.build(), nil
}

// ListPartitionReassignments decides a ListPartitionReassignments request.
// It writes nothing; the answer waits for what is pending, as every read
// on the controller does.
func (*Env) ListPartitionReassignments(_ context.Context, img *metadata.Image, _ int64, req *kmsg.ListPartitionReassignmentsRequest) ([]metadata.Record, *kmsg.ListPartitionReassignmentsResponse) {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.Topics = []kmsg.ListPartitionReassignmentsResponseTopic{}
	list := func(t *metadata.Topic, partitions []int32) {
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = t.Name
		for _, id := range partitions {
			if id < 0 || int(id) >= t.Partitions.Len() || !t.Partitions.At(int(id)).Reassigning() {
				continue
			}
			p := *t.Partitions.At(int(id))
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition = id
			rp.Replicas = append([]int32{}, p.Replicas...)
			rp.AddingReplicas = append([]int32{}, p.AddingReplicas...)
			rp.RemovingReplicas = append([]int32{}, p.RemovingReplicas...)
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if req.Topics == nil {
		for _, name := range slices.Sorted(img.Topics.Keys()) {
			t := img.Topic(name)
			all := make([]int32, t.Partitions.Len())
			for i := range all {
				all[i] = int32(i)
			}
			list(t, all)
		}
		return nil, resp
	}
	for _, rt := range req.Topics {
		if t := img.Topic(rt.Topic); t != nil {
			list(t, rt.Partitions)
		}
	}
	return nil, resp
}

// ListPartitionReassignmentsFailed is the answer with e and no partitions
// (Kafka's ListPartitionReassignmentsRequest.getErrorResponse).
func ListPartitionReassignmentsFailed(req *kmsg.ListPartitionReassignmentsRequest, e *Error) *kmsg.ListPartitionReassignmentsResponse {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.ErrorCode, resp.ErrorMessage = e.Code(), e.Message()
	return resp
}

func setOf(s []int32) map[int32]struct{} {
	m := make(map[int32]struct{}, len(s))
	for _, v := range s {
		m[v] = struct{}{}
	}
	return m
}
