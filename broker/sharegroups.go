package broker

// ShareGroupHeartbeat (key 76) v1 and ShareGroupDescribe (key 77) v1: the
// membership of KIP-932 share groups, answered by the group coordinator
// (coordinator/group/share.go). Both are advertised as Kafka advertises
// them and answered UNSUPPORTED_VERSION unless share.version >= 1 is
// finalized.
//
// Authorization, as Kafka's KafkaApis: the heartbeat needs READ on the
// group (GROUP_AUTHORIZATION_FAILED), a member id of 1 to 36 characters
// (INVALID_REQUEST, no message) and DESCRIBE on each subscribed topic
// (TOPIC_AUTHORIZATION_FAILED); describe needs DESCRIBE on each group
// (the refused ones first in the answer), and a described group whose
// assignments name a topic the principal may not DESCRIBE is answered
// TOPIC_AUTHORIZATION_FAILED.

import (
	"context"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleShareGroupHeartbeat(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	code := b.shareRefusal(r, &req.GroupID, &req.MemberID)
	for _, t := range req.SubscribedTopicNames {
		if code == 0 && !b.can(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t) {
			code = kerr.TopicAuthorizationFailed.Code
		}
	}
	if code != 0 {
		resp.ErrorCode = code
		r.Respond(resp)
		return
	}
	client := b.clientOf(r)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.ShareGroupHeartbeat(ctx, client, req)
	})
}

func (b *Broker) handleShareGroupDescribe(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.ShareGroupDescribeRequest)
	if !b.shareEnabled() {
		resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
		for _, id := range req.GroupIDs {
			g := kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID, g.ErrorCode = id, kerr.UnsupportedVersion.Code
			resp.Groups = append(resp.Groups, g)
		}
		r.Respond(resp)
		return
	}
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		who := identityOf(r)
		inner := *req
		var denied []kmsg.ShareGroupDescribeResponseGroup
		inner.GroupIDs, denied = splitDescribable(b, who, req.GroupIDs, func(id string) kmsg.ShareGroupDescribeResponseGroup {
			g := kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			return g
		})
		resp := b.groups.coord.ShareGroupDescribe(ctx, &inner)
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
				g.AuthorizedOperations = b.authorizedOperations(who, kmsg.ACLResourceTypeGroup, g.GroupID)
			}
		}
		resp.Groups = append(denied, resp.Groups...)
		if b.authz == nil {
			return resp
		}
		msg := "The group has described topic(s) that the client is not authorized to describe."
		for i := range resp.Groups {
			g := &resp.Groups[i]
			undescribable := false
			for _, m := range g.Members {
				for _, tp := range m.Assignment.TopicPartitions {
					if !b.allowedQuiet(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, tp.Topic) {
						undescribable = true
					}
				}
			}
			if undescribable {
				id := g.GroupID
				*g = kmsg.NewShareGroupDescribeResponseGroup()
				g.GroupID, g.ErrorCode, g.ErrorMessage = id, kerr.TopicAuthorizationFailed.Code, &msg
				g.Members = []kmsg.ShareGroupDescribeResponseGroupMember{}
			}
		}
		return resp
	})
}

func init() {
	register(api{
		key: kmsg.ShareGroupHeartbeat, min: 1, max: 1,
		listeners:    clientListeners,
		authorizedAs: "READ on the group, DESCRIBE on each subscribed topic",
		errorAnswer: errorAnswerOf(func(_ *kmsg.ShareGroupHeartbeatRequest, out *kmsg.ShareGroupHeartbeatResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		handle: (*Broker).handleShareGroupHeartbeat,
	})
	register(api{
		key: kmsg.ShareGroupDescribe, min: 1, max: 1,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE on each group and its members' topics, authorized operations",
		handle:       (*Broker).handleShareGroupDescribe,
	})
}
