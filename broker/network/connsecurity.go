package network

// How a connection is secured before its first request is read, by its
// listener's security protocol:
//
//   - PLAINTEXT: nothing; the principal is User:ANONYMOUS.
//   - SSL: the TLS handshake (broker/ssl's Server for the listener: its
//     keystore, ssl.client.auth, protocols and suites); the client
//     certificate's subject, through ssl.principal.mapping.rules, is the
//     principal (User:ANONYMOUS without one). A handshake that fails, is
//     not finished within tlsHandshakeTimeout, or is garbage closes this
//     connection only; Kafka's log line for it is kept ("Failed
//     authentication with <address> (SSL handshake failed)").
//   - SASL_SSL: the same handshake, then SASL authentication, which Kafka
//     runs as the connection's first requests (ApiVersions, SaslHandshake,
//     SaslAuthenticate): the reader handles them inline and sets the
//     principal from the SASL identity (session.go), so nothing more
//     happens here; see the end of secure.
//   - SASL_PLAINTEXT: SASL authentication as on SASL_SSL, without TLS.
//
// Over TLS a fetch's file ranges cannot go by sendfile: the writer copies
// them through its buffer (conn.writeFileRange).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/broker/authz"
)

// tlsHandshakeTimeout bounds a TLS handshake (and so how long a client
// that connects and sends nothing, or dribbles, holds a connection slot);
// connections.max.idle.ms bounds it further when it is shorter. Kafka
// bounds it by the idle time alone.
const tlsHandshakeTimeout = 10 * time.Second

// secure runs the listener's transport handshake on a new connection;
// false means the connection must be closed.
func (c *Conn) secure() bool {
	srv := c.listener.TLS
	if srv == nil {
		return true
	}
	timeout := tlsHandshakeTimeout
	if idle := c.srv.opts.MaxIdle; idle > 0 && idle < timeout {
		timeout = idle
	}
	tc := tls.Server(c.nc, srv.Config())
	_ = c.nc.SetDeadline(time.Now().Add(timeout))
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		if peerLeft(err) {
			c.logger().Debug("connection closed during the TLS handshake", "err", err)
		} else {
			c.logger().Info(fmt.Sprintf("Failed authentication with %s (SSL handshake failed)", c.nc.RemoteAddr()), "err", err)
		}
		return false
	}
	_ = c.nc.SetDeadline(time.Time{})
	// Shutdown sets a read deadline to wake readers after it marks the
	// server draining: one set during the handshake was just cleared.
	if c.srv.draining.Load() {
		return false
	}
	c.in, c.out = tc, tc
	if c.listener.SecurityProtocol == "SSL" {
		name, err := srv.Principal(tc.ConnectionState())
		if err != nil {
			// Kafka fails the connection when its principal cannot be
			// built (no mapping rule applies).
			c.logger().Info(fmt.Sprintf("Failed authentication with %s (%v)", c.nc.RemoteAddr(), err))
			return false
		}
		c.session.principal = authz.Principal{Type: authz.UserType, Name: name}
	}
	// On SASL_SSL the principal comes from SASL authentication, the
	// connection's first requests (see the header).
	return true
}

// peerLeft reports whether a handshake failed because the peer went away
// (it connected and closed, as liveness probes do) rather than because
// of what it sent.
func peerLeft(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
