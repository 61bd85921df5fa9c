package group

// Group administration: DescribeGroups, ListGroups and DeleteGroups over
// both kinds of group.

import (
	"context"
	"fmt"
	"strings"

	"github.com/gregorbroker/gregor/coordinator/runtime"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups describes groups the classic way. Consumer (KIP-848)
// groups are described too, with protocol type "consumer", their assignor
// as the protocol and consumer-protocol encoded subscriptions and
// assignments, as Kafka does.
func (c *Coordinator) DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		resp.Groups = append(resp.Groups, c.describeGroup(req.Version, id, req.IncludeAuthorizedOperations))
	}
	return resp
}

func (c *Coordinator) describeGroup(version int16, id string, includeOps bool) kmsg.DescribeGroupsResponseGroup {
	out := kmsg.NewDescribeGroupsResponseGroup()
	out.Group = id
	out.AuthorizedOperations = -2147483648
	if includeOps {
		out.AuthorizedOperations = groupAuthorizedOps
	}
	out.Members = []kmsg.DescribeGroupsResponseGroupMember{}
	s, code := c.lockGroup(id)
	if code != 0 {
		out.ErrorCode = code
		return out
	}
	defer s.mu.Unlock()
	if g := s.classic[id]; g != nil {
		out.State = g.state.String()
		out.ProtocolType = g.protocolType
		stable := g.state == classicStable
		if stable {
			out.Protocol = g.protocol
		}
		for _, mid := range g.order {
			m := g.members[mid]
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
			dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
			if stable {
				dm.ProtocolMetadata = m.metadataFor(g.protocol)
				dm.MemberAssignment = m.assignment
			}
			out.Members = append(out.Members, dm)
		}
		return out
	}
	if g := s.consumer[id]; g != nil {
		out.State = g.stateName()
		out.ProtocolType = "consumer"
		out.Protocol = s.groupAssignor(g)
		for _, mid := range sortedKeys(g.members) {
			m := g.members[mid]
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.meta.InstanceID, m.meta.ClientID, m.meta.ClientHost
			dm.ProtocolMetadata = s.consumerSubscriptionBytes(g, m)
			dm.MemberAssignment = s.consumerAssignmentBytes(m)
			out.Members = append(out.Members, dm)
		}
		return out
	}
	out.State = "Dead"
	if version >= 6 {
		out.ErrorCode = kerr.GroupIDNotFound.Code
		out.ErrorMessage = strPtr(fmt.Sprintf("Group %s not found.", id))
		if s.share[id] != nil || s.streams[id] != nil {
			out.ErrorMessage = strPtr(fmt.Sprintf("Group %s is not a classic group.", id))
		}
	}
	return out
}

func (s *shard) consumerSubscriptionBytes(g *consumerGroup, m *consumerMember) []byte {
	sub := kmsg.NewConsumerMemberMetadata()
	sub.Version = 3
	sub.Generation = m.epoch
	sub.Rack = m.meta.RackID
	topics := map[string]bool{}
	for _, t := range m.meta.SubscribedTopicNames {
		topics[t] = true
	}
	if m.meta.SubscribedTopicRegex != nil {
		if r := g.regexes[*m.meta.SubscribedTopicRegex]; r != nil {
			for _, t := range r.Topics {
				topics[t] = true
			}
		}
	}
	sub.Topics = sortedKeys(topics)
	for _, tp := range toTopicPartitions(m.assigned) {
		if info, ok := s.c.topics.TopicByID(tp.TopicID); ok {
			sub.OwnedPartitions = append(sub.OwnedPartitions, kmsg.ConsumerMemberMetadataOwnedPartition{Topic: info.Name, Partitions: tp.Partitions})
		}
	}
	return sub.AppendTo(nil)
}

func (s *shard) consumerAssignmentBytes(m *consumerMember) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = 3
	for _, tp := range toTopicPartitions(m.assigned) {
		if info, ok := s.c.topics.TopicByID(tp.TopicID); ok {
			a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: info.Name, Partitions: tp.Partitions})
		}
	}
	return a.AppendTo(nil)
}

