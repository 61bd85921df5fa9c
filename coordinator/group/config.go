package group

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/coordinator/runtime"
)

// Migration policies for group.consumer.migration.policy.
const (
	MigrationDisabled      = "disabled"
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationBidirectional = "bidirectional"
)

// Config holds every broker setting the group coordinator honours, under
// Kafka's names. DefaultConfig returns Kafka 4.3's defaults.
type Config struct {
	// Classic protocol.
	MinSessionTimeoutMs          int32 // group.min.session.timeout.ms
	MaxSessionTimeoutMs          int32 // group.max.session.timeout.ms
	InitialRebalanceDelayMs      int32 // group.initial.rebalance.delay.ms
	MaxSize                      int32 // group.max.size
	ConsumerSessionTimeoutMs     int32 // group.consumer.session.timeout.ms
	ConsumerMinSessionTimeoutMs  int32 // group.consumer.min.session.timeout.ms
	ConsumerMaxSessionTimeoutMs  int32 // group.consumer.max.session.timeout.ms
	ConsumerHeartbeatIntervalMs  int32 // group.consumer.heartbeat.interval.ms
	ConsumerMinHeartbeatInterval int32 // group.consumer.min.heartbeat.interval.ms
	ConsumerMaxHeartbeatInterval int32 // group.consumer.max.heartbeat.interval.ms
	ConsumerMaxSize              int32 // group.consumer.max.size
	// ConsumerAssignors is group.consumer.assignors; the first is the default.
	ConsumerAssignors []string
	// ConsumerMigrationPolicy is group.consumer.migration.policy.
	ConsumerMigrationPolicy string
	// RebalanceProtocols is group.coordinator.rebalance.protocols.
	RebalanceProtocols []string

	// Share groups (KIP-932).
	ShareSessionTimeoutMs          int32 // group.share.session.timeout.ms
	ShareHeartbeatIntervalMs       int32 // group.share.heartbeat.interval.ms
	ShareMaxSize                   int32 // group.share.max.size
	ShareAssignmentIntervalMs      int32 // group.share.assignment.interval.ms
	ShareInitializeRetryIntervalMs int32 // group.share.initialize.retry.interval.ms
	// ShareAssignors is group.share.assignors (Kafka allows exactly one).
	ShareAssignors []string
	// ShareState is the share coordinator, which initializes and deletes
	// the share state of the partitions share groups consume; nil when
	// share groups are not served (no partition is then ever initialized,
	// so none is assigned).
	ShareState ShareState

	// Streams groups (KIP-1071).
	StreamsSessionTimeoutMs        int32 // group.streams.session.timeout.ms
	StreamsMinSessionTimeoutMs     int32 // group.streams.min.session.timeout.ms
	StreamsMaxSessionTimeoutMs     int32 // group.streams.max.session.timeout.ms
	StreamsHeartbeatIntervalMs     int32 // group.streams.heartbeat.interval.ms
	StreamsMinHeartbeatIntervalMs  int32 // group.streams.min.heartbeat.interval.ms
	StreamsMaxHeartbeatIntervalMs  int32 // group.streams.max.heartbeat.interval.ms
	StreamsMaxSize                 int32 // group.streams.max.size
	StreamsNumStandbyReplicas      int32 // group.streams.num.standby.replicas
	StreamsMaxStandbyReplicas      int32 // group.streams.max.standby.replicas
	StreamsInitialRebalanceDelayMs int32 // group.streams.initial.rebalance.delay.ms
	StreamsMinAssignmentIntervalMs int32 // group.streams.min.assignment.interval.ms
	StreamsMaxAssignmentIntervalMs int32 // group.streams.max.assignment.interval.ms
	// StreamsAssignmentIntervalMs is group.streams.assignment.interval.ms,
	// which Kafka lets kafka-configs change at run time: nil means the
	// static StreamsAssignmentIntervalMsStatic.
	StreamsAssignmentIntervalMs       func() int32
	StreamsAssignmentIntervalMsStatic int32

	// Offsets.
	OffsetsTopicNumPartitions       int32 // offsets.topic.num.partitions
	OffsetsTopicReplicationFactor   int16 // offsets.topic.replication.factor
	OffsetsTopicSegmentBytes        int32 // offsets.topic.segment.bytes
	OffsetsRetentionMinutes         int32 // offsets.retention.minutes
	OffsetsRetentionCheckIntervalMs int64 // offsets.retention.check.interval.ms
	OffsetMetadataMaxBytes          int32 // offset.metadata.max.bytes
	OffsetsCommitTimeoutMs          int32 // offsets.commit.timeout.ms

	// GroupConfigs looks up a group's dynamic configuration (Kafka's
	// GroupConfigManager, fed from GROUP config resources in the metadata
	// image); false when the group has none, and then the settings above
	// apply. nil means no group has any. It is called on heartbeats with
	// a shard's lock held, so it must be cheap and must not call into the
	// coordinator.
	GroupConfigs func(groupID string) (DynamicConfig, bool)

	// Logger receives the coordinator's logs; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. Tests pass a fake clock.
	Now func() time.Time
	// ExpiryNow decides when committed offsets have expired
	// (offsets.retention.minutes); nil means Now. cmd/gregor gives one
	// that a forward step of the wall clock cannot push ahead (as the log
	// manager's retention), so such a step never drops the offsets of a
	// group that is empty for a moment.
	ExpiryNow func() time.Time
}

