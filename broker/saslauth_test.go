package broker

import (
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/broker/controllerclient"
	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// startSASLNode starts a node with a SASL_PLAINTEXT listener beside the
// PLAINTEXT one, PLAIN users alice and bob, and the given failed
// authentication delay and connections.max.reauth.ms for PLAIN.
func startSASLNode(t *testing.T, delay, maxReauth time.Duration, adjust func(*network.ServerOptions)) (*testNode, string) {
	t.Helper()
	n := startTestNodeWithServer(t, nil, 1, func(o *network.ServerOptions) {
		o.Listeners = append(o.Listeners, network.ListenerSpec{
			Name: "SASL_PLAINTEXT", Host: "127.0.0.1", SecurityProtocol: "SASL_PLAINTEXT",
			SASL: &network.SASLConfig{
				Mechanisms: []string{sasl.Plain, sasl.ScramSHA256},
				PlainUsers: sasl.PlainUsers{"alice": "alice-secret", "bob": "bob-secret"},
				MaxReauth:  map[string]time.Duration{sasl.Plain: maxReauth},
			},
		})
		o.FailedAuthenticationDelay = delay
		if adjust != nil {
			adjust(o)
		}
	})
	return n, n.b.Addrs()["SASL_PLAINTEXT"]
}

func saslHandshake(version int16, mechanism string) *kmsg.SASLHandshakeRequest {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(version)
	req.Mechanism = mechanism
	return req
}

func saslAuthenticate(version int16, msg string) *kmsg.SASLAuthenticateRequest {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SetVersion(version)
	req.SASLAuthBytes = []byte(msg)
	return req
}

// roundTrip sends req and reads its answer into resp.
func (c *rawConn) roundTrip(req kmsg.Request, resp kmsg.Response, corr int32) {
	c.t.Helper()
	c.send(req, corr)
	resp.SetVersion(req.GetVersion())
	if got := c.recv(resp); got != corr {
		c.t.Fatalf("%T answered with correlation id %d, sent %d", req, got, corr)
	}
}

func (c *rawConn) handshake(version int16, mechanism string) *kmsg.SASLHandshakeResponse {
	c.t.Helper()
	resp := kmsg.NewPtrSASLHandshakeResponse()
	c.roundTrip(saslHandshake(version, mechanism), resp, 10)
	return resp
}

func (c *rawConn) authenticate(version int16, msg string) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	c.roundTrip(saslAuthenticate(version, msg), resp, 11)
	return resp
}

// plainLogin authenticates c as user with PLAIN over SaslAuthenticate v2.
func (c *rawConn) plainLogin(user, password string) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	if resp := c.handshake(1, sasl.Plain); resp.ErrorCode != 0 {
		c.t.Fatalf("handshake: error %d", resp.ErrorCode)
	}
	return c.authenticate(2, "\x00"+user+"\x00"+password)
}

func (c *rawConn) metadataRoundTrip() error {
	c.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	c.send(req, 20)
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	frame, err := protocol.ReadFrame(c.br, 1<<20, nil)
	if err != nil {
		return err
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(12)
	return resp.ReadFrom(frame[5:])
}

func TestSASLPlainAuthenticates(t *testing.T) {
	n, addr := startSASLNode(t, 0, 0, nil)
	c := dialRaw(t, addr)
	apiVersionsRoundTrip(t, c)
	hs := c.handshake(1, sasl.Plain)
	if hs.ErrorCode != 0 || len(hs.SupportedMechanisms) != 2 || hs.SupportedMechanisms[0] != sasl.Plain {
		t.Fatalf("handshake: %+v", hs)
	}
	resp := c.authenticate(2, "\x00alice\x00alice-secret")
	if resp.ErrorCode != 0 || resp.ErrorMessage != nil || len(resp.SASLAuthBytes) != 0 || resp.SessionLifetimeMillis != 0 {
		t.Fatalf("authenticate: %+v", resp)
	}
	if err := c.metadataRoundTrip(); err != nil {
		t.Fatal(err)
	}
	if p := serverConnFor(t, n, c.nc).Principal(); p != (authz.Principal{Type: "User", Name: "alice"}) {
		t.Fatalf("principal %v", p)
	}
	// Authenticated: the APIs answer ILLEGAL_SASL_STATE, as KafkaApis does.
	if hs := c.handshake(1, sasl.Plain); hs.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake after authentication: error %d", hs.ErrorCode)
	}
	if resp := c.authenticate(2, "x"); resp.ErrorCode != kerr.IllegalSaslState.Code || resp.ErrorMessage == nil ||
		*resp.ErrorMessage != "SaslAuthenticate request received after successful authentication" {
		t.Fatalf("authenticate after authentication: %+v", resp)
	}
	if err := c.metadataRoundTrip(); err != nil {
		t.Fatal(err)
	}
}