// ListGroups lists the groups of every loaded partition, filtered by state
// (v4+) and type (v5+), case-insensitively.
func (c *Coordinator) ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	resp.Groups = []kmsg.ListGroupsResponseGroup{}
	match := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	shards := c.activeShards()
	for _, s := range shards {
		s.mu.Lock()
		switch s.status {
		case runtime.ShardLoading:
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		case runtime.ShardActive:
			for _, id := range sortedKeys(s.classic) {
				g := s.classic[id]
				if match(req.StatesFilter, g.state.String()) && match(req.TypesFilter, "classic") {
					resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{
						Group: id, ProtocolType: g.protocolType, GroupState: g.state.String(), GroupType: "classic",
					})
				}
			}
			for _, id := range sortedKeys(s.consumer) {
				g := s.consumer[id]
				st := g.stateName()
				if match(req.StatesFilter, st) && match(req.TypesFilter, "consumer") {
					resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{
						Group: id, ProtocolType: "consumer", GroupState: st, GroupType: "consumer",
					})
				}
			}
			for _, id := range sortedKeys(s.share) {
				st := s.share[id].stateName()
				if match(req.StatesFilter, st) && match(req.TypesFilter, "share") {
					resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{
						Group: id, ProtocolType: "share", GroupState: st, GroupType: "share",
					})
				}
			}
			for _, id := range sortedKeys(s.streams) {
				st := s.streams[id].stateName()
				if match(req.StatesFilter, streamsStateFilterName(st)) && match(req.TypesFilter, "streams") {
					resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{
						Group: id, ProtocolType: "streams", GroupState: st, GroupType: "streams",
					})
				}
			}
		}
		s.mu.Unlock()
	}
	return resp
}

// DeleteGroups deletes empty groups with their offsets.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		r := kmsg.NewDeleteGroupsResponseGroup()
		r.Group = id
		r.ErrorCode = c.deleteGroup(ctx, id)
		resp.Groups = append(resp.Groups, r)
	}
	return resp
}

func (c *Coordinator) deleteGroup(ctx context.Context, id string) int16 {
	if id == "" {
		return kerr.InvalidGroupID.Code
	}
	s, code := c.lockGroup(id)
	if code != 0 {
		return code
	}
	defer s.mu.Unlock()
	var recs []record
	offs := s.offsets[id]
	if offs != nil {
		for _, topic := range sortedKeys(offs.topics) {
			for _, p := range sortedPartitions(offs.topics[topic]) {
				recs = append(recs, offsetTombstone(id, topic, p))
			}
		}
	}
	// Pending transactional offsets go too, as in Kafka: one tombstone per
	// partition that has no committed offset (which got one already).
	for _, tp := range s.pendingPartitions(id) {
		if offs.get(tp.topic, tp.partition) == nil {
			recs = append(recs, offsetTombstone(id, tp.topic, tp.partition))
		}
	}
	switch {
	case s.classic[id] != nil:
		g := s.classic[id]
		if g.state == classicDead {
			return kerr.GroupIDNotFound.Code
		}
		if g.state != classicEmpty {
			return kerr.NonEmptyGroup.Code
		}
		recs = append(recs, record{key: groupMetadataKey(id)})
	case s.consumer[id] != nil:
		g := s.consumer[id]
		if len(g.members) > 0 {
			return kerr.NonEmptyGroup.Code
		}
		recs = append(recs, s.deleteConsumerGroupRecords(g)...)
	case s.streams[id] != nil:
		g := s.streams[id]
		if len(g.members) > 0 {
			return kerr.NonEmptyGroup.Code
		}
		recs = append(recs, deleteStreamsGroupRecords(g)...)
	case s.share[id] != nil:
		g := s.share[id]
		if len(g.members) > 0 {
			return kerr.NonEmptyGroup.Code
		}
		if code := s.deleteShareState(ctx, g); code != 0 {
			return code
		}
		recs = append(recs, deleteShareGroupRecords(g)...)
	default:
		return kerr.GroupIDNotFound.Code
	}
	if err := s.write(ctx, recs); err != nil {
		return appendErrorCode(err)
	}
	for _, r := range recs {
		_ = s.replay(r)
	}
	if g := s.classic[id]; g != nil {
		// A simple group (never stored) has no record to tombstone.
		g.failWaiters(kerr.CoordinatorNotAvailable.Code)
		delete(s.classic, id)
	}
	delete(s.consumer, id)
	delete(s.share, id)
	delete(s.streams, id)
	return 0
}

// streamsStateFilterName is the name a ListGroups state filter must give
// to match a streams group: Kafka compares the filter with its states'
// lower-case names, in which NotReady is "not_ready" (so that the
// tools' "NotReady" matches nothing, as on Kafka).
func streamsStateFilterName(state string) string {
	if state == "NotReady" {
		return "not_ready"
	}
	return state
}
