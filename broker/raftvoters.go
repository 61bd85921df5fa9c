package broker

// AddRaftVoter (key 80) v0-1, RemoveRaftVoter (key 81) v0 and
// UpdateRaftVoter (key 82) v0 (KIP-853), served on broker and controller
// listeners: the active controller decides them (controller/membership.go),
// a controller that is not the active one answers as Kafka's raft client
// does (NOT_LEADER_OR_FOLLOWER), a broker forwards them in an Envelope.
// AddRaftVoter v1's AckWhenCommitted=false is answered after commit too.
//
// Also here: how a joining controller announces itself to the quorum
// (ControllerClient.Announce).

import (
	"context"
	"fmt"
	"math"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleRaftVoterChange(ctx context.Context, r *network.Request) {
	b.forwardRequest(ctx, r, nil)
}

// Announce sends a joining controller's announcement (a MetadataFetch v1,
// controller/membership.go) to addr, or to the bootstrap controllers in
// turn when addr is "".
func (c *ControllerClient) Announce(ctx context.Context, addr string, req *protocol.MetadataFetchRequest) (*protocol.MetadataFetchResponse, error) {
	if addr == "" {
		return c.FetchMetadata(ctx, req)
	}
	// Keyed apart from node ids and from the bootstrap connections.
	key := connKey{id: math.MinInt32 + int32(len(c.opts.BootstrapAddrs)), fetch: true}
	conn, err := c.conn(ctx, key, addr)
	if err != nil {
		return nil, err
	}
	resp, _, err := conn.roundTrip(ctx, req)
	if err != nil {
		c.drop(key, conn)
		return nil, fmt.Errorf("announcing to %s: %w", addr, err)
	}
	return resp.(*protocol.MetadataFetchResponse), nil
}

func init() {
	register(api{
		key: kmsg.AddRaftVoter, min: 0, max: 1,
		listeners:        allListeners,
		authorizedAs:     "ALTER on the cluster",
		clusterOperation: kmsg.ACLOperationAlter,
		errorAnswer: errorAnswerOf(func(_ *kmsg.AddRaftVoterRequest, out *kmsg.AddRaftVoterResponse, e apiErr) {
			out.ErrorCode, out.ErrorMessage = e.code, defaultMessage(e.code)
		}),
		forward: &forwarding{timeoutMillis: func(req kmsg.Request) int32 { return req.(*kmsg.AddRaftVoterRequest).TimeoutMillis }},
		handle:  (*Broker).handleRaftVoterChange,
	})
	register(api{
		key: kmsg.RemoveRaftVoter, min: 0, max: 0,
		listeners:        allListeners,
		authorizedAs:     "ALTER on the cluster",
		clusterOperation: kmsg.ACLOperationAlter,
		errorAnswer: errorAnswerOf(func(_ *kmsg.RemoveRaftVoterRequest, out *kmsg.RemoveRaftVoterResponse, e apiErr) {
			out.ErrorCode, out.ErrorMessage = e.code, defaultMessage(e.code)
		}),
		forward: &forwarding{},
		handle:  (*Broker).handleRaftVoterChange,
	})
	register(api{
		key: kmsg.UpdateRaftVoter, min: 0, max: 0,
		listeners:        allListeners,
		authorizedAs:     "CLUSTER_ACTION",
		clusterOperation: kmsg.ACLOperationClusterAction,
		errorAnswer: errorAnswerOf(func(_ *kmsg.UpdateRaftVoterRequest, out *kmsg.UpdateRaftVoterResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		forward: &forwarding{},
		handle:  (*Broker).handleRaftVoterChange,
	})
}
