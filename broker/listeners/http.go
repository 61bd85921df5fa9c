package listeners

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"

	"github.com/gregorbroker/gregor/broker/config"
	"github.com/gregorbroker/gregor/broker/ssl"
)

// httpKeyPrefix prefixes the ssl.* keys of the operators' HTTP listener.
const httpKeyPrefix = "gregor.http."

// HTTPTLS is the TLS server side of the operators' HTTP listener
// (gregor.http.listener): the node's ssl.* keys under gregor.http. (a PEM,
// JKS or PKCS12 keystore, a truststore and ssl.client.auth for client
// certificates, the protocols and cipher suites), as a listener's
// listener.name.<l>.ssl.* are read; nil, plain HTTP, when no keystore is
// set.
func HTTPTLS(cfg *config.Broker, logger *slog.Logger) (*tls.Config, error) {
	props := map[string]string{}
	for k, v := range cfg.Raw {
		if key, ok := strings.CutPrefix(k, httpKeyPrefix); ok && strings.HasPrefix(key, "ssl.") {
			props[key] = v
		}
	}
	if props["ssl.keystore.location"] == "" && props["ssl.keystore.certificate.chain"] == "" {
		return nil, nil
	}
	srv, warnings, err := ssl.NewServer(ssl.FromMap("", props), false)
	if err != nil {
		return nil, fmt.Errorf("the HTTP listener's TLS (%sssl.*): %w", httpKeyPrefix, err)
	}
	for _, w := range warnings {
		logger.Warn(w, "listener", "HTTP")
	}
	return srv.Config(), nil
}
