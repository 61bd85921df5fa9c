package sasl

// The client side: the mechanisms a broker uses on its own connections to
// other brokers and to controllers (sasl.mechanism.inter.broker.protocol,
// sasl.mechanism.controller.protocol), with the credentials of the
// listener's JAAS entry, and the Kafka exchange that carries them
// (SaslHandshake v1, then SaslAuthenticate v1 until done).

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/internal/peerdial"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client is the client side of one mechanism: Start begins an exchange.
type Client interface {
	Mechanism() string
	Start() (ClientExchange, error)
}

// ClientExchange is one exchange from the client's side: the first message
// is Step(nil); each later one answers the server's challenge. done means
// the client expects no further challenge.
type ClientExchange interface {
	Step(challenge []byte) (msg []byte, done bool, err error)
}

// PlainClient authenticates with PLAIN.
type PlainClient struct {
	User, Password string
}

func (c PlainClient) Mechanism() string { return Plain }

func (c PlainClient) Start() (ClientExchange, error) { return &plainExchange{c: c}, nil }

type plainExchange struct {
	c    PlainClient
	sent bool
}

func (e *plainExchange) Step(challenge []byte) ([]byte, bool, error) {
	if e.sent {
		return nil, false, errors.New("PLAIN: unexpected challenge after the response")
	}
	e.sent = true
	return []byte("\x00" + e.c.User + "\x00" + e.c.Password), true, nil
}

// ScramClient authenticates with a SCRAM mechanism.
type ScramClient struct {
	Name           string // SCRAM-SHA-256 or SCRAM-SHA-512
	User, Password string
	// TokenAuth logs in with a delegation token: User is the token id,
	// Password the base64 of its HMAC, and the client-first message
	// carries the extension tokenauth=true.
	TokenAuth bool
	// nonce makes the client nonce (tests fix it).
	nonce func() string
}

func (c ScramClient) Mechanism() string { return c.Name }

func (c ScramClient) Start() (ClientExchange, error) {
	m, ok := ScramByName(c.Name)
	if !ok {
		return nil, fmt.Errorf("unknown SCRAM mechanism %s", c.Name)
	}
	nonce := c.nonce
	if nonce == nil {
		nonce = randomNonce
	}
	return &scramExchange{c: c, m: m, clientNonce: nonce()}, nil
}

type scramExchange struct {
	c           ScramClient
	m           ScramMechanism
	clientNonce string
	step        int
	bare        string
	serverKey   []byte
	authMessage string
}

func (e *scramExchange) Step(challenge []byte) ([]byte, bool, error) {
	e.step++
	switch e.step {
	case 1:
		e.bare = "n=" + scramSaslName(e.c.User) + ",r=" + e.clientNonce
		if e.c.TokenAuth {
			e.bare += ",tokenauth=true"
		}
		return []byte("n,," + e.bare), false, nil
	case 2:
		sm := serverFirstRE.FindStringSubmatch(string(challenge))
		if sm == nil {
			return nil, false, fmt.Errorf("Invalid SCRAM server first message format: %s", challenge)
		}
		nonce, salt64, iterText := sm[1], sm[2], sm[3]
		iterations, err := strconv.Atoi(iterText)
		if err != nil || iterations <= 0 {
			return nil, false, fmt.Errorf("Invalid SCRAM server first message format: invalid iterations %s", iterText)
		}
		if iterations > int(e.m.MaxIterations) {
			// Kafka's client takes any count; a server that asks for
			// more than Kafka ever stores would have the broker
			// spin on PBKDF2.
			return nil, false, fmt.Errorf("Requested iterations %d is more than the maximum %d for %s", iterations, e.m.MaxIterations, e.m.Name)
		}
		if int32(iterations) < e.m.MinIterations {
			return nil, false, fmt.Errorf("Requested iterations %d is less than the minimum %d for %s", iterations, e.m.MinIterations, e.m.Name)
		}
		if !strings.HasPrefix(nonce, e.clientNonce) || len(nonce) == len(e.clientNonce) {
			return nil, false, errors.New("Invalid server nonce: does not start with client nonce")
		}
		salt, err := base64.StdEncoding.DecodeString(salt64)
		if err != nil {
			return nil, false, fmt.Errorf("Invalid SCRAM server first message format: salt: %w", err)
		}
		salted := e.m.SaltedPassword(e.c.Password, salt, iterations)
		withoutProof := "c=biws,r=" + nonce
		e.authMessage = e.bare + "," + string(challenge) + "," + withoutProof
		clientKey := e.m.hmac(salted, "Client Key")
		signature := e.m.hmac(e.m.hash(clientKey), e.authMessage)
		proof := make([]byte, len(clientKey))
		subtle.XORBytes(proof, clientKey, signature)
		e.serverKey = e.m.hmac(salted, "Server Key")
		return []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)), false, nil
	case 3:
		sm := serverFinalRE.FindStringSubmatch(string(challenge))
		if sm == nil {
			return nil, false, fmt.Errorf("Invalid SCRAM server final message format: %s", challenge)
		}
		if sm[1] != "" {
			return nil, false, fmt.Errorf("Sasl authentication using %s failed with error: %s", e.m.Name, sm[1])
		}
		got, err := base64.StdEncoding.DecodeString(sm[2])
		if err != nil || !hmac.Equal(got, e.m.hmac(e.serverKey, e.authMessage)) {
			return nil, false, errors.New("Invalid server signature in server final message")
		}
		return nil, true, nil
	}
	return nil, false, errors.New("SCRAM: unexpected challenge after the exchange completed")
}

