package listeners

import (
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/broker/quota"
)

// ServerOptions are the network server's settings: the listeners of the
// set and the socket, request-size, idle, SASL and connection-limit keys.
func (s *Set) ServerOptions() network.ServerOptions {
	cfg := s.cfg
	return network.ServerOptions{
		Listeners:                 s.Specs,
		MaxRequestSize:            cfg.SocketRequestMaxBytes,
		MaxIdle:                   maxIdle(cfg.ConnectionsMaxIdleMs),
		QueuedMaxRequestBytes:     cfg.QueuedMaxRequestBytes,
		SendBufferBytes:           cfg.SocketSendBufferBytes,
		ReceiveBufferBytes:        cfg.SocketReceiveBufferBytes,
		SASLMaxReceiveSize:        cfg.Int("sasl.server.max.receive.size"),
		FailedAuthenticationDelay: time.Duration(cfg.Int("connection.failed.authentication.delay.ms")) * time.Millisecond,
		Limits: &network.ConnectionLimits{
			MaxConnections:         cfg.MaxConnections,
			ListenerMaxConnections: cfg.ListenerMaxConnections,
			MaxConnectionsPerIP:    cfg.MaxConnectionsPerIP,
			PerIPOverrides:         cfg.MaxConnectionsPerIPOverrides,
			InterBrokerListener:    cfg.InterBrokerListenerName,

			MaxConnectionCreationRate:         cfg.MaxConnectionCreationRate,
			ListenerMaxConnectionCreationRate: cfg.ListenerMaxConnectionCreationRate,
			RateWindow:                        quota.OptionsFromConfig(cfg).Client,
		},
	}
}

// maxIdle converts connections.max.idle.ms to the server's option, where
// zero stands for the default: Kafka's 0 closes a connection as soon as it
// is idle at all.
func maxIdle(ms int64) time.Duration {
	switch {
	case ms < 0:
		return -1
	case ms == 0:
		return time.Nanosecond
	}
	return time.Duration(ms) * time.Millisecond
}
