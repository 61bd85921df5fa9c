package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/coordinator/runtime"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metadata/persist"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/replica"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeClock is a settable clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// txnTopic stands in for the transaction coordinator's runtime.
type txnTopic struct{ ensured int }

func (f *txnTopic) Topic() runtime.TopicSpec { return runtime.TopicSpec{Name: "__transaction_state"} }
func (f *txnTopic) EnsureTopic()             { f.ensured++ }

// testBroker is a registration of node id with a PLAINTEXT endpoint on
// port 9000+id.
func testBroker(id int32) *metadata.Broker {
	return &metadata.Broker{ID: id, Epoch: 100 + int64(id), Endpoints: []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9000 + id}}}
}

// coordinatorImage is a cluster of brokers 1-3 at offset with a one-partition
// __transaction_state led by leader with isr; change adjusts the brokers.
func coordinatorImage(offset int64, leader int32, isr []int32, change func(map[int32]*metadata.Broker)) *metadata.Image {
	brokers := map[int32]*metadata.Broker{1: testBroker(1), 2: testBroker(2), 3: testBroker(3)}
	if change != nil {
		change(brokers)
	}
	topic := &metadata.Topic{Name: "__transaction_state", ID: protocol.UUID{1}, Partitions: persist.VectorOf([]metadata.Partition{{
		Replicas: []int32{1, 2, 3}, ISR: isr, Leader: leader, LeaderEpoch: 1,
	}}...)}
	return &metadata.Image{Offset: offset, Brokers: brokers, Topics: persist.Map[string, *metadata.Topic]{}.Set(topic.Name, topic)}
}

// defaultLogConfigs gives every topic Kafka's default log configs.
type defaultLogConfigs struct{}

func (defaultLogConfigs) LogConfig(*metadata.Image, string) config.Topic {
	return config.DefaultTopic()
}