// DynamicConfig is the part of a group's dynamic configuration that the
// coordinator applies: both fields are set, to the group's value or, when
// it sets none, the broker's group.consumer.* setting. Kafka applies them
// from a member's next heartbeat on: the interval it is told and the
// session deadline that heartbeat arms.
type DynamicConfig struct {
	ConsumerSessionTimeoutMs    int32 // consumer.session.timeout.ms
	ConsumerHeartbeatIntervalMs int32 // consumer.heartbeat.interval.ms
	ShareSessionTimeoutMs       int32 // share.session.timeout.ms
	ShareHeartbeatIntervalMs    int32 // share.heartbeat.interval.ms
	// ShareAssignmentIntervalMs is share.assignment.interval.ms, -1 when
	// the group does not set it (the broker's applies, read live).
	ShareAssignmentIntervalMs int32

	StreamsSessionTimeoutMs        int32 // streams.session.timeout.ms
	StreamsHeartbeatIntervalMs     int32 // streams.heartbeat.interval.ms
	StreamsNumStandbyReplicas      int32 // streams.num.standby.replicas
	StreamsInitialRebalanceDelayMs int32 // streams.initial.rebalance.delay.ms
	// StreamsAssignmentIntervalMs is streams.assignment.interval.ms, -1
	// when the group does not set it (the broker's applies, read live).
	StreamsAssignmentIntervalMs int32
}

// streamsSettings are the settings a streams group runs with now: its own
// dynamic configs where it has any, else the broker's (Kafka's
// GroupMetadataManager.streamsGroup*).
type streamsSettings struct {
	sessionTimeoutMs, heartbeatIntervalMs, numStandby, initialDelayMs, assignmentIntervalMs int32
}

func (c *Config) streamsSettings(groupID string) streamsSettings {
	st := streamsSettings{
		sessionTimeoutMs: c.StreamsSessionTimeoutMs, heartbeatIntervalMs: c.StreamsHeartbeatIntervalMs,
		numStandby: c.StreamsNumStandbyReplicas, initialDelayMs: c.StreamsInitialRebalanceDelayMs,
		assignmentIntervalMs: c.StreamsAssignmentIntervalMsStatic,
	}
	if c.StreamsAssignmentIntervalMs != nil {
		st.assignmentIntervalMs = c.StreamsAssignmentIntervalMs()
	}
	if c.GroupConfigs != nil {
		if d, ok := c.GroupConfigs(groupID); ok {
			st.sessionTimeoutMs, st.heartbeatIntervalMs = d.StreamsSessionTimeoutMs, d.StreamsHeartbeatIntervalMs
			st.numStandby, st.initialDelayMs = d.StreamsNumStandbyReplicas, d.StreamsInitialRebalanceDelayMs
			if d.StreamsAssignmentIntervalMs >= 0 {
				st.assignmentIntervalMs = d.StreamsAssignmentIntervalMs
			}
		}
	}
	return st
}

