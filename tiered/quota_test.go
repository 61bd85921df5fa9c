package tiered

import (
	"testing"
	"time"
)

// A quota is exceeded while the bytes over the window pass the limit,
// and no longer once the window has moved past them; without a limit
// nothing is counted.
func TestRateQuota(t *testing.T) {
	q := newRateQuota(QuotaWindow{Samples: 3, Size: time.Second})
	now := time.Unix(1000, 0)
	q.record(10<<20, now)
	if q.exceeded(now) {
		t.Fatal("a quota without a limit was exceeded")
	}
	q.setLimit(1 << 20)
	q.record(1<<20, now)
	if q.exceeded(now.Add(500 * time.Millisecond)) {
		t.Fatal("1 MiB in a second is not over 1 MiB/s")
	}
	q.record(1<<20, now.Add(600*time.Millisecond))
	if !q.exceeded(now.Add(700 * time.Millisecond)) {
		t.Fatal("2 MiB in a second is over 1 MiB/s")
	}
	if !q.exceeded(now.Add(1500 * time.Millisecond)) {
		t.Fatal("2 MiB in 1.5 s is over 1 MiB/s")
	}
	if q.exceeded(now.Add(2500 * time.Millisecond)) {
		t.Fatal("2 MiB in 2.5 s is under 1 MiB/s")
	}
	if q.exceeded(now.Add(10 * time.Second)) {
		t.Fatal("the samples left the window")
	}
	q.setLimit(0)
	q.record(100<<20, now.Add(11*time.Second))
	if q.exceeded(now.Add(11 * time.Second)) {
		t.Fatal("a limit of 0 is none")
	}
}
