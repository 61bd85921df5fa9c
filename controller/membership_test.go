package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// dynQuorum is a dynamic quorum on one memNet: voters formatted with
// directory ids and endpoints ("nodeN:1"), and joiners formatted with
// none that announce themselves by calling the addressed node's
// FetchCommitted.
type dynQuorum struct {
	t     *testing.T
	net   *memNet
	nodes []*Controller
	dirs  map[int32]protocol.UUID
}

func controllerEndpoint(id int32) []metadata.Endpoint {
	return []metadata.Endpoint{{Name: "CONTROLLER", Host: fmt.Sprintf("node%d", id), Port: 1}}
}

func startDynQuorum(t *testing.T, voters int, mutate ...func(*FormatOptions)) *dynQuorum {
	t.Helper()
	q := &dynQuorum{t: t, net: &memNet{nodes: map[uint64]*Controller{}, down: map[uint64]bool{}}, dirs: map[int32]protocol.UUID{}}
	var vs []metadata.Voter
	for id := int32(1); id <= int32(voters); id++ {
		q.dirs[id] = protocol.RandomUUID()
		vs = append(vs, metadata.Voter{ID: id, DirectoryID: q.dirs[id], Endpoints: controllerEndpoint(id)})
	}
	for _, v := range vs {
		q.start(v.ID, vs, mutate...)
	}
	return q
}

// start formats and starts node id with the given initial voters (none:
// a joining controller).
func (q *dynQuorum) start(id int32, voters []metadata.Voter, mutate ...func(*FormatOptions)) *Controller {
	q.t.Helper()
	if _, ok := q.dirs[id]; !ok {
		q.dirs[id] = protocol.RandomUUID()
	}
	fsys := vfs.NewMemFS()
	opts := FormatOptions{ClusterID: "test-cluster", NodeID: id, DirectoryID: q.dirs[id], Voters: voters}
	for _, m := range mutate {
		m(&opts)
	}
	if err := Format(fsys, testDir, opts); err != nil {
		q.t.Fatal(err)
	}
	cfg := testConfig(fsys)
	cfg.NodeID = id
	cfg.Voters = []metadata.Voter{{ID: id, Endpoints: controllerEndpoint(id)}}
	cfg.Transport = memTransport{net: q.net, self: raftIDOf(id)}
	cfg.MayJoin = true
	c, err := Start(context.Background(), cfg)
	if err != nil {
		q.t.Fatal(err)
	}
	c.StartAnnouncing(q.announce)
	q.t.Cleanup(func() { c.Close() })
	q.net.mu.Lock()
	q.net.nodes[raftIDOf(id)] = c
	q.net.mu.Unlock()
	q.nodes = append(q.nodes, c)
	return c
}

// announce delivers an announcement to the node at addr, or to the first
// node that is up.
func (q *dynQuorum) announce(ctx context.Context, addr string, req *protocol.MetadataFetchRequest) (*protocol.MetadataFetchResponse, error) {
	q.net.mu.Lock()
	var to *Controller
	for rid, c := range q.net.nodes {
		if q.net.down[rid] || rid == raftIDOf(req.NodeID) {
			continue
		}
		if addr == "" || addr == fmt.Sprintf("node%d:1", nodeIDOf(rid)) {
			to = c
			break
		}
	}
	q.net.mu.Unlock()
	if to == nil {
		return nil, errors.New("unreachable")
	}
	// Encode and decode, as the wire does.
	wire := &protocol.MetadataFetchRequest{Version: 1}
	if err := wire.ReadFrom(req.AppendTo(nil)); err != nil {
		return nil, err
	}
	return to.FetchCommitted(ctx, wire), nil
}

func (q *dynQuorum) leader() *Controller {
	l := waitForLeader(q.t, q.net, q.nodes)
	waitFor(q.t, "the leader's controller active", l.Active)
	return l
}

