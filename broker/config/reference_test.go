package config

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The testdata files were produced by Apache Kafka 4.3.1 (combined node
// started with testdata/kafka-4.3.1-server.properties, then Admin
// describeConfigs with synonyms for broker "1" and for a topic created with
// max.message.bytes=2000). Kafka's format step also wrote the cluster
// default min.insync.replicas=1. One line per entry: name, value, source,
// sensitive, read-only, type, synonyms.
func renderDescribe(entries []kmsg.DescribeConfigsResponseResourceConfig) string {
	sources := map[kmsg.ConfigSource]string{1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 8: "GROUP_CONFIG"}
	types := map[kmsg.ConfigType]string{0: "UNKNOWN", 1: "BOOLEAN", 2: "STRING", 3: "INT", 4: "SHORT", 5: "LONG", 6: "DOUBLE", 7: "LIST", 8: "CLASS", 9: "PASSWORD"}
	var b strings.Builder
	for _, e := range entries {
		var syn strings.Builder
		for _, s := range e.ConfigSynonyms {
			fmt.Fprintf(&syn, "%s:%s=%s;", sources[s.Source], s.Name, str(s.Value))
		}
		value := str(e.Value)
		if value == "<null>" {
			value = "null"
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\t%v\t%v\t%s\t%s\n", e.Name, value, sources[e.Source], e.IsSensitive, e.ReadOnly, types[e.ConfigType], strings.ReplaceAll(syn.String(), "=<null>;", "=null;"))
	}
	return b.String()
}

// loadReference loads testdata/kafka-4.3.1-server.properties with extra
// overrides.
func loadReference(t *testing.T, overrides map[string]string) *Broker {
	t.Helper()
	text, err := os.ReadFile("testdata/kafka-4.3.1-server.properties")
	if err != nil {
		t.Fatal(err)
	}
	props, err := ParseProperties(string(text))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := Load(props, overrides)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// matchesFile compares entries, rendered, with a testdata file line by line.
func matchesFile(t *testing.T, file string, got []kmsg.DescribeConfigsResponseResourceConfig) {
	t.Helper()
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	wantLines := strings.Split(strings.TrimSpace(string(want)), "\n")
	gotLines := strings.Split(strings.TrimSpace(renderDescribe(got)), "\n")
	if len(wantLines) != len(gotLines) {
		t.Errorf("%s: %d entries, Kafka has %d", file, len(gotLines), len(wantLines))
	}
	for i := 0; i < len(wantLines) && i < len(gotLines); i++ {
		if wantLines[i] != gotLines[i] {
			t.Errorf("%s line %d:\n got  %s\n want %s", file, i+1, gotLines[i], wantLines[i])
		}
	}
}

func TestDescribeMatchesKafka431(t *testing.T) {
	l := Layers{Static: loadReference(t, nil), DynamicDefault: map[string]string{"min.insync.replicas": "1"}}
	matchesFile(t, "testdata/kafka-4.3.1-describe-broker.tsv", l.DescribeBroker(true, DescribeOptions{IncludeSynonyms: true}))
	matchesFile(t, "testdata/kafka-4.3.1-describe-topic.tsv", l.DescribeTopic(map[string]string{"max.message.bytes": "2000"}, DescribeOptions{IncludeSynonyms: true}))
}

// testdata/kafka-4.3.1-describe-group.tsv is Apache Kafka 4.3.1's
// DescribeConfigs (with synonyms) of group ref-g, which does not exist as
// a group, on a node whose server.properties set
// group.consumer.session.timeout.ms=50000, after kafka-configs set the
// cluster default group.consumer.assignment.interval.ms=2000 and the
// group's consumer.session.timeout.ms=55000,
// share.isolation.level=read_committed and
// share.auto.offset.reset=by_duration:PT1H. Only the group.* keys of the
// server.properties matter to a group's answer.
func TestDescribeGroupMatchesKafka431(t *testing.T) {
	l := Layers{
		Static:         loadReference(t, map[string]string{"group.consumer.session.timeout.ms": "50000"}),
		DynamicDefault: map[string]string{"group.consumer.assignment.interval.ms": "2000"},
	}
	overrides := map[string]string{
		"consumer.session.timeout.ms": "55000",
		"share.isolation.level":       "read_committed",
		"share.auto.offset.reset":     "by_duration:PT1H",
	}
	matchesFile(t, "testdata/kafka-4.3.1-describe-group.tsv", l.DescribeGroup(overrides, DescribeOptions{IncludeSynonyms: true}))
}
