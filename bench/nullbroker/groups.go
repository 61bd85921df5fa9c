package nullbroker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group coordinator keeps no group state: each JoinGroup makes the
// joiner the only member and leader of a new generation, so the leader's
// SyncGroup carries its own assignment, which is handed back. A second
// member of the same group would simply be told it is alone too; the
// benchmark's consumers that use a group (kafka-consumer-perf-test) are
// single.

func (c *conn) findCoordinator(kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version < 4 {
		resp.NodeID, resp.Host, resp.Port = nodeID, c.srv.host, c.srv.port
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key, co.NodeID, co.Host, co.Port = key, nodeID, c.srv.host, c.srv.port
		resp.Coordinators = append(resp.Coordinators, co)
	}
	return resp
}

func (c *conn) joinGroup(kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	if len(req.Protocols) == 0 {
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return resp
	}
	member := req.MemberID
	if member == "" {
		// Assigned at once rather than through MEMBER_ID_REQUIRED: one
		// round trip fewer, and clients take either.
		member = fmt.Sprintf("%s-null-%d", c.clientID, c.srv.memberIDs.Add(1))
	}
	chosen := req.Protocols[0]
	protocolType, protocol := req.ProtocolType, chosen.Name
	resp.Generation = c.srv.generations.Add(1)
	resp.ProtocolType, resp.Protocol = &protocolType, &protocol
	resp.LeaderID, resp.MemberID = member, member
	m := kmsg.NewJoinGroupResponseMember()
	m.MemberID, m.InstanceID, m.ProtocolMetadata = member, req.InstanceID, chosen.Metadata
	resp.Members = []kmsg.JoinGroupResponseMember{m}
	return resp
}

func (c *conn) syncGroup(kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ProtocolType, resp.Protocol = req.ProtocolType, req.Protocol
	for _, a := range req.GroupAssignment {
		if a.MemberID == req.MemberID {
			resp.MemberAssignment = a.MemberAssignment
			return resp
		}
	}
	// Only a leader ever syncs here, and it assigns itself; anything else
	// rejoins.
	resp.ErrorCode = kerr.RebalanceInProgress.Code
	return resp
}

func (c *conn) heartbeat(kreq kmsg.Request) kmsg.Response { return kreq.ResponseKind() }

func (c *conn) leaveGroup(kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	for _, m := range req.Members {
		lm := kmsg.NewLeaveGroupResponseMember()
		lm.MemberID, lm.InstanceID = m.MemberID, m.InstanceID
		resp.Members = append(resp.Members, lm)
	}
	return resp
}

// offsetCommit acknowledges every partition and keeps nothing.
func (c *conn) offsetCommit(kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// offsetFetch knows no committed offset: every partition asked for gets
// -1, so the consumer applies its reset policy; "all partitions" is none.
func (c *conn) offsetFetch(kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetFetchResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition, sp.Offset, sp.LeaderEpoch = p, -1, -1
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	for _, rg := range req.Groups {
		g := kmsg.NewOffsetFetchResponseGroup()
		g.Group = rg.Group
		for _, rt := range rg.Topics {
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, p := range rt.Partitions {
				sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch = p, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			g.Topics = append(g.Topics, st)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
