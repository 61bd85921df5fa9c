package controller

// Dynamic quorum membership (KIP-853): controllers that join a running
// quorum, and AddRaftVoter (key 80), RemoveRaftVoter (key 81) and
// UpdateRaftVoter (key 82), decided by the active controller with Kafka's
// rules (KafkaRaftClient, AddVoterHandler, RemoveVoterHandler,
// UpdateVoterHandler): one change at a time, only once the leader has
// committed in its term, only with kraft.version >= 1; the new voter must
// be a caught-up observer; a removed voter must match id and directory id
// and cannot be the last one.
//
// How a joining controller gets the log: as an etcd raft learner. A
// controller formatted with --no-initial-controllers starts a raft node
// with no configuration and announces itself (a MetadataFetch v1 with its
// directory id and controller endpoints and no entries wanted) to the
// active controller until it is a member. The leader adds it as a learner
// (ConfChangeV2 AddLearnerNode); from then on raft replicates to it like to
// any follower, and its WAL and snapshots hold the same log as the voters'.
// That is why learners rather than fetching like a broker observer: to
// become a voter the node needs a raft log with the leader's indexes,
// terms and configuration, and fetching would mean building one outside
// raft and switching protocols at the moment of promotion. As a learner,
// promotion is one more conf change, and a removed voter is simply demoted
// back to a learner, so it keeps following the log (a Kafka voter that is
// removed keeps fetching as an observer) and stops voting. Learners are
// the observers DescribeQuorum lists among the controllers.
//
// Every membership change is one raft entry: the ConfChangeV2 carries in
// its Context the VotersRecord and LearnersRecord that describe the new
// membership with endpoints and directory ids, so Image.Voters and
// Image.Learners change in the same entry as raft's ConfState, and the
// answer waits until that entry is applied. Each node writes a snapshot
// right after it applies a conf change: a learner that starts from an
// empty log then always gets a snapshot whose ConfState names the voters
// (the first voters are not in the log as conf changes, so replaying the
// log from index 1 would give it an empty configuration).
//
// Removing the leader: the leader, applying its own demotion, asks the
// most caught-up remaining voter to campaign at once (raft's
// TransferLeader, MsgTimeoutNow) and steps down (StepDownOnRemoval), as a
// Kafka leader resigns once the voter set without it is committed.
//
// A node with a transport (cmd/gregor gives one to a quorum of several
// voters and to a joining controller) can take learners; a single voter
// running alone has none, so it cannot grow yet.
//
// Goroutines: the announcer (announce) runs on a joining controller until
// Close; it reads member and writes leaderHint (atomics). Everything else
// here runs on the loop goroutine, or on handler goroutines that submit
// events to it.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

const (
	// announceInterval is how often a joining controller announces itself.
	announceInterval = 500 * time.Millisecond
	// caughtUpWithin: a learner counts as caught up for AddRaftVoter if it
	// had the whole log within this long (Kafka: an hour).
	caughtUpWithin = time.Hour
	// defaultVoterChangeTimeout bounds a voter change whose request names
	// no timeout.
	defaultVoterChangeTimeout = 30 * time.Second
)

// leaderHint is the active controller's address as a joining controller
// last heard it (it has no log, so no endpoints, of its own yet).
type leaderHint struct {
	id   int32
	addr string
}

// membershipPending reports whether a conf change this leader proposed is
// not yet applied (loop). A new leader has applied everything of the
// terms before its own before it serves, so only its own can be pending.
func (c *Controller) membershipPending() bool {
	return c.confChangeIndex > c.appliedIndex
}

// isMember reports whether cs names this node as a voter or a learner.
func isMember(cs *pb.ConfState, raftID uint64) bool {
	return slices.Contains(cs.GetVoters(), raftID) || slices.Contains(cs.GetLearners(), raftID)
}

// submitMembership runs fn on the loop like submit, for decisions that may
// change the raft configuration: a non-nil conf change is proposed with
// recs in its context; otherwise recs (if any) are proposed as an ordinary
// entry.
func (c *Controller) submitMembership(ctx context.Context, fn func(img *metadata.Image) (*pb.ConfChangeV2, []metadata.Record, any)) (any, error) {
	return c.submitEvent(ctx, &event{conf: fn, reply: make(chan eventResult, 1)})
}