func (q *dynQuorum) describe(c *Controller) kmsg.DescribeQuorumResponseTopicPartition {
	q.t.Helper()
	resp := c.DescribeQuorum(ctxT(q.t), describeQuorumReq(2))
	return resp.Topics[0].Partitions[0]
}

func replicaIDs(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []int32 {
	var out []int32
	for _, r := range rs {
		out = append(out, r.ReplicaID)
	}
	slices.Sort(out)
	return out
}

func addVoterReq(id int32, dir protocol.UUID, listener string) *kmsg.AddRaftVoterRequest {
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.Version = 1
	req.ClusterID = strPtr("test-cluster")
	req.TimeoutMillis = 5000
	req.VoterID = id
	req.VoterDirectoryID = dir
	req.AckWhenCommitted = true
	req.Listeners = []kmsg.AddRaftVoterRequestListener{{Name: listener, Host: fmt.Sprintf("node%d", id), Port: 1}}
	return req
}

func removeVoterReq(id int32, dir protocol.UUID) *kmsg.RemoveRaftVoterRequest {
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.ClusterID = strPtr("test-cluster")
	req.VoterID = id
	req.VoterDirectoryID = dir
	return req
}

func voterIDs(img *metadata.Image) []int32 {
	var out []int32
	for _, v := range img.Voters {
		out = append(out, v.ID)
	}
	slices.Sort(out)
	return out
}

func msgOf(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// TestAddVoter: a controller formatted with no voters follows the log as
// a learner, shows as an observer, becomes the fourth voter with
// AddRaftVoter, and counts for the majority once a voter is down; removing
// the voter that is down leaves three.
func TestAddVoter(t *testing.T) {
	q := startDynQuorum(t, 3)
	l := q.leader()
	registerBroker(t, l, 10)
	if r := createTopic(t, l, "before", 1, 1); r.ErrorCode != 0 {
		t.Fatalf("create: %+v", r)
	}
	joiner := q.start(4, nil)
	waitFor(t, "topic before on the joiner", func() bool { return joiner.Image().Topic("before") != nil })
	// An operator adds it once DescribeQuorum shows it caught up.
	waitFor(t, "node 4 a caught-up observer", func() bool {
		p := q.describe(l)
		return slices.Equal(replicaIDs(p.Observers), []int32{4}) && p.Observers[0].LastCaughtUpTimestamp > 0
	})
	p := q.describe(l)
	if !slices.Equal(replicaIDs(p.CurrentVoters), []int32{1, 2, 3}) || p.Observers[0].ReplicaDirectoryID != q.dirs[4] {
		t.Fatalf("describe quorum before the add: %+v", p)
	}
	if joiner.Active() {
		t.Fatal("a learner is active")
	}

	resp := l.AddRaftVoter(ctxT(t), addVoterReq(4, q.dirs[4], "CONTROLLER"))
	if resp.ErrorCode != 0 {
		t.Fatalf("add voter: %d %s", resp.ErrorCode, msgOf(resp.ErrorMessage))
	}
	// Committed before the answer: the leader's image has it.
	if got := voterIDs(l.Image()); !slices.Equal(got, []int32{1, 2, 3, 4}) {
		t.Fatalf("voters after add: %v", got)
	}
	if len(l.Image().Learners) != 0 {
		t.Fatalf("learners after add: %+v", l.Image().Learners)
	}
	p = q.describe(l)
	if !slices.Equal(replicaIDs(p.CurrentVoters), []int32{1, 2, 3, 4}) || len(p.Observers) != 0 {
		t.Fatalf("describe quorum after the add: voters %v observers %v", replicaIDs(p.CurrentVoters), replicaIDs(p.Observers))
	}
	if len(p.CurrentVoters) == 4 && p.CurrentVoters[3].ReplicaDirectoryID != q.dirs[4] {
		t.Fatalf("new voter's directory: %+v", p.CurrentVoters[3])
	}
	waitFor(t, "voters 1-4 on the joiner", func() bool { return slices.Equal(voterIDs(joiner.Image()), []int32{1, 2, 3, 4}) })

	// With four voters, two down is no majority, one down is.
	var down *Controller
	for _, c := range q.nodes[:3] {
		if c != l {
			down = c
			break
		}
	}
	q.net.setDown(down.raftID, true)
	if r := createTopic(t, l, "three-of-four", 1, 1); r.ErrorCode != 0 {
		t.Fatalf("create with one of four voters down: %+v", r)
	}
	waitFor(t, "topic three-of-four on the joiner", func() bool { return joiner.Image().Topic("three-of-four") != nil })

	// Remove the one that is down.
	rr := l.RemoveRaftVoter(ctxT(t), removeVoterReq(down.cfg.NodeID, q.dirs[down.cfg.NodeID]))
	if rr.ErrorCode != 0 {
		t.Fatalf("remove voter: %d %s", rr.ErrorCode, msgOf(rr.ErrorMessage))
	}
	want := withoutInt32([]int32{1, 2, 3, 4}, down.cfg.NodeID)
	if got := voterIDs(l.Image()); !slices.Equal(got, want) {
		t.Fatalf("voters after remove: %v, want %v", got, want)
	}
	p = q.describe(l)
	if !slices.Equal(replicaIDs(p.CurrentVoters), want) || !slices.Equal(replicaIDs(p.Observers), []int32{down.cfg.NodeID}) {
		t.Fatalf("describe quorum after the remove: voters %v observers %v", replicaIDs(p.CurrentVoters), replicaIDs(p.Observers))
	}
	if r := createTopic(t, l, "after-remove", 1, 1); r.ErrorCode != 0 {
		t.Fatalf("create after remove: %+v", r)
	}
	// The removed node comes back as a learner: it follows, never leads.
	q.net.setDown(down.raftID, false)
	waitFor(t, "topic after-remove on the removed node", func() bool { return down.Image().Topic("after-remove") != nil })
	if slices.Contains(voterIDs(down.Image()), down.cfg.NodeID) {
		t.Fatal("the removed node still sees itself as a voter")
	}
}

// TestRemoveLeader: the leader removing itself commits the voter set
// without it, hands leadership to another voter and stops voting.
func TestRemoveLeader(t *testing.T) {
	q := startDynQuorum(t, 3)
	l := q.leader()
	registerBroker(t, l, 10)
	rr := l.RemoveRaftVoter(ctxT(t), removeVoterReq(l.cfg.NodeID, q.dirs[l.cfg.NodeID]))
	if rr.ErrorCode != 0 {
		t.Fatalf("remove the leader: %d %s", rr.ErrorCode, msgOf(rr.ErrorMessage))
	}
	want := withoutInt32([]int32{1, 2, 3}, l.cfg.NodeID)
	if got := voterIDs(l.Image()); !slices.Equal(got, want) {
		t.Fatalf("voters: %v", got)
	}
	old := l
	var next *Controller
	waitFor(t, "a new active controller", func() bool {
		for _, c := range q.nodes {
			if c != old && c.Active() {
				next = c
				return true
			}
		}
		return false
	})
	if old.Active() {
		t.Fatal("the removed leader is still active")
	}
	if r := createTopic(t, next, "after", 1, 1); r.ErrorCode != 0 {
		t.Fatalf("create at the new leader: %+v", r)
	}
	waitFor(t, "topic after on the removed leader", func() bool { return old.Image().Topic("after") != nil })
	p := q.describe(next)
	if !slices.Equal(replicaIDs(p.CurrentVoters), want) || !slices.Equal(replicaIDs(p.Observers), []int32{old.cfg.NodeID}) {
		t.Fatalf("describe quorum: voters %v observers %v", replicaIDs(p.CurrentVoters), replicaIDs(p.Observers))
	}
	// The two voters left keep the quorum; the removed node cannot win an
	// election (it never campaigns).
	q.net.setDown(next.raftID, true)
	// That it does not become the leader within a while is the test:
	// there is no state to wait for.
	time.Sleep(300 * time.Millisecond)
	if old.Active() {
		t.Fatal("the removed node became the leader")
	}
}

// TestVoterChangeRefusals: Kafka's error codes for voter changes it does
// not make.
func TestVoterChangeRefusals(t *testing.T) {
	q := startDynQuorum(t, 3)
	l := q.leader()
	var follower *Controller
	for _, c := range q.nodes {
		if c != l {
			follower = c
			break
		}
	}
	other := q.dirs[3] // not voter 2's directory
	for _, tc := range []struct {
		name string
		add  *kmsg.AddRaftVoterRequest
		rm   *kmsg.RemoveRaftVoterRequest
		at   *Controller
		code int16
		msg  string
	}{
		{name: "duplicate", add: addVoterReq(2, q.dirs[2], "CONTROLLER"), code: kerr.DuplicateVoter.Code, msg: "The voter id for ReplicaKey(id=2"},
		{name: "not an observer", add: addVoterReq(9, protocol.RandomUUID(), "CONTROLLER"), code: kerr.RequestTimedOut.Code, msg: "since it is lagging behind"},
		{name: "no directory", add: addVoterReq(9, protocol.UUID{}, "CONTROLLER"), code: kerr.InvalidRequest.Code, msg: "Add voter request didn't include a valid voter"},
		{name: "no controller listener", add: addVoterReq(9, protocol.RandomUUID(), "OTHER"), code: kerr.InvalidRequest.Code, msg: "for the default listener CONTROLLER"},
		{name: "add at a follower", add: addVoterReq(9, protocol.RandomUUID(), "CONTROLLER"), at: follower, code: kerr.NotLeaderForPartition.Code},
		{name: "wrong directory", rm: removeVoterReq(2, other), code: kerr.VoterNotFound.Code, msg: "Cannot remove voter ReplicaKey(id=2"},
		{name: "unknown voter", rm: removeVoterReq(9, protocol.RandomUUID()), code: kerr.VoterNotFound.Code},
		{name: "remove without directory", rm: removeVoterReq(2, protocol.UUID{}), code: kerr.InvalidRequest.Code},
		{name: "remove at a follower", rm: removeVoterReq(2, q.dirs[2]), at: follower, code: kerr.NotLeaderForPartition.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := tc.at
			if at == nil {
				at = l
			}
			var code int16
			var msg string
			if tc.add != nil {
				r := at.AddRaftVoter(ctxT(t), tc.add)
				code, msg = r.ErrorCode, msgOf(r.ErrorMessage)
			} else {
				r := at.RemoveRaftVoter(ctxT(t), tc.rm)
				code, msg = r.ErrorCode, msgOf(r.ErrorMessage)
			}
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Fatalf("code %d %q, want %d %q", code, msg, tc.code, tc.msg)
			}
		})
	}
	if got := voterIDs(l.Image()); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("voters changed: %v", got)
	}
}

