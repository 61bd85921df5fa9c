package metrics

import (
	"math"
	"sync"
	"time"
)

// Window keeps what Kafka's own metrics (not Yammer's) compute over time
// windows, their SampledStat: the values recorded in the current sample
// and the one before, each SampleWindow long (Kafka's defaults,
// metrics.num.samples=2 and metrics.sample.window.ms=30000), so that an
// average, a maximum or a rate covers the last 30 to 60 seconds and falls
// back to nothing once no value was recorded for a minute. It is for
// events counted in tens a second at most (raft commits, partition loads):
// Record takes a lock.
type Window struct {
	mu      sync.Mutex
	samples [windowSamples]windowSample
}

const windowSamples = 2

// SampleWindow is one sample's span.
const SampleWindow = 30 * time.Second

type windowSample struct {
	start time.Time // zero: never used
	count uint64
	sum   float64
	max   float64
}

// current is the sample now falls in, reset when its span is over (mu).
func (w *Window) current(now time.Time) *windowSample {
	start := now.Truncate(SampleWindow)
	s := &w.samples[start.Unix()/int64(SampleWindow/time.Second)%windowSamples]
	if !s.start.Equal(start) {
		*s = windowSample{start: start}
	}
	return s
}

// Record records v at now.
func (w *Window) Record(v float64, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.current(now)
	if s.count == 0 || v > s.max {
		s.max = v
	}
	s.count++
	s.sum += v
}

// live reports whether s is the current sample or the one before (mu).
func (w *Window) live(s *windowSample, now time.Time) bool {
	return !s.start.IsZero() && now.Sub(s.start) < windowSamples*SampleWindow && !s.start.After(now)
}

// Avg is the mean of the values of the live samples, NaN when there are
// none, as Kafka's Avg reports it.
func (w *Window) Avg(now time.Time) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var n uint64
	var sum float64
	for i := range w.samples {
		if s := &w.samples[i]; w.live(s, now) {
			n += s.count
			sum += s.sum
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// Max is the largest value of the live samples, NaN when there are none,
// as Kafka's Max reports it.
func (w *Window) Max(now time.Time) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	m, seen := 0.0, false
	for i := range w.samples {
		if s := &w.samples[i]; w.live(s, now) && s.count > 0 && (!seen || s.max > m) {
			m, seen = s.max, true
		}
	}
	if !seen {
		return math.NaN()
	}
	return m
}

// Rate is the sum of the values of the live samples per second, over the
// time they span (at least one whole sample, as Kafka's Rate counts at
// least numSamples-1 whole windows so that a fresh sample does not make a
// burst look huge).
func (w *Window) Rate(now time.Time) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var sum float64
	var oldest time.Time
	for i := range w.samples {
		if s := &w.samples[i]; w.live(s, now) {
			sum += s.sum
			if oldest.IsZero() || s.start.Before(oldest) {
				oldest = s.start
			}
		}
	}
	if oldest.IsZero() {
		return 0
	}
	elapsed := max(now.Sub(oldest), (windowSamples-1)*SampleWindow)
	return sum / elapsed.Seconds()
}
