package config

// Client-metrics config keys (Kafka 4.3's ClientMetricsConfigs, KIP-714):
// the three keys of a CLIENT_METRICS resource (a telemetry subscription),
// their validation with Kafka's messages, and a subscription parsed for
// matching clients against it.
//
// Deliberate deviation: the match values are regular expressions in Go's
// syntax (RE2), not Java's; a pattern Java accepts and RE2 does not
// (backreferences, lookaround, possessive quantifiers) is refused as an
// illegal pattern. As with Java's Matcher.matches, a value must match the
// whole attribute.

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Client-metrics keys and their bounds (ClientMetricsConfigs).
const (
	ClientMetricsMetricsKey  = "metrics"
	ClientMetricsIntervalKey = "interval.ms"
	ClientMetricsMatchKey    = "match"

	// ClientMetricsDefaultIntervalMs is interval.ms's default (5 minutes),
	// also the push interval of a client no subscription matches.
	ClientMetricsDefaultIntervalMs = 300000
	clientMetricsMinIntervalMs     = 100
	clientMetricsMaxIntervalMs     = 3600000

	// ClientMetricsAllMetrics in metrics subscribes a client to every
	// metric it has.
	ClientMetricsAllMetrics = "*"
)

// The client attributes a match pattern may name.
const (
	MatchClientInstanceID      = "client_instance_id"
	MatchClientID              = "client_id"
	MatchClientSoftwareName    = "client_software_name"
	MatchClientSoftwareVersion = "client_software_version"
	MatchClientSourceAddress   = "client_source_address"
	MatchClientSourcePort      = "client_source_port"
)

func matchAttributes() []string {
	return []string{
		MatchClientInstanceID, MatchClientID, MatchClientSoftwareName,
		MatchClientSoftwareVersion, MatchClientSourceAddress, MatchClientSourcePort,
	}
}

// ClientMetricsKeys returns the keys of a CLIENT_METRICS resource in the
// order Kafka defines (and parses) them.
func ClientMetricsKeys() []Key {
	return []Key{
		{Name: ClientMetricsMetricsKey, Type: TypeList, Default: "", Validator: ListOf{AllowEmpty: true},
			Doc: "Telemetry metric name prefix list"},
		{Name: ClientMetricsIntervalKey, Type: TypeInt, Default: "300000",
			Doc: "Metrics push interval in milliseconds"},
		{Name: ClientMetricsMatchKey, Type: TypeList, Default: "", Validator: ListOf{AllowEmpty: true},
			Doc: "Client match criteria"},
	}
}

// LookupClientMetricsKey returns the definition of a client-metrics key.
func LookupClientMetricsKey(name string) (Key, bool) {
	for _, k := range ClientMetricsKeys() {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// ClientMetricsRequestError is a client-metrics change Kafka refuses with
// INVALID_REQUEST (InvalidRequestException); the other errors of
// ValidateClientMetrics are INVALID_CONFIG.
type ClientMetricsRequestError struct{ Message string }

func (e *ClientMetricsRequestError) Error() string { return e.Message }

// ClientMetrics is a parsed subscription.
type ClientMetrics struct {
	Name       string
	Metrics    []string
	IntervalMs int32
	// Match is the compiled pattern by attribute; empty matches every
	// client.
	Match map[string]*regexp.Regexp
}

// ValidateClientMetrics checks a subscription's complete set of
// overrides as Kafka's ClientMetricsConfigs.validate does, with its
// messages: a non-empty name, known keys (INVALID_REQUEST), values that
// parse (INVALID_CONFIG), interval.ms within 100..3600000
// (INVALID_REQUEST) and legal match patterns (INVALID_CONFIG).
func ValidateClientMetrics(name string, overrides map[string]string) error {
	_, err := ParseClientMetrics(name, overrides)
	return err
}

// ParseClientMetrics validates a subscription (ValidateClientMetrics) and
// returns it parsed.
func ParseClientMetrics(name string, overrides map[string]string) (ClientMetrics, error) {
	if name == "" {
		return ClientMetrics{}, &ClientMetricsRequestError{Message: "Subscription name can't be empty"}
	}
	names := make([]string, 0, len(overrides))
	for k := range overrides {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if _, ok := LookupClientMetricsKey(k); !ok {
			return ClientMetrics{}, &ClientMetricsRequestError{Message: "Unknown client metrics configuration: " + k}
		}
	}
	cm := ClientMetrics{Name: name}
	values := map[string]any{}
	for _, k := range ClientMetricsKeys() {
		raw, set := overrides[k.Name]
		if !set {
			raw = k.Default
		}
		v, err := k.Parse(raw)
		if err != nil {
			return ClientMetrics{}, err
		}
		values[k.Name] = v
	}
	cm.Metrics = values[ClientMetricsMetricsKey].([]string)
	cm.IntervalMs = values[ClientMetricsIntervalKey].(int32)
	if cm.IntervalMs < clientMetricsMinIntervalMs || cm.IntervalMs > clientMetricsMaxIntervalMs {
		return ClientMetrics{}, &ClientMetricsRequestError{Message: fmt.Sprintf(
			"Invalid value %d for %s, interval must be between 100 and 3600000 (1 hour)", cm.IntervalMs, ClientMetricsIntervalKey)}
	}
	match, err := parseMatchPatterns(values[ClientMetricsMatchKey].([]string))
	if err != nil {
		return ClientMetrics{}, err
	}
	cm.Match = match
	return cm, nil
}

// parseMatchPatterns reads "attribute=regex" patterns. Kafka splits each
// with Java's String.split("="), which drops trailing empty parts, and
// wants exactly two parts: so "client_id=" and "a=b=c" are illegal.
func parseMatchPatterns(patterns []string) (map[string]*regexp.Regexp, error) {
	out := map[string]*regexp.Regexp{}
	for _, p := range patterns {
		parts := strings.Split(p, "=")
		for len(parts) > 0 && parts[len(parts)-1] == "" {
			parts = parts[:len(parts)-1]
		}
		illegal := fmt.Errorf("Illegal client matching pattern: %s", p)
		if len(parts) != 2 {
			return nil, illegal
		}
		attr := strings.TrimSpace(parts[0])
		if !slices.Contains(matchAttributes(), attr) {
			return nil, illegal
		}
		re, err := regexp.Compile(`^(?:` + strings.TrimSpace(parts[1]) + `)$`)
		if err != nil {
			return nil, illegal
		}
		out[attr] = re
	}
	return out, nil
}

// Matches reports whether a client with these attributes (by the Match*
// names; an attribute the client does not have is absent) is one the
// subscription is for: every pattern matches its whole attribute.
func (c *ClientMetrics) Matches(attributes map[string]string) bool {
	for attr, re := range c.Match {
		v, ok := attributes[attr]
		if !ok || !re.MatchString(v) {
			return false
		}
	}
	return true
}
