package broker

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupTestNode is the package's in-process node with a small
// __consumer_offsets and no initial rebalance delay.
type groupTestNode = testNode

// startGroupTestNode starts a node whose fresh format finalizes the given
// group.version.
func startGroupTestNode(t *testing.T, groupVersion int16) *groupTestNode {
	t.Helper()
	return startTestNodeWithGroupVersion(t, map[string]string{
		"offsets.topic.num.partitions":     "3",
		"group.initial.rebalance.delay.ms": "0",
	}, groupVersion)
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
	offsets := img.Topic(group.OffsetsTopic)
	if offsets == nil || offsets.Partitions.Len() != 3 {
		t.Fatalf("offsets topic as created: %+v", offsets)
	}

	tests := []struct {
		name     string
		req      *kmsg.FindCoordinatorRequest
		wantCode []int16 // per key (v4+) or the single answer
	}{
		{"v0 group", findCoordinatorReq(0, 0, "g1"), []int16{0}},
		{"v1 group", findCoordinatorReq(1, 0, "g1"), []int16{0}},
		{"v3 unknown key type", findCoordinatorReq(3, 7, "x"), []int16{kerr.InvalidRequest.Code}},
		{"v4 batched groups", findCoordinatorReq(4, 0, "g1", "g2", "another group"), []int16{0, 0, 0}},
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

	// Transaction keys: COORDINATOR_NOT_AVAILABLE while __transaction_state
	// is created on first use, then this node, in every version.
	deadline := time.Now().Add(20 * time.Second)
	for _, v := range []int16{2, 5} {
		for {
			resp := c.roundTrip(findCoordinatorReq(v, 1, "t1", "t2")).(*kmsg.FindCoordinatorResponse)
			code, node := resp.ErrorCode, resp.NodeID
			if v >= 4 {
				code, node = resp.Coordinators[0].ErrorCode, resp.Coordinators[0].NodeID
				if resp.Coordinators[1].ErrorCode != code {
					t.Fatalf("v%d: keys answered %d and %d", v, code, resp.Coordinators[1].ErrorCode)
				}
			}
			if code == 0 && node == 1 {
				break
			}
			if code != kerr.CoordinatorNotAvailable.Code || time.Now().After(deadline) {
				t.Fatalf("v%d transaction key: %v, node %d", v, kerr.ErrorForCode(code), node)
			}
			time.Sleep(20 * time.Millisecond)
		}
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
	waitMetadataTopic(t, n, "ordered-topic") // auto-creation is not awaited

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
		kmsg.ConsumerGroupHeartbeat: {0, 1}, kmsg.ConsumerGroupDescribe: {0, 1}, kmsg.TxnOffsetCommit: {0, 5},
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
