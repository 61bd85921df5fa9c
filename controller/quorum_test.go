package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/vfs"
)

func describeQuorumReq(version int16) *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = version
	req.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	return req
}

func TestDescribeQuorumSingleNode(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	registerBroker(t, c, 1)
	for _, v := range []int16{0, 1, 2} {
		resp := c.DescribeQuorum(ctxT(t), describeQuorumReq(v))
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.LeaderID != 1 || p.LeaderEpoch < 1 || p.HighWatermark < c.Image().Offset {
			t.Fatalf("v%d partition: %+v", v, p)
		}
		if len(p.CurrentVoters) != 1 || p.CurrentVoters[0].ReplicaID != 1 || p.CurrentVoters[0].LogEndOffset < p.HighWatermark {
			t.Fatalf("v%d voters: %+v", v, p.CurrentVoters)
		}
		now := time.Now().UnixMilli()
		if ts := p.CurrentVoters[0].LastFetchTimestamp; ts <= 0 || ts > now {
			t.Fatalf("v%d last fetch %d", v, ts)
		}
		if ts := p.CurrentVoters[0].LastCaughtUpTimestamp; ts <= 0 || ts > now {
			t.Fatalf("v%d last caught up %d", v, ts)
		}
		if len(p.Observers) != 0 {
			t.Fatalf("observers %+v", p.Observers)
		}
		if v >= 2 {
			if len(resp.Nodes) != 1 || resp.Nodes[0].NodeID != 1 || len(resp.Nodes[0].Listeners) != 1 || resp.Nodes[0].Listeners[0].Port != 9093 {
				t.Fatalf("nodes %+v", resp.Nodes)
			}
		} else if resp.Nodes != nil {
			t.Fatalf("v%d has nodes", v)
		}
	}
	req := describeQuorumReq(2)
	req.Topics[0].Topic = "other"
	resp := c.DescribeQuorum(ctxT(t), req)
	if resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("wrong topic: %+v", resp.Topics[0].Partitions[0])
	}
}

func TestUpdateFeatures(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	upd := func(version int16, name string, level int16, typ int8, validateOnly bool) *kmsg.UpdateFeaturesResponse {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		req.Version = version
		req.ValidateOnly = validateOnly
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature = name
		u.MaxVersionLevel = level
		u.UpgradeType = typ
		u.AllowDowngrade = typ != upgradeTypeUpgrade
		req.FeatureUpdates = []kmsg.UpdateFeaturesRequestFeatureUpdate{u}
		return c.UpdateFeatures(ctxT(t), req)
	}
	for _, tc := range []struct {
		name  string
		resp  func() *kmsg.UpdateFeaturesResponse
		code  int16
		msg   string
		level int16 // group.version after
	}{
		{"validate only", func() *kmsg.UpdateFeaturesResponse { return upd(1, "group.version", 1, upgradeTypeUpgrade, true) }, 0, "", 0},
		{"unsupported level", func() *kmsg.UpdateFeaturesResponse { return upd(1, "group.version", 5, upgradeTypeUpgrade, false) }, kerr.InvalidUpdateVersion.Code,
			"The update failed for all features since the following feature had an error: Invalid update version 5 for feature group.version. Local controller 1 only supports versions 0-1", 0},
		{"unknown feature", func() *kmsg.UpdateFeaturesResponse { return upd(1, "nope.version", 1, upgradeTypeUpgrade, false) }, kerr.InvalidUpdateVersion.Code,
			"The update failed for all features since the following feature had an error: Invalid update version 1 for feature nope.version. Local controller 1 does not support this feature.", 0},
		{"upgrade", func() *kmsg.UpdateFeaturesResponse { return upd(1, "group.version", 1, upgradeTypeUpgrade, false) }, 0, "", 1},
		{"downgrade without type", func() *kmsg.UpdateFeaturesResponse { return upd(1, "group.version", 0, upgradeTypeUpgrade, false) }, kerr.InvalidUpdateVersion.Code,
			"The update failed for all features since the following feature had an error: Invalid update version 0 for feature group.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.", 1},
		{"metadata.version downgrade", func() *kmsg.UpdateFeaturesResponse {
			return upd(1, metadata.MetadataVersionFeature, 20, upgradeTypeSafeDowngrade, false)
		}, kerr.InvalidUpdateVersion.Code,
			"The update failed for all features since the following feature had an error: Invalid metadata.version 20. Refusing to perform the requested downgrade because it might delete metadata information.", 1},
		{"safe downgrade", func() *kmsg.UpdateFeaturesResponse {
			return upd(1, "group.version", 0, upgradeTypeSafeDowngrade, false)
		}, 0, "", 0},
		{"v0 upgrade", func() *kmsg.UpdateFeaturesResponse { return upd(0, "group.version", 1, upgradeTypeUpgrade, false) }, 0, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.resp()
			if resp.ErrorCode != tc.code {
				t.Fatalf("code %d %v, want %d", resp.ErrorCode, resp.ErrorMessage, tc.code)
			}
			if tc.msg != "" && (resp.ErrorMessage == nil || *resp.ErrorMessage != tc.msg) {
				t.Fatalf("message %v\nwant %q", *resp.ErrorMessage, tc.msg)
			}
			if tc.code == 0 && (len(resp.Results) != 1 || resp.Results[0].ErrorCode != 0) {
				t.Fatalf("results %+v", resp.Results)
			}
			if got := c.Image().Features["group.version"]; got != tc.level {
				t.Fatalf("group.version = %d, want %d", got, tc.level)
			}
		})
	}
}

