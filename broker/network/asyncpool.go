package network

import (
	"sync"
	"sync/atomic"
	"time"
)

// asyncPool runs the handlers that leave the connection goroutine
// (request.goAsync: group and admin requests that may wait). A worker that
// finishes waits a while for the next handler instead of exiting, so under
// load a handler runs on a goroutine whose stack has already grown to the
// depth of a group commit (handler, coordinator, replica manager, log
// append). A fresh goroutine per request grew its stack from the minimum
// on every request: with the replica layer's extra frames, copying stacks
// was a quarter of the broker's CPU under 8 concurrent offset committers.
//
// The pool never blocks or queues: a handler is given to a waiting worker
// if there is one, and otherwise gets a new goroutine, so a handler that
// blocks (a JoinGroup waiting for its rebalance) never delays another.
type asyncPool struct {
	work chan func()
	idle time.Duration
	stop chan struct{}
	once sync.Once
	// started counts the workers ever started (tests).
	started atomic.Int64
}

// asyncWorkerIdle is how long a finished worker waits for more work.
const asyncWorkerIdle = 10 * time.Second

func newAsyncPool(idle time.Duration) *asyncPool {
	return &asyncPool{work: make(chan func()), idle: idle, stop: make(chan struct{})}
}

// run starts fn on a waiting worker or on a new one.
func (p *asyncPool) run(fn func()) {
	select {
	case p.work <- fn:
	default:
		p.started.Add(1)
		go p.worker(fn)
	}
}

func (p *asyncPool) worker(fn func()) {
	fn()
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		select {
		case fn := <-p.work:
			fn()
			t.Reset(p.idle)
		case <-t.C:
			return
		case <-p.stop:
			return
		}
	}
}

// close lets every waiting worker exit; handlers still running finish
// and then exit too.
func (p *asyncPool) close() { p.once.Do(func() { close(p.stop) }) }
