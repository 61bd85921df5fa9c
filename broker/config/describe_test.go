package config

import (
	"errors"
	"testing"

	cfgdef "github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func mustLoad(t *testing.T, extra map[string]string) *Broker {
	t.Helper()
	b, _, err := Load(EmbeddedDefaults(), extra)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func byName(entries []kmsg.DescribeConfigsResponseResourceConfig) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	m := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, e := range entries {
		m[e.Name] = e
	}
	return m
}

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

type syn struct {
	name, value string
	source      kmsg.ConfigSource
}

func checkSynonyms(t *testing.T, e kmsg.DescribeConfigsResponseResourceConfig, want []syn) {
	t.Helper()
	if len(e.ConfigSynonyms) != len(want) {
		t.Errorf("%s: %d synonyms %+v, want %+v", e.Name, len(e.ConfigSynonyms), e.ConfigSynonyms, want)
		return
	}
	for i, s := range e.ConfigSynonyms {
		if s.Name != want[i].name || str(s.Value) != want[i].value || s.Source != want[i].source {
			t.Errorf("%s synonym %d = %s=%s (%v), want %+v", e.Name, i, s.Name, str(s.Value), s.Source, want[i])
		}
	}
}

// Every key's default must come back from DescribeConfigs as Kafka prints it.
func TestDescribeBrokerDefaultsRoundTrip(t *testing.T) {
	b := mustLoad(t, nil)
	entries := byName(Layers{Static: b}.DescribeBroker(true, DescribeOptions{IncludeSynonyms: true, IncludeDocumentation: true}))
	for _, k := range b.Schema().Keys() {
		e, listed := entries[k.Name]
		if k.Internal {
			if listed {
				t.Errorf("internal key %s listed", k.Name)
			}
			continue
		}
		if !listed {
			t.Errorf("%s missing", k.Name)
			continue
		}
		if e.ConfigType != kmsg.ConfigType(k.Type) || e.IsSensitive != k.Sensitive() || e.ReadOnly != (k.Mode == ReadOnly) || str(e.Documentation) != k.Doc {
			t.Errorf("%s: type %v sensitive %v readonly %v doc %q", k.Name, e.ConfigType, e.IsSensitive, e.ReadOnly, str(e.Documentation))
		}
		if _, static := b.Raw[k.Name]; static {
			if e.Source != kmsg.ConfigSourceStaticBrokerConfig {
				t.Errorf("%s: source %v, want STATIC_BROKER_CONFIG", k.Name, e.Source)
			}
			continue
		}
		want := "<null>"
		if k.HasValue() && !k.Sensitive() {
			want = k.Default
		}
		if got := str(e.Value); got != want {
			t.Errorf("%s: value %s, want %s", k.Name, got, want)
		}
		if e.Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("%s: source %v, want DEFAULT_CONFIG", k.Name, e.Source)
		}
	}
	// Keys from the file that Kafka does not know are listed, hidden.
	b = mustLoad(t, map[string]string{"made.up": "1"})
	e := byName(Layers{Static: b}.DescribeBroker(true, DescribeOptions{}))["made.up"]
	if !e.IsSensitive || e.Value != nil || e.ConfigType != 0 || e.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("unknown key entry %+v", e)
	}
}

