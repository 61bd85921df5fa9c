package broker

// Hostile clients over the wire: each is refused (Kafka's error, then the
// connection closed) and harms no other connection.

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// scramUser gives a user a SCRAM credential through the controller.
func scramUser(t *testing.T, n *testNode, mech, user, password string) {
	t.Helper()
	m, _ := sasl.ScramByName(mech)
	salt := sasl.RandomSalt()
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt = user, m.Type, 4096, salt
	up.SaltedPassword = m.SaltedPassword(password, salt, 4096)
	req.Upsertions = append(req.Upsertions, up)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.ctrl.Handle(ctx, req)
	if err != nil || resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode != 0 {
		t.Fatalf("creating %s: %v %+v", user, err, resp)
	}
	waitUntil(t, 5*time.Second, "the credential in the broker's image", func() bool {
		_, ok := scramCredential(n.b.meta.Image(), mech, user)
		return ok
	})
}

// scramExchange runs a SCRAM exchange on c, sending final through alter
// (identity when nil), and returns the answer to the final message.
func (c *rawConn) scramExchange(t *testing.T, user, password string, alter func(final string) string) (*kmsg.SASLAuthenticateResponse, string) {
	t.Helper()
	c.handshake(1, sasl.ScramSHA256)
	ex, err := sasl.ScramClient{Name: sasl.ScramSHA256, User: user, Password: password}.Start()
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := ex.Step(nil)
	r := c.authenticate(2, string(first))
	if r.ErrorCode != 0 {
		t.Fatalf("client-first refused: %+v", r)
	}
	final, _, err := ex.Step(r.SASLAuthBytes)
	if err != nil {
		t.Fatal(err)
	}
	sent := string(final)
	if alter != nil {
		sent = alter(sent)
	}
	return c.authenticate(2, sent), string(final)
}

func TestSCRAMHostileClients(t *testing.T) {
	n, addr := startSASLNode(t, 10*time.Millisecond, 0, nil)
	scramUser(t, n, sasl.ScramSHA256, "alice", "alice-secret")
	good := dialRaw(t, addr)
	if r, _ := good.scramExchange(t, "alice", "alice-secret", nil); r.ErrorCode != 0 || !strings.HasPrefix(string(r.SASLAuthBytes), "v=") {
		t.Fatalf("a good SCRAM login: %+v", r)
	}
	generic := "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
	refused := func(what string, r *kmsg.SASLAuthenticateResponse, c *rawConn) {
		t.Helper()
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || *r.ErrorMessage != generic {
			t.Fatalf("%s: %+v", what, r)
		}
		c.expectClosed()
	}
	// A client-final replayed from an earlier exchange: the server's
	// nonce has changed.
	first := dialRaw(t, addr)
	_, replay := first.scramExchange(t, "alice", "alice-secret", nil)
	c := dialRaw(t, addr)
	r, _ := c.scramExchange(t, "alice", "alice-secret", func(string) string { return replay })
	refused("a replayed client-final", r, c)
	// The nonce altered: prefixed (librdkafka before 2.6.1), truncated,
	// changed.
	for name, alter := range map[string]func(string) string{
		"prefixed":  func(f string) string { return strings.Replace(f, ",r=", ",r=x", 1) },
		"truncated": func(f string) string { i := strings.Index(f, ",p="); return f[:i-1] + f[i:] },
		"changed": func(f string) string {
			i := strings.Index(f, ",p=") - 1
			b := []byte(f)
			if b[i] == 'a' {
				b[i] = 'b'
			} else {
				b[i] = 'a'
			}
			return string(b)
		},
		"proof altered": func(f string) string { return strings.Replace(f, ",p=", ",p=AAAA", 1)[:len(f)] },
		"garbage":       func(string) string { return "\x00\xffnot scram at all" },
	} {
		c := dialRaw(t, addr)
		r, _ := c.scramExchange(t, "alice", "alice-secret", alter)
		refused("the client-final nonce "+name, r, c)
	}
	// A wrong password and an unknown user get the same answer.
	for _, u := range [][2]string{{"alice", "wrong"}, {"mallory", "x"}} {
		c := dialRaw(t, addr)
		c.handshake(1, sasl.ScramSHA256)
		ex, _ := sasl.ScramClient{Name: sasl.ScramSHA256, User: u[0], Password: u[1]}.Start()
		msg, _, _ := ex.Step(nil)
		r := c.authenticate(2, string(msg))
		if r.ErrorCode == 0 {
			msg, _, _ = ex.Step(r.SASLAuthBytes)
			r = c.authenticate(2, string(msg))
		}
		refused("user "+u[0], r, c)
	}
	// Garbage in the first message.
	c = dialRaw(t, addr)
	c.handshake(1, sasl.ScramSHA256)
	refused("a garbage client-first", c.authenticate(2, strings.Repeat("\xfe", 300)), c)
	// The authenticated connection never noticed.
	if err := good.metadataRoundTrip(); err != nil {
		t.Fatalf("the good connection after the hostile ones: %v", err)
	}
}

