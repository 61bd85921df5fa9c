package config

import (
	"reflect"
	"testing"
)

func TestBuildLogConfigDefaultsMatchDefaultLogConfig(t *testing.T) {
	got, err := BuildTopic(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := DefaultTopic(); !reflect.DeepEqual(got, want) {
		t.Fatalf("BuildTopic(nil, nil) =\n%+v\nwant DefaultTopic()\n%+v", got, want)
	}
}

func TestEveryTopicDefaultParses(t *testing.T) {
	for _, d := range TopicKeys() {
		if !d.HasValue() {
			continue
		}
		canonical, err := d.Canonical(d.Default)
		if err != nil {
			t.Errorf("%s: default %q does not validate: %v", d.Name, d.Default, err)
			continue
		}
		if canonical != d.Default {
			t.Errorf("%s: default %q prints back as %q", d.Name, d.Default, canonical)
		}
	}
}

func TestTopicConfigDefsSortedAndComplete(t *testing.T) {
	defs := TopicKeys()
	public := 0
	for i, d := range defs {
		if i > 0 && defs[i-1].Name >= d.Name {
			t.Errorf("not sorted at %s", d.Name)
		}
		if d.Doc == "" {
			t.Errorf("%s has no documentation", d.Name)
		}
		if !d.Internal {
			public++
		}
	}
	// Kafka 4.3's Topic has 33 non-internal topic keys.
	if public != 33 {
		t.Errorf("%d public topic keys, want 33", public)
	}
}

func TestBuildLogConfigOverridesAndBase(t *testing.T) {
	base := map[string]string{"retention.ms": "86400000", "segment.bytes": "2097152"}
	over := map[string]string{
		"segment.bytes":                         "1048576",
		"cleanup.policy":                        "compact, delete",
		"message.timestamp.type":                "LogAppendTime",
		"min.cleanable.dirty.ratio":             "0.25",
		"leader.replication.throttled.replicas": "0:1,1:2",
	}
	lc, err := BuildTopic(base, over)
	if err != nil {
		t.Fatal(err)
	}
	if lc.SegmentBytes != 1048576 || lc.RetentionMs != 86400000 || !lc.Compact || !lc.Delete ||
		!lc.LogAppendTime || lc.MinCleanableRatio != 0.25 ||
		!reflect.DeepEqual(lc.LeaderReplicationThrottledReplicas, []string{"0:1", "1:2"}) {
		t.Fatalf("unexpected Topic %+v", lc)
	}
	lc, err = BuildTopic(nil, map[string]string{"cleanup.policy": ""})
	if err != nil {
		t.Fatal(err)
	}
	if lc.Compact || lc.Delete {
		t.Fatalf("empty cleanup.policy should mean neither compact nor delete: %+v", lc)
	}
}

func TestValidateTopicConfigsErrors(t *testing.T) {
	cases := []struct {
		name      string
		base      map[string]string
		overrides map[string]string
		want      string
	}{
		{"unknown key", nil, map[string]string{"retention.mss": "1"}, "Unknown topic config name: retention.mss"},
		{"broker key is not a topic key", nil, map[string]string{"log.retention.ms": "1"}, "Unknown topic config name: log.retention.ms"},
		{"not a number", nil, map[string]string{"retention.ms": "abc"}, "Invalid value abc for configuration retention.ms: Not a number of type LONG"},
		{"int overflow", nil, map[string]string{"segment.bytes": "4294967296"}, "Invalid value 4294967296 for configuration segment.bytes: Not a number of type INT"},
		{"below range", nil, map[string]string{"segment.bytes": "100"}, "Invalid value 100 for configuration segment.bytes: Value must be at least 1048576"},
		{"retention below -1", nil, map[string]string{"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at least -1"},
		{"ratio above 1", nil, map[string]string{"min.cleanable.dirty.ratio": "1.5"}, "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"},
		{"bad boolean", nil, map[string]string{"preallocate": "yes"}, "Invalid value yes for configuration preallocate: Expected value to be either true or false"},
		{"bad enum", nil, map[string]string{"compression.type": "brotli"}, "Invalid value brotli for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"},
		{"enum is case sensitive", nil, map[string]string{"message.timestamp.type": "createtime"}, "Invalid value createtime for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"},
		{"bad policy", nil, map[string]string{"cleanup.policy": "delete,forever"}, "Invalid value forever for configuration cleanup.policy: String must be one of: compact, delete"},
		{"duplicate policy", nil, map[string]string{"cleanup.policy": "delete,delete"}, "Configuration 'cleanup.policy' values must not be duplicated."},
		{"empty policy item", nil, map[string]string{"cleanup.policy": "delete,"}, "Configuration 'cleanup.policy' values must not be empty."},
		{"gzip level", nil, map[string]string{"compression.gzip.level": "0"}, "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"},
		{"throttled replicas", nil, map[string]string{"leader.replication.throttled.replicas": "0:1,x"}, "Invalid value [0:1, x] for configuration leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."},
		{"compaction lag conflict", nil, map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"},
		{"compaction lag conflict with base", map[string]string{"max.compaction.lag.ms": "5"}, map[string]string{"min.compaction.lag.ms": "10"}, "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateTopic(tc.base, tc.overrides)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	ok := map[string]string{
		"retention.ms": " -1 ", "leader.replication.throttled.replicas": "*", "follower.replication.throttled.replicas": "",
		"compression.gzip.level": "-1", "preallocate": "TRUE", "min.cleanable.dirty.ratio": "1", "cleanup.policy": "",
	}
	if err := ValidateTopic(nil, ok); err != nil {
		t.Fatalf("valid overrides refused: %v", err)
	}
}

func TestTopicDefaultsFromBroker(t *testing.T) {
	broker := map[string]string{
		"log.retention.hours": "24",
		"log.roll.hours":      "168",
		"log.roll.ms":         "1000",
		"message.max.bytes":   "2000000",
		"log.cleanup.policy":  "compact , delete",
	}
	got, err := TopicDefaultsFromBroker(func(k string) (string, bool) { v, ok := broker[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"retention.ms":      "86400000",
		"segment.ms":        "1000",
		"max.message.bytes": "2000000",
		"cleanup.policy":    "compact,delete",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	broker = map[string]string{"log.retention.ms": "-5", "log.retention.minutes": "3"}
	got, _ = TopicDefaultsFromBroker(func(k string) (string, bool) { v, ok := broker[k]; return v, ok })
	if got["retention.ms"] != "-1" {
		t.Fatalf("negative log.retention.ms should become -1, got %q", got["retention.ms"])
	}
	broker = map[string]string{"log.retention.minutes": "3"}
	got, _ = TopicDefaultsFromBroker(func(k string) (string, bool) { v, ok := broker[k]; return v, ok })
	if got["retention.ms"] != "180000" {
		t.Fatalf("minutes conversion: got %q", got["retention.ms"])
	}
}
