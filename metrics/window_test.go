package metrics

import (
	"math"
	"testing"
	"time"
)

func TestWindowAvgMaxRateOverTheLastTwoSamples(t *testing.T) {
	var w Window
	t0 := time.Unix(1_000_010, 0) // 20 s into a 30 s sample
	if !math.IsNaN(w.Avg(t0)) || !math.IsNaN(w.Max(t0)) || w.Rate(t0) != 0 {
		t.Fatalf("empty window: avg %v max %v rate %v", w.Avg(t0), w.Max(t0), w.Rate(t0))
	}
	w.Record(10, t0)
	w.Record(30, t0.Add(time.Second))
	w.Record(20, t0.Add(15*time.Second)) // the next sample
	now := t0.Add(20 * time.Second)
	if got := w.Avg(now); got != 20 {
		t.Errorf("avg %v, want 20", got)
	}
	if got := w.Max(now); got != 30 {
		t.Errorf("max %v, want 30", got)
	}
	// 60 over the 40 s since the first sample began.
	if got := w.Rate(now); got != 60.0/40 {
		t.Errorf("rate %v, want %v", got, 60.0/40)
	}
	// A minute on, the first sample is gone.
	later := t0.Add(50 * time.Second)
	if got := w.Max(later); got != 20 {
		t.Errorf("max a sample later %v, want 20", got)
	}
	// Two minutes on, nothing is left.
	if gone := t0.Add(2 * time.Minute); !math.IsNaN(w.Avg(gone)) || w.Rate(gone) != 0 {
		t.Errorf("after two minutes: avg %v rate %v", w.Avg(gone), w.Rate(gone))
	}
	// A fresh sample counts as a whole window at least.
	var fresh Window
	fresh.Record(30, t0)
	if got := fresh.Rate(t0.Add(time.Second)); got != 1 {
		t.Errorf("rate of a fresh sample %v, want 1", got)
	}
}
