// Package network is the Kafka protocol's server side below the handlers:
// listeners (client and controller alike) and their connection limits
// (max.connections and its per-listener and per-IP forms,
// connection_creation_rate), connections and their framing, the order of
// their answers, their memory budgets, queued.max.request.bytes, idleness,
// muting for quota throttles, the TLS handshake of SSL listeners, the SASL
// state machine of SASL listeners, and the pool that runs handlers off a
// connection's goroutine.
//
// It knows nothing of what a request means: the Server is given the
// Handlers it dispatches to (an API key, the versions served, the
// listeners that serve it) and advertises in ApiVersions the registries it
// derives from them; a handler receives a *Request, reads its header and
// decoded body, who sent it (principal, address, listener), and answers
// it with Respond, RespondChunks, NoResponse or CloseConnection, inline or
// from GoAsync. The request quota (broker/quota) is measured and applied
// here, around the handler and as its answer is encoded.
//
// Of Gregor's packages it imports protocol, sasl, vfs, broker/ssl,
// broker/authz (the principal) and broker/quota; never broker itself.
// Lock order and goroutines: LOCKS.md at the repository root.
package network

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/broker/quota"
	"github.com/gregorbroker/gregor/broker/ssl"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListenerSpec is one configured listener.
type ListenerSpec struct {
	Name             string // e.g. PLAINTEXT, CONTROLLER
	Host             string
	Port             int
	SecurityProtocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	// Controller marks a listener in controller.listener.names: it serves
	// the controller APIs instead of the client ones.
	Controller bool
	// TLS is the server side of an SSL or SASL_SSL listener; nil on the
	// others (connsecurity.go).
	TLS *ssl.Server
	// SASL is the authentication set-up of a SASL_PLAINTEXT or SASL_SSL
	// listener (sasl.go); nil for the others.
	SASL *SASLConfig
}

// listener is a bound listener.
type listener struct {
	ListenerSpec
	ln       net.Listener
	registry *protocol.Registry
	// allowed is the set of API keys served on this listener.
	allowed map[int16]bool
	// quotas counts this listener's connections with the others of its
	// kind; nil when no limits are configured.
	quotas *connQuotas
	// serving is set once its accept loop runs (Server's caller goroutine).
	serving bool
	// stats are its socket-server-metrics (metrics.go).
	stats listenerStats
}

func (l *listener) serves(key int16) bool { return l.allowed[key] }

// Handler is one API as the server dispatches it.
type Handler struct {
	Key      kmsg.Key
	Min, Max int16
	// Serve handles one request: it answers through r, inline or from a
	// goroutine of its own (see conn.go).
	Serve func(ctx context.Context, r *Request)
	// Unsupported, when set, answers versions below Min that are
	// advertised anyway (Produce v0-2).
	Unsupported func(r *Request)
	// AdvertisedMin is the minimum version advertised when it differs
	// from Min.
	AdvertisedMin int16
	// OnClient and OnController say which listeners serve the API.
	OnClient, OnController bool
	// Internal APIs (Gregor's own RaftMessages) are served but left out of
	// ApiVersions.
	Internal bool
	// QuotaExempt requests are left alone by the request quota: what
	// brokers and controllers send each other (Kafka's cluster actions).
	QuotaExempt bool
}