func TestDescribeBrokerSynonymPrecedence(t *testing.T) {
	b := mustLoad(t, map[string]string{"log.retention.ms": "1000", "log.retention.hours": "24", "ssl.keystore.password": "secret"})
	l := Layers{
		Static:         b,
		DynamicDefault: map[string]string{"log.retention.hours": "48", "log.cleaner.threads": "2"},
		DynamicBroker:  map[string]string{"log.cleaner.threads": "3", "log.roll.ms": "5000"},
	}
	entries := byName(l.DescribeBroker(true, DescribeOptions{IncludeSynonyms: true}))
	checkSynonyms(t, entries["log.retention.ms"], []syn{
		{"log.retention.ms", "1000", kmsg.ConfigSourceStaticBrokerConfig},
		{"log.retention.hours", "24", kmsg.ConfigSourceStaticBrokerConfig},
		{"log.retention.hours", "168", kmsg.ConfigSourceDefaultConfig},
	})
	checkSynonyms(t, entries["log.retention.hours"], []syn{
		{"log.retention.hours", "48", kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		{"log.retention.ms", "1000", kmsg.ConfigSourceStaticBrokerConfig},
		{"log.retention.hours", "24", kmsg.ConfigSourceStaticBrokerConfig},
		{"log.retention.hours", "168", kmsg.ConfigSourceDefaultConfig},
	})
	if e := entries["log.retention.hours"]; str(e.Value) != "48" || e.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("log.retention.hours: %s %v", str(e.Value), e.Source)
	}
	checkSynonyms(t, entries["log.cleaner.threads"], []syn{
		{"log.cleaner.threads", "3", kmsg.ConfigSourceDynamicBrokerConfig},
		{"log.cleaner.threads", "2", kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		{"log.cleaner.threads", "1", kmsg.ConfigSourceDefaultConfig},
	})
	if e := entries["ssl.keystore.password"]; e.Value != nil || !e.IsSensitive || e.ConfigSynonyms[0].Value != nil {
		t.Errorf("password exposed: %+v", e)
	}
	// Without IncludeSynonyms the source is still derived from them.
	e := byName(l.DescribeBroker(true, DescribeOptions{Names: []string{"log.roll.ms", "nope"}}))
	if len(e) != 1 || e["log.roll.ms"].Source != kmsg.ConfigSourceDynamicBrokerConfig || len(e["log.roll.ms"].ConfigSynonyms) != 0 || str(e["log.roll.ms"].Value) != "5000" {
		t.Errorf("filtered describe %+v", e)
	}
	// The cluster-default resource lists only the dynamic defaults.
	d := l.DescribeBroker(false, DescribeOptions{IncludeSynonyms: true})
	if len(d) != 2 || d[0].Name != "log.cleaner.threads" || str(d[0].Value) != "2" || d[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || len(d[0].ConfigSynonyms) != 1 {
		t.Errorf("cluster default describe %+v", d)
	}
}

func TestDescribeTopic(t *testing.T) {
	b := mustLoad(t, map[string]string{"log.retention.hours": "24", "log.segment.bytes": "2097152"})
	l := Layers{Static: b, DynamicDefault: map[string]string{"log.cleanup.policy": "compact"}}
	entries := byName(l.DescribeTopic(map[string]string{"max.message.bytes": "2000"}, DescribeOptions{IncludeSynonyms: true, IncludeDocumentation: true}))
	if len(entries) != 33 {
		t.Errorf("%d topic entries, want 33", len(entries))
	}
	for _, d := range cfgdef.TopicKeys() {
		if e, ok := entries[d.Name]; ok && (str(e.Documentation) != d.Doc || e.ReadOnly || e.ConfigType != kmsg.ConfigType(d.Type)) {
			t.Errorf("%s: %+v", d.Name, e)
		}
	}
	// retention.ms comes from log.retention.hours, and Kafka reports no
	// synonyms for it because log.retention.ms itself is not set.
	if e := entries["retention.ms"]; str(e.Value) != "86400000" || e.Source != kmsg.ConfigSourceDefaultConfig || len(e.ConfigSynonyms) != 0 {
		t.Errorf("retention.ms %+v", e)
	}
	if e := entries["segment.ms"]; str(e.Value) != "604800000" || len(e.ConfigSynonyms) != 0 {
		t.Errorf("segment.ms %+v", e)
	}
	checkSynonyms(t, entries["segment.bytes"], []syn{
		{"log.segment.bytes", "2097152", kmsg.ConfigSourceStaticBrokerConfig},
		{"log.segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig},
	})
	checkSynonyms(t, entries["max.message.bytes"], []syn{
		{"max.message.bytes", "2000", kmsg.ConfigSourceDynamicTopicConfig},
		{"message.max.bytes", "1048588", kmsg.ConfigSourceDefaultConfig},
	})
	if e := entries["cleanup.policy"]; str(e.Value) != "compact" || e.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("cleanup.policy %+v", e)
	}
	if e := entries["remote.storage.enable"]; str(e.Value) != "false" || e.Source != kmsg.ConfigSourceDefaultConfig || len(e.ConfigSynonyms) != 0 {
		t.Errorf("remote.storage.enable %+v", e)
	}
	lc, err := l.LogConfigFor(map[string]string{"max.message.bytes": "2000"})
	if err != nil || lc.RetentionMs != 86400000 || lc.SegmentBytes != 2097152 || !lc.Compact || lc.Delete || lc.MaxMessageBytes != 2000 {
		t.Errorf("LogConfigFor %+v %v", lc, err)
	}
}

func TestCreateTopicConfigs(t *testing.T) {
	b := mustLoad(t, map[string]string{"log.retention.hours": "24"})
	l := Layers{Static: b}
	got := map[string]kmsg.CreateTopicsResponseTopicConfig{}
	for _, c := range l.CreateTopicConfigs(map[string]string{"cleanup.policy": "compact"}) {
		got[c.Name] = c
	}
	if len(got) != 33 {
		t.Errorf("%d configs", len(got))
	}
	if c := got["retention.ms"]; str(c.Value) != "86400000" || c.Source != int8(kmsg.ConfigSourceStaticBrokerConfig) || c.ReadOnly {
		t.Errorf("retention.ms %+v", c)
	}
	if c := got["cleanup.policy"]; str(c.Value) != "compact" || c.Source != int8(kmsg.ConfigSourceDynamicTopicConfig) {
		t.Errorf("cleanup.policy %+v", c)
	}
	if c := got["segment.bytes"]; str(c.Value) != "1073741824" || c.Source != int8(kmsg.ConfigSourceDefaultConfig) {
		t.Errorf("segment.bytes %+v", c)
	}
}

func TestLayersFromImage(t *testing.T) {
	b := mustLoad(t, nil)
	img := &metadata.Image{Configs: map[metadata.ConfigResource]map[string]string{
		{Type: metadata.ConfigResourceBroker, Name: "1"}: {"log.cleaner.threads": "4"},
		{Type: metadata.ConfigResourceBroker, Name: ""}:  {"log.cleaner.threads": "2"},
		{Type: metadata.ConfigResourceBroker, Name: "2"}: {"log.cleaner.threads": "9"},
	}}
	l := LayersFromImage(b, img)
	if v, _ := l.EffectiveValue("log.cleaner.threads"); v != "4" {
		t.Errorf("effective %s", v)
	}
	if l := LayersFromImage(b, nil); l.DynamicBroker != nil {
		t.Errorf("nil image")
	}
}

func TestControllerSchema(t *testing.T) {
	s := NewControllerSchema(mustLoad(t, map[string]string{"log.cleaner.max.compaction.lag.ms": "100"}))
	cases := []struct {
		name     string
		typ      metadata.ConfigResourceType
		resource string
		props    map[string]string
		code     int16
		msg      string
	}{
		{"unknown topic key", metadata.ConfigResourceTopic, "t", map[string]string{"x": "1"}, 40, "Unknown topic config name: x"},
		{"bad topic value", metadata.ConfigResourceTopic, "t", map[string]string{"retention.ms": "abc"}, 40, "Invalid value abc for configuration retention.ms: Not a number of type LONG"},
		{"lag against broker default", metadata.ConfigResourceTopic, "t", map[string]string{"min.compaction.lag.ms": "200"}, 40, "conflict topic config setting min.compaction.lag.ms (200) > max.compaction.lag.ms (100)"},
		{"default topic", metadata.ConfigResourceTopic, "", nil, 42, "Default topic resources are not allowed."},
		{"bad topic name", metadata.ConfigResourceTopic, "a/b", nil, 17, "Topic name is invalid: 'a/b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"},
		{"non-dynamic", metadata.ConfigResourceBroker, "1", map[string]string{"log.dirs": "/x", "num.partitions": "2"}, 42, "Cannot update these configs dynamically: [log.dirs, num.partitions]"},
		{"security without prefix", metadata.ConfigResourceBroker, "1", map[string]string{"ssl.keystore.location": "/k"}, 42, "These security configs can be dynamically updated only per-listener using the listener prefix: [ssl.keystore.location]"},
		{"per-broker at default", metadata.ConfigResourceBroker, "", map[string]string{"listeners": "PLAINTEXT://:9092"}, 42, "Cannot update these configs at default cluster level, broker id must be specified: [listeners]"},
		{"bad dynamic value", metadata.ConfigResourceBroker, "1", map[string]string{"log.cleaner.threads": "-1"}, 42, "Invalid value -1 for configuration log.cleaner.threads: Value must be at least 0"},
		{"cleaner threads doubled twice", metadata.ConfigResourceBroker, "", map[string]string{"log.cleaner.threads": "3"}, 42, "Log cleaner threads cannot be increased to more than double the current value 1"},
		{"cleaner threads zero", metadata.ConfigResourceBroker, "", map[string]string{"log.cleaner.threads": "0"}, 42, "Log cleaner threads should be at least 1"},
		{"dedupe buffer of 1 MiB", metadata.ConfigResourceBroker, "", map[string]string{"log.cleaner.dedupe.buffer.size": "1048576"}, 42, "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."},
		{"dedupe buffer too small for two threads", metadata.ConfigResourceBroker, "1", map[string]string{"log.cleaner.threads": "2", "log.cleaner.dedupe.buffer.size": "2000000"}, 42, "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."},
		{"bad broker id", metadata.ConfigResourceBroker, "x", nil, 42, "Unable to parse broker name as a base 10 number."},
		{"negative broker id", metadata.ConfigResourceBroker, "-1", nil, 42, "Invalid negative broker ID."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Validate(tc.typ, tc.resource, tc.props)
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Code != tc.code || ve.Message != tc.msg {
				t.Fatalf("got %v, want %d %q", err, tc.code, tc.msg)
			}
		})
	}
	for _, ok := range []struct {
		typ      metadata.ConfigResourceType
		resource string
		props    map[string]string
	}{
		{metadata.ConfigResourceTopic, "t", map[string]string{"retention.ms": "1000", "cleanup.policy": "compact"}},
		{metadata.ConfigResourceBroker, "", map[string]string{"log.cleaner.threads": "2", "leader.replication.throttled.rate": "100", "unknown.key": "x"}},
		{metadata.ConfigResourceBroker, "1", map[string]string{"listener.name.plaintext.ssl.keystore.location": "/k", "max.connections": "5"}},
	} {
		if err := s.Validate(ok.typ, ok.resource, ok.props); err != nil {
			t.Errorf("%v %q %v refused: %v", ok.typ, ok.resource, ok.props, err)
		}
	}
	if !s.IsList(metadata.ConfigResourceTopic, "cleanup.policy") || s.IsList(metadata.ConfigResourceTopic, "retention.ms") ||
		!s.IsList(metadata.ConfigResourceBroker, "log.dirs") || s.IsList(metadata.ConfigResourceBroker, "num.partitions") {
		t.Errorf("IsList wrong")
	}
	if v, ok := s.Default(metadata.ConfigResourceTopic, "max.compaction.lag.ms"); !ok || v != "100" {
		t.Errorf("topic default %q %v", v, ok)
	}
	if v, ok := s.Default(metadata.ConfigResourceTopic, "segment.ms"); !ok || v != "604800000" {
		t.Errorf("topic default %q %v", v, ok)
	}
	if v, ok := s.Default(metadata.ConfigResourceBroker, "log.dirs"); !ok || v != "./gregor-data" {
		t.Errorf("broker default %q %v", v, ok)
	}
	if _, ok := s.Default(metadata.ConfigResourceBroker, "log.retention.ms"); ok {
		t.Errorf("null broker key has a default")
	}
}
