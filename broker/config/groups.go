package config

import (
	"log/slog"

	"github.com/gregorbroker/gregor/coordinator/group"
)

// GroupCoordinatorConfig maps the broker config to the group
// coordinator's settings.
func (cfg *Broker) GroupCoordinatorConfig(logger *slog.Logger) group.Config {
	return group.Config{
		MinSessionTimeoutMs:             cfg.GroupMinSessionTimeoutMs,
		MaxSessionTimeoutMs:             cfg.GroupMaxSessionTimeoutMs,
		InitialRebalanceDelayMs:         cfg.GroupInitialRebalanceDelayMs,
		MaxSize:                         cfg.GroupMaxSize,
		ConsumerSessionTimeoutMs:        cfg.GroupConsumerSessionTimeoutMs,
		ConsumerMinSessionTimeoutMs:     cfg.GroupConsumerMinSessionTimeoutMs,
		ConsumerMaxSessionTimeoutMs:     cfg.GroupConsumerMaxSessionTimeoutMs,
		ConsumerHeartbeatIntervalMs:     cfg.GroupConsumerHeartbeatIntervalMs,
		ConsumerMinHeartbeatInterval:    cfg.GroupConsumerMinHeartbeatMs,
		ConsumerMaxHeartbeatInterval:    cfg.GroupConsumerMaxHeartbeatMs,
		ConsumerMaxSize:                 cfg.GroupConsumerMaxSize,
		ConsumerAssignors:               cfg.GroupConsumerAssignors,
		ConsumerMigrationPolicy:         cfg.GroupConsumerMigrationPolicy,
		RebalanceProtocols:              cfg.GroupCoordinatorRebalanceProtocols,
		OffsetsTopicNumPartitions:       cfg.OffsetsTopicNumPartitions,
		OffsetsTopicReplicationFactor:   cfg.OffsetsTopicReplicationFactor,
		OffsetsTopicSegmentBytes:        cfg.OffsetsTopicSegmentBytes,
		OffsetsRetentionMinutes:         cfg.OffsetsRetentionMinutes,
		OffsetsRetentionCheckIntervalMs: cfg.OffsetsRetentionCheckIntervalMs,
		OffsetMetadataMaxBytes:          cfg.OffsetMetadataMaxBytes,
		OffsetsCommitTimeoutMs:          cfg.OffsetsCommitTimeoutMs,
		ShareSessionTimeoutMs:           cfg.Int("group.share.session.timeout.ms"),
		ShareHeartbeatIntervalMs:        cfg.Int("group.share.heartbeat.interval.ms"),
		ShareMaxSize:                    cfg.Int("group.share.max.size"),
		ShareAssignmentIntervalMs:       cfg.Int("group.share.assignment.interval.ms"),
		ShareInitializeRetryIntervalMs:  cfg.Int("group.share.initialize.retry.interval.ms"),
		ShareAssignors:                  cfg.List("group.share.assignors"),
		Logger:                          logger,
	}
}