// consumerSessionTimeoutMs is the session timeout of a consumer-protocol
// member of group (Kafka's GroupMetadataManager.consumerGroupSessionTimeoutMs).
func (c *Config) consumerSessionTimeoutMs(groupID string) int32 {
	if c.GroupConfigs != nil {
		if d, ok := c.GroupConfigs(groupID); ok {
			return d.ConsumerSessionTimeoutMs
		}
	}
	return c.ConsumerSessionTimeoutMs
}

// consumerHeartbeatIntervalMs is the heartbeat interval a consumer-protocol
// member of group is told.
func (c *Config) consumerHeartbeatIntervalMs(groupID string) int32 {
	if c.GroupConfigs != nil {
		if d, ok := c.GroupConfigs(groupID); ok {
			return d.ConsumerHeartbeatIntervalMs
		}
	}
	return c.ConsumerHeartbeatIntervalMs
}

// shareSessionTimeoutMs is the session timeout of a share group member
// (Kafka's GroupMetadataManager.shareGroupSessionTimeoutMs).
func (c *Config) shareSessionTimeoutMs(groupID string) int32 {
	if c.GroupConfigs != nil {
		if d, ok := c.GroupConfigs(groupID); ok {
			return d.ShareSessionTimeoutMs
		}
	}
	return c.ShareSessionTimeoutMs
}

// shareHeartbeatIntervalMs is the heartbeat interval a share group member
// is told.
func (c *Config) shareHeartbeatIntervalMs(groupID string) int32 {
	if c.GroupConfigs != nil {
		if d, ok := c.GroupConfigs(groupID); ok {
			return d.ShareHeartbeatIntervalMs
		}
	}
	return c.ShareHeartbeatIntervalMs
}

// shareAssignmentIntervalMs is the least time between two target
// assignments of a share group.
func (c *Config) shareAssignmentIntervalMs(groupID string) int32 {
	if c.GroupConfigs != nil {
		if d, ok := c.GroupConfigs(groupID); ok && d.ShareAssignmentIntervalMs >= 0 {
			return d.ShareAssignmentIntervalMs
		}
	}
	return c.ShareAssignmentIntervalMs
}

// shareAssignor is the share assignor's name.
func (c *Config) shareAssignor() string {
	if len(c.ShareAssignors) > 0 {
		return c.ShareAssignors[0]
	}
	return AssignorSimple
}

// TopicSpec is __consumer_offsets as Kafka creates it: the offsets.topic.*
// settings, compacted, compression as the producer sent it (Kafka's
// GroupCoordinator.groupMetadataTopicConfigs).
func (c *Config) TopicSpec() runtime.TopicSpec {
	segmentBytes := c.OffsetsTopicSegmentBytes
	if segmentBytes <= 0 {
		segmentBytes = DefaultConfig().OffsetsTopicSegmentBytes
	}
	return runtime.TopicSpec{
		Name:              OffsetsTopic,
		Partitions:        c.OffsetsTopicNumPartitions,
		ReplicationFactor: c.OffsetsTopicReplicationFactor,
		Configs: [][2]string{
			{"cleanup.policy", "compact"},
			{"compression.type", "producer"},
			{"segment.bytes", strconv.Itoa(int(segmentBytes))},
		},
	}
}