// ClientFromJAAS is the client of mechanism with the credentials of a
// listener's JAAS entry: username and password for PLAIN and SCRAM, the
// unsecuredLogin* options for OAUTHBEARER (Kafka's default login callback
// handler, OAuthBearerUnsecuredLoginCallbackHandler, makes a fresh token
// for each connection).
func ClientFromJAAS(mechanism string, e *JAASEntry) (Client, error) {
	switch mechanism {
	case Plain, ScramSHA256, ScramSHA512:
		user, okU := e.Option("username")
		pass, okP := e.Option("password")
		if !okU || !okP {
			return nil, fmt.Errorf("the %s JAAS entry has no username and password for the broker's own connections", mechanism)
		}
		if mechanism == Plain {
			return PlainClient{User: user, Password: pass}, nil
		}
		token, _ := e.Option("tokenauth")
		return ScramClient{Name: mechanism, User: user, Password: pass, TokenAuth: strings.EqualFold(token, "true")}, nil
	case OAuthBearer:
		c := UnsecuredTokenClient{Options: e.Options}
		if _, err := c.Token(); err != nil {
			return nil, fmt.Errorf("the OAUTHBEARER JAAS entry's unsecured login options: %w", err)
		}
		return c, nil
	}
	return nil, fmt.Errorf("SASL mechanism %s has no client in Gregor", mechanism)
}

// Authenticate runs mechanism's exchange over a fresh connection to a
// Kafka listener: SaslHandshake v1, then SaslAuthenticate v1 until done.
// It returns the session lifetime the server gave (0: none).
func Authenticate(ctx context.Context, nc net.Conn, c Client, clientID string) (time.Duration, error) {
	if deadline, ok := ctx.Deadline(); ok {
		nc.SetDeadline(deadline)
		defer nc.SetDeadline(time.Time{})
	}
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	br := bufio.NewReader(nc)
	var corr int32
	roundTrip := func(req kmsg.Request, resp kmsg.Response) error {
		corr++
		if _, err := nc.Write(formatter.AppendRequest(nil, req, corr)); err != nil {
			return err
		}
		frame, err := protocol.ReadFrame(br, 1<<20, nil)
		if err != nil {
			return err
		}
		resp.SetVersion(req.GetVersion())
		got, err := protocol.ParseResponse(frame, resp)
		if err == nil && got != corr {
			err = fmt.Errorf("response with correlation id %d to request %d", got, corr)
		}
		return err
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = c.Mechanism()
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := roundTrip(hs, hsResp); err != nil {
		return 0, fmt.Errorf("SASL handshake: %w", err)
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return 0, fmt.Errorf("SASL handshake for %s (the server enables %v): %w", c.Mechanism(), hsResp.SupportedMechanisms, err)
	}
	ex, err := c.Start()
	if err != nil {
		return 0, err
	}
	msg, done, err := ex.Step(nil)
	for {
		if err != nil {
			return 0, fmt.Errorf("SASL %s: %w", c.Mechanism(), err)
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(1)
		req.SASLAuthBytes = msg
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := roundTrip(req, resp); err != nil {
			return 0, fmt.Errorf("SASL %s: %w", c.Mechanism(), err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			detail := ""
			if resp.ErrorMessage != nil {
				detail = ": " + *resp.ErrorMessage
			}
			return 0, fmt.Errorf("SASL %s: %w%s", c.Mechanism(), err, detail)
		}
		lifetime := time.Duration(resp.SessionLifetimeMillis) * time.Millisecond
		if done {
			return lifetime, nil
		}
		msg, done, err = ex.Step(resp.SASLAuthBytes)
		if err == nil && done && msg == nil {
			// The server's last message checked out; nothing
			// more to send.
			return lifetime, nil
		}
	}
}

// SessionConn is a connection that authenticated with SASL. When the
// server gave the session a lifetime (KIP-368), the client must stop
// sending on it before the lifetime ends: the server closes a connection
// that sends a request after its session expired. Kafka's clients
// re-authenticate on the connection at 85 to 95% of the lifetime; Gregor's
// own connections are replaced by fresh ones instead, from 85% on, and
// drain the requests already sent.
type SessionConn struct {
	net.Conn
	// renewAt is when to stop sending; zero for a session without
	// lifetime.
	renewAt time.Time
}

// renewFraction is the part of a session's lifetime after which a
// connection is replaced.
const renewFraction = 0.85

// NewSessionConn wraps nc, authenticated at start with a session of the
// given lifetime (0: none).
func NewSessionConn(nc net.Conn, start time.Time, lifetime time.Duration) *SessionConn {
	c := &SessionConn{Conn: nc}
	if lifetime > 0 {
		c.renewAt = start.Add(time.Duration(float64(lifetime) * renewFraction))
	}
	return c
}

// SessionExpiring reports whether the connection must no longer carry new
// requests.
func (c *SessionConn) SessionExpiring() bool {
	return !c.renewAt.IsZero() && !time.Now().Before(c.renewAt)
}

// DialFunc opens a connection to a node's listener.
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

// AuthenticatingDialer dials with base (plain TCP when nil) and
// authenticates every new connection with client.
func AuthenticatingDialer(base DialFunc, client Client, clientID string) DialFunc {
	if base == nil {
		base = peerdial.Dial
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		nc, err := base(ctx, addr)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		lifetime, err := Authenticate(ctx, nc, client, clientID)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("authenticating to %s: %w", addr, err)
		}
		return NewSessionConn(nc, start, lifetime), nil
	}
}

// ExpiringConn is a connection that may stop accepting new requests
// (SessionConn).
type ExpiringConn interface {
	SessionExpiring() bool
}

// Expiring reports whether nc is a SASL connection whose session is to
// be renewed.
func Expiring(nc net.Conn) bool {
	e, ok := nc.(ExpiringConn)
	return ok && e.SessionExpiring()
}
