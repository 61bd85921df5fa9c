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
	sources := map[kmsg.ConfigSource]string{1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG"}
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

func TestDescribeMatchesKafka431(t *testing.T) {
	text, err := os.ReadFile("testdata/kafka-4.3.1-server.properties")
	if err != nil {
		t.Fatal(err)
	}
	props, err := ParseProperties(string(text))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := Load(props, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := Layers{Static: b, DynamicDefault: map[string]string{"min.insync.replicas": "1"}}
	for _, tc := range []struct {
		file string
		got  []kmsg.DescribeConfigsResponseResourceConfig
	}{
		{"testdata/kafka-4.3.1-describe-broker.tsv", l.DescribeBroker(true, DescribeOptions{IncludeSynonyms: true})},
		{"testdata/kafka-4.3.1-describe-topic.tsv", l.DescribeTopic(map[string]string{"max.message.bytes": "2000"}, DescribeOptions{IncludeSynonyms: true})},
	} {
		want, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		wantLines := strings.Split(strings.TrimSpace(string(want)), "\n")
		gotLines := strings.Split(strings.TrimSpace(renderDescribe(tc.got)), "\n")
		if len(wantLines) != len(gotLines) {
			t.Errorf("%s: %d entries, Kafka has %d", tc.file, len(gotLines), len(wantLines))
		}
		for i := 0; i < len(wantLines) && i < len(gotLines); i++ {
			if wantLines[i] != gotLines[i] {
				t.Errorf("%s line %d:\n got  %s\n want %s", tc.file, i+1, gotLines[i], wantLines[i])
			}
		}
	}
}
