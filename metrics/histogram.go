package metrics

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram records durations: every one in its count since start, and
// each in the minute it was recorded in, so that its quantiles are those of
// the last five minutes, as Kafka's biased histograms weigh recent values
// (an exponentially decaying reservoir with a five-minute mean life). A
// value falls in one of four buckets per power of two of microseconds: a
// quantile is within about 10 % of the value it stands for. The zero value
// is ready; Observe does not allocate or lock.
type Histogram struct {
	count   atomic.Uint64
	windows [histWindows]histWindow
}

const (
	// histWindows is the minutes kept: the five whole ones a quantile
	// covers and the current one.
	histWindows      = 6
	bucketsPerOctave = 4
	// histBuckets covers 0 µs and then 1 µs to 2^34 µs (4.8 hours).
	histBuckets = 1 + bucketsPerOctave*34
)

type histWindow struct {
	minute atomic.Int64 // the Unix minute counted, +1 (0: never used)
	counts [histBuckets]atomic.Uint32
}

// bucketOf is the bucket of us microseconds.
func bucketOf(us uint64) int {
	if us == 0 {
		return 0
	}
	e := bits.Len64(us) - 1 // us is in [2^e, 2^(e+1))
	var frac uint64
	if e >= 2 {
		frac = (us >> (e - 2)) & (bucketsPerOctave - 1)
	} else {
		frac = (us << (2 - e)) & (bucketsPerOctave - 1)
	}
	return min(1+e*bucketsPerOctave+int(frac), histBuckets-1)
}

// bucketMid is the middle of bucket i, in microseconds.
func bucketMid(i int) float64 {
	if i == 0 {
		return 0
	}
	e, frac := (i-1)/bucketsPerOctave, (i-1)%bucketsPerOctave
	low := float64(uint64(1)<<e) * (1 + float64(frac)/bucketsPerOctave)
	width := float64(uint64(1)<<e) / bucketsPerOctave
	return low + width/2
}

// Observe records d, taken at now.
func (h *Histogram) Observe(d time.Duration, now time.Time) {
	h.count.Add(1)
	minute := now.Unix()/60 + 1
	w := &h.windows[minute%histWindows]
	if old := w.minute.Load(); old != minute && w.minute.CompareAndSwap(old, minute) {
		// The window's minute is over: it starts again. A value another
		// goroutine records in the moment between is lost, as rare as a
		// sampling reservoir's misses.
		for i := range w.counts {
			w.counts[i].Store(0)
		}
	}
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	w.counts[bucketOf(uint64(us))].Add(1)
}

// Count is how many values were recorded since start.
func (h *Histogram) Count() uint64 { return h.count.Load() }

// Quantiles are the qs quantiles (0.5 for the median) of the values of the
// last five minutes at now, in milliseconds, into out; all 0 when there are
// none.
func (h *Histogram) Quantiles(now time.Time, qs []float64, out []float64) {
	minute := now.Unix()/60 + 1
	var sums [histBuckets]uint64
	var total uint64
	for i := range h.windows {
		w := &h.windows[i]
		if m := w.minute.Load(); m == 0 || m > minute || minute-m >= histWindows {
			continue
		}
		for b := range w.counts {
			n := uint64(w.counts[b].Load())
			sums[b] += n
			total += n
		}
	}
	for qi, q := range qs {
		out[qi] = 0
		if total == 0 {
			continue
		}
		rank := uint64(q*float64(total-1)) + 1
		var seen uint64
		for b, n := range sums {
			seen += n
			if seen >= rank {
				out[qi] = bucketMid(b) / 1000
				break
			}
		}
	}
}