// DefaultConfig returns Kafka 4.3's defaults.
func DefaultConfig() Config {
	return Config{
		MinSessionTimeoutMs:            6000,
		MaxSessionTimeoutMs:            1800000,
		InitialRebalanceDelayMs:        3000,
		MaxSize:                        1<<31 - 1,
		ConsumerSessionTimeoutMs:       45000,
		ConsumerMinSessionTimeoutMs:    45000,
		ConsumerMaxSessionTimeoutMs:    60000,
		ConsumerHeartbeatIntervalMs:    5000,
		ConsumerMinHeartbeatInterval:   5000,
		ConsumerMaxHeartbeatInterval:   15000,
		ConsumerMaxSize:                1<<31 - 1,
		ConsumerAssignors:              []string{AssignorUniform, AssignorRange},
		ConsumerMigrationPolicy:        MigrationBidirectional,
		RebalanceProtocols:             []string{"classic", "consumer", "streams"},
		ShareSessionTimeoutMs:          45000,
		ShareHeartbeatIntervalMs:       5000,
		ShareMaxSize:                   200,
		ShareAssignmentIntervalMs:      1000,
		ShareInitializeRetryIntervalMs: 30000,
		ShareAssignors:                 []string{AssignorSimple},

		StreamsSessionTimeoutMs:           45000,
		StreamsMinSessionTimeoutMs:        45000,
		StreamsMaxSessionTimeoutMs:        60000,
		StreamsHeartbeatIntervalMs:        5000,
		StreamsMinHeartbeatIntervalMs:     5000,
		StreamsMaxHeartbeatIntervalMs:     15000,
		StreamsMaxSize:                    2147483647,
		StreamsNumStandbyReplicas:         0,
		StreamsMaxStandbyReplicas:         2,
		StreamsInitialRebalanceDelayMs:    3000,
		StreamsAssignmentIntervalMsStatic: 1000,
		StreamsMinAssignmentIntervalMs:    0,
		StreamsMaxAssignmentIntervalMs:    15000,
		OffsetsTopicNumPartitions:         50,
		OffsetsTopicReplicationFactor:     3,
		OffsetsTopicSegmentBytes:          100 * 1024 * 1024,
		OffsetsRetentionMinutes:           7 * 24 * 60,
		OffsetsRetentionCheckIntervalMs:   600000,
		OffsetMetadataMaxBytes:            4096,
		OffsetsCommitTimeoutMs:            5000,
	}
}

// Validate checks the relations between settings that Kafka enforces at
// start-up, naming the offending key.
func (c *Config) Validate() error {
	switch {
	case c.OffsetsTopicNumPartitions < 1:
		return fmt.Errorf("offsets.topic.num.partitions must be at least 1, got %d", c.OffsetsTopicNumPartitions)
	case c.MinSessionTimeoutMs > c.MaxSessionTimeoutMs:
		return fmt.Errorf("group.min.session.timeout.ms (%d) must not exceed group.max.session.timeout.ms (%d)", c.MinSessionTimeoutMs, c.MaxSessionTimeoutMs)
	case c.InitialRebalanceDelayMs < 0:
		return fmt.Errorf("group.initial.rebalance.delay.ms must not be negative, got %d", c.InitialRebalanceDelayMs)
	case c.MaxSize < 1:
		return fmt.Errorf("group.max.size must be at least 1, got %d", c.MaxSize)
	case c.ConsumerMaxSize < 1:
		return fmt.Errorf("group.consumer.max.size must be at least 1, got %d", c.ConsumerMaxSize)
	case c.ConsumerSessionTimeoutMs < c.ConsumerMinSessionTimeoutMs || c.ConsumerSessionTimeoutMs > c.ConsumerMaxSessionTimeoutMs:
		return fmt.Errorf("group.consumer.session.timeout.ms (%d) must be within group.consumer.min.session.timeout.ms (%d) and group.consumer.max.session.timeout.ms (%d)", c.ConsumerSessionTimeoutMs, c.ConsumerMinSessionTimeoutMs, c.ConsumerMaxSessionTimeoutMs)
	case c.ConsumerHeartbeatIntervalMs < c.ConsumerMinHeartbeatInterval || c.ConsumerHeartbeatIntervalMs > c.ConsumerMaxHeartbeatInterval:
		return fmt.Errorf("group.consumer.heartbeat.interval.ms (%d) must be within group.consumer.min.heartbeat.interval.ms (%d) and group.consumer.max.heartbeat.interval.ms (%d)", c.ConsumerHeartbeatIntervalMs, c.ConsumerMinHeartbeatInterval, c.ConsumerMaxHeartbeatInterval)
	case c.ConsumerHeartbeatIntervalMs >= c.ConsumerSessionTimeoutMs:
		return fmt.Errorf("group.consumer.heartbeat.interval.ms (%d) must be less than group.consumer.session.timeout.ms (%d)", c.ConsumerHeartbeatIntervalMs, c.ConsumerSessionTimeoutMs)
	case len(c.ConsumerAssignors) == 0:
		return fmt.Errorf("group.consumer.assignors must name at least one assignor")
	case c.OffsetsRetentionMinutes < 1:
		return fmt.Errorf("offsets.retention.minutes must be at least 1, got %d", c.OffsetsRetentionMinutes)
	case c.OffsetsRetentionCheckIntervalMs < 1:
		return fmt.Errorf("offsets.retention.check.interval.ms must be at least 1, got %d", c.OffsetsRetentionCheckIntervalMs)
	case c.OffsetMetadataMaxBytes < 0:
		return fmt.Errorf("offset.metadata.max.bytes must not be negative, got %d", c.OffsetMetadataMaxBytes)
	}
	if err := c.validateStreams(); err != nil {
		return err
	}
	for _, a := range c.ConsumerAssignors {
		if normalizeAssignor(a) == "" {
			return fmt.Errorf("group.consumer.assignors: unknown assignor %q (supported: uniform, range)", a)
		}
	}
	switch strings.ToLower(c.ConsumerMigrationPolicy) {
	case MigrationDisabled, MigrationUpgrade, MigrationDowngrade, MigrationBidirectional:
	default:
		return fmt.Errorf("group.consumer.migration.policy: unknown policy %q", c.ConsumerMigrationPolicy)
	}
	return nil
}

