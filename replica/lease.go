package replica

// The leader lease: this node acts as the leader of a partition (takes
// appends, answers fetches, offsets and epochs, moves the high watermark,
// hosts the coordinator of an internal topic's partition) only while the
// active controller could not have moved that leadership away.
//
// The controller moves a leadership when the leader's broker is fenced,
// which it does once broker.session.timeout.ms has passed without a
// heartbeat. A broker cut off from the quorum does not hear of its fencing,
// and its image goes on naming it the leader: in Kafka it goes on answering
// as the leader, so a consumer whose metadata came from it reads its stale
// log end (ListOffsets), is told OFFSET_OUT_OF_RANGE for an offset the new
// leader has written and committed (and resets to the start or the end),
// or reads stale committed offsets from its group coordinator. The broker
// (broker/broker.go, sendHeartbeat) therefore keeps a lease: each heartbeat the controller
// answers unfenced extends it to the heartbeat's send time plus the session
// timeout (less a margin), which is no later than the controller could
// fence it, and an answer that it is fenced ends it. Between the lease's
// end and the next unfenced answer, which the controller gives only once
// the broker's metadata has caught up with its fencing (controller/
// brokers.go), the partitions' operations answer NOT_LEADER_OR_FOLLOWER
// (clients refresh their metadata and go elsewhere) and the leadership
// listeners hear this node resign; when the lease is regained they hear it
// become the leader again, on the image as it then is.
//
// A partition with one replica keeps serving without the lease: no other
// replica could be made its leader, so nothing it serves can be stale.
//
// A manager whose owner never calls SetLeaderLease (unit tests, tools)
// holds the lease for ever.
//
// Goroutines and locks: held() is read, without a lock, by every
// operation's leadership check. SetLeaderLease runs on the broker's
// heartbeat goroutine, the lapse timer on its own; both then take applyMu
// (leaseChanged) to tell the listeners, as ApplyImage does.

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// leaderLease is when the lease ends, read on every leadership check.
type leaderLease struct {
	// base is the monotonic reference of until.
	base time.Time
	// until is the end of the lease in nanoseconds after base;
	// math.MaxInt64 while no lease is kept (always held).
	until atomic.Int64
}

func newLeaderLease() *leaderLease {
	l := &leaderLease{base: time.Now()}
	l.until.Store(math.MaxInt64)
	return l
}

// held reports whether the lease runs now.
func (l *leaderLease) held() bool {
	until := l.until.Load()
	return until == math.MaxInt64 || int64(time.Since(l.base)) < until
}

// leaseState is the manager's side of the lease: the timer that notices
// its end, and what the listeners were last told. mu guards timer and
// stopped.
type leaseState struct {
	mu    sync.Mutex
	timer *time.Timer
	// stopped is set by Stop: nothing is told or woken after it.
	stopped bool
	// announcedHeld is whether the listeners were last told with the
	// lease held (true before the first SetLeaderLease). It is written
	// under applyMu, and read without it to skip taking applyMu when
	// nothing changed.
	announcedHeld atomic.Bool
	// everHeld is whether the lease kept by SetLeaderLease has ever been
	// held: a lapse before the first heartbeat's answer (start-up) is not
	// worth a warning. applyMu guards it.
	everHeld bool
}

// SetLeaderLease sets when this node's leader lease ends: a zero time
// ends it now (the controller answered that this broker is fenced). The
// first call starts keeping the lease; until then it is held. It never
// waits for applyMu (a heartbeat must not queue behind an image whose logs
// are being opened): the listeners are told on a goroutine of their own.
func (m *Manager) SetLeaderLease(until time.Time) {
	ns := int64(0)
	if !until.IsZero() {
		ns = max(int64(until.Sub(m.lease.base)), 0)
	}
	m.leaseState.mu.Lock()
	if m.leaseState.stopped {
		m.leaseState.mu.Unlock()
		return
	}
	m.lease.until.Store(ns)
	if m.leaseState.timer == nil {
		m.leaseState.timer = time.AfterFunc(time.Until(until), m.leaseChanged)
	} else {
		m.leaseState.timer.Reset(time.Until(until))
	}
	m.leaseState.mu.Unlock()
	if m.lease.held() != m.leaseState.announcedHeld.Load() {
		go m.leaseChanged()
	}
}

// stopLease stops the lapse timer (Stop); a leaseChanged already on its
// way does nothing.
func (m *Manager) stopLease() {
	m.leaseState.mu.Lock()
	defer m.leaseState.mu.Unlock()
	m.leaseState.stopped = true
	if m.leaseState.timer != nil {
		m.leaseState.timer.Stop()
	}
}

// leaseChanged tells the leadership listeners of every partition this node
// stopped or started leading with the lease, and wakes what waits on them
// (a parked acks=all produce fails, a parked fetch answers), when the lease
// was gained or lost since they were last told.
func (m *Manager) leaseChanged() {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.leaseState.mu.Lock()
	stopped := m.leaseState.stopped
	m.leaseState.mu.Unlock()
	if stopped {
		return
	}
	held := m.lease.held()
	if held == m.leaseState.announcedHeld.Load() {
		return
	}
	m.leaseState.announcedHeld.Store(held)
	switch {
	case held && m.leaseState.everHeld:
		m.log.Info("leader lease held again: leading the partitions the image gives this node")
	case held:
		m.leaseState.everHeld = true
	case m.leaseState.everHeld:
		m.log.Warn("leader lease lapsed: the controller did not answer a heartbeat in time, or fenced this broker; leaderships of replicated partitions are suspended until it answers unfenced")
	}
	for _, p := range m.partitions() {
		if held && p.log != nil {
			p.maybeAdvanceHighWatermark()
		}
		m.announce(p)
		m.wake(p.tp)
	}
}