// Server accepts connections on the configured listeners and dispatches
// their requests to its handlers.
type Server struct {
	opts     ServerOptions
	log      *slog.Logger
	handlers map[int16]*Handler
	// brokerRegistry and controllerRegistry are what ApiVersions reports
	// on client and controller listeners.
	brokerRegistry     *protocol.Registry
	controllerRegistry *protocol.Registry
	// registry is used to check ApiVersions requests; both listener kinds
	// serve ApiVersions at the same versions.
	registry *protocol.Registry

	listeners []*listener
	draining  atomic.Bool
	// drain is closed when Shutdown begins: readers waiting for room in
	// a budget and acceptors waiting for a connection slot stop.
	drain     chan struct{}
	drainOnce sync.Once
	// requestPool is queued.max.request.bytes; nil when unlimited.
	requestPool *requestPool
	// frames recycles the frame buffers of Produce requests across
	// connections (conn.releaseFrame says when one is free).
	frames protocol.FramePool
	// writeBuffers are the connections' write buffers, held only while
	// a connection has responses to write (Conn.writeLoop).
	writeBuffers sync.Pool
	// readBuffers are the connections' read buffers, held only while
	// they hold unread bytes (reader.go).
	readBuffers readBuffers
	// async runs the handlers that leave their connection's goroutine.
	async *asyncPool
	// quotas are the client quotas the node enforces (broker/quota); nil
	// when ServerOptions has none.
	quotas *quota.Manager
	// requests counts the requests received by API and version (Kafka's
	// RequestsPerSec); built with the handlers, read-only afterwards
	// but for its counters.
	requests map[int16]*versionCounts
	// fetchConsumer and fetchFollower count the Fetch requests again by
	// who sent them (Kafka's FetchConsumer and FetchFollower).
	fetchConsumer, fetchFollower versionCounts
	// times are the request histograms by API (and a Fetch's again by
	// who sent it); built with the handlers, each allocated with its
	// first request.
	times                                  map[int16]*lazyTimes
	fetchConsumerTimes, fetchFollowerTimes lazyTimes
	// idle sums the handlers' time for RequestHandlerAvgIdlePercent.
	idle *handlerIdle
	// panics counts handler panics (each closed only its connection);
	// tests assert it stays zero.
	panics  atomic.Int64
	wg      sync.WaitGroup
	connsMu sync.Mutex
	conns   map[*Conn]struct{}
	ctx     context.Context
	cancel  context.CancelFunc
}

// ServerOptions configure the network side.
type ServerOptions struct {
	Listeners      []ListenerSpec
	MaxRequestSize int32 // socket.request.max.bytes
	// MaxIdle is connections.max.idle.ms: 0 means Kafka's default of 10
	// minutes, negative means never.
	MaxIdle time.Duration
	// ConnectionBudget is the bytes of requests being handled and
	// responses waiting to be written past which a connection's next
	// request is not read; 0 means DefaultConnectionBudget.
	ConnectionBudget int64
	// QueuedMaxRequestBytes is queued.max.request.bytes; 0 or negative
	// means no limit (Kafka's default is -1).
	QueuedMaxRequestBytes int64
	// Limits are the connection-count limits; nil means none.
	Limits *ConnectionLimits
	// SendBufferBytes and ReceiveBufferBytes are socket.send.buffer.bytes
	// and socket.receive.buffer.bytes: SO_SNDBUF of accepted sockets and
	// SO_RCVBUF of the listening socket (which accepted sockets inherit,
	// so that the TCP window is sized before the handshake), as Kafka's
	// Acceptor sets them. 0 or negative keeps the OS default (Kafka's -1).
	SendBufferBytes    int32
	ReceiveBufferBytes int32
	// CopyRangeMax is the largest segment range a fetch response carries
	// in its own write, read into the connection's write buffer, instead
	// of sending it with sendfile (conn.go, copyFileRange); 0 means
	// DefaultCopyRangeMax, negative means every range goes by sendfile.
	// It is at most WriteBufferSize/2, so that the bytes around a range
	// fit beside it.
	CopyRangeMax int64
	// SASLMaxReceiveSize is sasl.server.max.receive.size: the largest
	// frame a connection may send before it has authenticated; 0 means
	// Kafka's default.
	SASLMaxReceiveSize int32
	// FailedAuthenticationDelay is
	// connection.failed.authentication.delay.ms: how long a failed
	// authentication's answer (and the close after it) waits.
	FailedAuthenticationDelay time.Duration
	// ScramCredentials looks SCRAM credentials up (in the metadata
	// image); broker.New sets it.
	ScramCredentials sasl.ScramLookup
	// DelegationTokens looks delegation tokens up for the SCRAM
	// mechanisms (the broker's delegationtokens.go); broker.New sets it.
	DelegationTokens sasl.TokenLookup
	// Quotas are the client quotas the server measures and applies to
	// requests and new connections; broker.New sets it (nil: none).
	Quotas *quota.Manager
	Logger *slog.Logger
	// RequestLogger logs every request it is enabled for at DEBUG, as
	// Kafka's kafka.request.logger does (nil: none); its level is changed
	// at run time through BROKER_LOGGER resources.
	RequestLogger *slog.Logger
}

