package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/integration"
)

// Nemesis injects one kind of fault and heals it. Heal undoes exactly
// what the last Inject did, and is a no-op when nothing is injected, so
// that a test's cleanup can always call it.
type Nemesis interface {
	Name() string
	// Inject starts the fault and says what it did.
	Inject(ctx context.Context) (string, error)
	// Heal ends it and says what it did ("" when there was nothing to do).
	Heal(ctx context.Context) (string, error)
}

// Faults is what the nemeses act on: the cluster, its network (nil on
// loopback) and an admin client to find partition leaders with.
type Faults struct {
	Cluster *integration.Cluster
	Net     *Network
	Admin   *kadm.Client
	Client  *kgo.Client // Admin's client, for requests kadm has no call for
	Topic   string
	// Rng makes the nemeses' random choices (nil: the global source), so
	// that a seeded schedule chooses the same where the cluster is in the
	// same state. Only the nemesis goroutine uses it.
	Rng *rand.Rand

	// hooks are the nodes' fault files' contents (environment.go);
	// hookMu guards them.
	hookMu sync.Mutex
	hooks  map[int]nodeFaults
}

func (f *Faults) intN(n int) int {
	if f.Rng == nil {
		return rand.IntN(n)
	}
	return f.Rng.IntN(n)
}

// picker chooses the node a nemesis acts on and says why.
type picker func(ctx context.Context, f *Faults) (int, string, error)

// LeaderOf picks a random partition's leader.
func LeaderOf(ctx context.Context, f *Faults) (int, string, error) {
	p, err := f.randomPartition(ctx, func(p Partition) bool { return p.Leader >= 0 })
	if err != nil {
		return 0, "", err
	}
	return int(p.Leader), fmt.Sprintf("leader of partition %d", p.ID), nil
}

// FollowerOf picks an in-sync follower of a random partition.
func FollowerOf(ctx context.Context, f *Faults) (int, string, error) {
	p, err := f.randomPartition(ctx, func(p Partition) bool { return len(p.followers()) > 0 })
	if err != nil {
		return 0, "", err
	}
	fs := p.followers()
	return int(fs[f.intN(len(fs))]), fmt.Sprintf("in-sync follower of partition %d (leader %d)", p.ID, p.Leader), nil
}

// AnyNode picks a random node.
func AnyNode(_ context.Context, f *Faults) (int, string, error) {
	n := f.Cluster.Nodes[f.intN(len(f.Cluster.Nodes))]
	return n.ID, "a random node", nil
}

func (p Partition) followers() []int32 {
	var out []int32
	for _, r := range p.ISR {
		if r != p.Leader {
			out = append(out, r)
		}
	}
	return out
}

