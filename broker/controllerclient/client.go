// Package controllerclient is how a node reaches the active controller
// when the quorum has more than one controller (KIP-590 forwarding,
// KIP-631's broker to controller channel): the broker's own
// BrokerRegistration, BrokerHeartbeat, AllocateProducerIds and
// AlterPartition (its partition leaders' ISR changes) go to the active
// controller directly; clients' admin requests go inside an Envelope
// (envelope.go), with the client's principal, address and client id.
// Either is sent again, at whichever controller is active then, only while
// it certainly was not acted on: the connection could not be made or
// written, or the controller answered NOT_CONTROLLER. A request sent and
// then left unanswered (the controller died) fails, so a client retries
// and never sees a success that did not happen. When this process's own
// controller is the active one, requests go to it in process. It also
// serves the metadata fetches of broker-only nodes and a joining
// controller's announcement, and holds the pool of pipelined connections
// to other nodes (pool.go) that the broker's inter-broker requests use too.
//
// Goroutines and locks: Handle runs on its callers' goroutines; each
// controller connection has a reader goroutine that completes its
// requests in order. A Pool's mu guards its connections; a connection's
// writeMu guards its writes and its queue of waiting requests. Order: mu,
// then writeMu (Handle never holds mu while it writes).
//
// Of Gregor's packages it imports metadata, protocol, sasl,
// internal/peerdial and broker/authz (the principal an envelope carries);
// never broker itself, whose controller front and registry reach it
// through Options and SetLocal.
package controllerclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Handler answers a request as the active controller does, once any
// change it makes is committed, or fails when there is no answer (the
// broker's ActiveController).
type Handler interface {
	Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// Local is this process's own controller, as far as the client uses it
// (the broker's LocalController).
type Local interface {
	Handler
	// Active reports whether it is the active controller now.
	Active() bool
	NodeID() int32
}

// Images is the metadata this node follows, which names the active
// controller (Image.LeaderID) and the voters' endpoints.
type Images interface {
	Image() *metadata.Image
}

// Options configure a Client.
type Options struct {
	NodeID int32
	// Local is this process's controller, nil on a broker-only node.
	Local Local
	// MaxVersion is the highest version of key the controller listeners
	// serve (the broker's ControllerMaxVersion), false for a key they do
	// not: this node's own requests are sent at it.
	MaxVersion func(key int16) (int16, bool)
	// Listener is the controller listener whose endpoints are dialled
	// (the first of controller.listener.names).
	Listener string
	// Bootstrap are controller addresses known from the configuration
	// (controller.quorum.voters), by node id, used while the image has no
	// endpoint for the active controller.
	Bootstrap map[int32]string
	// BootstrapAddrs are the controllers to ask while no active one is
	// known (controller.quorum.bootstrap.servers, or the voters).
	BootstrapAddrs []string
	// Dial opens a connection to a controller listener (with TLS when it
	// is SSL); nil dials plain TCP.
	Dial   DialFunc
	Logger *slog.Logger
}

// Client is a Handler across the network: the broker's way to the active
// controller.
type Client struct {
	opts Options
	log  *slog.Logger
	// meta names the active controller (Image.LeaderID) and the voters'
	// endpoints; set by Follow.
	meta atomic.Pointer[Images]

	pool *Pool[connKey]
	// local answers requests while this process's controller is the
	// active one: the broker's controllerFront, which authorizes them
	// (SetLocal), else the controller itself.
	local atomic.Pointer[Handler]
}

// connKey names a connection: metadata fetches, which wait on the
// controller, get connections of their own so that heartbeats and
// forwarded requests do not queue behind them.
type connKey struct {
	id    int32
	fetch bool
}

// New returns a client of the active controller.
func New(opts Options) *Client {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Client{opts: opts, log: opts.Logger, pool: NewPool[connKey](opts.NodeID, opts.Dial)}
	if opts.Local != nil {
		var local Handler = opts.Local
		c.local.Store(&local)
	}
	return c
}

// Local is Options.Local: this process's controller, nil on a
// broker-only node.
func (c *Client) Local() Local { return c.opts.Local }

// SetLocal names what answers requests in process while the local
// controller is active.
func (c *Client) SetLocal(h Handler) { c.local.Store(&h) }

// Follow names the metadata view that says which controller is active.
func (c *Client) Follow(m Images) { c.meta.Store(&m) }

// errForwardLost: the request reached a controller that gave no answer.
var errForwardLost = errors.New("the controller did not answer the forwarded request")

const (
	forwardBackoffMin = 50 * time.Millisecond
	forwardBackoffMax = time.Second
	forwardDialTime   = 3 * time.Second
)

// Handle sends req to the active controller and returns its answer,
// waiting for there to be one until ctx ends.
func (c *Client) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if _, forwarded := ForwardedFrom(ctx); !forwarded {
		// This node's own request: sent at the version the controllers
		// serve (kmsg's zero value is version 0, which lacks fields a
		// registration needs and which a controller refuses for
		// CreateTopics). A client's forwarded request keeps its own.
		if max, ok := c.opts.MaxVersion(req.Key()); ok {
			req.SetVersion(max)
		}
	}
	backoff := forwardBackoffMin
	var lastErr error
	for {
		if l := c.opts.Local; l != nil && l.Active() {
			resp, err := (*c.local.Load()).Handle(ctx, req)
			if err != nil || topLevelError(resp) != kerr.NotController.Code {
				return resp, err
			}
			// It lost the leadership before deciding: nothing was
			// done, so the request goes to the new leader.
			lastErr = kerr.NotController
		} else if id, addr, ok := c.activeController(); ok && (c.opts.Local == nil || id != c.opts.Local.NodeID()) {
			resp, retry, err := c.send(ctx, id, addr, req)
			if !retry {
				return resp, err
			}
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return nil, fmt.Errorf("%w (last: %w)", ctx.Err(), lastErr)
			}
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, forwardBackoffMax)
	}
}

