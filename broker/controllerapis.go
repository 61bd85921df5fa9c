package broker

// The controller listener's own APIs, served where this process runs a
// controller (Options.LocalController):
//
//   - RaftMessages (Gregor's private key, protocol/raftmsg.go) v0: raft
//     messages from the other controllers, handed to the local
//     controller; one-way, never answered.
//   - Envelope (key 58) v0 (KIP-590): a request a broker forwards on a
//     client's behalf. The envelope is refused with NOT_CONTROLLER when
//     this controller is not the active one, so the broker retries at the
//     new one and the client never sees a false success; otherwise the
//     inner request is answered by the local controller once committed,
//     authorized for the principal and client address the envelope
//     carries (controllerauth.go). The envelope itself needs
//     CLUSTER_ACTION on the cluster; a principal that cannot be read is
//     PRINCIPAL_DESERIALIZATION_FAILURE, a client address that is not 4
//     or 16 bytes INVALID_REQUEST, as in Kafka's EnvelopeUtils. The
//     principal and the inner header's client id count the client's
//     CreateTopics, CreatePartitions and DeleteTopics against its
//     controller mutation quota (throttle.go).
//   - MetadataFetch (Gregor's private key, protocol/metadatafetch.go) v0-1:
//     broker-only nodes following the committed metadata log.
//   - BrokerRegistration (key 62) v0-4, BrokerHeartbeat (key 63) v0-1,
//     AllocateProducerIds (key 67) v0, AlterPartition (key 56) v2-3
//     (partition leaders' ISR changes, controller/alterpartition.go): what
//     brokers send the active controller directly, answered by it
//     (NOT_CONTROLLER from the others). As in Kafka they are served on the
//     controller listener only, so the client listener's ApiVersions does
//     not list them. Each needs CLUSTER_ACTION on the cluster, and so do
//     RaftMessages and MetadataFetch (Kafka's Vote, BeginQuorumEpoch,
//     EndQuorumEpoch, Fetch and FetchSnapshot do): refused raft messages
//     close the connection, a refused MetadataFetch is answered
//     CLUSTER_AUTHORIZATION_FAILED.

import (
	"context"
	"errors"
	"net/netip"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/broker/controllerclient"
	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleRaftMessages(ctx context.Context, r *network.Request) {
	req := r.Body.(*protocol.RaftMessagesRequest)
	if !b.clusterAllowed(identityOf(r), kmsg.ACLOperationClusterAction) {
		r.CloseConnection()
		return
	}
	if err := b.opts.LocalController.Receive(ctx, req); err != nil {
		b.log.Warn("refusing raft messages; closing the connection", "from", req.From, "err", err)
		r.CloseConnection()
		return
	}
	r.NoResponse()
}

func (b *Broker) handleMetadataFetch(ctx context.Context, r *network.Request) {
	req := r.Body.(*protocol.MetadataFetchRequest)
	if !b.clusterAllowed(identityOf(r), kmsg.ACLOperationClusterAction) {
		r.Respond(&protocol.MetadataFetchResponse{Version: req.Version, ErrorCode: kerr.ClusterAuthorizationFailed.Code})
		return
	}
	// Long-polls: off the connection's reader.
	r.GoAsync(func() { r.Respond(b.opts.LocalController.FetchCommitted(ctx, req)) })
}

func (b *Broker) handleEnvelope(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.EnvelopeRequest)
	resp := req.ResponseKind().(*kmsg.EnvelopeResponse)
	local := b.opts.LocalController
	if !b.clusterAllowed(identityOf(r), kmsg.ACLOperationClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		r.Respond(resp)
		return
	}
	if !local.Active() {
		resp.ErrorCode = kerr.NotController.Code
		r.Respond(resp)
		return
	}
	who, code := envelopeIdentity(r, req)
	if code != 0 {
		resp.ErrorCode = code
		r.Respond(resp)
		return
	}
	inner, hdr, err := decodeEnveloped(req.RequestData)
	if err != nil {
		b.log.Debug("malformed enveloped request", "err", err)
		resp.ErrorCode = kerr.InvalidRequest.Code
		r.Respond(resp)
		return
	}
	// The controller drops an operation whose client timeout passed
	// while it waited, as Kafka's controller does with its deadline.
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout(inner))
	who.clientID = hdr.ClientID
	ctx = withIdentity(ctx, who)
	// The client's mutations count against its quota here, on the
	// active controller, whichever broker it sent them to.
	ctx, mq := withMutationQuota(ctx, b.quotas, hdr.APIKey, hdr.APIVersion, who.principal.Name, hdr.ClientID)
	r.GoAsync(func() {
		defer cancel()
		answer, err := b.asController.Handle(ctx, inner)
		if err == nil && mq != nil {
			mq.ApplyThrottle(answer)
		}
		if err != nil {
			if errors.Is(err, metadata.ErrNoAnswer) {
				r.CloseConnection()
				return
			}
			// A request the controller does not take.
			resp.ErrorCode = kerr.InvalidRequest.Code
			r.Respond(resp)
			return
		}
		answer.SetVersion(inner.GetVersion())
		frame := protocol.AppendResponse(nil, hdr.CorrelationID, answer)
		resp.ResponseData = frame[4:]
		r.Respond(resp)
	})
}

