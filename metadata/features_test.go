package metadata

import (
	"maps"
	"testing"
)

// The names and defaults below are what kafka-features version-mapping of
// Kafka 4.3.1 prints.
func TestMetadataVersionsAsKafkaNamesThem(t *testing.T) {
	for s, want := range map[string]int16{
		"3.3-IV3": 7, "3.5-IV2": 11, "3.9": 21, "3.9-IV0": 21, "4.0": 25, "4.0-IV1": 23, "4.1": 27, "4.2": 29,
		"4.3": LatestMetadataVersion, "4.3-IV0": 30,
	} {
		if got, ok := ParseMetadataVersion(s); !ok || got != want {
			t.Errorf("ParseMetadataVersion(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "3.2", "4.4", "4.3-IV1", "4.4-IV0", "latest", "4"} {
		if got, ok := ParseMetadataVersion(s); ok {
			t.Errorf("ParseMetadataVersion(%q) = %d, want refused", s, got)
		}
	}
	if MetadataVersionName(25) != "4.0-IV3" || MetadataVersionName(99) != "99" {
		t.Errorf("names: %s %s", MetadataVersionName(25), MetadataVersionName(99))
	}
	for mv, want := range map[int16]map[string]int16{
		21: {},
		22: {"group.version": 1},
		23: {"group.version": 1},
		24: {"group.version": 1, "transaction.version": 2},
		25: {"group.version": 1, "transaction.version": 2},
		26: {"group.version": 1, "transaction.version": 2, EligibleLeaderReplicasFeature: 1},
		27: {"group.version": 1, "transaction.version": 2, EligibleLeaderReplicasFeature: 1},
		28: {"group.version": 1, "transaction.version": 2, EligibleLeaderReplicasFeature: 1, "share.version": 1},
		29: {"group.version": 1, "transaction.version": 2, EligibleLeaderReplicasFeature: 1, "share.version": 1, "streams.version": 1},
		30: {"group.version": 1, "transaction.version": 2, EligibleLeaderReplicasFeature: 1, "share.version": 1, "streams.version": 1},
	} {
		if got := BootstrapFeatures(mv); !maps.Equal(got, want) {
			t.Errorf("BootstrapFeatures(%d) = %v, want %v", mv, got, want)
		}
	}
	if !maps.Equal(DefaultBootstrapFeatures(), BootstrapFeatures(LatestMetadataVersion)) {
		t.Error("the default bootstrap features are not the latest release's")
	}
}

func TestFeatureDependencies(t *testing.T) {
	for _, c := range []struct {
		levels map[string]int16
		ok     bool
	}{
		{map[string]int16{MetadataVersionFeature: 21}, true},
		{map[string]int16{MetadataVersionFeature: 21, "transaction.version": 2, "group.version": 1}, true},
		{map[string]int16{MetadataVersionFeature: 22, EligibleLeaderReplicasFeature: 1}, false},
		{map[string]int16{MetadataVersionFeature: 23, EligibleLeaderReplicasFeature: 1}, true},
	} {
		if why := FeatureDependencyViolation(c.levels); (why == "") != c.ok {
			t.Errorf("%v: %q", c.levels, why)
		}
	}
}
