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

import (
	"context"
	"net"
	"strings"

	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// serveGroupRequest runs fn for r after the connection's previous group
// request has been handled, on a goroutine of its own.
func (b *Broker) serveGroupRequest(ctx context.Context, r *request, fn func(ctx context.Context) kmsg.Response) {
	rt := b.groups
	c := r.conn
	rt.connMu.Lock()
	prev := rt.connTails[c]
	done := make(chan struct{})
	rt.connTails[c] = done
	rt.connMu.Unlock()
	r.goAsync(func() {
		defer func() {
			close(done)
			rt.connMu.Lock()
			if rt.connTails[c] == done {
				delete(rt.connTails, c)
			}
			rt.connMu.Unlock()
		}()
		if prev != nil {
			<-prev
		}
		r.respond(fn(ctx))
	})
}

// clientOf is the member identity Kafka records: the client id and the
// peer address as Java prints an InetAddress ("/127.0.0.1").
func clientOf(r *request) group.Client {
	host := r.conn.nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return group.Client{ID: r.hdr.ClientID, Host: "/" + host}
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
	img := b.ctrl.Image()
	return img != nil && img.Features["group.version"] >= 1
}

func (b *Broker) handleJoinGroup(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.JoinGroupRequest)
	client := clientOf(r)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.JoinGroup(ctx, client, req)
	})
}

func (b *Broker) handleSyncGroup(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.SyncGroupRequest)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.SyncGroup(ctx, req)
	})
}

func (b *Broker) handleHeartbeat(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.HeartbeatRequest)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.Heartbeat(ctx, req)
	})
}

func (b *Broker) handleLeaveGroup(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.LeaveGroupRequest)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.LeaveGroup(ctx, req)
	})
}

func (b *Broker) handleOffsetCommit(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.OffsetCommitRequest)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.OffsetCommit(ctx, req)
	})
}

func (b *Broker) handleOffsetFetch(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.OffsetFetchRequest)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.OffsetFetch(ctx, req)
	})
}

func (b *Broker) handleDescribeGroups(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.DescribeGroupsRequest)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.DescribeGroups(ctx, req)
	})
}

func (b *Broker) handleListGroups(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.ListGroupsRequest)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.ListGroups(ctx, req)
	})
}

func (b *Broker) handleDeleteGroups(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.DeleteGroupsRequest)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.DeleteGroups(ctx, req)
	})
}

func (b *Broker) handleOffsetDelete(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.OffsetDeleteRequest)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.OffsetDelete(ctx, req)
	})
}

func (b *Broker) handleConsumerGroupHeartbeat(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	if !b.consumerProtocolEnabled() {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		r.respond(resp)
		return
	}
	client := clientOf(r)
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.ConsumerGroupHeartbeat(ctx, client, req)
	})
}

func (b *Broker) handleConsumerGroupDescribe(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.ConsumerGroupDescribeRequest)
	if !b.consumerProtocolEnabled() {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
		for _, id := range req.Groups {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group = id
			g.ErrorCode = kerr.UnsupportedVersion.Code
			resp.Groups = append(resp.Groups, g)
		}
		r.respond(resp)
		return
	}
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		return b.groups.coord.ConsumerGroupDescribe(ctx, req)
	})
}