// handleConfEvent decides a membership event (loop).
func (c *Controller) handleConfEvent(ev *event, index uint64) {
	cc, recs, val := ev.conf(c.latest())
	reply := func(err error) { ev.reply <- eventResult{val: val, err: err} }
	switch {
	case cc != nil:
		cc.Context = metadata.EncodeRecords(recs)
		_, data, err := pb.MarshalConfChange(cc)
		if err != nil {
			reply(fmt.Errorf("encoding conf change: %w", err))
			return
		}
		c.confChangeIndex = index
		c.proposeEntry(recs, index, data, func() error { return c.rn.ProposeConfChange(cc) }, reply)
	case len(recs) > 0:
		c.propose(recs, index, reply)
	default:
		// A refusal rests on nothing pending (a change in flight is
		// itself the reason for one): answered at once.
		reply(nil)
	}
}

// applyConfChangeV2 applies a committed conf change and the records in
// its context (loop).
func (c *Controller) applyConfChangeV2(e *pb.Entry, cc *pb.ConfChangeV2) error {
	if c.isLeader {
		c.handOverIfRemoved(cc)
	}
	c.confState = c.rn.ApplyConfChange(cc)
	// DescribeQuorum shows the new configuration before the change is
	// answered.
	c.updateQuorumStatus()
	if len(cc.GetContext()) == 0 {
		return nil
	}
	return c.applyRecords(e, cc.GetContext(), "metadata records of the conf change")
}

// handOverIfRemoved: a leader about to apply its own removal or demotion
// asks the remaining voter with the most of the log to campaign now
// (loop).
func (c *Controller) handOverIfRemoved(cc *pb.ConfChangeV2) {
	removed := false
	for _, ch := range cc.GetChanges() {
		if ch.GetNodeId() == c.raftID && (ch.GetType() == pb.ConfChangeRemoveNode || ch.GetType() == pb.ConfChangeAddLearnerNode) {
			removed = true
		}
	}
	if !removed {
		return
	}
	// No longer active from here: the voter asked to campaign may win
	// before this loop's turn ends, and two active controllers must never
	// be seen at once (brokers, and a client's DescribeQuorum, would
	// find both). The raft state follows when the change is applied
	// (StepDownOnRemoval).
	c.active.Store(false)
	if best := c.mostCaughtUpPeer(c.rn); best != 0 {
		c.logger.Info("removed from the voters: handing leadership over", "to", nodeIDOf(best))
		c.rn.TransferLeader(best)
	}
}

// mostCaughtUpPeer is the other voter whose log matches the leader's
// furthest (0 when there is none): the one to hand leadership to.
func (c *Controller) mostCaughtUpPeer(rn *raft.RawNode) uint64 {
	var best, bestMatch uint64
	rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == c.raftID || pr.IsLearner {
			return
		}
		if best == 0 || pr.Match > bestMatch {
			best, bestMatch = id, pr.Match
		}
	})
	return best
}

// snapshotAfterConfChange writes a snapshot at the applied index so that
// a learner never starts from the log's first entry (loop).
func (c *Controller) snapshotAfterConfChange() {
	if c.appliedIndex <= c.snapshotIndex {
		return
	}
	c.writeSnapshot()
}

// announcement handles a MetadataFetch v1 from a controller that is not a
// member: the answer names the active controller's endpoints; the active
// controller records it as an observer and adds it as a learner.
func (c *Controller) announcement(ctx context.Context, req *protocol.MetadataFetchRequest, resp *protocol.MetadataFetchResponse) {
	img := c.Image()
	resp.LeaderEndpoints = toMetadataEndpoints(c.voterEndpoints(img.LeaderID))
	if !c.Active() {
		return
	}
	c.noteObserver(req.NodeID, req.DirectoryID, -1, false)
	learner := metadata.Voter{ID: req.NodeID, DirectoryID: req.DirectoryID, Endpoints: fromMetadataEndpoints(req.Endpoints)}
	_, err := c.submitMembership(ctx, func(img *metadata.Image) (*pb.ConfChangeV2, []metadata.Record, any) {
		return c.decideLearner(img, learner)
	})
	if err != nil {
		c.logger.Debug("adding a learner", "node", req.NodeID, "err", err)
	}
}

