package network

// SaslHandshake (key 17), versions 0-1, and SaslAuthenticate (key 36),
// versions 0-2, with the authentication state machine of a connection on a
// SASL_PLAINTEXT or SASL_SSL listener, after Kafka's SaslServerAuthenticator
// and the re-authentication of KIP-368.
//
// Before a connection has authenticated, the reader goroutine handles every
// frame here, inline and in order: ApiVersions (once, before the
// handshake), SaslHandshake naming one of the listener's mechanisms, then
// SaslAuthenticate requests (or, after a SaslHandshake v0, bare
// size-prefixed tokens) until the mechanism is done. The session's
// principal becomes User:<authorization id>. Frames are bounded by
// sasl.server.max.receive.size until then. Any other request, or a second
// ApiVersions, ends the connection.
//
// A failed authentication is answered with SASL_AUTHENTICATION_FAILED (or
// UNSUPPORTED_SASL_MECHANISM for the handshake) and Kafka's message, sent
// after connection.failed.authentication.delay.ms, and the connection is
// then closed; the reader reads nothing more meanwhile.
//
// Sessions (KIP-368): when connections.max.reauth.ms (per listener and
// mechanism) is set, or the credential expires (an OAUTHBEARER token), the
// session lasts the shorter of the two and SaslAuthenticate v1+ tells the
// client how long. A SaslHandshake on an authenticated connection whose
// session has a lifetime, at least a second after the last
// re-authentication began, starts a re-authentication with the same
// mechanism; it must end with the same principal. A request arriving after
// the session expired closes the connection, as Kafka does. On an
// authenticated connection that cannot re-authenticate, and on listeners
// without SASL, the two requests reach the ordinary dispatch, whose
// handlers (the broker's saslapis.go) answer ILLEGAL_SASL_STATE as
// KafkaApis does.
//
// Ownership: the session's state is the reader goroutine's alone; the
// principal it sets is read by handlers later (session.go) and is never
// written again (a re-authentication that would change it fails).
//
// A SCRAM exchange with the tokenauth extension authenticates the owner of
// a delegation token (the broker's delegationtokens.go, through
// ServerOptions.DelegationTokens): the session is marked token
// authenticated and ends when the token expires.
//
// Deviations: a request of another API during the SaslAuthenticate
// exchange closes the connection without the error response Kafka sends
// for it first; a re-authentication that switches between a delegation
// token and a password for the same owner fails (Kafka takes it);
// GSSAPI (Kerberos) is not implemented.

