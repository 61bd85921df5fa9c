package integration

// Single nodes started on demand, with listeners and properties of the
// caller's choosing: what scenarios and tests of secured listeners (TLS,
// SASL, ACLs) run against, beside (not instead of) the run's target.
//
// Both flavors run from the same server.properties: the harness's single
// combined node (node.id 1; a PLAINTEXT client listener, which the
// readiness check uses, and a CONTROLLER listener), the extra listeners,
// and the caller's properties on top. The storage is formatted explicitly
// (`--standalone` plus the caller's format flags, such as --add-scram), by
// kafka.tools.StorageTool or `gregor storage format`.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// NodeListener is a listener beyond the harness's PLAINTEXT and CONTROLLER
// ones.
type NodeListener struct {
	Name     string // listener name, upper case ("SSL", "MTLS", "SASL_SSL")
	Protocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
}

// NodeSpec is what a single node is started with.
type NodeSpec struct {
	// Listeners are added to listeners, advertised.listeners and
	// listener.security.protocol.map.
	Listeners []NodeListener
	// ControllerProtocol is the CONTROLLER listener's security protocol
	// (PLAINTEXT when empty); its ssl.* or sasl.* settings go in
	// Properties under listener.name.controller.
	ControllerProtocol string
	// Properties are server properties on top of the harness's: the
	// listeners' ssl.* and sasl.* keys (listener.name.<l>. prefixed or
	// not), authorizer.class.name, super.users, inter.broker.listener.name,
	// and so on. A key the harness also sets takes the caller's value.
	Properties map[string]string
	// FormatFlags are added to the storage format command (after
	// --cluster-id and --standalone), such as
	// --add-scram SCRAM-SHA-256=[name=alice,password=secret].
	FormatFlags []string
	// ReadyWait bounds the wait for the node to serve (90 s when zero).
	ReadyWait time.Duration
	// CPUList, when set, runs the node under `taskset -c CPUList` (the
	// benchmarks pin the broker to one core and their load to another).
	CPUList string
	// Env is added to the node's environment (KEY=VALUE): the AWS
	// credentials of an S3 store, say.
	Env []string
	// Metrics has the node serve Prometheus metrics on its MetricsAddr:
	// Gregor on its own HTTP listener (gregor.http.listener), Kafka
	// through Prometheus' JMX exporter java agent with the exporter's
	// Kafka naming convention, as operators scrape it.
	Metrics bool
}

// SingleNode is a node started by StartNode.
type SingleNode struct {
	Flavor string // "gregor" or "kafka"
	Dir    string // the node's directory: server.properties, node.log, data/
	LogDir string
	// MetricsAddr serves /metrics when the node was started with
	// NodeSpec.Metrics.
	MetricsAddr string
	// PropsFile is the node's server.properties; LogFile what it prints.
	PropsFile string
	LogFile   string
	// Addrs maps every listener name (upper case) to its address: all are
	// on the node's own loopback address, claimed until Stop.
	Addrs map[string]string

	host      *Loopback
	cmd       Cmd
	proc      *Proc
	readyWait time.Duration
	stopped   bool
}

// Addr is the address of the listener called name (any case), or "" when
// there is none.
func (n *SingleNode) Addr(name string) string { return n.Addrs[strings.ToUpper(name)] }

// Bootstrap is the PLAINTEXT client listener.
func (n *SingleNode) Bootstrap() string { return n.Addrs["PLAINTEXT"] }

// Log is what the node has printed so far (its log4j output for Kafka).
func (n *SingleNode) Log() string {
	b, _ := os.ReadFile(n.LogFile)
	return string(b)
}

// Pid is the node's process id (taskset execs the node, so it is the
// node's own), or 0 when it is not running.
func (n *SingleNode) Pid() int {
	if n.proc == nil {
		return 0
	}
	if exited, _ := n.proc.Exited(); exited {
		return 0
	}
	return n.proc.Pid()
}

// Alive reports nil while the node runs.
func (n *SingleNode) Alive() error {
	if n.proc == nil {
		return errors.New("not started")
	}
	if exited, err := n.proc.Exited(); exited {
		return fmt.Errorf("%s node exited (%v): %s", n.Flavor, err, n.proc.LogTail(5))
	}
	return nil
}

