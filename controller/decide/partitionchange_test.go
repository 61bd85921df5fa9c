package decide

import (
	"slices"
	"testing"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metadata/persist"
	"github.com/gregorbroker/gregor/protocol"
)

// elrCluster is an image with brokers 1..n (all unfenced), topic "t" with
// one partition, and ELR on or off; min.insync.replicas is set on the topic.
func elrCluster(t *testing.T, n int32, elr bool, minISR string, p metadata.Partition) *metadata.Image {
	t.Helper()
	img := metadata.EmptyImage("c")
	img.Brokers = map[int32]*metadata.Broker{}
	for id := int32(1); id <= n; id++ {
		img.Brokers[id] = &metadata.Broker{ID: id, Epoch: int64(id)}
	}
	if elr {
		img.Features = map[string]int16{metadata.EligibleLeaderReplicasFeature: 1}
	}
	topic := &metadata.Topic{Name: "t", ID: protocol.RandomUUID(), Partitions: persist.VectorOf(p)}
	img.Topics = persist.Map[string, *metadata.Topic]{}.Set("t", topic)
	img.TopicsByID = persist.Map[protocol.UUID, *metadata.Topic]{}.Set(topic.ID, topic)
	img.Configs = map[metadata.ConfigResource]map[string]string{{Type: metadata.ConfigResourceTopic, Name: "t"}: {minInSyncReplicasConfig: minISR}}
	return img
}

// brokersAndTopics are the records of an image with brokers 1..n
// registered and unfenced, at the latest metadata.version.
func brokersAndTopics(n int32) []metadata.Record {
	recs := []metadata.Record{&metadata.FeatureLevelRecord{Name: metadata.MetadataVersionFeature, FeatureLevel: metadata.LatestMetadataVersion}}
	for id := int32(1); id <= n; id++ {
		recs = append(recs, &metadata.RegisterBrokerRecord{BrokerID: id, IncarnationID: protocol.RandomUUID(), BrokerEpoch: int64(10 + id)})
	}
	return recs
}

// topicRecords are the records creating topic name with partitions parts
// (their topic and partition ids filled in).
func topicRecords(name string, id protocol.UUID, parts ...metadata.PartitionRecord) []metadata.Record {
	recs := []metadata.Record{&metadata.TopicRecord{Name: name, TopicID: id}}
	for i, p := range parts {
		p.TopicID, p.PartitionID = id, int32(i)
		recs = append(recs, &p)
	}
	return recs
}

// setBroker returns img with broker id fenced or not (a copy: images are
// immutable).
func setBroker(img *metadata.Image, id int32, fenced bool) *metadata.Image {
	next := *img
	next.Brokers = map[int32]*metadata.Broker{}
	for k, v := range img.Brokers {
		next.Brokers[k] = v
	}
	b := *img.Brokers[id]
	b.Fenced = fenced
	next.Brokers[id] = &b
	return &next
}

func apply(t *testing.T, img *metadata.Image, recs []metadata.Record) *metadata.Image {
	t.Helper()
	next, err := metadata.ApplyBatch(img, recs, img.Offset+1, 1)
	if err != nil {
		t.Fatalf("apply %v: %v", recs, err)
	}
	return next
}

func part(img *metadata.Image) metadata.Partition { return *img.Topic("t").Partitions.At(0) }

func wantPartition(t *testing.T, step string, got metadata.Partition, leader int32, isr, elr, lastKnown []int32) {
	t.Helper()
	if got.Leader != leader || !slices.Equal(got.ISR, isr) || !slices.Equal(got.ELR, elr) || !slices.Equal(got.LastKnownELR, lastKnown) {
		t.Fatalf("%s: leader %d ISR %v ELR %v LastKnownELR %v; want leader %d ISR %v ELR %v LastKnownELR %v",
			step, got.Leader, got.ISR, got.ELR, got.LastKnownELR, leader, isr, elr, lastKnown)
	}
}

// fence is what fencing a broker does: the partition changes, then the
// broker is fenced.
func fence(t *testing.T, e *Env, img *metadata.Image, id int32) *metadata.Image {
	t.Helper()
	img = apply(t, img, e.removeBrokerFromPartitions(img, id))
	return setBroker(img, id, true)
}

