package controller

// DescribeQuorum for __cluster_metadata-0, answered from a status snapshot
// the loop publishes after every Ready (so it never waits behind a write).

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// clusterMetadataTopic is the metadata log's topic name, which
// DescribeQuorum answers for.
const clusterMetadataTopic = "__cluster_metadata"

// quorumStatus is what the loop last knew about the quorum.
type quorumStatus struct {
	isLeader bool
	leaderID int32
	term     int64
	// state is Kafka's name of this node's raft state (raftmetrics.go);
	// vote the node voted for in term, -1 for none.
	state         string
	vote          int32
	highWatermark int64
	lastIndex     int64
	at            time.Time
	voters        []voterStatus
	// learners are the controllers following as raft learners, reported
	// as observers.
	learners []voterStatus
}

type voterStatus struct {
	id           int32
	logEndOffset int64
	lastFetch    time.Time // zero: unknown
	lastCaughtUp time.Time
}

// observePeer notes when a voter last answered the leader (loop).
func (c *Controller) observePeer(m *pb.Message) {
	switch m.GetType() {
	case pb.MsgAppResp, pb.MsgHeartbeatResp:
	default:
		return
	}
	now := c.now()
	c.peerLastContact[m.GetFrom()] = now
	last, _ := c.rlog.LastIndex()
	switch {
	case m.GetType() == pb.MsgAppResp && !m.GetReject():
		if m.GetIndex() >= last {
			c.peerCaughtUp[m.GetFrom()] = now
		}
	case m.GetType() == pb.MsgHeartbeatResp && c.isLeader:
		// An idle log sends only heartbeats: a follower that answers one
		// and has everything is caught up now, as a KRaft follower that
		// fetches at the log end is.
		c.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			if id == m.GetFrom() && pr.Match >= last {
				c.peerCaughtUp[id] = now
			}
		})
	}
}

// updateQuorumStatus publishes the quorum status (loop).
func (c *Controller) updateQuorumStatus() {
	st := c.rn.BasicStatus()
	last, _ := c.rlog.LastIndex()
	now := c.now()
	qs := &quorumStatus{
		isLeader:      st.RaftState == raft.StateLeader,
		leaderID:      nodeIDOf(st.Lead),
		term:          int64(st.HardState.GetTerm()),
		highWatermark: int64(st.HardState.GetCommit()),
		lastIndex:     int64(last),
		at:            now,
		state:         raftStateName(st.RaftState, st.Lead, isMember(c.confState, c.raftID) && !slices.Contains(c.confState.GetLearners(), c.raftID)),
		vote:          -1,
	}
	if v := st.HardState.GetVote(); v != raft.None {
		qs.vote = nodeIDOf(v)
	}
	var progress map[uint64]uint64
	if qs.isLeader {
		progress = map[uint64]uint64{}
		c.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			progress[id] = pr.Match
		})
	}
	status := func(rid uint64) voterStatus {
		vs := voterStatus{id: nodeIDOf(rid), logEndOffset: -1}
		switch {
		case rid == c.raftID:
			vs.logEndOffset = int64(last)
			vs.lastFetch, vs.lastCaughtUp = now, now
		case qs.isLeader:
			vs.logEndOffset = int64(progress[rid])
			vs.lastFetch = c.peerLastContact[rid]
			vs.lastCaughtUp = c.peerCaughtUp[rid]
		}
		return vs
	}
	// The voters are raft's configuration, which membership changes keep
	// in step with Image.Voters.
	for _, rid := range slices.Sorted(slices.Values(c.confState.GetVoters())) {
		qs.voters = append(qs.voters, status(rid))
	}
	for _, rid := range slices.Sorted(slices.Values(c.confState.GetLearners())) {
		qs.learners = append(qs.learners, status(rid))
	}
	c.member.Store(isMember(c.confState, c.raftID))
	c.quorum.Store(qs)
}

