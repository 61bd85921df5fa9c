package listeners

// SASL settings of the listeners, resolved as Kafka's SaslChannelBuilder
// resolves them: every key may be prefixed with listener.name.<listener>.
// (listener name in lower case), and the per-mechanism ones with
// listener.name.<listener>.<mechanism in lower case>.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/broker/config"
	"github.com/gregorbroker/gregor/broker/controllerclient"
	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/sasl"
)

func listenerPrefix(listener string) string {
	return "listener.name." + strings.ToLower(listener) + "."
}

func mechanismPrefix(listener, mechanism string) string {
	return listenerPrefix(listener) + strings.ToLower(mechanism) + "."
}

// parseKey parses text as the value of key (validated as key is) under the
// name it was set with.
func parseKey(cfg *config.Broker, key, name, text string) (any, error) {
	k, ok := cfg.Schema().Lookup(key)
	if !ok {
		return nil, fmt.Errorf("unknown key %s", key)
	}
	def := k.Key
	def.Name = name
	return def.Parse(text)
}

// listenerMechanisms is sasl.enabled.mechanisms for a listener.
func listenerMechanisms(cfg *config.Broker, listener string) ([]string, error) {
	name := listenerPrefix(listener) + "sasl.enabled.mechanisms"
	text, ok := cfg.Raw[name]
	if !ok {
		return cfg.List("sasl.enabled.mechanisms"), nil
	}
	v, err := parseKey(cfg, "sasl.enabled.mechanisms", name, text)
	if err != nil {
		return nil, err
	}
	return v.([]string), nil
}

