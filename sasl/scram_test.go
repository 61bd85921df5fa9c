package sasl

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// The SCRAM-SHA-256 example of RFC 7677 section 3.
const (
	rfc7677ClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
	rfc7677ServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	rfc7677ServerFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	rfc7677ClientFinal = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
	rfc7677ServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
)

func rfc7677Lookup(t *testing.T) ScramLookup {
	m, _ := ScramByName(ScramSHA256)
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	cred := m.Credential(salt, m.SaltedPassword("pencil", salt, 4096), 4096)
	return func(mech, user string) (ScramCredential, bool) {
		if mech != ScramSHA256 || user != "user" {
			return ScramCredential{}, false
		}
		return cred, true
	}
}

func newTestScramServer(lookup ScramLookup, mech, serverNonce string) *scramServer {
	s := NewScramServer(mech, lookup).(*scramServer)
	s.nonce = func() string { return serverNonce }
	return s
}

func TestScramServerRFC7677(t *testing.T) {
	s := newTestScramServer(rfc7677Lookup(t), ScramSHA256, rfc7677ServerNonce)
	reply, done, err := s.Step([]byte(rfc7677ClientFirst))
	if err != nil || done || string(reply) != rfc7677ServerFirst {
		t.Fatalf("server first %q, done=%v, %v", reply, done, err)
	}
	reply, done, err = s.Step([]byte(rfc7677ClientFinal))
	if err != nil || !done || string(reply) != rfc7677ServerFinal {
		t.Fatalf("server final %q, done=%v, %v", reply, done, err)
	}
	if s.AuthorizationID() != "user" || !s.CredentialExpiry().IsZero() {
		t.Fatalf("authorization id %q", s.AuthorizationID())
	}
}

func TestScramClientRFC7677(t *testing.T) {
	ex, err := ScramClient{Name: ScramSHA256, User: "user", Password: "pencil", nonce: func() string { return "rOprNGfwEbeRWgbNEkqO" }}.Start()
	if err != nil {
		t.Fatal(err)
	}
	msg, done, err := ex.Step(nil)
	if err != nil || done || string(msg) != rfc7677ClientFirst {
		t.Fatalf("client first %q, %v", msg, err)
	}
	msg, done, err = ex.Step([]byte(rfc7677ServerFirst))
	if err != nil || done || string(msg) != rfc7677ClientFinal {
		t.Fatalf("client final %q, %v", msg, err)
	}
	if msg, done, err = ex.Step([]byte(rfc7677ServerFinal)); err != nil || !done || msg != nil {
		t.Fatalf("after server final: %q %v %v", msg, done, err)
	}
	// A forged server signature is refused.
	ex, _ = ScramClient{Name: ScramSHA256, User: "user", Password: "pencil", nonce: func() string { return "rOprNGfwEbeRWgbNEkqO" }}.Start()
	ex.Step(nil)
	ex.Step([]byte(rfc7677ServerFirst))
	if _, _, err := ex.Step([]byte("v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")); err == nil {
		t.Fatal("a forged server signature was accepted")
	}
}

// scramRoundTrip runs a whole exchange between our client and server.
func scramRoundTrip(t *testing.T, mech, user, password string, lookup ScramLookup) (string, error) {
	t.Helper()
	ex, err := ScramClient{Name: mech, User: user, Password: password}.Start()
	if err != nil {
		t.Fatal(err)
	}
	srv := NewScramServer(mech, lookup)
	var challenge []byte
	for i := 0; i < 3; i++ {
		msg, done, err := ex.Step(challenge)
		if err != nil {
			return "", err
		}
		if done && msg == nil {
			return srv.AuthorizationID(), nil
		}
		if challenge, _, err = srv.Step(msg); err != nil {
			return "", err
		}
	}
	t.Fatal("exchange did not end")
	return "", nil
}

func userLookup(users map[string]string, iterations int) ScramLookup {
	creds := map[string]ScramCredential{}
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		m, _ := ScramByName(mech)
		for u, p := range users {
			salt := RandomSalt()
			creds[mech+"/"+u] = m.Credential(salt, m.SaltedPassword(p, salt, iterations), int32(iterations))
		}
	}
	return func(mech, user string) (ScramCredential, bool) {
		c, ok := creds[mech+"/"+user]
		return c, ok
	}
}