// TestVoterChangeNeedsKRaftVersion1: kraft.version 0 refuses changes with
// UNSUPPORTED_VERSION.
func TestVoterChangeNeedsKRaftVersion1(t *testing.T) {
	q := startDynQuorum(t, 3, func(o *FormatOptions) { o.Features = map[string]int16{metadata.KRaftVersionFeature: 0} })
	l := q.leader()
	r := l.RemoveRaftVoter(ctxT(t), removeVoterReq(2, q.dirs[2]))
	if r.ErrorCode != kerr.UnsupportedVersion.Code || msgOf(r.ErrorMessage) != "Cluster doesn't support removing voter because the kraft.version feature is 0" {
		t.Fatalf("remove with kraft.version 0: %d %q", r.ErrorCode, msgOf(r.ErrorMessage))
	}
}

// TestOneVoterChangeAtATime: while a change is not committed, another is
// refused with REQUEST_TIMED_OUT.
func TestOneVoterChangeAtATime(t *testing.T) {
	q := startDynQuorum(t, 3)
	l := q.leader()
	// Hold back the leader's appends: the first removal cannot commit.
	q.net.holdBack(func(from uint64, m *pb.Message) bool { return from == l.raftID && m.GetType() == pb.MsgApp })
	first := make(chan *kmsg.RemoveRaftVoterResponse, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		first <- l.RemoveRaftVoter(ctx, removeVoterReq(3, q.dirs[3]))
	}()
	waitFor(t, "a voter change in flight", func() bool { return l.inflightCount.Load() > 0 })
	r := l.RemoveRaftVoter(ctxT(t), removeVoterReq(2, q.dirs[2]))
	if r.ErrorCode != kerr.RequestTimedOut.Code || msgOf(r.ErrorMessage) != "Request timed out waiting for leader to handle previous voter change request" {
		t.Fatalf("second change: %d %q", r.ErrorCode, msgOf(r.ErrorMessage))
	}
	q.net.release(true)
	if r := <-first; r.ErrorCode != 0 {
		t.Fatalf("first change: %d %q", r.ErrorCode, msgOf(r.ErrorMessage))
	}
	if got := voterIDs(l.Image()); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("voters: %v", got)
	}
}