func TestSASLHandshakeV0RawTokens(t *testing.T) {
	n, addr := startSASLNode(t, 0, 0, nil)
	c := dialRaw(t, addr)
	if hs := c.handshake(0, sasl.Plain); hs.ErrorCode != 0 {
		t.Fatalf("handshake v0: error %d", hs.ErrorCode)
	}
	c.writeFrame([]byte("\x00bob\x00bob-secret"))
	frame, err := protocol.ReadFrame(c.br, 1<<20, nil)
	if err != nil || len(frame) != 0 {
		t.Fatalf("raw PLAIN reply %q, %v", frame, err)
	}
	if err := c.metadataRoundTrip(); err != nil {
		t.Fatal(err)
	}
	if p := serverConnFor(t, n, c.nc).Principal(); p.Name != "bob" {
		t.Fatalf("principal %v", p)
	}
	// A wrong raw token closes the connection without an answer.
	c2 := dialRaw(t, addr)
	c2.handshake(0, sasl.Plain)
	c2.writeFrame([]byte("\x00bob\x00wrong"))
	c2.expectClosed()
}

func TestSASLOnlyAuthenticationBeforeLogin(t *testing.T) {
	_, addr := startSASLNode(t, 0, 0, nil)
	// Anything but ApiVersions and SASL closes the connection unanswered.
	c := dialRaw(t, addr)
	apiVersionsRoundTrip(t, c)
	if err := c.metadataRoundTrip(); err == nil {
		t.Fatal("Metadata answered before authentication")
	}
	// So does it after the handshake, instead of SaslAuthenticate.
	c = dialRaw(t, addr)
	c.handshake(1, sasl.Plain)
	if err := c.metadataRoundTrip(); err == nil {
		t.Fatal("Metadata answered during the SASL exchange")
	}
	// ApiVersions only once, before the handshake.
	c = dialRaw(t, addr)
	apiVersionsRoundTrip(t, c)
	if err := apiVersionsTry(c); err == nil {
		t.Fatal("a second ApiVersions was answered before authentication")
	}
	// An ApiVersions version the broker does not know gets the v0
	// answer and may be retried (KIP-511).
	c = dialRaw(t, addr)
	v9 := kmsg.NewPtrApiVersionsRequest()
	v9.SetVersion(9)
	c.send(v9, 1)
	resp := kmsg.NewPtrApiVersionsResponse()
	if c.recv(resp); resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("ApiVersions v9: error %d", resp.ErrorCode)
	}
	apiVersionsRoundTrip(t, c)
	if r := c.plainLogin("alice", "alice-secret"); r.ErrorCode != 0 {
		t.Fatalf("login after the ApiVersions retry: %+v", r)
	}
	// A frame over sasl.server.max.receive.size closes the connection.
	c = dialRaw(t, addr)
	c.handshake(1, sasl.Plain)
	// The broker closes the connection once it has read the size prefix,
	// so the rest of the frame may fail to write (a broken pipe or a
	// reset): that is the expected end, not a failure.
	body := requestBody(saslAuthenticate(2, string(make([]byte, network.DefaultSASLMaxReceiveSize))), 11)
	_, _ = c.nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
	c.expectClosed()
}