func TestScramRoundTrips(t *testing.T) {
	lookup := userLookup(map[string]string{"alice": "alice-secret", "a=b,c": "odd name"}, 4096)
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		if authz, err := scramRoundTrip(t, mech, "alice", "alice-secret", lookup); err != nil || authz != "alice" {
			t.Fatalf("%s: %q %v", mech, authz, err)
		}
		if authz, err := scramRoundTrip(t, mech, "a=b,c", "odd name", lookup); err != nil || authz != "a=b,c" {
			t.Fatalf("%s with an escaped name: %q %v", mech, authz, err)
		}
		for _, bad := range [][2]string{{"alice", "wrong"}, {"nobody", "x"}} {
			_, err := scramRoundTrip(t, mech, bad[0], bad[1], lookup)
			var ae *AuthError
			if err == nil || errors.As(err, &ae) {
				t.Fatalf("%s %v: %v (must fail with a message the client is not told)", mech, bad, err)
			}
		}
	}
}

func TestScramServerRefusals(t *testing.T) {
	lookup := rfc7677Lookup(t)
	// client-first messages
	for _, tc := range []struct {
		msg     string
		told    string // the AuthError message, or "" for a hidden error
		errPart string
	}{
		{msg: "n,a=other,n=user,r=abc", told: "Authentication failed: Client requested an authorization id that is different from username"},
		{msg: "n,a=user,n=user,r=abc"},
		{msg: "y,,n=user,r=abc", errPart: "Invalid SCRAM client first message format"},
		{msg: "p=tls-unique,,n=user,r=abc", errPart: "Invalid SCRAM client first message format"},
		{msg: "n,,n=user", errPart: "Invalid SCRAM client first message format"},
		{msg: "n,,n=us=er,r=abc", errPart: "Invalid SCRAM client first message format"},
		{msg: "n,,n=us=41r,r=abc", errPart: "Invalid SCRAM client first message format"},
		{msg: "n,,n=nobody,r=abc", errPart: "Invalid user credentials"},
		{msg: "n,,n=user,r=abc,tokenauth=true", errPart: "Token Authentication failed"},
		{msg: "n,,n=us\xc3\xa9r,r=abc", errPart: "Invalid SCRAM client first message format"},
		{msg: "n,,n=user,r=a,b", errPart: "Invalid SCRAM client first message format"},
	} {
		s := newTestScramServer(lookup, ScramSHA256, "srv")
		_, _, err := s.Step([]byte(tc.msg))
		var ae *AuthError
		switch {
		case tc.told == "" && tc.errPart == "":
			if err != nil {
				t.Errorf("%q: %v", tc.msg, err)
			}
		case tc.told != "":
			if !errors.As(err, &ae) || ae.Msg != tc.told {
				t.Errorf("%q: %v, want told %q", tc.msg, err, tc.told)
			}
		default:
			if err == nil || errors.As(err, &ae) || !strings.Contains(err.Error(), tc.errPart) {
				t.Errorf("%q: %v, want a hidden error with %q", tc.msg, err, tc.errPart)
			}
		}
	}
	// client-final messages: a nonce that does not end with the server's
	// (replayed or altered), a bad proof, garbage.
	for _, tc := range []struct{ msg, errPart string }{
		{strings.Replace(rfc7677ClientFinal, "k0,p=", "k1,p=", 1), "Invalid client nonce"},
		{"c=biws,r=rOprNGfwEbeRWgbNEkqO,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", "Invalid client nonce"},
		// A prefixed nonce (what librdkafka before 2.6.1 sends: its own
		// nonce again in front) is refused, as Kafka 4 refuses it.
		{strings.Replace(rfc7677ClientFinal, "r=rOpr", "r=rOprNGfwEbeRWgbNEkqOrOpr", 1), "Invalid client nonce"},
		{strings.Replace(rfc7677ClientFinal, "p=dHzb", "p=eHzb", 1), "Invalid client credentials"},
		{strings.Replace(rfc7677ClientFinal, "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", "p=AAAA", 1), "Invalid client credentials"},
		{"c=biws,p=AAAA", "Invalid SCRAM client final message format"},
		{"", "Invalid SCRAM client final message format"},
	} {
		s := newTestScramServer(lookup, ScramSHA256, rfc7677ServerNonce)
		if _, _, err := s.Step([]byte(rfc7677ClientFirst)); err != nil {
			t.Fatal(err)
		}
		_, done, err := s.Step([]byte(tc.msg))
		var ae *AuthError
		if done || err == nil || errors.As(err, &ae) || !strings.Contains(err.Error(), tc.errPart) {
			t.Errorf("%q: done=%v %v, want a hidden error with %q", tc.msg, done, err, tc.errPart)
		}
		// A failed exchange takes nothing more.
		if _, _, err := s.Step([]byte(rfc7677ClientFinal)); err == nil {
			t.Errorf("%q: the exchange went on after failing", tc.msg)
		}
	}
	// A replayed client-final on a new exchange fails: the server's
	// nonce differs.
	s := newTestScramServer(lookup, ScramSHA256, "another-server-nonce")
	s.Step([]byte(rfc7677ClientFirst))
	if _, _, err := s.Step([]byte(rfc7677ClientFinal)); err == nil {
		t.Fatal("a replayed client final message was accepted")
	}
	// A stored credential below the minimum iterations is refused.
	m, _ := ScramByName(ScramSHA256)
	weak := m.Credential([]byte("s"), m.SaltedPassword("p", []byte("s"), 100), 100)
	s = newTestScramServer(func(string, string) (ScramCredential, bool) { return weak, true }, ScramSHA256, "n")
	if _, _, err := s.Step([]byte("n,,n=u,r=c")); err == nil || !strings.Contains(err.Error(), "less than the minimum 4096") {
		t.Fatalf("weak credential: %v", err)
	}
}

