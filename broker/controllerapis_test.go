package broker

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/controllerclient"
	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// bootstrapView is a metadata view whose image names no voter endpoints,
// so that a controller client reaches the active controller through its
// bootstrap address (the test listener's, not the format's).
type bootstrapView struct{ MetadataView }

func (v bootstrapView) Image() *metadata.Image {
	img := *v.MetadataView.Image()
	img.Voters = nil
	return &img
}

// remoteControllerClient is node 2's client of n's controller, which it
// reaches through its bootstrap address; it is closed with the test.
func remoteControllerClient(t *testing.T, n *testNode) *controllerclient.Client {
	t.Helper()
	cc := controllerclient.New(controllerclient.Options{NodeID: 2, MaxVersion: ControllerMaxVersion, Listener: "CONTROLLER",
		Bootstrap: map[int32]string{1: n.b.Addrs()["CONTROLLER"]}})
	t.Cleanup(cc.Close)
	cc.Follow(bootstrapView{n.ctrl})
	return cc
}

// startControllerNode is a combined node whose controller listener serves
// the controller's own APIs.
func startControllerNode(t *testing.T) *testNode {
	t.Helper()
	return startTestNodeWithOptions(t, nil, map[string]int16{"group.version": 1}, nil, nil, func(o *Options) {
		o.LocalController = o.Metadata.(*controller.Controller)
	})
}

// registerFakeBroker registers and unfences a broker that no process runs;
// it returns its epoch.
func registerFakeBroker(t *testing.T, ctrl *controller.Controller, id int32) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	img := ctrl.Image()
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.Version = 3
	req.BrokerID, req.ClusterID, req.IncarnationID = id, img.ClusterID, protocol.RandomUUID()
	req.LogDirs = [][16]byte{protocol.RandomUUID()}
	for _, name := range slices.Sorted(maps.Keys(img.Features)) {
		req.Features = append(req.Features, kmsg.BrokerRegistrationRequestFeature{Name: name, MinSupportedVersion: img.Features[name], MaxSupportedVersion: img.Features[name]})
	}
	reg := ctrl.RegisterBroker(ctx, req)
	if reg.ErrorCode != 0 {
		t.Fatalf("registering broker %d: %d", id, reg.ErrorCode)
	}
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = id, reg.BrokerEpoch, ctrl.Image().Offset
	if r := ctrl.BrokerHeartbeat(ctx, hb); r.ErrorCode != 0 || r.IsFenced {
		t.Fatalf("unfencing broker %d: %+v", id, r)
	}
	return reg.BrokerEpoch
}

// TestAlterPartitionThroughControllerListener: a broker's controller client
// sends AlterPartition to the active controller directly (no Envelope),
// over its controller listener, and gets the committed state back; the
// API is listed on the controller listener only.
func TestAlterPartitionThroughControllerListener(t *testing.T) {
	n := startControllerNode(t)
	ctrl := n.ctrl
	deadline := time.Now().Add(10 * time.Second)
	for b := ctrl.Image().Brokers[1]; b == nil || b.Fenced; b = ctrl.Image().Brokers[1] {
		if time.Now().After(deadline) {
			t.Fatalf("the node's broker never unfenced: registration %+v", b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	registerFakeBroker(t, ctrl, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "isr", -1, -1
	rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1, 2}}}
	ct.Topics = append(ct.Topics, rt)
	if r := ctrl.CreateTopics(ctx, ct); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %d", r.Topics[0].ErrorCode)
	}
	img := ctrl.Image()
	topic := img.Topic("isr")
	p := *topic.Partitions.At(0)
	if p.Leader != 1 || len(p.ISR) != 2 {
		t.Fatalf("partition %+v", p)
	}

	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 3
	req.BrokerID, req.BrokerEpoch = 1, img.Brokers[1].Epoch
	at := kmsg.NewAlterPartitionRequestTopic()
	at.TopicID = topic.ID
	ap := kmsg.NewAlterPartitionRequestTopicPartition()
	ap.LeaderEpoch, ap.PartitionEpoch = p.LeaderEpoch, p.PartitionEpoch
	ap.NewEpochISR = []kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{{BrokerID: 1, BrokerEpoch: img.Brokers[1].Epoch}}
	at.Partitions = append(at.Partitions, ap)
	req.Topics = append(req.Topics, at)

	cc := remoteControllerClient(t, n)
	answer, err := cc.Handle(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := answer.(*kmsg.AlterPartitionResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].TopidID != topic.ID || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("response %+v", resp)
	}
	got := resp.Topics[0].Partitions[0]
	after := *ctrl.Image().Topic("isr").Partitions.At(0)
	if got.ErrorCode != 0 || !slices.Equal(got.ISR, []int32{1}) || got.PartitionEpoch != p.PartitionEpoch+1 ||
		!slices.Equal(after.ISR, []int32{1}) || after.PartitionEpoch != got.PartitionEpoch || got.LeaderID != 1 || got.LeaderEpoch != after.LeaderEpoch {
		t.Fatalf("answer %+v, image %+v", got, after)
	}

	// Listed on the controller listener, not on the client listener.
	for _, tc := range []struct {
		listener string
		listed   bool
	}{{"PLAINTEXT", false}, {"CONTROLLER", true}} {
		minV, maxV, ok := apiRange(apiVersionsAt(t, n.b.Addrs()[tc.listener]), kmsg.AlterPartition)
		if ok != tc.listed || ok && (minV != 2 || maxV != 3) {
			t.Fatalf("%s listener: AlterPartition listed %v (%d-%d)", tc.listener, ok, minV, maxV)
		}
	}
}
