package faults

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/integration"
)

// Network gives each node its own network namespace, joined by a veth
// pair to one bridge in the root namespace, where the test process is the
// client: node id (below 245) has 10.A.B.(10+id)/24, the bridge 10.A.B.1,
// with A and B picked at run time off every route this machine already
// has. Drop cuts links between the suite's own nodes in one direction,
// Isolate and Heal a node both ways, with nftables rules inside the
// namespaces, so nothing outside them is touched.
//
// Names are gf<pid>k<n> (namespaces gf<pid>k<n>n<id>, bridge
// gf<pid>k<n>b, veths gf<pid>k<n>v<i>, i the node's index in the ids, as
// a link's name has at most 15 bytes): a later run removes what a killed
// earlier one left behind, by its dead pid.
type Network struct {
	base   string
	prefix string // "10.A.B"
	ids    []int
	nft    string
	tc     string

	mu      sync.Mutex
	dropped map[Link]bool // the links whose packets are to be dropped
	// stale names the namespaces whose rules may not be what dropped
	// says: their last apply failed (a cancelled context, nft refusing).
	// Every change applies them again, so a heal that failed once is
	// not taken for done by the next one.
	stale map[int]bool
	// slow names the nodes whose network SetSlow made slow.
	slow map[int]bool
	// applyRules writes a namespace's rules: apply, or a stand-in in
	// unit tests.
	applyRules func(ctx context.Context, id int) error
}

var netCount struct {
	sync.Mutex
	n int
}

var leftoverRe = regexp.MustCompile(`^gf([0-9]+)k[0-9]+`)

// NewNetwork sets up namespaces for the node ids. It needs root, ip
// (iproute2) and nft (installed with apt-get when missing).
func NewNetwork(ctx context.Context, tools *integration.Tools, ids []int) (*Network, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("network namespaces need root")
	}
	if _, err := tools.AptBinary(ctx, "iproute2", "ip"); err != nil {
		return nil, err
	}
	nft, err := tools.AptBinary(ctx, "nftables", "nft")
	if err != nil {
		return nil, err
	}
	tc, err := tools.AptBinary(ctx, "iproute2", "tc")
	if err != nil {
		return nil, err
	}
	RemoveLeftovers(ctx)
	netCount.Lock()
	netCount.n++
	n := &Network{base: fmt.Sprintf("gf%dk%d", os.Getpid(), netCount.n), ids: append([]int(nil), ids...), nft: nft, tc: tc, dropped: map[Link]bool{}, stale: map[int]bool{}, slow: map[int]bool{}}
	n.applyRules = n.apply
	netCount.Unlock()
	if n.prefix, err = freeSubnet(ctx); err != nil {
		return nil, err
	}
	if err := n.setUp(ctx); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return n, nil
}

func (n *Network) bridge() string     { return n.base + "b" }
func (n *Network) ns(id int) string   { return fmt.Sprintf("%sn%d", n.base, id) }
func (n *Network) veth(id int) string { return fmt.Sprintf("%sv%d", n.base, slices.Index(n.ids, id)) }

// IDs are the node ids the network was made for.
func (n *Network) IDs() []int { return append([]int(nil), n.ids...) }

// Host is node id's address.
func (n *Network) Host(id int) string { return fmt.Sprintf("%s.%d", n.prefix, 10+id) }

// Wrap is the command prefix that runs a program in node id's namespace;
// `ip netns exec` execs the program, so its pid is the node's.
func (n *Network) Wrap(id int) []string { return []string{"ip", "netns", "exec", n.ns(id)} }

