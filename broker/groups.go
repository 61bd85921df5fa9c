package broker

// The group APIs, answered by the group coordinator (coordinator/group):
//
//	JoinGroup 0-9, SyncGroup 0-5, Heartbeat 0-4, LeaveGroup 0-5,
//	OffsetCommit 2-10, OffsetFetch 0-10, DescribeGroups 0-6,
//	ListGroups 0-5, DeleteGroups 0-2, OffsetDelete 0,
//	ConsumerGroupHeartbeat 0-1, ConsumerGroupDescribe 0-1.
//
// DeleteGroups v3 (per-group error messages) is newer than Kafka 4.3 and is
// not advertised. ConsumerGroupHeartbeat and ConsumerGroupDescribe are
// advertised as Kafka advertises them, and answered UNSUPPORTED_VERSION
// unless the KIP-848 protocol is enabled: "consumer" in
// group.coordinator.rebalance.protocols and group.version >= 1 finalized.
// Admin falls back to DescribeGroups on that answer.
//
// Every group request runs off the connection's reader goroutine (a
// JoinGroup parks until its rebalance completes; commits wait for their
// append), and the group requests of one connection run one after the
// other, in arrival order: Kafka handles a connection's requests one at a
// time, so a client's pipelined commit and fetch never pass each other.
//
// The coordinator's shards are loaded and unloaded with the leadership of
// their __consumer_offsets partitions by the coordinator runtime
// (coordinator/runtime); this file only wires it in.
//
// Authorization (Kafka's KafkaApis): READ on the group to join, sync,
// heartbeat, leave, commit offsets and send consumer-protocol heartbeats;
// DESCRIBE to fetch offsets, describe it and find it; DELETE to delete it
// or its offsets; a refusal is GROUP_AUTHORIZATION_FAILED as each API
// carries it. Offsets of topics the principal may not READ (commit,
// delete) or DESCRIBE (fetch) are answered TOPIC_AUTHORIZATION_FAILED;
// ListGroups lists only the groups it may DESCRIBE unless it may DESCRIBE
// the cluster; a consumer-protocol member subscribing to a topic it may
// not DESCRIBE is refused TOPIC_AUTHORIZATION_FAILED, its regex matches
// only those it may; a described group whose assignments name such a
// topic is answered TOPIC_AUTHORIZATION_FAILED (groupauth.go).
//
// Goroutines and locks: connMu guards connTails, the last group request
// queued per connection; it is a leaf lock (LOCKS.md).