// ConnectionLimits are Kafka's connection-count limits. Client listeners
// and controller listeners are counted apart, as Kafka's broker and
// controller socket servers each count their own.
type ConnectionLimits struct {
	// MaxConnections is max.connections: past it a listener stops
	// accepting until a connection of its kind closes.
	MaxConnections int32
	// ListenerMaxConnections are listener.name.<l>.max.connections by
	// listener name; a listener without one is held to MaxConnections.
	ListenerMaxConnections map[string]int32
	// MaxConnectionsPerIP is max.connections.per.ip: a connection past
	// it is closed at once.
	MaxConnectionsPerIP int32
	// PerIPOverrides are max.connections.per.ip.overrides: a host name
	// or address and its own limit.
	PerIPOverrides map[string]int32
	// InterBrokerListener is exempt from MaxConnections (not from its
	// own listener limit) when there are other client listeners, so that
	// clients cannot lock brokers out (Kafka's protected listener).
	InterBrokerListener string
	// MaxConnectionCreationRate is max.connection.creation.rate: new
	// connections a second the listeners take together before the
	// acceptor waits (the inter-broker listener is exempt as from
	// MaxConnections); ListenerMaxConnectionCreationRate are
	// listener.name.<l>.max.connection.creation.rate, one listener's own
	// (KIP-612). A limit of math.MaxInt32, the default, is none.
	// RateWindow is how the rates are measured (quota.window.num samples
	// of quota.window.size.seconds).
	MaxConnectionCreationRate         int32
	ListenerMaxConnectionCreationRate map[string]int32
	RateWindow                        quota.Window
}

// NewServer returns a server of opts' listeners dispatching to handlers;
// Listen binds them.
func NewServer(opts ServerOptions, handlers []*Handler) *Server {
	s := &Server{
		opts:               opts,
		log:                opts.Logger,
		handlers:           map[int16]*Handler{},
		brokerRegistry:     protocol.NewRegistry(),
		controllerRegistry: protocol.NewRegistry(),
		registry:           protocol.NewRegistry(),
		conns:              map[*Conn]struct{}{},
		drain:              make(chan struct{}),
		async:              newAsyncPool(asyncWorkerIdle),
		quotas:             opts.Quotas,
		idle:               newHandlerIdle(time.Now()),
		writeBuffers:       sync.Pool{New: func() any { return bufio.NewWriterSize(nil, WriteBufferSize) }},
	}
	if s.opts.MaxIdle == 0 {
		s.opts.MaxIdle = 10 * time.Minute
	}
	if s.opts.ConnectionBudget <= 0 {
		s.opts.ConnectionBudget = DefaultConnectionBudget
	}
	switch {
	case s.opts.CopyRangeMax == 0:
		s.opts.CopyRangeMax = DefaultCopyRangeMax
	case s.opts.CopyRangeMax > WriteBufferSize/2:
		s.opts.CopyRangeMax = WriteBufferSize / 2
	}
	if s.opts.SASLMaxReceiveSize <= 0 {
		s.opts.SASLMaxReceiveSize = DefaultSASLMaxReceiveSize
	}
	if s.opts.QueuedMaxRequestBytes > 0 {
		s.requestPool = newRequestPool(s.opts.QueuedMaxRequestBytes)
	}
	s.requests = map[int16]*versionCounts{}
	s.times = map[int16]*lazyTimes{}
	for _, h := range handlers {
		s.requests[int16(h.Key)] = &versionCounts{}
		s.times[int16(h.Key)] = &lazyTimes{}
		s.handlers[int16(h.Key)] = h
		min := h.Min
		if h.Unsupported != nil {
			min = h.AdvertisedMin
		}
		if h.Internal {
			continue
		}
		if h.OnClient {
			s.brokerRegistry.Add(h.Key, min, h.Max)
		}
		if h.OnController {
			s.controllerRegistry.Add(h.Key, min, h.Max)
		}
		if h.Key == kmsg.ApiVersions {
			s.registry.Add(h.Key, min, h.Max)
		}
	}
	return s
}

