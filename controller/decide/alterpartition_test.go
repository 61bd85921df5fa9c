package decide

import (
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metadata/persist"
	"github.com/gregorbroker/gregor/protocol"
)

// TestPartitionChangeLeaderEpochBumps: removing replicas always bumps the
// leader epoch; an ISR shrink bumps it only below metadata.version
// 3.6-IV0, as Kafka's PartitionChangeBuilder does.
func TestPartitionChangeLeaderEpochBumps(t *testing.T) {
	img := metadata.EmptyImage("c")
	for id := int32(1); id <= 3; id++ {
		img.Brokers[id] = &metadata.Broker{ID: id}
	}
	topic := &metadata.Topic{Name: "t", Partitions: persist.VectorOf([]metadata.Partition{{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}}...)}
	shrink := func(mv int16) *metadata.PartitionChangeRecord {
		img.Features = map[string]int16{metadata.MetadataVersionFeature: mv}
		pc := testEnv().newPartitionChange(img, topic, 0)
		pc.isr = []int32{1, 2}
		return pc.build()
	}
	if rec := shrink(mvNoLeaderEpochBumpOnShrink); rec.Leader != metadata.NoLeaderChange || !slices.Equal(rec.ISR, []int32{1, 2}) {
		t.Fatalf("shrink at 3.6-IV0: %+v", rec)
	}
	if rec := shrink(mvNoLeaderEpochBumpOnShrink - 1); rec.Leader != 1 {
		t.Fatalf("shrink at 3.5-IV2 keeps the leader epoch: %+v", rec)
	}
	img.Features = map[string]int16{metadata.MetadataVersionFeature: mvNoLeaderEpochBumpOnShrink}
	pc := testEnv().newPartitionChange(img, topic, 0)
	pc.replicas, pc.isr = []int32{1, 2}, []int32{1, 2}
	rec := pc.build()
	if rec.Leader != 1 || !slices.Equal(rec.Replicas, []int32{1, 2}) {
		t.Fatalf("removing a replica: %+v", rec)
	}
	if got := metadata.ApplyPartitionChange(*topic.Partitions.At(0), rec); got.LeaderEpoch != 1 || got.Leader != 1 {
		t.Fatalf("replayed: %+v", got)
	}
}

// isrRequestTopic is a v2 AlterPartition topic asking for each partition's
// ISR at its current epochs in img.
func isrRequestTopic(img *metadata.Image, id protocol.UUID, isrs map[int32][]int32) kmsg.AlterPartitionRequestTopic {
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = id
	for _, i := range slices.Sorted(maps.Keys(isrs)) {
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition = i
		if t := img.TopicByID(id); t != nil && int(i) < t.Partitions.Len() {
			rp.LeaderEpoch, rp.PartitionEpoch = t.Partitions.At(int(i)).LeaderEpoch, t.Partitions.At(int(i)).PartitionEpoch
		}
		rp.NewISR = isrs[i]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// TestAlterPartitionDecisionWithoutAQuorum: AlterPartition decided on an
// image: an accepted shrink is one record and the answer carries the
// partition as it leaves it; the refusals of one partition leave the
// others alone; completing a reassignment away from the sender answers
// NEW_LEADER_ELECTED; a stale broker epoch or an old version refuses the
// whole request.
func TestAlterPartitionDecisionWithoutAQuorum(t *testing.T) {
	e := testEnv()
	tID, mID := protocol.RandomUUID(), protocol.RandomUUID()
	recs := append(brokersAndTopics(3), topicRecords("t", tID,
		metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1},
		metadata.PartitionRecord{Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3}, Leader: 2})...)
	// m-0 moves from broker 1 to broker 2; broker 2 has caught up.
	recs = append(recs, topicRecords("m", mID,
		metadata.PartitionRecord{Replicas: []int32{2, 1}, ISR: []int32{1}, Leader: 1, AddingReplicas: []int32{2}, RemovingReplicas: []int32{1}})...)
	img := imageOf(t, recs...)

	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 2
	req.BrokerID, req.BrokerEpoch = 1, img.Brokers[1].Epoch
	req.Topics = []kmsg.AlterPartitionRequestTopic{
		isrRequestTopic(img, tID, map[int32][]int32{0: {1, 2}, 1: {2, 3, 1}, 7: {1}}),
		isrRequestTopic(img, protocol.RandomUUID(), map[int32][]int32{0: {1}}),
		isrRequestTopic(img, mID, map[int32][]int32{0: {1, 2}}),
	}
	recs, resp, next := decideOn(t, e, img, (*Env).AlterPartition, req)
	if len(recs) != 2 || resp.ErrorCode != 0 || len(resp.Topics) != 3 {
		t.Fatalf("records %v, response %+v", recs, resp)
	}
	shrunk := resp.Topics[0].Partitions[0]
	if shrunk.ErrorCode != 0 || shrunk.LeaderID != 1 || shrunk.LeaderEpoch != 0 || !slices.Equal(shrunk.ISR, []int32{1, 2}) || shrunk.PartitionEpoch != 1 {
		t.Fatalf("t-0: %+v", shrunk)
	}
	if p := *next.Topic("t").Partitions.At(0); !slices.Equal(p.ISR, []int32{1, 2}) || p.PartitionEpoch != 1 {
		t.Fatalf("t-0 after the shrink: %+v", p)
	}
	for i, code := range []int16{kerr.InvalidRequest.Code, kerr.UnknownTopicOrPartition.Code} {
		if rp := resp.Topics[0].Partitions[i+1]; rp.ErrorCode != code || rp.ISR != nil {
			t.Fatalf("t-%d: %+v, want error %d", rp.Partition, rp, code)
		}
	}
	if rp := resp.Topics[1].Partitions[0]; rp.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: %+v", rp)
	}
	if rp := resp.Topics[2].Partitions[0]; rp.ErrorCode != kerr.NewLeaderElected.Code || rp.ISR != nil {
		t.Fatalf("m-0: %+v", rp)
	}
	if p := *next.Topic("m").Partitions.At(0); !slices.Equal(p.Replicas, []int32{2}) || !slices.Equal(p.ISR, []int32{2}) || p.Leader != 2 || p.Reassigning() {
		t.Fatalf("m-0 after the move: %+v", p)
	}

	req.BrokerEpoch++
	if recs, resp, _ := decideOn(t, e, next, (*Env).AlterPartition, req); len(recs) != 0 || resp.ErrorCode != kerr.StaleBrokerEpoch.Code || len(resp.Topics) != 0 {
		t.Fatalf("stale broker epoch: records %v, response %+v", recs, resp)
	}
	req.Version = 1
	if recs, resp, _ := decideOn(t, e, next, (*Env).AlterPartition, req); len(recs) != 0 || resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("v1: records %v, response %+v", recs, resp)
	}

	if failed := AlterPartitionFailed(req, commitError(errNotController)); failed.ErrorCode != kerr.NotController.Code || len(failed.Topics) != 0 {
		t.Fatalf("failed commit: %+v", failed)
	}
}
