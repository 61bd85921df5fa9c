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
