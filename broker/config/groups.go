package config

import (
	"log/slog"

	"github.com/gregorbroker/gregor/coordinator/group"
)

// GroupCoordinatorConfig maps the broker config to the group
// coordinator's settings.
func (cfg *Broker) GroupCoordinatorConfig(logger *slog.Logger) group.Config {
	return group.Config{
		MinSessionTimeoutMs:               cfg.GroupMinSessionTimeoutMs,
		MaxSessionTimeoutMs:               cfg.GroupMaxSessionTimeoutMs,
		InitialRebalanceDelayMs:           cfg.GroupInitialRebalanceDelayMs,
		MaxSize:                           cfg.GroupMaxSize,
		ConsumerSessionTimeoutMs:          cfg.GroupConsumerSessionTimeoutMs,
		ConsumerMinSessionTimeoutMs:       cfg.GroupConsumerMinSessionTimeoutMs,
		ConsumerMaxSessionTimeoutMs:       cfg.GroupConsumerMaxSessionTimeoutMs,
		ConsumerHeartbeatIntervalMs:       cfg.GroupConsumerHeartbeatIntervalMs,
		ConsumerMinHeartbeatInterval:      cfg.GroupConsumerMinHeartbeatMs,
		ConsumerMaxHeartbeatInterval:      cfg.GroupConsumerMaxHeartbeatMs,
		ConsumerMaxSize:                   cfg.GroupConsumerMaxSize,
		ConsumerAssignors:                 cfg.GroupConsumerAssignors,
		ConsumerMigrationPolicy:           cfg.GroupConsumerMigrationPolicy,
		RebalanceProtocols:                cfg.GroupCoordinatorRebalanceProtocols,
		OffsetsTopicNumPartitions:         cfg.OffsetsTopicNumPartitions,
		OffsetsTopicReplicationFactor:     cfg.OffsetsTopicReplicationFactor,
		OffsetsTopicSegmentBytes:          cfg.OffsetsTopicSegmentBytes,
		OffsetsRetentionMinutes:           cfg.OffsetsRetentionMinutes,
		OffsetsRetentionCheckIntervalMs:   cfg.OffsetsRetentionCheckIntervalMs,
		OffsetMetadataMaxBytes:            cfg.OffsetMetadataMaxBytes,
		OffsetsCommitTimeoutMs:            cfg.OffsetsCommitTimeoutMs,
		ShareSessionTimeoutMs:             cfg.Int("group.share.session.timeout.ms"),
		ShareHeartbeatIntervalMs:          cfg.Int("group.share.heartbeat.interval.ms"),
		ShareMaxSize:                      cfg.Int("group.share.max.size"),
		ShareAssignmentIntervalMs:         cfg.Int("group.share.assignment.interval.ms"),
		ShareInitializeRetryIntervalMs:    cfg.Int("group.share.initialize.retry.interval.ms"),
		ShareAssignors:                    cfg.List("group.share.assignors"),
		StreamsSessionTimeoutMs:           cfg.Int("group.streams.session.timeout.ms"),
		StreamsMinSessionTimeoutMs:        cfg.Int("group.streams.min.session.timeout.ms"),
		StreamsMaxSessionTimeoutMs:        cfg.Int("group.streams.max.session.timeout.ms"),
		StreamsHeartbeatIntervalMs:        cfg.Int("group.streams.heartbeat.interval.ms"),
		StreamsMinHeartbeatIntervalMs:     cfg.Int("group.streams.min.heartbeat.interval.ms"),
		StreamsMaxHeartbeatIntervalMs:     cfg.Int("group.streams.max.heartbeat.interval.ms"),
		StreamsMaxSize:                    cfg.Int("group.streams.max.size"),
		StreamsNumStandbyReplicas:         cfg.Int("group.streams.num.standby.replicas"),
		StreamsMaxStandbyReplicas:         cfg.Int("group.streams.max.standby.replicas"),
		StreamsInitialRebalanceDelayMs:    cfg.Int("group.streams.initial.rebalance.delay.ms"),
		StreamsAssignmentIntervalMsStatic: cfg.Int("group.streams.assignment.interval.ms"),
		StreamsMinAssignmentIntervalMs:    cfg.Int("group.streams.min.assignment.interval.ms"),
		StreamsMaxAssignmentIntervalMs:    cfg.Int("group.streams.max.assignment.interval.ms"),
		Logger:                            logger,
	}
}
