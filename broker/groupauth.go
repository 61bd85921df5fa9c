package broker

// The group APIs' authorization beyond the group itself (groups.go says
// what each needs): which topics' offsets a principal may commit, fetch or
// delete, which groups it may list, describe or delete, and what a
// described group may show. With no authorizer each goes straight to the
// coordinator.

import (
	"context"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicName is the name a request's topic goes by: its name, or from
// v-with-ids its id's name in the image ("", false for an unknown id).
func topicName(img *metadata.Image, byID bool, name string, id [16]byte) (string, bool) {
	if !byID {
		return name, true
	}
	t := img.TopicByID(protocol.UUID(id))
	if t == nil {
		return "", false
	}
	return t.Name, true
}

// offsetCommitAuthorized commits the offsets of the topics the principal
// may READ; the others are answered TOPIC_AUTHORIZATION_FAILED. An unknown
// topic id is left for the coordinator (UNKNOWN_TOPIC_ID).
func (b *Broker) offsetCommitAuthorized(ctx context.Context, r *network.Request, req *kmsg.OffsetCommitRequest) kmsg.Response {
	if b.authz == nil {
		return b.groups.coord.OffsetCommit(ctx, req)
	}
	who, img := identityOf(r), b.meta.Image()
	inner := *req
	inner.Topics = nil
	var denied []kmsg.OffsetCommitResponseTopic
	for _, t := range req.Topics {
		name, known := topicName(img, req.Version >= 10, t.Topic, t.TopicID)
		if known && !b.allowed(who, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, name) {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			denied = append(denied, rt)
			continue
		}
		inner.Topics = append(inner.Topics, t)
	}
	if len(inner.Topics) == 0 {
		// Kafka asks the coordinator nothing then.
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = denied
		return resp
	}
	resp := b.groups.coord.OffsetCommit(ctx, &inner)
	resp.Topics = append(resp.Topics, denied...)
	return resp
}

// offsetDeleteAuthorized deletes the offsets of the topics the principal
// may READ; the others are answered TOPIC_AUTHORIZATION_FAILED.
func (b *Broker) offsetDeleteAuthorized(ctx context.Context, r *network.Request, req *kmsg.OffsetDeleteRequest) kmsg.Response {
	if b.authz == nil {
		return b.groups.coord.OffsetDelete(ctx, req)
	}
	who := identityOf(r)
	inner := *req
	inner.Topics = nil
	var denied []kmsg.OffsetDeleteResponseTopic
	for _, t := range req.Topics {
		if !b.allowed(who, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Topic) {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			denied = append(denied, rt)
			continue
		}
		inner.Topics = append(inner.Topics, t)
	}
	resp := b.groups.coord.OffsetDelete(ctx, &inner)
	resp.Topics = append(denied, resp.Topics...)
	return resp
}

// offsetFetchAuthorized answers each group the principal may DESCRIBE
// with the offsets of the topics it may DESCRIBE (all partitions: the
// others are left out; named ones: TOPIC_AUTHORIZATION_FAILED), the other
// groups GROUP_AUTHORIZATION_FAILED.
func (b *Broker) offsetFetchAuthorized(ctx context.Context, r *network.Request, req *kmsg.OffsetFetchRequest) kmsg.Response {
	if b.authz == nil {
		return b.groups.coord.OffsetFetch(ctx, req)
	}
	who, img := identityOf(r), b.meta.Image()
	byID := req.Version >= 10
	describable := func(name string, id [16]byte) bool {
		n, known := topicName(img, byID, name, id)
		return !known || b.allowed(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, n)
	}
	denyPartitions := func(ps []int32) []kmsg.OffsetFetchResponseGroupTopicPartition {
		var out []kmsg.OffsetFetchResponseGroupTopicPartition
		for _, p := range ps {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition, rp.Offset, rp.ErrorCode = p, -1, kerr.TopicAuthorizationFailed.Code
			out = append(out, rp)
		}
		return out
	}
	if req.Version >= 8 {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		for _, g := range req.Groups {
			if !b.allowed(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.Group) {
				rg := kmsg.NewOffsetFetchResponseGroup()
				rg.Group, rg.ErrorCode = g.Group, kerr.GroupAuthorizationFailed.Code
				resp.Groups = append(resp.Groups, rg)
				continue
			}
			inner := *req
			ig := g
			var denied []kmsg.OffsetFetchResponseGroupTopic
			if g.Topics != nil {
				ig.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
				for _, t := range g.Topics {
					if describable(t.Topic, t.TopicID) {
						ig.Topics = append(ig.Topics, t)
						continue
					}
					rt := kmsg.NewOffsetFetchResponseGroupTopic()
					rt.Topic, rt.TopicID, rt.Partitions = t.Topic, t.TopicID, denyPartitions(t.Partitions)
					denied = append(denied, rt)
				}
			}
			inner.Groups = []kmsg.OffsetFetchRequestGroup{ig}
			rg := b.groups.coord.OffsetFetch(ctx, &inner).Groups[0]
			if rg.ErrorCode == 0 {
				if g.Topics == nil {
					kept := rg.Topics[:0]
					for _, t := range rg.Topics {
						if describable(t.Topic, t.TopicID) {
							kept = append(kept, t)
						}
					}
					rg.Topics = kept
				}
				rg.Topics = append(rg.Topics, denied...)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
	// One group (v0-7).
	if !b.allowed(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		if req.Version < 2 {
			for _, t := range req.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.ErrorCode, rp.Metadata = p, -1, kerr.GroupAuthorizationFailed.Code, kmsg.StringPtr("")
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
		return resp
	}
	inner := *req
	var denied []kmsg.OffsetFetchResponseTopic
	if req.Topics != nil {
		inner.Topics = []kmsg.OffsetFetchRequestTopic{}
		for _, t := range req.Topics {
			if describable(t.Topic, [16]byte{}) {
				inner.Topics = append(inner.Topics, t)
				continue
			}
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			denied = append(denied, rt)
		}
	}
	resp := b.groups.coord.OffsetFetch(ctx, &inner)
	if resp.ErrorCode == 0 {
		if req.Topics == nil {
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if describable(t.Topic, [16]byte{}) {
					kept = append(kept, t)
				}
			}
			resp.Topics = kept
		}
		resp.Topics = append(resp.Topics, denied...)
	}
	return resp
}

// describeGroupsAuthorized describes the groups the principal may
// DESCRIBE (the others answered GROUP_AUTHORIZATION_FAILED, first), with
// their authorized operations when asked (v3+).
func (b *Broker) describeGroupsAuthorized(ctx context.Context, r *network.Request, req *kmsg.DescribeGroupsRequest) kmsg.Response {
	who := identityOf(r)
	inner := *req
	var denied []kmsg.DescribeGroupsResponseGroup
	inner.Groups, denied = splitDescribable(b, who, req.Groups, func(id string) kmsg.DescribeGroupsResponseGroup {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
		return rg
	})
	resp := b.groups.coord.DescribeGroups(ctx, &inner)
	if req.Version >= 3 && req.IncludeAuthorizedOperations {
		for i := range resp.Groups {
			g := &resp.Groups[i]
			g.AuthorizedOperations = operationsOmitted
			if g.ErrorCode == 0 {
				g.AuthorizedOperations = b.authorizedOperations(who, kmsg.ACLResourceTypeGroup, g.Group)
			}
		}
	}
	resp.Groups = append(denied, resp.Groups...)
	return resp
}

// listGroupsAuthorized lists every group to a principal that may DESCRIBE
// the cluster, else the groups it may DESCRIBE.
func (b *Broker) listGroupsAuthorized(ctx context.Context, r *network.Request, req *kmsg.ListGroupsRequest) kmsg.Response {
	resp := b.groups.coord.ListGroups(ctx, req)
	if b.authz == nil || resp.ErrorCode != 0 {
		return resp
	}
	who := identityOf(r)
	if b.allowedQuiet(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName) {
		return resp
	}
	kept := resp.Groups[:0]
	for _, g := range resp.Groups {
		if b.allowedQuiet(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.Group) {
			kept = append(kept, g)
		}
	}
	resp.Groups = kept
	return resp
}

// deleteGroupsAuthorized deletes the groups the principal may DELETE; the
// others are answered GROUP_AUTHORIZATION_FAILED, after them.
func (b *Broker) deleteGroupsAuthorized(ctx context.Context, r *network.Request, req *kmsg.DeleteGroupsRequest) kmsg.Response {
	if b.authz == nil {
		return b.groups.coord.DeleteGroups(ctx, req)
	}
	who := identityOf(r)
	inner := *req
	inner.Groups = nil
	var denied []kmsg.DeleteGroupsResponseGroup
	seen := map[string]bool{}
	for _, g := range req.Groups {
		if seen[g] {
			continue // Kafka answers each group once
		}
		seen[g] = true
		if !b.allowed(who, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeGroup, g) {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
			denied = append(denied, rg)
			continue
		}
		inner.Groups = append(inner.Groups, g)
	}
	resp := b.groups.coord.DeleteGroups(ctx, &inner)
	resp.Groups = append(resp.Groups, denied...)
	return resp
}

// consumerGroupDescribeAuthorized describes the groups the principal may
// DESCRIBE (the others answered GROUP_AUTHORIZATION_FAILED, first), with
// their authorized operations when asked; a group whose members'
// assignments name a topic it may not DESCRIBE is answered
// TOPIC_AUTHORIZATION_FAILED without its members.
func (b *Broker) consumerGroupDescribeAuthorized(ctx context.Context, r *network.Request, req *kmsg.ConsumerGroupDescribeRequest) kmsg.Response {
	who := identityOf(r)
	inner := *req
	var denied []kmsg.ConsumerGroupDescribeResponseGroup
	inner.Groups, denied = splitDescribable(b, who, req.Groups, func(id string) kmsg.ConsumerGroupDescribeResponseGroup {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group, rg.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
		return rg
	})
	resp := b.groups.coord.ConsumerGroupDescribe(ctx, &inner)
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = operationsOmitted
			if g.ErrorCode == 0 {
				g.AuthorizedOperations = b.authorizedOperations(who, kmsg.ACLResourceTypeGroup, g.Group)
			}
		}
	}
	resp.Groups = append(denied, resp.Groups...)
	if b.authz == nil {
		return resp
	}
	msg := "The group has described topic(s) that the client is not authorized to describe."
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if b.assignsUndescribable(who, g.Members) {
			name := g.Group
			*g = kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode, g.ErrorMessage = name, kerr.TopicAuthorizationFailed.Code, &msg
			g.Members = []kmsg.ConsumerGroupDescribeResponseGroupMember{}
		}
	}
	return resp
}

// assignsUndescribable reports whether a member's current or target
// assignment names a topic who may not DESCRIBE.
func (b *Broker) assignsUndescribable(who identity, members []kmsg.ConsumerGroupDescribeResponseGroupMember) bool {
	for _, m := range members {
		for _, a := range [][]kmsg.AssignmentTopicPartition{m.Assignment.TopicPartitions, m.TargetAssignment.TopicPartitions} {
			for _, tp := range a {
				if !b.allowed(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, tp.Topic) {
					return true
				}
			}
		}
	}
	return false
}

// splitDescribable splits ids into the groups who may DESCRIBE and, built
// by deny, the GROUP_AUTHORIZATION_FAILED answers for the others: the
// first step of every group describe API.
func splitDescribable[G any](b *Broker, who identity, ids []string, deny func(id string) G) (allowed []string, denied []G) {
	for _, id := range ids {
		if b.allowed(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, id) {
			allowed = append(allowed, id)
		} else {
			denied = append(denied, deny(id))
		}
	}
	return allowed, denied
}
