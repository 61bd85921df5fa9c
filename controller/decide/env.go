package decide

import (
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gregorbroker/gregor/metadata"
)

// Env is what the decisions read besides the image and the request: the
// controller's configuration, its clock, its random source and its logger.
// The controller builds one from its Config when it starts; a test builds
// one with a fixed clock and random source. The decisions never change it,
// but Rand is not safe for concurrent use: the controller decides on its
// loop, one decision at a time.
type Env struct {
	// NodeID is the deciding controller's node id.
	NodeID int32
	// Schema validates configs and knows their defaults.
	Schema metadata.ConfigSchema
	// SupportedFeatures are the feature levels this controller supports,
	// by feature name ([min, max]).
	SupportedFeatures map[string][2]int16
	// DefaultPartitions and DefaultReplicationFactor are num.partitions
	// and default.replication.factor (CreateTopics' -1).
	DefaultPartitions        int32
	DefaultReplicationFactor int16
	// DisableTopicDeletion is delete.topic.enable=false.
	DisableTopicDeletion bool
	// DelegationTokens configures delegation tokens (none without a
	// secret key).
	DelegationTokens metadata.DelegationTokenConfig
	// Now is the clock.
	Now func() time.Time
	// Rand is the random source of placements and of new ids that are
	// not UUIDs.
	Rand *rand.Rand
	// Logger logs what a decision notes on the way (an unclean election).
	Logger *slog.Logger
}

func containsInt32(s []int32, v int32) bool { return slices.Contains(s, v) }
func withoutInt32(s []int32, v int32) []int32 {
	return slices.DeleteFunc(slices.Clone(s), func(x int32) bool { return x == v })
}
func strPtr(s string) *string { return &s }
func sortedInt32s(s []int32) []int32 {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