// Stop ends the node (SIGTERM, then SIGKILL after a grace period), gives
// its address back and removes its data; the properties and the log stay
// for whoever debugs a failure. Safe to call more than once.
func (n *SingleNode) Stop() error {
	if n.stopped {
		return nil
	}
	n.stopped = true
	var err error
	if n.proc != nil {
		err = n.proc.Stop(stopGrace)
	}
	n.host.Release()
	return errors.Join(err, os.RemoveAll(n.LogDir))
}

// Restart starts a killed node again on its data and address and waits
// until it serves. Stop, unlike Kill, removes the data and gives the
// address back: restart after Kill.
func (n *SingleNode) Restart(ctx context.Context) error {
	if n.stopped {
		return errors.New("the node was stopped (its data and address are gone): restart after Kill")
	}
	if n.proc != nil {
		if exited, _ := n.proc.Exited(); !exited {
			return errors.New("the node is still running")
		}
		_ = n.proc.Stop(0)
	}
	n.stopped = false
	return n.launch(ctx)
}

// Kill sends SIGKILL to the node and waits for it to die.
func (n *SingleNode) Kill() {
	if n.proc != nil {
		n.proc.Kill()
	}
}

// FlavorOf is the flavor of single node that matches a target: "gregor"
// for gregor and the gregor clusters, "kafka" for kafka and the kafka
// clusters, "" for an external target.
func FlavorOf(target string) string {
	switch {
	case strings.HasPrefix(target, "gregor"):
		return "gregor"
	case strings.HasPrefix(target, "kafka"):
		return "kafka"
	}
	return ""
}

// StartNode lays out, formats and starts a fresh single combined node of
// flavor ("gregor" or "kafka") in dir, which must not hold an earlier
// node, and returns once its PLAINTEXT listener answers ApiVersions. The
// caller stops it. On error nothing is left running.
func StartNode(ctx context.Context, t *Tools, flavor, dir string, spec NodeSpec) (*SingleNode, error) {
	fl, err := flavorNamed(ctx, t, flavor)
	if err != nil {
		return nil, err
	}
	n := &SingleNode{Flavor: flavor, Dir: dir, LogDir: filepath.Join(dir, "data"),
		PropsFile: filepath.Join(dir, "server.properties"), LogFile: filepath.Join(dir, "node.log"),
		Addrs: map[string]string{}, readyWait: spec.ReadyWait}
	if n.readyWait == 0 {
		n.readyWait = 90 * time.Second
	}
	if err := os.MkdirAll(n.LogDir, 0o755); err != nil {
		return nil, err
	}
	names := []string{"PLAINTEXT", "CONTROLLER"}
	protocols := map[string]string{"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT"}
	if spec.ControllerProtocol != "" {
		protocols["CONTROLLER"] = spec.ControllerProtocol
	}
	for _, l := range spec.Listeners {
		name := strings.ToUpper(l.Name)
		if _, dup := protocols[name]; dup {
			return nil, fmt.Errorf("listener %s is the harness's own or named twice", name)
		}
		names = append(names, name)
		protocols[name] = l.Protocol
	}
	if len(names) > 2+ExtraPorts {
		return nil, fmt.Errorf("%d listeners: a node has ports for PLAINTEXT, CONTROLLER and %d more", len(names), ExtraPorts)
	}
	if n.host, err = ClaimLoopback(); err != nil {
		return nil, err
	}
	if err := n.prepare(ctx, t, fl, names, protocols, spec); err != nil {
		n.host.Release()
		return nil, err
	}
	return n, nil
}

// prepare writes and formats the node on its claimed address, and starts
// it.
func (n *SingleNode) prepare(ctx context.Context, t *Tools, fl clusterFlavor, names []string, protocols map[string]string, spec NodeSpec) error {
	for i, name := range names {
		port := FirstExtraPort + i - 2
		switch name {
		case "PLAINTEXT":
			port = ClientPort
		case "CONTROLLER":
			port = ControllerPort
		}
		n.Addrs[name] = n.host.Addr(port)
	}
	props := spec.Properties
	if spec.Metrics {
		// The last extra port: listeners take them from the first.
		n.MetricsAddr = n.host.Addr(FirstExtraPort + ExtraPorts - 1)
		if fl.name == "gregor" {
			props = maps.Clone(props)
			if props == nil {
				props = map[string]string{}
			}
			props["gregor.http.listener"] = n.MetricsAddr
		}
	}
	if err := WriteProperties(n.PropsFile, n.serverProperties(names, protocols, props)); err != nil {
		return fmt.Errorf("writing the node's properties: %w", err)
	}
	clusterID, err := fl.randomUUID(ctx)
	if err != nil {
		return err
	}
	if err := fl.format(ctx, n.PropsFile, append([]string{"--cluster-id", clusterID, "--standalone"}, spec.FormatFlags...)...); err != nil {
		return err
	}
	if n.cmd, err = fl.command(ctx, n.Dir, n.PropsFile); err != nil {
		return err
	}
	n.cmd.Env = append(n.cmd.Env, spec.Env...)
	if spec.Metrics && fl.name == "kafka" {
		if n.cmd, err = withJMXExporter(ctx, t, n.cmd, n.Dir, n.MetricsAddr); err != nil {
			return err
		}
	}
	n.cmd = Pinned(spec.CPUList, n.cmd)
	return n.launch(ctx)
}

