package config

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/gregorbroker/gregor/coordinator/share"
)

// ShareCoordinatorConfig maps the broker config to the share coordinator's
// settings (share.coordinator.*).
func (cfg *Broker) ShareCoordinatorConfig(logger *slog.Logger) share.Config {
	return share.Config{
		NumPartitions:          cfg.Int("share.coordinator.state.topic.num.partitions"),
		ReplicationFactor:      cfg.Short("share.coordinator.state.topic.replication.factor"),
		MinISR:                 cfg.Short("share.coordinator.state.topic.min.isr"),
		SegmentBytes:           cfg.Int("share.coordinator.state.topic.segment.bytes"),
		UpdatesPerSnapshot:     cfg.Int("share.coordinator.snapshot.update.records.per.snapshot"),
		WriteTimeoutMs:         cfg.Int("share.coordinator.write.timeout.ms"),
		PruneIntervalMs:        cfg.Int("share.coordinator.state.topic.prune.interval.ms"),
		ColdSnapshotIntervalMs: cfg.Int("share.coordinator.cold.partition.snapshot.interval.ms"),
		Logger:                 logger,
	}
}

// ValidateShareGroupKeys checks the relations between the group.share.*
// keys that Kafka checks at start-up (GroupCoordinatorConfig,
// ShareGroupConfig), with Kafka's messages.
func (cfg *Broker) ValidateShareGroupKeys() error {
	atLeast := func(a, b string) error {
		if cfg.Int(a) < cfg.Int(b) {
			return fmt.Errorf("%s must be greater than or equal to %s", a, b)
		}
		return nil
	}
	atMost := func(a, b string) error {
		if cfg.Int(a) > cfg.Int(b) {
			return fmt.Errorf("%s must be less than or equal to %s", a, b)
		}
		return nil
	}
	const p = "group.share."
	checks := []error{
		atLeast(p+"max.heartbeat.interval.ms", p+"min.heartbeat.interval.ms"),
		atLeast(p+"heartbeat.interval.ms", p+"min.heartbeat.interval.ms"),
		atMost(p+"heartbeat.interval.ms", p+"max.heartbeat.interval.ms"),
		atLeast(p+"max.session.timeout.ms", p+"min.session.timeout.ms"),
		atLeast(p+"session.timeout.ms", p+"min.session.timeout.ms"),
		atMost(p+"session.timeout.ms", p+"max.session.timeout.ms"),
		atLeast(p+"max.assignment.interval.ms", p+"min.assignment.interval.ms"),
		atLeast(p+"assignment.interval.ms", p+"min.assignment.interval.ms"),
		atMost(p+"assignment.interval.ms", p+"max.assignment.interval.ms"),
		atLeast(p+"max.delivery.count.limit", p+"delivery.count.limit"),
		atLeast(p+"delivery.count.limit", p+"min.delivery.count.limit"),
		atLeast(p+"max.partition.max.record.locks", p+"partition.max.record.locks"),
		atLeast(p+"partition.max.record.locks", p+"min.partition.max.record.locks"),
		atLeast(p+"record.lock.duration.ms", p+"min.record.lock.duration.ms"),
		atMost(p+"record.lock.duration.ms", p+"max.record.lock.duration.ms"),
		atLeast(p+"max.share.sessions", p+"max.size"),
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	if cfg.Int(p+"heartbeat.interval.ms") >= cfg.Int(p+"session.timeout.ms") {
		return fmt.Errorf("%sheartbeat.interval.ms must be less than %ssession.timeout.ms", p, p)
	}
	assignors := cfg.List(p + "assignors")
	if len(assignors) != 1 {
		return fmt.Errorf("%sassignors must contain exactly one assignor, but found %d", p, len(assignors))
	}
	switch strings.TrimSpace(assignors[0]) {
	case "simple", "org.apache.kafka.coordinator.group.assignor.SimpleAssignor":
	default:
		return fmt.Errorf("%sassignors: Gregor has the share assignor \"simple\" only (Kafka's SimpleAssignor), not %q", p, assignors[0])
	}
	return nil
}

// ShareLimits are the broker-wide share-partition settings a partition's
// leader applies when a group sets none of its own.
type ShareLimits struct {
	DeliveryCountLimit      int32 // group.share.delivery.count.limit
	RecordLockDurationMs    int32 // group.share.record.lock.duration.ms
	PartitionMaxRecordLocks int32 // group.share.partition.max.record.locks
	MaxShareSessions        int32 // group.share.max.share.sessions
}

// ShareLimits reads them.
func (cfg *Broker) ShareLimits() ShareLimits {
	return ShareLimits{
		DeliveryCountLimit:      cfg.Int("group.share.delivery.count.limit"),
		RecordLockDurationMs:    cfg.Int("group.share.record.lock.duration.ms"),
		PartitionMaxRecordLocks: cfg.Int("group.share.partition.max.record.locks"),
		MaxShareSessions:        cfg.Int("group.share.max.share.sessions"),
	}
}