// listenConfig sets SO_RCVBUF on listening sockets when configured.
func (s *Server) listenConfig() *net.ListenConfig {
	lc := &net.ListenConfig{}
	if n := s.opts.ReceiveBufferBytes; n > 0 {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, int(n))
			})
			if err != nil {
				return err
			}
			return serr
		}
	}
	return lc
}

// Listen binds every listener; start-up fails if one cannot be bound.
func (s *Server) Listen() error {
	var clientQuotas, controllerQuotas *connQuotas
	if lim := s.opts.Limits; lim != nil {
		overrides, err := resolvePerIPOverrides(lim.PerIPOverrides)
		if err != nil {
			return err
		}
		clientQuotas = newConnQuotas(*lim, overrides)
		controllerQuotas = newConnQuotas(*lim, overrides)
	}
	for _, spec := range s.opts.Listeners {
		addr := net.JoinHostPort(spec.Host, strconv.Itoa(spec.Port))
		ln, err := s.listenConfig().Listen(context.Background(), "tcp", addr)
		if err != nil {
			s.closeListeners()
			return fmt.Errorf("binding listener %s on %s: %w", spec.Name, addr, err)
		}
		l := &listener{ListenerSpec: spec, ln: ln, registry: s.brokerRegistry, allowed: map[int16]bool{}}
		if spec.Controller {
			l.registry = s.controllerRegistry
		}
		l.quotas = clientQuotas
		if spec.Controller {
			l.quotas = controllerQuotas
		}
		l.quotas.addListener()
		l.Port = ln.Addr().(*net.TCPAddr).Port
		for key, h := range s.handlers {
			if (spec.Controller && h.OnController) || (!spec.Controller && h.OnClient) {
				l.allowed[key] = true
			}
		}
		s.listeners = append(s.listeners, l)
	}
	return nil
}

// Addrs returns the bound address of each listener by name.
func (s *Server) Addrs() map[string]net.Addr {
	out := map[string]net.Addr{}
	for _, l := range s.listeners {
		out[l.Name] = l.ln.Addr()
	}
	return out
}

func (s *Server) closeListeners() {
	for _, l := range s.listeners {
		l.ln.Close()
	}
}

// Serve accepts connections on every listener until Shutdown.
func (s *Server) Serve(ctx context.Context) { s.serve(ctx, false) }

// ServeControllerListeners starts accepting on the controller listeners
// only: a controller must hear its peers before the broker beside it can
// register (the quorum needs them to elect a leader). Serve starts the
// rest later.
func (s *Server) ServeControllerListeners(ctx context.Context) { s.serve(ctx, true) }

func (s *Server) serve(ctx context.Context, controllersOnly bool) {
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithCancel(ctx)
	}
	for _, l := range s.listeners {
		if l.serving || (controllersOnly && !l.Controller) {
			continue
		}
		l.serving = true
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.acceptLoop(l)
		}()
	}
}