// decideLearner adds a joining controller as a learner, or updates its
// endpoints (loop).
func (c *Controller) decideLearner(img *metadata.Image, learner metadata.Voter) (*pb.ConfChangeV2, []metadata.Record, any) {
	rid := raftIDOf(learner.ID)
	if slices.Contains(c.confState.GetVoters(), rid) || c.membershipPending() {
		return nil, nil, nil
	}
	i := slices.IndexFunc(img.Learners, func(v metadata.Voter) bool { return v.ID == learner.ID })
	learners := slices.Clone(img.Learners)
	if i >= 0 {
		learners[i] = learner
	} else {
		learners = append(learners, learner)
	}
	recs := []metadata.Record{&metadata.LearnersRecord{Learners: learners}}
	if slices.Contains(c.confState.GetLearners(), rid) {
		if i >= 0 && voterEqual(img.Learners[i], learner) {
			return nil, nil, nil
		}
		return nil, recs, nil
	}
	c.logger.Info("adding a controller as a learner", "node", learner.ID, "directory", learner.DirectoryID)
	return &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeAddLearnerNode.Enum(), NodeId: &rid}}}, recs, nil
}

func voterEqual(a, b metadata.Voter) bool {
	return a.ID == b.ID && a.DirectoryID == b.DirectoryID && slices.Equal(a.Endpoints, b.Endpoints)
}

// voterEndpoints are the endpoints of voter or learner id as this node
// knows them.
func (c *Controller) voterEndpoints(id int32) []metadata.Endpoint {
	img := c.Image()
	for _, voters := range [][]metadata.Voter{img.Voters, img.Learners, c.info.Voters, c.cfg.Voters} {
		for _, v := range voters {
			if v.ID == id && len(v.Endpoints) > 0 {
				return v.Endpoints
			}
		}
	}
	return nil
}

func toMetadataEndpoints(eps []metadata.Endpoint) []protocol.MetadataEndpoint {
	var out []protocol.MetadataEndpoint
	for _, ep := range eps {
		out = append(out, protocol.MetadataEndpoint{Name: ep.Name, Host: ep.Host, Port: ep.Port, SecurityProtocol: ep.SecurityProtocol})
	}
	return out
}

func fromMetadataEndpoints(eps []protocol.MetadataEndpoint) []metadata.Endpoint {
	var out []metadata.Endpoint
	for _, ep := range eps {
		out = append(out, metadata.Endpoint{Name: ep.Name, Host: ep.Host, Port: ep.Port, SecurityProtocol: ep.SecurityProtocol})
	}
	return out
}

// StartAnnouncing starts the announcer of a controller that may join a
// dynamic quorum: while it is not a member of the quorum it tells the
// active controller about itself through announce. Its owner calls it
// once after Start, with the client that reaches the other controllers
// (which needs the started controller itself: hence two steps). Close
// stops it.
func (c *Controller) StartAnnouncing(announce Announcer) {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed || c.announceDone != nil {
		return
	}
	c.announceDone = make(chan struct{})
	go c.announce(announce, c.announceDone)
}

