package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/config"
	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/gregorbroker/gregor/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupTestNode is an in-process combined node on a MemFS: controller,
// log manager and broker with a PLAINTEXT listener on a free port.
type groupTestNode struct {
	b    *Broker
	ctrl *controller.Controller
	logs *storage.Manager
	addr string
}

// startGroupTestNode starts a node whose fresh format finalizes the given
// group.version.
func startGroupTestNode(t *testing.T, groupVersion int16) *groupTestNode {
	t.Helper()
	fs := storage.NewMemFS()
	log := discardLogger()
	cfg, _, err := config.Load(config.EmbeddedDefaults(), map[string]string{
		"offsets.topic.num.partitions":     "3",
		"group.initial.rebalance.delay.ms": "0",
	})
	if err != nil {
		t.Fatalf("loading the config: %v", err)
	}
	features := map[string][2]int16{
		controller.MetadataVersionFeature: {7, controller.LatestMetadataVersion},
		controller.KRaftVersionFeature:    {0, controller.LatestKRaftVersion},
		"group.version":                   {0, 1},
	}
	voters := []controller.Voter{{ID: 1, Endpoints: []controller.Endpoint{{Name: "CONTROLLER", Host: "127.0.0.1", Port: 9093}}}}
	dirID := controller.RandomUUID()
	if err := controller.Format(fs, "/meta", controller.FormatOptions{
		ClusterID: "groups-test", NodeID: 1, DirectoryID: dirID, Voters: voters,
		Features: map[string]int16{"group.version": groupVersion},
	}); err != nil {
		t.Fatalf("formatting: %v", err)
	}
	ctrl, err := controller.Start(context.Background(), controller.Config{
		FS: fs, NodeID: 1, ClusterID: "groups-test", DirectoryID: dirID, MetadataDir: "/meta",
		Voters: voters, DefaultPartitions: 1, DefaultReplicationFactor: 1,
		Schema: config.NewControllerSchema(cfg), SupportedFeatures: features, Logger: log,
		TickInterval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("starting the controller: %v", err)
	}
	logs, err := storage.OpenManager(storage.ManagerOptions{FS: fs, Dirs: []string{"/data"}, Logger: log})
	if err != nil {
		ctrl.Close()
		t.Fatalf("opening the logs: %v", err)
	}
	gcfg := group.DefaultConfig()
	gcfg.OffsetsTopicNumPartitions = 3
	gcfg.OffsetsTopicReplicationFactor = 1
	gcfg.InitialRebalanceDelayMs = 0
	gcfg.Logger = log
	b := New(Options{
		NodeID: 1,
		Server: ServerOptions{
			Listeners:      []ListenerSpec{{Name: "PLAINTEXT", Host: "127.0.0.1", SecurityProtocol: "PLAINTEXT"}},
			MaxRequestSize: 100 << 20,
		},
		Advertised:                    []controller.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1"}},
		AutoCreateTopics:              true,
		NumPartitions:                 1,
		DefaultReplicationFactor:      1,
		OffsetsTopicPartitions:        3,
		OffsetsTopicReplicationFactor: 1,
		Groups:                        &gcfg,
		LogDirIDs:                     []controller.UUID{controller.RandomUUID()},
		SupportedFeatures:             features,
		Controller:                    ctrl,
		Logs:                          logs,
		Configs:                       config.NewProvider(cfg, log),
		Logger:                        log,
	})
	if err := b.Listen(); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		b.Shutdown()
		t.Fatalf("starting the broker: %v", err)
	}
	n := &groupTestNode{b: b, ctrl: ctrl, logs: logs, addr: b.Addrs()["PLAINTEXT"]}
	t.Cleanup(func() {
		b.Shutdown()
		logs.Close()
		ctrl.Close()
	})
	return n
}

// groupConn speaks the protocol at exact versions, with pipelining.
type groupConn struct {
	t    *testing.T
	nc   net.Conn
	br   *bufio.Reader
	corr int32
}

