package sasl

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestTokenHMAC: HmacSHA512 of the token id keyed with the secret, as
// Kafka's DelegationTokenManager.createHmac (the vector was computed with
// Python's hmac module).
func TestTokenHMAC(t *testing.T) {
	got := TokenHMAC("the-secret", "hUjq_K7rRTmG3uxuX9GmsA")
	const want = "9293981f897bd2a9d70b49c817cb7bac1d46a744b5aee11ca714849dd0fd1fcee24f60b95c63d53c315d1f190f2baffc681ad02f6fa61e75801b6ed7063ee2d1"
	if hex.EncodeToString(got) != want {
		t.Fatalf("hmac %x", got)
	}
	if p := TokenPassword(got); p != "kpOYH4l70qnXC0nIF8t7rB1Gp0S1ruEcpxSEndD9H87iT2C5XGPVPDFdHxkPK6/8aBrQL2+mHnWAG27XBj7i0Q==" {
		t.Fatalf("password %q", p)
	}
}

// tokenLookup serves one token, derived as a broker derives it.
func tokenLookup(secret, id, owner string, expiry time.Time) TokenLookup {
	creds := map[string]ScramCredential{}
	for _, name := range []string{ScramSHA256, ScramSHA512} {
		m, _ := ScramByName(name)
		creds[name] = m.TokenScramCredential(TokenHMAC(secret, id))
	}
	return func(mech, tokenID string) (TokenCredential, bool) {
		if tokenID != id {
			return TokenCredential{}, false
		}
		return TokenCredential{Owner: owner, Credential: creds[mech], Expiry: expiry}, true
	}
}

// tokenRoundTrip runs an exchange of client against a server that knows
// users and tokens.
func tokenRoundTrip(t *testing.T, c ScramClient, users ScramLookup, tokens TokenLookup) (Server, error) {
	t.Helper()
	ex, err := c.Start()
	if err != nil {
		t.Fatal(err)
	}
	srv := NewScramServer(c.Name, users, tokens)
	var challenge []byte
	for i := 0; i < 3; i++ {
		msg, done, err := ex.Step(challenge)
		if err != nil {
			return srv, err
		}
		if done && msg == nil {
			return srv, nil
		}
		if challenge, _, err = srv.Step(msg); err != nil {
			return srv, err
		}
	}
	t.Fatal("exchange did not end")
	return nil, nil
}

func TestScramTokenAuthentication(t *testing.T) {
	const secret, id = "the-secret", "hUjq_K7rRTmG3uxuX9GmsA"
	expiry := time.UnixMilli(1_900_000_000_000)
	tokens := tokenLookup(secret, id, "alice", expiry)
	users := userLookup(map[string]string{"alice": "alice-secret"}, 4096)
	password := TokenPassword(TokenHMAC(secret, id))
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		srv, err := tokenRoundTrip(t, ScramClient{Name: mech, User: id, Password: password, TokenAuth: true}, users, tokens)
		if err != nil {
			t.Fatalf("%s: %v", mech, err)
		}
		if srv.AuthorizationID() != "alice" || !srv.TokenAuthenticated() || !srv.CredentialExpiry().Equal(expiry) {
			t.Fatalf("%s: authorization id %q, token %v, expiry %v", mech, srv.AuthorizationID(), srv.TokenAuthenticated(), srv.CredentialExpiry())
		}
		// The owner's own password is no token password, and a token
		// is no user without the extension.
		for _, c := range []ScramClient{
			{Name: mech, User: id, Password: "alice-secret", TokenAuth: true},
			{Name: mech, User: id, Password: TokenPassword(TokenHMAC("another-secret", id)), TokenAuth: true},
			{Name: mech, User: id, Password: password},
			{Name: mech, User: "alice", Password: "alice-secret", TokenAuth: true},
			{Name: mech, User: "no-such-token", Password: password, TokenAuth: true},
		} {
			srv, err := tokenRoundTrip(t, c, users, tokens)
			var ae *AuthError
			if err == nil || errors.As(err, &ae) || srv.TokenAuthenticated() {
				t.Fatalf("%s %+v: %v (must fail with a message the client is not told)", mech, c, err)
			}
		}
		// A user's exchange is not token authenticated and has no expiry.
		srv, err = tokenRoundTrip(t, ScramClient{Name: mech, User: "alice", Password: "alice-secret"}, users, tokens)
		if err != nil || srv.TokenAuthenticated() || !srv.CredentialExpiry().IsZero() || srv.AuthorizationID() != "alice" {
			t.Fatalf("%s user: %v", mech, err)
		}
	}
}

