package config

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	cfgdef "github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/metadata"
)

// Kafka error codes the validation errors carry.
const (
	errInvalidConfig  int16 = 40 // INVALID_CONFIG
	errInvalidRequest int16 = 42 // INVALID_REQUEST
	errInvalidTopic   int16 = 17 // INVALID_TOPIC_EXCEPTION
)

// ValidationError is a refused config change: Code is the Kafka error code
// to answer with, Message Kafka's text for it.
type ValidationError struct {
	Code    int16
	Message string
}

func (e *ValidationError) Error() string { return e.Message }

// ErrorCode is the Kafka error code (INVALID_CONFIG, INVALID_REQUEST or
// INVALID_TOPIC_EXCEPTION).
func (e *ValidationError) ErrorCode() int16 { return e.Code }

// ControllerSchema implements metadata.ConfigSchema for Kafka 4.3's topic,
// broker and group keys. Topic and group overrides are validated against
// the controller node's static configuration, as Kafka's controller does.
// It is read-only after construction and safe for concurrent use.
type ControllerSchema struct {
	static *Broker
	// topicBase is the static topic defaults (log.retention.hours etc.
	// converted), computed once.
	topicBase map[string]string
}

var _ metadata.ConfigSchema = (*ControllerSchema)(nil)

// NewControllerSchema returns the schema for a node loaded with Load.
func NewControllerSchema(static *Broker) *ControllerSchema {
	l := Layers{Static: static}
	return &ControllerSchema{static: static, topicBase: l.topicBase()}
}

// Validate checks the complete set of overrides a resource would have.
func (c *ControllerSchema) Validate(t metadata.ConfigResourceType, name string, overrides map[string]string) error {
	switch t {
	case metadata.ConfigResourceTopic:
		if name == "" {
			return &ValidationError{Code: errInvalidRequest, Message: "Default topic resources are not allowed."}
		}
		if msg := metadata.TopicNameError(name); msg != "" {
			return &ValidationError{Code: errInvalidTopic, Message: msg}
		}
		if err := cfgdef.ValidateTopic(c.topicBase, overrides); err != nil {
			return &ValidationError{Code: errInvalidConfig, Message: err.Error()}
		}
		if err := cfgdef.ValidateTopicRemote(c.topicBase, overrides, c.static.Bool(RemoteStorageSystemEnableKey), nil); err != nil {
			return &ValidationError{Code: errInvalidConfig, Message: err.Error()}
		}
		return nil
	case metadata.ConfigResourceBroker:
		if name != "" {
			id, err := strconv.ParseInt(name, 10, 32)
			if err != nil {
				return &ValidationError{Code: errInvalidRequest, Message: "Unable to parse broker name as a base 10 number."}
			}
			if id < 0 {
				return &ValidationError{Code: errInvalidRequest, Message: "Invalid negative broker ID."}
			}
		}
		if err := c.validateDynamicBroker(overrides, name != ""); err != nil {
			return &ValidationError{Code: errInvalidRequest, Message: err.Error()}
		}
		return nil
	case metadata.ConfigResourceGroup:
		// Any non-empty group id may carry configs: the group need not
		// exist (Kafka's ControllerConfigurationValidator).
		if name == "" {
			return &ValidationError{Code: errInvalidRequest, Message: "Default group resources are not allowed."}
		}
		if err := cfgdef.ValidateGroup(overrides, Layers{Static: c.static}.EffectiveValue); err != nil {
			return &ValidationError{Code: errInvalidConfig, Message: err.Error()}
		}
		return nil
	case metadata.ConfigResourceClientMetrics:
		// Kafka's ClientMetricsConfigs.validate: unknown keys, a bad
		// interval and an empty name are INVALID_REQUEST, values that do
		// not parse and illegal match patterns INVALID_CONFIG.
		err := cfgdef.ValidateClientMetrics(name, overrides)
		var re *cfgdef.ClientMetricsRequestError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &re):
			return &ValidationError{Code: errInvalidRequest, Message: err.Error()}
		}
		return &ValidationError{Code: errInvalidConfig, Message: err.Error()}
	}
	return &ValidationError{Code: errInvalidRequest, Message: fmt.Sprintf("Unknown resource type %d", t)}
}

// ValidateChange checks a topic's overrides against those before the
// change: Kafka refuses to turn remote storage off without
// remote.log.delete.on.disable (metadata.ConfigChangeSchema).
func (c *ControllerSchema) ValidateChange(t metadata.ConfigResourceType, name string, before, after map[string]string) error {
	if t != metadata.ConfigResourceTopic {
		return nil
	}
	if before == nil {
		before = map[string]string{}
	}
	if err := cfgdef.ValidateTopicRemote(c.topicBase, after, c.static.Bool(RemoteStorageSystemEnableKey), before); err != nil {
		return &ValidationError{Code: errInvalidConfig, Message: err.Error()}
	}
	return nil
}

// javaSet prints names the way Kafka prints a Java set in these messages
// (sorted here, so that the text is stable).
func javaSet(names []string) string {
	sort.Strings(names)
	return "[" + strings.Join(names, ", ") + "]"
}

