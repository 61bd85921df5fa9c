package network

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/internal/await"
)

// A handler that blocks must not delay the next one: the pool hands work
// only to a worker that is waiting, and otherwise starts one.
func TestAsyncPoolNeverQueuesBehindABlockedHandler(t *testing.T) {
	p := newAsyncPool(time.Minute)
	defer p.close()
	release := make(chan struct{})
	p.run(func() { <-release })
	ran := make(chan struct{})
	p.run(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the second handler waited for the blocked first one")
	}
	close(release)
}

// A finished worker waits for the next handler and runs it, rather than
// exiting: under steady load handlers keep landing on the same goroutine.
func TestAsyncPoolReusesIdleWorkers(t *testing.T) {
	p := newAsyncPool(time.Minute)
	defer p.close()
	done := make(chan struct{})
	p.run(func() { done <- struct{}{} })
	<-done
	for range 50 {
		// What run does when a worker waits: the send succeeds. Retried
		// because the worker may still be on its way back to waiting.
		await.Until(t, 10*time.Second, "the worker to take the next handler", func() error {
			select {
			case p.work <- func() { done <- struct{}{} }:
				return nil
			default:
				return errors.New("no worker waits")
			}
		})
		<-done
	}
	if n := p.started.Load(); n != 1 {
		t.Fatalf("51 sequential handlers started %d workers; want 1", n)
	}
}

// Closing the pool lets waiting workers exit; a running handler finishes
// first.
func TestAsyncPoolCloseStopsWorkers(t *testing.T) {
	p := newAsyncPool(time.Minute)
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range 4 {
		wg.Add(1)
		p.run(func() { defer wg.Done(); <-release })
	}
	close(release)
	wg.Wait()
	p.close()
	await.Until(t, 10*time.Second, "the workers to exit", func() error { return goroutinesAtMost(before) })
}

// An idle worker exits by itself after the idle time.
func TestAsyncPoolIdleWorkerExits(t *testing.T) {
	p := newAsyncPool(20 * time.Millisecond)
	defer p.close()
	before := runtime.NumGoroutine()
	done := make(chan struct{})
	p.run(func() { close(done) })
	<-done
	await.Until(t, 10*time.Second, "the workers to exit", func() error { return goroutinesAtMost(before) })
}

// goroutinesAtMost fails while more than n goroutines run.
func goroutinesAtMost(n int) error {
	if g := runtime.NumGoroutine(); g > n {
		return fmt.Errorf("%d goroutines, %d before", g, n)
	}
	return nil
}
