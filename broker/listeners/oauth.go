package listeners

// OAUTHBEARER validators of a listener, chosen as Kafka chooses its server
// callback handler: the unsecured validator by default, the JWKS validator
// for OAuthBearerValidatorCallbackHandler, configured from the
// sasl.oauthbearer.* keys (each may be prefixed with
// listener.name.<l>.oauthbearer. or listener.name.<l>.).

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/broker/config"
	"github.com/gregorbroker/gregor/sasl"
)

const (
	unsecuredValidatorHandler = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
	jwksValidatorHandler      = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
	// jwksValidatorHandlerOld is the class's name before Kafka 3.x moved
	// it out of the secured package.
	jwksValidatorHandlerOld = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"
	// allowedURLsProperty is Kafka 4's JVM system property listing the
	// JWKS and token endpoint URLs a node may use (none by default).
	allowedURLsProperty = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
)

// oauthValue is an sasl.oauthbearer.* key for a listener: mechanism- then
// listener-prefixed, then the key itself; set reports whether any is set.
func oauthValue(cfg *config.Broker, listener, key string) (text, name string, set bool) {
	for _, n := range []string{mechanismPrefix(listener, sasl.OAuthBearer) + key, listenerPrefix(listener) + key, key} {
		if v, ok := cfg.Raw[n]; ok {
			return v, n, true
		}
	}
	return "", key, false
}

// oauthTyped is oauthValue parsed as key's type (its default when unset).
func oauthTyped(cfg *config.Broker, listener, key string) (any, error) {
	text, name, set := oauthValue(cfg, listener, key)
	if !set {
		v, _ := cfg.Value(key)
		return v, nil
	}
	return parseKey(cfg, key, name, text)
}

// oauthValidator builds the OAUTHBEARER validator of a listener.
func oauthValidator(cfg *config.Broker, listener string, jaas *sasl.JAASEntry, logger *slog.Logger) (sasl.TokenValidator, *sasl.JWKSValidator, error) {
	handler, handlerKey, _ := oauthValue(cfg, listener, "sasl.server.callback.handler.class")
	switch handler {
	case "", unsecuredValidatorHandler:
		v, err := sasl.NewUnsecuredValidator(jaas)
		if err != nil {
			return nil, nil, fmt.Errorf("listener %s: OAUTHBEARER unsecured validator: %w", listener, err)
		}
		return v, nil, nil
	case jwksValidatorHandler, jwksValidatorHandlerOld:
	default:
		return nil, nil, fmt.Errorf("%s=%s: Gregor runs no Java classes; for OAUTHBEARER it implements %s and %s", handlerKey, handler, unsecuredValidatorHandler, jwksValidatorHandler)
	}
	if class, name, set := oauthValue(cfg, listener, "sasl.oauthbearer.jwt.validator.class"); set {
		switch class {
		case "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator", "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator":
		default:
			return nil, nil, fmt.Errorf("%s=%s: Gregor runs no Java classes; it validates JWTs as Kafka's BrokerJwtValidator does", name, class)
		}
	}
	jwksURL, urlKey, set := oauthValue(cfg, listener, "sasl.oauthbearer.jwks.endpoint.url")
	jwksURL = strings.TrimSpace(jwksURL)
	if !set || jwksURL == "" {
		return nil, nil, fmt.Errorf("listener %s: The OAuth configuration option sasl.oauthbearer.jwks.endpoint.url value must be non-null", listener)
	}
	if !oauthURLAllowed(jwksURL) {
		return nil, nil, fmt.Errorf("%s: %s is not allowed. Update system property '%s' to allow %s (Gregor reads it from -D%s=... in KAFKA_OPTS, as Kafka's scripts pass it)",
			urlKey, jwksURL, allowedURLsProperty, jwksURL, allowedURLsProperty)
	}
	vc := sasl.JWKSValidatorConfig{URL: jwksURL, Logger: logger.With("component", "oauth-jwks", "listener", listener)}
	aud, err := oauthTyped(cfg, listener, "sasl.oauthbearer.expected.audience")
	if err != nil {
		return nil, nil, err
	}
	vc.ExpectedAudience, _ = aud.([]string)
	if iss, _, set := oauthValue(cfg, listener, "sasl.oauthbearer.expected.issuer"); set {
		vc.ExpectedIssuer = strings.TrimSpace(iss)
	}
	skew, err := oauthTyped(cfg, listener, "sasl.oauthbearer.clock.skew.seconds")
	if err != nil {
		return nil, nil, err
	}
	vc.ClockSkew = time.Duration(skew.(int32)) * time.Second
	for key, dst := range map[string]*string{"sasl.oauthbearer.sub.claim.name": &vc.SubClaim, "sasl.oauthbearer.scope.claim.name": &vc.ScopeClaim} {
		v, err := oauthTyped(cfg, listener, key)
		if err != nil {
			return nil, nil, err
		}
		*dst = strings.TrimSpace(fmt.Sprint(v))
	}
	for key, dst := range map[string]*time.Duration{
		"sasl.oauthbearer.jwks.endpoint.refresh.ms":           &vc.Refresh,
		"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms":     &vc.RetryBackoff,
		"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": &vc.RetryBackoffMax,
	} {
		v, err := oauthTyped(cfg, listener, key)
		if err != nil {
			return nil, nil, err
		}
		*dst = time.Duration(v.(int64)) * time.Millisecond
	}
	if vc.RootCAs, err = jaasTrustStore(jaas); err != nil {
		return nil, nil, fmt.Errorf("listener %s: OAUTHBEARER JAAS options: %w", listener, err)
	}
	v, err := sasl.NewJWKSValidator(vc)
	if err != nil {
		return nil, nil, err
	}
	return v, v, nil
}

// oauthURLAllowed reads Kafka 4's allow-list of OAuth URLs from the JVM
// options in KAFKA_OPTS; without it no URL is allowed, as in Kafka 4.
func oauthURLAllowed(u string) bool {
	for _, f := range strings.Fields(os.Getenv("KAFKA_OPTS")) {
		list, ok := strings.CutPrefix(f, "-D"+allowedURLsProperty+"=")
		if !ok {
			continue
		}
		for _, a := range strings.Split(list, ",") {
			if strings.TrimSpace(a) == u {
				return true
			}
		}
	}
	return false
}

// jaasTrustStore is the certificate pool of the ssl.truststore.* options
// of an OAUTHBEARER JAAS entry (Kafka's JaasOptionsUtils builds its https
// client from them): PEM only, from ssl.truststore.certificates or the
// file at ssl.truststore.location. Nil (the system's roots) when unset.
func jaasTrustStore(e *sasl.JAASEntry) (*x509.CertPool, error) {
	certs, inline := e.Option("ssl.truststore.certificates")
	location, hasFile := e.Option("ssl.truststore.location")
	if !inline && !hasFile {
		return nil, nil
	}
	if typ, ok := e.Option("ssl.truststore.type"); ok && !strings.EqualFold(typ, "PEM") {
		return nil, fmt.Errorf("ssl.truststore.type %s: Gregor reads PEM trust stores only here", typ)
	}
	if !inline {
		b, err := os.ReadFile(location)
		if err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		certs = string(b)
	}
	pool := x509.NewCertPool()
	rest := []byte(certs)
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("trust store certificate %d: %w", n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("the trust store holds no PEM certificate")
	}
	return pool, nil
}