// TestOAuthJWKSOverTheWire: a listener validating signed JWTs refuses a
// token signed by another key, an unsigned one and an expired one with
// invalid_token, and takes a good one.
func TestOAuthJWKSOverTheWire(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	b64 := base64.RawURLEncoding.EncodeToString
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "k1", "use": "sig",
		"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwks, 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := sasl.NewJWKSValidator(sasl.JWKSValidatorConfig{URL: "file://" + path, ClockSkew: 30 * time.Second, ExpectedAudience: []string{"kafka"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := startTestNodeWithServer(t, nil, 1, func(o *network.ServerOptions) {
		o.Listeners = append(o.Listeners, network.ListenerSpec{Name: "JWT", Host: "127.0.0.1", SecurityProtocol: "SASL_PLAINTEXT",
			SASL: &network.SASLConfig{Mechanisms: []string{sasl.OAuthBearer}, OAuth: v}})
	})
	addr := n.b.Addrs()["JWT"]
	sign := func(k *rsa.PrivateKey, exp time.Duration) string {
		enc := func(v any) string { b, _ := json.Marshal(v); return b64(b) }
		now := time.Now().Unix()
		signed := enc(map[string]string{"alg": "RS256", "kid": "k1"}) + "." + enc(map[string]any{"sub": "svc", "aud": "kafka", "iat": now, "exp": now + int64(exp.Seconds())})
		d := sha256.Sum256([]byte(signed))
		sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
		if err != nil {
			t.Fatal(err)
		}
		return signed + "." + b64(sig)
	}
	c := dialRaw(t, addr)
	c.handshake(1, sasl.OAuthBearer)
	if r := c.authenticate(2, string(sasl.OAuthInitialResponse(sign(key, time.Hour)))); r.ErrorCode != 0 || r.SessionLifetimeMillis < 3_500_000 {
		t.Fatalf("a good token: %+v", r)
	}
	if p := serverConnFor(t, n, c.nc).Principal(); p != (authz.Principal{Type: "User", Name: "svc"}) {
		t.Fatalf("principal %v", p)
	}
	for name, tok := range map[string]string{
		"signed by another key": sign(other, time.Hour),
		"expired":               sign(key, -time.Hour),
		"unsigned":              strings.Join(strings.Split(sign(key, time.Hour), ".")[:2], ".") + ".",
	} {
		c := dialRaw(t, addr)
		c.handshake(1, sasl.OAuthBearer)
		r := c.authenticate(2, string(sasl.OAuthInitialResponse(tok)))
		if r.ErrorCode != 0 || string(r.SASLAuthBytes) != `{"status":"invalid_token"}` {
			t.Fatalf("%s: %+v", name, r)
		}
		r = c.authenticate(2, "\x01")
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("%s after ^A: %+v", name, r)
		}
		c.expectClosed()
	}
}
