package integration_test

// A gregor process for the black-box group tests: the binary built from
// this checkout, on free 127.0.0.1 ports, with a temporary data dir, and
// stopped (or killed) by the test that started it.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var gregorBuild struct {
	once sync.Once
	path string
	err  error
}

// gregorBinary builds ./cmd/gregor once per test binary.
func gregorBinary(t testing.TB) string {
	t.Helper()
	gregorBuild.once.Do(func() {
		_, here, _, _ := runtime.Caller(0)
		root := filepath.Dir(filepath.Dir(here))
		dir, err := os.MkdirTemp("", "gregor-groups-test-")
		if err != nil {
			gregorBuild.err = err
			return
		}
		gregorBuild.path = filepath.Join(dir, "gregor")
		cmd := exec.Command("go", "build", "-o", gregorBuild.path, "./cmd/gregor")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			gregorBuild.err = fmt.Errorf("building gregor: %v\n%s", err, out)
		}
	})
	if gregorBuild.err != nil {
		t.Fatal(gregorBuild.err)
	}
	return gregorBuild.path
}

// lockedBuffer collects a child's output (written by exec's copying
// goroutines, read by the test).
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// gregor is one node. Its ports and data dir survive restarts.
type gregor struct {
	t         testing.TB
	dir       string
	port      int
	ctrlPort  int
	overrides []string

	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startGregor starts a fresh node with extra key=value overrides.
func startGregor(t testing.TB, overrides ...string) *gregor {
	t.Helper()
	g := &gregor{t: t, dir: t.TempDir(), port: freePort(t), ctrlPort: freePort(t), overrides: overrides}
	g.start()
	t.Cleanup(func() {
		g.stop()
		if t.Failed() {
			t.Logf("gregor's output:\n%s", g.out.String())
		}
	})
	return g
}

func (g *gregor) addr() string { return "127.0.0.1:" + strconv.Itoa(g.port) }

func (g *gregor) start() {
	g.t.Helper()
	if err := g.tryStart(); err != nil {
		g.t.Fatalf("gregor did not become ready: %v\n%s", err, g.out.String())
	}
}

func (g *gregor) tryStart() error {
	args := []string{
		"--override", fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", g.port, g.ctrlPort),
		"--override", fmt.Sprintf("controller.quorum.bootstrap.servers=127.0.0.1:%d", g.ctrlPort),
		"--override", "log.dirs=" + g.dir,
		"--override", "group.initial.rebalance.delay.ms=0",
	}
	for _, o := range g.overrides {
		args = append(args, "--override", o)
	}
	g.out = &lockedBuffer{}
	g.cmd = exec.Command(gregorBinary(g.t), args...)
	g.cmd.Stdout, g.cmd.Stderr = g.out, g.out
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.cmd.Start(); err != nil {
		return fmt.Errorf("starting gregor: %w", err)
	}
	exited := make(chan struct{})
	g.exited = exited
	go func() {
		g.cmd.Wait()
		close(exited)
	}()
	if err := g.waitReady(20 * time.Second); err != nil {
		g.kill()
		return err
	}
	return nil
}

// restart starts the node again on the same dir and ports. A node killed
// with kill -9 may be refused its re-registration for as long as its
// previous incarnation's broker session lasts (main at this writing exits
// then; Kafka's broker retries): start again until it comes up.
func (g *gregor) restart() {
	g.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := g.tryStart()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if strings.Contains(g.out.String(), "DUPLICATE_BROKER_REGISTRATION") {
				g.t.Fatalf("gregor cannot restart after kill -9: the new controller refuses the node's own re-registration (fixed on the harness branch, 158aa9a): %v", err)
			}
			g.t.Fatalf("gregor did not restart: %v\n%s", err, g.out.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitReady polls ApiVersions until the node answers.
func (g *gregor) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-g.exited:
			return fmt.Errorf("gregor exited")
		default:
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(g.addr()), kgo.RequestRetries(0))
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
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits (SIGKILL after 20 s).
func (g *gregor) stop() {
	if g.cmd == nil || g.cmd.Process == nil {
		return
	}
	select {
	case <-g.exited:
		return
	default:
	}
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(20 * time.Second):
		g.t.Errorf("gregor did not stop within 20s of SIGTERM")
		g.kill()
	}
}

// kill is kill -9: no shutdown work at all.
func (g *gregor) kill() {
	if g.cmd == nil || g.cmd.Process == nil {
		return
	}
	syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
	<-g.exited
}

// client returns a franz-go client, closed with the test.
func (g *gregor) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(g.addr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