// validateDynamicBroker is Kafka's DynamicBrokerConfig.validateConfigs.
func (c *ControllerSchema) validateDynamicBroker(props map[string]string, perBroker bool) error {
	schema := c.static.schema
	var nonDynamic, securityWithoutPrefix, perBrokerOnly []string
	for name := range props {
		if k, ok := schema.byName[name]; ok && k.Mode == ReadOnly {
			nonDynamic = append(nonDynamic, name)
		}
		if dynamicSecurityConfigs[name] {
			securityWithoutPrefix = append(securityWithoutPrefix, name)
		}
		if k, ok := schema.byName[name]; ok && k.Mode == PerBroker {
			perBrokerOnly = append(perBrokerOnly, name)
		} else if base, ok := listenerOverrideBase(name); ok && !clusterLevelListenerConfigs[base] {
			perBrokerOnly = append(perBrokerOnly, name)
		}
	}
	if len(nonDynamic) > 0 {
		return fmt.Errorf("Cannot update these configs dynamically: %s", javaSet(nonDynamic))
	}
	if len(securityWithoutPrefix) > 0 {
		return fmt.Errorf("These security configs can be dynamically updated only per-listener using the listener prefix: %s", javaSet(securityWithoutPrefix))
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		base := name
		if b, ok := listenerOverrideBase(name); ok {
			base = b
		}
		k, ok := schema.byName[base]
		if !ok {
			k, ok = schema.dynamic[base]
		}
		if !ok || k.Mode == ReadOnly {
			continue // Kafka only type-checks the dynamic keys
		}
		if _, err := k.Parse(props[name]); err != nil {
			return err
		}
	}
	if !perBroker && len(perBrokerOnly) > 0 {
		return fmt.Errorf("Cannot update these configs at default cluster level, broker id must be specified: %s", javaSet(perBrokerOnly))
	}
	return c.validateCleaner(props)
}

// validateCleaner applies Kafka's rules for the log cleaner's dynamic
// keys: KafkaConfig's dedupe buffer of more than 1 MiB per thread, and
// LogCleaner.validateReconfiguration's thread count (at least 1, within
// half and double the current one). The values not in props are the
// static ones (a per-broker change does not see the cluster default).
func (c *ControllerSchema) validateCleaner(props map[string]string) error {
	_, hasThreads := props["log.cleaner.threads"]
	_, hasBuffer := props["log.cleaner.dedupe.buffer.size"]
	if !hasThreads && !hasBuffer {
		return nil
	}
	current := c.static.Int("log.cleaner.threads")
	threads, buffer := int64(current), c.static.Long("log.cleaner.dedupe.buffer.size")
	if v, ok := props["log.cleaner.threads"]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return fmt.Errorf("Invalid value %s for configuration log.cleaner.threads: Not a number of type INT", v)
		}
		threads = n
		if threads < 1 {
			return errors.New("Log cleaner threads should be at least 1")
		}
		if threads < int64(current)/2 {
			return fmt.Errorf("Log cleaner threads cannot be reduced to less than half the current value %d", current)
		}
		if threads > int64(current)*2 {
			return fmt.Errorf("Log cleaner threads cannot be increased to more than double the current value %d", current)
		}
	}
	if v, ok := props["log.cleaner.dedupe.buffer.size"]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("Invalid value %s for configuration log.cleaner.dedupe.buffer.size: Not a number of type LONG", v)
		}
		buffer = n
	}
	return requirement(buffer/max(threads, 1) > 1024*1024, "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.")
}

// IsList reports whether key is a LIST key of the resource type.
func (c *ControllerSchema) IsList(t metadata.ConfigResourceType, key string) bool {
	switch t {
	case metadata.ConfigResourceTopic:
		d, ok := cfgdef.LookupTopicKey(key)
		return ok && d.Type == cfgdef.TypeList
	case metadata.ConfigResourceBroker:
		k, ok := c.static.schema.lookupAny(key)
		return ok && k.Type == cfgdef.TypeList
	case metadata.ConfigResourceGroup:
		k, ok := cfgdef.LookupGroupKey(key)
		return ok && k.Type == cfgdef.TypeList
	case metadata.ConfigResourceClientMetrics:
		k, ok := cfgdef.LookupClientMetricsKey(key)
		return ok && k.Type == cfgdef.TypeList
	}
	return false
}

// Default is the value key has when the resource does not override it: for
// a topic the broker-derived default (static configuration), for a broker
// the static value or Kafka's default.
func (c *ControllerSchema) Default(t metadata.ConfigResourceType, key string) (string, bool) {
	switch t {
	case metadata.ConfigResourceTopic:
		if v, ok := c.topicBase[key]; ok {
			return v, true
		}
		d, ok := cfgdef.LookupTopicKey(key)
		if !ok || !d.HasValue() {
			return "", false
		}
		return d.Default, true
	case metadata.ConfigResourceBroker:
		return Layers{Static: c.static}.EffectiveValue(key)
	case metadata.ConfigResourceGroup:
		k, ok := cfgdef.LookupGroupKey(key)
		if !ok {
			return "", false
		}
		if k.BrokerSynonym != "" {
			if v, ok := (Layers{Static: c.static}).EffectiveValue(k.BrokerSynonym); ok {
				return v, true
			}
		}
		return k.Default, k.HasValue()
	case metadata.ConfigResourceClientMetrics:
		k, ok := cfgdef.LookupClientMetricsKey(key)
		return k.Default, ok
	}
	return "", false
}