// memNet connects controllers in one process: every message is cloned (a
// real transport serializes) and delivered asynchronously; links can be
// cut, and messages can be held back and released later.
type memNet struct {
	mu    sync.Mutex
	nodes map[uint64]*Controller
	down  map[uint64]bool
	// hold, when set, keeps back the messages it matches until release.
	hold func(from uint64, m *pb.Message) bool
	held []heldMessage
}

type heldMessage struct {
	from uint64
	m    *pb.Message
}

type memTransport struct {
	net  *memNet
	self uint64
}

func (t memTransport) Send(msgs []*pb.Message) {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	if t.net.down[t.self] {
		return
	}
	for _, m := range msgs {
		m := proto.Clone(m).(*pb.Message)
		if t.net.hold != nil && t.net.hold(t.self, m) {
			t.net.held = append(t.net.held, heldMessage{from: t.self, m: m})
			continue
		}
		t.net.deliver(t.self, m)
	}
}

// deliver hands m to its destination on a goroutine of its own (n.mu held).
func (n *memNet) deliver(from uint64, m *pb.Message) {
	to := n.nodes[m.GetTo()]
	if to == nil || n.down[m.GetTo()] {
		return
	}
	sender := n.nodes[from]
	go func() {
		err := to.Step(context.Background(), m)
		if m.GetType() == pb.MsgSnap && sender != nil {
			sender.ReportSnapshot(nodeIDOf(m.GetTo()), err != nil)
		}
	}()
}

func (n *memNet) setDown(id uint64, down bool) {
	n.mu.Lock()
	n.down[id] = down
	n.mu.Unlock()
}

// holdBack starts holding the messages hold matches.
func (n *memNet) holdBack(hold func(from uint64, m *pb.Message) bool) {
	n.mu.Lock()
	n.hold = hold
	n.mu.Unlock()
}

// release stops holding messages and delivers (or drops) those held.
func (n *memNet) release(deliver bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	held := n.held
	n.hold, n.held = nil, nil
	if !deliver {
		return
	}
	for _, h := range held {
		n.deliver(h.from, h.m)
	}
}

