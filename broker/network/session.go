package network

// Who is on the other end of a connection.
//
// Every connection has a session from the moment it is accepted: the
// listener it came in on (and so its security protocol) and the client's
// address. Its principal is Kafka's KafkaPrincipal as
// DefaultKafkaPrincipalBuilder builds it: User:ANONYMOUS on a PLAINTEXT
// listener (and on any listener before authentication), the mapped
// certificate name on SSL, the SASL authorization id on SASL listeners.
// Authorization, quotas and forwarding (the Envelope's principal) read it.
//
// Ownership: the reader goroutine sets the principal while it handles the
// authentication requests, which it does inline and in order, before any
// other request of the connection is read; handlers running later (on
// their own goroutines too) only read it, through the request.

import (
	"net"
	"net/netip"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// session is what the broker knows of a connection's peer.
type session struct {
	// listenerName and securityProtocol are the listener's.
	listenerName     string
	securityProtocol string
	// clientAddr is the peer's address (ACL hosts, connection quotas).
	clientAddr netip.Addr
	// hostAddress is clientAddr as Java's getHostAddress writes it, what
	// ACL hosts are compared with (broker/authz); written once here so
	// that no check formats it.
	hostAddress string
	// principal is authz.Anonymous until the connection authenticates.
	principal authz.Principal
	// tokenAuthenticated: the principal authenticated with a delegation
	// token (Kafka's KafkaPrincipal.tokenAuthenticated); such a
	// connection may not create, renew, expire or describe tokens.
	tokenAuthenticated bool
}

// ClientSoftware is a client's name and version from ApiVersions v3+
// (Kafka's ClientInformation).
type ClientSoftware struct{ Name, Version string }

// SetClientSoftware records what the client said it is in a valid
// ApiVersions v3+ request.
func (r *Request) SetClientSoftware(name, version string) {
	r.conn.software.Store(&ClientSoftware{Name: name, Version: version})
}

// ClientSoftware is what the client said it is, zero when it did not
// (ApiVersions below v3, or none yet).
func (r *Request) ClientSoftware() ClientSoftware {
	if s := r.conn.software.Load(); s != nil {
		return *s
	}
	return ClientSoftware{}
}

// Done is closed when the request's connection ends.
func (r *Request) Done() <-chan struct{} { return r.conn.ctx.Done() }

func newSession(l *listener, addr netip.Addr) session {
	return session{
		listenerName:     l.Name,
		securityProtocol: l.SecurityProtocol,
		clientAddr:       addr,
		hostAddress:      authz.HostAddress(addr),
		principal:        authz.Anonymous,
	}
}

// Principal is the principal the request was sent as.
func (r *Request) Principal() authz.Principal { return r.conn.session.principal }

// ClientAddr is the address the request came from.
func (r *Request) ClientAddr() netip.Addr { return r.conn.session.clientAddr }

// HostAddress is ClientAddr as Java's getHostAddress writes it, what ACL
// hosts are compared with.
func (r *Request) HostAddress() string { return r.conn.session.hostAddress }

// TokenAuthenticated reports whether the connection authenticated with a
// delegation token.
func (r *Request) TokenAuthenticated() bool { return r.conn.session.tokenAuthenticated }

// SecurityProtocol is the request's listener's: PLAINTEXT, SSL,
// SASL_PLAINTEXT or SASL_SSL.
func (r *Request) SecurityProtocol() string { return r.conn.session.securityProtocol }

// Listener is the name of the listener the request came in on.
func (r *Request) Listener() string { return r.conn.session.listenerName }

// ControllerListener reports whether the request came in on a controller
// listener (controller.listener.names).
func (r *Request) ControllerListener() bool { return r.conn.listener.Controller }

// APIKeys are the API versions the request's listener advertises
// (ApiVersions' list).
func (r *Request) APIKeys() []kmsg.ApiVersionsResponseApiKey {
	return r.conn.listener.registry.APIKeys()
}

// LocalAddr and RemoteAddr are the connection's ends (nil for a request
// read from no socket, DetachedConn's).
func (r *Request) LocalAddr() net.Addr { return r.conn.localAddr() }

// RemoteAddr: see LocalAddr.
func (r *Request) RemoteAddr() net.Addr { return r.conn.remoteAddr() }

func (c *Conn) localAddr() net.Addr {
	if c.nc == nil {
		return nil
	}
	return c.nc.LocalAddr()
}

func (c *Conn) remoteAddr() net.Addr {
	if c.nc == nil {
		return nil
	}
	return c.nc.RemoteAddr()
}

// Conn is the request's connection (one per connection: a key for what a
// handler keeps per connection).
func (r *Request) Conn() *Conn { return r.conn }
