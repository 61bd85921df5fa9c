package config

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Gregor's own keys, with no Kafka equivalent, all under "gregor.".
// DescribeConfigs lists one that is set as a static broker config, as Kafka
// lists any other key of server.properties; a "gregor." key not listed here
// stops start-up, as a typo in them would otherwise go unnoticed.
var gregorKeys = map[string]func(value string) error{
	HTTPBasicAuthUsernameKey: func(string) error { return nil },
	HTTPBasicAuthPasswordKey: func(string) error { return nil },
	LogFormatKey: func(v string) error {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "", "text", "json":
			return nil
		}
		return fmt.Errorf("expected text or json")
	},
	TelemetryMaxClientsKey: func(v string) error {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n < 1 {
			return fmt.Errorf("expected a whole number of at least 1")
		}
		return nil
	},
	MetricsPerPartitionKey: func(v string) error {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true", "false":
			return nil
		}
		return fmt.Errorf("expected true or false")
	},
	RemoteStorageKey: func(v string) error {
		if strings.TrimSpace(v) == "" {
			return nil
		}
		_, err := parseRemoteStorage(strings.TrimSpace(v))
		return err
	},
	S3EndpointKey: func(string) error { return nil },
	S3RegionKey:   func(string) error { return nil },
	S3CAFileKey:   func(string) error { return nil },
	S3PathStyleKey: func(v string) error {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "", "true", "false":
			return nil
		}
		return fmt.Errorf("expected true or false")
	},
	// HTTPListenerKey is the operators' HTTP listener (package ops).
	HTTPListenerKey: func(v string) error {
		if strings.TrimSpace(v) == "" {
			return nil
		}
		if _, _, err := net.SplitHostPort(strings.TrimSpace(v)); err != nil {
			return fmt.Errorf("expected host:port, for example 127.0.0.1:9644: %w", err)
		}
		return nil
	},
}

// MetricsPerPartitionKey is gregor.metrics.per.partition: whether /metrics
// has series per partition (the logs' sizes and offsets, the consumer
// groups' lag); true by default, false for nodes with very many
// partitions.
const MetricsPerPartitionKey = "gregor.metrics.per.partition"

// MetricsPerPartition is gregor.metrics.per.partition (default true).
func (b *Broker) MetricsPerPartition() bool {
	return !strings.EqualFold(strings.TrimSpace(b.Raw[MetricsPerPartitionKey]), "false")
}

// TelemetryMaxClientsKey is gregor.metrics.client.telemetry.max.clients:
// how many client instances' pushed metrics (KIP-714) /metrics shows at
// most, for the client instance id is an unbounded label; the instance
// that pushed least recently is dropped for a new one.
const TelemetryMaxClientsKey = "gregor.metrics.client.telemetry.max.clients"

// TelemetryMaxClients is gregor.metrics.client.telemetry.max.clients
// (default 100).
func (b *Broker) TelemetryMaxClients() int {
	if n, err := strconv.Atoi(strings.TrimSpace(b.Raw[TelemetryMaxClientsKey])); err == nil && n > 0 {
		return n
	}
	return 100
}

// LogFormatKey is gregor.log.format: text (log/slog's key=value lines, the
// default) or json (one JSON object a line).
const LogFormatKey = "gregor.log.format"

// LogJSON says whether gregor.log.format is json.
func (b *Broker) LogJSON() bool {
	return strings.EqualFold(strings.TrimSpace(b.Raw[LogFormatKey]), "json")
}

// httpSSLPrefix prefixes the HTTP listener's ssl.* keys.
const httpSSLPrefix = "gregor.http.ssl."

// HTTPBasicAuthUsernameKey and HTTPBasicAuthPasswordKey, set together,
// have the HTTP listener ask for HTTP Basic authentication on every page
// but /healthz and /readyz.
const (
	HTTPBasicAuthUsernameKey = "gregor.http.basic.auth.username"
	HTTPBasicAuthPasswordKey = "gregor.http.basic.auth.password"
)

// HTTPBasicAuth is the HTTP listener's user and password, both empty when
// it asks for none.
func (b *Broker) HTTPBasicAuth() (username, password string) {
	return b.Raw[HTTPBasicAuthUsernameKey], b.Raw[HTTPBasicAuthPasswordKey]
}

// HTTPListenerKey is gregor.http.listener: host:port of the node's HTTP
// listener for /metrics, /healthz, /readyz and the debug pages; off when
// empty.
const HTTPListenerKey = "gregor.http.listener"

// checkGregorKey validates a "gregor." key of the configuration.
func checkGregorKey(name, value string) error {
	check, ok := gregorKeys[name]
	if !ok && strings.HasPrefix(name, httpSSLPrefix) {
		// Any ssl.* key of the HTTP listener; the TLS set-up that reads
		// them (broker/listeners' HTTPTLS) checks them as a listener's.
		return nil
	}
	if !ok {
		known := make([]string, 0, len(gregorKeys))
		for k := range gregorKeys {
			known = append(known, k)
		}
		slices.Sort(known)
		return fmt.Errorf("%s is not one of Gregor's keys (%s, %s*)", name, strings.Join(known, ", "), httpSSLPrefix)
	}
	if err := check(value); err != nil {
		return fmt.Errorf("%s=%s: %w", name, value, err)
	}
	return nil
}

// HTTPListener is gregor.http.listener, empty when the listener is off.
func (b *Broker) HTTPListener() string { return strings.TrimSpace(b.Raw[HTTPListenerKey]) }

// checkGregorPairs checks the Gregor keys that go together: the HTTP
// listener's user and password.
func checkGregorPairs(raw map[string]string) error {
	if (raw[HTTPBasicAuthUsernameKey] == "") != (raw[HTTPBasicAuthPasswordKey] == "") {
		return fmt.Errorf("%s and %s are set together (HTTP Basic authentication on the HTTP listener), or neither", HTTPBasicAuthUsernameKey, HTTPBasicAuthPasswordKey)
	}
	return nil
}