// startThreeNodes starts a quorum of three voters on one memNet.
func startThreeNodes(t *testing.T, mutate ...func(*Config)) (*memNet, []*Controller) {
	t.Helper()
	net := &memNet{nodes: map[uint64]*Controller{}, down: map[uint64]bool{}}
	voters := []metadata.Voter{{ID: 1}, {ID: 2}, {ID: 3}}
	var nodes []*Controller
	for _, id := range []int32{1, 2, 3} {
		fsys := vfs.NewMemFS()
		if err := Format(fsys, testDir, FormatOptions{ClusterID: "test-cluster", NodeID: id, Voters: voters}); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(fsys)
		cfg.NodeID = id
		cfg.Transport = memTransport{net: net, self: raftIDOf(id)}
		for _, m := range mutate {
			m(&cfg)
		}
		c, err := Start(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		net.mu.Lock()
		net.nodes[raftIDOf(id)] = c
		net.mu.Unlock()
		nodes = append(nodes, c)
	}
	return net, nodes
}

// waitForLeader returns the bootstrapped leader among the nodes that are
// not down.
func waitForLeader(t *testing.T, net *memNet, nodes []*Controller) *Controller {
	t.Helper()
	var found *Controller
	waitFor(t, "a leader among the nodes that are up", func() bool {
		for _, c := range nodes {
			net.mu.Lock()
			down := net.down[c.raftID]
			net.mu.Unlock()
			if down {
				continue
			}
			if qs := c.quorum.Load(); qs != nil && qs.isLeader && c.Image().Features[metadata.MetadataVersionFeature] != 0 {
				found = c
				return true
			}
		}
		return false
	})
	return found
}

func TestThreeNodeQuorum(t *testing.T) {
	net, nodes := startThreeNodes(t)
	l := waitForLeader(t, net, nodes)
	registerBroker(t, l, 10)
	if r := createTopic(t, l, "replicated", 3, 1); r.ErrorCode != 0 {
		t.Fatalf("create on leader: %+v", r)
	}
	// Followers apply the same log and refuse admin requests.
	for _, c := range nodes {
		waitFor(t, "topic replicated on every node", func() bool { return c.Image().Topic("replicated") != nil })
		if c != l {
			if r := createTopic(t, c, "x", 1, 1); r.ErrorCode != kerr.NotController.Code {
				t.Fatalf("follower create: %+v", r)
			}
			if r := c.DescribeQuorum(ctxT(t), describeQuorumReq(2)); r.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
				t.Fatalf("follower describe quorum: %+v", r.Topics[0].Partitions[0])
			}
		}
	}
	resp := l.DescribeQuorum(ctxT(t), describeQuorumReq(2))
	if p := resp.Topics[0].Partitions[0]; len(p.CurrentVoters) != 3 || p.LeaderID != l.cfg.NodeID {
		t.Fatalf("describe quorum: %+v", p)
	}
	// The leader fails: a new one is elected and keeps the metadata.
	net.setDown(l.raftID, true)
	old := l
	l = waitForLeader(t, net, nodes)
	if l == old {
		t.Fatal("no new leader")
	}
	if l.Image().Topic("replicated") == nil {
		t.Fatal("new leader lost the topic")
	}
	if r := createTopic(t, l, "after-failover", 1, 1); r.ErrorCode != 0 {
		t.Fatalf("create after failover: %+v", r)
	}
	// The old leader, cut off, steps down (check quorum) and refuses writes.
	waitFor(t, "the old leader to step down", func() bool { qs := old.quorum.Load(); return qs != nil && !qs.isLeader })
	net.setDown(old.raftID, false)
	waitFor(t, "topic after-failover on the old leader", func() bool { return old.Image().Topic("after-failover") != nil })
}

// TestLaggingFollowerCatchesUpFromSnapshot: a follower that misses more
// than the leader keeps in its log gets the leader's snapshot and ends with
// the same image.
func TestLaggingFollowerCatchesUpFromSnapshot(t *testing.T) {
	net, nodes := startThreeNodes(t, func(cfg *Config) { cfg.SnapshotMaxEntries = 5 })
	l := waitForLeader(t, net, nodes)
	registerBroker(t, l, 10)
	var lagging *Controller
	for _, c := range nodes {
		if c != l {
			lagging = c
			break
		}
	}
	net.setDown(lagging.raftID, true)
	for i := range 30 {
		if r := createTopic(t, l, "t"+string(rune('a'+i%26))+string(rune('a'+i/26)), 1, 1); r.ErrorCode != 0 {
			t.Fatalf("create: %+v", r)
		}
	}
	if first, _ := l.rlog.FirstIndex(); first <= uint64(lagging.Image().Offset)+1 {
		t.Fatalf("leader did not compact past the lagging follower (first index %d)", first)
	}
	net.setDown(lagging.raftID, false)
	want := l.Image()
	waitFor(t, "the lagging follower at the leader's offset", func() bool { return lagging.Image().Offset >= want.Offset })
	if imageBytes(lagging.Image()) != imageBytes(want) && lagging.Image().Offset == want.Offset {
		t.Fatal("follower image differs from the leader's after catching up")
	}
	if lagging.Image().Topics.Len() != 30 {
		t.Fatalf("follower has %d topics", lagging.Image().Topics.Len())
	}
}

// TestNoSuccessWithoutCommit (invariant 4): a leader cut off from the
// other voters cannot commit, so it never reports success, and its image
// never shows the change.
func TestNoSuccessWithoutCommit(t *testing.T) {
	net, nodes := startThreeNodes(t)
	l := waitForLeader(t, net, nodes)
	registerBroker(t, l, 10)
	for _, c := range nodes {
		if c != l {
			net.setDown(c.raftID, true)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = []kmsg.CreateTopicsRequestTopic{topicReq("lost", 1, 1)}
	resp := l.CreateTopics(ctx, req)
	if code := resp.Topics[0].ErrorCode; code != kerr.NotController.Code && code != kerr.RequestTimedOut.Code {
		t.Fatalf("create without a quorum: code %d", code)
	}
	for _, c := range nodes {
		if c.Image().Topic("lost") != nil {
			t.Fatalf("node %d shows an uncommitted topic", c.cfg.NodeID)
		}
	}
}
