// Package ssl is Gregor's TLS: a listener's or a client's ssl.*
// configuration resolved as Kafka resolves it (the listener.name.<l>.
// prefix first), keystores and truststores (PEM, JKS, PKCS12), Java's
// cipher suite and protocol names, the server side of an SSL or SASL_SSL
// listener (reloadable, for Kafka's dynamic keystore updates), the client
// side of a broker's or controller's connections to another node's
// listener, and the principal of a client certificate
// (ssl.principal.mapping.rules over Java's RFC 2253 form of its subject).
//
// Kafka's counterparts: DefaultSslEngineFactory, SslFactory,
// SslPrincipalMapper and DefaultKafkaPrincipalBuilder. Keys that only
// choose Java machinery have no effect here (ssl.provider,
// ssl.keymanager.algorithm, ssl.trustmanager.algorithm,
// ssl.secure.random.implementation: their values are accepted and
// Settings.Ignored names them); ssl.engine.factory.class and a
// principal.builder.class other than Kafka's default are refused, since
// Gregor runs no Java classes.
//
// It imports, of Gregor's packages, only internal/peerdial.
package ssl

import (
	"fmt"
	"strings"
)

// Keys are the configuration keys a listener's or client's TLS reads.
var Keys = []string{
	"ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols",
	"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
	"ssl.keystore.key", "ssl.keystore.certificate.chain",
	"ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
	"ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.secure.random.implementation",
	"ssl.endpoint.identification.algorithm", "ssl.engine.factory.class",
	"ssl.client.auth", "ssl.principal.mapping.rules", "ssl.allow.dn.changes", "ssl.allow.san.changes",
	"principal.builder.class",
}

// DefaultPrincipalBuilder is Kafka's principal builder, the one Gregor
// implements.
const DefaultPrincipalBuilder = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"

// javaDefaults are the Java-machinery keys' defaults: any other value is
// accepted but has no effect (Ignored).
var javaDefaults = map[string]string{
	"ssl.keymanager.algorithm":   "SunX509",
	"ssl.trustmanager.algorithm": "PKIX",
}

// Settings are the values of Keys for one listener (or a client), each
// taken from listener.name.<listener>.<key> when that is set, else from
// <key>; a key without a value (set or default) is absent.
type Settings struct {
	// Listener is the listener's name as configured ("" for a client's
	// own settings).
	Listener string
	values   map[string]string
	names    map[string]string
}

// ListenerPrefix is Kafka's prefix of a listener's own keys.
func ListenerPrefix(listener string) string {
	return "listener.name." + strings.ToLower(listener) + "."
}

// Resolve reads Keys for listener ("" for none) through lookup, which
// gives a key's value (its default when unset) and whether it has one.
func Resolve(listener string, lookup func(key string) (string, bool)) Settings {
	s := Settings{Listener: listener, values: map[string]string{}, names: map[string]string{}}
	for _, k := range Keys {
		if listener != "" {
			name := ListenerPrefix(listener) + k
			if v, ok := lookup(name); ok {
				s.values[k], s.names[k] = v, name
				continue
			}
		}
		if v, ok := lookup(k); ok {
			s.values[k], s.names[k] = v, k
		}
	}
	return s
}

// FromMap is Resolve over a map of values (a client's properties), with
// Kafka's defaults for the keys it lacks.
func FromMap(listener string, props map[string]string) Settings {
	return Resolve(listener, func(k string) (string, bool) {
		if v, ok := props[k]; ok {
			return v, true
		}
		v, ok := clientDefaults[k]
		return v, ok
	})
}

// clientDefaults are Kafka's defaults of Keys (those that have one).
var clientDefaults = map[string]string{
	"ssl.protocol":                          "TLSv1.3",
	"ssl.enabled.protocols":                 "TLSv1.2,TLSv1.3",
	"ssl.keystore.type":                     "JKS",
	"ssl.truststore.type":                   "JKS",
	"ssl.keymanager.algorithm":              "SunX509",
	"ssl.trustmanager.algorithm":            "PKIX",
	"ssl.endpoint.identification.algorithm": "https",
	"ssl.client.auth":                       "none",
	"ssl.principal.mapping.rules":           "DEFAULT",
	"ssl.allow.dn.changes":                  "false",
	"ssl.allow.san.changes":                 "false",
	"principal.builder.class":               DefaultPrincipalBuilder,
	"ssl.cipher.suites":                     "",
}

// Value is key's value.
func (s Settings) Value(key string) (string, bool) {
	v, ok := s.values[key]
	return v, ok
}

// Name is the configuration name key's value came from (the prefixed one
// when the listener sets it), for messages.
func (s Settings) Name(key string) string {
	if n, ok := s.names[key]; ok {
		return n
	}
	if s.Listener != "" {
		return ListenerPrefix(s.Listener) + key
	}
	return key
}

// list is a LIST key's items.
func (s Settings) list(key string) []string {
	v, _ := s.Value(key)
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// bool is a BOOLEAN key's value (false when unset).
func (s Settings) bool(key string) bool {
	v, _ := s.Value(key)
	return strings.EqualFold(strings.TrimSpace(v), "true")
}

// Equal reports whether s and o hold the same values.
func (s Settings) Equal(o Settings) bool {
	if len(s.values) != len(o.values) {
		return false
	}
	for k, v := range s.values {
		if ov, ok := o.values[k]; !ok || ov != v {
			return false
		}
	}
	return true
}

// With returns s with key set to value (or removed when value is nil),
// as a dynamic update would leave it.
func (s Settings) With(key string, value *string) Settings {
	out := Settings{Listener: s.Listener, values: map[string]string{}, names: map[string]string{}}
	for k, v := range s.values {
		out.values[k], out.names[k] = v, s.names[k]
	}
	if value == nil {
		delete(out.values, key)
		delete(out.names, key)
	} else {
		out.values[key], out.names[key] = *value, ListenerPrefix(s.Listener)+key
	}
	return out
}

// Check refuses what Gregor cannot honour: a Java class to run.
func (s Settings) Check() error {
	if v, ok := s.Value("ssl.engine.factory.class"); ok && v != "" {
		return fmt.Errorf("%s %s: Gregor runs no Java classes; its TLS is Go's crypto/tls", s.Name("ssl.engine.factory.class"), v)
	}
	if v, ok := s.Value("principal.builder.class"); ok && v != DefaultPrincipalBuilder {
		return fmt.Errorf("%s %s: Gregor runs no Java classes; it builds principals as Kafka's %s does", s.Name("principal.builder.class"), v, DefaultPrincipalBuilder)
	}
	return nil
}

// Ignored lists the keys set to a value that has no effect in Gregor,
// with why, for a warning at start-up.
func (s Settings) Ignored() []string {
	var out []string
	for _, k := range []string{"ssl.provider", "ssl.secure.random.implementation", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm"} {
		v, ok := s.Value(k)
		if !ok || v == "" || v == javaDefaults[k] {
			continue
		}
		out = append(out, fmt.Sprintf("%s=%s has no effect: it names Java security machinery, and Gregor's TLS is Go's crypto/tls", s.Name(k), v))
	}
	return out
}
