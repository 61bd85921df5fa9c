package metadata

// Configs: the image holds each resource's overrides (Image.Configs, by
// ConfigResource); ConfigSchema is what knows the keys.

// ConfigChangeSchema is a ConfigSchema that also checks a change of a
// resource's overrides against those before it (Kafka refuses to turn a
// topic's remote storage off without deleting its remote data).
type ConfigChangeSchema interface {
	ValidateChange(t ConfigResourceType, name string, before, after map[string]string) error
}

// ConfigSchema is what the controller needs to know about config keys to
// validate AlterConfigs, IncrementalAlterConfigs and CreateTopics configs.
// The broker's config package implements it.
type ConfigSchema interface {
	// Validate checks the complete set of overrides a resource would have
	// after a change; the error message is returned to the client with
	// INVALID_CONFIG, or with the code of a *kerr.Error the error wraps
	// (e.g. kerr.InvalidRequest for broker configs Kafka refuses that way).
	Validate(t ConfigResourceType, name string, overrides map[string]string) error
	// IsList reports whether key is a list type (APPEND and SUBTRACT work
	// only on lists).
	IsList(t ConfigResourceType, key string) bool
	// Default is the value a key has when it is not overridden.
	Default(t ConfigResourceType, key string) (string, bool)
}
