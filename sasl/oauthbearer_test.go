package sasl

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var testNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func b64json(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func unsecuredToken(claims map[string]any) string {
	return b64json(map[string]string{"alg": "none"}) + "." + b64json(claims) + "."
}

func unsecuredValidator(t *testing.T, opts map[string]string) *UnsecuredValidator {
	t.Helper()
	v, err := NewUnsecuredValidator(&JAASEntry{LoginModule: OAuthBearerLoginModule, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	v.Now = func() time.Time { return testNow }
	return v
}

func TestUnsecuredValidator(t *testing.T) {
	now := float64(testNow.Unix())
	v := unsecuredValidator(t, map[string]string{"unsecuredValidatorRequiredScope": "LOGIN_TO_KAFKA", "unsecuredValidatorAllowableClockSkewMs": "2000"})
	good := map[string]any{"sub": "alice", "iat": now - 10, "exp": now + 60, "scope": []string{"KAFKA", "LOGIN_TO_KAFKA"}}
	tok, terr := v.Validate(unsecuredToken(good))
	if terr != nil || tok.Principal != "alice" || !tok.Expiry.Equal(testNow.Add(time.Minute)) {
		t.Fatalf("%+v %v", tok, terr)
	}
	with := func(k string, val any) map[string]any {
		m := map[string]any{}
		for a, b := range good {
			m[a] = b
		}
		if val == nil {
			delete(m, k)
		} else {
			m[k] = val
		}
		return m
	}
	for name, tc := range map[string]struct {
		token, status, scope string
	}{
		"expired":              {token: unsecuredToken(with("exp", now-2)), status: "invalid_token"},
		"expired within skew":  {token: unsecuredToken(with("exp", now-1)), status: ""},
		"no exp":               {token: unsecuredToken(with("exp", nil)), status: "invalid_token"},
		"exp not a number":     {token: unsecuredToken(with("exp", "soon")), status: "invalid_token"},
		"issued in the future": {token: unsecuredToken(with("iat", now+3)), status: "invalid_token"},
		"exp before iat":       {token: unsecuredToken(map[string]any{"sub": "alice", "iat": now + 1, "exp": now + 1}), status: "invalid_token"},
		"no sub":               {token: unsecuredToken(with("sub", nil)), status: "invalid_token"},
		"blank sub":            {token: unsecuredToken(with("sub", "  ")), status: "invalid_token"},
		"numeric sub":          {token: unsecuredToken(with("sub", 7)), status: "invalid_token"},
		"missing scope":        {token: unsecuredToken(with("scope", "KAFKA")), status: "insufficient_scope", scope: "[LOGIN_TO_KAFKA]"},
		"signed":               {token: unsecuredToken(good) + "c2ln", status: "invalid_token"},
		"alg not none": {token: b64json(map[string]string{"alg": "HS256"}) + "." + b64json(good) + ".",
			status: "invalid_token"},
		"no alg":           {token: b64json(map[string]string{}) + "." + b64json(good) + ".", status: "invalid_token"},
		"two sections":     {token: b64json(map[string]string{"alg": "none"}) + "." + b64json(good), status: "invalid_token"},
		"double dot":       {token: b64json(map[string]string{"alg": "none"}) + ".." + b64json(good), status: "invalid_token"},
		"not base64":       {token: "***." + b64json(good) + ".", status: "invalid_token"},
		"not JSON":         {token: base64.RawURLEncoding.EncodeToString([]byte("[1]")) + "." + b64json(good) + ".", status: "invalid_token"},
		"trailing garbage": {token: base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"} x`)) + "." + b64json(good) + ".", status: "invalid_token"},
	} {
		_, terr := v.Validate(tc.token)
		switch {
		case tc.status == "" && terr != nil:
			t.Errorf("%s: refused: %v", name, terr)
		case tc.status != "" && (terr == nil || terr.Status != tc.status || terr.Scope != tc.scope):
			t.Errorf("%s: %+v, want %s %s", name, terr, tc.status, tc.scope)
		}
	}
	if got := (&TokenError{Status: "insufficient_scope", Scope: "[a, b]"}).JSON(); got != `{"status":"insufficient_scope", "scope":"[a, b]"}` {
		t.Fatal(got)
	}
	for opts, want := range map[string]string{
		"unsecuredValidatorAllowableClockSkewMs=-1": "Allowable clock skew millis must not be negative: -1",
		"unsecuredValidatorRequiredScope=a\"b":      "Invalid scope value: a\"b",
	} {
		k, val, _ := strings.Cut(opts, "=")
		if _, err := NewUnsecuredValidator(&JAASEntry{Options: map[string]string{k: val}}); err == nil || err.Error() != want {
			t.Errorf("%s: %v", opts, err)
		}
	}
}

func TestOAuthBearerServerExchange(t *testing.T) {
	v := unsecuredValidator(t, nil)
	cl := UnsecuredTokenClient{Options: map[string]string{"unsecuredLoginStringClaim_sub": "alice", "unsecuredLoginExtension_traceId": "123"},
		Now: func() time.Time { return testNow }}
	ex, err := cl.Start()
	if err != nil {
		t.Fatal(err)
	}
	msg, done, err := ex.Step(nil)
	if err != nil || done {
		t.Fatal(err)
	}
	s := NewOAuthBearerServer(v)
	reply, sdone, err := s.Step(msg)
	if err != nil || !sdone || len(reply) != 0 || s.AuthorizationID() != "alice" || !s.CredentialExpiry().Equal(testNow.Add(time.Hour)) {
		t.Fatalf("reply %q done %v err %v authz %q expiry %v", reply, sdone, err, s.AuthorizationID(), s.CredentialExpiry())
	}
	if _, done, err := ex.Step(reply); err != nil || !done {
		t.Fatalf("client after success: %v %v", done, err)
	}

	// A refused token: the error JSON as a challenge, then the failure
	// with it once the client acknowledges.
	s = NewOAuthBearerServer(v)
	expired := unsecuredToken(map[string]any{"sub": "alice", "exp": float64(testNow.Unix() - 60)})
	reply, sdone, err = s.Step(OAuthInitialResponse(expired))
	if err != nil || sdone || string(reply) != `{"status":"invalid_token"}` {
		t.Fatalf("expired token: %q %v %v", reply, sdone, err)
	}
	_, _, err = s.Step([]byte{1})
	var ae *AuthError
	if !errors.As(err, &ae) || ae.Msg != `{"status":"invalid_token"}` {
		t.Fatalf("after the acknowledgement: %v", err)
	}

	// An authorization id other than the token's principal.
	tok, _ := cl.Token()
	s = NewOAuthBearerServer(v)
	_, _, err = s.Step([]byte("n,a=bob,\x01auth=Bearer " + tok + "\x01\x01"))
	if !errors.As(err, &ae) || ae.Msg != "Authentication failed: Client requested an authorization id (bob) that is different from the token's principal name (alice)" {
		t.Fatalf("authzid: %v", err)
	}
	// A lone ^A without an error before it is a malformed message.
	if _, _, err := NewOAuthBearerServer(v).Step([]byte{1}); err == nil || errors.As(err, &ae) {
		t.Fatalf("lone ^A: %v", err)
	}
}

func TestOAuthInitialResponseGrammar(t *testing.T) {
	for msg, want := range map[string]string{
		"n,,\x01auth=Bearer abc.def.\x01\x01":                 "",
		"n,a=user,\x01auth=bearer abc\x01k=v v\x01\x01":       "",
		"n,,\x01auth=Bearer abc==\x01\x01":                    "",
		"n,,\x01auth=Basic abc\x01\x01":                       "Invalid scheme in OAUTHBEARER client first message: Basic",
		"n,,\x01auth=Bearer\x01\x01":                          "Invalid OAUTHBEARER client first message: invalid 'auth' format",
		"n,,\x01k=v\x01\x01":                                  "Invalid OAUTHBEARER client first message: 'auth' not specified",
		"n,,\x01auth=Bearer abc\x01":                          "Invalid OAUTHBEARER client first message",
		"y,,\x01auth=Bearer abc\x01\x01":                      "Invalid OAUTHBEARER client first message",
		"n,,\x01auth=Bearer abc\x01k1=v\x01\x01":              "Invalid OAUTHBEARER client first message",
		"n,,\x01auth=Bearer a b\x01\x01":                      "Invalid OAUTHBEARER client first message: invalid 'auth' format",
		"n,,\x01auth=Bearer abc\x01auth=Bearer other\x01\x01": "",
	} {
		_, err := parseOAuthInitialResponse([]byte(msg))
		if (want == "") != (err == nil) || err != nil && err.Error() != want {
			t.Errorf("%q: %v, want %q", msg, err, want)
		}
	}
}

// testKeys are signing keys of every supported kind.
type testKey struct {
	kid  string
	alg  string
	priv crypto.Signer
	jwk  map[string]string
}

func newTestKeys(t *testing.T) []testKey {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	edPub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	b64 := base64.RawURLEncoding.EncodeToString
	pad := func(b []byte, n int) []byte { return append(make([]byte, n-len(b)), b...) }
	return []testKey{
		{kid: "rsa1", alg: "RS256", priv: rsaKey, jwk: map[string]string{"kty": "RSA", "kid": "rsa1", "use": "sig",
			"n": b64(rsaKey.N.Bytes()), "e": b64(big.NewInt(int64(rsaKey.E)).Bytes())}},
		{kid: "ec1", alg: "ES256", priv: ecKey, jwk: map[string]string{"kty": "EC", "kid": "ec1", "crv": "P-256",
			"x": b64(pad(ecKey.X.Bytes(), 32)), "y": b64(pad(ecKey.Y.Bytes(), 32))}},
		{kid: "ed1", alg: "EdDSA", priv: edPriv, jwk: map[string]string{"kty": "OKP", "kid": "ed1", "crv": "Ed25519", "x": b64(edPub)}},
		{kid: "rsa1", alg: "PS256", priv: rsaKey},
	}
}

func jwksJSON(keys ...testKey) []byte {
	var list []map[string]string
	for _, k := range keys {
		if k.jwk != nil {
			list = append(list, k.jwk)
		}
	}
	b, _ := json.Marshal(map[string]any{"keys": list})
	return b
}

func signJWT(t *testing.T, k testKey, header map[string]any, claims map[string]any) string {
	t.Helper()
	if header == nil {
		header = map[string]any{"alg": k.alg, "kid": k.kid, "typ": "JWT"}
	}
	signed := b64json(header) + "." + b64json(claims)
	var sig []byte
	var err error
	switch p := k.priv.(type) {
	case *rsa.PrivateKey:
		d := sha256.Sum256([]byte(signed))
		if k.alg == "PS256" {
			sig, err = rsa.SignPSS(rand.Reader, p, crypto.SHA256, d[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		} else {
			sig, err = rsa.SignPKCS1v15(rand.Reader, p, crypto.SHA256, d[:])
		}
	case *ecdsa.PrivateKey:
		d := sha256.Sum256([]byte(signed))
		var r, s *big.Int
		r, s, err = ecdsa.Sign(rand.Reader, p, d[:])
		sig = append(append(make([]byte, 32-len(r.Bytes())), r.Bytes()...), append(make([]byte, 32-len(s.Bytes())), s.Bytes()...)...)
	case ed25519.PrivateKey:
		sig = ed25519.Sign(p, []byte(signed))
	}
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func fileValidator(t *testing.T, jwks []byte, mutate func(*JWKSValidatorConfig)) *JWKSValidator {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwks, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := JWKSValidatorConfig{URL: "file://" + path, ClockSkew: 30 * time.Second, Now: func() time.Time { return testNow }}
	if mutate != nil {
		mutate(&cfg)
	}
	v, err := NewJWKSValidator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestJWKSValidator(t *testing.T) {
	keys := newTestKeys(t)
	v := fileValidator(t, jwksJSON(keys...), func(c *JWKSValidatorConfig) {
		c.ExpectedAudience = []string{"kafka"}
		c.ExpectedIssuer = "https://issuer.example"
	})
	now := float64(testNow.Unix())
	claims := func(mut func(map[string]any)) map[string]any {
		c := map[string]any{"sub": "alice", "iat": now - 5, "exp": now + 300, "aud": "kafka", "iss": "https://issuer.example", "scope": "produce"}
		if mut != nil {
			mut(c)
		}
		return c
	}
	for _, k := range keys {
		tok, terr := v.Validate(signJWT(t, k, nil, claims(nil)))
		if terr != nil || tok.Principal != "alice" || !tok.Expiry.Equal(testNow.Add(5*time.Minute)) {
			t.Fatalf("%s: %+v %v", k.alg, tok, terr)
		}
	}
	// Without a kid every key of the type is tried.
	if _, terr := v.Validate(signJWT(t, keys[1], map[string]any{"alg": "ES256"}, claims(nil))); terr != nil {
		t.Fatalf("no kid: %v", terr)
	}
	other := newTestKeys(t)[0]
	for name, tok := range map[string]string{
		"expired":         signJWT(t, keys[0], nil, claims(func(c map[string]any) { c["exp"] = now - 31 })),
		"not yet valid":   signJWT(t, keys[0], nil, claims(func(c map[string]any) { c["nbf"] = now + 31 })),
		"no iat":          signJWT(t, keys[0], nil, claims(func(c map[string]any) { delete(c, "iat") })),
		"no exp":          signJWT(t, keys[0], nil, claims(func(c map[string]any) { delete(c, "exp") })),
		"wrong audience":  signJWT(t, keys[0], nil, claims(func(c map[string]any) { c["aud"] = []string{"other"} })),
		"no audience":     signJWT(t, keys[0], nil, claims(func(c map[string]any) { delete(c, "aud") })),
		"wrong issuer":    signJWT(t, keys[0], nil, claims(func(c map[string]any) { c["iss"] = "https://evil.example" })),
		"blank sub":       signJWT(t, keys[0], nil, claims(func(c map[string]any) { c["sub"] = " " })),
		"dup scope":       signJWT(t, keys[0], nil, claims(func(c map[string]any) { c["scope"] = []string{"a", "a"} })),
		"unknown kid":     signJWT(t, testKey{kid: "nope", alg: "RS256", priv: keys[0].priv}, nil, claims(nil)),
		"foreign key":     signJWT(t, testKey{kid: "rsa1", alg: "RS256", priv: other.priv}, nil, claims(nil)),
		"alg none":        b64json(map[string]any{"alg": "none"}) + "." + b64json(claims(nil)) + ".c2ln",
		"alg HS256":       b64json(map[string]any{"alg": "HS256", "kid": "rsa1"}) + "." + b64json(claims(nil)) + ".c2ln",
		"alg mismatch":    signJWT(t, keys[0], map[string]any{"alg": "ES256", "kid": "rsa1"}, claims(nil)),
		"crit":            signJWT(t, keys[0], map[string]any{"alg": "RS256", "kid": "rsa1", "crit": []string{"x"}}, claims(nil)),
		"no signature":    strings.TrimRight(signJWT(t, keys[0], nil, claims(nil)), "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
		"unsecured":       unsecuredToken(claims(nil)),
		"altered payload": signJWT(t, keys[0], nil, claims(nil))[:40] + "x" + signJWT(t, keys[0], nil, claims(nil))[41:],
	} {
		if _, terr := v.Validate(tok); terr == nil || terr.Status != "invalid_token" {
			t.Errorf("%s: %+v", name, terr)
		}
	}
	// Without an expected audience, a token with an aud is refused
	// (jose4j's default) and one without passes.
	v2 := fileValidator(t, jwksJSON(keys...), nil)
	if _, terr := v2.Validate(signJWT(t, keys[0], nil, claims(nil))); terr == nil {
		t.Fatal("a token with aud passed a validator that expects none")
	}
	if _, terr := v2.Validate(signJWT(t, keys[0], nil, claims(func(c map[string]any) { delete(c, "aud") }))); terr != nil {
		t.Fatalf("without aud: %v", terr)
	}
}

func TestJWKSRejectsWeakRSA(t *testing.T) {
	weak, _ := rsa.GenerateKey(rand.Reader, 1024)
	k := testKey{kid: "w", alg: "RS256", priv: weak, jwk: map[string]string{"kty": "RSA", "kid": "w",
		"n": base64.RawURLEncoding.EncodeToString(weak.N.Bytes()), "e": "AQAB"}}
	v := fileValidator(t, jwksJSON(k), nil)
	now := float64(testNow.Unix())
	if _, terr := v.Validate(signJWT(t, k, nil, map[string]any{"sub": "a", "iat": now, "exp": now + 60})); terr == nil {
		t.Fatal("a 1024-bit RSA signature verified")
	}
}

func TestJWKSOverHTTPSRotates(t *testing.T) {
	keys := newTestKeys(t)
	var served atomic.Pointer[[]byte]
	first := jwksJSON(keys[0])
	served.Store(&first)
	var fetches atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Write(*served.Load())
	}))
	defer srv.Close()
	v, err := NewJWKSValidator(JWKSValidatorConfig{URL: srv.URL + "/jwks", RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs,
		Refresh: time.Hour, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := v.Start(ctx); err != nil {
		t.Fatal(err)
	}
	now := float64(testNow.Unix())
	claims := map[string]any{"sub": "alice", "iat": now, "exp": now + 60}
	if _, terr := v.Validate(signJWT(t, keys[0], nil, claims)); terr != nil {
		t.Fatal(terr)
	}
	// The issuer rotates to a new key: the first token naming it fails
	// and fetches the set again; later ones pass.
	both := jwksJSON(keys[0], keys[1])
	served.Store(&both)
	tok := signJWT(t, keys[1], nil, claims)
	if _, terr := v.Validate(tok); terr == nil {
		t.Fatal("a key the validator has not fetched yet verified")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, terr := v.Validate(tok); terr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotated key never verified (%d fetches)", fetches.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// An untrusted https endpoint does not load.
	bad, _ := NewJWKSValidator(JWKSValidatorConfig{URL: srv.URL + "/jwks", RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 10 * time.Millisecond})
	sctx, scancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer scancel()
	if err := bad.Start(sctx); err == nil {
		t.Fatal("loaded a JWKS over https from an untrusted server")
	}
}

func FuzzOAuthBearerServer(f *testing.F) {
	f.Add([]byte("n,,\x01auth=Bearer " + unsecuredToken(map[string]any{"sub": "a", "exp": 1e12}) + "\x01\x01"))
	f.Add([]byte("n,a=x,\x01auth=Bearer a.b.\x01k=v\x01\x01"))
	f.Add([]byte{1})
	v := &UnsecuredValidator{PrincipalClaim: "sub", ScopeClaim: "scope", RequiredScope: []string{"s"}, Now: func() time.Time { return testNow }}
	f.Fuzz(func(t *testing.T, msg []byte) {
		s := NewOAuthBearerServer(v)
		reply, done, err := s.Step(msg)
		if done && (err != nil || s.AuthorizationID() == "") {
			t.Fatalf("done with %v, principal %q", err, s.AuthorizationID())
		}
		if err == nil && !done {
			// An error challenge: the client's ^A ends it.
			if _, _, err := s.Step([]byte{1}); err == nil {
				t.Fatalf("challenge %q did not end in failure", reply)
			}
		}
	})
}

func FuzzJWKSValidate(f *testing.F) {
	keys := []testKey{}
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	keys = append(keys, testKey{kid: "k", alg: "RS256", priv: rsaKey, jwk: map[string]string{"kty": "RSA", "kid": "k",
		"n": base64.RawURLEncoding.EncodeToString(rsaKey.N.Bytes()), "e": "AQAB"}})
	dir := f.TempDir()
	path := filepath.Join(dir, "jwks.json")
	os.WriteFile(path, jwksJSON(keys...), 0o644)
	v, _ := NewJWKSValidator(JWKSValidatorConfig{URL: "file://" + path, Now: func() time.Time { return testNow }})
	if err := v.Start(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Add("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln")
	f.Add("a.b.c")
	f.Add("...")
	f.Fuzz(func(t *testing.T, token string) {
		if tok, terr := v.Validate(token); terr == nil {
			t.Fatalf("a fuzzed token verified: %+v", tok)
		}
	})
}

func FuzzParseJWKS(f *testing.F) {
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"},{"kty":"RSA","n":"AQAB","e":"AQAB"},{"kty":"OKP","crv":"Ed25519","x":"AA"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ParseJWKS(data)
	})
}