func unfence(t *testing.T, e *Env, img *metadata.Image, id int32) *metadata.Image {
	t.Helper()
	recs := e.leaderAndISRUpdates(img, -1, id, -1, func(p metadata.Partition) bool { return p.Leader == -1 })
	return apply(t, setBroker(img, id, false), recs)
}

// isrChange is the record for an ISR change the leader of t-0 asks for, as
// AlterPartition builds it once the request is valid.
func isrChange(e *Env, img *metadata.Image, isr []int32) *metadata.PartitionChangeRecord {
	pc := e.newPartitionChange(img, img.Topic("t"), 0)
	pc.isr = isr
	return pc.build()
}

func TestELRThroughFencingAndUnfencing(t *testing.T) {
	e := testEnv()
	img := elrCluster(t, 3, true, "3", metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1})

	img = fence(t, e, img, 3)
	wantPartition(t, "fence 3", part(img), 1, []int32{1, 2}, []int32{3}, nil)
	img = fence(t, e, img, 1)
	wantPartition(t, "fence 1", part(img), 2, []int32{2}, []int32{1, 3}, nil)
	// The last ISR member leaves: the ISR may be empty with ELR, and the
	// last leader is remembered.
	img = fence(t, e, img, 2)
	wantPartition(t, "fence 2", part(img), -1, []int32{}, []int32{1, 2, 3}, []int32{2})
	// Any ELR member that comes back leads and is the ISR.
	img = unfence(t, e, img, 3)
	wantPartition(t, "unfence 3", part(img), 3, []int32{3}, []int32{1, 2}, nil)
	// Followers catch up: the ISR grows; at min.insync.replicas the ELR
	// is cleared.
	img = setBroker(setBroker(img, 1, false), 2, false)
	img = apply(t, img, []metadata.Record{isrChange(e, img, []int32{3, 1})})
	wantPartition(t, "ISR 3,1", part(img), 3, []int32{3, 1}, []int32{2}, nil)
	img = apply(t, img, []metadata.Record{isrChange(e, img, []int32{3, 1, 2})})
	wantPartition(t, "ISR 3,1,2", part(img), 3, []int32{3, 1, 2}, nil, nil)
	if rec := isrChange(e, img, []int32{3, 1, 2}); rec != nil {
		t.Fatalf("an unchanged ISR wrote %+v", rec)
	}
}

func TestELRAtMinISRIsEmpty(t *testing.T) {
	e := testEnv()
	// min.insync.replicas 2: losing one of three keeps the ISR at 2.
	img := elrCluster(t, 3, true, "2", metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1})
	img = fence(t, e, img, 1)
	wantPartition(t, "fence 1", part(img), 2, []int32{2, 3}, nil, nil)
	img = fence(t, e, img, 2)
	wantPartition(t, "fence 2", part(img), 3, []int32{3}, []int32{2}, nil)
	// min.insync.replicas is capped at the replication factor.
	img = elrCluster(t, 2, true, "5", metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})
	if got := e.effectiveMinISR(img, img.Topic("t")); got != 2 {
		t.Fatalf("effective min ISR %d, want 2", got)
	}
}

func TestWithoutELRTheLastISRMemberStays(t *testing.T) {
	e := testEnv()
	img := elrCluster(t, 2, false, "2", metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})
	img = fence(t, e, img, 1)
	wantPartition(t, "fence 1", part(img), 2, []int32{2}, nil, nil)
	img = fence(t, e, img, 2)
	wantPartition(t, "fence 2", part(img), -1, []int32{2}, nil, nil)
	// Broker 1 is not in the ISR: it does not lead when it returns.
	img = unfence(t, e, img, 1)
	wantPartition(t, "unfence 1", part(img), -1, []int32{2}, nil, nil)
	img = unfence(t, e, img, 2)
	wantPartition(t, "unfence 2", part(img), 2, []int32{2}, nil, nil)
	// ELR left over from when the feature was on still elects (as in
	// Kafka), and is cleared.
	img = elrCluster(t, 2, false, "2", metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1}, ELR: []int32{2}, Leader: 1})
	img = fence(t, e, img, 1)
	wantPartition(t, "ELR off", part(img), 2, []int32{2}, nil, nil)
}

