// Package listeners turns a node's broker keys (broker/config) into the
// security of its listeners and of its own connections to other nodes'
// listeners: the TLS server side of each SSL and SASL_SSL listener
// (broker/ssl), the SASL set-up of each SASL listener (network.SASLConfig,
// with the sasl package's mechanisms and OAUTHBEARER validators), the
// dialers this node reaches the inter-broker and controller listeners
// with (TLS client side, then SASL client exchange), and Kafka's dynamic
// SSL updates of both.
//
// It reads the keys as Kafka's channel builders read them: every key may
// be prefixed with listener.name.<listener>. (listener name in lower
// case), the per-mechanism ones with listener.name.<listener>.<mechanism
// in lower case>.
//
// It sits apart from broker/network so that the network server stays free
// of the configuration system (broker/config imports the coordinators);
// of Gregor's packages it imports broker/config, broker/network,
// broker/ssl, broker/controllerclient (the dial function type), metadata
// and sasl.
package listeners

import (
	"log/slog"
	"slices"

	"github.com/gregorbroker/gregor/broker/config"
	"github.com/gregorbroker/gregor/broker/controllerclient"
	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/broker/ssl"
	"github.com/gregorbroker/gregor/sasl"
)

// Set is what a node's listener keys build.
type Set struct {
	// Specs are the listeners this node serves, in the order of the
	// listeners key, with their TLS server sides and SASL set-ups.
	Specs []network.ListenerSpec
	// ControllerDial and InterBrokerDial connect to other nodes'
	// controller and inter-broker listeners (nil: plain TCP): over TLS
	// when those listeners are SSL or SASL_SSL, SASL authenticated when
	// they are SASL ones; the TLS clients behind them follow dynamic
	// keystore updates (Reconfigure).
	ControllerDial  controllerclient.DialFunc
	InterBrokerDial controllerclient.DialFunc
	// JWKSValidators load their keys before the node serves.
	JWKSValidators []*sasl.JWKSValidator

	cfg                *config.Broker
	controllerListener string
	logger             *slog.Logger
	// servers are the SSL listeners' server sides, by name.
	servers        map[string]*ssl.Server
	controllerTLS  *ssl.Client
	interBrokerTLS *ssl.Client
}

// New builds the listeners of cfg and the dialers of this node's
// connections to the inter-broker and controller listeners. Warnings
// (cipher suites Go lacks, a quorum that cannot form) go to logger; a key
// that cannot be honoured is an error naming it.
func New(cfg *config.Broker, logger *slog.Logger) (*Set, error) {
	s := &Set{cfg: cfg, logger: logger}
	if len(cfg.ControllerListenerNames) > 0 {
		s.controllerListener = cfg.ControllerListenerNames[0]
	}
	for _, l := range cfg.Listeners {
		tlsServer, err := listenerTLS(cfg, l, logger)
		if err != nil {
			return nil, err
		}
		if tlsServer != nil {
			if s.servers == nil {
				s.servers = map[string]*ssl.Server{}
			}
			s.servers[l.Name] = tlsServer
		}
		spec := network.ListenerSpec{
			Name: l.Name, Host: l.Host, Port: int(l.Port), SecurityProtocol: l.SecurityProtocol,
			Controller: slices.Contains(cfg.ControllerListenerNames, l.Name),
			TLS:        tlsServer,
		}
		if l.SecurityProtocol == "SASL_PLAINTEXT" || l.SecurityProtocol == "SASL_SSL" {
			var jwks []*sasl.JWKSValidator
			if spec.SASL, jwks, err = saslListenerConfig(cfg, l.Name, logger); err != nil {
				return nil, err
			}
			s.JWKSValidators = append(s.JWKSValidators, jwks...)
		}
		s.Specs = append(s.Specs, spec)
	}
	var err error
	if s.InterBrokerDial, s.interBrokerTLS, err = peerDialer(cfg, cfg.InterBrokerListenerName, logger); err != nil {
		return nil, err
	}
	if s.InterBrokerDial, err = saslPeerDial(cfg, cfg.InterBrokerListenerName, "sasl.mechanism.inter.broker.protocol", s.InterBrokerDial, cfg.NodeID); err != nil {
		return nil, err
	}
	if s.controllerListener != "" {
		if s.ControllerDial, s.controllerTLS, err = peerDialer(cfg, s.controllerListener, logger); err != nil {
			return nil, err
		}
		if s.ControllerDial, err = saslPeerDial(cfg, s.controllerListener, "sasl.mechanism.controller.protocol", s.ControllerDial, cfg.NodeID); err != nil {
			return nil, err
		}
		warnScramBetweenControllers(cfg, s.controllerListener, logger)
	}
	return s, nil
}

// PeerDial connects to other brokers' listener as this node's own clients
// do (nil: plain TCP): InterBrokerDial for the inter-broker listener, and
// for another the same TLS and SASL set-up, with the inter-broker SASL
// mechanism. The remote log metadata manager's client uses it
// (remote.log.metadata.manager.listener.name).
func (s *Set) PeerDial(listener string) (controllerclient.DialFunc, error) {
	if listener == s.cfg.InterBrokerListenerName {
		return s.InterBrokerDial, nil
	}
	dial, _, err := peerDialer(s.cfg, listener, s.logger)
	if err != nil {
		return nil, err
	}
	return saslPeerDial(s.cfg, listener, "sasl.mechanism.inter.broker.protocol", dial, s.cfg.NodeID)
}
