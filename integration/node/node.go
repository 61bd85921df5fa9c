// Package node starts the built gregor binary for black-box tests: each
// node on a loopback address of its own (integration.ClaimLoopback, kept
// across restarts), with a fresh data dir, stopped (or killed) by the test.
//
// It may import any of Gregor's packages.
package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
	// mainRuns is set by Main: the built binary is removed only there, as
	// the test process ends, so Binary refuses to build without it.
	mainRuns bool
)

// Main runs the package's tests and then removes the binary Binary built
// (a temporary directory of 26 MB that would otherwise stay behind after
// every run). Every package that starts gregor processes calls it from its
// TestMain: os.Exit(node.Main(m)).
func Main(m *testing.M) int {
	mainRuns = true
	code := m.Run()
	if binDir != "" {
		if err := os.RemoveAll(binDir); err != nil {
			fmt.Fprintf(os.Stderr, "removing the gregor binary: %v\n", err)
		}
	}
	return code
}

// Binary builds ./cmd/gregor once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	if !mainRuns {
		t.Fatal("node.Binary: this test package has no TestMain calling node.Main, so the binary would be left behind")
	}
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "gregor-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		binPath = filepath.Join(dir, "gregor")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/gregor")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building gregor: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Node is a running (or stopped) gregor process.
type Node struct {
	t testing.TB
	// ID is node.id (1 when zero); Voters, when set, is
	// controller.quorum.voters, and the node is formatted into that static
	// quorum (see StartQuorum) instead of auto-formatting alone.
	ID     int32
	Voters string
	// Roles is process.roles ("broker,controller" when empty). A
	// controller-only node has no client listener (Port is unused); a
	// broker-only node has no controller listener and follows the quorum
	// named by Quorum.
	Roles string
	// Quorum, when set, is the node's whole quorum setting
	// (controller.quorum.voters=... or controller.quorum.bootstrap.servers=...).
	Quorum string
	// DebugAddr is the node's GREGOR_PPROF_ADDR (set by StartQuorum and
	// StartSplit): /debug/metadata there gives its image's digest.
	DebugAddr string
	Dir       string // log.dirs
	// IP is the node's own loopback address, claimed for the test's
	// lifetime; its listeners are on the fixed ports below.
	IP       string
	Port     int // client listener (integration.ClientPort)
	CtrlPort int // controller listener (integration.ControllerPort)
	// ExtraPort is a third port, for a listener of the test's own (an
	// INTERNAL one, say): integration.InternalPort.
	ExtraPort int
	// ControllerTLS, when set, is how the readiness check speaks to a
	// controller-only node's SSL controller listener.
	ControllerTLS *tls.Config
	// FormatFlags are added to the node's `gregor storage format` (set by
	// StartQuorumWith's or StartSplitWith's perNode): --add-scram, say.
	FormatFlags []string
	Overrides   []string
	Env         []string // added to the test process's environment
	cmd         *exec.Cmd
	out         *syncBuffer
	earlierOut  []string // the output of each earlier run of this node
	exited      chan struct{}
	exitErr     error
	StartupDur  time.Duration
	begin       time.Time
}

// newNode is a node with a fresh data dir on a loopback address claimed
// until the test ends (the release is registered first, so it runs after
// the node's Stop).
func newNode(t testing.TB, id int32, roles string, overrides []string) *Node {
	t.Helper()
	host := Host(t)
	return &Node{t: t, ID: id, Roles: roles, Dir: t.TempDir(), IP: host.IP,
		Port: integration.ClientPort, CtrlPort: integration.ControllerPort, ExtraPort: integration.InternalPort,
		Overrides: slices.Clone(overrides)}
}

// Host claims a loopback address of the test's own (for a process the
// test starts itself), released when the test ends.
func Host(t testing.TB) *integration.Loopback {
	t.Helper()
	host, err := integration.ClaimLoopback()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(host.Release)
	return host
}

// Start starts a fresh node with extra key=value overrides and waits until
// it answers ApiVersions.
func Start(t testing.TB, overrides ...string) *Node {
	t.Helper()
	return StartEnv(t, nil, overrides...)
}

// StartEnv is Start with variables added to the node's environment (such
// as a test hook's, GREGOR_TEST_FAULTS_FILE).
func StartEnv(t testing.TB, env []string, overrides ...string) *Node {
	t.Helper()
	n := newNode(t, 0, "", overrides)
	n.Env = env
	n.start()
	t.Cleanup(func() { n.Stop() })
	return n
}