import (
	"time"

	"context"
	"github.com/gregorbroker/gregor/metrics"
	"net"
	"strings"
	"sync"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/gregorbroker/gregor/coordinator/runtime"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupCoordinator is the group coordinator inside the broker.
type groupCoordinator struct {
	cfg     group.Config
	coord   *group.Coordinator
	runtime *runtime.Runtime
	// loadTimes are the milliseconds its partitions took to load
	// (coordmetrics.go).
	loadTimes metrics.Window

	connMu    sync.Mutex
	connTails map[*network.Conn]chan struct{}
}

// startGroups builds the coordinator and its runtime. The group-to-
// partition mapping uses the partition count of an existing
// __consumer_offsets (it cannot change once groups live there) and
// offsets.topic.num.partitions otherwise, as Kafka does.
func (b *Broker) startGroups(ctx context.Context) *groupCoordinator {
	cfg := group.DefaultConfig()
	if b.opts.Groups != nil {
		cfg = *b.opts.Groups
	} else {
		cfg.OffsetsTopicNumPartitions = b.opts.OffsetsTopicPartitions
		cfg.OffsetsTopicReplicationFactor = b.opts.OffsetsTopicReplicationFactor
	}
	spec := cfg.TopicSpec()
	if img := b.meta.Image(); img != nil {
		if t := img.Topic(spec.Name); t != nil && t.Partitions.Len() > 0 {
			cfg.OffsetsTopicNumPartitions = int32(t.Partitions.Len())
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = b.log.With("component", "group-coordinator")
	}
	if cfg.Now == nil {
		cfg.Now = b.now
	}
	if cfg.GroupConfigs == nil && b.opts.Configs != nil {
		cfg.GroupConfigs = b.groupConfigs
	}
	if cfg.ShareState == nil {
		cfg.ShareState = &sharePersister{b: b}
	}
	g := &groupCoordinator{cfg: cfg, coord: group.New(cfg, imageTopics{meta: b.meta}), connTails: map[*network.Conn]chan struct{}{}}
	g.runtime = runtime.Start(ctx, runtime.Options{
		Topic:       spec,
		Coordinator: g.coord,
		Replicas:    b.replicas,
		CreateTopic: b.createInternalTopic,
		Logger:      cfg.Logger,
		Loaded:      func(took time.Duration) { g.loadTimes.Record(millis(took), b.now()) },
	})
	return g
}

// groupConfigs is the coordinator's GroupConfigs lookup: the group's
// dynamic configs in the current metadata image (an atomic load; no
// locks), so a committed change reaches the group's next heartbeat.
func (b *Broker) groupConfigs(groupID string) (group.DynamicConfig, bool) {
	g, ok := b.opts.Configs.GroupConfig(b.meta.Image(), groupID)
	if !ok {
		return group.DynamicConfig{}, false
	}
	return group.DynamicConfig{
		ConsumerSessionTimeoutMs: g.ConsumerSessionTimeoutMs, ConsumerHeartbeatIntervalMs: g.ConsumerHeartbeatIntervalMs,
		ShareSessionTimeoutMs: g.ShareSessionTimeoutMs, ShareHeartbeatIntervalMs: g.ShareHeartbeatIntervalMs,
		ShareAssignmentIntervalMs:  g.ShareAssignmentIntervalMs,
		StreamsSessionTimeoutMs:    g.StreamsSessionTimeoutMs,
		StreamsHeartbeatIntervalMs: g.StreamsHeartbeatIntervalMs,
		StreamsNumStandbyReplicas:  g.StreamsNumStandbyReplicas, StreamsInitialRebalanceDelayMs: g.StreamsInitialRebalanceDelayMs,
		StreamsAssignmentIntervalMs: g.StreamsAssignmentIntervalMs,
	}, true
}

// imageTopics answers the coordinator's topic questions from the current
// metadata image (an atomic load; no locks).
type imageTopics struct{ meta MetadataView }

func topicInfo(t *metadata.Topic) group.TopicInfo {
	return group.TopicInfo{Name: t.Name, ID: t.ID, Partitions: int32(t.Partitions.Len())}
}

func (it imageTopics) TopicByName(name string) (group.TopicInfo, bool) {
	img := it.meta.Image()
	if img == nil {
		return group.TopicInfo{}, false
	}
	t := img.Topic(name)
	if t == nil {
		return group.TopicInfo{}, false
	}
	return topicInfo(t), true
}

func (it imageTopics) TopicByID(id [16]byte) (group.TopicInfo, bool) {
	img := it.meta.Image()
	if img == nil {
		return group.TopicInfo{}, false
	}
	t := img.TopicByID(protocol.UUID(id))
	if t == nil {
		return group.TopicInfo{}, false
	}
	return topicInfo(t), true
}

func (it imageTopics) TopicNames() []string {
	img := it.meta.Image()
	if img == nil {
		return nil
	}
	names := make([]string, 0, img.Topics.Len())
	for name := range img.Topics.All() {
		names = append(names, name)
	}
	return names
}

// serveGroupRequest runs fn for r after the connection's previous group
// request has been handled, on a goroutine of its own.
func (b *Broker) serveGroupRequest(ctx context.Context, r *network.Request, fn func(ctx context.Context) kmsg.Response) {
	g := b.groups
	c := r.Conn()
	g.connMu.Lock()
	prev := g.connTails[c]
	done := make(chan struct{})
	g.connTails[c] = done
	g.connMu.Unlock()
	r.GoAsync(func() {
		defer func() {
			close(done)
			g.connMu.Lock()
			if g.connTails[c] == done {
				delete(g.connTails, c)
			}
			g.connMu.Unlock()
		}()
		if prev != nil {
			<-prev
		}
		r.Respond(fn(ctx))
	})
}

// clientOf is the member identity Kafka records: the client id and the
// peer address as Java prints an InetAddress ("/127.0.0.1"), and which
// topics its principal may describe.
func (b *Broker) clientOf(r *network.Request) group.Client {
	host := r.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	c := group.Client{ID: r.Header.ClientID, Host: "/" + host}
	if b.authz != nil {
		who := identityOf(r)
		c.DescribeTopic = func(topic string) bool {
			return b.allowedQuiet(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, topic)
		}
	}
	return c
}

// groupDenied answers r GROUP_AUTHORIZATION_FAILED when its principal may
// not do op on the group, and reports whether it did.
func (b *Broker) groupDenied(r *network.Request, op kmsg.ACLOperation, group string) bool {
	if b.can(r, op, kmsg.ACLResourceTypeGroup, group) {
		return false
	}
	r.Respond(errorResponse(r.Body, errCode(kerr.GroupAuthorizationFailed)))
	return true
}

// consumerProtocolEnabled is Kafka's gate for the KIP-848 APIs.
func (b *Broker) consumerProtocolEnabled() bool {
	enabled := false
	for _, p := range b.groups.cfg.RebalanceProtocols {
		if strings.EqualFold(strings.TrimSpace(p), "consumer") {
			enabled = true
		}
	}
	if !enabled {
		return false
	}
	img := b.meta.Image()
	return img != nil && img.Features["group.version"] >= 1
}

func (b *Broker) handleJoinGroup(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.JoinGroupRequest)
	if b.groupDenied(r, kmsg.ACLOperationRead, req.Group) {
		return
	}
	client := b.clientOf(r)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.JoinGroup(ctx, client, req)
	})
}

