package decide

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
)

// TestElectLeadersDecisionWithoutAQuorum: ElectLeaders decided on an image:
// a preferred election of every partition writes the elections that can
// happen and leaves out the partitions that need none; named partitions
// get an answer each; an unknown election type refuses the request.
func TestElectLeadersDecisionWithoutAQuorum(t *testing.T) {
	e := testEnv()
	recs := brokersAndTopics(3)
	recs = append(recs, topicRecords("a", protocol.RandomUUID(),
		metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 2},
		metadata.PartitionRecord{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})...)
	recs = append(recs, topicRecords("b", protocol.RandomUUID(),
		metadata.PartitionRecord{Replicas: []int32{3, 2}, ISR: []int32{2}, Leader: 2})...)
	img := imageOf(t, recs...)

	all := kmsg.NewPtrElectLeadersRequest()
	all.Version = 2
	all.ElectionType = electionPreferred
	recs, resp, next := decideOn(t, e, img, (*Env).ElectLeaders, all)
	if len(recs) != 1 || resp.ErrorCode != 0 || len(resp.Topics) != 2 {
		t.Fatalf("records %v, response %+v", recs, resp)
	}
	if a := resp.Topics[0]; a.Topic != "a" || len(a.Partitions) != 1 || a.Partitions[0].Partition != 0 || a.Partitions[0].ErrorCode != 0 || a.Partitions[0].ErrorMessage != nil {
		t.Fatalf("topic a: %+v", a)
	}
	if b := resp.Topics[1]; b.Topic != "b" || len(b.Partitions) != 1 || b.Partitions[0].ErrorCode != kerr.PreferredLeaderNotAvailable.Code ||
		*b.Partitions[0].ErrorMessage != kerr.PreferredLeaderNotAvailable.Description {
		t.Fatalf("topic b: %+v", b)
	}
	if p := *next.Topic("a").Partitions.At(0); p.Leader != 1 || p.LeaderEpoch != 1 {
		t.Fatalf("a-0 after the election: %+v", p)
	}

	named := kmsg.NewPtrElectLeadersRequest()
	named.Version = 2
	named.ElectionType = electionPreferred
	named.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "a", Partitions: []int32{0, 1, 5}}, {Topic: "nope", Partitions: []int32{0}}}
	recs, resp, _ = decideOn(t, e, next, (*Env).ElectLeaders, named)
	if len(recs) != 0 || len(resp.Topics) != 2 {
		t.Fatalf("named: records %v, response %+v", recs, resp)
	}
	a, nope := resp.Topics[0].Partitions, resp.Topics[1].Partitions
	if len(a) != 3 || a[0].ErrorCode != kerr.ElectionNotNeeded.Code || a[1].ErrorCode != kerr.ElectionNotNeeded.Code ||
		a[2].ErrorCode != kerr.UnknownTopicOrPartition.Code || *a[2].ErrorMessage != "No such partition as a-5" {
		t.Fatalf("named a: %+v", a)
	}
	if len(nope) != 1 || nope[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || *nope[0].ErrorMessage != "No such topic as nope" {
		t.Fatalf("named nope: %+v", nope)
	}

	named.ElectionType = 5
	recs, resp, _ = decideOn(t, e, next, (*Env).ElectLeaders, named)
	if len(recs) != 0 || resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.Topics) != 2 ||
		resp.Topics[0].Partitions[2].ErrorCode != kerr.InvalidRequest.Code || *resp.Topics[0].Partitions[2].ErrorMessage != "Unknown election type 5" {
		t.Fatalf("unknown election type: records %v, response %+v", recs, resp)
	}

	failed := ElectLeadersFailed(named, commitError(errNotController))
	if failed.ErrorCode != kerr.NotController.Code || len(failed.Topics) != 2 || len(failed.Topics[0].Partitions) != 3 {
		t.Fatalf("failed commit: %+v", failed)
	}
	for _, rt := range failed.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != kerr.NotController.Code || *rp.ErrorMessage != errNotController.Error() {
				t.Fatalf("failed commit: %+v", failed.Topics)
			}
		}
	}
}

// TestElectLeadersTooManyElections: more elections than one operation may
// write refuse the whole request, as Kafka's bounded record list does,
// instead of answering elections that were not written.
func TestElectLeadersTooManyElections(t *testing.T) {
	parts := make([]metadata.PartitionRecord, maxRecordsPerOp+1)
	for i := range parts {
		parts[i] = metadata.PartitionRecord{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2}
	}
	img := imageOf(t, append(brokersAndTopics(2), topicRecords("a", protocol.RandomUUID(), parts...)...)...)
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version = 2
	recs, resp, _ := decideOn(t, testEnv(), img, (*Env).ElectLeaders, req)
	if len(recs) != 0 || resp.ErrorCode != kerr.PolicyViolation.Code || len(resp.Topics) != 0 {
		t.Fatalf("%d records, error %d, %d topics", len(recs), resp.ErrorCode, len(resp.Topics))
	}
	req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "a", Partitions: make([]int32, maxRecordsPerOp+1)}}
	for i := range req.Topics[0].Partitions {
		req.Topics[0].Partitions[i] = int32(i)
	}
	_, resp, _ = decideOn(t, testEnv(), img, (*Env).ElectLeaders, req)
	if rp := resp.Topics[0].Partitions[0]; resp.ErrorCode != kerr.PolicyViolation.Code || rp.ErrorCode != kerr.PolicyViolation.Code || *rp.ErrorMessage != excessivelyLargeOperation {
		t.Fatalf("named: error %d, first partition %+v", resp.ErrorCode, rp)
	}
}