import (
	"encoding/binary"
	"regexp"
	"slices"
	"time"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SASLConfig is the authentication set-up of a SASL_PLAINTEXT or SASL_SSL
// listener.
type SASLConfig struct {
	// Mechanisms are sasl.enabled.mechanisms for the listener, as the
	// SaslHandshake response lists them.
	Mechanisms []string
	// PlainUsers are the PLAIN users (user_<name> options of the
	// listener's PlainLoginModule entry).
	PlainUsers sasl.PlainUsers
	// OAuth validates OAUTHBEARER tokens.
	OAuth sasl.TokenValidator
	// MaxReauth is connections.max.reauth.ms by mechanism; zero or
	// absent means sessions do not expire (unless the credential does).
	MaxReauth map[string]time.Duration
}

// DefaultSASLMaxReceiveSize is sasl.server.max.receive.size's default.
const DefaultSASLMaxReceiveSize = 524288

// minReauthInterval: a client may start a re-authentication at most once a
// second (Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS).
const minReauthInterval = time.Second

type authState int8

const (
	// authInitial: ApiVersions or SaslHandshake.
	authInitial authState = iota
	// authHandshake: after ApiVersions, SaslHandshake only.
	authHandshake
	// authExchange: after SaslHandshake, the mechanism's messages.
	authExchange
	// authReauthBadMechanism: a re-authentication asked for another
	// mechanism; its next message fails it.
	authReauthBadMechanism
	authComplete
	authFailed
)

// saslSession is a SASL connection's authentication state.
type saslSession struct {
	cfg   *SASLConfig
	state authState
	// rawTokens: the handshake was v0, so the mechanism's messages come
	// as bare size-prefixed tokens instead of SaslAuthenticate requests.
	rawTokens bool
	mechanism string
	server    sasl.Server
	// reauthenticating is set from a re-authentication's SaslHandshake
	// until it completes.
	reauthenticating bool
	// expiry is when the session ends; zero when it has no lifetime (and
	// so cannot be re-authenticated either).
	expiry time.Time
	// reauthStarted is when the last re-authentication began.
	reauthStarted time.Time
}

func newSASLSession(cfg *SASLConfig) *saslSession {
	return &saslSession{cfg: cfg}
}

// authenticating reports whether the connection's frames go to the
// authentication state machine (the reader's frame limit depends on it).
func (a *saslSession) authenticating() bool { return a.state != authComplete }

// handleAuthFrame gives the state machine the frames it owns. handled is
// false for a request the ordinary dispatch serves; keep is false when the
// connection must close.
func (c *Conn) handleAuthFrame(frame []byte) (handled, keep bool) {
	a := c.auth
	if a.state == authComplete {
		key, _, ok := protocol.PeekAPI(frame)
		if !ok {
			return false, false
		}
		now := time.Now()
		if key == int16(kmsg.SASLHandshake) && a.canReauthenticate(now) {
			a.beginReauthentication(now)
			return true, c.authRequest(frame)
		}
		if !a.expiry.IsZero() && !now.Before(a.expiry) {
			c.logger().Debug("closing connection: its SASL session expired", "api", kmsg.NameForKey(key), "principal", c.session.principal)
			return true, false
		}
		return false, true
	}
	if a.state == authExchange && a.rawTokens {
		return true, c.authRawToken(frame)
	}
	if a.state == authInitial {
		// A client retrying ApiVersions (an unknown version, KIP-511)
		// stays in this state; a valid one moves on to the handshake.
		if key, version, ok := protocol.PeekAPI(frame); ok && key == int16(kmsg.ApiVersions) {
			if c.validApiVersions(frame, version) {
				a.state = authHandshake
			}
			return false, true
		}
	}
	return true, c.authRequest(frame)
}

// validApiVersions reports whether an ApiVersions frame is one the broker
// answers without error: a version it serves and, from v3, a valid client
// software name and version.
func (c *Conn) validApiVersions(frame []byte, version int16) bool {
	if !c.srv.registry.Serves(int16(kmsg.ApiVersions), version) {
		return false
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(version)
	_, body, err := protocol.ParseRequestHeader(frame, req.IsFlexible())
	if err != nil || req.ReadFrom(body) != nil {
		return false
	}
	if version < 3 {
		return true
	}
	if !ValidClientSoftware(req.ClientSoftwareName, req.ClientSoftwareVersion) {
		return false
	}
	c.software.Store(&ClientSoftware{Name: req.ClientSoftwareName, Version: req.ClientSoftwareVersion})
	return true
}

// softwareNameOrVersion is Kafka's rule for ClientSoftwareName and
// ClientSoftwareVersion (KIP-511).
var softwareNameOrVersion = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

// ValidClientSoftware reports whether an ApiVersions v3+ request's client
// software name and version follow Kafka's rule (KIP-511); the request
// is answered INVALID_REQUEST otherwise.
func ValidClientSoftware(name, version string) bool {
	return softwareNameOrVersion.MatchString(name) && softwareNameOrVersion.MatchString(version)
}

// authRequest handles a Kafka request before authentication completes:
// SaslHandshake or SaslAuthenticate.
func (c *Conn) authRequest(frame []byte) bool {
	a := c.auth
	key, version, s := c.slotFor(frame)
	if s == nil {
		return false
	}
	kreq := protocol.NewRequest(key, version)
	var hdr protocol.RequestHeader
	var err error
	if kreq != nil {
		var body []byte
		hdr, body, err = protocol.ParseRequestHeader(frame, kreq.IsFlexible())
		if err == nil {
			err = kreq.ReadFrom(body)
		}
	}
	if kreq == nil || err != nil {
		c.logger().Debug("closing connection: malformed request during SASL authentication", "key", key, "version", version, "err", err)
		return c.closeNow(s)
	}
	r := &Request{conn: c, Header: hdr, Body: kreq, slot: s}
	switch {
	case a.state == authReauthBadMechanism:
		c.logger().Debug("SASL re-authentication failed: mechanism changed", "from", a.mechanism)
		return c.failAuthentication(r, nil)
	case key == int16(kmsg.SASLHandshake) && (a.state == authInitial || a.state == authHandshake):
		return c.saslHandshake(r)
	case key == int16(kmsg.SASLAuthenticate) && a.state == authExchange:
		return c.saslAuthenticate(r)
	case key == int16(kmsg.ApiVersions):
		// A second ApiVersions: Kafka closes at once.
		c.logger().Debug("closing connection: ApiVersions repeated during SASL authentication")
		return c.closeNow(s)
	}
	c.logger().Debug("closing connection: request before SASL authentication", "api", kmsg.NameForKey(key))
	return c.failAuthentication(r, nil)
}

// slotFor reads a request frame's API key and version and queues its
// response slot; a nil slot means the connection must close.
func (c *Conn) slotFor(frame []byte) (key, version int16, s *slot) {
	key, version, ok := protocol.PeekAPI(frame)
	if !ok {
		return 0, 0, nil
	}
	return key, version, c.queueSlot(frame)
}

// queueSlot queues the response slot of a frame, in order with the rest.
func (c *Conn) queueSlot(frame []byte) *slot {
	s := &slot{done: make(chan struct{}), held: int64(cap(frame)), owner: &c.held, start: time.Now()}
	c.held.add(s.held)
	select {
	case c.queue <- s:
		return s
	case <-c.ctx.Done():
		return nil
	}
}

// closeNow closes the connection once the responses before s are sent.
func (c *Conn) closeNow(s *slot) bool {
	s.closeConn = true
	s.finish()
	return false
}

func (c *Conn) saslHandshake(r *Request) bool {
	a := c.auth
	req := r.Body.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = a.cfg.Mechanisms
	if !slices.Contains(a.cfg.Mechanisms, req.Mechanism) {
		c.logger().Debug("SASL mechanism not enabled on the listener", "mechanism", req.Mechanism)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return c.failAuthentication(r, resp)
	}
	a.rawTokens = r.Version() == 0
	if a.reauthenticating && req.Mechanism != a.mechanism {
		// Kafka accepts the handshake and fails the exchange's first
		// message.
		a.state = authReauthBadMechanism
		r.Respond(resp)
		return true
	}
	a.mechanism = req.Mechanism
	a.server = c.srv.newSASLServer(a.cfg, req.Mechanism)
	a.state = authExchange
	r.Respond(resp)
	return true
}

func (c *Conn) saslAuthenticate(r *Request) bool {
	a := c.auth
	req := r.Body.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	reply, lifetime, err := c.authStep(req.SASLAuthBytes)
	if err != nil {
		msg := sasl.ClientMessage(err, a.mechanism, a.reauthenticating)
		c.logger().Debug("SASL authentication failed", "mechanism", a.mechanism, "reauthentication", a.reauthenticating, "err", err)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = &msg
		return c.failAuthentication(r, resp)
	}
	if reply == nil {
		reply = []byte{}
	}
	resp.SASLAuthBytes = reply
	resp.SessionLifetimeMillis = lifetime
	r.Respond(resp)
	return true
}

// authRawToken takes a bare token after a SaslHandshake v0 and answers
// with the mechanism's bare reply. Kafka sends nothing on a failure here:
// the connection closes.
func (c *Conn) authRawToken(frame []byte) bool {
	s := c.queueSlot(frame)
	if s == nil {
		return false
	}
	reply, _, err := c.authStep(frame)
	if err != nil {
		c.logger().Debug("SASL authentication failed", "mechanism", c.auth.mechanism, "err", err)
		return c.failAuthentication(&Request{conn: c, slot: s}, nil)
	}
	if reply == nil {
		s.noResponse = true
		s.finish()
		return true
	}
	s.frame = binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(reply)), uint32(len(reply)))
	s.frame = append(s.frame, reply...)
	s.finish()
	return true
}