func (n *groupTestNode) dial(t *testing.T) *groupConn {
	t.Helper()
	nc, err := net.Dial("tcp", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	return &groupConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// send writes one request at its version (set on req) without waiting.
func (c *groupConn) send(req kmsg.Request) {
	c.t.Helper()
	c.corr++
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("groups-test")).AppendRequest(nil, req, c.corr)
	if _, err := c.nc.Write(frame); err != nil {
		c.t.Fatalf("writing %s: %v", kmsg.NameForKey(req.Key()), err)
	}
}

// recv reads the next response into resp (at req's version).
func (c *groupConn) recv(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		c.t.Fatalf("reading the answer to %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.br, body); err != nil {
		c.t.Fatal(err)
	}
	body = body[4:] // correlation id
	if req.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		body = body[1:] // no tagged fields in the header (ApiVersions keeps header v0)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decoding the answer to %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

func (c *groupConn) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	c.send(req)
	return c.recv(req)
}

func findCoordinatorReq(version int16, keyType int8, keys ...string) *kmsg.FindCoordinatorRequest {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = version
	req.CoordinatorType = keyType
	if version < 4 {
		req.CoordinatorKey = keys[0]
	} else {
		req.CoordinatorKeys = keys
	}
	return req
}

// waitGroupCoordinator asks FindCoordinator until the offsets topic
// exists and the group's partition is loaded.
func waitGroupCoordinator(t *testing.T, n *groupTestNode, c *groupConn, groupID string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp := c.roundTrip(findCoordinatorReq(4, 0, groupID)).(*kmsg.FindCoordinatorResponse)
		_, loaded := n.b.groups.coord.CoordinatorFor(groupID)
		if resp.Coordinators[0].ErrorCode == 0 && loaded == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator of %s never became available: %+v, load state %v", groupID, resp.Coordinators[0], kerr.ErrorForCode(loaded))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFindCoordinator(t *testing.T) {
	n := startGroupTestNode(t, 1)
	c := n.dial(t)
	host, port, _ := net.SplitHostPort(n.addr)

	// First use: the offsets topic is created and the answer is
	// COORDINATOR_NOT_AVAILABLE until it has a leader.
	first := c.roundTrip(findCoordinatorReq(3, 0, "g1")).(*kmsg.FindCoordinatorResponse)
	if first.ErrorCode != kerr.CoordinatorNotAvailable.Code || first.NodeID != -1 || first.Host != "" || first.Port != -1 {
		t.Fatalf("before the offsets topic exists: %+v", first)
	}
	if first.ErrorMessage == nil || *first.ErrorMessage != "The coordinator is not available." {
		t.Fatalf("error message %v", first.ErrorMessage)
	}
	waitGroupCoordinator(t, n, c, "g1")
	img := n.ctrl.Image()
	offsets := img.Topics[group.OffsetsTopic]
	if offsets == nil || len(offsets.Partitions) != 3 {
		t.Fatalf("offsets topic as created: %+v", offsets)
	}

	tests := []struct {
		name     string
		req      *kmsg.FindCoordinatorRequest
		wantCode []int16 // per key (v4+) or the single answer
	}{
		{"v0 group", findCoordinatorReq(0, 0, "g1"), []int16{0}},
		{"v1 group", findCoordinatorReq(1, 0, "g1"), []int16{0}},
		{"v2 transaction", findCoordinatorReq(2, 1, "txn"), []int16{kerr.CoordinatorNotAvailable.Code}},
		{"v3 unknown key type", findCoordinatorReq(3, 7, "x"), []int16{kerr.InvalidRequest.Code}},
		{"v4 batched groups", findCoordinatorReq(4, 0, "g1", "g2", "another group"), []int16{0, 0, 0}},
		{"v5 transactions", findCoordinatorReq(5, 1, "t1", "t2"), []int16{kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorNotAvailable.Code}},
		{"v6 share keys", findCoordinatorReq(6, 2, "g:id:0", "g:id:1"), []int16{kerr.InvalidRequest.Code, kerr.InvalidRequest.Code}},
		{"v6 unknown key type", findCoordinatorReq(6, -1, "a"), []int16{kerr.InvalidRequest.Code}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := c.roundTrip(tc.req).(*kmsg.FindCoordinatorResponse)
			check := func(code int16, node int32, h string, p int32, msg *string, key string, want int16) {
				t.Helper()
				if code != want {
					t.Fatalf("key %q: %v, want %v", key, kerr.ErrorForCode(code), kerr.ErrorForCode(want))
				}
				if want == 0 && (node != 1 || h != host || fmt.Sprint(p) != port) {
					t.Fatalf("key %q: coordinator %d at %s:%d, want 1 at %s", key, node, h, p, n.addr)
				}
				if want != 0 && (node != -1 || h != "" || p != -1) {
					t.Fatalf("key %q: an error names node %d at %s:%d", key, node, h, p)
				}
				if tc.req.Version >= 1 && tc.req.Version < 4 && (msg == nil || (want == 0) != (*msg == "NONE")) {
					t.Fatalf("key %q: error message %v", key, msg)
				}
			}
			if tc.req.Version < 4 {
				check(resp.ErrorCode, resp.NodeID, resp.Host, resp.Port, resp.ErrorMessage, tc.req.CoordinatorKey, tc.wantCode[0])
				return
			}
			if len(resp.Coordinators) != len(tc.req.CoordinatorKeys) {
				t.Fatalf("%d coordinators for %d keys", len(resp.Coordinators), len(tc.req.CoordinatorKeys))
			}
			for i, co := range resp.Coordinators {
				if co.Key != tc.req.CoordinatorKeys[i] {
					t.Fatalf("coordinator %d is for key %q, want %q", i, co.Key, tc.req.CoordinatorKeys[i])
				}
				check(co.ErrorCode, co.NodeID, co.Host, co.Port, nil, co.Key, tc.wantCode[i])
			}
		})
	}
}

