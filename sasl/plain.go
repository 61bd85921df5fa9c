package sasl

// PLAIN (RFC 4616), as Kafka's PlainSaslServer and PlainServerCallbackHandler
// serve it: one message, [authzid] NUL authcid NUL passwd, checked against
// the user_<name>="<password>" options of the listener's PlainLoginModule
// entry. An authorization id is allowed only when it equals the user name;
// the authenticated identity is the user name. Every failure's message is
// Kafka's and is sent to the client (Kafka raises them all as
// SaslAuthenticationException).

import (
	"crypto/subtle"
	"strings"
	"time"
)

// PlainUsers are the users of a PLAIN listener: name to password.
type PlainUsers map[string]string

// PlainUsersFromJAAS reads the user_<name> options of a PlainLoginModule
// entry (Kafka reads them from no other login module).
func PlainUsersFromJAAS(e *JAASEntry) PlainUsers {
	users := PlainUsers{}
	if e == nil || e.LoginModule != PlainLoginModule {
		return users
	}
	for k, v := range e.Options {
		if name, ok := strings.CutPrefix(k, "user_"); ok {
			users[name] = v
		}
	}
	return users
}

// NewPlainServer starts a PLAIN exchange against users.
func NewPlainServer(users PlainUsers) Server { return &plainServer{users: users} }

type plainServer struct {
	users PlainUsers
	authz string
	done  bool
}

func (s *plainServer) Step(msg []byte) ([]byte, bool, error) {
	if s.done {
		return nil, false, authErrorf("Authentication failed: PLAIN exchange already complete")
	}
	// Java decodes the message as UTF-8, replacing malformed bytes.
	tokens := splitPlain(strings.ToValidUTF8(string(msg), "\uFFFD"))
	if len(tokens) != 3 {
		return nil, false, authErrorf("Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(tokens))
	}
	authzid, user, password := tokens[0], tokens[1], tokens[2]
	if user == "" {
		return nil, false, authErrorf("Authentication failed: username not specified")
	}
	if password == "" {
		return nil, false, authErrorf("Authentication failed: password not specified")
	}
	want, ok := s.users[user]
	if !ok || subtle.ConstantTimeCompare([]byte(want), []byte(password)) != 1 {
		return nil, false, authErrorf("Authentication failed: Invalid username or password")
	}
	if authzid != "" && authzid != user {
		return nil, false, authErrorf("Authentication failed: Client requested an authorization id that is different from username")
	}
	s.authz = user
	s.done = true
	return []byte{}, true, nil
}

// splitPlain splits at NUL into at most four tokens, as Kafka does: a
// fourth token (a third NUL) makes the message invalid.
func splitPlain(s string) []string {
	var tokens []string
	for i := 0; i < 4; i++ {
		j := strings.IndexByte(s, 0)
		if j < 0 {
			tokens = append(tokens, s)
			break
		}
		tokens = append(tokens, s[:j])
		s = s[j+1:]
	}
	return tokens
}

func (s *plainServer) AuthorizationID() string     { return s.authz }
func (s *plainServer) CredentialExpiry() time.Time { return time.Time{} }
