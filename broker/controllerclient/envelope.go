package controllerclient

// Envelopes (KIP-590): a client's request a broker forwards to the active
// controller travels inside an EnvelopeRequest carrying the client's
// principal (Kafka's DefaultPrincipalData, version-prefixed), its address
// and, in the inner request's header, its client id, so that the
// controller authorizes the request for the client and counts its
// mutations against the client's quota. Whether a request is a client's
// (sent in an envelope) or this node's own (sent as it is) is said by the
// context Handle is given: WithForwarded marks a client's.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Envelope is what an envelope carries of the client a request is
// forwarded for.
type Envelope struct {
	Principal authz.Principal
	// TokenAuthenticated: the principal authenticated with a delegation
	// token (DefaultPrincipalData's flag).
	TokenAuthenticated bool
	// ClientID is the client's request header's client id.
	ClientID string
	// Addr is the client's address.
	Addr netip.Addr
}

// Forwarded is who a client's request acts for, as the broker keeps it in
// the request's context (its identity): what the envelope carries of it.
type Forwarded interface {
	Envelope() Envelope
}

type forwardedKey struct{}

// WithForwarded returns ctx carrying f: a request Handle is given with it
// is a client's, sent in an envelope; without, it is this node's own.
func WithForwarded(ctx context.Context, f Forwarded) context.Context {
	return context.WithValue(ctx, forwardedKey{}, f)
}

// ForwardedFrom is what ctx carries, if anything (WithForwarded).
func ForwardedFrom(ctx context.Context) (Forwarded, bool) {
	f, ok := ctx.Value(forwardedKey{}).(Forwarded)
	return f, ok
}

// EncodePrincipal is Kafka's DefaultKafkaPrincipalBuilder.serialize: a
// version-prefixed DefaultPrincipalData.
func EncodePrincipal(p authz.Principal, tokenAuthenticated bool) []byte {
	pd := kmsg.NewDefaultPrincipalData()
	pd.Type, pd.Name, pd.TokenAuthenticated = p.Type, p.Name, tokenAuthenticated
	return pd.AppendTo(nil)
}

// DecodePrincipal reads what EncodePrincipal writes: the principal and
// whether it authenticated with a delegation token.
func DecodePrincipal(b []byte) (authz.Principal, bool, error) {
	pd := kmsg.NewDefaultPrincipalData()
	if len(b) < 2 {
		return authz.Principal{}, false, errors.New("principal data shorter than its version")
	}
	if v := int16(b[0])<<8 | int16(b[1]); v != 0 {
		return authz.Principal{}, false, fmt.Errorf("principal data version %d", v)
	}
	if err := pd.ReadFrom(b); err != nil {
		return authz.Principal{}, false, err
	}
	return authz.Principal{Type: pd.Type, Name: pd.Name}, pd.TokenAuthenticated, nil
}