// The coordinator follows leadership of the offsets topic's partitions:
// unloaded when another broker leads (parked requests answered
// NOT_COORDINATOR), loaded again with the replayed state when leadership
// comes back.
func TestGroupCoordinatorFollowsLeadership(t *testing.T) {
	n := startGroupTestNode(t, 1)
	c := n.dial(t)
	const groupID = "follow"
	waitGroupCoordinator(t, n, c, groupID)
	partition := n.b.groups.coord.PartitionFor(groupID)
	part := n.b.replicas.get(storage.TopicPartition{Topic: group.OffsetsTopic, Partition: partition})

	// A topic to commit offsets for, and a committed offset.
	resp := c.roundTrip(func() kmsg.Request {
		r := kmsg.NewPtrMetadataRequest()
		r.Version = 12
		r.AllowAutoTopicCreation = true
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("events")
		r.Topics = append(r.Topics, mt)
		return r
	}()).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("creating events: %v", kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, groupID, -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "events"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Offset = 42
	cp.Metadata = kmsg.StringPtr("kept")
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cresp := c.roundTrip(commit).(*kmsg.OffsetCommitResponse)
	if code := cresp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}

	// A JoinGroup that parks (v4+ member id round trip, then the join
	// waits for the rebalance of a group whose other member never comes).
	join := func(memberID string) *kmsg.JoinGroupRequest {
		r := kmsg.NewPtrJoinGroupRequest()
		r.Version, r.Group, r.MemberID = 5, groupID, memberID
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 30000, 60000
		r.ProtocolType = "consumer"
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}}
		return r
	}
	j := c.roundTrip(join("")).(*kmsg.JoinGroupResponse)
	if j.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %v", kerr.ErrorForCode(j.ErrorCode))
	}
	j = c.roundTrip(join(j.MemberID)).(*kmsg.JoinGroupResponse)
	if j.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(j.ErrorCode))
	}
	c2 := n.dial(t)
	j2 := c2.roundTrip(join("")).(*kmsg.JoinGroupResponse)
	parked := join(j2.MemberID)
	c2.send(parked) // rebalance: waits for the first member, which never rejoins

	leader, epoch := part.leadership()
	setLeader := func(id, epoch int32) {
		part.mu.Lock()
		part.leader, part.leaderEpoch = id, epoch
		part.mu.Unlock()
		n.b.groups.leadershipChanged(part)
	}
	time.Sleep(50 * time.Millisecond)
	setLeader(2, epoch+1)
	if r := c2.recv(parked).(*kmsg.JoinGroupResponse); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("parked join after losing leadership: %v, want NOT_COORDINATOR", kerr.ErrorForCode(r.ErrorCode))
	}
	waitCode := func(want int16) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, code := n.b.groups.coord.CoordinatorFor(groupID)
			if code == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("coordinator state %v, want %v", kerr.ErrorForCode(code), kerr.ErrorForCode(want))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitCode(kerr.NotCoordinator.Code)

	setLeader(leader, epoch+2)
	waitCode(0)
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version, fetch.Group = 7, groupID
	fresp := c.roundTrip(fetch).(*kmsg.OffsetFetchResponse)
	if len(fresp.Topics) != 1 || fresp.Topics[0].Partitions[0].Offset != 42 || *fresp.Topics[0].Partitions[0].Metadata != "kept" {
		t.Fatalf("offsets after the reload: %+v", fresp)
	}
}

