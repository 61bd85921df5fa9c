package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClusterLayout names how a cluster's nodes share out the roles.
type ClusterLayout string

const (
	// Combined3 is three nodes (node.id 1-3), each broker and controller,
	// with a static quorum (controller.quorum.voters).
	Combined3 ClusterLayout = "combined3"
	// Combined5 is Combined3 with five nodes (node.id 1-5).
	Combined5 ClusterLayout = "combined5"
	// Split3x3 is Kafka 4.3's lab layout: controllers 101-103 forming a
	// dynamic quorum (formatted with --initial-controllers) and brokers 1-3
	// (formatted with --no-initial-controllers) that talk to each other on
	// INTERNAL and to clients on EXTERNAL.
	Split3x3 ClusterLayout = "split3x3"
)

// ClusterNode is one process of a cluster. Its address, ports and
// directory are fixed when the cluster is laid out, so a Restart comes
// back as the same node.
type ClusterNode struct {
	ID             int
	Roles          string // process.roles
	Dir            string // the node's own directory: server.properties and node.log
	LogDir         string // log.dirs (the metadata log lives there too)
	ClientPort     int    // PLAINTEXT (combined) or EXTERNAL (split broker); 0 on a controller
	InternalPort   int    // INTERNAL on a split broker, else 0
	ControllerPort int    // CONTROLLER; 0 on a split broker
	DirID          string // the metadata directory id given at format, when the layout names it
	// Host is the address the node listens on and advertises: a loopback
	// address claimed for the node until the cluster stops, or the one
	// ClusterOptions.Hosts gives it (the fault suite's, in the node's own
	// network namespace).
	Host string

	claim *Loopback // nil when Host came from ClusterOptions.Hosts
	proc  *Proc
}

func (n *ClusterNode) host() string { return n.Host }

// IsBroker reports whether the node serves clients.
func (n *ClusterNode) IsBroker() bool { return strings.Contains(n.Roles, "broker") }

// IsController reports whether the node is (or may become) a voter.
func (n *ClusterNode) IsController() bool { return strings.Contains(n.Roles, "controller") }

// Addr is the client listener of a broker.
func (n *ClusterNode) Addr() string { return fmt.Sprintf("%s:%d", n.host(), n.ClientPort) }

// ControllerAddr is the controller listener of a controller.
func (n *ClusterNode) ControllerAddr() string {
	return fmt.Sprintf("%s:%d", n.host(), n.ControllerPort)
}

// Flavor is "gregor" or "kafka".
func (c *Cluster) Flavor() string { return c.flavor.name }

// Pid is the node's process id, or 0 when it is not running.
func (n *ClusterNode) Pid() int {
	if n.proc == nil {
		return 0
	}
	if exited, _ := n.proc.Exited(); exited {
		return 0
	}
	return n.proc.Pid()
}

// clusterFlavor is what differs between Apache Kafka and Gregor in a
// cluster: both get the same properties files; they differ in the program
// that formats the storage and the one that runs a node.
type clusterFlavor struct {
	name       string // "kafka" or "gregor"
	describe   string
	randomUUID func(ctx context.Context) (string, error)
	format     func(ctx context.Context, props string, flags ...string) error
	command    func(ctx context.Context, dir, props string) (Cmd, error)
}

func kafkaFlavor(t *Tools) clusterFlavor {
	return clusterFlavor{
		name:       "kafka",
		describe:   "Apache Kafka " + KafkaVersion + " (kafka_2.13 from Maven Central)",
		randomUUID: t.kafkaRandomUUID,
		format:     t.kafkaFormat,
		command:    t.kafkaServerCmd,
	}
}

// flavorNamed is the flavor called name ("kafka" or "gregor").
func flavorNamed(ctx context.Context, t *Tools, name string) (clusterFlavor, error) {
	switch name {
	case "kafka":
		return kafkaFlavor(t), nil
	case "gregor":
		return gregorFlavor(ctx, t)
	}
	return clusterFlavor{}, fmt.Errorf("unknown flavor %q (want kafka or gregor)", name)
}

