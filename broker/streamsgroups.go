package broker

// StreamsGroupHeartbeat (key 88) v0 and StreamsGroupDescribe (key 89) v0:
// the membership of KIP-1071 streams groups, answered by the group
// coordinator (coordinator/group/streams.go). Both are advertised as Kafka
// 4.3 advertises them, whatever streams.version is, and answered
// UNSUPPORTED_VERSION unless streams.version >= 1 is finalized and
// group.coordinator.rebalance.protocols lists streams.
//
// As Kafka's KafkaApis: the heartbeat needs READ on the group; a topology
// may not name Kafka's internal topics or invalid topic names
// (STREAMS_INVALID_TOPOLOGY) and needs DESCRIBE on every topic it names
// (TOPIC_AUTHORIZATION_FAILED). The internal topics the coordinator finds
// missing are created here, in the background, with the client's
// principal, once CREATE on the cluster or on each topic is granted; a
// failed creation is remembered for two heartbeat intervals and reported
// in the MISSING_INTERNAL_TOPICS status. Describe needs DESCRIBE on each
// group; a group whose topology names a topic the client may not DESCRIBE
// is answered TOPIC_AUTHORIZATION_FAILED.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// streamsEnabled is Kafka's gate for the streams group APIs.
func (b *Broker) streamsEnabled() bool {
	enabled := false
	for _, p := range b.groups.cfg.RebalanceProtocols {
		if strings.EqualFold(strings.TrimSpace(p), "streams") {
			enabled = true
		}
	}
	img := b.meta.Image()
	return enabled && img != nil && img.Features["streams.version"] >= 1
}

// streamsCreateErrors remembers why creating a streams group's internal
// topic failed, until the entry expires, so that the members' heartbeats
// report it (Kafka's AutoTopicCreationManager error cache).
type streamsCreateErrors struct {
	entries map[string]streamsCreateError // guarded by Broker.autoCreateMu
}

type streamsCreateError struct {
	msg     string
	expires time.Time
}

// streamsCreateErrorCap bounds the error cache, as Kafka's does.
const streamsCreateErrorCap = 1000

func (b *Broker) handleStreamsGroupHeartbeat(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.StreamsGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
	resp.Status = []kmsg.StreamsGroupHeartbeatResponseStatus{}
	fail := func(code int16, msg string) {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		r.Respond(resp)
	}
	if !b.streamsEnabled() {
		fail(kerr.UnsupportedVersion.Code, "")
		return
	}
	if !b.can(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group) {
		fail(kerr.GroupAuthorizationFailed.Code, "")
		return
	}
	if req.Topology != nil {
		var required []string
		add := func(names ...string) {
			for _, n := range names {
				if !slices.Contains(required, n) {
					required = append(required, n)
				}
			}
		}
		for _, st := range req.Topology.Subtopologies {
			add(st.SourceTopics...)
			add(st.RepartitionSinkTopics...)
			for _, t := range st.RepartitionSourceTopics {
				add(t.Topic)
			}
			for _, t := range st.StateChangelogTopics {
				add(t.Topic)
			}
		}
		var internal, invalid []string
		for _, n := range required {
			if isInternalTopic(n) {
				internal = append(internal, n)
			}
			if metadata.TopicNameError(n) != "" {
				invalid = append(invalid, n)
			}
		}
		if len(internal) > 0 {
			fail(kerr.StreamsInvalidTopology.Code, fmt.Sprintf("Use of Kafka internal topics %s in a Kafka Streams topology is prohibited.", strings.Join(internal, ",")))
			return
		}
		if len(invalid) > 0 {
			fail(kerr.StreamsInvalidTopology.Code, fmt.Sprintf("Topic names %s are not valid topic names.", strings.Join(invalid, ",")))
			return
		}
		for _, n := range required {
			if !b.can(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, n) {
				fail(kerr.TopicAuthorizationFailed.Code, "")
				return
			}
		}
	}
	client := b.clientOf(r)
	who := identityOf(r)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		res := b.groups.coord.StreamsGroupHeartbeat(ctx, client, req)
		if len(res.Create) > 0 {
			b.createStreamsTopics(who, req.Group, res)
		}
		return res.Response
	})
}

