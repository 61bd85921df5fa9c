package tiered

import "github.com/gregorbroker/gregor/metrics"

// Quotas on the bytes tiered storage moves (Kafka's RLMQuotaManager):
// remote.log.manager.copy.max.bytes.per.second holds the copier back
// before a segment while the copy rate, measured over
// remote.log.manager.copy.quota.window.num samples of
// remote.log.manager.copy.quota.window.size.seconds, is above it, and
// remote.log.manager.fetch.max.bytes.per.second makes a fetch skip its
// remote reads (answering the partition without records, which the
// consumer asks for again) while the remote read rate is above it.
// Both limits change at run time (cluster-wide dynamic keys). The rates
// are metrics.ByteRate, as the replication throttles'.

// QuotaWindow is a quota's samples: how many, of what length.
type QuotaWindow = metrics.RateWindow

// SetCopyQuota sets remote.log.manager.copy.max.bytes.per.second.
func (m *Manager) SetCopyQuota(bytesPerSecond int64) { m.copyQuota.SetLimit(bytesPerSecond) }

// SetFetchQuota sets remote.log.manager.fetch.max.bytes.per.second.
func (m *Manager) SetFetchQuota(bytesPerSecond int64) { m.fetchQuota.SetLimit(bytesPerSecond) }

// FetchQuotaExceeded reports whether remote reads are held back now.
func (m *Manager) FetchQuotaExceeded() bool { return m.fetchQuota.Exceeded(m.opts.Now()) }