// normalizeAssignor maps an assignor name or Kafka's class name to the
// short name, or "" when the assignor is unknown.
func normalizeAssignor(name string) string {
	switch strings.TrimSpace(name) {
	case AssignorUniform, "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
		"org.apache.kafka.coordinator.group.api.assignor.UniformAssignor":
		return AssignorUniform
	case AssignorRange, "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
		"org.apache.kafka.coordinator.group.api.assignor.RangeAssignor":
		return AssignorRange
	}
	return ""
}

func (c *Config) protocolEnabled(name string) bool {
	for _, p := range c.RebalanceProtocols {
		if strings.EqualFold(strings.TrimSpace(p), name) {
			return true
		}
	}
	return false
}

func (c *Config) migrationUpgradeAllowed() bool {
	p := strings.ToLower(c.ConsumerMigrationPolicy)
	return p == MigrationUpgrade || p == MigrationBidirectional
}

func (c *Config) offsetsRetention() time.Duration {
	return time.Duration(c.OffsetsRetentionMinutes) * time.Minute
}

// validateStreams is Kafka's start-up check of the group.streams.* keys,
// with its messages.
func (c *Config) validateStreams() error {
	const p = "group.streams."
	type bounded struct {
		name         string
		v, lo, hi    int32
		loKey, hiKey string
	}
	for _, b := range []bounded{
		{p + "heartbeat.interval.ms", c.StreamsHeartbeatIntervalMs, c.StreamsMinHeartbeatIntervalMs, c.StreamsMaxHeartbeatIntervalMs, p + "min.heartbeat.interval.ms", p + "max.heartbeat.interval.ms"},
		{p + "session.timeout.ms", c.StreamsSessionTimeoutMs, c.StreamsMinSessionTimeoutMs, c.StreamsMaxSessionTimeoutMs, p + "min.session.timeout.ms", p + "max.session.timeout.ms"},
		{p + "assignment.interval.ms", c.StreamsAssignmentIntervalMsStatic, c.StreamsMinAssignmentIntervalMs, c.StreamsMaxAssignmentIntervalMs, p + "min.assignment.interval.ms", p + "max.assignment.interval.ms"},
	} {
		switch {
		case b.hi < b.lo:
			return fmt.Errorf("%s must be greater than or equal to %s", b.hiKey, b.loKey)
		case b.v < b.lo:
			return fmt.Errorf("%s must be greater than or equal to %s", b.name, b.loKey)
		case b.v > b.hi:
			return fmt.Errorf("%s must be less than or equal to %s", b.name, b.hiKey)
		}
	}
	switch {
	case c.StreamsHeartbeatIntervalMs >= c.StreamsSessionTimeoutMs:
		return fmt.Errorf("%sheartbeat.interval.ms must be less than %ssession.timeout.ms", p, p)
	case c.StreamsNumStandbyReplicas > c.StreamsMaxStandbyReplicas:
		return fmt.Errorf("%snum.standby.replicas must be less than or equal to %smax.standby.replicas", p, p)
	}
	return nil
}