// envelopeIdentity is the identity an envelope forwards, or the error
// code refusing it.
func envelopeIdentity(r *network.Request, env *kmsg.EnvelopeRequest) (identity, int16) {
	p, token, err := controllerclient.DecodePrincipal(env.RequestPrincipal)
	if err != nil {
		return identity{}, kerr.PrincipalDeserializationFailure.Code
	}
	addr, ok := netip.AddrFromSlice(env.ClientHostAddress)
	if !ok {
		return identity{}, kerr.InvalidRequest.Code
	}
	return identity{principal: p, host: authz.HostAddress(addr), addr: addr, tokenAuthenticated: token, via: r, forwarded: true}, 0
}

// decodeEnveloped reads an enveloped request: its header and body, without
// a size prefix.
func decodeEnveloped(data []byte) (kmsg.Request, protocol.RequestHeader, error) {
	key, version, ok := protocol.PeekAPI(data)
	if !ok {
		return nil, protocol.RequestHeader{}, errors.New("enveloped request shorter than its header")
	}
	req := protocol.NewRequest(key, version)
	if req == nil {
		return nil, protocol.RequestHeader{}, errors.New("enveloped request of an unknown API or version")
	}
	hdr, body, err := protocol.ParseRequestHeader(data, req.IsFlexible())
	if err != nil {
		return nil, hdr, err
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, hdr, err
	}
	return req, hdr, nil
}

// handleControllerDirect answers the requests brokers send the active
// controller itself.
func (b *Broker) handleControllerDirect(ctx context.Context, r *network.Request) {
	ctx = withIdentity(ctx, identityOf(r))
	r.GoAsync(func() {
		answer, err := b.asController.Handle(ctx, r.Body)
		if err != nil {
			r.CloseConnection()
			return
		}
		if hb, ok := r.Body.(*kmsg.BrokerHeartbeatRequest); ok && answer.(*kmsg.BrokerHeartbeatResponse).ErrorCode == 0 {
			b.watchHeartbeatConn(r, hb.BrokerID, hb.BrokerEpoch)
		}
		r.Respond(answer)
	})
}

// watchHeartbeatConn has the controller probe broker id once the
// connection it heartbeats on (r's) closes: a killed broker's connections
// close at once, long before its session would lapse (controller
// liveness.go). A connection this node closes itself (its own shutdown)
// says nothing of the peer.
func (b *Broker) watchHeartbeatConn(r *network.Request, id int32, epoch int64) {
	r.WatchClose(func() {
		if b.runCtx.Err() != nil {
			return
		}
		b.opts.LocalController.ProbeBroker(id, epoch)
	})
}

func init() {
	register(api{
		key: kmsg.Key(protocol.RaftMessagesKey), min: 0, max: 0,
		listeners:      controllerListeners,
		controllerOnly: true,
		internal:       true,
		authorizedAs:   "CLUSTER_ACTION",
		quota:          quotaTreatment{requestExempt: true},
		handle:         (*Broker).handleRaftMessages,
	})
	register(api{
		key: kmsg.Key(protocol.MetadataFetchKey), min: 0, max: 1,
		listeners:      controllerListeners,
		controllerOnly: true,
		internal:       true,
		authorizedAs:   "CLUSTER_ACTION",
		quota:          quotaTreatment{requestExempt: true},
		handle:         (*Broker).handleMetadataFetch,
	})
	register(api{
		key: kmsg.Envelope, min: 0, max: 0,
		listeners:      controllerListeners,
		controllerOnly: true,
		authorizedAs:   "CLUSTER_ACTION, then the forwarded principal",
		errorAnswer: errorAnswerOf(func(_ *kmsg.EnvelopeRequest, out *kmsg.EnvelopeResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		quota:  quotaTreatment{requestExempt: true},
		handle: (*Broker).handleEnvelope,
	})
	register(clusterActionAPI(kmsg.BrokerRegistration, 0, 4, errorAnswerOf(func(_ *kmsg.BrokerRegistrationRequest, out *kmsg.BrokerRegistrationResponse, e apiErr) {
		out.ErrorCode = e.code
	})))
	register(clusterActionAPI(kmsg.BrokerHeartbeat, 0, 1, errorAnswerOf(func(_ *kmsg.BrokerHeartbeatRequest, out *kmsg.BrokerHeartbeatResponse, e apiErr) {
		out.ErrorCode = e.code
	})))
	register(clusterActionAPI(kmsg.AllocateProducerIDs, 0, 0, errorAnswerOf(func(_ *kmsg.AllocateProducerIDsRequest, out *kmsg.AllocateProducerIDsResponse, e apiErr) {
		out.ErrorCode = e.code
	})))
	register(clusterActionAPI(kmsg.AlterPartition, 2, 3, errorAnswerOf(func(_ *kmsg.AlterPartitionRequest, out *kmsg.AlterPartitionResponse, e apiErr) {
		out.ErrorCode = e.code
	})))
}

// clusterActionAPI describes one of the requests brokers send a
// controller's listener for the controller itself to answer
// (CLUSTER_ACTION; left alone by the request quota).
func clusterActionAPI(key kmsg.Key, min, max int16, errorAnswer func(kmsg.Request, apiErr) kmsg.Response) api {
	return api{
		key: key, min: min, max: max,
		listeners:        controllerListeners,
		controllerOnly:   true,
		authorizedAs:     "CLUSTER_ACTION",
		clusterOperation: kmsg.ACLOperationClusterAction,
		errorAnswer:      errorAnswer,
		quota:            quotaTreatment{requestExempt: true},
		handle:           (*Broker).handleControllerDirect,
	}
}
