package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	cfgdef "github.com/gregorbroker/gregor/config"
)

// UpdateMode is how a broker key may change at run time (Kafka's
// DynamicBrokerConfig).
type UpdateMode int8

const (
	// ReadOnly keys change only with a restart.
	ReadOnly UpdateMode = iota
	// PerBroker keys may be changed dynamically for one broker.
	PerBroker
	// ClusterWide keys may be changed dynamically for one broker or as the
	// cluster-wide default.
	ClusterWide
)

func (m UpdateMode) String() string {
	switch m {
	case PerBroker:
		return "per-broker"
	case ClusterWide:
		return "cluster-wide"
	}
	return "read-only"
}

// BrokerKey is one broker config key.
type BrokerKey struct {
	cfgdef.Key
	Mode UpdateMode
}

// Sensitive reports whether DescribeConfigs hides the key's value.
func (k *BrokerKey) Sensitive() bool { return k.Type == cfgdef.TypePassword }

// Shorthands that keep the key table readable.
const (
	tBool     = cfgdef.TypeBoolean
	tString   = cfgdef.TypeString
	tInt      = cfgdef.TypeInt
	tShort    = cfgdef.TypeShort
	tLong     = cfgdef.TypeLong
	tDouble   = cfgdef.TypeDouble
	tList     = cfgdef.TypeList
	tClass    = cfgdef.TypeClass
	tPassword = cfgdef.TypePassword

	// null and required stand in the default column for "no default
	// value" and "no default at all, must be set".
	null     = "\x00null"
	required = "\x00required"
)

func key(name string, t cfgdef.Type, def string, v cfgdef.Validator, mode UpdateMode, doc string) BrokerKey {
	k := BrokerKey{Key: cfgdef.Key{Name: name, Type: t, Validator: v, Doc: doc}, Mode: mode}
	switch def {
	case null:
		k.DefaultNull = true
	case required:
		k.Required = true
	default:
		k.Default = def
	}
	return k
}

func internalKey(name string, t cfgdef.Type, def string, v cfgdef.Validator, mode UpdateMode, doc string) BrokerKey {
	k := key(name, t, def, v, mode, doc)
	k.Internal = true
	return k
}

// Schema is the set of broker keys, built once and read-only afterwards, so
// it may be shared between goroutines.
type Schema struct {
	keys    []BrokerKey // sorted by name, static keys only
	byName  map[string]*BrokerKey
	dynamic map[string]*BrokerKey // dynamic-only keys (throttle rates)
}

// NewSchema returns the Kafka 4.3 broker key set.
func NewSchema() *Schema {
	s := &Schema{keys: kafkaBrokerKeys(), byName: map[string]*BrokerKey{}, dynamic: map[string]*BrokerKey{}}
	for i := range s.keys {
		s.byName[s.keys[i].Name] = &s.keys[i]
	}
	extra := dynamicOnlyBrokerKeys()
	for i := range extra {
		s.dynamic[extra[i].Name] = &extra[i]
	}
	return s
}

// Keys returns every static broker key sorted by name (internal ones
// included); the caller must not modify them.
func (s *Schema) Keys() []BrokerKey { return s.keys }

// Lookup finds a static broker key.
func (s *Schema) Lookup(name string) (*BrokerKey, bool) {
	k, ok := s.byName[name]
	return k, ok
}

// lookupAny finds a static or dynamic-only broker key, and for a
// listener-prefixed name (listener.name.<l>.<key>) the key it overrides.
func (s *Schema) lookupAny(name string) (*BrokerKey, bool) {
	if k, ok := s.byName[name]; ok {
		return k, true
	}
	if k, ok := s.dynamic[name]; ok {
		return k, true
	}
	if base, ok := listenerOverrideBase(name); ok {
		if k, ok := s.byName[base]; ok {
			return k, true
		}
	}
	return nil, false
}

// listenerConfigPattern matches listener.name.<listener>.<config>.
var listenerConfigPattern = regexp.MustCompile(`^listener\.name\.[^.]*\.(.*)$`)

// listenerMechanismConfigs are set per listener and SASL mechanism:
// listener.name.<l>.<mechanism>.<config>.
var listenerMechanismConfigs = []string{
	"sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class",
	"sasl.server.callback.handler.class", "connections.max.reauth.ms",
}

