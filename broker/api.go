package broker

// One descriptor per API. Everything the broker knows about a Kafka API
// that is not its handler's own logic is declared once, in one value, in
// that API's file: its key and versions, the listeners that serve it, what
// it is authorized against, its answer when it fails as a whole, whether
// it goes to the active controller (with its timeout), and how the client
// quotas treat it. The registry below collects the descriptors at package
// initialisation; ApiVersions, the error answers, the controller-side
// authorization, forwarding and the quotas all read them, so adding an API
// is one file and its tests (docs/adding-an-api.md).
//
// The registry is written only by init functions and read-only afterwards:
// it is a table of constants, like kmsg's own, not state.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listenerKinds says which listeners serve an API.
type listenerKinds uint8

const (
	// clientListeners are the broker's listeners (listeners minus the
	// controller ones).
	clientListeners listenerKinds = 1 << iota
	// controllerListeners are controller.listener.names', served only by
	// a node that runs a controller.
	controllerListeners
	allListeners = clientListeners | controllerListeners
)

// api describes one Kafka API as Gregor serves it.
type api struct {
	key kmsg.Key
	// min and max are the versions whose semantics are fully honoured.
	min, max int16
	// advertisedMin, with unsupported, advertises versions below min that
	// are answered by unsupported rather than served (Produce v0-2, which
	// librdkafka needs to see).
	advertisedMin int16
	unsupported   func(b *Broker, r *network.Request)
	listeners     listenerKinds
	// controllerOnly APIs exist only on a node that runs a controller
	// (what controllers serve each other and brokers).
	controllerOnly bool
	// internal APIs (Gregor's own) are served but left out of ApiVersions.
	internal bool
	// authorizedAs is what Kafka authorizes the API against (KafkaApis,
	// ControllerApis, AclApis), and so what its handler checks; "nothing"
	// when nothing is. TestEveryServedAPIIsAuthorized reads it.
	authorizedAs string
	// clusterOperation, when not zero, is the operation on the cluster
	// that the controller requires of the request as a whole, refusing
	// it with errorAnswer(CLUSTER_AUTHORIZATION_FAILED).
	clusterOperation kmsg.ACLOperation
	// controllerAuthorize, when set, is the controller's own check of the
	// request (per topic, per resource) in place of clusterOperation: it
	// answers what it refuses and hands the rest to the controller.
	controllerAuthorize func(f controllerFront, ctx context.Context, who identity, req kmsg.Request) (kmsg.Response, error)
	// controllerRefuse, when set, is the controller's refusal of a
	// client's request before any ACL is looked at (a delegation token
	// request from a token-authenticated principal), or nil to go on.
	controllerRefuse func(f controllerFront, who identity, req kmsg.Request) kmsg.Response
	// needsAuthorizer APIs answer SECURITY_DISABLED ("No Authorizer is
	// configured.") on a node without an authorizer.
	needsAuthorizer bool
	// errorAnswer is the request's answer when it fails as a whole
	// (Kafka's AbstractRequest.getErrorResponse): built with
	// errorAnswerOf; nil for an API never failed that way.
	errorAnswer func(req kmsg.Request, e apiErr) kmsg.Response
	// forward, when set, says the request is decided by the active
	// controller.
	forward *forwarding
	quota   quotaTreatment
	handle  func(b *Broker, ctx context.Context, r *network.Request)
}

// forwarding is how a request reaches the active controller.
type forwarding struct {
	// timeoutMillis is the timeout the request carries (CreateTopics'
	// timeout_ms, ...); nil when it carries none, for request.timeout.ms's
	// default.
	timeoutMillis func(req kmsg.Request) int32
	// timedOut, when set, completes the REQUEST_TIMED_OUT answer given
	// when no controller answered in time.
	timedOut func(req kmsg.Request, resp kmsg.Response)
}

// quotaTreatment is how the client quotas count an API.
type quotaTreatment struct {
	// requestExempt leaves the request quota alone: what brokers and
	// controllers send each other (Kafka's cluster actions).
	requestExempt bool
	// mutates counts the request against controller_mutation_rate
	// (KIP-599); from strictSince its responses carry
	// THROTTLING_QUOTA_EXCEEDED, older ones are throttled only.
	mutates     bool
	strictSince int16
}

