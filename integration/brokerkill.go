package integration

import (
	"context"
	"fmt"
)

// killableBroker is a broker a scenario kills with SIGKILL and restarts:
// on a cluster target one of the target's brokers, picked at the kill
// (the leader or coordinator the scenario wants gone); on a single-node
// target a node the scenario started for itself, since the shared node
// also serves the scenarios that come after.
type killableBroker struct {
	// describe names the broker in messages; on a cluster it says which
	// one was killed once kill has run.
	describe string
	// replicas is what the scenario's topics should have to survive the
	// kill: 3 on a cluster, 1 on a single node.
	replicas int
	kill     func(ctx context.Context) error
	restart  func(ctx context.Context) error
}

// brokerToKill prepares the broker a scenario kills. what says which
// broker pick chooses ("the data partition's leader"). On a single-node
// target it starts the scenario's own node and points e.Target at it
// until the returned restore runs, so that the scenario's tools and
// clients talk to the node it kills.
func brokerToKill(ctx context.Context, e *Env, what string, pick func(ctx context.Context) (int, error)) (*killableBroker, func(), error) {
	if e.Target.Topology().Cluster() {
		cl, ok := e.Target.(interface{ Cluster() *Cluster })
		if !ok || cl.Cluster() == nil {
			return nil, nil, Skipf("the %s target lets the harness kill none of its brokers", e.Target.Name())
		}
		b := &killableBroker{describe: what, replicas: 3}
		var victim int
		b.kill = func(ctx context.Context) error {
			var err error
			if victim, err = pick(ctx); err != nil {
				return fmt.Errorf("finding %s: %w", what, err)
			}
			b.describe = fmt.Sprintf("broker %d (%s)", victim, what)
			return cl.Cluster().Kill(victim)
		}
		b.restart = func(ctx context.Context) error { return cl.Cluster().Restart(ctx, victim) }
		return b, func() {}, nil
	}
	n, err := e.StartNode(ctx, NodeSpec{})
	if err != nil {
		return nil, nil, err
	}
	shared := e.Target
	e.Target = ownNodeTarget{n}
	b := &killableBroker{describe: "the scenario's own " + n.Flavor + " node", replicas: 1,
		kill:    func(context.Context) error { n.Kill(); return nil },
		restart: n.Restart}
	return b, func() { e.Target = shared }, nil
}