// gregorFlavor builds ./cmd/gregor once for the cluster's start and runs
// `gregor storage ...` and `gregor server.properties` with it.
func gregorFlavor(ctx context.Context, t *Tools) (clusterFlavor, error) {
	bin, err := t.gregorBinary(ctx)
	if err != nil {
		return clusterFlavor{}, err
	}
	return clusterFlavor{
		name:     "gregor",
		describe: "gregor " + gitDescribe(ctx, t.Root),
		randomUUID: func(ctx context.Context) (string, error) {
			out, err := Run(ctx, Cmd{Name: bin, Args: []string{"storage", "random-uuid"}, Timeout: time.Minute})
			if err != nil {
				return "", fmt.Errorf("gregor storage random-uuid: %w", err)
			}
			return strings.TrimSpace(out.Stdout), nil
		},
		format: func(ctx context.Context, props string, flags ...string) error {
			args := append([]string{"storage", "format", "-c", props}, flags...)
			if _, err := Run(ctx, Cmd{Name: bin, Args: args, Timeout: time.Minute}); err != nil {
				return fmt.Errorf("gregor storage format %s: %w", props, err)
			}
			return nil
		},
		command: func(_ context.Context, dir, props string) (Cmd, error) {
			return Cmd{Name: bin, Args: []string{props}, Dir: dir}, nil
		},
	}, nil
}

// Cluster is a multi-node cluster the harness started: one process per
// node, each with its own properties file and data directory under Dir.
//
// A Cluster is used from one goroutine (a test or the Runner); the only
// other goroutines are the per-process waiters in proc.go.
type Cluster struct {
	Layout    ClusterLayout
	Dir       string
	Nodes     []*ClusterNode // controllers first, then brokers, each in id order
	ClusterID string
	Describe  string
	// Launched is when the first node's process was started, after every
	// node was formatted: where a start-up measurement begins.
	Launched time.Time

	flavor    clusterFlavor
	readyWait time.Duration
	opts      ClusterOptions
}

// ClusterOptions are what StartClusterWith adds to StartCluster's plain
// loopback cluster; the zero value changes nothing.
type ClusterOptions struct {
	// Hosts, when set, gives node id's listen address (see
	// ClusterNode.Host); ids it has no entry for get a claimed loopback
	// address.
	Hosts map[int]string
	// Wrap, when set, is put in front of node id's command line, such as
	// `ip netns exec NAME` to run it in a network namespace. The program
	// must exec the node (not fork it): kills and signals go to the pid.
	Wrap map[int][]string
	// Properties are extra key=value lines for every node's
	// server.properties, after the harness's own (the later key wins).
	Properties []string
}

// StartCluster lays out a cluster of the given flavor ("kafka" or
// "gregor") in dir (which must not hold an earlier cluster), formats every
// node, starts controllers then brokers, and returns once every broker
// answers ApiVersions and a Metadata request to each lists all brokers.
// On error everything started is stopped.
func StartCluster(ctx context.Context, t *Tools, flavor string, layout ClusterLayout, dir string, readyWait time.Duration) (*Cluster, error) {
	return StartClusterWith(ctx, t, flavor, layout, dir, readyWait, ClusterOptions{})
}