// apis is the registry: every API the broker serves, by key.
var apis = map[kmsg.Key]*api{}

// register adds an API's descriptor to the registry; it is called from
// the init function of the API's file.
func register(a api) {
	if _, dup := apis[a.key]; dup {
		panic(fmt.Sprintf("%s is registered twice", a.key.Name()))
	}
	apis[a.key] = &a
}

// apiFor is key's descriptor, nil for an API not served.
func apiFor(key int16) *api { return apis[kmsg.Key(key)] }

// errorAnswerOf builds an errorAnswer from what fills the response of
// one request type.
func errorAnswerOf[Req kmsg.Request, Resp kmsg.Response](fill func(r Req, out Resp, e apiErr)) func(kmsg.Request, apiErr) kmsg.Response {
	return func(req kmsg.Request, e apiErr) kmsg.Response {
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		fill(req.(Req), resp.(Resp), e)
		return resp
	}
}

// errorResponse is req's answer failing with e, or nil for an API whose
// whole-request failure is not answered this way.
func errorResponse(req kmsg.Request, e apiErr) kmsg.Response {
	a := apiFor(req.Key())
	if a == nil || a.errorAnswer == nil {
		return nil
	}
	return a.errorAnswer(req, e)
}

// defaultMessage is Errors.message() for a code.
func defaultMessage(code int16) *string {
	msg := kafkaMessage(code)
	return &msg
}

// timedOutResponse is req's answer with REQUEST_TIMED_OUT when no active
// controller answered in time, or nil for a request that is not forwarded
// (its connection is closed instead).
func timedOutResponse(req kmsg.Request) kmsg.Response {
	a := apiFor(req.Key())
	if a == nil || a.forward == nil || a.errorAnswer == nil {
		return nil
	}
	resp := a.errorAnswer(req, errMessage(kerr.RequestTimedOut, "no active controller answered in time"))
	if a.forward.timedOut != nil {
		a.forward.timedOut(req, resp)
	}
	return resp
}

// defaultForwardTimeout is request.timeout.ms's default, for requests
// that carry no timeout of their own.
const defaultForwardTimeout = 30 * time.Second

// forwardTimeout is how long a client's admin request may take: the
// timeout it carries (CreateTopics' timeout_ms, ...), else Kafka's
// request.timeout.ms default.
func forwardTimeout(req kmsg.Request) time.Duration {
	var ms int32
	if a := apiFor(req.Key()); a != nil && a.forward != nil && a.forward.timeoutMillis != nil {
		ms = a.forward.timeoutMillis(req)
	}
	if ms <= 0 {
		return defaultForwardTimeout
	}
	return time.Duration(ms) * time.Millisecond
}

// ControllerMaxVersion is the highest version of key a controller
// listener serves, false for an API it does not: this node's own requests
// to the controller go at it (controllerclient.Options.MaxVersion).
func ControllerMaxVersion(key int16) (int16, bool) {
	if a := apiFor(key); a != nil && a.listeners&controllerListeners != 0 {
		return a.max, true
	}
	return 0, false
}

// handlers lists every API this node serves, the versions whose semantics
// it fully honours, and the listeners that serve it. ApiVersions is
// derived from this list and nothing else.
func (b *Broker) handlers() []*network.Handler {
	hs := make([]*network.Handler, 0, len(apis))
	for _, a := range apis {
		if a.controllerOnly && b.opts.LocalController == nil {
			continue
		}
		h := &network.Handler{
			Key: a.key, Min: a.min, Max: a.max, AdvertisedMin: a.advertisedMin, Internal: a.internal,
			OnClient: a.listeners&clientListeners != 0, OnController: a.listeners&controllerListeners != 0,
			QuotaExempt: a.quota.requestExempt,
		}
		handle := a.handle
		h.Serve = func(ctx context.Context, r *network.Request) { handle(b, ctx, r) }
		if a.unsupported != nil {
			unsupported := a.unsupported
			h.Unsupported = func(r *network.Request) { unsupported(b, r) }
		}
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(x, y *network.Handler) int { return int(x.Key) - int(y.Key) })
	return hs
}
