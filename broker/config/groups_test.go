package config

import (
	"errors"
	"testing"

	cfgdef "github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every group key is described with its value, source, synonyms, type and
// documentation; an override Kafka does not know is hidden.
func TestDescribeGroupEveryKey(t *testing.T) {
	b := mustLoad(t, map[string]string{"group.share.heartbeat.interval.ms": "6000"})
	l := Layers{Static: b, DynamicBroker: map[string]string{"group.streams.assignment.interval.ms": "3000"}}
	overrides := map[string]string{
		"consumer.heartbeat.interval.ms": " 7000 ",
		"share.renew.acknowledge.enable": "FALSE",
		"made.up":                        "1",
	}
	entries := byName(l.DescribeGroup(overrides, DescribeOptions{IncludeSynonyms: true, IncludeDocumentation: true}))
	keys := cfgdef.GroupKeys()
	if len(entries) != len(keys)+1 {
		t.Errorf("%d entries, want the %d group keys and the unknown override", len(entries), len(keys))
	}
	for _, k := range keys {
		e, ok := entries[k.Name]
		if !ok {
			t.Errorf("%s missing", k.Name)
			continue
		}
		if e.ConfigType != kmsg.ConfigType(k.Type) || e.IsSensitive || e.ReadOnly || str(e.Documentation) != k.Doc {
			t.Errorf("%s: type %v sensitive %v read-only %v doc %q", k.Name, e.ConfigType, e.IsSensitive, e.ReadOnly, str(e.Documentation))
		}
		var want []syn
		value, source := k.Default, kmsg.ConfigSourceDefaultConfig
		switch k.Name {
		case "consumer.heartbeat.interval.ms":
			value, source = "7000", kmsg.ConfigSourceGroupConfig
			want = []syn{{k.Name, "7000", source}, {k.BrokerSynonym, "5000", kmsg.ConfigSourceDefaultConfig}}
		case "share.renew.acknowledge.enable":
			value, source = "false", kmsg.ConfigSourceGroupConfig
			want = []syn{{k.Name, "false", source}, {k.Name, "true", kmsg.ConfigSourceDefaultConfig}}
		case "share.heartbeat.interval.ms":
			value, source = "6000", kmsg.ConfigSourceStaticBrokerConfig
			want = []syn{{k.BrokerSynonym, "6000", source}, {k.BrokerSynonym, "5000", kmsg.ConfigSourceDefaultConfig}}
		case "streams.assignment.interval.ms":
			value, source = "3000", kmsg.ConfigSourceDynamicBrokerConfig
			want = []syn{{k.BrokerSynonym, "3000", source}, {k.BrokerSynonym, "1000", kmsg.ConfigSourceDefaultConfig}}
		default:
			name := k.BrokerSynonym
			if name == "" {
				name = k.Name
			}
			want = []syn{{name, k.Default, kmsg.ConfigSourceDefaultConfig}}
		}
		if str(e.Value) != value || e.Source != source {
			t.Errorf("%s = %s from %v, want %s from %v", k.Name, str(e.Value), e.Source, value, source)
		}
		checkSynonyms(t, e, want)
	}
	if e := entries["made.up"]; !e.IsSensitive || e.Value != nil || e.ConfigType != 0 || e.Source != kmsg.ConfigSourceGroupConfig ||
		len(e.ConfigSynonyms) != 1 || e.ConfigSynonyms[0].Value != nil || e.Documentation != nil {
		t.Errorf("unknown override %+v", e)
	}
	// Names filter the answer; without synonyms the source still is
	// theirs.
	got := l.DescribeGroup(overrides, DescribeOptions{Names: []string{"consumer.heartbeat.interval.ms", "nope"}})
	if len(got) != 1 || got[0].Source != kmsg.ConfigSourceGroupConfig || len(got[0].ConfigSynonyms) != 0 || got[0].Documentation != nil {
		t.Errorf("filtered describe %+v", got)
	}
}

func TestControllerSchemaGroups(t *testing.T) {
	s := NewControllerSchema(mustLoad(t, map[string]string{"group.consumer.max.heartbeat.interval.ms": "8000"}))
	cases := []struct {
		name     string
		resource string
		props    map[string]string
		code     int16
		msg      string
	}{
		{"default group", "", map[string]string{"consumer.heartbeat.interval.ms": "6000"}, 42, "Default group resources are not allowed."},
		{"unknown key", "g", map[string]string{"group.consumer.heartbeat.interval.ms": "6000"}, 40, "Unknown group config name: group.consumer.heartbeat.interval.ms"},
		{"not a number", "g", map[string]string{"consumer.session.timeout.ms": "soon"}, 40, "Invalid value soon for configuration consumer.session.timeout.ms: Not a number of type INT"},
		{"above the broker's maximum", "g", map[string]string{"consumer.heartbeat.interval.ms": "9000"}, 40, "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"},
		{"bad enum", "g", map[string]string{"share.isolation.level": "serializable"}, 40, "Invalid value serializable for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Validate(metadata.ConfigResourceGroup, tc.resource, tc.props)
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Code != tc.code || ve.Message != tc.msg {
				t.Fatalf("got %v, want %d %q", err, tc.code, tc.msg)
			}
		})
	}
	for _, ok := range []map[string]string{nil, {"consumer.heartbeat.interval.ms": "8000", "share.auto.offset.reset": "earliest"}} {
		if err := s.Validate(metadata.ConfigResourceGroup, "any-group", ok); err != nil {
			t.Errorf("%v refused: %v", ok, err)
		}
	}
	if s.IsList(metadata.ConfigResourceGroup, "consumer.heartbeat.interval.ms") {
		t.Error("a group key is a list")
	}
	if v, ok := s.Default(metadata.ConfigResourceGroup, "consumer.session.timeout.ms"); !ok || v != "45000" {
		t.Errorf("group default from the broker synonym: %q %v", v, ok)
	}
	if v, ok := s.Default(metadata.ConfigResourceGroup, "share.isolation.level"); !ok || v != "read_uncommitted" {
		t.Errorf("group default of its own: %q %v", v, ok)
	}
}

func TestProviderGroupConfig(t *testing.T) {
	p := NewProvider(mustLoad(t, map[string]string{"group.consumer.session.timeout.ms": "50000"}), nil)
	img := &metadata.Image{Configs: map[metadata.ConfigResource]map[string]string{
		{Type: metadata.ConfigResourceGroup, Name: "g"}: {"consumer.heartbeat.interval.ms": "6000"},
	}}
	g, ok := p.GroupConfig(img, "g")
	if !ok || g.ConsumerHeartbeatIntervalMs != 6000 || g.ConsumerSessionTimeoutMs != 50000 {
		t.Fatalf("configured group: %+v %v", g, ok)
	}
	if _, ok := p.GroupConfig(img, "other"); ok {
		t.Fatal("a group without configs has a configuration")
	}
	if _, ok := p.GroupConfig(nil, "g"); ok {
		t.Fatal("no image, yet a configuration")
	}
}