// DescribeQuorum describes the metadata quorum. Only the leader answers;
// other nodes answer NOT_LEADER_OR_FOLLOWER for the partition, as Kafka's
// raft client does.
func (c *Controller) DescribeQuorum(ctx context.Context, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	partitionError := func(code int16) *kmsg.DescribeQuorumResponse {
		t := kmsg.NewDescribeQuorumResponseTopic()
		t.Topic = clusterMetadataTopic
		p := kmsg.NewDescribeQuorumResponseTopicPartition()
		p.Partition = 0
		p.ErrorCode = code
		if req.Version >= 2 {
			p.ErrorMessage = strPtr(kerr.TypedErrorForCode(code).Description)
		}
		p.LeaderID = -1
		p.LeaderEpoch = -1
		p.HighWatermark = -1
		t.Partitions = append(t.Partitions, p)
		resp.Topics = append(resp.Topics, t)
		return resp
	}
	if len(req.Topics) != 1 || req.Topics[0].Topic != clusterMetadataTopic ||
		len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].Partition != 0 {
		return partitionError(kerr.UnknownTopicOrPartition.Code)
	}
	qs := c.quorum.Load()
	if qs == nil || !qs.isLeader || c.fatalErr() != nil {
		return partitionError(kerr.NotLeaderForPartition.Code)
	}
	img := c.Image()
	t := kmsg.NewDescribeQuorumResponseTopic()
	t.Topic = clusterMetadataTopic
	p := kmsg.NewDescribeQuorumResponseTopicPartition()
	p.Partition = 0
	p.LeaderID = qs.leaderID
	p.LeaderEpoch = int32(qs.term)
	p.HighWatermark = qs.highWatermark
	now := c.now()
	dirs := map[int32]protocol.UUID{}
	for _, v := range c.info.Voters {
		dirs[v.ID] = v.DirectoryID
	}
	for _, v := range img.Voters {
		dirs[v.ID] = v.DirectoryID
	}
	for _, v := range img.Learners {
		dirs[v.ID] = v.DirectoryID
	}
	for _, vs := range qs.voters {
		r := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		r.ReplicaID = vs.id
		r.ReplicaDirectoryID = dirs[vs.id]
		r.LogEndOffset = vs.logEndOffset
		if vs.id == c.cfg.NodeID {
			// The leader's own replica is always current.
			r.LogEndOffset = qs.lastIndex
			r.LastFetchTimestamp = now.UnixMilli()
			r.LastCaughtUpTimestamp = now.UnixMilli()
		} else {
			if !vs.lastFetch.IsZero() {
				r.LastFetchTimestamp = vs.lastFetch.UnixMilli()
			}
			if !vs.lastCaughtUp.IsZero() {
				r.LastCaughtUpTimestamp = vs.lastCaughtUp.UnixMilli()
			}
		}
		p.CurrentVoters = append(p.CurrentVoters, r)
	}
	members := map[int32]bool{}
	for _, vs := range qs.voters {
		members[vs.id] = true
	}
	for _, vs := range qs.learners {
		members[vs.id] = true
		r := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		r.ReplicaID = vs.id
		r.ReplicaDirectoryID = dirs[vs.id]
		r.LogEndOffset = vs.logEndOffset
		r.LastFetchTimestamp, r.LastCaughtUpTimestamp = -1, -1
		if !vs.lastFetch.IsZero() {
			r.LastFetchTimestamp = vs.lastFetch.UnixMilli()
		}
		if !vs.lastCaughtUp.IsZero() {
			r.LastCaughtUpTimestamp = vs.lastCaughtUp.UnixMilli()
		}
		p.Observers = append(p.Observers, r)
	}
	ids, observers := c.observerStates()
	for _, id := range ids {
		if members[id] {
			continue
		}
		o := observers[id]
		r := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		r.ReplicaID = id
		r.ReplicaDirectoryID = o.directoryID
		r.LogEndOffset = o.fetchOffset
		r.LastFetchTimestamp = o.lastFetch.UnixMilli()
		r.LastCaughtUpTimestamp = -1
		if !o.lastCaughtUp.IsZero() {
			r.LastCaughtUpTimestamp = o.lastCaughtUp.UnixMilli()
		}
		p.Observers = append(p.Observers, r)
	}
	t.Partitions = append(t.Partitions, p)
	resp.Topics = append(resp.Topics, t)
	if req.Version >= 2 {
		resp.Nodes = c.quorumNodes(img)
	}
	return resp
}

// quorumNodes lists the voters' listeners: from the log's voter set, else
// the configured voters.
func (c *Controller) quorumNodes(img *metadata.Image) []kmsg.DescribeQuorumResponseNode {
	eps := map[int32][]metadata.Endpoint{}
	if len(img.Voters) > 0 {
		// The committed voter set is the whole truth once there is one:
		// a removed voter's formatted entry is not listed.
		for _, v := range img.Voters {
			eps[v.ID] = v.Endpoints
		}
		return describeQuorumNodes(eps)
	}
	for _, v := range c.cfg.Voters {
		eps[v.ID] = v.Endpoints
	}
	for _, v := range c.info.Voters {
		if len(v.Endpoints) > 0 {
			eps[v.ID] = v.Endpoints
		}
	}
	for _, v := range img.Voters {
		if len(v.Endpoints) > 0 {
			eps[v.ID] = v.Endpoints
		}
	}
	return describeQuorumNodes(eps)
}

func describeQuorumNodes(eps map[int32][]metadata.Endpoint) []kmsg.DescribeQuorumResponseNode {
	var out []kmsg.DescribeQuorumResponseNode
	for _, id := range slices.Sorted(maps.Keys(eps)) {
		n := kmsg.NewDescribeQuorumResponseNode()
		n.NodeID = id
		for _, ep := range eps[id] {
			l := kmsg.NewDescribeQuorumResponseNodeListener()
			l.Name = ep.Name
			l.Host = ep.Host
			l.Port = uint16(ep.Port)
			n.Listeners = append(n.Listeners, l)
		}
		out = append(out, n)
	}
	return out
}

func init() {
	decides((*Controller).DescribeQuorum)
}

// IneffectiveQuorumKeys are KRaft's quorum keys whose mechanism etcd raft
// does without, each with the reason: a node accepts them and warns that
// they have no effect when they are set.
func IneffectiveQuorumKeys() map[string]string {
	return map[string]string{
		"metadata.max.retention.bytes":              "each snapshot compacts the metadata log up to it and replaces the previous one, so nothing older is retained",
		"metadata.max.retention.ms":                 "each snapshot compacts the metadata log up to it and replaces the previous one, so nothing older is retained",
		"metadata.log.segment.ms":                   "metadata log segments roll by size (metadata.log.segment.bytes) and are dropped at snapshots",
		"metadata.max.idle.interval.ms":             "brokers long-poll the controllers for new entries, so no no-op records are written",
		"controller.quorum.fetch.timeout.ms":        "followers notice a dead leader by controller.quorum.election.timeout.ms (raft's check-quorum and pre-vote)",
		"controller.quorum.election.backoff.max.ms": "raft randomises each election timeout between one and two controller.quorum.election.timeout.ms",
		"controller.quorum.append.linger.ms":        "the controller proposes each decision at once and batches what is already queued",
	}
}
