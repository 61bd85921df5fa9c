package metrics

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// RateWindow is how a ByteRate measures: Samples samples of Size each
// (Kafka's quota.window.num and quota.window.size.seconds, and the
// replication and tiered storage quotas' like keys).
type RateWindow struct {
	Samples int
	Size    time.Duration
}

// DefaultRateWindow is Kafka's: 11 samples of a second.
func DefaultRateWindow() RateWindow { return RateWindow{Samples: 11, Size: time.Second} }

// ByteRate is a byte rate measured over a window of samples against a
// limit, as Kafka's quota managers measure theirs (the replication
// throttles, the tiered storage copy and fetch quotas). mu is a leaf.
type ByteRate struct {
	limit  atomic.Int64 // bytes per second; math.MaxInt64: none
	window RateWindow

	mu      sync.Mutex
	samples []rateSample
}

type rateSample struct {
	start time.Time
	bytes int64
}

// NewByteRate returns a rate without a limit (DefaultRateWindow when w
// is not set).
func NewByteRate(w RateWindow) *ByteRate {
	if w.Samples < 1 || w.Size <= 0 {
		w = DefaultRateWindow()
	}
	q := &ByteRate{window: w}
	q.limit.Store(math.MaxInt64)
	return q
}

// SetLimit sets the limit in bytes per second; math.MaxInt64 or less than
// 1 means none.
func (q *ByteRate) SetLimit(bytesPerSecond int64) {
	if bytesPerSecond < 1 {
		bytesPerSecond = math.MaxInt64
	}
	q.limit.Store(bytesPerSecond)
}

// Record counts bytes moved at now.
func (q *ByteRate) Record(bytes int64, now time.Time) {
	if bytes <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.expireLocked(now)
	if n := len(q.samples); n > 0 && now.Sub(q.samples[n-1].start) < q.window.Size {
		q.samples[n-1].bytes += bytes
		return
	}
	q.samples = append(q.samples, rateSample{start: now, bytes: bytes})
}

// Exceeded reports whether the measured rate is above the limit (Kafka's
// Rate: the bytes over the samples kept, divided by the time they span,
// at least all but one of the samples' length).
func (q *ByteRate) Exceeded(now time.Time) bool {
	limit := q.limit.Load()
	if limit == math.MaxInt64 {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.expireLocked(now)
	if len(q.samples) == 0 {
		return false
	}
	var total int64
	for _, s := range q.samples {
		total += s.bytes
	}
	elapsed := now.Sub(q.samples[0].start)
	elapsed = max(elapsed, time.Duration(q.window.Samples-1)*q.window.Size)
	return float64(total)/elapsed.Seconds() > float64(limit)
}

// expireLocked drops samples older than the window; the caller holds mu.
func (q *ByteRate) expireLocked(now time.Time) {
	span := time.Duration(q.window.Samples) * q.window.Size
	i := 0
	for i < len(q.samples) && now.Sub(q.samples[i].start) >= span {
		i++
	}
	if i > 0 {
		q.samples = append(q.samples[:0], q.samples[i:]...)
	}
}
