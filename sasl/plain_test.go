package sasl

import (
	"errors"
	"strings"
	"testing"
)

func TestPlainServer(t *testing.T) {
	users := PlainUsersFromJAAS(&JAASEntry{LoginModule: PlainLoginModule, Options: map[string]string{
		"username": "admin", "password": "admin-secret", "user_admin": "admin-secret", "user_alice": "alice-secret",
	}})
	if len(users) != 2 || users["alice"] != "alice-secret" {
		t.Fatalf("users = %v", users)
	}
	for _, tc := range []struct {
		msg, authz, err string
	}{
		{msg: "\x00alice\x00alice-secret", authz: "alice"},
		{msg: "alice\x00alice\x00alice-secret", authz: "alice"},
		{msg: "bob\x00alice\x00alice-secret", err: "Authentication failed: Client requested an authorization id that is different from username"},
		{msg: "\x00alice\x00wrong", err: "Authentication failed: Invalid username or password"},
		{msg: "\x00mallory\x00alice-secret", err: "Authentication failed: Invalid username or password"},
		{msg: "\x00\x00pw", err: "Authentication failed: username not specified"},
		{msg: "\x00alice\x00", err: "Authentication failed: password not specified"},
		{msg: "alice", err: "Invalid SASL/PLAIN response: expected 3 tokens, got 1"},
		{msg: "\x00alice", err: "Invalid SASL/PLAIN response: expected 3 tokens, got 2"},
		{msg: "\x00alice\x00alice-secret\x00", err: "Invalid SASL/PLAIN response: expected 3 tokens, got 4"},
		{msg: "", err: "Invalid SASL/PLAIN response: expected 3 tokens, got 1"},
	} {
		s := NewPlainServer(users)
		reply, done, err := s.Step([]byte(tc.msg))
		if tc.err != "" {
			var ae *AuthError
			if done || !errors.As(err, &ae) || ae.Msg != tc.err {
				t.Errorf("%q: done=%v err=%v, want %q", tc.msg, done, err, tc.err)
			}
			continue
		}
		if err != nil || !done || len(reply) != 0 || s.AuthorizationID() != tc.authz {
			t.Errorf("%q: reply=%q done=%v err=%v authz=%q", tc.msg, reply, done, err, s.AuthorizationID())
		}
		if _, _, err := s.Step([]byte(tc.msg)); err == nil {
			t.Errorf("%q: a second message after completion was accepted", tc.msg)
		}
	}
}

func TestPlainUsersOnlyFromPlainLoginModule(t *testing.T) {
	users := PlainUsersFromJAAS(&JAASEntry{LoginModule: ScramLoginModule, Options: map[string]string{"user_alice": "x"}})
	if len(users) != 0 {
		t.Fatalf("users from a ScramLoginModule entry: %v", users)
	}
}

func TestClientMessage(t *testing.T) {
	if got := ClientMessage(errors.New("no such user bob"), ScramSHA256, false); got != "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256" {
		t.Fatal(got)
	}
	if got := ClientMessage(errors.New("x"), Plain, true); got != "Authentication failed during re-authentication due to invalid credentials with SASL mechanism PLAIN" {
		t.Fatal(got)
	}
	if got := ClientMessage(&AuthError{Msg: "told"}, Plain, false); got != "told" {
		t.Fatal(got)
	}
}

// FuzzPlainServer: a PLAIN message authenticates only with a user's own
// password, as that user (an authorization id, if any, equal to it), and
// nothing else panics or completes.
func FuzzPlainServer(f *testing.F) {
	f.Add([]byte("\x00alice\x00alice-secret"))
	f.Add([]byte("alice\x00alice\x00alice-secret"))
	f.Add([]byte("\x00alice\x00alice-secret\x00"))
	f.Add([]byte("\xff\x00alice\x00\xfe"))
	users := PlainUsers{"alice": "alice-secret", "bob": "b"}
	f.Fuzz(func(t *testing.T, msg []byte) {
		s := NewPlainServer(users)
		reply, done, err := s.Step(msg)
		if !done {
			if err == nil {
				t.Fatalf("%q: neither done nor refused", msg)
			}
			return
		}
		if err != nil || len(reply) != 0 {
			t.Fatalf("%q: done with reply %q and error %v", msg, reply, err)
		}
		user := s.AuthorizationID()
		authzid, rest, _ := strings.Cut(string(msg), "\x00")
		if rest != user+"\x00"+users[user] || (authzid != "" && authzid != user) {
			t.Fatalf("%q authenticated as %q", msg, user)
		}
	})
}