func (n *SingleNode) launch(ctx context.Context) error {
	proc, err := Start(n.cmd, n.LogFile)
	if err != nil {
		return err
	}
	n.proc = proc
	rctx, cancel := context.WithTimeout(ctx, n.readyWait)
	defer cancel()
	if err := WaitReady(rctx, n.Bootstrap(), proc.Done()); err != nil {
		tail := proc.LogTail(6)
		_ = proc.Stop(stopGrace)
		return fmt.Errorf("%s node did not become ready: %w; log: %s", n.Flavor, err, tail)
	}
	return nil
}

// serverProperties is the node's server.properties: the harness's single
// combined node (the keys Kafka 4.3.1's sample sets, as the kafka target
// runs it) with the listeners, and extra on top.
func (n *SingleNode) serverProperties(names []string, protocols map[string]string, extra map[string]string) [][2]string {
	var listeners, advertised, protoMap []string
	for _, name := range names {
		listeners = append(listeners, name+"://"+n.Addrs[name])
		protoMap = append(protoMap, name+":"+protocols[name])
	}
	advertised = listeners
	base := [][2]string{
		{"process.roles", "broker,controller"},
		{"node.id", "1"},
		{"controller.quorum.bootstrap.servers", n.Addrs["CONTROLLER"]},
		{"listeners", strings.Join(listeners, ",")},
		{"advertised.listeners", strings.Join(advertised, ",")},
		{"inter.broker.listener.name", "PLAINTEXT"},
		{"controller.listener.names", "CONTROLLER"},
		{"listener.security.protocol.map", strings.Join(protoMap, ",")},
		{"log.dirs", n.LogDir},
		{"num.partitions", "1"},
		{"offsets.topic.replication.factor", "1"},
		{"transaction.state.log.replication.factor", "1"},
		{"transaction.state.log.min.isr", "1"},
		{"share.coordinator.state.topic.replication.factor", "1"},
		{"share.coordinator.state.topic.min.isr", "1"},
		{"group.initial.rebalance.delay.ms", "0"},
		{"log.retention.check.interval.ms", "1000"},
	}
	out := make([][2]string, 0, len(base)+len(extra))
	for _, kv := range base {
		if v, ok := extra[kv[0]]; ok {
			kv[1] = v
		}
		out = append(out, kv)
	}
	var keys []string
	for k := range extra {
		if !slices.ContainsFunc(base, func(kv [2]string) bool { return kv[0] == k }) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, [2]string{k, extra[k]})
	}
	return out
}

