package controller

// Fast detection of dead brokers (Gregor's addition; Kafka's controller
// waits for broker.session.timeout.ms, 9 s by default). A broker that is
// killed leaves two traces at once: the connection it heartbeated on
// closes, and its listeners stop accepting. When the first is seen (the
// broker's heartbeat connection closed, or this controller just became
// the active one), the controller dials every endpoint the broker
// registered; if each is refused, nothing listens there any more, so the
// process is gone and the broker is fenced at once, as a lapsed session
// would fence it. Only listeners this controller has seen accepting (it
// dials each broker once when the broker registers) count: an advertised
// address the controller cannot reach (a port mapped for clients
// elsewhere) never fences anyone. A probe is one TCP connection to the
// client listener, closed at once; the broker of the controller's own
// process (a combined node) is never probed. A connection that succeeds or times out proves nothing
// (a paused process, a network partition, a broker that only reconnects)
// and leaves the session to lapse as in Kafka.
//
// Goroutines: each probe runs on a goroutine of its own, at most one per
// broker at a time (probeMu guards probing, a leaf lock); its verdict is
// applied on the loop (submit), against the broker epoch it probed.

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/metadata"
)

// newLeaderProbeDelay is how long after winning the election a new active
// controller probes the brokers: it must be serving by then.
const newLeaderProbeDelay = 300 * time.Millisecond

// probeTries dials, probeSpacing apart, look for a dead broker's
// listeners gone.
const (
	probeTries   = 4
	probeSpacing = 100 * time.Millisecond
)

// probeDialTimeout bounds one endpoint's dial.
const probeDialTimeout = 500 * time.Millisecond

// ProbeBroker checks in the background whether broker id, registered at
// epoch, still listens, and fences it at once if it does not. Only the
// active controller acts on it.
func (c *Controller) ProbeBroker(id int32, epoch int64) {
	if !c.Active() {
		return
	}
	c.probeMu.Lock()
	if c.probing == nil {
		c.probing = map[int32]bool{}
	}
	if c.probing[id] {
		c.probeMu.Unlock()
		return
	}
	c.probing[id] = true
	c.probeMu.Unlock()
	go func() {
		defer func() {
			c.probeMu.Lock()
			delete(c.probing, id)
			c.probeMu.Unlock()
		}()
		c.probe(id, epoch)
	}()
}

func (c *Controller) probe(id int32, epoch int64) {
	b := c.Image().Brokers[id]
	if b == nil || b.Epoch != epoch || b.Fenced || len(b.Endpoints) == 0 {
		return
	}
	c.probeMu.Lock()
	known := c.reachable[id] == epoch
	c.probeMu.Unlock()
	if !known {
		return
	}
	// A dying process closes its connections before its listeners: a
	// dial right after the close may still be accepted, so the broker is
	// given a few tries to be found gone.
	gone := false
	for try := 0; try < probeTries && !gone; try++ {
		if try > 0 {
			time.Sleep(probeSpacing)
		}
		gone = refusesAll(b.Endpoints)
	}
	if !gone {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.submit(ctx, func(img *metadata.Image, _ int64) ([]metadata.Record, any) {
		b := img.Brokers[id]
		if b == nil || b.Epoch != epoch || b.Fenced {
			return nil, nil
		}
		c.logger.Info("fencing broker whose listeners refuse connections: its process is gone", "broker", id, "epoch", epoch)
		if s := c.sessions[id]; s != nil {
			s.lastSeen = time.Time{}
		}
		return c.env.FenceBrokerRecords(img, b), nil
	})
	if err != nil && !errors.Is(err, errStopped) {
		c.logger.Warn("fencing a dead broker was not committed", "broker", id, "err", err)
	}
}

// refusesAll reports whether every endpoint refuses a connection.
func refusesAll(eps []metadata.Endpoint) bool {
	for _, ep := range eps {
		conn, err := net.DialTimeout("tcp", ep.Addr(), probeDialTimeout)
		if err == nil {
			conn.Close()
			return false
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return false
		}
	}
	return true
}

// noteReachable dials the listeners of each broker registered anew in
// next (in the background, once per broker epoch) and remembers the epoch
// whose listeners accepted. It is an image subscription.
func (c *Controller) noteReachable(prev, next *metadata.Image) {
	for id, b := range next.Brokers {
		if id == c.cfg.NodeID {
			// The broker of this very process is never probed.
			continue
		}
		if prev != nil && prev.Brokers[id] != nil && prev.Brokers[id].Epoch == b.Epoch {
			continue
		}
		if len(b.Endpoints) == 0 {
			continue
		}
		go func() {
			for _, ep := range b.Endpoints {
				conn, err := net.DialTimeout("tcp", ep.Addr(), probeDialTimeout)
				if err != nil {
					return
				}
				conn.Close()
			}
			c.probeMu.Lock()
			if c.reachable == nil {
				c.reachable = map[int32]int64{}
			}
			c.reachable[id] = max(c.reachable[id], b.Epoch)
			c.probeMu.Unlock()
		}()
	}
}

// probeAllBrokers probes every unfenced broker: a new active controller
// does it once, since a broker that died with the old one (a combined
// node) left no connection here to see close.
func (c *Controller) probeAllBrokers() {
	for id, b := range c.Image().Brokers {
		if !b.Fenced {
			c.ProbeBroker(id, b.Epoch)
		}
	}
}