// Exited is closed when the process has exited; ExitErr then says how.
func (n *Node) Exited() <-chan struct{} { return n.exited }

// ExitErr is the process's exit status once Exited is closed.
func (n *Node) ExitErr() error {
	<-n.exited
	return n.exitErr
}

// Addr is the client bootstrap address.
func (n *Node) Addr() string { return n.hostPort(n.Port) }

// CtrlAddr is the controller listener's address.
func (n *Node) CtrlAddr() string { return n.hostPort(n.CtrlPort) }

// ExtraAddr is the address of the test's own listener on ExtraPort.
func (n *Node) ExtraAddr() string { return n.hostPort(n.ExtraPort) }

func (n *Node) hostPort(port int) string { return net.JoinHostPort(n.IP, strconv.Itoa(port)) }

// Args are the command-line arguments the node runs with.
func (n *Node) Args() []string {
	id, quorum := n.ID, "controller.quorum.bootstrap.servers="+n.CtrlAddr()
	if id == 0 {
		id = 1
	}
	if n.Voters != "" {
		quorum = "controller.quorum.voters=" + n.Voters
	}
	if n.Quorum != "" {
		quorum = n.Quorum
	}
	listeners := "PLAINTEXT://" + n.Addr() + ",CONTROLLER://" + n.CtrlAddr()
	advertised := "PLAINTEXT://" + n.Addr()
	switch n.Roles {
	case "controller":
		listeners = "CONTROLLER://" + n.CtrlAddr()
		advertised = listeners
	case "broker":
		listeners = advertised
	}
	args := []string{
		"--override", fmt.Sprintf("node.id=%d", id),
		"--override", "listeners=" + listeners,
		"--override", "advertised.listeners=" + advertised,
		"--override", quorum,
		"--override", "log.dirs=" + n.Dir,
		"--override", "group.initial.rebalance.delay.ms=0",
	}
	if n.Roles != "" {
		args = append(args, "--override", "process.roles="+n.Roles)
	}
	for _, o := range n.Overrides {
		args = append(args, "--override", o)
	}
	return args
}

func (n *Node) start() {
	n.t.Helper()
	n.launch()
	n.AwaitReady(15 * time.Second)
}

// Launch starts the stopped node again without waiting for it to serve
// (a broker whose controllers are down, say); AwaitReady waits.
func (n *Node) Launch() {
	n.t.Helper()
	n.launch()
}

// AwaitReady waits until the node answers ApiVersions, and fails the test
// with the node's output and goroutines if it does not within timeout.
func (n *Node) AwaitReady(timeout time.Duration) {
	n.t.Helper()
	if err := n.waitReady(timeout); err != nil {
		n.dumpGoroutinesAndKill()
		n.t.Fatalf("gregor did not become ready: %v\n%s", err, n.out.String())
	}
	n.t.Logf("gregor at %s ready %v after exec", n.Addr(), n.StartupDur.Round(time.Millisecond))
}

// dumpGoroutinesAndKill stops a node that hangs with SIGQUIT first, so
// the Go runtime writes every goroutine's stack into its output (what it
// was waiting for is the finding), then with SIGKILL.
func (n *Node) dumpGoroutinesAndKill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-n.exited:
	case <-time.After(5 * time.Second):
	}
	n.Kill()
}

// launch starts the process without waiting for it to serve.
func (n *Node) launch() {
	n.t.Helper()
	if n.out != nil {
		n.earlierOut = append(n.earlierOut, n.out.String())
	}
	n.out = &syncBuffer{}
	n.cmd = exec.Command(Binary(n.t), n.Args()...)
	if len(n.Env) > 0 {
		n.cmd.Env = append(os.Environ(), n.Env...)
	}
	n.cmd.Stdout = n.out
	n.cmd.Stderr = n.out
	n.cmd.SysProcAttr = integration.ChildProcAttr()
	begin := time.Now()
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.exited = make(chan struct{})
	go func() {
		n.exitErr = n.cmd.Wait()
		close(n.exited)
	}()
	n.begin = begin
}

