package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Target is a Kafka-compatible cluster that scenarios run against.
type Target interface {
	// Name is "gregor", "kafka", "external", or a cluster target's name
	// ("kafka-cluster", "gregor-cluster-split", ...).
	Name() string
	// Start brings the target up and returns once it answers ApiVersions.
	// Calling Start on a running target is a no-op.
	Start(ctx context.Context) error
	// Alive reports nil while the target is still running.
	Alive() error
	// Bootstrap is host:port of the client listener; for a cluster, every
	// broker's, comma-separated (as bootstrap.servers takes them).
	Bootstrap() string
	// LogDir is the broker's log.dirs, or "" when the harness cannot see it
	// or there is more than one broker (a cluster's are in Topology).
	LogDir() string
	// Pid is the broker's process id, or 0 when it is not ours or there is
	// more than one process (a cluster).
	Pid() int
	// Topology is what scenarios may assume about the target's nodes.
	Topology() Topology
	// Stop ends the target and everything it started. Safe to call twice.
	Stop() error
	// Describe names what was run, for the report.
	Describe() string
}

// Topology is the target's nodes as scenarios see them: which brokers to
// expect in the tools' output and which voters in the quorum's.
type Topology struct {
	Brokers []BrokerNode // in id order
	Voters  []int        // the controller quorum's voter ids, in order
}

// BrokerNode is one broker of a target.
type BrokerNode struct {
	ID     int
	Addr   string // client listener, host:port
	LogDir string // its log.dirs, or "" when the harness cannot see it
}

// Cluster reports whether the target has more than one broker.
func (t Topology) Cluster() bool { return len(t.Brokers) > 1 }

// singleNode is the topology of a combined node with node.id 1, which is
// what the single-node targets run (and what the harness has always
// assumed of an external target).
func singleNode(addr, logDir string) Topology {
	return Topology{Brokers: []BrokerNode{{ID: 1, Addr: addr, LogDir: logDir}}, Voters: []int{1}}
}

// TargetOptions tunes how local targets are started.
type TargetOptions struct {
	WorkDir   string        // scratch space; the target uses WorkDir/<name>
	CPUList   string        // if set, the broker runs under `taskset -c CPUList`
	ReadyWait time.Duration // how long to wait for ApiVersions (default 90 s)
	Bootstrap string        // for the external target
	// OnLaunch, if set, is called with the bootstrap address right after
	// the broker process is launched, before it is ready (the benchmark
	// measures start-up from this moment).
	OnLaunch func(bootstrap string)
}

// NewTarget returns the target called name.
func NewTarget(name string, tools *Tools, opts TargetOptions) (Target, error) {
	if opts.ReadyWait == 0 {
		opts.ReadyWait = 90 * time.Second
	}
	switch name {
	case "gregor":
		return &localBroker{name: name, tools: tools, opts: opts, prepare: prepareGregor}, nil
	case "kafka":
		return &localBroker{name: name, tools: tools, opts: opts, prepare: prepareKafka}, nil
	case "kafka-cluster", "gregor-cluster", "kafka-cluster-split", "gregor-cluster-split":
		flavor, layout := strings.TrimSuffix(strings.TrimSuffix(name, "-split"), "-cluster"), Combined3
		if strings.HasSuffix(name, "-split") {
			layout = Split3x3
		}
		return &clusterTarget{name: name, flavor: flavor, layout: layout, tools: tools, opts: opts}, nil
	case "external":
		if opts.Bootstrap == "" {
			return nil, errors.New("target external needs BOOTSTRAP=host:port")
		}
		return &externalTarget{bootstrap: opts.Bootstrap}, nil
	}
	return nil, fmt.Errorf("unknown target %q (want gregor, kafka, external, kafka-cluster, gregor-cluster, kafka-cluster-split or gregor-cluster-split)", name)
}

type externalTarget struct{ bootstrap string }

func (e *externalTarget) Name() string { return "external" }
func (e *externalTarget) Start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return WaitReady(ctx, e.bootstrap, nil)
}
func (e *externalTarget) Alive() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := ProbeApiVersions(ctx, e.bootstrap)
	return err
}
func (e *externalTarget) Bootstrap() string { return e.bootstrap }
func (e *externalTarget) LogDir() string    { return "" }
func (e *externalTarget) Pid() int          { return 0 }
func (e *externalTarget) Stop() error       { return nil }
func (e *externalTarget) Describe() string  { return "external cluster at " + e.bootstrap }

// Topology of an external target is assumed to be one node with id 1, as
// the scenarios have always assumed.
func (e *externalTarget) Topology() Topology { return singleNode(e.bootstrap, "") }