func (s *Server) acceptLoop(l *listener) {
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if s.ctx.Err() == nil && !s.draining.Load() {
				s.log.Error("accept failed; listener stops", "listener", l.Name, "err", err)
			}
			return
		}
		ip := remoteIP(nc)
		if d := s.quotas.ConnectionThrottle(ip); d > 0 {
			// Past the address's connection_creation_rate: held
			// unserved and closed when the throttle ends (KIP-612).
			s.log.Debug("delaying closing of connection", "from", ip, "ms", d.Milliseconds(), "listener", l.Name)
			s.closeAfter(nc, d)
			continue
		}
		if err := l.quotas.admit(s.ctx, s.drain, l.Name, ip); err != nil {
			var tooMany errTooManyFromIP
			if errors.As(err, &tooMany) {
				s.log.Info(fmt.Sprintf("Rejected connection from %s, address already has the configured maximum of %d connections.", ip, tooMany.limit), "listener", l.Name)
			}
			nc.Close()
			continue
		}
		if tcp, ok := nc.(*net.TCPConn); ok {
			tcp.SetNoDelay(true)
			if n := s.opts.SendBufferBytes; n > 0 {
				tcp.SetWriteBuffer(int(n))
			}
		}
		cctx, cancel := context.WithCancel(s.ctx)
		c := &Conn{
			srv:      s,
			nc:       nc,
			in:       socketReader(nc),
			out:      nc,
			listener: l,
			session:  newSession(l, ip),
			ctx:      cctx,
			cancel:   cancel,
			queue:    make(chan *slot, maxInFlight),
			room:     make(chan struct{}, 1),
			idle:     idleClock{born: time.Now()},
		}
		c.held = heldBytes{budget: s.opts.ConnectionBudget, freed: c.signalRoom}
		if l.SASL != nil {
			c.auth = newSASLSession(l.SASL)
		}
		s.connsMu.Lock()
		s.conns[c] = struct{}{}
		s.connsMu.Unlock()
		l.stats.created.Add(1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.connsMu.Lock()
				delete(s.conns, c)
				s.connsMu.Unlock()
				l.stats.closed.Add(1)
				l.quotas.release(l.Name, ip)
			}()
			c.serve()
		}()
	}
}

// closeAfter closes a connection it never served once d has passed, or
// at Shutdown.
func (s *Server) closeAfter(nc net.Conn, d time.Duration) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer nc.Close()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.drain:
		}
	}()
}

// Shutdown stops accepting, lets every connection answer the requests it
// has already read, and closes them.
func (s *Server) Shutdown() {
	s.draining.Store(true)
	s.drainOnce.Do(func() { close(s.drain) })
	s.closeListeners()
	s.connsMu.Lock()
	for c := range s.conns {
		// Wake the reader; it stops reading and drains.
		c.nc.SetReadDeadline(time.Now())
	}
	s.connsMu.Unlock()
	s.wg.Wait()
	s.async.close()
	if s.cancel != nil {
		s.cancel()
	}
}

// dispatch runs a handler; a panic is logged and closes only this
// connection.
func (s *Server) dispatch(ctx context.Context, h *Handler, r *Request) {
	defer func() {
		if p := recover(); p != nil {
			s.panics.Add(1)
			s.log.Error("handler panicked; closing connection", "api", h.Key.Name(), "version", r.Header.APIVersion, "panic", p, "stack", string(debug.Stack()))
			r.slot.closeConn = true
			select {
			case <-r.slot.done:
			default:
				r.slot.finish()
			}
		}
	}()
	h.Serve(ctx, r)
}

// GoAsync runs the rest of a handler on its own goroutine, with the same
// panic protection as dispatch.
func (r *Request) GoAsync(fn func()) {
	r.conn.srv.async.run(func() {
		defer func() {
			if p := recover(); p != nil {
				r.conn.srv.panics.Add(1)
				r.conn.logger().Error("handler panicked; closing connection", "api", kmsg.NameForKey(r.Header.APIKey), "panic", p, "stack", string(debug.Stack()))
				r.slot.closeConn = true
				select {
				case <-r.slot.done:
				default:
					r.slot.finish()
				}
			}
		}()
		fn()
	})
}

// WatchClose runs fn on a goroutine of its own once the request's
// connection ends, unless the server is shutting down then (a connection
// this node closes itself says nothing of the peer). Only a connection's
// first call watches; later ones do nothing.
func (r *Request) WatchClose(fn func()) {
	c := r.conn
	c.watchClose.Do(func() {
		go func() {
			<-c.ctx.Done()
			if c.srv.draining.Load() {
				return
			}
			fn()
		}()
	})
}

