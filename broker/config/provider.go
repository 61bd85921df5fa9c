package config

import (
	"log/slog"
	"sort"

	cfgdef "github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Provider answers the broker's configuration questions (broker.Configs)
// from the static configuration and the dynamic configs of an image.
type Provider struct {
	static *Broker
	log    *slog.Logger
}

// NewProvider returns a Provider over the static configuration.
func NewProvider(static *Broker, log *slog.Logger) *Provider {
	return &Provider{static: static, log: log}
}

func topicOverrides(img *metadata.Image, topic string) map[string]string {
	if img == nil {
		return nil
	}
	return img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: topic}]
}

// LogConfig is a topic's effective log configuration. Overrides were
// validated when committed, so an error here means a broker default
// changed underneath; the log keeps Kafka's defaults for that key set.
func (p *Provider) LogConfig(img *metadata.Image, topic string) cfgdef.Topic {
	cfg, err := LayersFromImage(p.static, img).LogConfigFor(topicOverrides(img, topic))
	if err != nil {
		p.log.Error("topic configuration is invalid; using defaults", "topic", topic, "err", err)
		return cfgdef.DefaultTopic()
	}
	return cfg
}

// DescribeTopic answers DescribeConfigs for a topic.
func (p *Provider) DescribeTopic(img *metadata.Image, topic string, keys []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	return LayersFromImage(p.static, img).DescribeTopic(topicOverrides(img, topic), DescribeOptions{Names: keys, IncludeSynonyms: synonyms, IncludeDocumentation: docs})
}

// DescribeBroker answers DescribeConfigs for this broker (brokerID >= 0)
// or the cluster-wide default (brokerID -1).
func (p *Provider) DescribeBroker(img *metadata.Image, brokerID int32, keys []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	return LayersFromImage(p.static, img).DescribeBroker(brokerID >= 0, DescribeOptions{Names: keys, IncludeSynonyms: synonyms, IncludeDocumentation: docs})
}

// CreateTopicConfigs is the per-topic Configs of a CreateTopics v5+ answer.
func (p *Provider) CreateTopicConfigs(img *metadata.Image, topic string, overrides map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	return LayersFromImage(p.static, img).CreateTopicConfigs(overrides)
}

func groupOverrides(img *metadata.Image, group string) map[string]string {
	if img == nil {
		return nil
	}
	return img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceGroup, Name: group}]
}

// DescribeGroup answers DescribeConfigs for a group. The group need not
// exist: Kafka describes any group name, with the broker's values.
func (p *Provider) DescribeGroup(img *metadata.Image, group string, keys []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	return LayersFromImage(p.static, img).DescribeGroup(groupOverrides(img, group), DescribeOptions{Names: keys, IncludeSynonyms: synonyms, IncludeDocumentation: docs})
}

// GroupConfig is a group's effective configuration; false when it has no
// dynamic configs. Overrides were validated when committed, so an error
// here means a broker setting changed underneath in a way clamping cannot
// mend; the group then runs with the broker's settings. It is called on
// every consumer-group heartbeat, so it logs only at debug level.
func (p *Provider) GroupConfig(img *metadata.Image, group string) (cfgdef.Group, bool) {
	g, ok, err := LayersFromImage(p.static, img).GroupConfig(groupOverrides(img, group))
	if err != nil {
		p.log.Debug("group configuration is invalid; using the broker's settings", "group", group, "err", err)
		return cfgdef.Group{}, false
	}
	return g, ok
}

// DescribeClientMetrics answers DescribeConfigs for a client-metrics
// subscription (KIP-714) as Kafka's ConfigHelper does: its three keys,
// each with its value or default, sourced CLIENT_METRICS_CONFIG when set
// (then also its one synonym) and DEFAULT_CONFIG otherwise. Any name may
// be described, whether or not it has configs.
func (p *Provider) DescribeClientMetrics(img *metadata.Image, name string, keys []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	var overrides map[string]string
	if img != nil {
		overrides = img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceClientMetrics, Name: name}]
	}
	defs := cfgdef.ClientMetricsKeys()
	sort.Slice(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name })
	opts := DescribeOptions{Names: keys}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for i := range defs {
		d := &defs[i]
		if !opts.wants(d.Name) {
			continue
		}
		raw, set := overrides[d.Name]
		if !set {
			raw = d.Default
		}
		if c, err := d.Canonical(raw); err == nil {
			raw = c
		}
		e := kmsg.NewDescribeConfigsResponseResourceConfig()
		e.Name, e.Value = d.Name, kmsg.StringPtr(raw)
		e.ConfigType = kmsg.ConfigType(d.Type)
		e.Source = kmsg.ConfigSourceDefaultConfig
		if set {
			e.Source = kmsg.ConfigSourceClientMetricsConfig
			if synonyms {
				s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				s.Name, s.Value, s.Source = d.Name, kmsg.StringPtr(raw), kmsg.ConfigSourceClientMetricsConfig
				e.ConfigSynonyms = append(e.ConfigSynonyms, s)
			}
		}
		if docs {
			e.Documentation = kmsg.StringPtr(d.Doc)
		}
		out = append(out, e)
	}
	return out
}

// EffectiveGroupConfig is a group's configuration whether or not it has
// dynamic configs: its overrides on top of this broker's group.*
// settings (a share partition's leader reads the share.* keys from it).
func (p *Provider) EffectiveGroupConfig(img *metadata.Image, group string) cfgdef.Group {
	g, err := cfgdef.EvaluateGroup(groupOverrides(img, group), LayersFromImage(p.static, img).EffectiveValue)
	if err != nil {
		p.log.Debug("group configuration is invalid; using the broker's settings", "group", group, "err", err)
		g, _ = cfgdef.EvaluateGroup(nil, LayersFromImage(p.static, img).EffectiveValue)
	}
	return g
}