// launch is what a local target's prepare step hands back: the command that
// runs the broker, and a description for the report.
type launch struct {
	cmd      Cmd
	describe string
}

// prepareFunc builds (and formats, where needed) a broker for one start,
// listening on host (its ClientPort and ControllerPort).
type prepareFunc func(ctx context.Context, t *Tools, dir, logDir, host string) (launch, error)

// localBroker is a single combined-mode node started by the harness, on a
// loopback address claimed at start time (released when it stops), with a
// fresh data directory per start.
type localBroker struct {
	name    string
	tools   *Tools
	opts    TargetOptions
	prepare prepareFunc

	proc     *Proc
	host     *Loopback
	logDir   string
	describe string
	starts   int
}

func (b *localBroker) Name() string { return b.name }
func (b *localBroker) Bootstrap() string {
	if b.host == nil {
		return ""
	}
	return b.host.Addr(ClientPort)
}
func (b *localBroker) LogDir() string   { return b.logDir }
func (b *localBroker) Describe() string { return b.describe }

func (b *localBroker) Topology() Topology { return singleNode(b.Bootstrap(), b.logDir) }

func (b *localBroker) Pid() int {
	if b.proc == nil {
		return 0
	}
	return b.proc.Pid()
}

func (b *localBroker) Alive() error {
	if b.proc == nil {
		return errors.New("not started")
	}
	if exited, err := b.proc.Exited(); exited {
		return fmt.Errorf("%s exited (%v): %s", b.name, err, b.proc.LogTail(5))
	}
	return nil
}

func (b *localBroker) Start(ctx context.Context) error {
	if b.proc != nil && b.Alive() == nil {
		return nil
	}
	if b.proc != nil {
		_ = b.Stop()
		b.proc = nil
	}
	b.starts++
	dir := filepath.Join(b.opts.WorkDir, fmt.Sprintf("%s-%d", b.name, b.starts))
	_ = os.RemoveAll(dir)
	logDir := filepath.Join(dir, "data")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	host, err := ClaimLoopback()
	if err != nil {
		return err
	}
	b.host = host
	l, err := b.prepare(ctx, b.tools, dir, logDir, host.IP)
	if err != nil {
		host.Release()
		return fmt.Errorf("preparing %s: %w", b.name, err)
	}
	proc, err := Start(Pinned(b.opts.CPUList, l.cmd), filepath.Join(dir, "broker.log"))
	if err != nil {
		host.Release()
		return err
	}
	b.proc, b.logDir, b.describe = proc, logDir, l.describe
	if b.opts.OnLaunch != nil {
		b.opts.OnLaunch(b.Bootstrap())
	}
	rctx, cancel := context.WithTimeout(ctx, b.opts.ReadyWait)
	defer cancel()
	if err := WaitReady(rctx, b.Bootstrap(), proc.Done()); err != nil {
		tail := proc.LogTail(4)
		_ = proc.Stop(stopGrace)
		return fmt.Errorf("%s did not become ready: %w; log: %s", b.name, err, tail)
	}
	return nil
}

// Stop ends the broker, then gives its address back.
func (b *localBroker) Stop() error {
	var err error
	if b.proc != nil {
		err = b.proc.Stop(stopGrace)
	}
	if b.host != nil {
		b.host.Release()
	}
	return err
}

// prepareGregor builds ./cmd/gregor and returns the documented command
// line: overrides only, no properties file, auto-format on first start.
func prepareGregor(ctx context.Context, t *Tools, dir, logDir, host string) (launch, error) {
	bin, err := t.gregorBinary(ctx)
	if err != nil {
		return launch{}, err
	}
	return launch{cmd: Cmd{Name: bin, Args: GregorArgs(logDir, host), Dir: dir}, describe: "gregor " + gitDescribe(ctx, t.Root)}, nil
}

// gregorBinary builds ./cmd/gregor into the cache and returns its path.
// It builds on every call: the work tree may have changed since the last
// start, and the go build cache makes an unchanged tree cheap.
func (t *Tools) gregorBinary(ctx context.Context) (string, error) {
	bin := filepath.Join(t.Cache, "bin", "gregor")
	if _, err := Run(ctx, Cmd{Name: "go", Args: []string{"build", "-o", bin, "./cmd/gregor"}, Dir: t.Root, Timeout: 5 * time.Minute}); err != nil {
		return "", fmt.Errorf("building gregor: %w", err)
	}
	return bin, nil
}