// authStep feeds the mechanism one client message; when the exchange
// completes it ends the authentication and returns the session lifetime.
func (c *Conn) authStep(msg []byte) (reply []byte, lifetimeMs int64, err error) {
	a := c.auth
	reply, done, err := a.server.Step(msg)
	if err != nil || !done {
		return reply, 0, err
	}
	p := authz.Principal{Type: authz.UserType, Name: a.server.AuthorizationID()}
	token := a.server.TokenAuthenticated()
	if a.reauthenticating {
		// The session is read by handlers on other goroutines, so it
		// is never written again: a re-authentication that switches
		// between a delegation token and a password fails like a
		// change of principal.
		if old := c.session.principal; old != p || c.session.tokenAuthenticated != token {
			return nil, 0, &sasl.AuthError{Msg: "Cannot change principals during re-authentication from " +
				old.Type + "." + old.Name + ": " + p.Type + "." + p.Name}
		}
	} else {
		c.session.principal = p
		c.session.tokenAuthenticated = token
	}
	if !a.reauthenticating {
		c.listener.stats.authenticated.Add(1)
	}
	lifetimeMs = a.complete(time.Now())
	c.logger().Debug("SASL authentication complete", "principal", p, "mechanism", a.mechanism, "sessionLifetimeMs", lifetimeMs)
	return reply, lifetimeMs, nil
}

