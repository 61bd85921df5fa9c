package tiered

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Quotas on the bytes tiered storage moves (Kafka's RLMQuotaManager):
// remote.log.manager.copy.max.bytes.per.second holds the copier back
// before a segment while the copy rate, measured over
// remote.log.manager.copy.quota.window.num samples of
// remote.log.manager.copy.quota.window.size.seconds, is above it, and
// remote.log.manager.fetch.max.bytes.per.second makes a fetch skip its
// remote reads (answering the partition without records, which the
// consumer asks for again) while the remote read rate is above it.
// Both limits change at run time (cluster-wide dynamic keys).
//
// Locks: mu is a leaf.

// QuotaWindow is a quota's samples: how many, of what length.
type QuotaWindow struct {
	Samples int
	Size    time.Duration
}

// rateQuota is a byte rate over a window of samples, against a limit.
type rateQuota struct {
	limit  atomic.Int64 // bytes per second; math.MaxInt64: none
	window QuotaWindow

	mu      sync.Mutex
	samples []rateSample
}

type rateSample struct {
	start time.Time
	bytes int64
}

func newRateQuota(w QuotaWindow) *rateQuota {
	if w.Samples <= 0 {
		w.Samples = 11
	}
	if w.Size <= 0 {
		w.Size = time.Second
	}
	q := &rateQuota{window: w}
	q.limit.Store(math.MaxInt64)
	return q
}

// setLimit sets the limit (<= 0 or MaxInt64: none).
func (q *rateQuota) setLimit(bytesPerSecond int64) {
	if bytesPerSecond <= 0 {
		bytesPerSecond = math.MaxInt64
	}
	q.limit.Store(bytesPerSecond)
}

// prune drops the samples older than the window; the caller holds mu.
func (q *rateQuota) prune(now time.Time) {
	horizon := now.Add(-time.Duration(q.window.Samples) * q.window.Size)
	i := 0
	for i < len(q.samples) && !q.samples[i].start.After(horizon) {
		i++
	}
	q.samples = q.samples[i:]
}

// record counts n bytes moved at now.
func (q *rateQuota) record(n int64, now time.Time) {
	if q.limit.Load() == math.MaxInt64 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.prune(now)
	if k := len(q.samples); k > 0 && now.Sub(q.samples[k-1].start) < q.window.Size {
		q.samples[k-1].bytes += n
		return
	}
	q.samples = append(q.samples, rateSample{start: now, bytes: n})
}

// exceeded reports whether the rate over the window is above the limit
// (Kafka's rate: the bytes over the window's elapsed time, at least one
// sample long).
func (q *rateQuota) exceeded(now time.Time) bool {
	limit := q.limit.Load()
	if limit == math.MaxInt64 {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.prune(now)
	if len(q.samples) == 0 {
		return false
	}
	var total int64
	for _, s := range q.samples {
		total += s.bytes
	}
	elapsed := max(now.Sub(q.samples[0].start), q.window.Size)
	return float64(total)/elapsed.Seconds() > float64(limit)
}

// SetCopyQuota sets remote.log.manager.copy.max.bytes.per.second.
func (m *Manager) SetCopyQuota(bytesPerSecond int64) { m.copyQuota.setLimit(bytesPerSecond) }

// SetFetchQuota sets remote.log.manager.fetch.max.bytes.per.second.
func (m *Manager) SetFetchQuota(bytesPerSecond int64) { m.fetchQuota.setLimit(bytesPerSecond) }

// FetchQuotaExceeded reports whether remote reads are held back now.
func (m *Manager) FetchQuotaExceeded() bool { return m.fetchQuota.exceeded(m.opts.Now()) }
