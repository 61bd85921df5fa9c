package config

// DescribeConfigs answers (v1-v4) and the configs list of CreateTopics v5+,
// following Kafka 4.3's ConfigHelper and KafkaConfigSchema.
//
// Two Kafka behaviours are reproduced on purpose because clients and tools
// show them:
//   - A synonym list is cut so that it starts at the described key's own
//     name (Kafka drops "listener overrides" that way). For a topic key the
//     list is built for its first broker synonym, so segment.ms with
//     nothing but the default log.roll.hours reports no synonyms at all,
//     and retention.ms set through log.retention.hours reports none either.
//   - Every key Kafka knows is listed when no names are requested, null
//     values included (log.retention.ms), and any key given in the
//     properties file is listed too; a key Kafka does not know is reported
//     as sensitive with a null value and type UNKNOWN.

import (
	"sort"
	"strconv"

	cfgdef "github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Layers are the sources of one broker's configuration, in Kafka's
// precedence order: this broker's dynamic configs, the cluster-wide dynamic
// defaults, the static (file) configuration, Kafka's defaults.
type Layers struct {
	Static         *Broker
	DynamicBroker  map[string]string
	DynamicDefault map[string]string
}

// LayersFromImage takes this node's dynamic configs from the metadata
// image (ConfigResource{Broker, "<node id>"} and {Broker, ""}). img may be
// nil before the first image is available.
func LayersFromImage(static *Broker, img *metadata.Image) Layers {
	l := Layers{Static: static}
	if img != nil {
		l.DynamicBroker = img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: strconv.Itoa(int(static.NodeID))}]
		l.DynamicDefault = img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: ""}]
	}
	return l
}

// staticDefault is Kafka's staticDefaultConfigs: every key's default as
// text, keys without one absent.
func (l Layers) staticDefault(name string) (string, bool) {
	k, ok := l.Static.schema.Lookup(name)
	if !ok || !k.HasValue() {
		return "", false
	}
	return k.Default, true
}

// rawValue returns the highest-precedence raw text of name and its source.
func (l Layers) rawValue(name string) (string, kmsg.ConfigSource, bool) {
	if v, ok := l.DynamicBroker[name]; ok {
		return v, kmsg.ConfigSourceDynamicBrokerConfig, true
	}
	if v, ok := l.DynamicDefault[name]; ok {
		return v, kmsg.ConfigSourceDynamicDefaultBrokerConfig, true
	}
	if v, ok := l.Static.Raw[name]; ok {
		return v, kmsg.ConfigSourceStaticBrokerConfig, true
	}
	if v, ok := l.staticDefault(name); ok {
		return v, kmsg.ConfigSourceDefaultConfig, true
	}
	return "", 0, false
}

// EffectiveValue is the text of a broker key's current value, dynamic
// configs applied, printed as Kafka prints it; false when it is null.
func (l Layers) EffectiveValue(name string) (string, bool) {
	raw, src, ok := l.rawValue(name)
	if !ok {
		return "", false
	}
	if k, known := l.Static.schema.lookupAny(name); known && src != kmsg.ConfigSourceDefaultConfig {
		if c, err := k.Canonical(raw); err == nil {
			return c, true
		}
	}
	return raw, true
}

// configSynonyms is Kafka's ConfigHelper.configSynonyms: every layer's
// value for each synonym, layer by layer, then cut to start at name.
func (l Layers) configSynonyms(name string, synonyms []string, sensitive bool) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	var out []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	add := func(lookup func(string) (string, bool), src kmsg.ConfigSource) {
		for _, s := range synonyms {
			v, ok := lookup(s)
			if !ok {
				continue
			}
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name = s
			if !sensitive {
				syn.Value = kmsg.StringPtr(v)
			}
			syn.Source = src
			out = append(out, syn)
		}
	}
	fromMap := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	add(fromMap(l.DynamicBroker), kmsg.ConfigSourceDynamicBrokerConfig)
	add(fromMap(l.DynamicDefault), kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	add(fromMap(l.Static.Raw), kmsg.ConfigSourceStaticBrokerConfig)
	add(l.staticDefault, kmsg.ConfigSourceDefaultConfig)
	for i := range out {
		if out[i].Name == name {
			return out[i:]
		}
	}
	return nil
}

