package metrics

import (
	"math"
	"testing"
	"time"
)

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	now := time.Unix(1_700_000_000, 0)
	// 1..1000 ms, one each.
	for i := 1; i <= 1000; i++ {
		h.Observe(time.Duration(i)*time.Millisecond, now)
	}
	qs := []float64{0.5, 0.99, 0.999}
	out := make([]float64, len(qs))
	h.Quantiles(now, qs, out)
	for i, want := range []float64{500, 990, 999} {
		if math.Abs(out[i]-want)/want > 0.13 {
			t.Errorf("quantile %v: %v ms, want about %v", qs[i], out[i], want)
		}
	}
	if h.Count() != 1000 {
		t.Fatalf("count %d", h.Count())
	}
	// Six minutes on, the values have left the window; the count stays.
	later := now.Add(6 * time.Minute)
	h.Quantiles(later, qs, out)
	if out[0] != 0 || h.Count() != 1000 {
		t.Fatalf("after six minutes: %v, count %d", out, h.Count())
	}
	h.Observe(2*time.Millisecond, later)
	h.Quantiles(later, qs, out)
	if math.Abs(out[0]-2)/2 > 0.13 {
		t.Fatalf("a fresh minute: %v", out)
	}
}

func TestBucketsAreOrderedAndTight(t *testing.T) {
	prev := -1
	for us := uint64(0); us < 1<<20; us += 1 + us/7 {
		b := bucketOf(us)
		if b < prev {
			t.Fatalf("bucket of %d µs is %d, below %d", us, b, prev)
		}
		prev = b
		if us > 0 {
			if mid := bucketMid(b); math.Abs(mid-float64(us))/float64(us) > 0.13 {
				t.Fatalf("%d µs in bucket %d whose middle is %v", us, b, mid)
			}
		}
	}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningful without the race detector")
	}
	var h Histogram
	now := time.Now()
	if n := testing.AllocsPerRun(1000, func() { h.Observe(time.Millisecond, now) }); n != 0 {
		t.Fatalf("%v allocations per Observe", n)
	}
}
