package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// gcHeapFloor is the smallest heap goal the collector is given. Go's
// default (GOGC=100) sets the goal at twice the live heap, and a broker's
// live heap is a few MB: under 8 concurrent offset committers it collected
// every 20 ms, and the mark assists of those cycles were the commits' p99
// (0.73-0.83 ms, against 0.49-0.54 ms with the goal raised). Above the
// floor GOGC=100 applies unchanged, so a broker that holds a large live
// heap pays nothing extra; below it the heap may grow to the floor before
// a collection (RSS at most this much higher than it would otherwise be).
const gcHeapFloor = 32 << 20

// gcFloor keeps the heap goal at or above a floor by raising GOGC after
// every collection while the live heap is small. Off when GOGC is set in
// the environment: an operator's choice wins.
type gcFloor struct {
	floor   uint64
	stopped atomic.Bool
	sample  []metrics.Sample
	percent int
}

// startGCFloor installs the floor; stop it with (*gcFloor).stop.
func startGCFloor(floor uint64, gogcSet bool) *gcFloor {
	g := &gcFloor{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}, percent: 100}
	if gogcSet {
		g.stopped.Store(true)
		return g
	}
	g.adjust()
	g.arm()
	return g
}

// arm sets a finalizer on a fresh object, which runs after the next
// collection; the finalizer adjusts and re-arms.
func (g *gcFloor) arm() {
	sentinel := new([16]byte)
	runtime.SetFinalizer(sentinel, func(*[16]byte) {
		if g.stopped.Load() {
			return
		}
		g.adjust()
		g.arm()
	})
}

// adjust sets GOGC so that live + live*GOGC/100 >= floor, never below 100.
func (g *gcFloor) adjust() {
	metrics.Read(g.sample)
	if g.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	live := g.sample[0].Value.Uint64()
	percent := 100
	if live == 0 {
		live = 1 << 20
	}
	if live < g.floor/2 {
		percent = int((g.floor - live) * 100 / live)
	}
	// Changing GOGC recomputes the pacer; skip changes under a tenth.
	if d := percent - g.percent; d*10 > g.percent || -d*10 > g.percent {
		debug.SetGCPercent(percent)
		g.percent = percent
	}
}

// stop leaves GOGC where it is and stops adjusting.
func (g *gcFloor) stop() { g.stopped.Store(true) }
