package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/internal/await"
)

func TestRunTimeoutKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	// The shell starts a grandchild; the timeout must take it down too.
	c := Cmd{Name: "sh", Args: []string{"-c", "sleep 60 & echo $! > " + pidFile + "; wait"}, Timeout: 300 * time.Millisecond}
	start := time.Now()
	_, err := Run(context.Background(), c)
	var exit *ExitError
	if !errors.As(err, &exit) || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("got %v, want a deadline ExitError", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %s to stop", time.Since(start))
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid := atoiOr(string(b), 0)
	deadline := time.Now().Add(3 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still alive", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRunReportsExitCodeAndOutput(t *testing.T) {
	out, err := Run(context.Background(), Cmd{Name: "sh", Args: []string{"-c", "echo out; echo err >&2; exit 3"}, Stdin: "x"})
	var exit *ExitError
	if !errors.As(err, &exit) || out.ExitCode != 3 || out.Stdout != "out\n" || out.Stderr != "err\n" {
		t.Fatalf("got %+v, %v", out, err)
	}
	if _, err := Run(context.Background(), Cmd{Name: "/nonexistent/binary"}); err == nil {
		t.Fatal("missing binary: no error")
	}
}

func TestProcStop(t *testing.T) {
	p, err := Start(Cmd{Name: "sh", Args: []string{"-c", "trap '' TERM; echo started; sleep 60"}}, filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	// The shell prints "started" after setting its trap: from then on a
	// SIGTERM is ignored and only the SIGKILL that follows stops it.
	await.Until(t, 5*time.Second, "the shell to print \"started\"", func() error {
		if exited, _ := p.Exited(); exited {
			return fmt.Errorf("exited early; log %q", p.LogTail(5))
		}
		if !strings.Contains(p.LogTail(5), "started") {
			return fmt.Errorf("log tail %q", p.LogTail(5))
		}
		return nil
	})
	if exited, _ := p.Exited(); exited {
		t.Fatal("exited early")
	}
	start := time.Now()
	if err := p.Stop(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if exited, _ := p.Exited(); !exited || time.Since(start) > 5*time.Second {
		t.Fatalf("not stopped after SIGKILL (%s)", time.Since(start))
	}
	if !strings.Contains(p.LogTail(5), "started") {
		t.Fatalf("log tail %q", p.LogTail(5))
	}
	_ = p.Stop(time.Millisecond) // twice is fine
}

func TestWaitReadyStopsWhenProcessExits(t *testing.T) {
	host, err := ClaimLoopback()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Release()
	exited := make(chan struct{})
	close(exited)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = WaitReady(ctx, host.Addr(ClientPort), exited)
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("got %v", err)
	}
}

// fakeTarget is a Target whose liveness a test controls.
type fakeTarget struct {
	startErr error
	starts   int
	alive    bool
	tried    chan struct{} // if set, closed by the first Start
}

func (f *fakeTarget) Name() string { return "fake" }
func (f *fakeTarget) Start(context.Context) error {
	f.starts++
	if f.starts == 1 && f.tried != nil {
		close(f.tried)
	}
	if f.startErr != nil {
		return f.startErr
	}
	f.alive = true
	return nil
}
func (f *fakeTarget) Alive() error {
	if !f.alive {
		return errors.New("down")
	}
	return nil
}
func (f *fakeTarget) Bootstrap() string  { return "127.0.0.1:1" }
func (f *fakeTarget) LogDir() string     { return "" }
func (f *fakeTarget) Pid() int           { return 0 }
func (f *fakeTarget) Topology() Topology { return singleNode(f.Bootstrap(), "") }
func (f *fakeTarget) Stop() error        { f.alive = false; return nil }
func (f *fakeTarget) Describe() string   { return "fake" }

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestRunnerOutcomes(t *testing.T) {
	tgt := &fakeTarget{}
	r := &Runner{Target: tgt, WorkDir: t.TempDir(), Log: quietLog()}
	res := r.Run(context.Background(), []Scenario{
		{Name: "ok", Run: func(context.Context, *Env) error { return nil }},
		{Name: "skip", Run: func(context.Context, *Env) error { return Skipf("not here") }},
		{Name: "fail", Run: func(context.Context, *Env) error { return errors.New("boom") }},
		{Name: "panic", Run: func(context.Context, *Env) error { panic("harness bug") }},
		{Name: "slow", Timeout: 50 * time.Millisecond, Run: func(ctx context.Context, _ *Env) error { <-ctx.Done(); return ctx.Err() }},
		{Name: "kills target", Run: func(context.Context, *Env) error { tgt.alive = false; return errors.New("lost") }},
		{Name: "after restart", Run: func(context.Context, *Env) error { return nil }},
	})
	want := []struct {
		status Status
		reason string
	}{{Pass, ""}, {Skip, "not here"}, {Fail, "boom"}, {Fail, "harness panic"}, {Fail, "timed out"}, {Fail, "target died"}, {Pass, ""}}
	for i, w := range want {
		if res[i].Status != w.status || !strings.Contains(res[i].Reason, w.reason) {
			t.Errorf("%s: got %s %q, want %s %q", res[i].Scenario, res[i].Status, res[i].Reason, w.status, w.reason)
		}
	}
	if tgt.starts != 2 {
		t.Errorf("target started %d times, want 2 (once, then after it died)", tgt.starts)
	}
}

func TestRunnerTargetThatNeverStarts(t *testing.T) {
	tgt := &fakeTarget{startErr: errors.New("gregor: the broker is not built yet")}
	r := &Runner{Target: tgt, WorkDir: t.TempDir(), Log: quietLog()}
	ran := false
	res := r.Run(context.Background(), []Scenario{
		{Name: "a", Run: func(context.Context, *Env) error { ran = true; return nil }},
		{Name: "b", Run: func(context.Context, *Env) error { ran = true; return nil }},
	})
	if ran || tgt.starts != 1 {
		t.Fatalf("ran %v starts %d: a target that fails to start must be tried once and no scenario run", ran, tgt.starts)
	}
	for _, r := range res {
		if r.Status != Fail || !strings.Contains(r.Reason, "not built yet") {
			t.Errorf("%s: %s %q", r.Scenario, r.Status, r.Reason)
		}
	}
}

// With a spare, the OwnNodes lane takes shared scenarios from the end on
// the spare once its own are done: every scenario runs once, on a target
// of its kind, results stay in the given order, and the spare is stopped.
func TestRunnerSpareTakesSharedScenariosFromTheEnd(t *testing.T) {
	main, spare := &fakeTarget{}, &fakeTarget{}
	spares := 0
	r := &Runner{Target: main, WorkDir: t.TempDir(), Log: quietLog(), Spare: func() (Target, error) {
		spares++
		return spare, nil
	}}
	var mu sync.Mutex
	ranOn := map[string][]Target{}
	ownDone := make(chan struct{})
	record := func(name string) func(context.Context, *Env) error {
		return func(_ context.Context, e *Env) error {
			mu.Lock()
			ranOn[name] = append(ranOn[name], e.Target)
			mu.Unlock()
			if name == "s0" {
				// The first lane is busy until the own lane is free and
				// the spare has taken a scenario from the end (s4 started
				// there). If it never does, s0 gives up after a while and
				// the checks below say where s4 ran.
				<-ownDone
				deadline := time.Now().Add(10 * time.Second)
				for time.Now().Before(deadline) {
					mu.Lock()
					s4 := len(ranOn["s4"])
					mu.Unlock()
					if s4 > 0 {
						break
					}
					time.Sleep(time.Millisecond)
				}
			}
			return nil
		}
	}
	scenarios := []Scenario{{Name: "own", OwnNodes: true, Run: func(context.Context, *Env) error { close(ownDone); return nil }}}
	for i := range 5 {
		name := fmt.Sprintf("s%d", i)
		scenarios = append(scenarios, Scenario{Name: name, Run: record(name)})
	}
	res := r.Run(context.Background(), scenarios)
	for i, s := range scenarios {
		if res[i].Scenario != s.Name || res[i].Status != Pass {
			t.Errorf("result %d: %+v, want %s passed", i, res[i], s.Name)
		}
	}
	for i := range 5 {
		name := fmt.Sprintf("s%d", i)
		if len(ranOn[name]) != 1 {
			t.Errorf("%s ran %d times", name, len(ranOn[name]))
		}
	}
	if spares != 1 || spare.alive || spare.starts != 1 {
		t.Errorf("spare made %d times, started %d times, alive at the end %v", spares, spare.starts, spare.alive)
	}
	if len(ranOn["s4"]) == 1 && ranOn["s4"][0] != spare {
		t.Errorf("the last shared scenario ran on the shared target while it was busy with the first")
	}
	if len(ranOn["s0"]) == 1 && ranOn["s0"][0] != main {
		t.Errorf("the first shared scenario ran on the spare")
	}
}

// A spare that does not start leaves every shared scenario to the shared
// target, none failed for it.
func TestRunnerSpareThatDoesNotStart(t *testing.T) {
	main, spare := &fakeTarget{}, &fakeTarget{startErr: errors.New("no ports"), tried: make(chan struct{})}
	r := &Runner{Target: main, WorkDir: t.TempDir(), Log: quietLog(), Spare: func() (Target, error) { return spare, nil }}
	scenarios := []Scenario{{Name: "own", OwnNodes: true, Run: func(context.Context, *Env) error { return nil }}}
	for i := range 4 {
		scenarios = append(scenarios, Scenario{Name: fmt.Sprintf("s%d", i), Run: func(_ context.Context, e *Env) error {
			if e.Target != main {
				return errors.New("ran on the spare")
			}
			if i == 0 {
				// The shared target stays busy with the first scenario
				// until the spare has failed to start, so that the rest
				// are still queued when the spare lane would take them.
				select {
				case <-spare.tried:
				case <-time.After(10 * time.Second):
					return errors.New("the spare was never started")
				}
			}
			return nil
		}})
	}
	for _, res := range r.Run(context.Background(), scenarios) {
		if res.Status != Pass {
			t.Errorf("%s: %s %q", res.Scenario, res.Status, res.Reason)
		}
	}
}

func TestSelect(t *testing.T) {
	all := []Scenario{{Name: "cli/a"}, {Name: "cli/b"}, {Name: "client/c"}}
	got, err := Select(all, []string{"client/c", "cli/*"})
	if err != nil || len(got) != 3 || got[0].Name != "cli/a" {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := Select(all, []string{"cli/a", "nope"}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown name: %v", err)
	}
}

func TestScenarioNamesAreUniqueAndDocumented(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Scenarios() {
		if seen[s.Name] || s.Doc == "" || s.Run == nil {
			t.Errorf("scenario %q: duplicate, undocumented or without Run", s.Name)
		}
		seen[s.Name] = true
	}
}

func TestRequiredAndAllowlistFilesParse(t *testing.T) {
	names, err := ReadNameList("REQUIRED")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Select(Scenarios(), names); err != nil {
		t.Fatalf("REQUIRED: %v", err)
	}
	if _, err := ReadNameList("kgo-ALLOWLIST"); err != nil {
		t.Fatal(err)
	}
}

func TestCmdLabel(t *testing.T) {
	for _, c := range []struct {
		cmd  Cmd
		want string
	}{
		{Cmd{Name: "/usr/bin/kcat", Args: []string{"-L"}}, "kcat"},
		{Cmd{Name: "java", Args: []string{"-Xmx256M", "-cp", "/x/libs/*", "org.apache.kafka.tools.TopicCommand", "--list"}}, "TopicCommand"},
		{Cmd{Name: "java", Args: []string{"-version"}}, "java"},
		{Cmd{Name: "taskset", Args: []string{"-c", "1", "java", "-cp", "x", "a.b.ProducerPerformance"}}, "ProducerPerformance"},
	} {
		if got := c.cmd.Label(); got != c.want {
			t.Errorf("%v: %q, want %q", c.cmd, got, c.want)
		}
	}
}

func TestPinned(t *testing.T) {
	c := Cmd{Name: "java", Args: []string{"-cp", "x", "kafka.Kafka"}, Dir: "/d"}
	if got := Pinned("", c); got.Name != "java" || len(got.Args) != 3 {
		t.Fatalf("no cpus: %+v", got)
	}
	got := Pinned("0", c)
	if got.String() != "taskset -c 0 java -cp x kafka.Kafka" || got.Dir != "/d" || got.Label() != "Kafka" {
		t.Fatalf("pinned: %q (dir %q, label %q)", got.String(), got.Dir, got.Label())
	}
	if c.Name != "java" || len(c.Args) != 3 {
		t.Fatalf("the original changed: %+v", c)
	}
}
