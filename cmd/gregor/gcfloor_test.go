package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// currentGCPercent reads GOGC without changing it for longer than the call.
func currentGCPercent() int { p := debug.SetGCPercent(100); debug.SetGCPercent(p); return p }

// waitGCPercent runs collections until GOGC satisfies ok (the floor adjusts
// from a finalizer, after a collection).
func waitGCPercent(t *testing.T, ok func(int) bool) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.GC()
		time.Sleep(time.Millisecond)
		if p := currentGCPercent(); ok(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC still %d after 5s of collections", currentGCPercent())
		}
	}
}

func TestGCFloorRaisesGOGCForASmallHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	g := startGCFloor(256<<20, false)
	defer g.stop()
	// The test binary's live heap is a few MB: a 256 MiB floor needs a
	// GOGC in the thousands.
	if p := waitGCPercent(t, func(p int) bool { return p > 1000 }); p <= 1000 {
		t.Fatalf("GOGC %d", p)
	}
}

func TestGCFloorLeavesALargeHeapAtTheDefault(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	g := startGCFloor(64<<20, false)
	defer g.stop()
	waitGCPercent(t, func(p int) bool { return p > 100 })
	live := make([][]byte, 0, 192)
	for range 192 {
		live = append(live, make([]byte, 256<<10)) // 48 MiB live, above half the floor
	}
	waitGCPercent(t, func(p int) bool { return p == 100 })
	runtime.KeepAlive(live)
}

func TestGCFloorIsOffWhenGOGCIsSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	g := startGCFloor(256<<20, true)
	defer g.stop()
	for range 5 {
		runtime.GC()
	}
	time.Sleep(10 * time.Millisecond)
	if p := currentGCPercent(); p != 150 {
		t.Fatalf("GOGC %d; an operator's GOGC must stay", p)
	}
}