// StartClusterWith is StartCluster with the options in opts.
func StartClusterWith(ctx context.Context, t *Tools, flavor string, layout ClusterLayout, dir string, readyWait time.Duration, opts ClusterOptions) (*Cluster, error) {
	fl, err := flavorNamed(ctx, t, flavor)
	if err != nil {
		return nil, err
	}
	if readyWait == 0 {
		readyWait = 2 * time.Minute
	}
	nodes, err := layOut(layout, dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Layout: layout, Dir: dir, Nodes: nodes, flavor: fl, readyWait: readyWait, opts: opts,
		Describe: fmt.Sprintf("%s, %s (%d brokers, %d controllers)", fl.describe, layout, len(brokersOf(nodes)), len(controllersOf(nodes)))}
	for _, n := range nodes {
		if n.Host = opts.Hosts[n.ID]; n.Host != "" {
			continue
		}
		if n.claim, err = ClaimLoopback(); err != nil {
			_ = c.Stop()
			return nil, fmt.Errorf("node %d: %w", n.ID, err)
		}
		n.Host = n.claim.IP
	}
	if err := c.format(ctx); err != nil {
		_ = c.Stop()
		return nil, err
	}
	c.Launched = time.Now()
	for _, n := range c.Nodes {
		if err := c.startNode(ctx, n); err != nil {
			_ = c.Stop()
			return nil, err
		}
	}
	if err := c.waitReady(ctx); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// layOut gives every node its ports (the fixed ones of its roles: each
// node has an address of its own) and its directory.
func layOut(layout ClusterLayout, dir string) ([]*ClusterNode, error) {
	var nodes []*ClusterNode
	add := func(id int, roles string, client, internal, ctrl bool) error {
		n := &ClusterNode{ID: id, Roles: roles, Dir: filepath.Join(dir, fmt.Sprintf("node-%d", id))}
		n.LogDir = filepath.Join(n.Dir, "data")
		if client {
			n.ClientPort = ClientPort
		}
		if internal {
			n.InternalPort = InternalPort
		}
		if ctrl {
			n.ControllerPort = ControllerPort
		}
		if err := os.MkdirAll(n.LogDir, 0o755); err != nil {
			return err
		}
		nodes = append(nodes, n)
		return nil
	}
	switch layout {
	case Combined3, Combined5:
		count := 3
		if layout == Combined5 {
			count = 5
		}
		for id := 1; id <= count; id++ {
			if err := add(id, "broker,controller", true, false, true); err != nil {
				return nil, err
			}
		}
	case Split3x3:
		for id := 101; id <= 103; id++ {
			if err := add(id, "controller", false, false, true); err != nil {
				return nil, err
			}
		}
		for id := 1; id <= 3; id++ {
			if err := add(id, "broker", true, true, false); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("unknown cluster layout %q (want %s, %s or %s)", layout, Combined3, Combined5, Split3x3)
	}
	return nodes, nil
}

func brokersOf(nodes []*ClusterNode) []*ClusterNode {
	return nodesWhere(nodes, (*ClusterNode).IsBroker)
}

func controllersOf(nodes []*ClusterNode) []*ClusterNode {
	return nodesWhere(nodes, (*ClusterNode).IsController)
}

// nodesWhere returns the nodes for which keep is true, in id order.
func nodesWhere(nodes []*ClusterNode, keep func(*ClusterNode) bool) []*ClusterNode {
	var out []*ClusterNode
	for _, n := range nodes {
		if keep(n) {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Brokers are the broker nodes in id order.
func (c *Cluster) Brokers() []*ClusterNode { return brokersOf(c.Nodes) }

// Controllers are the controller nodes in id order.
func (c *Cluster) Controllers() []*ClusterNode { return controllersOf(c.Nodes) }

// Node returns the node with the given id, or nil.
func (c *Cluster) Node(id int) *ClusterNode {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Bootstrap is every broker's client address, comma-separated, as
// bootstrap.servers takes them.
func (c *Cluster) Bootstrap() string {
	var addrs []string
	for _, n := range c.Brokers() {
		addrs = append(addrs, n.Addr())
	}
	return strings.Join(addrs, ",")
}

// ControllerBootstrap is every controller's address, comma-separated, as
// --bootstrap-controller and controller.quorum.bootstrap.servers take them.
func (c *Cluster) ControllerBootstrap() string {
	var addrs []string
	for _, n := range c.Controllers() {
		addrs = append(addrs, n.ControllerAddr())
	}
	return strings.Join(addrs, ",")
}

// properties is node n's server.properties. Both flavors read the same
// file; keys Gregor does not use it ignores.
func (c *Cluster) properties(n *ClusterNode) string {
	var voters []string
	for _, v := range c.Controllers() {
		voters = append(voters, fmt.Sprintf("%d@%s", v.ID, v.ControllerAddr()))
	}
	lines := []string{
		"process.roles=" + n.Roles,
		"node.id=" + strconv.Itoa(n.ID),
		"controller.listener.names=CONTROLLER",
	}
	switch c.Layout {
	case Combined3, Combined5:
		lines = append(lines,
			"controller.quorum.voters="+strings.Join(voters, ","),
			fmt.Sprintf("listeners=PLAINTEXT://%s,CONTROLLER://%s", n.Addr(), n.ControllerAddr()),
			fmt.Sprintf("advertised.listeners=PLAINTEXT://%s,CONTROLLER://%s", n.Addr(), n.ControllerAddr()),
			"inter.broker.listener.name=PLAINTEXT",
			"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		)
	case Split3x3:
		lines = append(lines, "controller.quorum.bootstrap.servers="+c.ControllerBootstrap(),
			"listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT")
		if n.IsBroker() {
			lines = append(lines,
				fmt.Sprintf("listeners=INTERNAL://%s:%d,EXTERNAL://%s", n.host(), n.InternalPort, n.Addr()),
				fmt.Sprintf("advertised.listeners=INTERNAL://%s:%d,EXTERNAL://%s", n.host(), n.InternalPort, n.Addr()),
				"inter.broker.listener.name=INTERNAL",
			)
		} else {
			lines = append(lines,
				"listeners=CONTROLLER://"+n.ControllerAddr(),
				"advertised.listeners=CONTROLLER://"+n.ControllerAddr(),
			)
		}
	}
	lines = append(lines,
		"log.dirs="+n.LogDir,
		"num.partitions=1",
		"num.network.threads=3",
		"num.io.threads=8",
		// The internal topics keep Kafka's defaults (replication factor 3,
		// min.insync.replicas 2 for transactions): a cluster is where they
		// are meant to hold.
		"group.initial.rebalance.delay.ms=0",
		// As on the single-node targets: retention is checked every second.
		"log.retention.check.interval.ms=1000",
	)
	lines = append(lines, c.opts.Properties...)
	return strings.Join(lines, "\n") + "\n"
}

func (n *ClusterNode) propsPath() string { return filepath.Join(n.Dir, "server.properties") }

// format writes every node's properties and formats its storage: with the
// static voters alone (combined3), or controllers with one
// --initial-controllers string and brokers with --no-initial-controllers
// (split3x3).
func (c *Cluster) format(ctx context.Context) error {
	for _, n := range c.Nodes {
		if err := os.WriteFile(n.propsPath(), []byte(c.properties(n)), 0o644); err != nil {
			return fmt.Errorf("writing node %d's properties: %w", n.ID, err)
		}
	}
	id, err := c.flavor.randomUUID(ctx)
	if err != nil {
		return err
	}
	c.ClusterID = id
	var initial []string
	if c.Layout == Split3x3 {
		for _, n := range c.Controllers() {
			if n.DirID, err = c.flavor.randomUUID(ctx); err != nil {
				return err
			}
			initial = append(initial, fmt.Sprintf("%d@%s:%s", n.ID, n.ControllerAddr(), n.DirID))
		}
	}
	for _, n := range c.Nodes {
		flags := []string{"--cluster-id", c.ClusterID}
		switch {
		case c.Layout == Combined3 || c.Layout == Combined5:
			// controller.quorum.voters names the quorum; no flag.
		case n.IsController():
			flags = append(flags, "--initial-controllers", strings.Join(initial, ","))
		default:
			flags = append(flags, "--no-initial-controllers")
		}
		if err := c.flavor.format(ctx, n.propsPath(), flags...); err != nil {
			return fmt.Errorf("formatting node %d: %w", n.ID, err)
		}
	}
	return nil
}

func (c *Cluster) startNode(ctx context.Context, n *ClusterNode) error {
	cmd, err := c.flavor.command(ctx, n.Dir, n.propsPath())
	if err != nil {
		return err
	}
	if wrap := c.opts.Wrap[n.ID]; len(wrap) > 0 {
		cmd.Args = append(append(append([]string(nil), wrap[1:]...), cmd.Name), cmd.Args...)
		cmd.Name = wrap[0]
	}
	proc, err := Start(cmd, filepath.Join(n.Dir, "node.log"))
	if err != nil {
		return fmt.Errorf("starting node %d: %w", n.ID, err)
	}
	n.proc = proc
	return nil
}

// waitReady waits until every broker answers ApiVersions and a Metadata
// request to each lists every broker at its client address.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.readyWait)
	defer cancel()
	brokers := c.Brokers()
	exited := c.anyExited()
	for _, b := range brokers {
		if err := WaitReady(ctx, b.Addr(), exited); err != nil {
			return fmt.Errorf("broker %d: %w; log: %s", b.ID, err, c.logTails())
		}
	}
	want := map[int32]string{}
	var seeds []string
	for _, b := range brokers {
		want[int32(b.ID)] = b.Addr()
		seeds = append(seeds, b.Addr())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return fmt.Errorf("client for the readiness check: %w", err)
	}
	defer cl.Close()
	var last error
	for {
		if last = metadataListsAll(ctx, cl.SeedBrokers(), want); last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("a node exited before the cluster was ready (last check: %v); log: %s", last, c.logTails())
		case <-ctx.Done():
			return fmt.Errorf("cluster not ready in %s: %w; log: %s", c.readyWait, last, c.logTails())
		case <-time.After(readyPoll):
		}
	}
}

// readyPoll is how often the readiness check asks again; short, because
// the bench's start-up figure includes the wait for it.
const readyPoll = 100 * time.Millisecond

// metadataListsAll sends Metadata to each of brokers and checks that every
// answer lists exactly the brokers in want (node id -> host:port).
func metadataListsAll(ctx context.Context, brokers []*kgo.Broker, want map[int32]string) error {
	for i, b := range brokers {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := b.Request(rctx, kmsg.NewPtrMetadataRequest())
		cancel()
		if err != nil {
			return fmt.Errorf("metadata from seed %d: %w", i, err)
		}
		got := map[int32]string{}
		for _, mb := range resp.(*kmsg.MetadataResponse).Brokers {
			got[mb.NodeID] = fmt.Sprintf("%s:%d", mb.Host, mb.Port)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("metadata from seed %d lists brokers %v, want %v", i, got, want)
		}
	}
	return nil
}

// anyExited returns a channel closed as soon as any node's process exits.
// Its watchers, one per node, end with their processes (Stop ends them all).
func (c *Cluster) anyExited() <-chan struct{} {
	ch := make(chan struct{})
	var once sync.Once
	for _, n := range c.Nodes {
		if n.proc == nil {
			continue
		}
		done := n.proc.Done()
		go func() {
			<-done
			once.Do(func() { close(ch) })
		}()
	}
	return ch
}

func (c *Cluster) logTails() string {
	var parts []string
	for _, n := range c.Nodes {
		if n.proc != nil {
			parts = append(parts, fmt.Sprintf("[node %d] %s", n.ID, n.proc.LogTail(3)))
		}
	}
	return strings.Join(parts, " ")
}

// Alive reports nil while every node is running.
func (c *Cluster) Alive() error {
	for _, n := range c.Nodes {
		if n.proc == nil {
			return fmt.Errorf("node %d is not running", n.ID)
		}
		if exited, err := n.proc.Exited(); exited {
			return fmt.Errorf("node %d exited (%v): %s", n.ID, err, n.proc.LogTail(5))
		}
	}
	return nil
}

// Kill sends SIGKILL to node id's process and waits for it to die.
func (c *Cluster) Kill(id int) error {
	n := c.Node(id)
	if n == nil {
		return fmt.Errorf("no node %d", id)
	}
	if n.proc == nil {
		return fmt.Errorf("node %d is not running", id)
	}
	n.proc.Kill()
	_ = n.proc.Stop(0) // closes the log; the process is already gone
	return nil
}

// StopNode stops node id alone as Stop does a node: SIGTERM, then
// SIGKILL if it has not exited within the grace. Restart starts it again.
func (c *Cluster) StopNode(id int) error {
	n := c.Node(id)
	if n == nil {
		return fmt.Errorf("no node %d", id)
	}
	if n.proc == nil {
		return fmt.Errorf("node %d is not running", id)
	}
	return n.proc.Stop(stopGrace)
}

// Restart starts node id again on its own directory and ports (after a
// Kill, or if it died) and, for a broker, waits until it answers
// ApiVersions.
func (c *Cluster) Restart(ctx context.Context, id int) error {
	n := c.Node(id)
	if n == nil {
		return fmt.Errorf("no node %d", id)
	}
	if n.proc != nil {
		if exited, _ := n.proc.Exited(); !exited {
			return fmt.Errorf("node %d is still running", id)
		}
		_ = n.proc.Stop(0)
	}
	if err := c.startNode(ctx, n); err != nil {
		return err
	}
	if !n.IsBroker() {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.readyWait)
	defer cancel()
	if err := WaitReady(rctx, n.Addr(), n.proc.Done()); err != nil {
		return fmt.Errorf("restarted node %d: %w; log: %s", id, err, n.proc.LogTail(4))
	}
	return nil
}

// Stop ends every node: brokers first, so that they can leave while the
// quorum is still there, then the controllers together (one at a time, the
// last would wait out its grace for a quorum that is gone). Safe to call
// twice.
func (c *Cluster) Stop() error {
	var brokersOnly, rest []*ClusterNode
	for _, n := range c.Nodes {
		if n.IsBroker() && !n.IsController() {
			brokersOnly = append(brokersOnly, n)
		} else {
			rest = append(rest, n)
		}
	}
	err := errors.Join(stopNodes(brokersOnly), stopNodes(rest))
	for _, n := range c.Nodes {
		if n.claim != nil {
			n.claim.Release()
		}
	}
	return err
}

// stopNodes stops nodes concurrently and waits for all of them.
func stopNodes(nodes []*ClusterNode) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		if n.proc == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.proc.Stop(stopGrace); err != nil {
				errs[i] = fmt.Errorf("stopping node %d: %w", n.ID, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
