// Package broker serves the Kafka protocol: listeners and connections,
// request dispatch, one handler file per API, and the replica manager.
package broker

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListenerSpec is one configured listener.
type ListenerSpec struct {
	Name             string // e.g. PLAINTEXT, CONTROLLER
	Host             string
	Port             int
	SecurityProtocol string // PLAINTEXT only for now
	// Controller marks a listener in controller.listener.names: it serves
	// the controller APIs instead of the client ones.
	Controller bool
}

// listener is a bound listener.
type listener struct {
	ListenerSpec
	ln       net.Listener
	registry *protocol.Registry
	// allowed is the set of API keys served on this listener.
	allowed map[int16]bool
}

func (l *listener) serves(key int16) bool { return l.allowed[key] }

// handlerFunc handles one request: it answers through r, inline or from a
// goroutine of its own (see conn.go).
type handlerFunc func(ctx context.Context, r *request)

type handler struct {
	key      kmsg.Key
	min, max int16
	fn       handlerFunc
	// unsupported, when set, answers versions below min that are
	// advertised anyway (Produce v0-2).
	unsupported func(r *request)
	// advertisedMin is the minimum version advertised when it differs
	// from min.
	advertisedMin int16
	// onBroker and onController say which listeners serve the API.
	onBroker, onController bool
}

// Server accepts connections on the configured listeners and dispatches
// their requests to the broker's handlers.
type Server struct {
	opts     ServerOptions
	log      *slog.Logger
	handlers map[int16]*handler
	// brokerRegistry and controllerRegistry are what ApiVersions reports
	// on client and controller listeners.
	brokerRegistry     *protocol.Registry
	controllerRegistry *protocol.Registry
	// registry is used to check ApiVersions requests; both listener kinds
	// serve ApiVersions at the same versions.
	registry *protocol.Registry
	// apiVersionsResponse builds the ApiVersions body for a listener.
	apiVersions func(l *listener, version int16) *kmsg.ApiVersionsResponse

	listeners []*listener
	draining  atomic.Bool
	// frames recycles the frame buffers of Produce requests across
	// connections (conn.releaseFrame says when one is free).
	frames protocol.FramePool
	// panics counts handler panics (each closed only its connection);
	// tests assert it stays zero.
	panics  atomic.Int64
	wg      sync.WaitGroup
	connsMu sync.Mutex
	conns   map[*conn]struct{}
	ctx     context.Context
	cancel  context.CancelFunc
}

// ServerOptions configure the network side.
type ServerOptions struct {
	Listeners      []ListenerSpec
	MaxRequestSize int32 // socket.request.max.bytes
	Logger         *slog.Logger
}

func newServer(opts ServerOptions, handlers []*handler, apiVersions func(l *listener, version int16) *kmsg.ApiVersionsResponse) *Server {
	s := &Server{
		opts:               opts,
		log:                opts.Logger,
		handlers:           map[int16]*handler{},
		brokerRegistry:     protocol.NewRegistry(),
		controllerRegistry: protocol.NewRegistry(),
		registry:           protocol.NewRegistry(),
		apiVersions:        apiVersions,
		conns:              map[*conn]struct{}{},
	}
	for _, h := range handlers {
		s.handlers[int16(h.key)] = h
		min := h.min
		if h.unsupported != nil {
			min = h.advertisedMin
		}
		if h.onBroker {
			s.brokerRegistry.Add(h.key, min, h.max)
		}
		if h.onController {
			s.controllerRegistry.Add(h.key, min, h.max)
		}
		if h.key == kmsg.ApiVersions {
			s.registry.Add(h.key, min, h.max)
		}
	}
	return s
}

// Listen binds every listener; start-up fails if one cannot be bound.
func (s *Server) Listen() error {
	for _, spec := range s.opts.Listeners {
		addr := net.JoinHostPort(spec.Host, strconv.Itoa(spec.Port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			s.closeListeners()
			return fmt.Errorf("binding listener %s on %s: %w", spec.Name, addr, err)
		}
		l := &listener{ListenerSpec: spec, ln: ln, registry: s.brokerRegistry, allowed: map[int16]bool{}}
		if spec.Controller {
			l.registry = s.controllerRegistry
		}
		l.Port = ln.Addr().(*net.TCPAddr).Port
		for key, h := range s.handlers {
			if (spec.Controller && h.onController) || (!spec.Controller && h.onBroker) {
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

// Serve accepts connections until Shutdown.
func (s *Server) Serve(ctx context.Context) {
	s.ctx, s.cancel = context.WithCancel(ctx)
	for _, l := range s.listeners {
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
		if tcp, ok := nc.(*net.TCPConn); ok {
			tcp.SetNoDelay(true)
		}
		cctx, cancel := context.WithCancel(s.ctx)
		c := &conn{
			srv:      s,
			nc:       nc,
			listener: l,
			log:      s.log.With("remote", nc.RemoteAddr().String(), "listener", l.Name),
			ctx:      cctx,
			cancel:   cancel,
			queue:    make(chan *slot, maxInFlight),
		}
		s.connsMu.Lock()
		s.conns[c] = struct{}{}
		s.connsMu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.connsMu.Lock()
				delete(s.conns, c)
				s.connsMu.Unlock()
			}()
			c.serve()
		}()
	}
}

// Shutdown stops accepting, lets every connection answer the requests it
// has already read, and closes them.
func (s *Server) Shutdown() {
	s.draining.Store(true)
	s.closeListeners()
	s.connsMu.Lock()
	for c := range s.conns {
		// Wake the reader; it stops reading and drains.
		c.nc.SetReadDeadline(time.Now())
	}
	s.connsMu.Unlock()
	s.wg.Wait()
	if s.cancel != nil {
		s.cancel()
	}
}

// dispatch runs a handler; a panic is logged and closes only this
// connection.
func (s *Server) dispatch(ctx context.Context, h *handler, r *request) {
	defer func() {
		if p := recover(); p != nil {
			s.panics.Add(1)
			s.log.Error("handler panicked; closing connection", "api", h.key.Name(), "version", r.hdr.APIVersion, "panic", p, "stack", string(debug.Stack()))
			r.slot.closeConn = true
			select {
			case <-r.slot.done:
			default:
				r.slot.finish()
			}
		}
	}()
	h.fn(ctx, r)
}

// goAsync runs the rest of a handler on its own goroutine, with the same
// panic protection as dispatch.
func (r *request) goAsync(fn func()) {
	go func() {
		defer func() {
			if p := recover(); p != nil {
				r.conn.srv.panics.Add(1)
				r.conn.log.Error("handler panicked; closing connection", "api", kmsg.NameForKey(r.hdr.APIKey), "panic", p, "stack", string(debug.Stack()))
				r.slot.closeConn = true
				select {
				case <-r.slot.done:
				default:
					r.slot.finish()
				}
			}
		}()
		fn()
	}()
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
