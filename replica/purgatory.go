package replica

// The purgatory: requests that cannot be answered yet (an acks=all produce
// waiting for the high watermark, a fetch waiting for MinBytes, later a
// follower fetch or a transaction marker) wait here, watched under the
// partitions whose progress can complete them, until they complete or
// their deadline passes. Kafka's DelayedOperationPurgatory, without its
// timing wheel: Go's runtime timers already are one.
//
// Which goroutine completes an operation (Kafka's choice: the thread that
// triggered it):
//   - TryCompleteElseWatch's caller, when the operation can complete at
//     once. That costs no allocation, no timer and no goroutine: the
//     first TryComplete runs before anything is registered.
//   - CheckAndComplete's caller: the goroutine that appended to a
//     partition, moved its high watermark or changed its leadership. The
//     replica manager calls it only after releasing the partition's lock
//     and the log's locks, so a completion may read partitions (a fetch
//     does) without deadlocking against the appender that woke it.
//   - the timer's goroutine (time.AfterFunc) at the deadline.
//
// Locks (see LOCKS.md): each watch shard's mu guards its key → operations
// map and is never held while an operation runs; each operation's mu
// serialises its TryComplete and Expire calls, so an operation completes
// exactly once even when two partitions wake it at the same time. An
// operation's callbacks run under its mu and must not block.

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Operation is a request waiting in a purgatory. The purgatory calls
// TryComplete and Expire one at a time and never again after TryComplete
// returned true or Expire was called.
type Operation interface {
	// TryComplete answers the request and returns true if it can be
	// answered now; otherwise it returns false and changes nothing.
	TryComplete() bool
	// Expire answers the request at its deadline with what it has.
	Expire()
}

const purgatoryShards = 32

// Purgatory holds delayed operations keyed by K (a partition).
type Purgatory[K comparable] struct {
	seed   maphash.Seed
	shards [purgatoryShards]watchShard[K]
	// watched counts the operations waiting; zero lets CheckAndComplete
	// return without hashing or locking (the produce path with no
	// long-polling consumers).
	watched atomic.Int64
}

type watchShard[K comparable] struct {
	mu   sync.Mutex
	keys map[K]map[*delayed[K]]struct{}
}

// delayed is one watched operation.
type delayed[K comparable] struct {
	p    *Purgatory[K]
	op   Operation
	keys []K

	mu    sync.Mutex
	done  bool
	timer *time.Timer
}

// NewPurgatory returns an empty purgatory.
func NewPurgatory[K comparable]() *Purgatory[K] {
	p := &Purgatory[K]{seed: maphash.MakeSeed()}
	for i := range p.shards {
		p.shards[i].keys = map[K]map[*delayed[K]]struct{}{}
	}
	return p
}

func (p *Purgatory[K]) shard(key K) *watchShard[K] {
	return &p.shards[maphash.Comparable(p.seed, key)%purgatoryShards]
}

// TryCompleteElseWatch completes op at once if it can (returning true),
// or watches it under every key until CheckAndComplete on one of them
// completes it or timeout passes.
func (p *Purgatory[K]) TryCompleteElseWatch(op Operation, timeout time.Duration, keys ...K) bool {
	if op.TryComplete() {
		return true
	}
	d := &delayed[K]{p: p, op: op, keys: keys}
	// A trigger that finds d before it is fully set up waits on d.mu.
	d.mu.Lock()
	p.watched.Add(1)
	for _, k := range keys {
		sh := p.shard(k)
		sh.mu.Lock()
		set := sh.keys[k]
		if set == nil {
			set = map[*delayed[K]]struct{}{}
			sh.keys[k] = set
		}
		set[d] = struct{}{}
		sh.mu.Unlock()
	}
	// Progress may have come between the first check and the watch.
	if op.TryComplete() {
		d.done = true
		d.mu.Unlock()
		d.unwatch()
		return true
	}
	d.timer = time.AfterFunc(timeout, d.expire)
	d.mu.Unlock()
	return false
}

// CheckAndComplete tries to complete every operation watched under key
// and returns how many completed. The caller must not hold locks that an
// operation's TryComplete takes.
func (p *Purgatory[K]) CheckAndComplete(key K) int {
	if p.watched.Load() == 0 {
		return 0
	}
	sh := p.shard(key)
	sh.mu.Lock()
	set := sh.keys[key]
	if len(set) == 0 {
		sh.mu.Unlock()
		return 0
	}
	ops := make([]*delayed[K], 0, len(set))
	for d := range set {
		ops = append(ops, d)
	}
	sh.mu.Unlock()
	n := 0
	for _, d := range ops {
		if d.tryComplete() {
			n++
		}
	}
	return n
}

// Watched is the number of operations waiting.
func (p *Purgatory[K]) Watched() int { return int(p.watched.Load()) }

// ExpireAll expires every waiting operation (shutdown).
func (p *Purgatory[K]) ExpireAll() {
	var all []*delayed[K]
	for i := range p.shards {
		sh := &p.shards[i]
		sh.mu.Lock()
		for _, set := range sh.keys {
			for d := range set {
				all = append(all, d)
			}
		}
		sh.mu.Unlock()
	}
	for _, d := range all {
		d.expire()
	}
}

func (d *delayed[K]) tryComplete() bool {
	d.mu.Lock()
	if d.done || !d.op.TryComplete() {
		d.mu.Unlock()
		return false
	}
	d.done = true
	d.timer.Stop()
	d.mu.Unlock()
	d.unwatch()
	return true
}

func (d *delayed[K]) expire() {
	d.mu.Lock()
	if d.done {
		d.mu.Unlock()
		return
	}
	d.done = true
	d.timer.Stop()
	// Unwatched before it answers: whoever sees the answer sees the
	// purgatory without it.
	d.unwatch()
	d.op.Expire()
	d.mu.Unlock()
}

func (d *delayed[K]) unwatch() {
	for _, k := range d.keys {
		sh := d.p.shard(k)
		sh.mu.Lock()
		if set := sh.keys[k]; set != nil {
			delete(set, d)
			if len(set) == 0 {
				delete(sh.keys, k)
			}
		}
		sh.mu.Unlock()
	}
	d.p.watched.Add(-1)
}
