package broker

// AddRaftVoter (key 80) v0-1, RemoveRaftVoter (key 81) v0 and
// UpdateRaftVoter (key 82) v0 (KIP-853), served on broker and controller
// listeners: the active controller decides them (controller/membership.go),
// a controller that is not the active one answers as Kafka's raft client
// does (NOT_LEADER_OR_FOLLOWER), a broker forwards them in an Envelope.
// AddRaftVoter v1's AckWhenCommitted=false is answered after commit too.
// How a joining controller announces itself to the quorum is
// broker/controllerclient's (Client.Announce).

import (
	"context"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleRaftVoterChange(ctx context.Context, r *network.Request) {
	b.forwardRequest(ctx, r, nil)
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
