package bench

// The connections benchmark's storm against the broker's connection
// limits, on a fresh node per target started with
// max.connection.creation.rate=StormRate and max.connections=StormMax
// (KIP-612 and Kafka's connection quotas; both make the acceptor wait,
// neither refuses):
//   - a rate storm: StormConnections connections from the benchmark's
//     dialers at once, each dialled, answered one ApiVersions and closed;
//     the node takes a burst of the rate times the quota window's span,
//     then holds the rest to the rate. Timed until the last is answered.
//   - a full house: StormMax connections opened and held (each
//     answered), then stormWaiting more dialled with an ApiVersions sent
//     on each; after 2 s, how many were answered (past max.connections:
//     none should be), then as many of the held ones closed and the time
//     until every waiting one is answered.

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// StormRate and StormMax are the limits the storm's node runs with.
	StormRate = 500
	StormMax  = 1000
	// stormWaiting are the connections dialled past StormMax.
	stormWaiting = 100

	figStormRate     = "storm past max.connection.creation.rate: every connection answered (s)"
	figStormAccepted = "storm past max.connection.creation.rate: connections answered a second after the burst"
	figStormEarly    = "connections past max.connections answered before any closed (of 100)"
	figStormServed   = "connections past max.connections: all answered after as many closed (s)"
)

func stormFigures() []string {
	return []string{figStormRate, figStormAccepted, figStormEarly, figStormServed}
}

// stormPhases runs both storms on a node started with the limits.
func stormPhases(ctx context.Context, cfg ConnConfig, tools *integration.Tools, target, gregorBin, dir string, figs map[string]float64) (string, error) {
	n, _, err := startScaleNode(ctx, tools, target, gregorBin, filepath.Join(dir, "storm"),
		fmt.Sprintf("max.connection.creation.rate=%d", StormRate), fmt.Sprintf("max.connections=%d", StormMax))
	if err != nil {
		return "", err
	}
	defer func() { _ = n.proc.Stop(60 * time.Second) }()
	if err := integration.WaitReady(ctx, n.bootstrap, n.proc.Done()); err != nil {
		return "", err
	}
	// WaitReady's connections count against the rate too; a window's
	// span (11 s by default) later they no longer do.
	time.Sleep(12 * time.Second)

	answered := make([]time.Duration, 0, cfg.StormConnections)
	var mu sync.Mutex
	start := time.Now()
	err = forEachParallel(cfg.StormConnections, cfg.Dialers, func(k int) error {
		c, err := dialAnswered(n.bootstrap, int32(k))
		if err != nil {
			return err
		}
		c.c.Close()
		mu.Lock()
		answered = append(answered, time.Since(start))
		mu.Unlock()
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("rate storm: %w", err)
	}
	total := time.Since(start)
	figs[figStormRate] = total.Seconds()
	// The burst a rate measured over 11 one-second samples allows is
	// ten seconds' worth; the connections after it came at the rate the
	// node held them to.
	slices.Sort(answered)
	burst := min(StormRate*10, len(answered)-1)
	if span := answered[len(answered)-1] - answered[burst]; span > 0 {
		figs[figStormAccepted] = float64(len(answered)-1-burst) / span.Seconds()
	}
	note := fmt.Sprintf("rate storm: answer %d (the first after the burst) after %.2f s, the last (%d) after %.1f s", burst+1, answered[burst].Seconds(), len(answered), total.Seconds())

	// The full house, once the rate's window has forgotten the storm.
	time.Sleep(12 * time.Second)
	held := make([]*benchConn, StormMax)
	defer func() {
		for _, c := range held {
			if c != nil {
				c.c.Close()
			}
		}
	}()
	err = forEachParallel(StormMax, cfg.Dialers, func(k int) error {
		c, err := dialAnswered(n.bootstrap, int32(k))
		held[k] = c
		return err
	})
	if err != nil {
		return note, fmt.Errorf("opening %d connections: %w", StormMax, err)
	}
	var early, late atomic.Int32
	waitingDone := make(chan error, 1)
	waitingStart := make(chan time.Time, 1)
	go func() {
		waitingDone <- forEachParallel(stormWaiting, stormWaiting, func(k int) error {
			c, err := net.DialTimeout("tcp", n.bootstrap, 30*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			bc := newBenchConn(c)
			if err := bc.roundTrip(kmsg.NewPtrApiVersionsRequest(), 0, int32(k)); err != nil {
				return err
			}
			select {
			case <-waitingStart:
				late.Add(1)
			default:
				early.Add(1)
			}
			return nil
		})
	}()
	time.Sleep(2 * time.Second)
	figs[figStormEarly] = float64(early.Load())
	closed := time.Now()
	close(waitingStart)
	for i := range stormWaiting {
		held[i].c.Close()
		held[i] = nil
	}
	select {
	case err := <-waitingDone:
		if err != nil {
			return note, fmt.Errorf("connections past max.connections: %w", err)
		}
	case <-time.After(2 * time.Minute):
		return note, fmt.Errorf("connections past max.connections: %d of %d answered 2 minutes after as many closed", early.Load()+late.Load(), stormWaiting)
	}
	figs[figStormServed] = time.Since(closed).Seconds()
	return note, nil
}

// dialAnswered opens a connection and waits for its ApiVersions answer.
func dialAnswered(addr string, correlation int32) (*benchConn, error) {
	c, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		return nil, err
	}
	bc := newBenchConn(c)
	if err := bc.roundTrip(kmsg.NewPtrApiVersionsRequest(), 0, correlation); err != nil {
		c.Close()
		return nil, fmt.Errorf("ApiVersions: %w", err)
	}
	return bc, nil
}