// TestScramTokenExtensionSpellings: tokenauth is read as Java's
// Boolean.parseBoolean reads it; other extensions are ignored.
func TestScramTokenExtensionSpellings(t *testing.T) {
	const secret, id = "s", "tok"
	tokens := tokenLookup(secret, id, "bob", time.Now().Add(time.Hour))
	users := userLookup(map[string]string{"tok": "pw"}, 4096)
	for ext, token := range map[string]bool{
		",tokenauth=true": true, ",tokenauth=TRUE": true, ",tokenauth=True": true,
		",tokenauth=false": false, ",tokenauth=yes": false, "": false, ",other=1": false, ",other=1,tokenauth=true": true,
	} {
		s := newTestScramServer(users, ScramSHA256, "srv")
		s.tokens = tokens
		_, _, err := s.Step([]byte("n,,n=tok,r=abc" + ext))
		if err != nil {
			t.Fatalf("%q: %v", ext, err)
		}
		if s.tokenAuth != token || (token && s.authz != "bob") || (!token && s.authz != "tok") {
			t.Fatalf("%q: token %v, authz %q", ext, s.tokenAuth, s.authz)
		}
	}
	// An unknown token is refused with Kafka's (hidden) message.
	s := newTestScramServer(users, ScramSHA256, "srv")
	_, _, err := s.Step([]byte("n,,n=nope,r=abc,tokenauth=true"))
	if err == nil || !strings.Contains(err.Error(), "Token Authentication failed: Invalid tokenId : nope") {
		t.Fatalf("unknown token: %v", err)
	}
}

// FuzzScramServerTokens: client-first messages with and without the
// tokenauth extension against a server that knows a user and a token;
// whatever it accepts names the right identity, and nothing panics.
func FuzzScramServerTokens(f *testing.F) {
	f.Add([]byte("n,,n=tok,r=abc,tokenauth=true"), []byte("c=biws,r=abcsrv,p=AAAA"))
	f.Add([]byte("n,,n=tok,r=abc,tokenauth=TRUE,x=y"), []byte("c=biws,r=abcsrv,p=AAAA"))
	f.Add([]byte("n,a=tok,n=tok,r=abc,tokenauth=false"), []byte(""))
	f.Add([]byte("n,,n=user,r=abc,tokenauth=true"), []byte(""))
	tokens := tokenLookup("s", "tok", "owner", time.UnixMilli(1))
	users := rfc7677Lookup(nil)
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s := newTestScramServer(users, ScramSHA256, "srv")
		s.tokens = tokens
		if _, _, err := s.Step(first); err != nil {
			if s.TokenAuthenticated() {
				t.Fatal("a failed exchange is token authenticated")
			}
			return
		}
		cf, _ := parseClientFirst(first)
		if token := strings.EqualFold(cf.extensions["tokenauth"], "true"); token != s.tokenAuth ||
			(token && s.authz != "owner") || (!token && s.authz != "user") {
			t.Fatalf("%q: token %v, authorization id %q", first, s.tokenAuth, s.authz)
		}
		_, done, err := s.Step(final)
		if done && err != nil {
			t.Fatal("done with an error")
		}
		if done != (s.TokenAuthenticated() && s.tokenAuth) && s.tokenAuth {
			t.Fatal("token authentication does not follow the exchange")
		}
	})
}