// waitReady polls ApiVersions until it answers.
func (n *Node) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	defer func() { n.StartupDur = time.Since(n.begin) }()
	for {
		select {
		case <-n.exited:
			return fmt.Errorf("exited: %v", n.exitErr)
		default:
		}
		addr := n.Addr()
		opts := []kgo.Opt{kgo.RequestRetries(0)}
		if n.Roles == "controller" {
			addr = n.CtrlAddr()
			if n.ControllerTLS != nil {
				opts = append(opts, kgo.DialTLSConfig(n.ControllerTLS))
			}
		}
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(addr))...)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
			cancel()
			cl.Close()
			if err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Output is what the process printed so far.
func (n *Node) Output() string { return n.out.String() }

// AllOutput is the output of every run of the node, the earlier ones
// first, each headed by its number.
func (n *Node) AllOutput() string {
	var b strings.Builder
	for i, out := range append(slices.Clone(n.earlierOut), n.out.String()) {
		fmt.Fprintf(&b, "--- node %d, run %d ---\n%s", n.ID, i+1, out)
	}
	return b.String()
}

// syncBuffer collects the process output, written by exec's copying
// goroutines and read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Stop sends SIGTERM and waits for a clean exit (SIGKILL after 20 s).
func (n *Node) Stop() error {
	if n.cmd == nil || n.cmd.Process == nil {
		return nil
	}
	select {
	case <-n.exited:
		return n.exitErr
	default:
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		return n.exitErr
	case <-time.After(20 * time.Second):
		n.Kill()
		return fmt.Errorf("gregor did not stop within 20s of SIGTERM")
	}
}

// Kill sends SIGKILL to the process group and waits.
func (n *Node) Kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.exited
}

// Restart starts the process again on the same dir and ports.
func (n *Node) Restart() {
	n.t.Helper()
	n.start()
}

// StartSplit starts Kafka 4.3's lab layout: controllers with node ids
// 101.. and process.roles=controller, formatted with one
// --initial-controllers list, and brokers 1.. with process.roles=broker,
// formatted with --no-initial-controllers; both name the controllers in
// controller.quorum.bootstrap.servers. Controllers start first.
func StartSplit(t testing.TB, controllers, brokers int, overrides ...string) (ctrls, brks []*Node) {
	t.Helper()
	return StartSplitWith(t, controllers, brokers, nil, overrides...)
}

// StartSplitWith is StartSplit with overrides of each node's own, as in
// StartQuorumWith.
func StartSplitWith(t testing.TB, controllers, brokers int, perNode func(n *Node) []string, overrides ...string) (ctrls, brks []*Node) {
	t.Helper()
	clusterID := randomUUID(t)
	var bootstrap, initial []string
	for i := range controllers {
		n := newNode(t, int32(101+i), "controller", overrides)
		ctrls = append(ctrls, n)
		addr := n.CtrlAddr()
		bootstrap = append(bootstrap, addr)
		initial = append(initial, fmt.Sprintf("%d@%s:%s", n.ID, addr, randomUUID(t)))
	}
	quorum := "controller.quorum.bootstrap.servers=" + strings.Join(bootstrap, ",")
	for i := range brokers {
		brks = append(brks, newNode(t, int32(1+i), "broker", overrides))
	}
	if perNode != nil {
		for _, n := range append(append([]*Node(nil), ctrls...), brks...) {
			n.Overrides = append(n.Overrides, perNode(n)...)
		}
	}
	for _, n := range ctrls {
		n.Quorum = quorum
		format(t, n, clusterID, "--initial-controllers", strings.Join(initial, ","))
	}
	for _, n := range brks {
		n.Quorum = quorum
		format(t, n, clusterID, "--no-initial-controllers")
	}
	all := append(append([]*Node(nil), ctrls...), brks...)
	launchAll(t, all)
	return ctrls, brks
}

// launchAll starts every node at once (a quorum needs its peers before
// any node serves) and waits until each serves.
func launchAll(t testing.TB, nodes []*Node) {
	t.Helper()
	for _, n := range nodes {
		n.DebugAddr = n.hostPort(integration.DebugPort)
		n.Env = append(n.Env, "GREGOR_PPROF_ADDR="+n.DebugAddr)
	}
	for _, n := range nodes {
		n.launch()
		t.Cleanup(func() { n.Stop() })
	}
	for _, n := range nodes {
		if err := n.waitReady(30 * time.Second); err != nil {
			n.dumpGoroutinesAndKill()
			for _, m := range nodes {
				m.Kill()
			}
			t.Fatalf("node %d did not become ready: %v\n%s", n.ID, err, n.out.String())
		}
	}
}