// TestUpdateVoter: UpdateRaftVoter changes a voter's endpoints.
func TestUpdateVoter(t *testing.T) {
	q := startDynQuorum(t, 3)
	l := q.leader()
	req := kmsg.NewPtrUpdateRaftVoterRequest()
	req.ClusterID = strPtr("test-cluster")
	req.CurrentLeaderEpoch = int32(l.quorum.Load().term)
	req.VoterID = 2
	req.VoterDirectoryID = q.dirs[2]
	req.Listeners = []kmsg.UpdateRaftVoterRequestListener{{Name: "CONTROLLER", Host: "moved", Port: 7}}
	req.KRaftVersionFeature.MinSupportedVersion, req.KRaftVersionFeature.MaxSupportedVersion = 0, 1
	if r := l.UpdateRaftVoter(ctxT(t), req); r.ErrorCode != 0 || r.CurrentLeader.LeaderID != l.cfg.NodeID {
		t.Fatalf("update: %+v", r)
	}
	if addr, _ := l.VoterAddress(2, "CONTROLLER"); addr != "moved:7" {
		t.Fatalf("voter 2 at %s", addr)
	}
	req.VoterDirectoryID = protocol.RandomUUID()
	if r := l.UpdateRaftVoter(ctxT(t), req); r.ErrorCode != kerr.VoterNotFound.Code {
		t.Fatalf("update of an unknown voter: %d", r.ErrorCode)
	}
	req.VoterDirectoryID = q.dirs[2]
	req.KRaftVersionFeature.MinSupportedVersion, req.KRaftVersionFeature.MaxSupportedVersion = 2, 1
	if r := l.UpdateRaftVoter(ctxT(t), req); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("update with a bad version range: %d", r.ErrorCode)
	}
}

// TestLearnersRecordVersion0: the version 0 encoding of LearnersRecord is
// frozen here (as testdata/records-v0.hex freezes the others).
func TestLearnersRecordVersion0(t *testing.T) {
	dir := protocol.UUID{16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	rec := &metadata.LearnersRecord{Learners: []metadata.Voter{{ID: 4, DirectoryID: dir, Endpoints: []metadata.Endpoint{{Name: "CONTROLLER", Host: "l", Port: 9094}}}}}
	got := fmt.Sprintf("%x", metadata.EncodeRecords([]metadata.Record{rec}))
	const frozen = "010134c901000000000100000004100f0e0d0c0b0a09080706050403020100000001000a434f4e54524f4c4c455200016c000023860000"
	recs, err := metadata.DecodeRecords(metadata.EncodeRecords([]metadata.Record{rec}))
	if err != nil || len(recs) != 1 || !voterEqual(recs[0].(*metadata.LearnersRecord).Learners[0], rec.Learners[0]) {
		t.Fatalf("round trip: %v %+v", err, recs)
	}
	if got != frozen {
		t.Fatalf("encoding %s", got)
	}
}
