package network

// What tests and diagnostics read of a server and its connections, and
// the requests read from no socket that tests and benchmarks hand to a
// handler directly. Nothing here changes how the server serves.

import (
	"net"
	"net/netip"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Panics is how many handlers have panicked (each closed only its
// connection).
func (s *Server) Panics() int64 { return s.panics.Load() }

// Conns are the server's connections now.
func (s *Server) Conns() []*Conn {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	out := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// Serving reports whether c is still one of the server's connections.
func (s *Server) Serving(c *Conn) bool {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	_, ok := s.conns[c]
	return ok
}

// QueuedBytesAvailable is what queued.max.request.bytes has left now;
// false when it is unlimited.
func (s *Server) QueuedBytesAvailable() (int64, bool) {
	p := s.requestPool
	if p == nil {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.available, true
}

// Socket is the connection's accepted socket.
func (c *Conn) Socket() net.Conn { return c.nc }

// Listener is the name of the connection's listener.
func (c *Conn) Listener() string { return c.listener.Name }

// ControllerListener reports whether the connection's listener is a
// controller listener.
func (c *Conn) ControllerListener() bool { return c.listener.Controller }

// Principal is the connection's principal now, and TokenAuthenticated
// whether it authenticated with a delegation token.
func (c *Conn) Principal() authz.Principal { return c.session.principal }

// TokenAuthenticated: see Principal.
func (c *Conn) TokenAuthenticated() bool { return c.session.tokenAuthenticated }

// Held is the bytes the connection's requests and unwritten responses
// hold now, PeakHeld the most they ever held, and AtBudget whether the
// reader waits for them to fall.
func (c *Conn) Held() int64 { return c.held.n.Load() }

// PeakHeld: see Held.
func (c *Conn) PeakHeld() int64 { return c.held.peak.Load() }

// AtBudget: see Held.
func (c *Conn) AtBudget() bool { return c.held.full() }

// Closed reports whether the connection has ended.
func (c *Conn) Closed() bool { return c.ctx.Err() != nil }

// IdleTimerArmed reports whether connections.max.idle.ms can close the
// connection (it cannot when the limit is -1).
func (c *Conn) IdleTimerArmed() bool { return c.idleTimer != nil }

// DetachedConn is a connection of the server on the listener named name,
// from addr, that reads from no socket: its requests (Conn.Request) are
// handed to a handler directly, and their answers kept for Answer.
func (s *Server) DetachedConn(name string, addr netip.Addr) *Conn {
	c := &Conn{srv: s, listener: &listener{ListenerSpec: ListenerSpec{Name: name}}}
	c.session = newSession(c.listener, addr)
	return c
}

// Request is a request of a DetachedConn: it allocates what a read
// request does (the request, its slot and the slot's channel).
func (c *Conn) Request(hdr protocol.RequestHeader, body kmsg.Request) *Request {
	return &Request{conn: c, Header: hdr, Body: body, slot: &slot{done: make(chan struct{}), owner: &c.held}}
}

// Answered is closed once the request is answered.
func (r *Request) Answered() <-chan struct{} { return r.slot.done }

// Answer is the request's answer once Answered: a whole frame, or the
// chunks of RespondChunks (whose file ranges the caller releases).
func (r *Request) Answer() (frame []byte, chunks []Chunk) { return r.slot.frame, r.slot.chunks }