// listenerJAAS is the JAAS entry of a mechanism on a listener:
// listener.name.<l>.<mechanism>.sasl.jaas.config. Kafka reads a server's
// JAAS configuration from nowhere else (or from a JAAS file, which Gregor
// does not read).
func listenerJAAS(cfg *config.Broker, listener, mechanism string) (*sasl.JAASEntry, error) {
	name := mechanismPrefix(listener, mechanism) + "sasl.jaas.config"
	text, ok := cfg.Raw[name]
	if !ok {
		return nil, fmt.Errorf("Could not find a 'KafkaServer' or '%s.KafkaServer' entry in the JAAS configuration for SASL mechanism %s: set %s (Gregor reads no JAAS file; java.security.auth.login.config is not used)",
			strings.ToLower(listener), mechanism, name)
	}
	e, err := sasl.ParseJAAS(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	switch e.LoginModule {
	case sasl.PlainLoginModule, sasl.ScramLoginModule, sasl.OAuthBearerLoginModule:
	default:
		return nil, fmt.Errorf("%s: login module %s: Gregor runs no Java classes; it implements %s, %s and %s", name, e.LoginModule, sasl.PlainLoginModule, sasl.ScramLoginModule, sasl.OAuthBearerLoginModule)
	}
	return e, nil
}

// saslListenerConfig builds the authentication set-up of a SASL listener.
// The JWKS validators it makes are returned to be started (they load their
// keys) before the node serves.
func saslListenerConfig(cfg *config.Broker, listener string, logger *slog.Logger) (*network.SASLConfig, []*sasl.JWKSValidator, error) {
	mechs, err := listenerMechanisms(cfg, listener)
	if err != nil {
		return nil, nil, err
	}
	if len(mechs) == 0 {
		return nil, nil, fmt.Errorf("listener %s: No SASL mechanisms are enabled (sasl.enabled.mechanisms)", listener)
	}
	if _, ok := cfg.Raw["sasl.jaas.config"]; ok {
		logger.Warn("Server config sasl.jaas.config should be prefixed with SASL mechanism name, ignoring config", "listener", listener)
	}
	out := &network.SASLConfig{MaxReauth: map[string]time.Duration{}}
	var jwks []*sasl.JWKSValidator
	for _, m := range mechs {
		if !sasl.Supported(m) {
			return nil, nil, fmt.Errorf("listener %s: SASL mechanism %s in sasl.enabled.mechanisms is not supported by Gregor, which implements PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER", listener, m)
		}
		if !slices.Contains(out.Mechanisms, m) {
			out.Mechanisms = append(out.Mechanisms, m)
		}
		jaas, err := listenerJAAS(cfg, listener, m)
		if err != nil {
			return nil, nil, err
		}
		switch m {
		case sasl.Plain:
			out.PlainUsers = sasl.PlainUsersFromJAAS(jaas)
		case sasl.OAuthBearer:
			v, j, err := oauthValidator(cfg, listener, jaas, logger)
			if err != nil {
				return nil, nil, err
			}
			out.OAuth = v
			if j != nil {
				jwks = append(jwks, j)
			}
		}
		if m != sasl.OAuthBearer {
			if err := checkServerCallbackHandler(cfg, listener, m); err != nil {
				return nil, nil, err
			}
		}
		reauth, err := maxReauth(cfg, listener, m)
		if err != nil {
			return nil, nil, err
		}
		out.MaxReauth[m] = reauth
	}
	return out, jwks, nil
}

// kafkaServerCallbackHandlers are the server callback handler classes Kafka
// uses by default for each mechanism; setting one of them is the same as
// setting none.
var kafkaServerCallbackHandlers = map[string]string{
	sasl.Plain:       "org.apache.kafka.common.security.plain.internals.PlainServerCallbackHandler",
	sasl.ScramSHA256: "org.apache.kafka.common.security.scram.internals.ScramServerCallbackHandler",
	sasl.ScramSHA512: "org.apache.kafka.common.security.scram.internals.ScramServerCallbackHandler",
}

// checkServerCallbackHandler refuses a server callback handler class
// Gregor cannot stand in for.
func checkServerCallbackHandler(cfg *config.Broker, listener, mechanism string) error {
	name := mechanismPrefix(listener, mechanism) + "sasl.server.callback.handler.class"
	class, ok := cfg.Raw[name]
	if !ok {
		if class, ok = cfg.Raw["sasl.server.callback.handler.class"]; !ok {
			return nil
		}
		name = "sasl.server.callback.handler.class"
	}
	if class == kafkaServerCallbackHandlers[mechanism] {
		return nil
	}
	return fmt.Errorf("%s=%s: Gregor runs no Java classes; for %s it implements Kafka's own handler", name, class, mechanism)
}

// maxReauth is connections.max.reauth.ms for a mechanism on a listener:
// listener.name.<l>.<mechanism>.connections.max.reauth.ms, else the
// listener's, else the broker's.
func maxReauth(cfg *config.Broker, listener, mechanism string) (time.Duration, error) {
	const key = "connections.max.reauth.ms"
	name := mechanismPrefix(listener, mechanism) + key
	text, ok := cfg.Raw[name]
	if !ok {
		name = listenerPrefix(listener) + key
		text, ok = cfg.Raw[name]
	}
	ms := cfg.Long(key)
	if ok {
		v, err := parseKey(cfg, key, name, text)
		if err != nil {
			return 0, err
		}
		ms = v.(int64)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// kafkaLoginCallbackHandlers are the login callback handler classes Kafka
// uses by default for each mechanism's client side.
var kafkaLoginCallbackHandlers = map[string]string{
	sasl.OAuthBearer: "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredLoginCallbackHandler",
}

// saslPeerDial is how this node authenticates its own connections to
// listener on other nodes, when that listener is SASL_PLAINTEXT or
// SASL_SSL: with the mechanism mechanismKey names
// (sasl.mechanism.inter.broker.protocol or
// sasl.mechanism.controller.protocol) and the credentials of the
// listener's JAAS entry (listener.name.<l>.<mechanism>.sasl.jaas.config,
// as Kafka's inter-broker and controller clients read it), over base (the
// listener's transport; plain TCP when nil). Other listeners get base.
func saslPeerDial(cfg *config.Broker, listener, mechanismKey string, base controllerclient.DialFunc, nodeID int32) (controllerclient.DialFunc, error) {
	proto := cfg.ListenerSecurityProtocolMap[listener]
	if proto != "SASL_PLAINTEXT" && proto != "SASL_SSL" {
		return base, nil
	}
	mech := cfg.String(mechanismKey)
	if !sasl.Supported(mech) {
		return nil, fmt.Errorf("%s=%s: Gregor's own connections to listener %s speak PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER", mechanismKey, mech, listener)
	}
	if class, ok := cfg.Raw[mechanismPrefix(listener, mech)+"sasl.login.callback.handler.class"]; ok && class != kafkaLoginCallbackHandlers[mech] {
		return nil, fmt.Errorf("%s: login callback handler %s: Gregor runs no Java classes", listener, class)
	}
	jaas, err := listenerJAAS(cfg, listener, mech)
	if err != nil {
		return nil, err
	}
	client, err := sasl.ClientFromJAAS(mech, jaas)
	if err != nil {
		// As in Kafka, a node whose JAAS entry has no client
		// credentials starts; its connections to other nodes fail
		// (a single node makes none).
		failure := fmt.Errorf("listener %s: %w", listener, err)
		return func(context.Context, string) (net.Conn, error) { return nil, failure }, nil
	}
	dial := sasl.AuthenticatingDialer(sasl.DialFunc(base), client, fmt.Sprintf("gregor-broker-%d", nodeID))
	return controllerclient.DialFunc(dial), nil
}

// warnScramBetweenControllers warns of a quorum that cannot form: SCRAM
// credentials live in the metadata log, which controllers that must
// authenticate each other with SCRAM cannot commit before they have a
// leader (Kafka hangs the same way; its documentation has controllers use
// PLAIN, or another mechanism, on the controller listener).
func warnScramBetweenControllers(cfg *config.Broker, listener string, logger *slog.Logger) {
	proto := cfg.ListenerSecurityProtocolMap[listener]
	mech := cfg.String("sasl.mechanism.controller.protocol")
	if !cfg.IsController || (proto != "SASL_PLAINTEXT" && proto != "SASL_SSL") || !strings.HasPrefix(mech, "SCRAM-") {
		return
	}
	if len(cfg.ControllerQuorumVoters) == 1 || len(cfg.ControllerQuorumBootstrapServers) == 1 {
		return
	}
	logger.Warn("sasl.mechanism.controller.protocol is "+mech+": controllers authenticate each other with SCRAM credentials that exist only once the quorum has committed them, so a quorum of several controllers cannot elect its first leader; use another mechanism (PLAIN) on the controller listener",
		"listener", listener)
}