func TestUncleanRestartLeavesTheELR(t *testing.T) {
	e := testEnv()
	img := elrCluster(t, 3, true, "3", metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{}, ELR: []int32{1, 2}, LastKnownELR: []int32{2}, Leader: -1})
	for _, id := range []int32{1, 2, 3} {
		img = setBroker(img, id, true)
	}
	old := img.Brokers[1]
	// A restart that names its last epoch was clean: it keeps its place.
	if recs := e.brokerRestartRecords(img, old, old.Epoch); len(recs) != 0 {
		t.Fatalf("clean restart: %v", recs)
	}
	img = apply(t, img, e.brokerRestartRecords(img, old, -1))
	wantPartition(t, "1 restarts uncleanly", part(img), -1, []int32{}, []int32{2}, []int32{2})
	img = apply(t, img, e.brokerRestartRecords(img, img.Brokers[2], -1))
	wantPartition(t, "2 restarts uncleanly", part(img), -1, []int32{}, nil, []int32{2})
	// Nothing is known to be complete: broker 3 does not lead, but the
	// last leader does (an unclean election) once it can.
	img = unfence(t, e, img, 3)
	wantPartition(t, "unfence 3", part(img), -1, []int32{}, nil, []int32{2})
	img = unfence(t, e, img, 2)
	wantPartition(t, "unfence 2", part(img), 2, []int32{2}, nil, nil)
}

func TestUncleanElectionClearsTheELR(t *testing.T) {
	e := testEnv()
	img := elrCluster(t, 3, true, "3", metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{}, ELR: []int32{1}, LastKnownELR: []int32{1}, Leader: -1})
	img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: "t"}][uncleanLeaderElectionConfig] = "true"
	img = setBroker(img, 1, true)
	// Broker 1, the only replica known complete, is fenced: an unclean
	// election takes the first live replica.
	rec, err := e.electLeader(img, "t", 0, electionUnclean)
	if err != nil {
		t.Fatalf("unclean election: %v", err.err)
	}
	img = apply(t, img, []metadata.Record{rec})
	wantPartition(t, "unclean", part(img), 2, []int32{2}, nil, nil)
	if part(img).LeaderEpoch != 1 {
		t.Fatalf("leader epoch %d", part(img).LeaderEpoch)
	}
}

func TestElectionOrder(t *testing.T) {
	e := testEnv()
	img := elrCluster(t, 3, true, "1", metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}, Leader: 3})
	// Preferred: replica 1 is not in the ISR.
	if _, err := e.electLeader(img, "t", 0, electionPreferred); err == nil || err.err.Code != 80 {
		t.Fatalf("preferred out of ISR: %+v", err)
	}
	// A fenced leader moves to the first ISR member in replica order.
	img = fence(t, e, img, 3)
	wantPartition(t, "fence 3", part(img), 2, []int32{2}, nil, nil)
	// Unclean ElectLeaders with a leader: not needed.
	if _, err := e.electLeader(img, "t", 0, electionUnclean); err == nil || err.err.Code != 84 {
		t.Fatalf("unclean with a leader: %+v", err)
	}
	// Without unclean elections, unfencing a replica out of the ISR
	// elects nobody; ElectLeaders unclean does.
	img = fence(t, e, img, 2)
	wantPartition(t, "fence 2", part(img), -1, []int32{}, []int32{2}, []int32{2})
	rec, err := e.electLeader(img, "t", 0, electionUnclean)
	if err != nil {
		t.Fatalf("unclean: %v", err.err)
	}
	img = apply(t, img, []metadata.Record{rec})
	wantPartition(t, "unclean", part(img), 1, []int32{1}, nil, nil)
}

