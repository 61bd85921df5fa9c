package config

import (
	"log/slog"

	"github.com/gregorbroker/gregor/coordinator/txn"
)

// TransactionCoordinatorConfig maps the broker config to the transaction
// coordinator's settings.
func (cfg *Broker) TransactionCoordinatorConfig(logger *slog.Logger) txn.Config {
	return txn.Config{
		NumPartitions:           cfg.TransactionStateLogNumPartitions,
		ReplicationFactor:       cfg.TransactionStateLogReplicationFactor,
		MinISR:                  cfg.TransactionStateLogMinISR,
		SegmentBytes:            cfg.TransactionStateLogSegmentBytes,
		MaxTimeoutMs:            cfg.TransactionMaxTimeoutMs,
		IDExpirationMs:          cfg.TransactionalIDExpirationMs,
		AbortTimedOutIntervalMs: cfg.TransactionAbortTimedOutIntervalMs,
		RemoveExpiredIntervalMs: cfg.TransactionRemoveExpiredIntervalMs,
		AddRetryBackoffMs:       cfg.AddPartitionsToTxnRetryBackoffMs,
		AddRetryBackoffMaxMs:    cfg.AddPartitionsToTxnRetryBackoffMaxMs,
		Logger:                  logger,
	}
}
