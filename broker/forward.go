package broker

// ControllerClient is how a broker reaches the active controller when the
// quorum has more than one controller (KIP-590 forwarding, KIP-631's broker
// to controller channel): the broker's own BrokerRegistration,
// BrokerHeartbeat, AllocateProducerIds and AlterPartition (its partition
// leaders' ISR changes) go to the active controller directly; clients'
// admin requests go inside an Envelope. Either is sent
// again, at whichever controller is active then, only while it certainly
// was not acted on: the connection could not be made or written, or the
// controller answered NOT_CONTROLLER. A request sent and then left
// unanswered (the controller died) fails, so a client retries and never
// sees a success that did not happen. When this process's own controller
// is the active one, requests go to it in process.
//
// Goroutines and locks: Handle runs on its callers' goroutines; each
// controller connection has a reader goroutine that completes its
// requests in order. mu guards conns; a connection's writeMu guards its
// writes and its queue of waiting requests. Order: mu, then writeMu (Handle
// never holds mu while it writes).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/internal/peerdial"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ControllerClientOptions configure a ControllerClient.
type ControllerClientOptions struct {
	NodeID int32
	// Local is this process's controller, nil on a broker-only node.
	Local LocalController
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

// ControllerClient implements ActiveController across the network.
type ControllerClient struct {
	opts ControllerClientOptions
	log  *slog.Logger
	// meta names the active controller (Image.LeaderID) and the voters'
	// endpoints; set by Follow.
	meta atomic.Pointer[MetadataView]

	pool *connPool[connKey]
	// local answers requests while this process's controller is the
	// active one: the broker's controllerFront, which authorizes them
	// (setLocal), else the controller itself.
	local atomic.Pointer[ActiveController]
}

// connKey names a connection: metadata fetches, which wait on the
// controller, get connections of their own so that heartbeats and
// forwarded requests do not queue behind them.
type connKey struct {
	id    int32
	fetch bool
}

// NewControllerClient returns a client of the active controller.
func NewControllerClient(opts ControllerClientOptions) *ControllerClient {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &ControllerClient{opts: opts, log: opts.Logger, pool: newConnPool[connKey](opts.NodeID, opts.Dial)}
	if opts.Local != nil {
		var local ActiveController = opts.Local
		c.local.Store(&local)
	}
	return c
}

// setLocal names what answers requests in process while the local
// controller is active.
func (c *ControllerClient) setLocal(h ActiveController) { c.local.Store(&h) }

// Follow names the metadata view that says which controller is active.
func (c *ControllerClient) Follow(m MetadataView) { c.meta.Store(&m) }

// errForwardLost: the request reached a controller that gave no answer.
var errForwardLost = errors.New("the controller did not answer the forwarded request")

const (
	forwardBackoffMin = 50 * time.Millisecond
	forwardBackoffMax = time.Second
	forwardDialTime   = 3 * time.Second
)

// Handle sends req to the active controller and returns its answer,
// waiting for there to be one until ctx ends.
func (c *ControllerClient) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if _, forwarded := identityFrom(ctx); !forwarded {
		// This node's own request: sent at the version the controllers
		// serve (kmsg's zero value is version 0, which lacks fields a
		// registration needs and which a controller refuses for
		// CreateTopics). A client's forwarded request keeps its own.
		if a := apiFor(req.Key()); a != nil && a.listeners&controllerListeners != 0 {
			req.SetVersion(a.max)
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
func (c *ControllerClient) activeController() (int32, string, bool) {
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
func (c *ControllerClient) send(ctx context.Context, id int32, addr string, req kmsg.Request) (resp kmsg.Response, retry bool, err error) {
	key := connKey{id: id}
	conn, err := c.conn(ctx, key, addr)
	if err != nil {
		return nil, true, err
	}
	who, forwarded := identityFrom(ctx)
	if !forwarded {
		// This node's own request (its registration and heartbeats,
		// producer id blocks, ISR changes, internal topics) goes as
		// itself, authorized with this connection's principal as
		// Kafka's broker-to-controller channel is.
		resp, sent, err := conn.roundTrip(ctx, req)
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
	env.RequestData = kmsg.NewRequestFormatter(kmsg.FormatterClientID(who.clientID)).AppendRequest(nil, req, 0)[4:]
	env.RequestPrincipal = encodePrincipal(who)
	clientAddr := who.addr.Unmap()
	if !clientAddr.IsValid() {
		// A client whose address is unknown: the envelope still
		// carries 4 bytes, as the controller requires.
		clientAddr = netip.IPv4Unspecified()
	}
	env.ClientHostAddress = clientAddr.AsSlice()
	answer, sent, err := conn.roundTrip(ctx, env)
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
func (c *ControllerClient) FetchMetadata(ctx context.Context, req *protocol.MetadataFetchRequest) (*protocol.MetadataFetchResponse, error) {
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
		resp, _, rerr := conn.roundTrip(ctx, req)
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

// encodePrincipal is Kafka's DefaultKafkaPrincipalBuilder.serialize: a
// version-prefixed DefaultPrincipalData.
func encodePrincipal(who identity) []byte {
	pd := kmsg.NewDefaultPrincipalData()
	pd.Type, pd.Name, pd.TokenAuthenticated = who.principal.Type, who.principal.Name, who.tokenAuthenticated
	return pd.AppendTo(nil)
}

// decodePrincipal reads what encodePrincipal writes.
func decodePrincipal(b []byte) (authz.Principal, bool, error) {
	pd := kmsg.NewDefaultPrincipalData()
	if len(b) < 2 {
		return authz.Principal{}, false, errors.New("principal data shorter than its version")
	}
	if v := int16(b[0])<<8 | int16(b[1]); v != 0 {
		return authz.Principal{}, false, fmt.Errorf("principal data version %d", v)
	}
	if err := pd.ReadFrom(b); err != nil {
		return authz.Principal{}, false, err
	}
	return authz.Principal{Type: pd.Type, Name: pd.Name}, pd.TokenAuthenticated, nil
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

func (c *ControllerClient) conn(ctx context.Context, key connKey, addr string) (*peerConn, error) {
	return c.pool.get(ctx, key, addr)
}

func (c *ControllerClient) drop(key connKey, cc *peerConn) { c.pool.drop(key, cc, errForwardLost) }

// Close closes every controller connection; requests waiting on them fail.
func (c *ControllerClient) Close() { c.pool.close() }

// DialFunc opens a connection to another node's listener at addr
// (host:port), secured and authenticated as that listener asks
// (broker/ssl's Dialer); ctx bounds it.
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

// dialTCP is the DialFunc of a PLAINTEXT listener.
func dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, forwardDialTime)
	defer cancel()
	return peerdial.Dial(ctx, addr)
}

// connPool keeps one pipelined connection per key (a peer), dialled on
// first use and again once it fails or the peer's address changes. mu
// guards conns; a connection's own lock is taken after it. Every
// connection a broker opens to another node is dialled here.
type connPool[K comparable] struct {
	nodeID int32 // ours, in the client id
	dial   DialFunc
	mu     sync.Mutex
	conns  map[K]*peerConn
	closed bool
}

func newConnPool[K comparable](nodeID int32, dial DialFunc) *connPool[K] {
	if dial == nil {
		dial = dialTCP
	}
	return &connPool[K]{nodeID: nodeID, dial: dial, conns: map[K]*peerConn{}}
}

var errPoolClosed = errors.New("shutting down")

func (p *connPool[K]) get(ctx context.Context, key K, addr string) (*peerConn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	if c := p.conns[key]; c != nil && c.addr == addr && c.usable() {
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, forwardDialTime)
	nc, err := p.dial(dctx, addr)
	cancel()
	if err != nil {
		return nil, err
	}
	c := newPeerConn(nc, addr, p.nodeID)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.close(errPoolClosed)
		return nil, errPoolClosed
	}
	if old := p.conns[key]; old != nil && old.addr == addr && old.usable() {
		// Another caller dialled meanwhile: use its connection.
		c.close(errors.New("not needed"))
		return old, nil
	}
	if old := p.conns[key]; old != nil {
		if old.addr == addr && !old.isDead() {
			// Its SASL session is to be renewed: the requests it
			// carries are answered, then it closes.
			old.retire()
		} else {
			old.close(errors.New("the peer moved"))
		}
	}
	p.conns[key] = c
	return c, nil
}

// drop forgets c (if it is still key's) and closes it with err.
func (p *connPool[K]) drop(key K, c *peerConn, err error) {
	p.mu.Lock()
	if p.conns[key] == c {
		delete(p.conns, key)
	}
	p.mu.Unlock()
	c.close(err)
}

func (p *connPool[K]) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[K]*peerConn{}
	p.mu.Unlock()
	for _, c := range conns {
		c.close(errPoolClosed)
	}
}

// peerConn is one pipelined connection to a controller or a broker: requests
// are written in order and answered in order (Kafka's guarantee per
// connection).
type peerConn struct {
	nc        net.Conn
	addr      string
	formatter *kmsg.RequestFormatter

	writeMu sync.Mutex
	corr    int32
	waiting []*forwardWait // in request order
	dead    error
	// retired: a replacement carries new requests; this one closes once
	// it has no request waiting.
	retired bool
}

type forwardWait struct {
	corr int32
	resp kmsg.Response
	done chan error // buffered
}

func newPeerConn(nc net.Conn, addr string, nodeID int32) *peerConn {
	cc := &peerConn{nc: nc, addr: addr,
		formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID("gregor-broker-" + strconv.Itoa(int(nodeID))))}
	go cc.readLoop()
	return cc
}

func (cc *peerConn) isDead() bool {
	cc.writeMu.Lock()
	defer cc.writeMu.Unlock()
	return cc.dead != nil
}

// usable reports whether the pool may hand the connection out: it is
// alive and, on a SASL listener, its session is not due for renewal.
func (cc *peerConn) usable() bool {
	return !cc.isDead() && !sasl.Expiring(cc.nc)
}

// errRetired closes a connection whose SASL session was renewed by a
// fresh connection.
var errRetired = errors.New("its SASL session was renewed on a new connection")

// retire closes the connection once the requests it carries are answered.
func (cc *peerConn) retire() {
	cc.writeMu.Lock()
	cc.retired = true
	idle := len(cc.waiting) == 0
	cc.writeMu.Unlock()
	if idle {
		cc.close(errRetired)
	}
}

// roundTrip sends req and waits for its answer; sent reports whether any
// of it may have reached the controller.
func (cc *peerConn) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, bool, error) {
	w := &forwardWait{resp: req.ResponseKind(), done: make(chan error, 1)}
	w.resp.SetVersion(req.GetVersion())
	cc.writeMu.Lock()
	if cc.dead != nil {
		err := cc.dead
		cc.writeMu.Unlock()
		return nil, false, err
	}
	cc.corr++
	w.corr = cc.corr
	frame := cc.formatter.AppendRequest(nil, req, w.corr)
	cc.waiting = append(cc.waiting, w)
	_ = cc.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	n, err := cc.nc.Write(frame)
	cc.writeMu.Unlock()
	if err != nil {
		cc.close(err)
		return nil, n > 0, err
	}
	select {
	case err := <-w.done:
		if err != nil {
			return nil, true, err
		}
		return w.resp, true, nil
	case <-ctx.Done():
		return nil, true, ctx.Err()
	}
}

func (cc *peerConn) readLoop() {
	br := bufio.NewReaderSize(cc.nc, 64<<10)
	for {
		frame, err := protocol.ReadFrame(br, 1<<30, nil)
		if err != nil {
			cc.close(err)
			return
		}
		cc.writeMu.Lock()
		if len(cc.waiting) == 0 {
			cc.writeMu.Unlock()
			cc.close(errors.New("a response to no request"))
			return
		}
		w := cc.waiting[0]
		cc.waiting = cc.waiting[1:]
		drained := cc.retired && len(cc.waiting) == 0
		cc.writeMu.Unlock()
		corr, err := protocol.ParseResponse(frame, w.resp)
		if err == nil && corr != w.corr {
			err = fmt.Errorf("response with correlation id %d to request %d", corr, w.corr)
		}
		w.done <- err
		if err == nil && drained {
			err = errRetired
		}
		if err != nil {
			cc.close(err)
			return
		}
	}
}

// close fails every waiting request with err and closes the connection.
func (cc *peerConn) close(err error) {
	cc.writeMu.Lock()
	if cc.dead == nil {
		cc.dead = err
	}
	waiting := cc.waiting
	cc.waiting = nil
	cc.writeMu.Unlock()
	cc.nc.Close()
	for _, w := range waiting {
		w.done <- fmt.Errorf("%w: %w", errForwardLost, err)
	}
}