// listenerOverrideBase returns the key a listener-prefixed name overrides.
func listenerOverrideBase(name string) (string, bool) {
	m := listenerConfigPattern.FindStringSubmatch(name)
	if m == nil {
		return "", false
	}
	base := m[1]
	for _, mc := range listenerMechanismConfigs {
		if strings.HasSuffix(base, mc) {
			return mc, true
		}
	}
	return base, true
}

// brokerSynonyms lists the keys whose values stand in for name, highest
// precedence first, as Kafka's DynamicBrokerConfig.brokerConfigSynonyms
// does with listener overrides matched.
func brokerSynonyms(name string) []string {
	groups := [][]string{
		{"log.roll.ms", "log.roll.hours"},
		{"log.roll.jitter.ms", "log.roll.jitter.hours"},
		{"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
	}
	for _, g := range groups {
		for _, n := range g {
			if n == name {
				return g
			}
		}
	}
	if name == "log.flush.interval.ms" {
		return []string{"log.flush.interval.ms", "log.flush.scheduler.interval.ms"}
	}
	if base, ok := listenerOverrideBase(name); ok {
		return []string{name, base}
	}
	return []string{name}
}

// dynamicSecurityConfigs may only be changed dynamically with a listener
// prefix (Kafka's SslConfigs.RECONFIGURABLE_CONFIGS).
var dynamicSecurityConfigs = map[string]bool{
	"ssl.keystore.type": true, "ssl.keystore.location": true, "ssl.keystore.password": true,
	"ssl.key.password": true, "ssl.truststore.type": true, "ssl.truststore.location": true,
	"ssl.truststore.password": true, "ssl.keystore.certificate.chain": true,
	"ssl.keystore.key": true, "ssl.truststore.certificates": true,
}

// clusterLevelListenerConfigs may be set per listener at cluster level.
var clusterLevelListenerConfigs = map[string]bool{
	"max.connections": true, "max.connection.creation.rate": true, "num.network.threads": true,
}

// quorumVotersValidator checks id@host:port entries.
var quorumVotersValidator = cfgdef.CustomValidator{
	Text: "non-empty list",
	Check: func(key string, value any) error {
		items, _ := value.([]string)
		_, err := parseVoters(items)
		return err
	},
}

// quorumBootstrapServersValidator checks host:port entries.
var quorumBootstrapServersValidator = cfgdef.CustomValidator{
	Text: "non-empty list",
	Check: func(key string, value any) error {
		items, _ := value.([]string)
		for _, it := range items {
			if _, _, err := splitBootstrapServer(it); err != nil {
				return err
			}
		}
		return nil
	},
}

// Voter is one entry of controller.quorum.voters.
type Voter struct {
	ID   int32
	Host string
	Port int32
}

var hostPortPattern = regexp.MustCompile(`^\[?([0-9a-zA-Z\-%._:]*)\]?:([0-9]+)$`)

// splitHostPort parses host:port as Kafka's Utils.getHost/getPort do
// (IPv6 hosts may be bracketed).
func splitHostPort(s string) (string, int32, bool) {
	m := hostPortPattern.FindStringSubmatch(s)
	if m == nil || m[1] == "" {
		return "", 0, false
	}
	port, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return "", 0, false
	}
	return m[1], int32(port), true
}

func parseVoters(items []string) ([]Voter, error) {
	var out []Voter
	for _, entry := range items {
		idAndAddr := strings.Split(entry, "@")
		if len(idAndAddr) != 2 {
			return nil, fmt.Errorf("Invalid configuration value for controller.quorum.voters. Each entry should be in the form `{id}@{host}:{port}`.")
		}
		id, err := strconv.ParseInt(idAndAddr[0], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("Failed to parse node id in controller.quorum.voters entry %s. Each entry should be in the form `{id}@{host}:{port}`.", entry)
		}
		host, port, ok := splitHostPort(idAndAddr[1])
		if !ok {
			return nil, fmt.Errorf("Failed to parse host name from entry %s for the configuration controller.quorum.voters. Each entry should be in the form `{id}@{host}:{port}`.", entry)
		}
		out = append(out, Voter{ID: int32(id), Host: host, Port: port})
	}
	return out, nil
}

func splitBootstrapServer(s string) (string, int32, error) {
	host, port, ok := splitHostPort(s)
	if !ok {
		return "", 0, fmt.Errorf("Failed to parse host name from %s for the configuration controller.quorum.bootstrap.servers. Each entry should be in the form \"{host}:{port}\"", s)
	}
	return host, port, nil
}