// brokerKeyType returns the type Kafka's KafkaConfig.configType gives name:
// its own, a dynamic-only key's, or that of the key a listener override
// stands for; false when Kafka does not know the key.
func (s *Schema) brokerKeyType(name string) (cfgdef.Type, *BrokerKey, bool) {
	k, ok := s.lookupAny(name)
	if !ok {
		return cfgdef.TypeUnknown, nil, false
	}
	return k.Type, k, true
}

// isDynamic reports whether name is in Kafka's ALL_DYNAMIC_CONFIGS.
func (s *Schema) isDynamic(name string) bool {
	if k, ok := s.byName[name]; ok {
		return k.Mode != ReadOnly
	}
	_, ok := s.dynamic[name]
	return ok
}

// DescribeOptions are the request-wide flags of DescribeConfigs.
type DescribeOptions struct {
	// Names restricts the answer to these keys; empty means all. Unknown
	// names are left out, as Kafka does.
	Names                []string
	IncludeSynonyms      bool
	IncludeDocumentation bool
}

func (o DescribeOptions) wants(name string) bool {
	if len(o.Names) == 0 {
		return true
	}
	for _, n := range o.Names {
		if n == name {
			return true
		}
	}
	return false
}

// DescribeBroker returns this broker's configs as DescribeConfigs does for
// resource name "<node id>" (perBroker) or "" (the cluster-wide defaults:
// only keys set as dynamic defaults). Entries are sorted by name.
func (l Layers) DescribeBroker(perBroker bool, opts DescribeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	schema := l.Static.schema
	names := map[string]bool{}
	if perBroker {
		for _, k := range schema.keys {
			if !k.Internal {
				names[k.Name] = true
			}
		}
		for n := range l.Static.Raw {
			names[n] = true
		}
		for n := range l.DynamicDefault {
			names[n] = true
		}
		for n := range l.DynamicBroker {
			names[n] = true
		}
	} else {
		for n := range l.DynamicDefault {
			names[n] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		if opts.wants(n) {
			sorted = append(sorted, n)
		}
	}
	sort.Strings(sorted)

	out := make([]kmsg.DescribeConfigsResponseResourceConfig, 0, len(sorted))
	for _, name := range sorted {
		typ, key, known := schema.brokerKeyType(name)
		sensitive := !known || typ == cfgdef.TypePassword
		e := kmsg.NewDescribeConfigsResponseResourceConfig()
		e.Name = name
		e.IsSensitive = sensitive
		e.ReadOnly = !schema.isDynamic(name)
		e.ConfigType = kmsg.ConfigType(typ)
		if !sensitive {
			var v string
			var ok bool
			if perBroker {
				v, ok = l.EffectiveValue(name)
			} else {
				v, ok = l.DynamicDefault[name]
			}
			if ok {
				e.Value = kmsg.StringPtr(v)
			}
		}
		synonyms := l.configSynonyms(name, brokerSynonyms(name), sensitive)
		if !perBroker {
			kept := synonyms[:0]
			for _, s := range synonyms {
				if s.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig {
					kept = append(kept, s)
				}
			}
			synonyms = kept
		}
		e.Source = kmsg.ConfigSourceDefaultConfig
		if len(synonyms) > 0 {
			e.Source = synonyms[0].Source
		}
		if opts.IncludeSynonyms {
			e.ConfigSynonyms = synonyms
		}
		if opts.IncludeDocumentation && known {
			e.Documentation = kmsg.StringPtr(key.Doc)
		}
		out = append(out, e)
	}
	return out
}

// topicBase is the topic-keyed defaults this broker gives its topics, from
// its effective configuration (dynamic configs included).
func (l Layers) topicBase() map[string]string {
	base, err := cfgdef.TopicDefaultsFromBroker(l.EffectiveValue)
	if err != nil {
		// Values that reached the layers were validated; a failure here
		// means a dynamic value that no longer parses, which Kafka would
		// also ignore in favour of the topic default.
		return nil
	}
	return base
}

// TopicDefaults returns the topic-keyed defaults this broker applies to
// topics (see cfgdef.TopicDefaultsFromBroker).
func (l Layers) TopicDefaults() map[string]string { return l.topicBase() }

// LogConfigFor returns a topic's effective cfgdef.Topic: its overrides
// on top of this broker's defaults (dynamic broker configs included, with
// log.roll.hours and the like converted) on top of Kafka's topic defaults.
func (l Layers) LogConfigFor(overrides map[string]string) (cfgdef.Topic, error) {
	return cfgdef.BuildTopic(l.topicBase(), overrides)
}

// DescribeTopic returns a topic's configs as DescribeConfigs does, given
// its overrides (the image's ConfigResource{Topic, name} map). Entries are
// sorted by name.
func (l Layers) DescribeTopic(overrides map[string]string, opts DescribeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	base := l.topicBase()
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range cfgdef.TopicKeys() {
		override, overridden := overrides[d.Name]
		if d.Internal && !overridden {
			continue
		}
		if !opts.wants(d.Name) {
			continue
		}
		sensitive := d.Type == cfgdef.TypePassword
		e := kmsg.NewDescribeConfigsResponseResourceConfig()
		e.Name = d.Name
		e.IsSensitive = sensitive
		e.ReadOnly = false
		e.ConfigType = kmsg.ConfigType(d.Type)
		raw, ok := override, overridden
		if !ok {
			raw, ok = base[d.Name]
		}
		if !ok && d.HasValue() {
			raw, ok = d.Default, true
		}
		if ok && !sensitive {
			text := raw
			if c, err := d.Canonical(raw); err == nil {
				text = c
			}
			e.Value = kmsg.StringPtr(text)
		}
		var synonyms []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
		if overridden {
			s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			s.Name = d.Name
			s.Value = e.Value
			s.Source = kmsg.ConfigSourceDynamicTopicConfig
			synonyms = append(synonyms, s)
		}
		if len(d.Synonyms) > 0 {
			first := d.Synonyms[0].Name
			synonyms = append(synonyms, l.configSynonyms(first, brokerSynonyms(first), sensitive)...)
		}
		e.Source = kmsg.ConfigSourceDefaultConfig
		if len(synonyms) > 0 {
			e.Source = synonyms[0].Source
		}
		if opts.IncludeSynonyms {
			e.ConfigSynonyms = synonyms
		}
		if opts.IncludeDocumentation {
			e.Documentation = kmsg.StringPtr(d.Doc)
		}
		out = append(out, e)
	}
	return out
}

// CreateTopicConfigs is the Configs list of a CreateTopics v5+ response for
// a topic created with the given configs, as Kafka's controller builds it:
// each key from the topic configs, else this node's dynamic configs, the
// cluster defaults, the static file (raw text, hours and minutes converted)
// or the topic default; never read-only, sensitive values hidden, sorted by
// name, internal keys only when set.
func (l Layers) CreateTopicConfigs(topicConfigs map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, d := range cfgdef.TopicKeys() {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = d.Name
		c.IsSensitive = d.Type == cfgdef.TypePassword
		value, source, ok := l.createTopicValue(d, topicConfigs)
		if d.Internal && source != kmsg.ConfigSourceDynamicTopicConfig {
			continue
		}
		c.Source = int8(source)
		if ok && !c.IsSensitive {
			c.Value = kmsg.StringPtr(value)
		}
		out = append(out, c)
	}
	return out
}

func (l Layers) createTopicValue(d cfgdef.TopicKey, topicConfigs map[string]string) (string, kmsg.ConfigSource, bool) {
	if v, ok := topicConfigs[d.Name]; ok {
		return v, kmsg.ConfigSourceDynamicTopicConfig, true
	}
	layers := []struct {
		m   map[string]string
		src kmsg.ConfigSource
	}{
		{l.DynamicBroker, kmsg.ConfigSourceDynamicBrokerConfig},
		{l.DynamicDefault, kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		{l.Static.Raw, kmsg.ConfigSourceStaticBrokerConfig},
	}
	for _, layer := range layers {
		for _, syn := range d.Synonyms {
			if raw, ok := layer.m[syn.Name]; ok {
				v, err := syn.ToTopicValue(raw)
				if err != nil {
					v = raw
				}
				return v, layer.src, true
			}
		}
	}
	if !d.HasValue() {
		return "", kmsg.ConfigSourceDefaultConfig, false
	}
	return d.Default, kmsg.ConfigSourceDefaultConfig, true
}

// DescribeGroup returns a group's configs as DescribeConfigs does (Kafka's
// ConfigHelper.createGroupConfigEntry), given its overrides (the image's
// ConfigResource{Group, name} map): every group key with the group's
// value, else the broker's value of its synonym (group.consumer.* and the
// like), else the key's default. Synonyms are the group's own value
// (GROUP_CONFIG) and then the broker synonym in every layer that sets it,
// or, for a key without one, its default (DEFAULT_CONFIG). An override
// Kafka does not know is listed as sensitive with a null value, as for
// brokers. Entries are sorted by name.
func (l Layers) DescribeGroup(overrides map[string]string, opts DescribeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	keys := map[string]*cfgdef.GroupKey{}
	all := cfgdef.GroupKeys()
	for i := range all {
		keys[all[i].Name] = &all[i]
	}
	names := make([]string, 0, len(keys)+len(overrides))
	for n := range keys {
		names = append(names, n)
	}
	for n := range overrides {
		if keys[n] == nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)

	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, name := range names {
		if !opts.wants(name) {
			continue
		}
		d := keys[name]
		override, overridden := overrides[name]
		sensitive := d == nil || d.Type == cfgdef.TypePassword
		e := kmsg.NewDescribeConfigsResponseResourceConfig()
		e.Name = name
		e.IsSensitive = sensitive
		e.ReadOnly = false
		e.ConfigType = kmsg.ConfigType(cfgdef.TypeUnknown)
		if d != nil {
			e.ConfigType = kmsg.ConfigType(d.Type)
		}
		if !sensitive {
			raw, ok := override, overridden
			if !ok && d.BrokerSynonym != "" {
				raw, ok = l.EffectiveValue(d.BrokerSynonym)
			}
			if !ok && d.HasValue() {
				raw, ok = d.Default, true
			}
			if ok {
				if c, err := d.Canonical(raw); err == nil {
					raw = c
				}
				e.Value = kmsg.StringPtr(raw)
			}
		}
		var synonyms []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
		if overridden {
			s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			s.Name = name
			s.Value = e.Value
			s.Source = kmsg.ConfigSourceGroupConfig
			synonyms = append(synonyms, s)
		}
		switch {
		case d == nil:
		case d.BrokerSynonym != "":
			synonyms = append(synonyms, l.configSynonyms(d.BrokerSynonym, brokerSynonyms(d.BrokerSynonym), sensitive)...)
		case d.HasValue():
			s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			s.Name = name
			if !sensitive {
				s.Value = kmsg.StringPtr(d.Default)
			}
			s.Source = kmsg.ConfigSourceDefaultConfig
			synonyms = append(synonyms, s)
		}
		e.Source = kmsg.ConfigSourceDefaultConfig
		if len(synonyms) > 0 {
			e.Source = synonyms[0].Source
		}
		if opts.IncludeSynonyms {
			e.ConfigSynonyms = synonyms
		}
		if opts.IncludeDocumentation && d != nil {
			e.Documentation = kmsg.StringPtr(d.Doc)
		}
		out = append(out, e)
	}
	return out
}

// GroupConfig is a group's effective configuration (its overrides on top
// of this broker's group.* settings, dynamic ones included); false when
// the group has no dynamic configs, and then the coordinator's own
// settings apply, as in Kafka's GroupConfigManager.
func (l Layers) GroupConfig(overrides map[string]string) (cfgdef.Group, bool, error) {
	if len(overrides) == 0 {
		return cfgdef.Group{}, false, nil
	}
	g, err := cfgdef.EvaluateGroup(overrides, l.EffectiveValue)
	if err != nil {
		return cfgdef.Group{}, false, err
	}
	return g, true, nil
}