// replicasOf is node's replica manager following img (its logs in
// memory).
func replicasOf(t *testing.T, node int32, img *metadata.Image) *replica.Manager {
	t.Helper()
	logs, err := storage.OpenManager(storage.ManagerOptions{FS: vfs.NewMemFS(), Dirs: []string{"/data"}, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	m := replica.NewManager(replica.Options{NodeID: node, Logs: logs, Configs: defaultLogConfigs{}, Logger: discardLogger()})
	t.Cleanup(func() {
		m.Stop()
		logs.Close()
	})
	m.ApplyImage(nil, img)
	return m
}

func brokerIDs(bs []kmsg.MetadataResponseBroker) []int32 {
	var ids []int32
	for _, b := range bs {
		ids = append(ids, b.NodeID)
	}
	return ids
}

// FindCoordinator names the coordinator partition's leader only when it
// can serve: a leader in controlled shutdown, fenced, outside the ISR, or
// this very broker while it shuts down or while its leader lease has
// lapsed is COORDINATOR_NOT_AVAILABLE, which clients retry, never a node
// that is about to go or gone, or that does not serve.
func TestFindCoordinatorNamesOnlyALeaderThatCanServe(t *testing.T) {
	all := []int32{1, 2, 3}
	for _, tc := range []struct {
		name        string
		img         *metadata.Image
		stopping    bool
		leaseLapsed bool
		want        int32 // -1: COORDINATOR_NOT_AVAILABLE
	}{
		{"healthy leader", coordinatorImage(10, 2, all, nil), false, false, 2},
		{"leader in controlled shutdown", coordinatorImage(10, 2, all, func(m map[int32]*metadata.Broker) { m[2].InControlledShutdown = true }), false, false, -1},
		{"fenced leader", coordinatorImage(10, 2, all, func(m map[int32]*metadata.Broker) { m[2].Fenced = true }), false, false, -1},
		{"unregistered leader", coordinatorImage(10, 2, all, func(m map[int32]*metadata.Broker) { delete(m, 2) }), false, false, -1},
		{"leader outside the ISR", coordinatorImage(10, 2, []int32{1, 3}, nil), false, false, -1},
		{"no leader", coordinatorImage(10, -1, []int32{1, 3}, nil), false, false, -1},
		{"this broker leads and is shutting down", coordinatorImage(10, 1, all, nil), true, false, -1},
		{"this broker leads and serves", coordinatorImage(10, 1, all, nil), false, false, 1},
		{"this broker leads and its lease lapsed", coordinatorImage(10, 1, all, nil), false, true, -1},
		{"another broker leads while this one shuts down", coordinatorImage(10, 3, all, nil), true, false, 3},
		{"another broker leads while this one's lease lapsed", coordinatorImage(10, 3, all, nil), false, true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Broker{opts: Options{NodeID: 1}, replicas: replicasOf(t, 1, tc.img)}
			if tc.leaseLapsed {
				b.replicas.SetLeaderLease(time.Time{})
			}
			b.stopping.Store(tc.stopping)
			c := b.coordinatorOn(tc.img, "PLAINTEXT", &txnTopic{}, 0, "txn")
			if tc.want < 0 {
				if c.ErrorCode != kerr.CoordinatorNotAvailable.Code || c.NodeID != -1 || c.Port != -1 {
					t.Fatalf("answer %+v, want COORDINATOR_NOT_AVAILABLE with node -1", c)
				}
				return
			}
			if c.ErrorCode != 0 || c.NodeID != tc.want || c.Port != 9000+tc.want || c.Host != "127.0.0.1" {
				t.Fatalf("answer %+v, want node %d at 127.0.0.1:%d", c, tc.want, 9000+tc.want)
			}
		})
	}
}

// Metadata keeps listing a broker this broker saw fenced for the linger
// window after it saw the change (by the subscription or by a request
// reading the new image first), then drops it; a broker fenced already in
// the first image seen is not listed, and one registered again and
// unfenced is listed from the image.
func TestMetadataListsAJustFencedBrokerForTheWindow(t *testing.T) {
	const linger = 3 * time.Second
	fence2 := func(m map[int32]*metadata.Broker) { m[2].Fenced = true }
	for _, seenBy := range []string{"subscription", "request"} {
		t.Run(seenBy, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1000, 0)}
			b := &Broker{departed: newDepartedBrokers(linger, clock.now)}
			before := coordinatorImage(10, 2, []int32{1, 2, 3}, nil)
			b.departed.observe(before) // the subscription's first image
			if got := brokerIDs(b.metadataBrokers(before, "PLAINTEXT")); !slices.Equal(got, []int32{1, 2, 3}) {
				t.Fatalf("brokers before the fencing %v, want [1 2 3]", got)
			}
			clock.advance(time.Second)
			after := coordinatorImage(11, 3, []int32{1, 3}, fence2)
			if seenBy == "subscription" {
				b.departed.observe(after)
			} else if got := brokerIDs(b.metadataBrokers(after, "PLAINTEXT")); !slices.Equal(got, []int32{1, 2, 3}) {
				t.Fatalf("brokers at broker 2's fencing %v, want [1 2 3]", got)
			}
			clock.advance(linger - time.Millisecond)
			got := b.metadataBrokers(after, "PLAINTEXT")
			if !slices.Equal(brokerIDs(got), []int32{1, 2, 3}) {
				t.Fatalf("brokers %s after broker 2's fencing %v, want [1 2 3]: it must stay listed for %s", linger-time.Millisecond, brokerIDs(got), linger)
			}
			if got[1].Host != "127.0.0.1" || got[1].Port != 9002 {
				t.Fatalf("broker 2 listed as %+v, want its last endpoint 127.0.0.1:9002", got[1])
			}
			if seenBy == "subscription" {
				// A request still reading an older image changes nothing.
				b.metadataBrokers(before, "PLAINTEXT")
			}
			clock.advance(time.Millisecond)
			if got := brokerIDs(b.metadataBrokers(after, "PLAINTEXT")); !slices.Equal(got, []int32{1, 3}) {
				t.Fatalf("brokers %s after broker 2's fencing %v, want [1 3]", linger, got)
			}
		})
	}

	t.Run("fenced in the first image", func(t *testing.T) {
		clock := &fakeClock{t: time.Unix(1000, 0)}
		b := &Broker{departed: newDepartedBrokers(linger, clock.now)}
		img := coordinatorImage(11, 3, []int32{1, 3}, fence2)
		if got := brokerIDs(b.metadataBrokers(img, "PLAINTEXT")); !slices.Equal(got, []int32{1, 3}) {
			t.Fatalf("brokers %v, want [1 3]: this broker never saw 2 live", got)
		}
	})

	t.Run("registered again", func(t *testing.T) {
		clock := &fakeClock{t: time.Unix(1000, 0)}
		b := &Broker{departed: newDepartedBrokers(linger, clock.now)}
		b.departed.observe(coordinatorImage(10, 2, []int32{1, 2, 3}, nil))
		b.departed.observe(coordinatorImage(11, 3, []int32{1, 3}, func(m map[int32]*metadata.Broker) { delete(m, 2) }))
		back := coordinatorImage(12, 3, []int32{1, 3}, func(m map[int32]*metadata.Broker) {
			m[2].Epoch, m[2].Endpoints[0].Port = 500, 9100
		})
		b.departed.observe(back)
		got := b.metadataBrokers(back, "PLAINTEXT")
		if !slices.Equal(brokerIDs(got), []int32{1, 2, 3}) || got[1].Port != 9100 {
			t.Fatalf("brokers %+v, want 1-3 with broker 2 at its new port 9100", got)
		}
		// Fenced again at once: its newest registration lingers.
		again := coordinatorImage(13, 3, []int32{1, 3}, func(m map[int32]*metadata.Broker) {
			m[2].Epoch, m[2].Endpoints[0].Port, m[2].Fenced = 500, 9100, true
		})
		b.departed.observe(again)
		if got := b.metadataBrokers(again, "PLAINTEXT"); !slices.Equal(brokerIDs(got), []int32{1, 2, 3}) || got[1].Port != 9100 {
			t.Fatalf("brokers %+v after the second fencing, want 1-3 with broker 2 at 9100", got)
		}
	})
}

