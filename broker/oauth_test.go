package broker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

func startOAuthNode(t *testing.T, maxReauth time.Duration) string {
	t.Helper()
	v, err := sasl.NewUnsecuredValidator(&sasl.JAASEntry{LoginModule: sasl.OAuthBearerLoginModule,
		Options: map[string]string{"unsecuredValidatorRequiredScope": "kafka"}})
	if err != nil {
		t.Fatal(err)
	}
	n := startTestNodeWithServer(t, nil, 1, func(o *network.ServerOptions) {
		o.Listeners = append(o.Listeners, network.ListenerSpec{Name: "OAUTH", Host: "127.0.0.1", SecurityProtocol: "SASL_PLAINTEXT",
			SASL: &network.SASLConfig{Mechanisms: []string{sasl.OAuthBearer}, OAuth: v, MaxReauth: map[string]time.Duration{sasl.OAuthBearer: maxReauth}}})
	})
	return n.b.Addrs()["OAUTH"]
}

func testUnsecuredToken(sub string, lifetime time.Duration, scope ...string) string {
	enc := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
	now := float64(time.Now().UnixMilli()) / 1000
	return enc(map[string]string{"alg": "none"}) + "." + enc(map[string]any{"sub": sub, "iat": now, "exp": now + lifetime.Seconds(), "scope": scope}) + "."
}

func TestOAuthBearerOverTheWire(t *testing.T) {
	addr := startOAuthNode(t, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(oauth.Auth{Token: testUnsecuredToken("alice", time.Hour, "kafka")}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("a valid token: %v", err)
	}

	// The session lasts until the token expires when that comes before
	// connections.max.reauth.ms.
	c := dialRaw(t, addr)
	c.handshake(1, sasl.OAuthBearer)
	r := c.authenticate(1, string(sasl.OAuthInitialResponse(testUnsecuredToken("alice", 90*time.Second, "kafka"))))
	if r.ErrorCode != 0 || r.SessionLifetimeMillis <= 85_000 || r.SessionLifetimeMillis > 90_000 {
		t.Fatalf("session lifetime %d ms for a 90 s token under a one-hour maximum (%+v)", r.SessionLifetimeMillis, r)
	}

	// Refused tokens: the error JSON as a challenge, then the failure.
	for _, tc := range []struct{ token, json string }{
		{testUnsecuredToken("alice", -time.Minute, "kafka"), `{"status":"invalid_token"}`},
		{testUnsecuredToken("alice", time.Hour), `{"status":"insufficient_scope", "scope":"[kafka]"}`},
		{"not-a-jwt", `{"status":"invalid_token"}`},
	} {
		c := dialRaw(t, addr)
		c.handshake(1, sasl.OAuthBearer)
		r := c.authenticate(2, string(sasl.OAuthInitialResponse(tc.token)))
		if r.ErrorCode != 0 || string(r.SASLAuthBytes) != tc.json {
			t.Fatalf("challenge %q (error %d), want %s", r.SASLAuthBytes, r.ErrorCode, tc.json)
		}
		r = c.authenticate(2, "\x01")
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || *r.ErrorMessage != tc.json {
			t.Fatalf("after ^A: %+v", r)
		}
		c.expectClosed()
	}
	// Garbage in SaslAuthenticate: Kafka's generic message.
	c = dialRaw(t, addr)
	c.handshake(1, sasl.OAuthBearer)
	r = c.authenticate(2, "\x00\xff garbage")
	if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil ||
		*r.ErrorMessage != "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER" {
		t.Fatalf("garbage: %+v", r)
	}
	c.expectClosed()

	// franz-go reports the refusal with Kafka's JSON.
	bad, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(oauth.Auth{Token: testUnsecuredToken("alice", -time.Minute, "kafka")}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.Ping(ctx); err == nil || !strings.Contains(err.Error(), "invalid_token") {
		t.Fatalf("expired token with franz-go: %v", err)
	}
}

func TestOAuthSessionEndsWithTheToken(t *testing.T) {
	addr := startOAuthNode(t, 0)
	c := dialRaw(t, addr)
	c.handshake(1, sasl.OAuthBearer)
	r := c.authenticate(1, string(sasl.OAuthInitialResponse(testUnsecuredToken("alice", 1500*time.Millisecond, "kafka"))))
	if r.ErrorCode != 0 || r.SessionLifetimeMillis <= 0 || r.SessionLifetimeMillis > 1500 {
		t.Fatalf("lifetime %d", r.SessionLifetimeMillis)
	}
	if err := c.metadataRoundTrip(); err != nil {
		t.Fatal(err)
	}
	// Re-authenticating with a fresh token extends the session.
	r = c.oauthReauth(testUnsecuredToken("alice", time.Hour, "kafka"))
	if r.ErrorCode != 0 || r.SessionLifetimeMillis < 3_500_000 {
		t.Fatalf("re-authentication: %+v", r)
	}
	// Let the first token's lifetime pass (the broker's wall clock; no
	// clock to inject): that the session outlives it is the subject.
	time.Sleep(1600 * time.Millisecond)
	if err := c.metadataRoundTrip(); err != nil {
		t.Fatalf("after the first token expired, re-authenticated: %v", err)
	}
	// A token for another principal may not re-authenticate the session.
	c2 := dialRaw(t, addr)
	c2.handshake(1, sasl.OAuthBearer)
	c2.authenticate(1, string(sasl.OAuthInitialResponse(testUnsecuredToken("alice", time.Hour, "kafka"))))
	r = c2.oauthReauth(testUnsecuredToken("mallory", time.Hour, "kafka"))
	if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "Cannot change principals") {
		t.Fatalf("re-authentication as mallory: %+v", r)
	}
}

// oauthReauth re-authenticates c with an OAUTHBEARER token.
func (c *rawConn) oauthReauth(token string) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	if hs := c.handshake(1, sasl.OAuthBearer); hs.ErrorCode != 0 {
		c.t.Fatalf("re-authentication handshake: error %d", hs.ErrorCode)
	}
	return c.authenticate(1, string(sasl.OAuthInitialResponse(token)))
}
