package share

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/gregorbroker/gregor/coordinator/runtime"
)

// StateTopic is the internal topic holding share state.
const StateTopic = "__share_group_state"

// Config is the share.coordinator.* settings the coordinator honours.
// DefaultConfig returns Kafka 4.3's defaults.
type Config struct {
	NumPartitions     int32 // share.coordinator.state.topic.num.partitions
	ReplicationFactor int16 // share.coordinator.state.topic.replication.factor
	MinISR            int16 // share.coordinator.state.topic.min.isr
	SegmentBytes      int32 // share.coordinator.state.topic.segment.bytes
	// UpdatesPerSnapshot is share.coordinator.snapshot.update.records.per.snapshot.
	UpdatesPerSnapshot int32
	WriteTimeoutMs     int32 // share.coordinator.write.timeout.ms
	// PruneIntervalMs is share.coordinator.state.topic.prune.interval.ms:
	// how often the records no share partition needs any more are deleted.
	PruneIntervalMs int32
	// ColdSnapshotIntervalMs is
	// share.coordinator.cold.partition.snapshot.interval.ms: a share
	// partition whose snapshot is older is snapshotted again at a prune,
	// so that it does not hold the pruning back.
	ColdSnapshotIntervalMs int32

	// Logger receives the coordinator's logs; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultConfig returns Kafka 4.3's defaults.
func DefaultConfig() Config {
	return Config{
		NumPartitions: 50, ReplicationFactor: 3, MinISR: 2, SegmentBytes: 100 * 1024 * 1024,
		UpdatesPerSnapshot: 500, WriteTimeoutMs: 5000, PruneIntervalMs: 300000, ColdSnapshotIntervalMs: 300000,
	}
}

// Validate checks the settings Kafka checks at start-up.
func (c *Config) Validate() error {
	switch {
	case c.NumPartitions < 1:
		return fmt.Errorf("share.coordinator.state.topic.num.partitions must be at least 1, got %d", c.NumPartitions)
	case c.UpdatesPerSnapshot < 0 || c.UpdatesPerSnapshot > 500:
		return fmt.Errorf("share.coordinator.snapshot.update.records.per.snapshot must be between [0, 500], got %d", c.UpdatesPerSnapshot)
	case c.WriteTimeoutMs < 1:
		return fmt.Errorf("share.coordinator.write.timeout.ms must be at least 1, got %d", c.WriteTimeoutMs)
	}
	return nil
}

// TopicSpec is __share_group_state as Kafka creates it
// (ShareCoordinatorService.shareGroupStateTopicConfigs): records deleted by
// the coordinator, never by retention.
func (c *Config) TopicSpec() runtime.TopicSpec {
	return runtime.TopicSpec{
		Name:              StateTopic,
		Partitions:        c.NumPartitions,
		ReplicationFactor: c.ReplicationFactor,
		Configs: [][2]string{
			{"cleanup.policy", "delete"},
			{"compression.type", "producer"},
			{"segment.bytes", strconv.Itoa(int(c.SegmentBytes))},
			{"min.insync.replicas", strconv.Itoa(int(c.MinISR))},
			{"retention.ms", "-1"},
		},
	}
}