// GregorArgs is the command line (after the binary) of a single combined
// node on host (a claimed loopback address: its ClientPort and
// ControllerPort) with its data in logDir.
func GregorArgs(logDir, host string) []string {
	client := net.JoinHostPort(host, strconv.Itoa(ClientPort))
	ctrl := net.JoinHostPort(host, strconv.Itoa(ControllerPort))
	args := []string{}
	for _, kv := range []string{
		"node.id=1",
		"process.roles=broker,controller",
		"listeners=PLAINTEXT://" + client + ",CONTROLLER://" + ctrl,
		"advertised.listeners=PLAINTEXT://" + client,
		"controller.listener.names=CONTROLLER",
		"controller.quorum.bootstrap.servers=" + ctrl,
		"log.dirs=" + logDir,
		"group.initial.rebalance.delay.ms=0",
		// Both targets check retention every second (read-only in Kafka;
		// its five-minute default would stall the lifecycle scenarios).
		"log.retention.check.interval.ms=1000",
	} {
		args = append(args, "--override", kv)
	}
	return args
}

// kafkaServerProperties is 4.3.1's combined-mode sample on host's ports.
func kafkaServerProperties(logDir, host string) string {
	client := net.JoinHostPort(host, strconv.Itoa(ClientPort))
	ctrl := net.JoinHostPort(host, strconv.Itoa(ControllerPort))
	return fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=%[3]s
listeners=PLAINTEXT://%[2]s,CONTROLLER://%[3]s
advertised.listeners=PLAINTEXT://%[2]s,CONTROLLER://%[3]s
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=%[1]s
num.partitions=1
num.network.threads=3
num.io.threads=8
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.retention.check.interval.ms=1000
`, logDir, client, ctrl)
}

// prepareKafka writes server.properties, formats the log dir with
// StorageTool --standalone and returns the kafka.Kafka command line with
// the JVM flags kafka-server-start.sh uses.
func prepareKafka(ctx context.Context, t *Tools, dir, logDir, host string) (launch, error) {
	props := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(props, []byte(kafkaServerProperties(logDir, host)), 0o644); err != nil {
		return launch{}, err
	}
	clusterID, err := t.kafkaRandomUUID(ctx)
	if err != nil {
		return launch{}, err
	}
	if err := t.kafkaFormat(ctx, props, "--standalone", "-t", clusterID); err != nil {
		return launch{}, err
	}
	cmd, err := t.kafkaServerCmd(ctx, dir, props)
	if err != nil {
		return launch{}, err
	}
	return launch{cmd: cmd, describe: "Apache Kafka " + KafkaVersion + " (kafka_2.13 from Maven Central, KRaft combined mode)"}, nil
}

// kafkaRandomUUID asks StorageTool random-uuid for a cluster or directory id.
func (t *Tools) kafkaRandomUUID(ctx context.Context) (string, error) {
	libs, err := t.MavenLibs(ctx, SetKafka)
	if err != nil {
		return "", err
	}
	out, err := Run(ctx, Cmd{Name: "java", Args: []string{"-cp", libs + "/*", "kafka.tools.StorageTool", "random-uuid"}, Timeout: time.Minute})
	if err != nil {
		return "", fmt.Errorf("StorageTool random-uuid: %w", err)
	}
	return strings.TrimSpace(out.Stdout), nil
}

// kafkaFormat runs StorageTool format -c props with the given flags (the
// cluster id and how the quorum starts).
func (t *Tools) kafkaFormat(ctx context.Context, props string, flags ...string) error {
	libs, err := t.MavenLibs(ctx, SetKafka)
	if err != nil {
		return err
	}
	toolsLog, err := t.Log4jConfig(false)
	if err != nil {
		return err
	}
	args := append([]string{"-Dlog4j2.configurationFile=" + toolsLog, "-cp", libs + "/*",
		"kafka.tools.StorageTool", "format", "-c", props}, flags...)
	if _, err := Run(ctx, Cmd{Name: "java", Args: args, Timeout: 2 * time.Minute}); err != nil {
		return fmt.Errorf("StorageTool format %s: %w", props, err)
	}
	return nil
}

// kafkaServerCmd is the kafka.Kafka command line for the properties file
// props, with the JVM flags kafka-server-start.sh uses and its logs under
// dir/logs.
func (t *Tools) kafkaServerCmd(ctx context.Context, dir, props string) (Cmd, error) {
	libs, err := t.MavenLibs(ctx, SetKafka)
	if err != nil {
		return Cmd{}, err
	}
	brokerLog, err := t.Log4jConfig(true)
	if err != nil {
		return Cmd{}, err
	}
	args := []string{"-Xms1G", "-Xmx1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
		"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15",
		"-Djava.awt.headless=true", "-Dlog4j2.configurationFile=" + brokerLog,
		"-Dkafka.logs.dir=" + filepath.Join(dir, "logs"), "-cp", libs + "/*", "kafka.Kafka", props}
	return Cmd{Name: "java", Args: args, Dir: dir}, nil
}

// KafkaBrokerCmd formats dir/data for a single combined Apache Kafka node
// on host (a claimed loopback address: its ClientPort and ControllerPort),
// as the kafka target does, and returns the command that runs it. Unlike
// the target, which starts afresh each time, the caller may run the
// command again on the same data (a restart after a kill, in
// integration/streams).
func (t *Tools) KafkaBrokerCmd(ctx context.Context, dir, host string) (Cmd, error) {
	logDir := filepath.Join(dir, "data")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return Cmd{}, err
	}
	l, err := prepareKafka(ctx, t, dir, logDir, host)
	return l.cmd, err
}

var commitRe = regexp.MustCompile(`^[0-9a-f]{7,40}$`)

// gitDescribe returns the short commit of the repository, with "+dirty"
// when the work tree has uncommitted changes.
func gitDescribe(ctx context.Context, root string) string {
	out, err := Run(ctx, Cmd{Name: "git", Args: []string{"rev-parse", "--short=12", "HEAD"}, Dir: root, Timeout: 10 * time.Second})
	c := strings.TrimSpace(out.Stdout)
	if err != nil || !commitRe.MatchString(c) {
		return "unknown-commit"
	}
	st, err := Run(ctx, Cmd{Name: "git", Args: []string{"status", "--porcelain", "--untracked-files=no"}, Dir: root, Timeout: 10 * time.Second})
	if err == nil && strings.TrimSpace(st.Stdout) != "" {
		c += "+dirty"
	}
	return c
}

// atoiOr parses s or returns def.
func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return def
	}
	return n
}

// clusterTarget is a three-broker cluster (ClusterLayout) of Apache Kafka
// or Gregor, laid out afresh, on new ports and directories, at each start.
// Of TargetOptions it uses WorkDir and ReadyWait; CPUList and OnLaunch are
// the benchmark's, which runs single nodes.
type clusterTarget struct {
	name   string
	flavor string // "kafka" or "gregor"
	layout ClusterLayout
	tools  *Tools
	opts   TargetOptions

	cluster *Cluster
	starts  int
}

func (c *clusterTarget) Name() string { return c.name }

func (c *clusterTarget) Start(ctx context.Context) error {
	if c.cluster != nil && c.cluster.Alive() == nil {
		return nil
	}
	if c.cluster != nil {
		_ = c.cluster.Stop()
		c.cluster = nil
	}
	c.starts++
	dir := filepath.Join(c.opts.WorkDir, fmt.Sprintf("%s-%d", c.name, c.starts))
	_ = os.RemoveAll(dir)
	cl, err := StartCluster(ctx, c.tools, c.flavor, c.layout, dir, c.opts.ReadyWait)
	if err != nil {
		return fmt.Errorf("starting %s: %w", c.name, err)
	}
	c.cluster = cl
	return nil
}

func (c *clusterTarget) Alive() error {
	if c.cluster == nil {
		return errors.New("not started")
	}
	return c.cluster.Alive()
}

func (c *clusterTarget) Bootstrap() string {
	if c.cluster == nil {
		return ""
	}
	return c.cluster.Bootstrap()
}

// LogDir is "": a cluster has one per broker (see Topology).
func (c *clusterTarget) LogDir() string { return "" }

// Pid is 0: a cluster is several processes (see Cluster.Nodes).
func (c *clusterTarget) Pid() int { return 0 }

func (c *clusterTarget) Topology() Topology {
	if c.cluster == nil {
		return Topology{}
	}
	var t Topology
	for _, b := range c.cluster.Brokers() {
		t.Brokers = append(t.Brokers, BrokerNode{ID: b.ID, Addr: b.Addr(), LogDir: b.LogDir})
	}
	for _, v := range c.cluster.Controllers() {
		t.Voters = append(t.Voters, v.ID)
	}
	return t
}

func (c *clusterTarget) Stop() error {
	if c.cluster == nil {
		return nil
	}
	return c.cluster.Stop()
}

func (c *clusterTarget) Describe() string {
	if c.cluster == nil {
		return c.name
	}
	return c.cluster.Describe
}

// Cluster is the running cluster, for failure scenarios that kill and
// restart nodes (reach it with a type assertion to
// interface{ Cluster() *Cluster }); nil before Start.
func (c *clusterTarget) Cluster() *Cluster { return c.cluster }