func TestSASLFailuresAnswerThenClose(t *testing.T) {
	const delay = 150 * time.Millisecond
	_, addr := startSASLNode(t, delay, 0, nil)
	for _, tc := range []struct{ msg, want string }{
		{"\x00alice\x00wrong", "Authentication failed: Invalid username or password"},
		{"\x00nobody\x00x", "Authentication failed: Invalid username or password"},
		{"garbage", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"},
		{"bob\x00alice\x00alice-secret", "Authentication failed: Client requested an authorization id that is different from username"},
	} {
		c := dialRaw(t, addr)
		c.handshake(1, sasl.Plain)
		start := time.Now()
		resp := c.authenticate(1, tc.msg)
		if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != tc.want {
			t.Fatalf("%q: %+v", tc.msg, resp)
		}
		if waited := time.Since(start); waited < delay {
			t.Fatalf("%q: failure answered after %v, before connection.failed.authentication.delay.ms", tc.msg, waited)
		}
		c.expectClosed()
	}
	c := dialRaw(t, addr)
	hs := c.handshake(1, "GSSAPI")
	if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(hs.SupportedMechanisms) != 2 {
		t.Fatalf("GSSAPI handshake: %+v", hs)
	}
	c.expectClosed()
}

func TestSASLFailuresHarmNoOtherConnection(t *testing.T) {
	_, addr := startSASLNode(t, 20*time.Millisecond, 0, nil)
	good := dialRaw(t, addr)
	if r := good.plainLogin("alice", "alice-secret"); r.ErrorCode != 0 {
		t.Fatalf("login: %+v", r)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialRaw(t, addr)
			c.send(saslHandshake(1, sasl.Plain), 1)
			c.send(saslAuthenticate(2, "\x00alice\x00nope"), 2)
			// Pipelined junk after the failure is never read.
			c.writeFrame([]byte{0, 3, 0, 12, 0, 0, 0, 3})
			c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				if _, err := c.br.ReadByte(); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := good.metadataRoundTrip(); err != nil {
		t.Fatalf("the authenticated connection after others failed: %v", err)
	}
}

// The sleeps here let a session's lifetime pass on the broker's wall clock
// (it has none to inject): what happens at and past expiry is the subject.
func TestSASLReauthentication(t *testing.T) {
	const lifetime = 1500 * time.Millisecond
	n, addr := startSASLNode(t, 0, lifetime, nil)
	c := dialRaw(t, addr)
	first := c.plainLogin("alice", "alice-secret")
	if first.ErrorCode != 0 || first.SessionLifetimeMillis != lifetime.Milliseconds() {
		t.Fatalf("login: %+v", first)
	}
	if err := c.metadataRoundTrip(); err != nil {
		t.Fatal(err)
	}
	// The first re-authentication may start at any time; the next only
	// a second after it began (before that a handshake is an ordinary
	// request: ILLEGAL_SASL_STATE).
	time.Sleep(lifetime / 2)
	if r := c.plainLogin("alice", "alice-secret"); r.ErrorCode != 0 || r.SessionLifetimeMillis != lifetime.Milliseconds() {
		t.Fatalf("re-authentication: %+v", r)
	}
	if hs := c.handshake(1, sasl.Plain); hs.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("a re-authentication within a second of the last: error %d", hs.ErrorCode)
	}
	// Each re-authentication extends the session: past the first
	// expiry, the connection still serves.
	time.Sleep(lifetime/2 + 200*time.Millisecond)
	if err := c.metadataRoundTrip(); err != nil {
		t.Fatalf("after the first session's end, re-authenticated: %v", err)
	}
	if p := serverConnFor(t, n, c.nc).Principal(); p.Name != "alice" {
		t.Fatalf("principal %v", p)
	}

	// The principal may not change.
	c2 := dialRaw(t, addr)
	c2.plainLogin("alice", "alice-secret")
	r := c2.plainLogin("bob", "bob-secret")
	if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil ||
		*r.ErrorMessage != "Cannot change principals during re-authentication from User.alice: User.bob" {
		t.Fatalf("re-authentication as another user: %+v", r)
	}
	c2.expectClosed()

	// Nor the mechanism: the handshake is accepted, the exchange fails
	// and the connection closes unanswered.
	c3 := dialRaw(t, addr)
	c3.plainLogin("alice", "alice-secret")
	if hs := c3.handshake(1, sasl.ScramSHA256); hs.ErrorCode != 0 {
		t.Fatalf("re-authentication handshake with another mechanism: error %d", hs.ErrorCode)
	}
	c3.send(saslAuthenticate(2, "n,,n=alice,r=abc"), 11)
	c3.expectClosed()

	// A session that expires without re-authentication closes on its
	// next request.
	c4 := dialRaw(t, addr)
	c4.plainLogin("alice", "alice-secret")
	time.Sleep(lifetime + 100*time.Millisecond)
	if err := c4.metadataRoundTrip(); err == nil {
		t.Fatal("a request after the session expired was answered")
	}
}

func TestSASLWithoutLifetimeCannotReauthenticate(t *testing.T) {
	_, addr := startSASLNode(t, 0, 0, nil)
	c := dialRaw(t, addr)
	c.plainLogin("alice", "alice-secret")
	if hs := c.handshake(1, sasl.Plain); hs.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake on a session without lifetime: error %d", hs.ErrorCode)
	}
}