// announce is the joining controller's announcer goroutine.
func (c *Controller) announce(send Announcer, done chan struct{}) {
	defer close(done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Ends the request in flight when the controller stops.
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	req := &protocol.MetadataFetchRequest{Version: 1, ClusterID: c.info.ClusterID, NodeID: c.cfg.NodeID,
		DirectoryID: c.info.DirectoryID, Endpoints: toMetadataEndpoints(c.voterEndpoints(c.cfg.NodeID))}
	ticker := time.NewTicker(announceInterval)
	defer ticker.Stop()
	for {
		if !c.member.Load() {
			var addr string
			if h := c.leaderHint.Load(); h != nil {
				addr = h.addr
			}
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := send(rctx, addr, req)
			rcancel()
			switch {
			case err != nil:
				c.logger.Debug("announcing this controller to the quorum", "to", addr, "err", err)
				c.leaderHint.Store(nil)
			case resp.LeaderID >= 0:
				if a, ok := metadata.EndpointAddress(fromMetadataEndpoints(resp.LeaderEndpoints), c.cfg.ControllerListener); ok {
					c.leaderHint.Store(&leaderHint{id: resp.LeaderID, addr: a})
				}
			}
		}
		select {
		case <-c.stop:
			return
		case <-ticker.C:
		}
	}
}

// replicaKey formats id and directory id as Kafka's ReplicaKey.toString.
func replicaKey(id int32, dir protocol.UUID) string {
	return fmt.Sprintf("ReplicaKey(id=%d, directoryId=Optional[%s])", id, dir)
}

func replicaKeys(vs []metadata.Voter) string {
	keys := make([]string, len(vs))
	for i, v := range vs {
		keys[i] = replicaKey(v.ID, v.DirectoryID)
	}
	return "[" + strings.Join(keys, ", ") + "]"
}

// voterChangeCheck is what AddRaftVoter, RemoveRaftVoter and
// UpdateRaftVoter refuse before anything else (loop): a change in flight,
// kraft.version 0.
func (c *Controller) voterChangeCheck(img *metadata.Image, what string) (int16, string) {
	if c.membershipPending() {
		return kerr.RequestTimedOut.Code, "Request timed out waiting for leader to handle previous voter change request"
	}
	if lvl := img.Features[metadata.KRaftVersionFeature]; lvl < 1 {
		return kerr.UnsupportedVersion.Code, fmt.Sprintf("Cluster doesn't support %s voter because the %s feature is %d", what, metadata.KRaftVersionFeature, lvl)
	}
	return 0, ""
}

type voterChangeResult struct {
	code int16
	msg  string
}

// leaderCheck is the refusal of a voter change at a node that cannot
// decide it now.
func (c *Controller) leaderCheck(clusterID *string) (int16, string) {
	if clusterID != nil && *clusterID != c.info.ClusterID {
		return kerr.InconsistentClusterID.Code, fmt.Sprintf("The given id \"%s\" doesn't match the cluster id \"%s\"", *clusterID, c.info.ClusterID)
	}
	if qs := c.quorum.Load(); qs == nil || !qs.isLeader || c.fatalErr() != nil {
		return kerr.NotLeaderForPartition.Code, ""
	}
	if !c.Active() {
		return kerr.RequestTimedOut.Code, "Request timed out waiting for leader to establish HWM and fence previous voter changes"
	}
	return 0, ""
}

func voterChangeContext(ctx context.Context, timeoutMs int32) (context.Context, context.CancelFunc) {
	d := defaultVoterChangeTimeout
	if timeoutMs > 0 {
		d = time.Duration(timeoutMs) * time.Millisecond
	}
	return context.WithTimeout(ctx, d)
}

// runVoterChange submits fn and turns its outcome into a code and message.
func (c *Controller) runVoterChange(ctx context.Context, timeoutMs int32, fn func(img *metadata.Image) (*pb.ConfChangeV2, []metadata.Record, any)) (int16, string) {
	ctx, cancel := voterChangeContext(ctx, timeoutMs)
	defer cancel()
	val, err := c.submitMembership(ctx, fn)
	if err != nil {
		code := errorCode(err)
		if code == kerr.NotController.Code {
			code = kerr.NotLeaderForPartition.Code
		}
		return code, err.Error()
	}
	res, _ := val.(voterChangeResult)
	return res.code, res.msg
}

// AddRaftVoter adds a caught-up learner to the voters; it answers once the
// new voter set is committed.
func (c *Controller) AddRaftVoter(ctx context.Context, req *kmsg.AddRaftVoterRequest) *kmsg.AddRaftVoterResponse {
	resp := req.ResponseKind().(*kmsg.AddRaftVoterResponse)
	fail := func(code int16, msg string) *kmsg.AddRaftVoterResponse {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if code, msg := c.leaderCheck(req.ClusterID); code != 0 {
		return fail(code, msg)
	}
	dir := protocol.UUID(req.VoterDirectoryID)
	if req.VoterID < 0 || dir == (protocol.UUID{}) {
		return fail(kerr.InvalidRequest.Code, "Add voter request didn't include a valid voter")
	}
	voter := metadata.Voter{ID: req.VoterID, DirectoryID: dir}
	for _, l := range req.Listeners {
		voter.Endpoints = append(voter.Endpoints, metadata.Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port), SecurityProtocol: 0})
	}
	if _, ok := metadata.EndpointAddress(voter.Endpoints, c.cfg.ControllerListener); !ok {
		return fail(kerr.InvalidRequest.Code, fmt.Sprintf("Add voter request didn't include the endpoint (%s) for the default listener %s", endpointsString(voter.Endpoints), c.cfg.ControllerListener))
	}
	return fail(c.runVoterChange(ctx, req.TimeoutMillis, func(img *metadata.Image) (*pb.ConfChangeV2, []metadata.Record, any) {
		return c.decideAddVoter(img, voter)
	}))
}

