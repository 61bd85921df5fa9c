package replica

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/internal/await"
)

// testOp completes once ready says so, failing when failed says so; it
// records how it ended.
type testOp struct {
	ready  func() bool
	failed func() bool
	result chan string
	calls  atomic.Int32
}

func newTestOp(ready func() bool) *testOp {
	return &testOp{ready: ready, failed: func() bool { return false }, result: make(chan string, 2)}
}

func (o *testOp) TryComplete() bool {
	o.calls.Add(1)
	switch {
	case o.failed():
		o.result <- "failed"
	case o.ready():
		o.result <- "completed"
	default:
		return false
	}
	return true
}

func (o *testOp) Expire() { o.result <- "expired" }

func (o *testOp) wait(t *testing.T) string {
	t.Helper()
	select {
	case r := <-o.result:
		select {
		case again := <-o.result:
			t.Fatalf("the operation ended twice: %s, then %s", r, again)
		default:
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the operation never ended")
		return ""
	}
}

func TestPurgatoryCompletesAtOnceWithoutWatching(t *testing.T) {
	p := NewPurgatory[string]()
	op := newTestOp(func() bool { return true })
	if !p.TryCompleteElseWatch(op, time.Hour, "a") {
		t.Fatal("a ready operation was not completed at once")
	}
	if got := op.wait(t); got != "completed" {
		t.Fatalf("ended %s", got)
	}
	if p.Watched() != 0 {
		t.Fatalf("%d operations watched after an immediate completion", p.Watched())
	}
}

func TestPurgatoryCompletesOnTrigger(t *testing.T) {
	p := NewPurgatory[string]()
	var ready atomic.Bool
	op := newTestOp(ready.Load)
	if p.TryCompleteElseWatch(op, time.Hour, "a", "b") {
		t.Fatal("completed before it was ready")
	}
	if n := p.CheckAndComplete("b"); n != 0 {
		t.Fatalf("%d completed before ready", n)
	}
	if n := p.CheckAndComplete("other"); n != 0 {
		t.Fatalf("a trigger on an unwatched key completed %d", n)
	}
	ready.Store(true)
	if n := p.CheckAndComplete("b"); n != 1 {
		t.Fatalf("the trigger completed %d operations, want 1", n)
	}
	if got := op.wait(t); got != "completed" {
		t.Fatalf("ended %s", got)
	}
	// Completed operations leave every key they watched.
	if n := p.CheckAndComplete("a"); n != 0 || p.Watched() != 0 {
		t.Fatalf("after completion: %d completed again, %d watched", n, p.Watched())
	}
}

func TestPurgatoryExpiresAtTheDeadline(t *testing.T) {
	p := NewPurgatory[string]()
	op := newTestOp(func() bool { return false })
	start := time.Now()
	p.TryCompleteElseWatch(op, 30*time.Millisecond, "a")
	if got := op.wait(t); got != "expired" {
		t.Fatalf("ended %s", got)
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Fatal("expired before its deadline")
	}
	if p.Watched() != 0 || p.CheckAndComplete("a") != 0 {
		t.Fatalf("%d operations watched after expiry", p.Watched())
	}
}

// An operation whose partition changes leader is woken by the leadership
// change and answers with its error.
func TestPurgatoryErrorOnLeadershipChange(t *testing.T) {
	p := NewPurgatory[string]()
	var leaderLost atomic.Bool
	op := newTestOp(func() bool { return false })
	op.failed = leaderLost.Load
	p.TryCompleteElseWatch(op, time.Hour, "t-0")
	leaderLost.Store(true)
	p.CheckAndComplete("t-0")
	if got := op.wait(t); got != "failed" {
		t.Fatalf("ended %s", got)
	}
}

// Many operations on one key, many keys per operation, triggers from many
// goroutines: each operation ends exactly once.
func TestPurgatoryManyWatchers(t *testing.T) {
	p := NewPurgatory[int]()
	const ops = 200
	var level atomic.Int64
	all := make([]*testOp, ops)
	for i := range all {
		need := int64(i%10 + 1)
		all[i] = newTestOp(func() bool { return level.Load() >= need })
		keys := []int{i % 7, (i + 3) % 7}
		p.TryCompleteElseWatch(all[i], time.Hour, keys...)
	}
	if p.Watched() != ops {
		t.Fatalf("%d watched, want %d", p.Watched(), ops)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				level.Add(1)
				for k := range 7 {
					p.CheckAndComplete((k + g) % 7)
				}
			}
		}()
	}
	wg.Wait()
	for k := range 7 {
		p.CheckAndComplete(k)
	}
	for i, op := range all {
		if got := op.wait(t); got != "completed" {
			t.Fatalf("operation %d ended %s", i, got)
		}
	}
	if p.Watched() != 0 {
		t.Fatalf("%d still watched", p.Watched())
	}
}

// A trigger racing the registration is not lost: the operation completes
// either in TryCompleteElseWatch's second check or by the trigger.
func TestPurgatoryTriggerDuringRegistration(t *testing.T) {
	p := NewPurgatory[string]()
	for range 500 {
		var ready atomic.Bool
		op := newTestOp(ready.Load)
		go func() {
			ready.Store(true)
			p.CheckAndComplete("k")
		}()
		p.TryCompleteElseWatch(op, time.Hour, "k")
		// Only a lost wake-up would leave it to expire in an hour.
		deadline := time.Now().Add(5 * time.Second)
		for p.Watched() != 0 {
			if time.Now().After(deadline) {
				t.Fatal("a wake-up during registration was lost")
			}
			p.CheckAndComplete("k") // the trigger above may have run before the watch
			runtime.Gosched()
		}
		if got := op.wait(t); got != "completed" {
			t.Fatalf("ended %s", got)
		}
	}
}

func TestPurgatoryExpireAll(t *testing.T) {
	p := NewPurgatory[string]()
	ops := []*testOp{newTestOp(func() bool { return false }), newTestOp(func() bool { return false })}
	p.TryCompleteElseWatch(ops[0], time.Hour, "a")
	p.TryCompleteElseWatch(ops[1], time.Hour, "a", "b")
	p.ExpireAll()
	for _, op := range ops {
		if got := op.wait(t); got != "expired" {
			t.Fatalf("ended %s", got)
		}
	}
	if p.Watched() != 0 {
		t.Fatalf("%d watched after ExpireAll", p.Watched())
	}
}

// Waiting costs no goroutine, and nothing is left running once every
// operation has ended.
func TestPurgatoryLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	p := NewPurgatory[int]()
	var ready atomic.Bool
	ops := make([]*testOp, 100)
	for i := range ops {
		ops[i] = newTestOp(ready.Load)
		timeout := time.Hour
		if i%2 == 0 {
			timeout = 10 * time.Millisecond
		}
		p.TryCompleteElseWatch(ops[i], timeout, i%5)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines while 100 operations wait, %d before", n, before)
	}
	// The half with the 10 ms timeout expire before the rest complete.
	await.Until(t, 5*time.Second, "the 50 operations with a 10 ms timeout to expire", func() error {
		if n := p.Watched(); n != 50 {
			return fmt.Errorf("%d operations watched", n)
		}
		return nil
	})
	ready.Store(true)
	for k := range 5 {
		p.CheckAndComplete(k)
	}
	for _, op := range ops {
		op.wait(t)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after every operation ended, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
