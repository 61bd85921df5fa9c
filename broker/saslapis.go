package broker

// SaslHandshake (key 17), versions 0-1, and SaslAuthenticate (key 36),
// versions 0-2, as the ordinary dispatch answers them. On a SASL listener
// the connection's authentication state machine (broker/network's
// sasl.go) handles both until the connection has authenticated, and again
// for a re-authentication (KIP-368); what reaches these handlers is a
// request on a listener without SASL, or on an authenticated connection
// that cannot re-authenticate now, which Kafka answers ILLEGAL_SASL_STATE.

import (
	"context"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleSaslHandshake answers a SaslHandshake that reaches the ordinary
// dispatch: on a listener without SASL, or on an authenticated connection
// that cannot re-authenticate now (KafkaApis.handleSaslHandshakeRequest).
func (b *Broker) handleSaslHandshake(ctx context.Context, r *network.Request) {
	resp := r.Body.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	r.Respond(resp)
}

// handleSaslAuthenticate answers a SaslAuthenticate that reaches the
// ordinary dispatch (KafkaApis.handleSaslAuthenticateRequest).
func (b *Broker) handleSaslAuthenticate(ctx context.Context, r *network.Request) {
	resp := r.Body.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	msg := "SaslAuthenticate request received after successful authentication"
	resp.ErrorMessage = &msg
	r.Respond(resp)
}

func init() {
	register(api{
		key: kmsg.SASLHandshake, min: 0, max: 1,
		listeners:    allListeners,
		authorizedAs: "nothing (authentication)",
		handle:       (*Broker).handleSaslHandshake,
	})
	register(api{
		key: kmsg.SASLAuthenticate, min: 0, max: 2,
		listeners:    allListeners,
		authorizedAs: "nothing (authentication)",
		handle:       (*Broker).handleSaslAuthenticate,
	})
}
