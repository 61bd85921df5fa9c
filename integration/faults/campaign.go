package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/integration"
)

// A Shape is a network partition: which links to drop among the node
// ids, and a description of it for the log.
type Shape func(rng *rand.Rand, ids []int) ([]Link, string)

// both is every link between a node of a and a node of b, both ways.
func both(a, b []int) []Link {
	var out []Link
	for _, x := range a {
		for _, y := range b {
			out = append(out, Link{x, y}, Link{y, x})
		}
	}
	return out
}

func shuffled(rng *rand.Rand, ids []int) []int {
	out := slices.Clone(ids)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// IsolateOne cuts a random node off from all the others, both ways.
func IsolateOne(rng *rand.Rand, ids []int) ([]Link, string) {
	s := shuffled(rng, ids)
	return both(s[:1], s[1:]), fmt.Sprintf("node %d isolated from %v", s[0], s[1:])
}

// MajoritySplit splits the nodes into a minority (fewer than half) and a
// majority that cannot reach each other.
func MajoritySplit(rng *rand.Rand, ids []int) ([]Link, string) {
	s := shuffled(rng, ids)
	k := max(1, (len(s)-1)/2)
	return both(s[:k], s[k:]), fmt.Sprintf("minority %v split from majority %v", s[:k], s[k:])
}

// Bridge splits the nodes but one into two halves that cannot reach each
// other, while that one (the bridge) reaches both: A sees B and C, B and
// C do not see each other.
func Bridge(rng *rand.Rand, ids []int) ([]Link, string) {
	s := shuffled(rng, ids)
	rest := s[1:]
	h := len(rest) / 2
	return both(rest[:h], rest[h:]), fmt.Sprintf("node %d bridges %v and %v, which do not see each other", s[0], rest[:h], rest[h:])
}

// OneWay drops a random node's packets in one direction only: either it
// reaches the others and hears nothing back, or it hears them and is not
// heard.
func OneWay(rng *rand.Rand, ids []int) ([]Link, string) {
	s := shuffled(rng, ids)
	var links []Link
	deaf := rng.IntN(2) == 0
	for _, o := range s[1:] {
		if deaf {
			links = append(links, Link{o, s[0]})
		} else {
			links = append(links, Link{s[0], o})
		}
	}
	if deaf {
		return links, fmt.Sprintf("node %d receives nothing from %v (it still sends)", s[0], s[1:])
	}
	return links, fmt.Sprintf("node %d's packets to %v are dropped (it still receives)", s[0], s[1:])
}

// Cut drops the links shape picks among the nodes of f.Net; Heal restores
// exactly those.
func Cut(f *Faults, name string, shape Shape) Nemesis {
	return &cut{f: f, name: name, shape: shape}
}

type cut struct {
	f     *Faults
	name  string
	shape Shape
	on    []Link
}

func (c *cut) Name() string { return c.name }

func (c *cut) Inject(ctx context.Context) (string, error) {
	if c.f.Net == nil {
		return "", errors.New("a network partition needs the cluster in network namespaces")
	}
	if c.on != nil {
		return "", fmt.Errorf("%s: the last cut is still on", c.name)
	}
	links, what := c.shape(c.f.rng(), c.f.Net.IDs())
	if err := c.f.Net.Drop(ctx, links); err != nil {
		return "", fmt.Errorf("%s (%s): %w", c.name, what, err)
	}
	c.on = links
	return fmt.Sprintf("dropped %d links: %s", len(links), what), nil
}

func (c *cut) Heal(ctx context.Context) (string, error) {
	if c.on == nil {
		return "", nil
	}
	if err := c.f.Net.Restore(ctx, c.on); err != nil {
		return "", fmt.Errorf("healing %s: %w", c.name, err)
	}
	n := len(c.on)
	c.on = nil
	return fmt.Sprintf("restored %d links", n), nil
}

func (f *Faults) rng() *rand.Rand {
	if f.Rng == nil {
		return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return f.Rng
}

// Combine injects its parts together, in order, and heals them in the
// same order: the campaign puts the network part first, so that a killed
// node restarts on a whole network (a restart waits for the broker to
// answer, which it does once it has caught up with the controllers).
func Combine(parts ...Nemesis) Nemesis { return &combined{parts: parts} }

type combined struct {
	parts []Nemesis
	on    int // how many parts are injected
}

func (c *combined) Name() string {
	var names []string
	for _, p := range c.parts {
		names = append(names, p.Name())
	}
	return strings.Join(names, "+")
}

func (c *combined) Inject(ctx context.Context) (string, error) {
	var did []string
	for _, p := range c.parts {
		what, err := p.Inject(ctx)
		if err != nil {
			// The parts injected are healed even when ctx has ended
			// (the run's end may be why this part failed).
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
			_, herr := c.Heal(hctx)
			cancel()
			return "", errors.Join(fmt.Errorf("%s: %w", p.Name(), err), herr)
		}
		c.on++
		did = append(did, p.Name()+": "+what)
	}
	return strings.Join(did, "; "), nil
}

func (c *combined) Heal(ctx context.Context) (string, error) {
	var did []string
	var errs []error
	for _, p := range c.parts[:c.on] {
		what, err := p.Heal(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		if what != "" {
			did = append(did, p.Name()+": "+what)
		}
	}
	// A part that failed to heal is healed again by the next call (the
	// parts' own Heal are no-ops once healed).
	if len(errs) == 0 {
		c.on = 0
	}
	return strings.Join(did, "; "), errors.Join(errs...)
}

// nemesisKind is one entry of the campaign's catalogue.
type nemesisKind struct {
	name string
	make func(f *Faults) Nemesis
	// pause nemeses hold their fault past every session timeout.
	pause bool
}

// processNemeses act on a node's process, networkNemeses on its links;
// a combined schedule takes one of each, so the two never act on the
// same thing.
var (
	processNemeses = []nemesisKind{
		{name: "kill-leader", make: func(f *Faults) Nemesis { return Kill(f, "kill-leader", LeaderOf) }},
		{name: "kill-follower", make: func(f *Faults) Nemesis { return Kill(f, "kill-follower", FollowerOf) }},
		{name: "kill-random", make: func(f *Faults) Nemesis { return Kill(f, "kill-random", AnyNode) }},
		{name: "pause-leader", make: func(f *Faults) Nemesis { return Pause(f, "pause-leader", LeaderOf) }, pause: true},
		{name: "pause-random", make: func(f *Faults) Nemesis { return Pause(f, "pause-random", AnyNode) }, pause: true},
		{name: "kill-controller-reassigning", make: func(f *Faults) Nemesis { return KillControllerReassigning(f, "kill-controller-reassigning") }},
	}
	networkNemeses = []nemesisKind{
		{name: "isolate-leader", make: func(f *Faults) Nemesis { return Isolate(f, "isolate-leader", LeaderOf) }},
		{name: "isolate-random", make: func(f *Faults) Nemesis { return Cut(f, "isolate-random", IsolateOne) }},
		{name: "split-majority", make: func(f *Faults) Nemesis { return Cut(f, "split-majority", MajoritySplit) }},
		{name: "bridge", make: func(f *Faults) Nemesis { return Cut(f, "bridge", Bridge) }},
		{name: "one-way", make: func(f *Faults) Nemesis { return Cut(f, "one-way", OneWay) }},
	}
	// environmentNemeses act on a node's machine (environment.go): they
	// join schedules that have no process nemesis (a disk that fails
	// restarts its node), drawn from a stream of their own so that the
	// other draws of a seed stay what they were before these existed.
	environmentNemeses = []nemesisKind{
		{name: "slow-leader", make: func(f *Faults) Nemesis { return Slow(f, "slow-leader", LeaderOf) }},
		{name: "slow-random", make: func(f *Faults) Nemesis { return Slow(f, "slow-random", AnyNode) }},
		{name: "disk-full-leader", make: func(f *Faults) Nemesis { return DiskFull(f, "disk-full-leader", LeaderOf) }},
		{name: "disk-full-random", make: func(f *Faults) Nemesis { return DiskFull(f, "disk-full-random", AnyNode) }},
		{name: "disk-fail-random", make: func(f *Faults) Nemesis { return DiskFail(f, "disk-fail-random", AnyNode) }},
		{name: "clock-step-leader", make: func(f *Faults) Nemesis { return ClockStep(f, "clock-step-leader", LeaderOf) }},
	}
)

// environmentStream tells the environment's draws of a schedule apart
// from its other draws (NewPlan).
const environmentStream = 0x656e76 // "env"

// Layouts are the cluster shapes a campaign can pick, with their node
// ids (which the network needs before the cluster is laid out).
var Layouts = map[integration.ClusterLayout][]int{
	integration.Combined3: {1, 2, 3},
	integration.Combined5: {1, 2, 3, 4, 5},
	integration.Split3x3:  {101, 102, 103, 1, 2, 3},
}

// pauseHold is the least a SIGSTOP lasts: past the broker session
// (clusterProperties) and the consumers' group session (10 s).
const pauseHold = 12 * time.Second

// Plan is one schedule of a campaign, drawn from the campaign's seed and
// the schedule's index alone, so that `FAULTS_SEED=<seed>` replays every
// schedule's choices (which node a picker lands on also depends on the
// cluster, e.g. which node leads a partition then).
type Plan struct {
	Index   int
	Layout  integration.ClusterLayout
	Nemeses []nemesisKind
	Hold    time.Duration
	// RunSeed seeds the nemeses' own choices during the run (Faults.Rng).
	RunSeed uint64
}

// NewPlan draws schedule i of the campaign with the given seed: a layout
// of layouts, then one process nemesis, one network nemesis or one of
// each, and how long each fault lasts (5-15 s; a pause at least
// pauseHold). A schedule without a process nemesis then gets an
// environment nemesis beside its network one five times in eight, from
// draws of its own.
func NewPlan(seed uint64, i int, layouts []integration.ClusterLayout) Plan {
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	p := Plan{Index: i, Layout: layouts[rng.IntN(len(layouts))]}
	proc := processNemeses[rng.IntN(len(processNemeses))]
	netw := networkNemeses[rng.IntN(len(networkNemeses))]
	choice := rng.IntN(3)
	switch choice {
	case 0:
		p.Nemeses = []nemesisKind{proc}
	case 1:
		p.Nemeses = []nemesisKind{netw}
	default:
		p.Nemeses = []nemesisKind{netw, proc}
	}
	p.Hold = time.Duration(5+rng.IntN(11)) * time.Second
	for _, n := range p.Nemeses {
		if n.pause {
			p.Hold = max(p.Hold, pauseHold)
		}
	}
	p.RunSeed = rng.Uint64()
	if networkOnly := choice == 1; networkOnly {
		env := rand.New(rand.NewPCG(seed^environmentStream, uint64(i)))
		if k := env.IntN(len(environmentNemeses) + 3); k < len(environmentNemeses) {
			p.Nemeses = append(p.Nemeses, environmentNemeses[k])
		}
	}
	return p
}

// WithNemeses is p with its nemeses replaced by names ("a" or "a+b",
// from the catalogue), for FAULTS_NEMESIS: the schedule's other draws
// stay.
func (p Plan) WithNemeses(names string) (Plan, error) {
	p.Nemeses = nil
	for _, name := range strings.Split(names, "+") {
		all := slices.Concat(processNemeses, networkNemeses, environmentNemeses)
		i := slices.IndexFunc(all, func(k nemesisKind) bool { return k.name == name })
		if i < 0 {
			return p, fmt.Errorf("no nemesis %q in the catalogue", name)
		}
		k := all[i]
		p.Nemeses = append(p.Nemeses, k)
		if k.pause {
			p.Hold = max(p.Hold, pauseHold)
		}
	}
	return p, nil
}

// NemesisName is the plan's nemeses joined with "+".
func (p Plan) NemesisName() string {
	var names []string
	for _, n := range p.Nemeses {
		names = append(names, n.name)
	}
	return strings.Join(names, "+")
}

// Name names the schedule's subtest: s<index>-<layout>-<nemesis>.
func (p Plan) Name() string {
	return fmt.Sprintf("s%02d-%s-%s", p.Index, p.Layout, p.NemesisName())
}

// Nemesis builds the plan's nemesis on f.
func (p Plan) Nemesis(f *Faults) Nemesis {
	if len(p.Nemeses) == 1 {
		return p.Nemeses[0].make(f)
	}
	var parts []Nemesis
	for _, n := range p.Nemeses {
		parts = append(parts, n.make(f))
	}
	return Combine(parts...)
}