func TestElrAfterISRChange(t *testing.T) {
	p := metadata.Partition{ISR: []int32{3, 1, 2}, ELR: []int32{5}}
	for _, tc := range []struct {
		isr     []int32
		minISR  int
		unclean int32
		want    []int32
	}{
		{[]int32{3, 1}, 2, -1, nil},
		{[]int32{3}, 2, -1, []int32{1, 2, 5}},
		{[]int32{}, 2, 2, []int32{1, 3, 5}},
		{[]int32{3, 1, 2, 4}, 4, -1, nil},
	} {
		if got := elrAfterISRChange(p, tc.isr, tc.minISR, tc.unclean); !slices.Equal(got, tc.want) {
			t.Errorf("ISR %v min %d unclean %d: ELR %v, want %v", tc.isr, tc.minISR, tc.unclean, got, tc.want)
		}
	}
}

// TestFencingARemovingReplicaCompletesAReassignment: fencing goes through
// the same builder, so a partition whose ISR already holds every target
// (as a log written by another controller may leave it) completes its
// reassignment when a removing replica is fenced, and the leader, a
// removing replica, moves to the target set, as in Kafka.
func TestFencingARemovingReplicaCompletesAReassignment(t *testing.T) {
	e := testEnv()
	img := elrCluster(t, 4, false, "1", metadata.Partition{
		Replicas: []int32{2, 3, 4, 1}, ISR: []int32{1, 2, 3, 4}, Leader: 1,
		AddingReplicas: []int32{4}, RemovingReplicas: []int32{1},
	})
	img = fence(t, e, img, 1)
	p := part(img)
	if !slices.Equal(p.Replicas, []int32{2, 3, 4}) || !slices.Equal(p.ISR, []int32{2, 3, 4}) || p.Reassigning() || p.Leader != 2 || p.LeaderEpoch != 1 {
		t.Fatalf("after fencing the removing leader: %+v", p)
	}
}

// TestCompletedReassignmentLeavesNoRemovedReplicaInTheELR: a reassignment
// that shrinks the replicas below min.insync.replicas completes with an ISR
// below it, but the replicas it removed do not go to the ELR: they can no
// longer lead.
func TestCompletedReassignmentLeavesNoRemovedReplicaInTheELR(t *testing.T) {
	e := testEnv()
	img := elrCluster(t, 4, true, "3", metadata.Partition{
		Replicas: []int32{1, 4, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1,
		AddingReplicas: []int32{4}, RemovingReplicas: []int32{2, 3},
	})
	img = apply(t, img, []metadata.Record{isrChange(e, img, []int32{1, 2, 3, 4})})
	p := part(img)
	wantPartition(t, "completed", p, 1, []int32{1, 4}, nil, nil)
	if !slices.Equal(p.Replicas, []int32{1, 4}) || p.Reassigning() || p.LeaderEpoch != 1 {
		t.Fatalf("after completion: %+v", p)
	}
}

// TestMinISRChangeClearsTheELRThroughTheBuilder: a new min.insync.replicas
// forgets the ELR and the last known leader (Kafka's ClearElrRecord) and
// elects nobody uncleanly on the way, even where the topic allows it: that
// is the periodic check's to do.
func TestMinISRChangeClearsTheELRThroughTheBuilder(t *testing.T) {
	e := testEnv()
	img := elrCluster(t, 3, true, "3", metadata.Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{}, ELR: []int32{1, 2}, LastKnownELR: []int32{2}, Leader: -1})
	img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: "t"}][uncleanLeaderElectionConfig] = "true"
	img = setBroker(setBroker(img, 1, true), 2, true)
	change := []metadata.Record{&metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: "t", Name: minInSyncReplicasConfig, Value: strPtr("2")}}
	recs := e.clearELRRecords(img, change)
	if len(recs) != 1 {
		t.Fatalf("records %v", recs)
	}
	img = apply(t, img, recs)
	wantPartition(t, "cleared", part(img), -1, []int32{}, nil, nil)
	if p := part(img); p.PartitionEpoch != 1 || p.LeaderEpoch != 0 {
		t.Fatalf("epochs: %+v", p)
	}
	if recs := e.clearELRRecords(img, change); len(recs) != 0 {
		t.Fatalf("nothing left to clear: %v", recs)
	}
}
