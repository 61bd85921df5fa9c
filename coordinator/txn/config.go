package txn

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/gregorbroker/gregor/coordinator/runtime"
)

// StateTopic is the internal topic holding transaction state.
const StateTopic = "__transaction_state"

// Config holds every broker setting the transaction coordinator honours,
// under Kafka's names. DefaultConfig returns Kafka 4.3's defaults.
type Config struct {
	NumPartitions     int32 // transaction.state.log.num.partitions
	ReplicationFactor int16 // transaction.state.log.replication.factor
	MinISR            int32 // transaction.state.log.min.isr
	SegmentBytes      int32 // transaction.state.log.segment.bytes

	MaxTimeoutMs            int32 // transaction.max.timeout.ms
	IDExpirationMs          int32 // transactional.id.expiration.ms
	AbortTimedOutIntervalMs int32 // transaction.abort.timed.out.transaction.cleanup.interval.ms
	RemoveExpiredIntervalMs int32 // transaction.remove.expired.transaction.cleanup.interval.ms
	// How long a partition addition made for a producer (Produce v12+,
	// TxnOffsetCommit v5) waits for the previous transaction to complete
	// (add.partitions.to.txn.retry.backoff.max.ms) and how often it looks
	// again (add.partitions.to.txn.retry.backoff.ms).
	AddRetryBackoffMs    int32
	AddRetryBackoffMaxMs int32

	// Logger receives the coordinator's logs; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultConfig returns Kafka 4.3's defaults.
func DefaultConfig() Config {
	return Config{
		NumPartitions:           50,
		ReplicationFactor:       3,
		MinISR:                  2,
		SegmentBytes:            104857600,
		MaxTimeoutMs:            900000,
		IDExpirationMs:          604800000,
		AbortTimedOutIntervalMs: 10000,
		RemoveExpiredIntervalMs: 3600000,
		AddRetryBackoffMs:       20,
		AddRetryBackoffMaxMs:    100,
	}
}

// Validate refuses settings Kafka refuses at start-up.
func (c *Config) Validate() error {
	switch {
	case c.NumPartitions < 1:
		return fmt.Errorf("transaction.state.log.num.partitions must be at least 1, got %d", c.NumPartitions)
	case c.ReplicationFactor < 1:
		return fmt.Errorf("transaction.state.log.replication.factor must be at least 1, got %d", c.ReplicationFactor)
	case c.MinISR < 1:
		return fmt.Errorf("transaction.state.log.min.isr must be at least 1, got %d", c.MinISR)
	case c.SegmentBytes < 1:
		return fmt.Errorf("transaction.state.log.segment.bytes must be at least 1, got %d", c.SegmentBytes)
	case c.MaxTimeoutMs < 1:
		return fmt.Errorf("transaction.max.timeout.ms must be at least 1, got %d", c.MaxTimeoutMs)
	case c.IDExpirationMs < 1:
		return fmt.Errorf("transactional.id.expiration.ms must be at least 1, got %d", c.IDExpirationMs)
	case c.AbortTimedOutIntervalMs < 1:
		return fmt.Errorf("transaction.abort.timed.out.transaction.cleanup.interval.ms must be at least 1, got %d", c.AbortTimedOutIntervalMs)
	case c.RemoveExpiredIntervalMs < 1:
		return fmt.Errorf("transaction.remove.expired.transaction.cleanup.interval.ms must be at least 1, got %d", c.RemoveExpiredIntervalMs)
	}
	return nil
}

// TopicSpec is __transaction_state as Kafka creates it
// (TransactionStateManager.transactionTopicConfigs): compacted,
// uncompressed, unclean leader election off, the transaction.state.log.*
// settings.
func (c *Config) TopicSpec() runtime.TopicSpec {
	return runtime.TopicSpec{
		Name:              StateTopic,
		Partitions:        c.NumPartitions,
		ReplicationFactor: c.ReplicationFactor,
		Configs: [][2]string{
			{"cleanup.policy", "compact"},
			{"compression.type", "uncompressed"},
			{"min.insync.replicas", strconv.Itoa(int(c.MinISR))},
			{"segment.bytes", strconv.Itoa(int(c.SegmentBytes))},
			{"unclean.leader.election.enable", "false"},
		},
	}
}
