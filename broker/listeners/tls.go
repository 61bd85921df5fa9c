package listeners

// TLS: the SSL listeners' server sides, the client sides of this node's
// connections to other nodes' inter-broker and controller listeners, and
// Kafka's dynamic SSL updates of both.

import (
	"log/slog"
	"strconv"

	"github.com/gregorbroker/gregor/broker/config"
	"github.com/gregorbroker/gregor/broker/controllerclient"
	"github.com/gregorbroker/gregor/broker/ssl"
	"github.com/gregorbroker/gregor/metadata"
)

// listenerTLS is the TLS server side of an SSL or SASL_SSL listener (nil
// on PLAINTEXT and SASL_PLAINTEXT), from its ssl.* keys with Kafka's
// listener.name.<l>. prefix first.
func listenerTLS(cfg *config.Broker, l config.Listener, logger *slog.Logger) (*ssl.Server, error) {
	settings := ssl.Resolve(l.Name, config.Layers{Static: cfg}.EffectiveValue)
	switch l.SecurityProtocol {
	case "SSL", "SASL_SSL":
		// The inter-broker listener is dialled by this node's brokers
		// too: its certificate must pass its own truststore.
		srv, warnings, err := ssl.NewServer(settings, l.Name == cfg.InterBrokerListenerName)
		if err != nil {
			return nil, err
		}
		for _, w := range warnings {
			logger.Warn(w, "listener", l.Name)
		}
		return srv, nil
	}
	if v, _ := settings.Value("principal.builder.class"); v != ssl.DefaultPrincipalBuilder {
		return nil, settings.Check()
	}
	return nil, nil
}

// peerDialer is how this node connects to listener on other nodes (the
// inter-broker listener, the controller listener): plain TCP on
// PLAINTEXT (nil), TLS with the listener's own ssl.* settings (this
// node's, with the listener.name.<l>. prefix first, as Kafka's
// inter-broker and controller clients read them) on SSL and SASL_SSL;
// saslPeerDial (sasl.go) adds the SASL client exchange after TLS (or TCP)
// on SASL listeners. Liveness probes
// (controller/liveness.go) stay plain TCP connects on any listener: they
// only ask whether something accepts.
func peerDialer(cfg *config.Broker, listener string, logger *slog.Logger) (controllerclient.DialFunc, *ssl.Client, error) {
	proto := cfg.ListenerSecurityProtocolMap[listener]
	if proto != "SSL" && proto != "SASL_SSL" {
		return nil, nil, nil
	}
	cli, warnings, err := ssl.NewClient(ssl.Resolve(listener, config.Layers{Static: cfg}.EffectiveValue))
	if err != nil {
		return nil, nil, err
	}
	for _, w := range warnings {
		logger.Warn(w, "listener", listener)
	}
	d := &ssl.Dialer{TLS: cli}
	return d.Dial, cli, nil
}

// Validate checks that this node's SSL listeners can take the dynamic
// per-broker configs next (Kafka's SslFactory.validateReconfiguration, run
// by the broker an alter request names before it is forwarded): each
// listener whose ssl.* settings change gets its new keystore and
// truststore loaded and compared with the old.
func (s *Set) Validate(img *metadata.Image, next map[string]string) error {
	layers := config.LayersFromImage(s.cfg, img)
	layers.DynamicBroker = next
	for name, srv := range s.servers {
		if err := srv.Validate(ssl.Resolve(name, layers.EffectiveValue)); err != nil {
			return err
		}
	}
	return nil
}

// BrokerConfigsChanged reports whether this node's dynamic configs (its
// own or the cluster defaults) were written between two images, changed
// or not (a keystore rewritten in place is reloaded by setting its
// location again, as in Kafka); the first image (start-up) counts.
func (s *Set) BrokerConfigsChanged(prev, next *metadata.Image) bool {
	if next == nil {
		return false
	}
	own := metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: strconv.Itoa(int(s.cfg.NodeID))}
	def := metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: ""}
	return next.ConfigTouched(prev, own) || next.ConfigTouched(prev, def)
}

// Reconfigure applies the dynamic configs of an image to the SSL
// listeners (new handshakes use the new keystore; established connections
// carry on) and to the clients of the inter-broker and controller
// listeners. A keystore rewritten under the same name is reloaded too
// (when the configs change, as Kafka reloads it: not by watching files).
// An update that cannot be applied (it was validated when it was made,
// but a file may have changed since) keeps the old settings and is
// logged.
func (s *Set) Reconfigure(layers config.Layers) {
	for name, srv := range s.servers {
		changed, err := srv.Reconfigure(ssl.Resolve(name, layers.EffectiveValue))
		switch {
		case err != nil:
			s.logger.Error("the listener keeps its TLS settings: the dynamic update cannot be applied", "listener", name, "err", err)
		case changed:
			s.logger.Info("reconfigured the listener's TLS from its dynamic configs; new connections use it", "listener", name, "subject", srv.Leaf().Subject.String(), "not_after", srv.Leaf().NotAfter)
		}
	}
	for _, c := range []struct {
		listener string
		client   *ssl.Client
	}{{s.cfg.InterBrokerListenerName, s.interBrokerTLS}, {s.controllerListener, s.controllerTLS}} {
		if c.client == nil {
			continue
		}
		if err := c.client.Reconfigure(ssl.Resolve(c.listener, layers.EffectiveValue)); err != nil {
			s.logger.Error("connections to the listener keep their TLS settings: the dynamic update cannot be applied", "listener", c.listener, "err", err)
		}
	}
}