func (c *Controller) decideAddVoter(img *metadata.Image, voter metadata.Voter) (*pb.ConfChangeV2, []metadata.Record, any) {
	refuse := func(code int16, msg string) (*pb.ConfChangeV2, []metadata.Record, any) {
		return nil, nil, voterChangeResult{code, msg}
	}
	if code, msg := c.voterChangeCheck(img, "adding"); code != 0 {
		return refuse(code, msg)
	}
	if slices.ContainsFunc(img.Voters, func(v metadata.Voter) bool { return v.ID == voter.ID }) {
		return refuse(kerr.DuplicateVoter.Code, fmt.Sprintf("The voter id for %s is already part of the set of voters %s.", replicaKey(voter.ID, voter.DirectoryID), replicaKeys(img.Voters)))
	}
	rid := raftIDOf(voter.ID)
	i := slices.IndexFunc(img.Learners, func(v metadata.Voter) bool { return v.ID == voter.ID && v.DirectoryID == voter.DirectoryID })
	caughtUp := c.peerCaughtUp[rid]
	if i < 0 || !slices.Contains(c.confState.GetLearners(), rid) || caughtUp.IsZero() || c.now().Sub(c.peerLastContact[rid]) > caughtUpWithin {
		return refuse(kerr.RequestTimedOut.Code, fmt.Sprintf("Aborted add voter operation for %s since it is lagging behind", replicaKey(voter.ID, voter.DirectoryID)))
	}
	voters := append(slices.Clone(img.Voters), voter)
	learners := slices.Delete(slices.Clone(img.Learners), i, i+1)
	c.logger.Info("adding a voter", "node", voter.ID, "directory", voter.DirectoryID)
	cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeAddNode.Enum(), NodeId: &rid}}}
	return cc, []metadata.Record{&metadata.VotersRecord{Voters: voters}, &metadata.LearnersRecord{Learners: learners}}, voterChangeResult{}
}

// RemoveRaftVoter demotes a voter to a learner; it answers once the new
// voter set is committed.
func (c *Controller) RemoveRaftVoter(ctx context.Context, req *kmsg.RemoveRaftVoterRequest) *kmsg.RemoveRaftVoterResponse {
	resp := req.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	fail := func(code int16, msg string) *kmsg.RemoveRaftVoterResponse {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if code, msg := c.leaderCheck(req.ClusterID); code != 0 {
		return fail(code, msg)
	}
	dir := protocol.UUID(req.VoterDirectoryID)
	if req.VoterID < 0 || dir == (protocol.UUID{}) {
		return fail(kerr.InvalidRequest.Code, "Remove voter request didn't include a valid voter")
	}
	return fail(c.runVoterChange(ctx, 0, func(img *metadata.Image) (*pb.ConfChangeV2, []metadata.Record, any) {
		return c.decideRemoveVoter(img, req.VoterID, dir)
	}))
}

func (c *Controller) decideRemoveVoter(img *metadata.Image, id int32, dir protocol.UUID) (*pb.ConfChangeV2, []metadata.Record, any) {
	refuse := func(code int16, msg string) (*pb.ConfChangeV2, []metadata.Record, any) {
		return nil, nil, voterChangeResult{code, msg}
	}
	if code, msg := c.voterChangeCheck(img, "removing"); code != 0 {
		return refuse(code, msg)
	}
	i := slices.IndexFunc(img.Voters, func(v metadata.Voter) bool { return v.ID == id && v.DirectoryID == dir })
	if i < 0 || len(img.Voters) <= 1 {
		return refuse(kerr.VoterNotFound.Code, fmt.Sprintf("Cannot remove voter %s from the set of voters %s", replicaKey(id, dir), replicaKeys(img.Voters)))
	}
	removed := img.Voters[i]
	voters := slices.Delete(slices.Clone(img.Voters), i, i+1)
	learners := append(slices.DeleteFunc(slices.Clone(img.Learners), func(v metadata.Voter) bool { return v.ID == id }), removed)
	rid := raftIDOf(id)
	c.logger.Info("removing a voter", "node", id, "directory", dir)
	cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeAddLearnerNode.Enum(), NodeId: &rid}}}
	return cc, []metadata.Record{&metadata.VotersRecord{Voters: voters}, &metadata.LearnersRecord{Learners: learners}}, voterChangeResult{}
}