// The race the window closes, with two brokers: A's image still has node
// 2 leading the transaction coordinator's partition, B's has 2 fenced and
// 3 leading. A client that asks A FindCoordinator is told 2; its next
// Metadata, answered by B, must still list 2, or kgo fails the
// transaction with "unknown broker". B itself names 3.
func TestLaggingFindCoordinatorNamesABrokerTheOthersStillList(t *testing.T) {
	const linger = 3 * time.Second
	clock := &fakeClock{t: time.Unix(1000, 0)}
	live := coordinatorImage(10, 2, []int32{1, 2, 3}, nil)
	fenced := coordinatorImage(11, 3, []int32{1, 3}, func(m map[int32]*metadata.Broker) { m[2].Fenced = true })
	a := &Broker{opts: Options{NodeID: 1}, departed: newDepartedBrokers(linger, clock.now)}
	b := &Broker{opts: Options{NodeID: 3}, departed: newDepartedBrokers(linger, clock.now), replicas: replicasOf(t, 3, fenced)}
	a.departed.observe(live)
	b.departed.observe(live)
	b.departed.observe(fenced) // B applies the fencing; A lags
	clock.advance(100 * time.Millisecond)

	told := a.coordinatorOn(live, "PLAINTEXT", &txnTopic{}, 0, "txn")
	if told.ErrorCode != 0 || told.NodeID != 2 {
		t.Fatalf("lagging A's FindCoordinator %+v, want node 2 (its image cannot know better)", told)
	}
	if !slices.Contains(brokerIDs(b.metadataBrokers(fenced, "PLAINTEXT")), told.NodeID) {
		t.Fatalf("B's Metadata %v omits node %d, which A just named as the coordinator", brokerIDs(b.metadataBrokers(fenced, "PLAINTEXT")), told.NodeID)
	}
	if c := b.coordinatorOn(fenced, "PLAINTEXT", &txnTopic{}, 0, "txn"); c.ErrorCode != 0 || c.NodeID != 3 {
		t.Fatalf("B's FindCoordinator %+v, want node 3", c)
	}

	// A catches up a second later: its window starts then.
	clock.advance(time.Second)
	a.departed.observe(fenced)
	clock.advance(linger - time.Second)
	if got := brokerIDs(b.metadataBrokers(fenced, "PLAINTEXT")); !slices.Equal(got, []int32{1, 3}) {
		t.Fatalf("B's brokers after its window %v, want [1 3]", got)
	}
	if got := brokerIDs(a.metadataBrokers(fenced, "PLAINTEXT")); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("A's brokers within its own window %v, want [1 2 3]", got)
	}
}

