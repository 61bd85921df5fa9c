package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/integration/node"
)

// kafka-configs --describe --all shows every retention and cleaner key
// with its value and source: a topic's own overrides, the broker's
// dynamic cluster defaults, and Kafka's defaults.
func TestRetentionAndCleanerKeysDescribedWithTheirSource(t *testing.T) {
	n := node.Start(t, "log.cleaner.threads=1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(n.Client())
	retention := "3600000"
	if resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": &retention}, "described"); err != nil || resp.Err != nil {
		t.Fatalf("creating the topic: %v %v", err, resp.Err)
	}
	backoff := "2000"
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.cleaner.backoff.ms", Value: &backoff}}); err != nil {
		t.Fatal(err)
	}
	topics, err := adm.DescribeTopicConfigs(ctx, "described")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := topics.On("described", nil)
	if err != nil {
		t.Fatal(err)
	}
	checkDescribed(t, "topic", tc.Configs, map[string]described{
		"retention.ms":              {"3600000", kmsg.ConfigSourceDynamicTopicConfig},
		"retention.bytes":           {"-1", kmsg.ConfigSourceDefaultConfig},
		"cleanup.policy":            {"delete", kmsg.ConfigSourceDefaultConfig},
		"delete.retention.ms":       {"86400000", kmsg.ConfigSourceDefaultConfig},
		"min.cleanable.dirty.ratio": {"0.5", kmsg.ConfigSourceDefaultConfig},
		"min.compaction.lag.ms":     {"0", kmsg.ConfigSourceDefaultConfig},
		"max.compaction.lag.ms":     {"9223372036854775807", kmsg.ConfigSourceDefaultConfig},
		"segment.ms":                {"604800000", kmsg.ConfigSourceDefaultConfig},
		"segment.jitter.ms":         {"0", kmsg.ConfigSourceDefaultConfig},
		"file.delete.delay.ms":      {"60000", kmsg.ConfigSourceDefaultConfig},
	})
	brokers, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	bc, err := brokers.On("1", nil)
	if err != nil {
		t.Fatal(err)
	}
	checkDescribed(t, "broker", bc.Configs, map[string]described{
		"log.cleaner.backoff.ms":              {"2000", kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		"log.cleaner.threads":                 {"1", kmsg.ConfigSourceStaticBrokerConfig},
		"log.cleaner.dedupe.buffer.size":      {"134217728", kmsg.ConfigSourceDefaultConfig},
		"log.cleaner.io.max.bytes.per.second": {"1.7976931348623157E308", kmsg.ConfigSourceDefaultConfig},
		"log.cleaner.enable":                  {"true", kmsg.ConfigSourceDefaultConfig},
		"log.retention.hours":                 {"168", kmsg.ConfigSourceDefaultConfig},
		"log.retention.bytes":                 {"-1", kmsg.ConfigSourceDefaultConfig},
		"log.retention.check.interval.ms":     {"300000", kmsg.ConfigSourceDefaultConfig},
		"log.cleanup.policy":                  {"delete", kmsg.ConfigSourceDefaultConfig},
	})
}

// described is a config's expected value and source.
type described struct {
	value  string
	source kmsg.ConfigSource
}

// checkDescribed finds every wanted key in configs with its value and
// source.
func checkDescribed(t *testing.T, what string, configs []kadm.Config, want map[string]described) {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range configs {
		if w, ok := want[c.Key]; ok {
			seen[c.Key] = true
			if c.MaybeValue() != w.value || c.Source != w.source {
				t.Errorf("%s %s = %q from %v, want %q from %v", what, c.Key, c.MaybeValue(), c.Source, w.value, w.source)
			}
		}
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("%s config %s not described", what, k)
		}
	}
}