// apiVersionsUnsupported is the v0 answer to an ApiVersions version we do
// not know.
func (s *Server) apiVersionsUnsupported() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = 35 // UNSUPPORTED_VERSION
	resp.ApiKeys = s.brokerRegistry.APIKeys()
	return resp
}

// requestPool is queued.max.request.bytes: the request bytes all
// connections together may hold from reading a request's size until its
// handler has taken it in. Like Kafka's non-strict memory pool, a
// reservation succeeds while any room is left, so a large request is not
// starved by small ones and the total overshoots by at most one request.
type requestPool struct {
	mu        sync.Mutex
	available int64
	// freed is broadcast whenever bytes come back.
	freed broadcast
}

func newRequestPool(size int64) *requestPool {
	return &requestPool{available: size, freed: newBroadcast()}
}

// acquire reserves n bytes, waiting while the pool is exhausted; it
// reports false when ctx ends or stop closes first.
func (p *requestPool) acquire(ctx context.Context, stop <-chan struct{}, n int64) bool {
	if p == nil {
		return true
	}
	for {
		p.mu.Lock()
		if p.available > 0 {
			p.available -= n
			p.mu.Unlock()
			return true
		}
		freed := p.freed.wait()
		p.mu.Unlock()
		if !awaitClose(ctx, stop, freed) {
			return false
		}
	}
}

func (p *requestPool) release(n int64) {
	if p == nil || n == 0 {
		return
	}
	p.mu.Lock()
	p.available += n
	p.freed.notify()
	p.mu.Unlock()
}

// broadcast wakes every waiter at once: a waiter takes the channel under
// its owner's lock, and notify (under the same lock) closes it and puts a
// fresh one in its place.
type broadcast struct{ ch chan struct{} }

func newBroadcast() broadcast { return broadcast{ch: make(chan struct{})} }

func (b *broadcast) wait() <-chan struct{} { return b.ch }

func (b *broadcast) notify() {
	close(b.ch)
	b.ch = make(chan struct{})
}