func (n *Network) setUp(ctx context.Context) error {
	steps := [][]string{
		{"ip", "link", "add", n.bridge(), "type", "bridge"},
		{"ip", "addr", "add", n.prefix + ".1/24", "dev", n.bridge()},
		{"ip", "link", "set", n.bridge(), "up"},
	}
	for _, id := range n.ids {
		ns := n.ns(id)
		steps = append(steps,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "link", "add", n.veth(id), "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"ip", "link", "set", n.veth(id), "master", n.bridge(), "up"},
			[]string{"ip", "-n", ns, "addr", "add", n.Host(id) + "/24", "dev", "eth0"},
			[]string{"ip", "-n", ns, "link", "set", "eth0", "up"},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := run(ctx, s...); err != nil {
			return fmt.Errorf("setting up the fault network: %w", err)
		}
	}
	return nil
}

func run(ctx context.Context, args ...string) error {
	_, err := integration.Run(ctx, integration.Cmd{Name: args[0], Args: args[1:], Timeout: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// Link is one direction between two nodes: packets From sends To.
type Link struct{ From, To int }

// Isolate drops all traffic between node id and the other nodes, both
// ways; the client (the bridge's address) still reaches it. Isolating an
// isolated node is a no-op.
func (n *Network) Isolate(ctx context.Context, id int) error {
	var links []Link
	for _, o := range n.ids {
		if o != id {
			links = append(links, Link{id, o}, Link{o, id})
		}
	}
	return n.Drop(ctx, links)
}

// Heal restores every link to and from node id.
func (n *Network) Heal(ctx context.Context, id int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var links []Link
	for l := range n.dropped {
		if l.From == id || l.To == id {
			links = append(links, l)
		}
	}
	return n.change(ctx, links, false)
}

// Drop drops the packets of every link given, in that direction only
// (one rule in the sender's output chain), on top of what is dropped
// already. The client reaches every node whatever is dropped.
func (n *Network) Drop(ctx context.Context, links []Link) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.change(ctx, links, true)
}

// Restore stops dropping the links given.
func (n *Network) Restore(ctx context.Context, links []Link) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.change(ctx, links, false)
}

// HealAll restores every link.
func (n *Network) HealAll(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var links []Link
	for l := range n.dropped {
		links = append(links, l)
	}
	return n.change(ctx, links, false)
}

// Dropped is the links dropped now, sorted.
func (n *Network) Dropped() []Link {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Link, 0, len(n.dropped))
	for l := range n.dropped {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Link) int { return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To)) })
	return out
}

// change adds (drop) or removes links from the dropped set and rewrites
// the rules of every namespace whose outgoing links changed, and of every
// namespace whose rules an earlier change failed to write. n.mu is held.
func (n *Network) change(ctx context.Context, links []Link, drop bool) error {
	touched := maps.Clone(n.stale)
	for _, l := range links {
		if !slices.Contains(n.ids, l.From) || !slices.Contains(n.ids, l.To) || l.From == l.To {
			return fmt.Errorf("link %d->%d: not between two nodes of %v", l.From, l.To, n.ids)
		}
		if n.dropped[l] != drop {
			touched[l.From] = true
		}
		if drop {
			n.dropped[l] = true
		} else {
			delete(n.dropped, l)
		}
	}
	var errs []error
	for _, id := range n.ids {
		if !touched[id] {
			continue
		}
		if err := n.applyRules(ctx, id); err != nil {
			n.stale[id] = true
			errs = append(errs, err)
		} else {
			delete(n.stale, id)
		}
	}
	return errors.Join(errs...)
}

// apply makes node id's table drop exactly its dropped outgoing links:
// the table is created (so that the delete cannot fail), deleted and, if
// anything is dropped, created again with the rules, in one nft
// transaction. n.mu is held.
func (n *Network) apply(ctx context.Context, id int) error {
	var to []string
	for _, o := range n.ids {
		if n.dropped[Link{id, o}] {
			to = append(to, n.Host(o))
		}
	}
	var drops []string
	if len(to) > 0 {
		drops = append(drops, fmt.Sprintf("ip daddr { %s } drop;", strings.Join(to, ", ")))
	}
	if n.slow[id] {
		drops = append(drops, fmt.Sprintf("numgen random mod 100 < %d drop;", slowLossPercent))
	}
	rules := "table inet gregorfaults\ndelete table inet gregorfaults\n"
	if len(drops) > 0 {
		rules += fmt.Sprintf("table inet gregorfaults {\n\tchain out { type filter hook output priority 0; %s }\n}\n", strings.Join(drops, " "))
	}
	_, err := integration.Run(ctx, integration.Cmd{Name: "ip", Args: []string{"netns", "exec", n.ns(id), n.nft, "-f", "-"}, Stdin: rules, Timeout: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("setting node %d's dropped links to %v: %w", id, to, err)
	}
	return nil
}

// The slow network's shape. This machine's kernel has no netem (tc
// answers "Specified qdisc kind is unknown"), so the delay is a token
// bucket's: a link of slowRate whose queue holds up to slowQueue of
// packets (what is sent faster waits, then is dropped), and slowLossPercent
// of the packets are lost at random (nftables' numgen).
const (
	slowRate        = "2mbit"
	slowQueue       = "300ms"
	slowLossPercent = 3
)

// slowShape describes the slow network for the log.
var slowShape = fmt.Sprintf("a %s link queueing up to %s, %d%% of packets lost", slowRate, slowQueue, slowLossPercent)

// SetSlow makes node id's network slow (every packet it sends, to the
// other nodes and to clients, through a narrow queueing link, some lost)
// or whole again.
func (n *Network) SetSlow(ctx context.Context, id int, on bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	cmd := []string{"ip", "netns", "exec", n.ns(id), n.tc, "qdisc"}
	if on {
		if err := run(ctx, append(cmd, "replace", "dev", "eth0", "root", "tbf", "rate", slowRate, "burst", "32kbit", "latency", slowQueue)...); err != nil {
			return fmt.Errorf("slowing node %d's link: %w", id, err)
		}
	} else if n.slow[id] {
		if err := run(ctx, append(cmd, "del", "dev", "eth0", "root")...); err != nil {
			return fmt.Errorf("restoring node %d's link: %w", id, err)
		}
	}
	if on {
		n.slow[id] = true
	} else {
		delete(n.slow, id)
	}
	n.stale[id] = true // the loss rule
	return n.change(ctx, nil, false)
}

// Close deletes the namespaces (their veths go with them) and the
// bridge. Processes still in a namespace keep it until they exit: stop
// the nodes first.
func (n *Network) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, id := range n.ids {
		if exists(ctx, "netns", n.ns(id)) {
			errs = append(errs, run(ctx, "ip", "netns", "del", n.ns(id)))
		}
	}
	if exists(ctx, "link", n.bridge()) {
		errs = append(errs, run(ctx, "ip", "link", "del", n.bridge()))
	}
	return errors.Join(errs...)
}