func TestSASLOnPlaintextListenerIsIllegalState(t *testing.T) {
	n := startTestNode(t, nil)
	c := dialRaw(t, n.addr)
	if hs := c.handshake(1, sasl.Plain); hs.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake on PLAINTEXT: error %d", hs.ErrorCode)
	}
	if r := c.authenticate(0, "x"); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("authenticate on PLAINTEXT: %+v", r)
	}
}

// TestSASLPlainWithFranzGo: an independent client implementation
// authenticates and produces and consumes over the SASL listener.
func TestSASLPlainWithFranzGo(t *testing.T) {
	_, addr := startSASLNode(t, 0, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		kgo.DefaultProduceTopic("sasl-plain"), kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("sasl-plain"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The advertised endpoint is the PLAINTEXT one; franz-go connects to
	// the seed for the requests here.
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	bad, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: "alice", Pass: "nope"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	err = bad.Ping(ctx)
	if err == nil {
		t.Fatal("a wrong password authenticated")
	}
	t.Logf("wrong password: %v", err)
}

// TestPeerConnectionsAuthenticateAndRenew: the connections a node opens to
// others authenticate through the pool's dialer, and a connection whose
// session nears its end is replaced, the old one closing once its
// requests are answered, so that no request reaches the server after the
// session expired.
func TestPeerConnectionsAuthenticateAndRenew(t *testing.T) {
	const lifetime = 1500 * time.Millisecond
	_, addr := startSASLNode(t, 0, lifetime, nil)
	dial := sasl.AuthenticatingDialer(nil, sasl.PlainClient{User: "alice", Password: "alice-secret"}, "test")
	pool := controllerclient.NewPool[int](7, controllerclient.DialFunc(dial))
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	meta := func(pc *controllerclient.Conn) error {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		_, _, err := pc.RoundTrip(ctx, req)
		return err
	}
	first, err := pool.Get(ctx, 1, addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := meta(first); err != nil {
		t.Fatal(err)
	}
	if again, _ := pool.Get(ctx, 1, addr); again != first {
		t.Fatal("a fresh session was replaced")
	}
	// Past 85% of the lifetime the pool hands out a new connection and
	// retires the old one. The pool renews by the wall clock, so the test
	// lets that much of the lifetime pass: a sleep, not a wait.
	time.Sleep(lifetime*85/100 + 50*time.Millisecond)
	second, err := pool.Get(ctx, 1, addr)
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatal("the connection was not renewed")
	}
	waitUntil(t, 5*time.Second, "the retired connection to close", first.Closed)
	for i := 0; i < 3; i++ {
		if err := meta(second); err != nil {
			t.Fatalf("on the renewed connection: %v", err)
		}
	}
	// A wrong password fails the dial.
	bad := controllerclient.NewPool[int](7, controllerclient.DialFunc(sasl.AuthenticatingDialer(nil, sasl.PlainClient{User: "alice", Password: "x"}, "test")))
	defer bad.Close()
	if _, err := bad.Get(ctx, 1, addr); err == nil || !strings.Contains(err.Error(), "Invalid username or password") {
		t.Fatalf("dial with a wrong password: %v", err)
	}
}
