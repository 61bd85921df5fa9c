package protocol

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// VersionRange is the inclusive range of versions of one API that a
// handler fully honours.
type VersionRange struct {
	Min, Max int16
}

// Registry maps API keys to the version ranges served. ApiVersions is
// derived from it and nothing else, so an API is advertised exactly when a
// handler for it is registered.
type Registry struct {
	ranges map[int16]VersionRange
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{ranges: map[int16]VersionRange{}} }

// Add registers key at [min, max]. It panics on a range kmsg cannot decode
// or on a duplicate, both programming errors caught by any test.
func (r *Registry) Add(key kmsg.Key, min, max int16) {
	req := kmsg.RequestForKey(int16(key))
	if req == nil || min < 0 || min > max || max > req.MaxVersion() {
		panic(fmt.Sprintf("protocol: cannot serve %v v%d-%d", key, min, max))
	}
	if _, dup := r.ranges[int16(key)]; dup {
		panic(fmt.Sprintf("protocol: %v registered twice", key))
	}
	r.ranges[int16(key)] = VersionRange{min, max}
}

// Lookup returns the range served for key.
func (r *Registry) Lookup(key int16) (VersionRange, bool) {
	v, ok := r.ranges[key]
	return v, ok
}

// Serves reports whether key at version is served.
func (r *Registry) Serves(key, version int16) bool {
	v, ok := r.ranges[key]
	return ok && version >= v.Min && version <= v.Max
}

// APIKeys lists the served APIs in key order, as ApiVersions reports them.
func (r *Registry) APIKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(r.ranges))
	for k, v := range r.ranges {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: v.Min, MaxVersion: v.Max})
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}