// createStreamsTopics creates a group's missing internal topics when the
// client may, and adds to the MISSING_INTERNAL_TOPICS status why not, or
// why an earlier creation failed.
func (b *Broker) createStreamsTopics(who identity, groupID string, res group.StreamsHeartbeatResult) {
	var unauthorized []string
	if !b.allowed(who, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, "kafka-cluster") {
		for _, t := range res.Create {
			if !b.allowed(who, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, t.Topic) {
				unauthorized = append(unauthorized, t.Topic)
			}
		}
	}
	status := -1
	for i, st := range res.Response.Status {
		if st.StatusCode == 3 { // MISSING_INTERNAL_TOPICS
			status = i
		}
	}
	appendDetail := func(detail string) {
		if status >= 0 {
			res.Response.Status[status].StatusDetail += "; " + detail
			return
		}
		st := kmsg.NewStreamsGroupHeartbeatResponseStatus()
		st.StatusCode, st.StatusDetail = 3, detail
		res.Response.Status = append(res.Response.Status, st)
	}
	if len(unauthorized) > 0 {
		appendDetail(fmt.Sprintf("Unauthorized to CREATE on topics %s.", strings.Join(unauthorized, ", ")))
		return
	}
	ttl := 2 * time.Duration(b.groups.coord.StreamsHeartbeatIntervalMs(groupID)) * time.Millisecond
	b.createInBackground(res.Create, &who, func(t kmsg.CreateTopicsResponseTopic) {
		if t.ErrorCode == 0 || t.ErrorCode == kerr.TopicAlreadyExists.Code {
			return
		}
		msg := ""
		if t.ErrorMessage != nil {
			msg = *t.ErrorMessage
		}
		if msg == "" {
			if e, ok := kerr.ErrorForCode(t.ErrorCode).(*kerr.Error); ok {
				msg = e.Description
			}
		}
		b.rememberStreamsCreateError(t.Topic, msg, ttl)
	})
	if status < 0 {
		return
	}
	var failed []string
	b.autoCreateMu.Lock()
	now := time.Now()
	for _, t := range res.Create {
		if e, ok := b.streamsCreateErrors.entries[t.Topic]; ok && now.Before(e.expires) {
			failed = append(failed, fmt.Sprintf("%s (%s)", t.Topic, e.msg))
		}
	}
	b.autoCreateMu.Unlock()
	if len(failed) > 0 {
		detail := strings.Join(failed[:min(3, len(failed))], ", ")
		if len(failed) > 3 {
			detail += fmt.Sprintf(" and %d more", len(failed)-3)
		}
		res.Response.Status[status].StatusDetail += "; Creation failed: " + detail + "."
	}
}

func (b *Broker) rememberStreamsCreateError(topic, msg string, ttl time.Duration) {
	b.autoCreateMu.Lock()
	defer b.autoCreateMu.Unlock()
	if b.streamsCreateErrors.entries == nil {
		b.streamsCreateErrors.entries = map[string]streamsCreateError{}
	}
	now := time.Now()
	for name, e := range b.streamsCreateErrors.entries {
		if !now.Before(e.expires) {
			delete(b.streamsCreateErrors.entries, name)
		}
	}
	if len(b.streamsCreateErrors.entries) >= streamsCreateErrorCap {
		oldest := ""
		for name, e := range b.streamsCreateErrors.entries {
			if oldest == "" || e.expires.Before(b.streamsCreateErrors.entries[oldest].expires) {
				oldest = name
			}
		}
		delete(b.streamsCreateErrors.entries, oldest)
	}
	b.streamsCreateErrors.entries[topic] = streamsCreateError{msg: msg, expires: now.Add(ttl)}
}

func (b *Broker) handleStreamsGroupDescribe(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.StreamsGroupDescribeRequest)
	if !b.streamsEnabled() {
		resp := req.ResponseKind().(*kmsg.StreamsGroupDescribeResponse)
		for _, id := range req.Groups {
			g := kmsg.NewStreamsGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = id, kerr.UnsupportedVersion.Code
			resp.Groups = append(resp.Groups, g)
		}
		r.Respond(resp)
		return
	}
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		who := identityOf(r)
		inner := *req
		var denied []kmsg.StreamsGroupDescribeResponseGroup
		inner.Groups, denied = splitDescribable(b, who, req.Groups, func(id string) kmsg.StreamsGroupDescribeResponseGroup {
			g := kmsg.NewStreamsGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			return g
		})
		resp := b.groups.coord.StreamsGroupDescribe(ctx, &inner)
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
				g.AuthorizedOperations = b.authorizedOperations(who, kmsg.ACLResourceTypeGroup, g.Group)
			}
		}
		resp.Groups = append(denied, resp.Groups...)
		if b.authz == nil {
			return resp
		}
		msg := "The described group uses topics that the client is not authorized to describe."
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if g.Topology != nil && b.topologyUndescribable(who, g.Topology) {
				name := g.Group
				*g = kmsg.NewStreamsGroupDescribeResponseGroup()
				g.Group, g.ErrorCode, g.ErrorMessage = name, kerr.TopicAuthorizationFailed.Code, &msg
				g.Members = []kmsg.StreamsGroupDescribeResponseGroupMember{}
			}
		}
		return resp
	})
}

func (b *Broker) topologyUndescribable(who identity, t *kmsg.StreamsGroupDescribeResponseGroupTopology) bool {
	for _, st := range t.Subtopologies {
		names := slices.Clone(st.SourceTopics)
		names = append(names, st.RepartitionSinkTopics...)
		for _, ti := range st.RepartitionSourceTopics {
			names = append(names, ti.Topic)
		}
		for _, ti := range st.StateChangelogTopics {
			names = append(names, ti.Topic)
		}
		for _, n := range names {
			if !b.allowed(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, n) {
				return true
			}
		}
	}
	return false
}

func init() {
	register(api{
		key: kmsg.StreamsGroupHeartbeat, min: 0, max: 0,
		listeners:    clientListeners,
		authorizedAs: "READ on the group, DESCRIBE on each topic of the topology, CREATE on the internal topics to create",
		errorAnswer: errorAnswerOf(func(_ *kmsg.StreamsGroupHeartbeatRequest, out *kmsg.StreamsGroupHeartbeatResponse, e apiErr) {
			out.ErrorCode = e.code
			out.Status = []kmsg.StreamsGroupHeartbeatResponseStatus{}
		}),
		handle: (*Broker).handleStreamsGroupHeartbeat,
	})
	register(api{
		key: kmsg.StreamsGroupDescribe, min: 0, max: 0,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE on each group and the topics of its topology, authorized operations",
		handle:       (*Broker).handleStreamsGroupDescribe,
	})
}