// WriteProperties writes key=value pairs in java.util.Properties format,
// escaped so that Properties.load (and Gregor's reader) gives back exactly
// the same strings: multi-line values (inline PEM) included.
func WriteProperties(path string, kvs [][2]string) error {
	var b strings.Builder
	for _, kv := range kvs {
		b.WriteString(escapeProperty(kv[0], true))
		b.WriteByte('=')
		b.WriteString(escapeProperty(kv[1], false))
		b.WriteByte('\n')
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// WriteClientProperties writes a client's properties (a Java tool's
// --command-config, --producer.config or --consumer.config), keys sorted.
func WriteClientProperties(path string, props map[string]string) error {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kvs := make([][2]string, 0, len(keys))
	for _, k := range keys {
		kvs = append(kvs, [2]string{k, props[k]})
	}
	return WriteProperties(path, kvs)
}

// escapeProperty escapes s as Properties.store does: backslashes, the
// control characters \t \n \r \f, a leading space (and in keys every
// space, '=' and ':'), '#' and '!', and every character outside ASCII as
// \uXXXX (Properties.load(InputStream) reads ISO-8859-1).
func escapeProperty(s string, key bool) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == ' ' && (key || i == 0):
			b.WriteString(`\ `)
		case (r == '=' || r == ':') && key, r == '#', r == '!':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			if r == utf8.RuneError {
				r = 0xfffd
			}
			for _, u := range utf16Units(r) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func utf16Units(r rune) []uint16 {
	if r < 0x10000 {
		return []uint16{uint16(r)}
	}
	r -= 0x10000
	return []uint16{uint16(0xd800 + (r >> 10)), uint16(0xdc00 + (r & 0x3ff))}
}

// StartNode starts a fresh single node of the target's flavor (see
// StartNode) in the scenario's directory; it is stopped when the scenario
// ends, whatever the scenario does. An external target skips the
// scenario: the harness cannot start its kind of node.
func (e *Env) StartNode(ctx context.Context, spec NodeSpec) (*SingleNode, error) {
	flavor := FlavorOf(e.Target.Name())
	if flavor == "" {
		return nil, Skipf("the harness cannot start a node like the %s target", e.Target.Name())
	}
	return e.StartNodeOf(ctx, flavor, spec)
}

// StartNodeOf is StartNode with the flavor chosen by the caller ("gregor"
// or "kafka"): for scenarios whose peer is a node of the other flavor
// (MirrorMaker 2 between the two).
func (e *Env) StartNodeOf(ctx context.Context, flavor string, spec NodeSpec) (*SingleNode, error) {
	e.nodes++
	n, err := StartNode(ctx, e.Tools, flavor, filepath.Join(e.Dir, fmt.Sprintf("node-%d", e.nodes)), spec)
	if err != nil {
		return nil, err
	}
	e.cleanups = append(e.cleanups, func() { _ = n.Stop() })
	return n, nil
}

// PKI creates a test certificate authority in the scenario's directory.
func (e *Env) PKI() (*PKI, error) { return NewPKI(filepath.Join(e.Dir, "pki")) }

// ClientProperties writes props into a file of the scenario's directory
// and returns its path.
func (e *Env) ClientProperties(name string, props map[string]string) (string, error) {
	p := filepath.Join(e.Dir, name)
	return p, WriteClientProperties(p, props)
}

// KafkaOn runs one of the 4.3.1 tools against bootstrap (--bootstrap-server
// prepended), with stdin as its input when not empty.
func (e *Env) KafkaOn(ctx context.Context, bootstrap, stdin, mainClass string, args ...string) (Output, error) {
	c, err := e.javaCmd(ctx, SetKafka, mainClass, append([]string{"--bootstrap-server", bootstrap}, args...)...)
	if err != nil {
		return Output{}, err
	}
	c.Stdin = stdin
	return e.Exec(ctx, c)
}

// onOwnNode makes s run against a fresh single node of the target's
// flavor, started for it alone, instead of the shared target: for
// scenarios that need a broker to themselves for a long time (a rate
// measured over a minute), which then run beside the shared target's
// scenarios (OwnNodes) rather than after them.
func onOwnNode(s Scenario) Scenario {
	run := s.Run
	s.OwnNodes = true
	s.Run = func(ctx context.Context, e *Env) error {
		n, err := e.StartNode(ctx, NodeSpec{})
		if err != nil {
			return err
		}
		shared := e.Target
		e.Target = ownNodeTarget{n}
		defer func() { e.Target = shared }()
		return run(ctx, e)
	}
	return s
}

// ownNodeTarget is a node a scenario started, seen as its target.
type ownNodeTarget struct{ n *SingleNode }

func (t ownNodeTarget) Name() string                    { return t.n.Flavor }
func (t ownNodeTarget) Start(ctx context.Context) error { return t.n.Alive() }
func (t ownNodeTarget) Alive() error                    { return t.n.Alive() }
func (t ownNodeTarget) Bootstrap() string               { return t.n.Bootstrap() }
func (t ownNodeTarget) LogDir() string                  { return t.n.LogDir }
func (t ownNodeTarget) Topology() Topology              { return singleNode(t.n.Bootstrap(), t.n.LogDir) }
func (t ownNodeTarget) Stop() error                     { return t.n.Stop() }
func (t ownNodeTarget) Describe() string                { return "a " + t.n.Flavor + " node of the scenario's own" }
func (t ownNodeTarget) Pid() int {
	if t.n.proc == nil {
		return 0
	}
	return t.n.proc.Pid()
}