// activeController is the active controller's id and address as this
// node knows them.
func (c *Client) activeController() (int32, string, bool) {
	m := c.meta.Load()
	if m == nil {
		return -1, "", false
	}
	img := (*m).Image()
	if img == nil || img.LeaderID < 0 {
		return -1, "", false
	}
	if addr, ok := metadata.VoterEndpoint(img.Voters, img.LeaderID, c.opts.Listener); ok {
		return img.LeaderID, addr, true
	}
	addr, ok := c.opts.Bootstrap[img.LeaderID]
	return img.LeaderID, addr, ok
}

// send makes one attempt; retry says that req certainly was not acted on.
func (c *Client) send(ctx context.Context, id int32, addr string, req kmsg.Request) (resp kmsg.Response, retry bool, err error) {
	key := connKey{id: id}
	conn, err := c.conn(ctx, key, addr)
	if err != nil {
		return nil, true, err
	}
	who, forwarded := ForwardedFrom(ctx)
	if !forwarded {
		// This node's own request (its registration and heartbeats,
		// producer id blocks, ISR changes, internal topics) goes as
		// itself, authorized with this connection's principal as
		// Kafka's broker-to-controller channel is.
		resp, sent, err := conn.RoundTrip(ctx, req)
		if err != nil {
			c.drop(key, conn)
			return nil, !sent, err
		}
		if topLevelError(resp) == kerr.NotController.Code {
			return nil, true, fmt.Errorf("node %d: %w", id, kerr.NotController)
		}
		return resp, false, nil
	}
	env := kmsg.NewPtrEnvelopeRequest()
	// The inner request's correlation id is not used: the envelope's is.
	// It carries the client's id, principal and address, as Kafka's
	// forwarding does: the controller authorizes the request for the
	// client and counts its mutations against the client's quota.
	f := who.Envelope()
	env.RequestData = kmsg.NewRequestFormatter(kmsg.FormatterClientID(f.ClientID)).AppendRequest(nil, req, 0)[4:]
	env.RequestPrincipal = EncodePrincipal(f.Principal, f.TokenAuthenticated)
	clientAddr := f.Addr.Unmap()
	if !clientAddr.IsValid() {
		// A client whose address is unknown: the envelope still
		// carries 4 bytes, as the controller requires.
		clientAddr = netip.IPv4Unspecified()
	}
	env.ClientHostAddress = clientAddr.AsSlice()
	answer, sent, err := conn.RoundTrip(ctx, env)
	if err != nil {
		c.drop(key, conn)
		return nil, !sent, err
	}
	envResp := answer.(*kmsg.EnvelopeResponse)
	if envResp.ErrorCode == kerr.NotController.Code {
		return nil, true, fmt.Errorf("node %d: %w", id, kerr.NotController)
	}
	if err := kerr.ErrorForCode(envResp.ErrorCode); err != nil {
		return nil, false, fmt.Errorf("forwarding %s to node %d: %w", kmsg.NameForKey(req.Key()), id, err)
	}
	inner := req.ResponseKind()
	inner.SetVersion(req.GetVersion())
	if _, err := protocol.ParseResponse(envResp.ResponseData, inner); err != nil {
		return nil, false, fmt.Errorf("forwarding to node %d: %w", id, err)
	}
	return inner, false, nil
}

