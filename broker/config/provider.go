package config

import (
	"log/slog"

	cfgdef "github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/controller"
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

func topicOverrides(img *controller.Image, topic string) map[string]string {
	if img == nil {
		return nil
	}
	return img.Configs[controller.ConfigResource{Type: controller.ConfigResourceTopic, Name: topic}]
}

// LogConfig is a topic's effective log configuration. Overrides were
// validated when committed, so an error here means a broker default
// changed underneath; the log keeps Kafka's defaults for that key set.
func (p *Provider) LogConfig(img *controller.Image, topic string) cfgdef.Topic {
	cfg, err := LayersFromImage(p.static, img).LogConfigFor(topicOverrides(img, topic))
	if err != nil {
		p.log.Error("topic configuration is invalid; using defaults", "topic", topic, "err", err)
		return cfgdef.DefaultTopic()
	}
	return cfg
}

// DescribeTopic answers DescribeConfigs for a topic.
func (p *Provider) DescribeTopic(img *controller.Image, topic string, keys []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	return LayersFromImage(p.static, img).DescribeTopic(topicOverrides(img, topic), DescribeOptions{Names: keys, IncludeSynonyms: synonyms, IncludeDocumentation: docs})
}

// DescribeBroker answers DescribeConfigs for this broker (brokerID >= 0)
// or the cluster-wide default (brokerID -1).
func (p *Provider) DescribeBroker(img *controller.Image, brokerID int32, keys []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	return LayersFromImage(p.static, img).DescribeBroker(brokerID >= 0, DescribeOptions{Names: keys, IncludeSynonyms: synonyms, IncludeDocumentation: docs})
}

// CreateTopicConfigs is the per-topic Configs of a CreateTopics v5+ answer.
func (p *Provider) CreateTopicConfigs(img *controller.Image, topic string, overrides map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	return LayersFromImage(p.static, img).CreateTopicConfigs(overrides)
}