func TestScramNamesAndNonces(t *testing.T) {
	for user, name := range map[string]string{"alice": "alice", "a,b": "a=2Cb", "a=b": "a=3Db", "=,": "=3D=2C"} {
		if got := scramSaslName(user); got != name {
			t.Errorf("saslname of %q = %q, want %q", user, got, name)
		}
		if got, err := scramUsername(name); err != nil || got != user {
			t.Errorf("username of %q = %q %v", name, got, err)
		}
	}
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		n := randomNonce()
		if seen[n] || len(n) < 20 || strings.ContainsAny(n, ",=") {
			t.Fatalf("nonce %q (seen %v)", n, seen[n])
		}
		seen[n] = true
	}
	if bytes.Equal(RandomSalt(), RandomSalt()) {
		t.Fatal("two salts are equal")
	}
}

func FuzzScramServer(f *testing.F) {
	f.Add([]byte(rfc7677ClientFirst), []byte(rfc7677ClientFinal))
	f.Add([]byte("n,a=user,m=ext,n=user,r=x,e=1"), []byte("c=biws,r=x%,ext=v,p=AAAA"))
	f.Add([]byte("n,,n=user,r="), []byte("c=,r=,p="))
	lookup := rfc7677Lookup(nil)
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s := newTestScramServer(lookup, ScramSHA256, rfc7677ServerNonce)
		if _, _, err := s.Step(first); err != nil {
			return
		}
		_, done, err := s.Step(final)
		if done && err != nil {
			t.Fatal("done with an error")
		}
		if !done {
			return
		}
		// Only the RFC's own client final authenticates (up to how its
		// proof is spelled in base64).
		got, _ := parseClientFinal(final)
		want, _ := parseClientFinal([]byte(rfc7677ClientFinal))
		if got == nil || got.withoutProof != want.withoutProof || !bytes.Equal(got.proof, want.proof) {
			t.Fatalf("authenticated with %q then %q", first, final)
		}
	})
}

func FuzzScramClient(f *testing.F) {
	f.Add([]byte(rfc7677ServerFirst), []byte(rfc7677ServerFinal))
	f.Add([]byte("r=rOprNGfwEbeRWgbNEkqOx,s=,i=99999999999"), []byte("e=invalid-proof"))
	f.Fuzz(func(t *testing.T, first, final []byte) {
		ex, _ := ScramClient{Name: ScramSHA256, User: "user", Password: "pencil", nonce: func() string { return "rOprNGfwEbeRWgbNEkqO" }}.Start()
		ex.Step(nil)
		if _, _, err := ex.Step(first); err != nil {
			return
		}
		if _, done, err := ex.Step(final); done && err != nil {
			t.Fatal("done with an error")
		}
	})
}
