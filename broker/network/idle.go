package network

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// handlerIdle measures RequestHandlerAvgIdlePercent (metrics.catalog says
// what it means for Gregor): the connections add each request's local
// time to busy, one atomic add per request, and the scrapes turn it into
// the idle fraction of GOMAXPROCS handlers over the last minute.
//
// busy is written by every connection goroutine; marks and started
// belong to the scrapes, under mu.
type handlerIdle struct {
	busy atomic.Int64 // nanoseconds of handler time, ever

	mu      sync.Mutex
	started time.Time
	// marks are what the scrapes of the last idleSpan saw, oldest first,
	// and the last one before them.
	marks []idleMark
}

type idleMark struct {
	at   time.Time
	busy int64
}

// idleSpan is the span the gauge averages over, as the one-minute rate
// Kafka's meter is read with.
const idleSpan = time.Minute

func newHandlerIdle(now time.Time) *handlerIdle {
	return &handlerIdle{started: now}
}

// add counts d of handler time.
func (h *handlerIdle) add(d time.Duration) {
	if d > 0 {
		h.busy.Add(int64(d))
	}
}

// idleFraction is the gauge's value at a scrape at now with capacity
// handlers: 1 - busy / (capacity x elapsed) from the oldest mark of the
// last idleSpan (the one before them when there is none, start-up at the
// first scrape) to now, floored at 0.
func (h *handlerIdle) idleFraction(now time.Time, capacity int) float64 {
	busy := h.busy.Load()
	h.mu.Lock()
	defer h.mu.Unlock()
	from := idleMark{at: h.started}
	// Keep the newest mark older than the span (it starts the span when
	// no scrape falls inside it) and the marks within it.
	drop := 0
	for drop+1 < len(h.marks) && now.Sub(h.marks[drop+1].at) >= idleSpan {
		drop++
	}
	h.marks = append(h.marks[:0], h.marks[drop:]...)
	if len(h.marks) > 0 {
		from = h.marks[0]
		if len(h.marks) > 1 && now.Sub(from.at) > idleSpan {
			from = h.marks[1]
		}
	}
	h.marks = append(h.marks, idleMark{at: now, busy: busy})
	elapsed := now.Sub(from.at)
	if elapsed <= 0 || capacity <= 0 {
		return 1
	}
	idle := 1 - float64(busy-from.busy)/(float64(capacity)*float64(elapsed))
	return min(max(idle, 0), 1)
}

// handlerCapacity is how many handlers can run at once: the goroutines the
// Go scheduler runs in parallel.
func handlerCapacity() int { return runtime.GOMAXPROCS(0) }