// On a running node, a broker fenced by the controller stays in Metadata
// (the image subscription saw it leave) while DescribeCluster reports only
// the live brokers, and the fenced one flagged when fenced brokers are
// asked for.
func TestFencedBrokerStaysInMetadataOnANode(t *testing.T) {
	n := startTestNodeWithOptions(t, nil, nil, nil, nil, func(o *Options) { o.FencedBrokerLinger = time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	img := n.ctrl.Image()
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.Version = 3
	req.BrokerID, req.ClusterID, req.IncarnationID = 2, img.ClusterID, protocol.RandomUUID()
	req.LogDirs = [][16]byte{protocol.RandomUUID()}
	req.Listeners = []kmsg.BrokerRegistrationRequestListener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 1}}
	for _, name := range slices.Sorted(maps.Keys(img.Features)) {
		req.Features = append(req.Features, kmsg.BrokerRegistrationRequestFeature{Name: name, MinSupportedVersion: img.Features[name], MaxSupportedVersion: img.Features[name]})
	}
	reg := n.ctrl.RegisterBroker(ctx, req)
	if reg.ErrorCode != 0 {
		t.Fatalf("registering broker 2: %v", kerr.ErrorForCode(reg.ErrorCode))
	}
	heartbeat := func(fence bool) {
		t.Helper()
		hb := kmsg.NewPtrBrokerHeartbeatRequest()
		hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset, hb.WantFence = 2, reg.BrokerEpoch, n.ctrl.Image().Offset, fence
		if r := n.ctrl.BrokerHeartbeat(ctx, hb); r.ErrorCode != 0 || r.IsFenced != fence {
			t.Fatalf("heartbeat of broker 2 (fence %v): %+v", fence, r)
		}
	}
	// seen waits until the node's departed-brokers state has followed the
	// controller's image to its current offset.
	seen := func(what string) {
		t.Helper()
		want := n.ctrl.Image().Offset
		deadline := time.Now().Add(10 * time.Second)
		for {
			n.b.departed.mu.Lock()
			got := n.b.departed.offset
			n.b.departed.mu.Unlock()
			if got >= want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the node's image subscription never applied %s (offset %d, at %d)", what, want, got)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	heartbeat(false)
	seen("broker 2's unfencing")
	heartbeat(true)
	seen("broker 2's fencing")
	if b := n.ctrl.Image().Brokers[2]; b == nil || !b.Fenced {
		t.Fatalf("broker 2 after WantFence: %+v, want fenced", b)
	}

	mreq := kmsg.NewPtrMetadataRequest()
	mreq.SetVersion(12)
	md := call[*kmsg.MetadataResponse](t, n.addr, mreq)
	if got := brokerIDs(md.Brokers); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("Metadata brokers %v just after broker 2's fencing, want [1 2]", got)
	}
	describe := func(includeFenced bool) string {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(2)
		req.IncludeFencedBrokers = includeFenced
		var out []string
		for _, b := range call[*kmsg.DescribeClusterResponse](t, n.addr, req).Brokers {
			out = append(out, fmt.Sprintf("%d fenced=%v", b.NodeID, b.IsFenced))
		}
		return fmt.Sprint(out)
	}
	if got := describe(false); got != "[1 fenced=false]" {
		t.Fatalf("DescribeCluster %s, want only the live broker 1", got)
	}
	if got := describe(true); got != "[1 fenced=false 2 fenced=true]" {
		t.Fatalf("DescribeCluster with fenced brokers %s, want 1 live and 2 fenced", got)
	}
}
