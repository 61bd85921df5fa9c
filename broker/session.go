package broker

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
	"net/netip"

	"github.com/gregorbroker/gregor/broker/authz"
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

func newSession(l *listener, addr netip.Addr) session {
	return session{
		listenerName:     l.Name,
		securityProtocol: l.SecurityProtocol,
		clientAddr:       addr,
		hostAddress:      authz.HostAddress(addr),
		principal:        authz.Anonymous,
	}
}

// principal is the principal the request was sent as.
func (r *request) principal() authz.Principal { return r.conn.session.principal }

// clientAddr is the address the request came from.
func (r *request) clientAddr() netip.Addr { return r.conn.session.clientAddr }
