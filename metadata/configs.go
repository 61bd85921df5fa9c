package metadata

// Configs: the image holds each resource's overrides (Image.Configs, by
// ConfigResource); ConfigSchema is what knows the keys.

import (
	"maps"
	"reflect"
)

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

// ChangedConfigs names the resources of typ whose configs differ between
// prev and img (a later image of the same log). A batch that writes no
// config shares the config map with the image before it, so most images
// cost a pointer comparison; otherwise every resource is compared, a
// pointer first (a batch copies only the resources it touches).
func (img *Image) ChangedConfigs(prev *Image, typ ConfigResourceType) []string {
	if reflect.ValueOf(prev.Configs).UnsafePointer() == reflect.ValueOf(img.Configs).UnsafePointer() {
		return nil
	}
	var names []string
	for res, m := range img.Configs {
		if res.Type != typ {
			continue
		}
		old := prev.Configs[res]
		if reflect.ValueOf(old).UnsafePointer() != reflect.ValueOf(m).UnsafePointer() && !maps.Equal(old, m) {
			names = append(names, res.Name)
		}
	}
	for res := range prev.Configs {
		if _, ok := img.Configs[res]; !ok && res.Type == typ {
			names = append(names, res.Name)
		}
	}
	return names
}
