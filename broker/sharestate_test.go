package broker

import (
	"context"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/coordinator/share"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareStateOverTheWireAndThroughThePersister: FindCoordinator's share
// keys name the leader of the key's __share_group_state partition (created
// on first use), the five RPCs answer over the wire, and the persister
// the group coordinator and partition leaders use reaches the same state.
func TestShareStateOverTheWireAndThroughThePersister(t *testing.T) {
	n := startTestNode(t, map[string]string{"share.coordinator.state.topic.num.partitions": "3"})
	c := n.dial(t)
	key := share.Key{Group: "q", TopicID: [16]byte{1, 2, 3}, Partition: 4}

	if r := c.roundTrip(findCoordinatorReq(5, 2, key.CoordinatorKey())).(*kmsg.FindCoordinatorResponse); r.Coordinators[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("share key at v5: %v", kerr.ErrorForCode(r.Coordinators[0].ErrorCode))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := c.roundTrip(findCoordinatorReq(6, 2, key.CoordinatorKey())).(*kmsg.FindCoordinatorResponse)
		if co := r.Coordinators[0]; co.ErrorCode == 0 && co.NodeID == 1 {
			break
		} else if co.ErrorCode != kerr.CoordinatorNotAvailable.Code || time.Now().After(deadline) {
			t.Fatalf("share key: %+v", co)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := n.ctrl.Image().Topic(share.StateTopic).Partitions.Len(); got != 3 {
		t.Fatalf("__share_group_state has %d partitions, want 3", got)
	}

	// The wire: initialize, then read as leader epoch 2.
	init := kmsg.NewPtrInitializeShareGroupStateRequest()
	init.GroupID = key.Group
	init.Topics = []kmsg.InitializeShareGroupStateRequestTopic{{TopicID: key.TopicID,
		Partitions: []kmsg.InitializeShareGroupStateRequestTopicPartition{{Partition: key.Partition, StateEpoch: 1, StartOffset: 10}}}}
	deadline = time.Now().Add(20 * time.Second)
	for {
		code := c.roundTrip(init).(*kmsg.InitializeShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
		if code == 0 {
			break
		}
		if code != kerr.CoordinatorLoadInProgress.Code && code != kerr.NotCoordinator.Code || time.Now().After(deadline) {
			t.Fatalf("initialize: %v", kerr.ErrorForCode(code))
		}
		time.Sleep(20 * time.Millisecond)
	}
	p := &sharePersister{b: n.b}
	ctx := context.Background()
	if err := p.Write(ctx, key, kmsg.WriteShareGroupStateRequestTopicPartition{StateEpoch: 1, LeaderEpoch: 2, StartOffset: 12, DeliveryCompleteCount: 1,
		StateBatches: []kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{{FirstOffset: 10, LastOffset: 11, DeliveryState: 2, DeliveryCount: 1}, {FirstOffset: 13, LastOffset: 13, DeliveryState: 4, DeliveryCount: 5}}}); err != nil {
		t.Fatal(err)
	}
	read := kmsg.NewPtrReadShareGroupStateRequest()
	read.GroupID = key.Group
	read.Topics = []kmsg.ReadShareGroupStateRequestTopic{{TopicID: key.TopicID, Partitions: []kmsg.ReadShareGroupStateRequestTopicPartition{{Partition: key.Partition, LeaderEpoch: 3}}}}
	rp := c.roundTrip(read).(*kmsg.ReadShareGroupStateResponse).Topics[0].Partitions[0]
	if rp.ErrorCode != 0 || rp.StartOffset != 12 || rp.StateEpoch != 1 || len(rp.StateBatches) != 1 || rp.StateBatches[0].FirstOffset != 13 || rp.StateBatches[0].DeliveryState != 4 {
		t.Fatalf("read %+v", rp)
	}
	// Leader epoch 3 read it: epoch 2 is fenced now.
	if _, err := p.Read(ctx, key, 2); err != kerr.FencedLeaderEpoch {
		t.Fatalf("old leader's read: %v", err)
	}
	if err := p.Delete(ctx, key.Group, map[[16]byte][]int32{key.TopicID: {key.Partition}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Read(ctx, key, 3); err != kerr.InvalidRequest {
		t.Fatalf("read after delete: %v", err)
	}
}