// complete ends a successful exchange and fixes the session's expiry: the
// shorter of connections.max.reauth.ms and the credential's remaining
// life (Kafka's calcCompletionTimesAndReturnSessionLifetimeMs).
func (a *saslSession) complete(now time.Time) int64 {
	credential := a.server.CredentialExpiry()
	maxReauth := a.cfg.MaxReauth[a.mechanism]
	a.state = authComplete
	a.reauthenticating = false
	a.server = nil
	if credential.IsZero() && maxReauth <= 0 {
		a.expiry = time.Time{}
		return 0
	}
	var lifetime time.Duration
	switch {
	case credential.IsZero():
		lifetime = maxReauth
	case maxReauth <= 0:
		lifetime = credential.Sub(now)
	default:
		lifetime = min(credential.Sub(now), maxReauth)
	}
	lifetime = max(lifetime, 0).Truncate(time.Millisecond)
	a.expiry = now.Add(lifetime)
	return lifetime.Milliseconds()
}

// canReauthenticate: a session with a lifetime may re-authenticate, at
// most once a second.
func (a *saslSession) canReauthenticate(now time.Time) bool {
	if a.expiry.IsZero() {
		return false
	}
	return a.reauthStarted.IsZero() || now.Sub(a.reauthStarted) >= minReauthInterval
}

func (a *saslSession) beginReauthentication(now time.Time) {
	a.reauthStarted = now
	a.reauthenticating = true
	a.state = authHandshake
}

// failAuthentication answers r with resp (nil: nothing) after
// connection.failed.authentication.delay.ms and then closes the
// connection. The reader stops at once; the connection lingers until the
// writer has sent the answer.
func (c *Conn) failAuthentication(r *Request, resp kmsg.Response) bool {
	if !c.auth.reauthenticating {
		c.listener.stats.authFailed.Add(1)
	}
	c.auth.state = authFailed
	c.lingering = true
	s := r.slot
	finish := func() {
		if resp == nil {
			s.closeConn = true
			s.finish()
			return
		}
		s.closeAfter = true
		r.Respond(resp)
	}
	if d := c.srv.opts.FailedAuthenticationDelay; d > 0 {
		time.AfterFunc(d, finish)
	} else {
		finish()
	}
	return false
}

// newSASLServer starts an exchange of mechanism on a listener.
func (s *Server) newSASLServer(cfg *SASLConfig, mechanism string) sasl.Server {
	switch mechanism {
	case sasl.Plain:
		return sasl.NewPlainServer(cfg.PlainUsers)
	case sasl.ScramSHA256, sasl.ScramSHA512:
		return sasl.NewScramServer(mechanism, s.opts.ScramCredentials, s.opts.DelegationTokens)
	case sasl.OAuthBearer:
		return sasl.NewOAuthBearerServer(cfg.OAuth)
	}
	// Settings refuse other mechanisms; a server that accepts nothing
	// keeps a misconfiguration from authenticating anyone.
	return sasl.NewRefusingServer(mechanism)
}