func randomUUID(t testing.TB) string {
	t.Helper()
	out, err := exec.Command(Binary(t), "storage", "random-uuid").Output()
	if err != nil {
		t.Fatalf("gregor storage random-uuid: %v", err)
	}
	return string(bytes.TrimSpace(out))
}

// format runs `gregor storage format` for n with extra flags.
func format(t testing.TB, n *Node, clusterID string, flags ...string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "server.properties")
	// process.roles and the quorum come as overrides (Args).
	if err := os.WriteFile(file, []byte("process.roles=broker,controller\ncontroller.listener.names=CONTROLLER\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"storage", "format", "--config", file, "--cluster-id", clusterID}, flags...)
	args = append(args, n.FormatFlags...)
	if out, err := exec.Command(Binary(t), append(args, n.Args()...)...).CombinedOutput(); err != nil {
		t.Fatalf("formatting node %d: %v\n%s", n.ID, err, out)
	}
}

// Metadata is what the node's /debug/metadata reports: the offset of its
// metadata image and the image's digest.
type Metadata struct {
	Offset int64  `json:"offset"`
	Epoch  int64  `json:"epoch"`
	Digest string `json:"digest"`
}

// Metadata asks the node for its image's offset and digest.
func (n *Node) Metadata() (Metadata, error) {
	var m Metadata
	if n.DebugAddr == "" {
		return m, fmt.Errorf("node %d has no debug listener", n.ID)
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + n.DebugAddr + "/debug/metadata")
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("node %d: /debug/metadata: %s", n.ID, resp.Status)
	}
	err = json.NewDecoder(resp.Body).Decode(&m)
	return m, err
}

// StartQuorum starts size combined broker,controller nodes (ids 1..size)
// in one static quorum (controller.quorum.voters), each formatted first
// with `gregor storage format` and one cluster id, as an operator would,
// and waits until every one serves clients.
func StartQuorum(t testing.TB, size int, overrides ...string) []*Node {
	t.Helper()
	return StartQuorumWith(t, size, nil, overrides...)
}

// StartQuorumWith is StartQuorum with overrides of each node's own,
// computed from the node once its ports are picked (perNode may be nil):
// listeners on its ExtraPort, say. They come after overrides. perNode may
// also set the node's fields (ControllerTLS).
func StartQuorumWith(t testing.TB, size int, perNode func(n *Node) []string, overrides ...string) []*Node {
	t.Helper()
	nodes := make([]*Node, size)
	voters := ""
	for i := range nodes {
		nodes[i] = newNode(t, int32(i+1), "", overrides)
		if perNode != nil {
			nodes[i].Overrides = append(nodes[i].Overrides, perNode(nodes[i])...)
		}
		if i > 0 {
			voters += ","
		}
		voters += fmt.Sprintf("%d@%s", i+1, nodes[i].CtrlAddr())
	}
	clusterID := randomUUID(t)
	for _, n := range nodes {
		n.Voters = voters
		format(t, n, clusterID)
	}
	launchAll(t, nodes)
	return nodes
}

// Client returns a franz-go client for the node, closed with the test.
func (n *Node) Client(opts ...kgo.Opt) *kgo.Client {
	n.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.Addr())}, opts...)...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(cl.Close)
	return cl
}

// Metrics scrapes the node's /metrics (its HTTP listener, DebugAddr): each
// sample, its name and labels as written, to its value.
func (n *Node) Metrics() (map[string]float64, error) {
	if n.DebugAddr == "" {
		return nil, fmt.Errorf("node %d has no HTTP listener", n.ID)
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + n.DebugAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("node %d: /metrics: %s", n.ID, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return ParseMetrics(string(body))
}

// ParseMetrics parses the Prometheus text format: each sample line's name
// and labels, as written, to its value.
func ParseMetrics(text string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("sample line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("sample line %q: %w", line, err)
		}
		out[line[:i]] = v
	}
	return out, nil
}

// Pause stops the process with SIGSTOP: it keeps its sockets (a connection
// to it is accepted by the kernel and never answered) and sends nothing.
func (n *Node) Pause() {
	if n.cmd != nil && n.cmd.Process != nil {
		syscall.Kill(-n.cmd.Process.Pid, syscall.SIGSTOP)
	}
}

// Resume continues a paused process (SIGCONT).
func (n *Node) Resume() {
	if n.cmd != nil && n.cmd.Process != nil {
		syscall.Kill(-n.cmd.Process.Pid, syscall.SIGCONT)
	}
}