func exists(ctx context.Context, what, name string) bool {
	args := []string{"netns", "list"}
	if what == "link" {
		args = []string{"-o", "link", "show", name}
	}
	out, err := integration.Run(ctx, integration.Cmd{Name: "ip", Args: args, Timeout: 30 * time.Second})
	if err != nil {
		return false
	}
	for _, l := range strings.Split(out.Stdout, "\n") {
		f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(l), ":"))
		if what == "netns" && len(f) > 0 && f[0] == name {
			return true
		}
		if what == "link" && len(f) > 1 && strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":") == name {
			return true
		}
	}
	return false
}

// RemoveLeftovers deletes namespaces and links named by this suite
// whose process is gone (a run killed before its cleanup).
func RemoveLeftovers(ctx context.Context) {
	dead := func(name string) bool {
		m := leftoverRe.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid == os.Getpid() {
			return false
		}
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	if out, err := integration.Run(ctx, integration.Cmd{Name: "ip", Args: []string{"netns", "list"}, Timeout: 30 * time.Second}); err == nil {
		for _, l := range strings.Split(out.Stdout, "\n") {
			if f := strings.Fields(l); len(f) > 0 && dead(f[0]) {
				_ = run(ctx, "ip", "netns", "del", f[0])
			}
		}
	}
	if out, err := integration.Run(ctx, integration.Cmd{Name: "ip", Args: []string{"-o", "link", "show"}, Timeout: 30 * time.Second}); err == nil {
		for _, l := range strings.Split(out.Stdout, "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			name := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
			if dead(name) {
				_ = run(ctx, "ip", "link", "del", name)
			}
		}
	}
}

// freeSubnet picks 10.A.B (A in 200-249) whose /24 overlaps no route or
// address this machine has.
func freeSubnet(ctx context.Context) (string, error) {
	var taken []*net.IPNet
	for _, args := range [][]string{{"-4", "route", "show", "table", "all"}, {"-4", "-o", "addr", "show"}} {
		out, err := integration.Run(ctx, integration.Cmd{Name: "ip", Args: args, Timeout: 30 * time.Second})
		if err != nil {
			return "", fmt.Errorf("listing routes: %w", err)
		}
		for _, f := range strings.Fields(out.Stdout) {
			if !strings.Contains(f, "/") {
				if ip := net.ParseIP(f); ip != nil && ip.To4() != nil {
					f += "/32"
				} else {
					continue
				}
			}
			if _, n, err := net.ParseCIDR(f); err == nil && n.IP.To4() != nil {
				taken = append(taken, n)
			}
		}
	}
	for range 100 {
		prefix := fmt.Sprintf("10.%d.%d", 200+rand.IntN(50), rand.IntN(256))
		_, mine, _ := net.ParseCIDR(prefix + ".0/24")
		clash := false
		for _, t := range taken {
			ones, _ := t.Mask.Size()
			if ones == 0 {
				continue // the default route
			}
			if t.Contains(mine.IP) || mine.Contains(t.IP) {
				clash = true
				break
			}
		}
		if !clash {
			return prefix, nil
		}
	}
	return "", errors.New("no free 10.x.y.0/24 for the fault network")
}
