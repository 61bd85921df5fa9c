package broker

// Authorizing requests: who a request acts for (its identity) and the one
// set of helpers every handler checks with, over the StandardAuthorizer of
// broker/authz. With no authorizer configured (b.authz nil) every check is
// true and costs a nil comparison.
//
// A request acts for the principal of its connection, or, when a broker
// forwarded it to this controller in an Envelope, for the principal and
// client address the envelope carries (Kafka's DefaultPrincipalData). The
// identity travels to the controller in the context (withIdentity); a
// request whose context has none is this node's own (registration,
// heartbeats, internal topics) and is not authorized when the controller
// is in process.

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/broker/controllerclient"
	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// identity is who a request acts for.
type identity struct {
	principal authz.Principal
	// host is the client's address as Java writes it (ACL hosts).
	host string
	addr netip.Addr
	// tokenAuthenticated: the principal authenticated with a delegation
	// token (DefaultPrincipalData's flag).
	tokenAuthenticated bool
	// clientID is the request header's client id (an Envelope's inner
	// header carries it; quotas count by it).
	clientID string
	// via is the request that brought it (the envelope of a forwarded
	// one), named in authorization errors.
	via *network.Request
	// forwarded: it came in an envelope.
	forwarded bool
}

// identityOf is who r acts for: its connection's peer.
func identityOf(r *network.Request) identity {
	return identity{principal: r.Principal(), host: r.HostAddress(), addr: r.ClientAddr(),
		tokenAuthenticated: r.TokenAuthenticated(), clientID: r.Header.ClientID, via: r}
}

// describe is Kafka's form of the request in authorization errors
// (RequestChannel.Request.toString); "" for the node's own requests.
func (who identity) describe() string {
	if who.via == nil {
		return ""
	}
	r := who.via
	local, remote := addrString(r.LocalAddr()), addrString(r.RemoteAddr())
	conn := fmt.Sprintf("connectionId=%s-%s-0, session=Session(%s,/%s), listenerName=ListenerName(%s), securityProtocol=%s, buffer=null",
		local, remote, r.Principal(), r.HostAddress(), r.Listener(), r.SecurityProtocol())
	if who.forwarded {
		return fmt.Sprintf("Request(processor=0, connectionId=%s-%s-0, session=Session(%s,/%s), listenerName=ListenerName(%s), securityProtocol=%s, buffer=null, envelope=Some(Request(processor=0, %s, envelope=None)))",
			local, remote, who.principal, who.host, r.Listener(), r.SecurityProtocol(), conn)
	}
	return "Request(processor=0, " + conn + ", envelope=None)"
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// withIdentity returns ctx carrying who: a request the controller client
// is given with it is forwarded in an envelope for who.
func withIdentity(ctx context.Context, who identity) context.Context {
	return controllerclient.WithForwarded(ctx, who)
}

// identityFrom is the identity ctx carries, if any.
func identityFrom(ctx context.Context) (identity, bool) {
	f, ok := controllerclient.ForwardedFrom(ctx)
	if !ok {
		return identity{}, false
	}
	who, ok := f.(identity)
	return who, ok
}

// Envelope is what an envelope carries of who (controllerclient.Forwarded).
func (who identity) Envelope() controllerclient.Envelope {
	return controllerclient.Envelope{Principal: who.principal, TokenAuthenticated: who.tokenAuthenticated, ClientID: who.clientID, Addr: who.addr}
}

// currentAuthz is the authorizer with the ACLs of this node's current
// image indexed. The image subscription indexes each new image too, but
// on its own goroutine: a client whose CreateAcls was answered (after
// the image with them was published, in a combined node) must find them
// in force on its next request, as it would at the controller.
func (b *Broker) currentAuthz() *authz.Authorizer {
	if b.meta != nil {
		b.authz.Load(b.meta.Image())
	}
	return b.authz
}

// allowed reports whether who may do op on the resource, logging a
// denial (Kafka's logIfDenied: the resource was asked for by name).
func (b *Broker) allowed(who identity, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if b.authz == nil {
		return true
	}
	ok, err := b.currentAuthz().Authorize(who.principal, who.host, op, rt, name)
	if !ok {
		b.log.Info("authorization denied", "principal", who.principal.String(), "operation", metadata.OperationName(op),
			"host", who.host, "resource", metadata.ResourceTypeName(rt)+":LITERAL:"+name, "err", err)
	}
	return ok
}

// allowedQuiet is allowed without the log: the check filters what a
// request sees (Metadata of all topics, ListGroups) or computes the
// authorized operations.
func (b *Broker) allowedQuiet(who identity, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if b.authz == nil {
		return true
	}
	ok, _ := b.currentAuthz().Authorize(who.principal, who.host, op, rt, name)
	return ok
}

// can reports whether r may do op on the resource.
func (b *Broker) can(r *network.Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if b.authz == nil {
		return true
	}
	return b.allowed(identityOf(r), op, rt, name)
}

// clusterAllowed reports whether who may do op on the cluster.
func (b *Broker) clusterAllowed(who identity, op kmsg.ACLOperation) bool {
	return b.allowed(who, op, kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName)
}

// allowedAnyOfType reports whether who may do op on some resource of the
// type (Authorizer.authorizeByResourceType).
func (b *Broker) allowedAnyOfType(who identity, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if b.authz == nil {
		return true
	}
	ok, _ := b.currentAuthz().AuthorizeByResourceType(who.principal, who.host, op, rt)
	return ok
}

// authorizedOperations is the bit field of the operations who may do on
// the resource (AuthHelper.authorizedOperations): every supported
// operation of the type when no authorizer is configured.
func (b *Broker) authorizedOperations(who identity, rt kmsg.ACLResourceType, name string) int32 {
	var bits int32
	for _, op := range authz.SupportedOperations(rt) {
		if b.allowedQuiet(who, op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// apiErr is an error code with the message Kafka's ApiError keeps (nil
// when it is the code's default).
type apiErr struct {
	code int16
	msg  *string
}

func errCode(e *kerr.Error) apiErr { return apiErr{code: e.Code} }

func errMessage(e *kerr.Error, format string, args ...any) apiErr {
	m := fmt.Sprintf(format, args...)
	return apiErr{code: e.Code, msg: &m}
}

// clusterDenied is the ClusterAuthorizationException Kafka's
// authorizeClusterOperation throws.
func clusterDenied(who identity, op kmsg.ACLOperation) apiErr {
	return errMessage(kerr.ClusterAuthorizationFailed, "Request %s needs %s permission.", who.describe(), metadata.OperationName(op))
}
