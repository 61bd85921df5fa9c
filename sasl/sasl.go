// Package sasl holds the SASL mechanisms Gregor speaks, as Kafka 4.3 speaks
// them: PLAIN (RFC 4616), SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC
// 7677) and OAUTHBEARER (RFC 7628), server side and client side, and the
// JAAS configuration text Kafka configures them with.
//
// It is a leaf: it knows nothing of connections or of the metadata image.
// The broker drives a Server per authentication exchange
// (broker/network/sasl.go) and looks SCRAM credentials up in the image
// through a ScramLookup; the controller derives stored credentials with the
// SCRAM functions here; the wiring dials inter-broker and controller
// connections with a Client.
//
// It imports, of Gregor's packages, only protocol and internal/peerdial (the
// README's import table).
package sasl

import (
	"errors"
	"fmt"
	"time"
)

// Mechanism names, as clients send them in SaslHandshake.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
	GSSAPI      = "GSSAPI"
)

// Supported reports whether Gregor implements mechanism.
func Supported(mechanism string) bool {
	switch mechanism {
	case Plain, ScramSHA256, ScramSHA512, OAuthBearer:
		return true
	}
	return false
}

// Server is the server side of one authentication exchange, created when the
// client names its mechanism and fed every message the client sends.
type Server interface {
	// Step evaluates the client's next message and returns the reply to
	// send; done reports that the exchange completed successfully. An
	// error ends the exchange: an *AuthError's message is sent to the
	// client, any other error's stays in the server's log.
	Step(msg []byte) (reply []byte, done bool, err error)
	// AuthorizationID is the authenticated identity, once done.
	AuthorizationID() string
	// CredentialExpiry is when the credential the client authenticated
	// with stops being valid (an OAUTHBEARER token's exp); zero when it
	// does not expire. It bounds the session (KIP-368).
	CredentialExpiry() time.Time
	// TokenAuthenticated reports whether the client authenticated with a
	// delegation token, once done (Kafka's KafkaPrincipal
	// tokenAuthenticated): such a session may not create, renew, expire
	// or describe tokens.
	TokenAuthenticated() bool
}

// AuthError is a failed authentication whose message Kafka sends to the
// client (SaslAuthenticationException). Mechanisms use it only for messages
// that leak nothing to an unauthenticated peer.
type AuthError struct{ Msg string }

func (e *AuthError) Error() string { return e.Msg }

// authErrorf returns an *AuthError.
func authErrorf(format string, args ...any) error {
	return &AuthError{Msg: fmt.Sprintf(format, args...)}
}

// ClientMessage is what the client is told of err: the AuthError's own
// message, or Kafka's generic one for anything else (which may name a user
// that does not exist, and so stays in the server's log).
func ClientMessage(err error, mechanism string, reauthenticating bool) string {
	var ae *AuthError
	if errors.As(err, &ae) {
		return ae.Msg
	}
	what := "authentication"
	if reauthenticating {
		what = "re-authentication"
	}
	return "Authentication failed during " + what + " due to invalid credentials with SASL mechanism " + mechanism
}

// NewRefusingServer is an exchange that fails whatever the client sends:
// the server of a mechanism the listener cannot serve.
func NewRefusingServer(mechanism string) Server { return refusingServer(mechanism) }

type refusingServer string

func (m refusingServer) Step([]byte) ([]byte, bool, error) {
	return nil, false, fmt.Errorf("SASL mechanism %s is not available on this listener", string(m))
}
func (refusingServer) AuthorizationID() string     { return "" }
func (refusingServer) CredentialExpiry() time.Time { return time.Time{} }
func (refusingServer) TokenAuthenticated() bool    { return false }