// UpdateRaftVoter changes a voter's endpoints; unlike Kafka (which answers
// once the leader has written it) it answers once the change is
// committed.
func (c *Controller) UpdateRaftVoter(ctx context.Context, req *kmsg.UpdateRaftVoterRequest) *kmsg.UpdateRaftVoterResponse {
	resp := req.ResponseKind().(*kmsg.UpdateRaftVoterResponse)
	resp.CurrentLeader.LeaderID, resp.CurrentLeader.LeaderEpoch = -1, -1
	if qs := c.quorum.Load(); qs != nil {
		resp.CurrentLeader.LeaderID, resp.CurrentLeader.LeaderEpoch = qs.leaderID, int32(qs.term)
		for _, ep := range c.voterEndpoints(qs.leaderID) {
			if ep.Name == c.cfg.ControllerListener {
				resp.CurrentLeader.Host, resp.CurrentLeader.Port = ep.Host, ep.Port
			}
		}
	}
	fail := func(code int16, _ string) *kmsg.UpdateRaftVoterResponse {
		resp.ErrorCode = code
		return resp
	}
	if code, msg := c.leaderCheck(req.ClusterID); code != 0 {
		return fail(code, msg)
	}
	if qs := c.quorum.Load(); int64(req.CurrentLeaderEpoch) < qs.term {
		return fail(kerr.FencedLeaderEpoch.Code, "")
	} else if int64(req.CurrentLeaderEpoch) > qs.term {
		return fail(kerr.UnknownLeaderEpoch.Code, "")
	}
	dir := protocol.UUID(req.VoterDirectoryID)
	if req.VoterID < 0 || dir == (protocol.UUID{}) {
		return fail(kerr.InvalidRequest.Code, "")
	}
	voter := metadata.Voter{ID: req.VoterID, DirectoryID: dir}
	for _, l := range req.Listeners {
		voter.Endpoints = append(voter.Endpoints, metadata.Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port), SecurityProtocol: 0})
	}
	if _, ok := metadata.EndpointAddress(voter.Endpoints, c.cfg.ControllerListener); !ok {
		return fail(kerr.InvalidRequest.Code, "")
	}
	kv := req.KRaftVersionFeature
	if kv.MinSupportedVersion < 0 || kv.MaxSupportedVersion < 0 || kv.MaxSupportedVersion < kv.MinSupportedVersion {
		return fail(kerr.InvalidRequest.Code, "")
	}
	return fail(c.runVoterChange(ctx, 0, func(img *metadata.Image) (*pb.ConfChangeV2, []metadata.Record, any) {
		refuse := func(code int16) (*pb.ConfChangeV2, []metadata.Record, any) {
			return nil, nil, voterChangeResult{code: code}
		}
		if code, _ := c.voterChangeCheck(img, "updating"); code != 0 {
			return refuse(code)
		}
		lvl := img.Features[metadata.KRaftVersionFeature]
		if kv.MinSupportedVersion > lvl || kv.MaxSupportedVersion < lvl {
			return refuse(kerr.InvalidRequest.Code)
		}
		i := slices.IndexFunc(img.Voters, func(v metadata.Voter) bool { return v.ID == voter.ID && v.DirectoryID == voter.DirectoryID })
		if i < 0 {
			return refuse(kerr.VoterNotFound.Code)
		}
		voters := slices.Clone(img.Voters)
		voters[i] = voter
		return nil, []metadata.Record{&metadata.VotersRecord{Voters: voters}}, voterChangeResult{}
	}))
}

func endpointsString(eps []metadata.Endpoint) string {
	parts := make([]string, len(eps))
	for i, ep := range eps {
		parts[i] = ep.Name + "://" + ep.Addr()
	}
	return "Endpoints(endpoints={" + strings.Join(parts, ", ") + "})"
}

func init() {
	decides((*Controller).AddRaftVoter)
	decides((*Controller).RemoveRaftVoter)
	decides((*Controller).UpdateRaftVoter)
}
