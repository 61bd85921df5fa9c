package metadata

// Feature names and the levels this build runs: the image's Features are
// the finalized levels by name (FeatureLevelRecord). What UpdateFeatures
// accepts is the controller's decision (controller/features.go).

import (
	"fmt"
	"strconv"
	"strings"
)

const (
	// MetadataVersionFeature is the metadata.version feature name.
	MetadataVersionFeature = "metadata.version"
	// KRaftVersionFeature is the kraft.version feature name.
	KRaftVersionFeature = "kraft.version"
	// EligibleLeaderReplicasFeature is the KIP-966 feature; level 1 turns
	// eligible leader replicas on.
	EligibleLeaderReplicasFeature = "eligible.leader.replicas.version"

	// LatestMetadataVersion is metadata.version 4.3-IV0.
	LatestMetadataVersion int16 = 30
	// LatestKRaftVersion is the kraft.version Gregor runs (dynamic quorum).
	LatestKRaftVersion int16 = 1
)

// SupportedFeatures are the feature ranges this build implements. A
// feature's maximum rises only when its semantics are implemented: clients
// switch behaviour on finalized levels (transaction.version 2 turns on
// KIP-890, group.version 1 the KIP-848 protocol).
func SupportedFeatures() map[string][2]int16 {
	return map[string][2]int16{
		MetadataVersionFeature:        {7, LatestMetadataVersion},
		KRaftVersionFeature:           {0, LatestKRaftVersion},
		"transaction.version":         {0, 2},
		"group.version":               {0, 1},
		EligibleLeaderReplicasFeature: {0, 1},
		"share.version":               {0, 1},
		"streams.version":             {0, 1},
	}
}

// DefaultBootstrapFeatures are the feature levels a fresh node finalizes
// besides metadata.version and kraft.version, as Kafka 4.3's format does:
// group.version 1 turns on the KIP-848 consumer protocol, transaction.version
// 2 Transactions V2 (KIP-890 part 2), eligible.leader.replicas.version 1
// eligible leader replicas (KIP-966).
func DefaultBootstrapFeatures() map[string]int16 {
	return BootstrapFeatures(LatestMetadataVersion)
}

// BootstrapFeatures are the levels of the features besides metadata.version
// and kraft.version that Kafka's format finalizes with metadata.version mv
// (kafka-features version-mapping): group.version 1 from 4.0-IV0,
// transaction.version 2 from 4.0-IV2, eligible.leader.replicas.version 1
// from 4.1-IV0, share.version 1 (KIP-932 share groups) from 4.2-IV0,
// streams.version 1 (KIP-1071 streams groups) from 4.2-IV1. Features at
// level 0 are left out.
func BootstrapFeatures(mv int16) map[string]int16 {
	out := map[string]int16{}
	if mv >= 22 {
		out["group.version"] = 1
	}
	if mv >= 24 {
		out["transaction.version"] = 2
	}
	if mv >= 26 {
		out[EligibleLeaderReplicasFeature] = 1
	}
	if mv >= 28 {
		out["share.version"] = 1
	}
	if mv >= 29 {
		out["streams.version"] = 1
	}
	return out
}

// metadataVersionNames are Kafka's names of the metadata.version levels
// Kafka 4.3 knows, from 3.3-IV3 (7), the oldest Kafka 4 runs.
var metadataVersionNames = map[int16]string{
	7: "3.3-IV3", 8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0",
	13: "3.6-IV1", 14: "3.6-IV2", 15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3",
	19: "3.7-IV4", 20: "3.8-IV0", 21: "3.9-IV0", 22: "4.0-IV0", 23: "4.0-IV1", 24: "4.0-IV2",
	25: "4.0-IV3", 26: "4.1-IV0", 27: "4.1-IV1", 28: "4.2-IV0", 29: "4.2-IV1", 30: "4.3-IV0",
}

// MetadataVersionName is Kafka's name of metadata.version level mv
// ("3.9-IV0"), or the level as a number when Kafka has no name for it.
func MetadataVersionName(mv int16) string {
	if name, ok := metadataVersionNames[mv]; ok {
		return name
	}
	return strconv.Itoa(int(mv))
}

// ParseMetadataVersion parses a release version as kafka-storage format
// --release-version and kafka-features --metadata take it: a metadata.version
// name ("3.9-IV0") or a release ("3.9"), which means the release's last
// metadata.version ("4.0" is 4.0-IV3). ok is false for a version Kafka 4.3
// does not know.
func ParseMetadataVersion(s string) (mv int16, ok bool) {
	for level, name := range metadataVersionNames {
		release, _, _ := strings.Cut(name, "-")
		if name == s || release == s && level > mv {
			mv, ok = level, true
		}
	}
	return mv, ok
}

// FeatureDependencyViolation says why the feature levels in levels (every
// finalized feature, metadata.version included) may not be finalized
// together, or is "" when they may: eligible.leader.replicas.version 1 needs
// metadata.version 4.0-IV1 (kafka-features feature-dependencies lists no
// other dependency in Kafka 4.3).
func FeatureDependencyViolation(levels map[string]int16) string {
	const elrNeeds int16 = 23
	if elr := levels[EligibleLeaderReplicasFeature]; elr >= 1 && levels[MetadataVersionFeature] < elrNeeds {
		return fmt.Sprintf("%s %d requires %s at least %s (%d), and it would be %s (%d).",
			EligibleLeaderReplicasFeature, elr, MetadataVersionFeature, MetadataVersionName(elrNeeds), elrNeeds,
			MetadataVersionName(levels[MetadataVersionFeature]), levels[MetadataVersionFeature])
	}
	return ""
}