// A connection's group requests are answered in order and take effect in
// order: a pipelined commit and fetch never pass each other.
func TestGroupRequestsOfAConnectionRunInOrder(t *testing.T) {
	n := startGroupTestNode(t, 1)
	c := n.dial(t)
	waitGroupCoordinator(t, n, c, "ordered")
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version, meta.AllowAutoTopicCreation = 12, true
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("ordered-topic")
	meta.Topics = append(meta.Topics, mt)
	c.roundTrip(meta)

	var reqs []kmsg.Request
	for i := range 50 {
		commit := kmsg.NewPtrOffsetCommitRequest()
		commit.Version, commit.Group, commit.Generation = 8, "ordered", -1
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic = "ordered-topic"
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Offset = int64(i)
		ct.Partitions = append(ct.Partitions, cp)
		commit.Topics = append(commit.Topics, ct)
		fetch := kmsg.NewPtrOffsetFetchRequest()
		fetch.Version, fetch.Group = 7, "ordered"
		reqs = append(reqs, commit, fetch)
	}
	for _, r := range reqs {
		c.send(r)
	}
	for i, r := range reqs {
		resp := c.recv(r)
		if f, ok := resp.(*kmsg.OffsetFetchResponse); ok {
			want := int64(i / 2)
			if len(f.Topics) != 1 || f.Topics[0].Partitions[0].Offset != want {
				t.Fatalf("fetch %d saw %+v, want the offset %d committed just before it", i/2, f.Topics, want)
			}
		}
	}
}

// The KIP-848 APIs answer UNSUPPORTED_VERSION unless group.version >= 1 is
// finalized, as Kafka does; Admin then falls back to DescribeGroups.
func TestConsumerProtocolNeedsGroupVersion(t *testing.T) {
	for _, level := range []int16{0, 1} {
		t.Run(fmt.Sprintf("group.version=%d", level), func(t *testing.T) {
			n := startGroupTestNode(t, level)
			c := n.dial(t)
			waitGroupCoordinator(t, n, c, "kip848")
			hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			hb.Version, hb.Group, hb.MemberID, hb.MemberEpoch = 1, "kip848", "m-1", 0
			hb.RebalanceTimeoutMillis = 30000
			hb.SubscribedTopicNames = []string{}
			hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			hresp := c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
			desc := kmsg.NewPtrConsumerGroupDescribeRequest()
			desc.Version, desc.Groups = 1, []string{"kip848", "other"}
			dresp := c.roundTrip(desc).(*kmsg.ConsumerGroupDescribeResponse)
			if level == 0 {
				if hresp.ErrorCode != kerr.UnsupportedVersion.Code {
					t.Fatalf("heartbeat: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(hresp.ErrorCode))
				}
				if len(dresp.Groups) != 2 || dresp.Groups[0].ErrorCode != kerr.UnsupportedVersion.Code || dresp.Groups[1].Group != "other" {
					t.Fatalf("describe: %+v", dresp.Groups)
				}
				return
			}
			if hresp.ErrorCode != 0 || hresp.MemberEpoch != 1 {
				t.Fatalf("heartbeat: %v epoch %d", kerr.ErrorForCode(hresp.ErrorCode), hresp.MemberEpoch)
			}
			if dresp.Groups[0].ErrorCode != 0 || dresp.Groups[0].State != "Stable" || dresp.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
				t.Fatalf("describe: %+v", dresp.Groups)
			}
		})
	}
}

// Every group API is advertised at the versions the coordinator honours.
func TestGroupAPIVersionsAdvertised(t *testing.T) {
	n := startGroupTestNode(t, 1)
	c := n.dial(t)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "groups-test", "1"
	resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
	want := map[kmsg.Key][2]int16{
		kmsg.FindCoordinator: {0, 6}, kmsg.JoinGroup: {0, 9}, kmsg.SyncGroup: {0, 5}, kmsg.Heartbeat: {0, 4},
		kmsg.LeaveGroup: {0, 5}, kmsg.OffsetCommit: {2, 10}, kmsg.OffsetFetch: {0, 10}, kmsg.DescribeGroups: {0, 6},
		kmsg.ListGroups: {0, 5}, kmsg.DeleteGroups: {0, 2}, kmsg.OffsetDelete: {0, 0},
		kmsg.ConsumerGroupHeartbeat: {0, 1}, kmsg.ConsumerGroupDescribe: {0, 1},
	}
	got := map[kmsg.Key][2]int16{}
	for _, k := range resp.ApiKeys {
		got[kmsg.Key(k.ApiKey)] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	var bad []string
	for k, v := range want {
		if got[k] != v {
			bad = append(bad, fmt.Sprintf("%s: %v, want %v", k.Name(), got[k], v))
		}
	}
	if len(bad) > 0 {
		t.Fatal(strings.Join(bad, "; "))
	}
}
