package decide

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
)

// TestReassignmentDecisionsWithoutAQuorum: AlterPartitionReassignments and
// ListPartitionReassignments decided on an image: a move starts with one
// record while its neighbours are refused, the listing shows it, and its
// cancellation reverts it.
func TestReassignmentDecisionsWithoutAQuorum(t *testing.T) {
	e := testEnv()
	img := imageOf(t, append(brokersAndTopics(4), topicRecords("t", protocol.RandomUUID(),
		metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1},
		metadata.PartitionRecord{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})...)...)
	move := func(topic string, partition int32, replicas []int32) kmsg.AlterPartitionAssignmentsRequestTopic {
		return kmsg.AlterPartitionAssignmentsRequestTopic{Topic: topic, Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: partition, Replicas: replicas}}}
	}
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.Version = 1
	req.AllowReplicationFactorChange = false
	req.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{move("t", 0, []int32{2, 3, 4}), move("t", 1, []int32{1}), move("t", 5, []int32{1}), move("nope", 0, []int32{1})}
	recs, resp, img := decideOn(t, e, img, (*Env).AlterPartitionReassignments, req)
	if len(recs) != 1 || resp.ErrorCode != 0 || resp.AllowReplicationFactorChange || len(resp.Topics) != 4 {
		t.Fatalf("records %v, response %+v", recs, resp)
	}
	for i, want := range []struct {
		code int16
		msg  string
	}{
		{0, ""},
		{kerr.InvalidReplicationFactor.Code, "The replication factor is changed from 2 to 1"},
		{kerr.UnknownTopicOrPartition.Code, "Unable to find partition t:5."},
		{kerr.UnknownTopicOrPartition.Code, "Unable to find a topic named nope."},
	} {
		rp := resp.Topics[i].Partitions[0]
		if rp.ErrorCode != want.code || (rp.ErrorMessage == nil) != (want.msg == "") || rp.ErrorMessage != nil && *rp.ErrorMessage != want.msg {
			t.Fatalf("%s-%d: %d %v, want %d %q", resp.Topics[i].Topic, rp.Partition, rp.ErrorCode, rp.ErrorMessage, want.code, want.msg)
		}
	}
	if p := *img.Topic("t").Partitions.At(0); !slices.Equal(p.Replicas, []int32{2, 3, 4, 1}) || !slices.Equal(p.AddingReplicas, []int32{4}) ||
		!slices.Equal(p.RemovingReplicas, []int32{1}) || p.Leader != 1 {
		t.Fatalf("t-0 moving: %+v", p)
	}

	list := kmsg.NewPtrListPartitionReassignmentsRequest()
	recs, listed, _ := decideOn(t, e, img, (*Env).ListPartitionReassignments, list)
	if len(recs) != 0 || len(listed.Topics) != 1 || len(listed.Topics[0].Partitions) != 1 {
		t.Fatalf("list all: records %v, %+v", recs, listed.Topics)
	}
	if rp := listed.Topics[0].Partitions[0]; rp.Partition != 0 || !slices.Equal(rp.Replicas, []int32{2, 3, 4, 1}) ||
		!slices.Equal(rp.AddingReplicas, []int32{4}) || !slices.Equal(rp.RemovingReplicas, []int32{1}) {
		t.Fatalf("listed t-0: %+v", rp)
	}
	list.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{{Topic: "t", Partitions: []int32{1, 7}}, {Topic: "nope", Partitions: []int32{0}}}
	if _, listed, _ = decideOn(t, e, img, (*Env).ListPartitionReassignments, list); listed.Topics == nil || len(listed.Topics) != 0 {
		t.Fatalf("list of partitions that are not moving: %+v", listed.Topics)
	}

	req.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{move("t", 0, nil), move("t", 1, nil)}
	recs, resp, img = decideOn(t, e, img, (*Env).AlterPartitionReassignments, req)
	if len(recs) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 ||
		resp.Topics[1].Partitions[0].ErrorCode != kerr.NoReassignmentInProgress.Code || *resp.Topics[1].Partitions[0].ErrorMessage != kerr.NoReassignmentInProgress.Description {
		t.Fatalf("cancel: records %v, response %+v", recs, resp.Topics)
	}
	// The adding replica leaves; the others keep the target's order, as
	// in Kafka.
	if p := *img.Topic("t").Partitions.At(0); !slices.Equal(p.Replicas, []int32{2, 3, 1}) || p.Reassigning() || p.Leader != 1 {
		t.Fatalf("t-0 after the cancellation: %+v", p)
	}

	timedOut := commitError(context.DeadlineExceeded)
	failed := AlterPartitionReassignmentsFailed(req, timedOut)
	if failed.ErrorCode != kerr.RequestTimedOut.Code || *failed.ErrorMessage != context.DeadlineExceeded.Error() || failed.AllowReplicationFactorChange || len(failed.Topics) != 2 {
		t.Fatalf("failed commit: %+v", failed)
	}
	for _, rt := range failed.Topics {
		if rp := rt.Partitions[0]; rp.ErrorCode != kerr.RequestTimedOut.Code || *rp.ErrorMessage != context.DeadlineExceeded.Error() {
			t.Fatalf("failed commit: %+v", failed.Topics)
		}
	}
	if lf := ListPartitionReassignmentsFailed(list, timedOut); lf.ErrorCode != kerr.RequestTimedOut.Code || len(lf.Topics) != 0 {
		t.Fatalf("failed list: %+v", lf)
	}
}
