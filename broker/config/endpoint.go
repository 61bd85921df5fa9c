package config

import (
	"os"

	"github.com/gregorbroker/gregor/metadata"
)

// securityProtocolCodes are Kafka's SecurityProtocol ids.
var securityProtocolCodes = map[string]int16{"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

// Endpoint is the listener as a node registers it; an empty (wildcard)
// host is advertised as this machine's host name, as Kafka does.
func (l Listener) Endpoint() metadata.Endpoint {
	host := l.Host
	if host == "" {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return metadata.Endpoint{Name: l.Name, Host: host, Port: l.Port, SecurityProtocol: securityProtocolCodes[l.SecurityProtocol]}
}