// FetchMetadata sends a broker's MetadataFetch to the active controller,
// or while none is known (or it does not answer) to each bootstrap
// controller in turn: any controller serves what it has committed.
func (c *Client) FetchMetadata(ctx context.Context, req *protocol.MetadataFetchRequest) (*protocol.MetadataFetchResponse, error) {
	type target struct {
		id   int32
		addr string
	}
	var targets []target
	if id, addr, ok := c.activeController(); ok {
		targets = append(targets, target{id, addr})
	}
	for i, addr := range c.opts.BootstrapAddrs {
		// Bootstrap connections are keyed apart from node ids.
		targets = append(targets, target{math.MinInt32 + int32(i), addr})
	}
	err := errors.New("no controller address known")
	for _, t := range targets {
		key := connKey{id: t.id, fetch: true}
		conn, cerr := c.conn(ctx, key, t.addr)
		if cerr != nil {
			err = cerr
			continue
		}
		resp, _, rerr := conn.RoundTrip(ctx, req)
		if rerr != nil {
			c.drop(key, conn)
			err = rerr
			if ctx.Err() != nil {
				break
			}
			continue
		}
		return resp.(*protocol.MetadataFetchResponse), nil
	}
	return nil, err
}

// Announce sends a joining controller's announcement (a MetadataFetch v1,
// controller/membership.go) to addr, or to the bootstrap controllers in
// turn when addr is "".
func (c *Client) Announce(ctx context.Context, addr string, req *protocol.MetadataFetchRequest) (*protocol.MetadataFetchResponse, error) {
	if addr == "" {
		return c.FetchMetadata(ctx, req)
	}
	// Keyed apart from node ids and from the bootstrap connections.
	key := connKey{id: math.MinInt32 + int32(len(c.opts.BootstrapAddrs)), fetch: true}
	conn, err := c.conn(ctx, key, addr)
	if err != nil {
		return nil, err
	}
	resp, _, err := conn.RoundTrip(ctx, req)
	if err != nil {
		c.drop(key, conn)
		return nil, fmt.Errorf("announcing to %s: %w", addr, err)
	}
	return resp.(*protocol.MetadataFetchResponse), nil
}

func topLevelError(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		return r.ErrorCode
	case *kmsg.BrokerHeartbeatResponse:
		return r.ErrorCode
	case *kmsg.AllocateProducerIDsResponse:
		return r.ErrorCode
	case *kmsg.AlterPartitionResponse:
		return r.ErrorCode
	}
	return 0
}

func (c *Client) conn(ctx context.Context, key connKey, addr string) (*Conn, error) {
	return c.pool.Get(ctx, key, addr)
}

func (c *Client) drop(key connKey, cc *Conn) { c.pool.Drop(key, cc, errForwardLost) }

// Close closes every controller connection; requests waiting on them fail.
func (c *Client) Close() { c.pool.Close() }