// awaitClose waits for ch to close; it reports false when ctx ends or stop
// closes first.
func awaitClose(ctx context.Context, stop, ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

// connQuotas counts the connections of one kind of listener (client or
// controller) against ConnectionLimits.
type connQuotas struct {
	limits     ConnectionLimits
	ipOverride map[netip.Addr]int32
	// listeners is how many listeners share these quotas.
	listeners int

	// brokerRate and listenerRates are the connection creation rates
	// (nil, absent: not limited); each is safe for concurrent use.
	brokerRate    *quota.ConnectionRate
	listenerRates map[string]*quota.ConnectionRate

	mu sync.Mutex
	// freed is broadcast whenever a connection ends.
	freed       broadcast
	total       int32
	perListener map[string]int32
	perIP       map[netip.Addr]int32
}

func newConnQuotas(limits ConnectionLimits, ipOverride map[netip.Addr]int32) *connQuotas {
	q := &connQuotas{
		limits: limits, ipOverride: ipOverride, freed: newBroadcast(),
		perListener: map[string]int32{}, perIP: map[netip.Addr]int32{},
		listenerRates: map[string]*quota.ConnectionRate{},
	}
	rate := func(limit int32) *quota.ConnectionRate {
		if limit <= 0 || limit == math.MaxInt32 || limits.RateWindow.Samples < 1 || limits.RateWindow.Size <= 0 {
			return nil
		}
		return quota.NewConnectionRate(limit, limits.RateWindow)
	}
	q.brokerRate = rate(limits.MaxConnectionCreationRate)
	for l, limit := range limits.ListenerMaxConnectionCreationRate {
		if r := rate(limit); r != nil {
			q.listenerRates[l] = r
		}
	}
	return q
}

// rateThrottle counts a new connection on listener against the broker's
// and the listener's connection creation rates and returns how long the
// acceptor waits before taking it: the longer of the two throttles, the
// broker's left out on the protected inter-broker listener (Kafka's
// ConnectionQuotas.recordConnectionAndGetThrottleTimeMs).
func (q *connQuotas) rateThrottle(listener string, now time.Time) time.Duration {
	var wait time.Duration
	if q.brokerRate != nil && !q.protected(listener) {
		wait = q.brokerRate.Throttle(now)
	}
	if r := q.listenerRates[listener]; r != nil {
		wait = max(wait, r.Throttle(now))
	}
	return wait
}

// protected: listener is the inter-broker listener among others, exempt
// from the broker-wide limits so that clients cannot lock brokers out.
func (q *connQuotas) protected(listener string) bool {
	return listener == q.limits.InterBrokerListener && q.listeners > 1
}

func (q *connQuotas) addListener() {
	if q != nil {
		q.listeners++
	}
}

// errTooManyFromIP refuses a connection past max.connections.per.ip.
type errTooManyFromIP struct{ limit int32 }

func (e errTooManyFromIP) Error() string {
	return fmt.Sprintf("address already has the configured maximum of %d connections", e.limit)
}

var errAcceptStopped = errors.New("server stopping")

// admit counts a new connection on listener from ip. Like Kafka's
// acceptor it waits while the listener or the broker is past its
// connection creation rate or at its connection limit; an address at its
// own limit is refused at once.
func (q *connQuotas) admit(ctx context.Context, stop <-chan struct{}, listener string, ip netip.Addr) error {
	if q == nil {
		return nil
	}
	if wait := q.rateThrottle(listener, time.Now()); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errAcceptStopped
		case <-stop:
			t.Stop()
			return errAcceptStopped
		}
	}
	q.mu.Lock()
	for !q.slotAvailable(listener) {
		freed := q.freed.wait()
		q.mu.Unlock()
		if !awaitClose(ctx, stop, freed) {
			return errAcceptStopped
		}
		q.mu.Lock()
	}
	defer q.mu.Unlock()
	limit, ok := q.ipOverride[ip]
	if !ok {
		limit = q.limits.MaxConnectionsPerIP
	}
	if q.perIP[ip] >= limit {
		return errTooManyFromIP{limit: limit}
	}
	q.total++
	q.perListener[listener]++
	q.perIP[ip]++
	return nil
}

// slotAvailable is called with mu held.
func (q *connQuotas) slotAvailable(listener string) bool {
	listenerMax, ok := q.limits.ListenerMaxConnections[listener]
	if !ok {
		listenerMax = q.limits.MaxConnections
	}
	if q.perListener[listener] >= listenerMax {
		return false
	}
	if q.protected(listener) {
		return true
	}
	return q.total < q.limits.MaxConnections
}

func (q *connQuotas) release(listener string, ip netip.Addr) {
	if q == nil {
		return
	}
	q.mu.Lock()
	q.total--
	q.perListener[listener]--
	if q.perIP[ip]--; q.perIP[ip] <= 0 {
		delete(q.perIP, ip)
	}
	q.freed.notify()
	q.mu.Unlock()
}

// resolvePerIPOverrides turns max.connections.per.ip.overrides into
// addresses; a host name counts for every address it resolves to.
func resolvePerIPOverrides(overrides map[string]int32) (map[netip.Addr]int32, error) {
	out := make(map[netip.Addr]int32, len(overrides))
	for host, limit := range overrides {
		if addr, err := netip.ParseAddr(host); err == nil {
			out[addr.Unmap()] = limit
			continue
		}
		ips, err := net.LookupIP(host)
		if err != nil {
			return nil, fmt.Errorf("resolving %s in max.connections.per.ip.overrides: %w", host, err)
		}
		for _, ip := range ips {
			if addr, ok := netip.AddrFromSlice(ip); ok {
				out[addr.Unmap()] = limit
			}
		}
	}
	return out, nil
}

// remoteIP is the peer address connections are counted by.
func remoteIP(nc net.Conn) netip.Addr {
	if tcp, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return tcp.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}