func (f *Faults) randomPartition(ctx context.Context, ok func(Partition) bool) (Partition, error) {
	var last error
	for range 20 {
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ps, err := Partitions(mctx, f.Admin, f.Topic)
		cancel()
		if err == nil {
			ps = slices.DeleteFunc(ps, func(p Partition) bool { return !ok(p) })
			if len(ps) > 0 {
				return ps[f.intN(len(ps))], nil
			}
			err = errors.New("no partition has the node wanted")
		}
		last = err
		select {
		case <-ctx.Done():
			return Partition{}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return Partition{}, fmt.Errorf("choosing a partition of %s: %w", f.Topic, last)
}

// describePartitions is each partition's leader and ISR, for the log:
// what the cluster made of a fault.
func (f *Faults) describePartitions() string {
	mctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ps, err := Partitions(mctx, f.Admin, f.Topic)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "p%d leader %d isr %v; ", p.ID, p.Leader, p.ISR)
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// Kill is kill -9 of the node pick chooses; Heal restarts it on its data.
func Kill(f *Faults, name string, pick picker) Nemesis {
	return &nodeFault{f: f, name: name, pick: pick, verb: "kill -9",
		inject: func(_ context.Context, id int) error { return f.Cluster.Kill(id) },
		heal:   func(ctx context.Context, id int) error { return f.Cluster.Restart(ctx, id) }}
}

// Pause is SIGSTOP of the node pick chooses; Heal is SIGCONT.
func Pause(f *Faults, name string, pick picker) Nemesis {
	signal := func(sig syscall.Signal) func(context.Context, int) error {
		return func(_ context.Context, id int) error {
			pid := f.Cluster.Node(id).Pid()
			if pid == 0 {
				return fmt.Errorf("node %d is not running", id)
			}
			// The process group: the node and anything it forked.
			if err := syscall.Kill(-pid, sig); err != nil {
				return fmt.Errorf("signalling node %d (pid %d) with %v: %w", id, pid, sig, err)
			}
			return nil
		}
	}
	return &nodeFault{f: f, name: name, pick: pick, verb: "SIGSTOP", inject: signal(syscall.SIGSTOP), heal: signal(syscall.SIGCONT)}
}

// Isolate cuts the node pick chooses off from the other nodes (the
// client still reaches every node); Heal joins it again. It needs the
// cluster on a Network.
func Isolate(f *Faults, name string, pick picker) Nemesis {
	return &nodeFault{f: f, name: name, pick: pick, verb: "cut off from the other nodes:",
		inject: func(ctx context.Context, id int) error {
			if f.Net == nil {
				return errors.New("a network partition needs the cluster in network namespaces")
			}
			return f.Net.Isolate(ctx, id)
		},
		heal: func(ctx context.Context, id int) error { return f.Net.Heal(ctx, id) }}
}

// nodeFault is a fault on one node at a time.
type nodeFault struct {
	f            *Faults
	name, verb   string
	pick         picker
	inject, heal func(context.Context, int) error

	on int // the node the fault is on; 0 when healed (node ids start at 1)
}

func (n *nodeFault) Name() string { return n.name }

func (n *nodeFault) Inject(ctx context.Context) (string, error) {
	if n.on != 0 {
		return "", fmt.Errorf("%s: node %d still has the last fault", n.name, n.on)
	}
	id, why, err := n.pick(ctx, n.f)
	if err != nil {
		return "", err
	}
	if err := n.inject(ctx, id); err != nil {
		return "", fmt.Errorf("%s node %d: %w", n.verb, id, err)
	}
	n.on = id
	return fmt.Sprintf("%s node %d (%s)", n.verb, id, why), nil
}

func (n *nodeFault) Heal(ctx context.Context) (string, error) {
	if n.on == 0 {
		return "", nil
	}
	id := n.on
	if err := n.heal(ctx, id); err != nil {
		return "", fmt.Errorf("healing %s of node %d: %w", n.verb, id, err)
	}
	n.on = 0
	return fmt.Sprintf("healed node %d", id), nil
}

// Schedule is how a nemesis is run: each fault lasts Hold; after a heal
// the cluster gets up to Settle to bring every replica back in sync, then
// Between before the next fault.
type Schedule struct {
	Hold, Settle, Between time.Duration
}

// RunNemesis injects and heals faults on schedule until ctx ends, records
// every step in h, and heals the last fault before it returns. A fault
// that cannot be injected or healed ends the run with the error.
func RunNemesis(ctx context.Context, h *History, log *slog.Logger, f *Faults, nem Nemesis, s Schedule) error {
	note := func(step, what string) {
		h.Add(Op{Process: "nemesis", Type: Info, F: Fault, Value: step, Error: nem.Name() + ": " + what})
		log.Info("nemesis", "nemesis", nem.Name(), "did", what)
	}
	heal := func() error {
		// Healing must happen even when ctx has ended.
		hctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		what, err := nem.Heal(hctx)
		if what != "" {
			note(FaultStop, what)
		}
		if err != nil {
			return err
		}
		if err := WaitInSync(hctx, f.Admin, f.Topic, s.Settle); err != nil {
			note(FaultStop, "not settled: "+err.Error())
		}
		return nil
	}
	wait := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	for wait(s.Between) {
		what, err := nem.Inject(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return errors.Join(err, heal())
		}
		note(FaultStart, what)
		wait(s.Hold)
		log.Info("nemesis", "nemesis", nem.Name(), "before heal", f.describePartitions())
		if err := heal(); err != nil {
			return err
		}
	}
	return heal()
}