func (b *Broker) handleSyncGroup(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.SyncGroupRequest)
	// A v5+ request without its protocol type and name is refused
	// INCONSISTENT_GROUP_PROTOCOL (by the coordinator) before it is
	// authorized, as in Kafka.
	if (r.Version() < 5 || req.ProtocolType != nil && req.Protocol != nil) && b.groupDenied(r, kmsg.ACLOperationRead, req.Group) {
		return
	}
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.SyncGroup(ctx, req)
	})
}

func (b *Broker) handleHeartbeat(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.HeartbeatRequest)
	if b.groupDenied(r, kmsg.ACLOperationRead, req.Group) {
		return
	}
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.Heartbeat(ctx, req)
	})
}

func (b *Broker) handleLeaveGroup(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.LeaveGroupRequest)
	if b.groupDenied(r, kmsg.ACLOperationRead, req.Group) {
		return
	}
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.LeaveGroup(ctx, req)
	})
}

func (b *Broker) handleOffsetCommit(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.OffsetCommitRequest)
	if b.groupDenied(r, kmsg.ACLOperationRead, req.Group) {
		return
	}
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.offsetCommitAuthorized(ctx, r, req)
	})
}

func (b *Broker) handleOffsetFetch(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.OffsetFetchRequest)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.offsetFetchAuthorized(ctx, r, req)
	})
}

func (b *Broker) handleDescribeGroups(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DescribeGroupsRequest)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.describeGroupsAuthorized(ctx, r, req)
	})
}

func (b *Broker) handleListGroups(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.ListGroupsRequest)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.listGroupsAuthorized(ctx, r, req)
	})
}

func (b *Broker) handleDeleteGroups(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DeleteGroupsRequest)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.deleteGroupsAuthorized(ctx, r, req)
	})
}

func (b *Broker) handleOffsetDelete(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.OffsetDeleteRequest)
	if b.groupDenied(r, kmsg.ACLOperationDelete, req.Group) {
		return
	}
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.offsetDeleteAuthorized(ctx, r, req)
	})
}

func (b *Broker) handleConsumerGroupHeartbeat(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	if !b.consumerProtocolEnabled() {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		r.Respond(resp)
		return
	}
	if b.groupDenied(r, kmsg.ACLOperationRead, req.Group) {
		return
	}
	for _, t := range req.SubscribedTopicNames {
		if !b.can(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t) {
			r.Respond(errorResponse(req, errCode(kerr.TopicAuthorizationFailed)))
			return
		}
	}
	client := b.clientOf(r)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.ConsumerGroupHeartbeat(ctx, client, req)
	})
}

func (b *Broker) handleConsumerGroupDescribe(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.ConsumerGroupDescribeRequest)
	if !b.consumerProtocolEnabled() {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		for _, id := range req.Groups {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group = id
			g.ErrorCode = kerr.UnsupportedVersion.Code
			resp.Groups = append(resp.Groups, g)
		}
		r.Respond(resp)
		return
	}
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.consumerGroupDescribeAuthorized(ctx, r, req)
	})
}

