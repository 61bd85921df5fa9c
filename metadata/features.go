package metadata

// Feature names and the levels this build runs: the image's Features are
// the finalized levels by name (FeatureLevelRecord). What UpdateFeatures
// accepts is the controller's decision (controller/features.go).

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
		"share.version":               {0, 0},
		"streams.version":             {0, 0},
	}
}

// DefaultBootstrapFeatures are the feature levels a fresh node finalizes
// besides metadata.version and kraft.version, as Kafka 4.3's format does:
// group.version 1 turns on the KIP-848 consumer protocol, transaction.version
// 2 Transactions V2 (KIP-890 part 2), eligible.leader.replicas.version 1
// eligible leader replicas (KIP-966).
func DefaultBootstrapFeatures() map[string]int16 {
	return map[string]int16{"group.version": 1, "transaction.version": 2, EligibleLeaderReplicasFeature: 1}
}