func init() {
	register(api{
		key: kmsg.JoinGroup, min: 0, max: 9,
		listeners:    clientListeners,
		authorizedAs: "READ on the group",
		errorAnswer: errorAnswerOf(func(r *kmsg.JoinGroupRequest, out *kmsg.JoinGroupResponse, e apiErr) {
			out.ErrorCode, out.Generation, out.LeaderID, out.MemberID = e.code, -1, "", ""
			if r.Version >= 7 {
				out.Protocol = nil
			} else {
				out.Protocol = kmsg.StringPtr("")
			}
		}),
		handle: (*Broker).handleJoinGroup,
	})
	register(api{
		key: kmsg.SyncGroup, min: 0, max: 5,
		listeners:    clientListeners,
		authorizedAs: "READ on the group",
		errorAnswer: errorAnswerOf(func(_ *kmsg.SyncGroupRequest, out *kmsg.SyncGroupResponse, e apiErr) {
			out.ErrorCode, out.MemberAssignment = e.code, []byte{}
		}),
		handle: (*Broker).handleSyncGroup,
	})
	register(api{
		key: kmsg.Heartbeat, min: 0, max: 4,
		listeners:    clientListeners,
		authorizedAs: "READ on the group",
		errorAnswer: errorAnswerOf(func(_ *kmsg.HeartbeatRequest, out *kmsg.HeartbeatResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		handle: (*Broker).handleHeartbeat,
	})
	register(api{
		key: kmsg.LeaveGroup, min: 0, max: 5,
		listeners:    clientListeners,
		authorizedAs: "READ on the group",
		errorAnswer: errorAnswerOf(func(_ *kmsg.LeaveGroupRequest, out *kmsg.LeaveGroupResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		handle: (*Broker).handleLeaveGroup,
	})
	register(api{
		key: kmsg.OffsetCommit, min: 2, max: 10,
		listeners:    clientListeners,
		authorizedAs: "READ on the group and each topic",
		errorAnswer: errorAnswerOf(func(r *kmsg.OffsetCommitRequest, out *kmsg.OffsetCommitResponse, e apiErr) {
			for _, t := range r.Topics {
				rt := kmsg.NewOffsetCommitResponseTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetCommitResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, e.code
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
		}),
		handle: (*Broker).handleOffsetCommit,
	})
	register(api{
		key: kmsg.OffsetFetch, min: 0, max: 10,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE on the group, DESCRIBE on each topic",
		handle:       (*Broker).handleOffsetFetch,
	})
	register(api{
		key: kmsg.DescribeGroups, min: 0, max: 6,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE on each group, authorized operations",
		handle:       (*Broker).handleDescribeGroups,
	})
	register(api{
		key: kmsg.ListGroups, min: 0, max: 5,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE on the cluster, else DESCRIBE on each group listed",
		handle:       (*Broker).handleListGroups,
	})
	register(api{
		key: kmsg.DeleteGroups, min: 0, max: 2,
		listeners:    clientListeners,
		authorizedAs: "DELETE on each group",
		handle:       (*Broker).handleDeleteGroups,
	})
	register(api{
		key: kmsg.OffsetDelete, min: 0, max: 0,
		listeners:    clientListeners,
		authorizedAs: "DELETE on the group, READ on each topic",
		errorAnswer: errorAnswerOf(func(_ *kmsg.OffsetDeleteRequest, out *kmsg.OffsetDeleteResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		handle: (*Broker).handleOffsetDelete,
	})
	register(api{
		key: kmsg.ConsumerGroupHeartbeat, min: 0, max: 1,
		listeners:    clientListeners,
		authorizedAs: "READ on the group, DESCRIBE on each subscribed topic",
		errorAnswer: errorAnswerOf(func(_ *kmsg.ConsumerGroupHeartbeatRequest, out *kmsg.ConsumerGroupHeartbeatResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		handle: (*Broker).handleConsumerGroupHeartbeat,
	})
	register(api{
		key: kmsg.ConsumerGroupDescribe, min: 0, max: 1,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE on each group and its members' topics, authorized operations",
		handle:       (*Broker).handleConsumerGroupDescribe,
	})
}
