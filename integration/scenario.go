package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Status is a scenario's outcome.
type Status string

const (
	Pass Status = "pass"
	Fail Status = "fail"
	Skip Status = "skip"
)

// Result is one scenario's outcome against one target.
type Result struct {
	Scenario string        `json:"scenario"`
	Status   Status        `json:"status"`
	Reason   string        `json:"reason,omitempty"`
	Note     string        `json:"note,omitempty"` // a scenario's summary, shown even on pass
	Elapsed  time.Duration `json:"elapsed_ns"`
}

// Scenario is one named, checked compatibility test. Run returns nil for a
// pass, a *SkipError for a skip, and any other error for a failure. Every
// command it runs must be bounded (Env's helpers are), and the whole run is
// bounded by Timeout.
type Scenario struct {
	Name    string
	Doc     string // one line: what it checks
	Timeout time.Duration
	Run     func(ctx context.Context, e *Env) error
	// OwnNodes marks a scenario that starts every node it talks to
	// (Env.StartNode) and never uses the shared target: the runner runs
	// these one at a time beside the shared target's scenarios, whose
	// time goes mostly to waiting (consumers' idle timeouts, JVM
	// start-ups), so that they add little to a run's length.
	OwnNodes bool
}

// SkipError marks a scenario that cannot run against this target.
type SkipError struct{ Reason string }

func (s *SkipError) Error() string { return "skipped: " + s.Reason }

// Skipf returns a *SkipError.
func Skipf(format string, args ...any) error { return &SkipError{Reason: fmt.Sprintf(format, args...)} }

// Scenarios returns every scenario, in report order. The list is built
// fresh on each call so that there is no package-level mutable registry.
func Scenarios() []Scenario {
	var all []Scenario
	all = append(all, cliScenarios()...)
	all = append(all, shareScenarios()...)
	all = append(all, lifecycleScenarios()...)
	all = append(all, verifierScenarios()...)
	all = append(all, kgoScenarios()...)
	all = append(all, clientScenarios()...)
	all = append(all, registryScenarios()...)
	all = append(all, txnScenarios()...)
	all = append(all, streamsScenarios()...)
	all = append(all, connectScenarios()...)
	all = append(all, connectMirrorScenarios()...)
	all = append(all, streamsAppScenarios()...)
	all = append(all, tlsScenarios()...)
	all = append(all, aclScenarios()...)
	all = append(all, saslScenarios()...)
	all = append(all, delegationTokenScenarios()...)
	all = append(all, quotaScenarios()...)
	all = append(all, opsScenarios()...)
	all = append(all, tieredScenarios()...)
	all = append(all, mirrorScenarios()...)
	return all
}

// Select returns the scenarios named in names, in the order of all, and an
// error naming any that match nothing. A name ending in "*" is a prefix.
func Select(all []Scenario, names []string) ([]Scenario, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []Scenario
	for _, s := range all {
		matched := false
		for n := range want {
			if n == s.Name || strings.HasSuffix(n, "*") && strings.HasPrefix(s.Name, strings.TrimSuffix(n, "*")) {
				matched = true
			}
		}
		if matched {
			out = append(out, s)
		}
	}
	for n := range want {
		for _, s := range out {
			if n == s.Name || strings.HasSuffix(n, "*") && strings.HasPrefix(s.Name, strings.TrimSuffix(n, "*")) {
				delete(want, n)
				break
			}
		}
	}
	if len(want) > 0 {
		var missing []string
		for n := range want {
			missing = append(missing, n)
		}
		return nil, fmt.Errorf("unknown scenarios: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// Env is what a scenario runs with.
type Env struct {
	Target Target
	Tools  *Tools
	Dir    string // scratch directory of this scenario
	Log    *slog.Logger

	note string
	// nodes counts the single nodes the scenario started (StartNode);
	// cleanups stop them when it ends.
	nodes    int
	cleanups []func()
}

// cleanup runs the scenario's cleanups, latest first.
func (e *Env) cleanup() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	e.cleanups = nil
}

// Notef records a one-line summary that the report shows next to the
// outcome (for suites that contain many tests).
func (e *Env) Notef(format string, args ...any) { e.note = fmt.Sprintf(format, args...) }

// Bootstrap is the target's client listener.
func (e *Env) Bootstrap() string { return e.Target.Bootstrap() }

// logDirsVisible reports whether the harness can read every broker's
// log.dirs (not so for an external target).
func (e *Env) logDirsVisible() bool {
	brokers := e.Target.Topology().Brokers
	for _, b := range brokers {
		if b.LogDir == "" {
			return false
		}
	}
	return len(brokers) > 0
}

// partitionLogDir is the log.dirs of the broker that leads topic's
// partition, which with replication factor 1 is the one broker holding its
// files. On a single broker that is its log.dirs; on a cluster the leader
// is asked for, waiting out the moment after creation when there is none.
func (e *Env) partitionLogDir(ctx context.Context, topic string, partition int32) (string, error) {
	brokers := e.Target.Topology().Brokers
	if len(brokers) == 1 {
		return brokers[0].LogDir, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.Bootstrap(), ",")...))
	if err != nil {
		return "", fmt.Errorf("client to find the leader of %s-%d: %w", topic, partition, err)
	}
	defer cl.Close()
	var leader int32 = -1
	err = until(ctx, 30*time.Second, 250*time.Millisecond, func() (bool, error) {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return false, err
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if t.Topic != nil && *t.Topic == topic && p.Partition == partition && p.ErrorCode == 0 {
					leader = p.Leader
				}
			}
		}
		return leader >= 0, nil
	})
	if err != nil {
		return "", fmt.Errorf("finding the leader of %s-%d: %w", topic, partition, err)
	}
	for _, b := range brokers {
		if int32(b.ID) == leader {
			return b.LogDir, nil
		}
	}
	return "", fmt.Errorf("%s-%d is led by broker %d, which the target does not list", topic, partition, leader)
}

// Name returns a topic or group name unique to this run.
func (e *Env) Name(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// Exec runs c with a default step timeout of 2 minutes and logs it.
func (e *Env) Exec(ctx context.Context, c Cmd) (Output, error) {
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.Dir == "" {
		c.Dir = e.Dir
	}
	e.Log.Debug("exec", "cmd", c.String())
	out, err := Run(ctx, c)
	e.Log.Debug("done", "exit", out.ExitCode, "elapsed", out.Elapsed.Round(time.Millisecond))
	e.saveOutput(c, out)
	return out, err
}

// saveOutput keeps every step's output next to the scenario for whoever
// debugs it (a step can exit 0 and still fail the scenario's checks).
func (e *Env) saveOutput(c Cmd, out Output) {
	f, err := os.OpenFile(filepath.Join(e.Dir, "steps.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "### %s\n### exit %d after %s\n--- stdout\n%s\n--- stderr\n%s\n", c.String(), out.ExitCode, out.Elapsed, out.Stdout, out.Stderr)
}

// Java runs a main class from a Maven set.
func (e *Env) Java(ctx context.Context, timeout time.Duration, set, mainClass string, args ...string) (Output, error) {
	c, err := e.javaCmd(ctx, set, mainClass, args...)
	if err != nil {
		return Output{}, err
	}
	c.Timeout = timeout
	return e.Exec(ctx, c)
}

// javaCmd is Tools.JavaCmd with temporary files (LogCompactionTester
// writes its logs there) kept in the scenario directory.
func (e *Env) javaCmd(ctx context.Context, set, mainClass string, args ...string) (Cmd, error) {
	c, err := e.Tools.JavaCmd(ctx, set, mainClass, args...)
	if err != nil {
		return Cmd{}, err
	}
	c.Args = append([]string{"-Djava.io.tmpdir=" + e.Dir}, c.Args...)
	return c, nil
}

// Kafka runs one of the 4.3.1 tools with --bootstrap-server prepended.
func (e *Env) Kafka(ctx context.Context, mainClass string, args ...string) (Output, error) {
	return e.Java(ctx, 2*time.Minute, SetKafka, mainClass, append([]string{"--bootstrap-server", e.Bootstrap()}, args...)...)
}

// KafkaStdin is Kafka with input on stdin (console producer).
func (e *Env) KafkaStdin(ctx context.Context, stdin, mainClass string, args ...string) (Output, error) {
	c, err := e.javaCmd(ctx, SetKafka, mainClass, append([]string{"--bootstrap-server", e.Bootstrap()}, args...)...)
	if err != nil {
		return Output{}, err
	}
	c.Stdin = stdin
	return e.Exec(ctx, c)
}

// Runner runs scenarios against one target, restarting the target if it
// died during a scenario, and never letting one scenario's failure stop
// the run.
type Runner struct {
	Target  Target
	Tools   *Tools
	WorkDir string
	Log     *slog.Logger
	// Report, if set, is called after each scenario (progress output).
	Report func(Result)
	// Spare, if set, makes a second target of Target's kind (not started).
	// Once the OwnNodes scenarios are done, their lane starts it and takes
	// the shared target's scenarios from the end of the list while the
	// first lane takes them from the front, so that both lanes end
	// together. Each scenario still runs on a target of its own kind with
	// nothing else running on it.
	Spare func() (Target, error)
}

// maxRestarts bounds how often a target that keeps dying is restarted.
const maxRestarts = 3

// Run runs every scenario and returns one result each, in the order
// given: the shared target's scenarios in order on this goroutine, and the
// OwnNodes ones in order on another, beside them; that one then helps with
// the shared target's scenarios on a spare target (Runner.Spare).
//
// results[i] is written by whichever lane took scenario i, once; the
// queue's mutex hands each index to one lane.
func (r *Runner) Run(ctx context.Context, scenarios []Scenario) []Result {
	results := make([]Result, len(scenarios))
	var reportMu sync.Mutex
	report := func(res Result) {
		if r.Report != nil {
			reportMu.Lock()
			r.Report(res)
			reportMu.Unlock()
		}
	}
	var shared sharedQueue
	for i, s := range scenarios {
		if !s.OwnNodes {
			shared.items = append(shared.items, i)
		}
	}
	// The first lane claims its first scenario before the other lane
	// exists, so that a spare which comes up quickly (the OwnNodes
	// scenarios all done at once) cannot take the whole queue from the
	// back before this lane has asked for the front.
	first, haveFirst := shared.front()
	var own sync.WaitGroup
	own.Add(1)
	go func() {
		defer own.Done()
		for i, s := range scenarios {
			if !s.OwnNodes {
				continue
			}
			res := Result{Scenario: s.Name, Status: Fail, Reason: "not run: " + fmt.Sprint(ctx.Err())}
			if ctx.Err() == nil {
				res = r.runOne(ctx, r.Target, s)
			}
			results[i] = res
			report(res)
		}
		r.helpOnSpare(ctx, scenarios, &shared, results, report)
	}()
	lane := &targetLane{runner: r, target: r.Target}
	for i, ok := first, haveFirst; ok; i, ok = shared.front() {
		results[i] = lane.run(ctx, scenarios[i])
		report(results[i])
	}
	own.Wait()
	return results
}

// helpOnSpare runs the shared target's scenarios from the end of the
// queue on a spare target until the queue is empty. A spare that cannot
// be made or started (or restarted) leaves the rest to the first lane.
func (r *Runner) helpOnSpare(ctx context.Context, scenarios []Scenario, q *sharedQueue, results []Result, report func(Result)) {
	if r.Spare == nil || q.empty() || ctx.Err() != nil {
		return
	}
	spare, err := r.Spare()
	if err != nil {
		r.Log.Warn("no spare target; the shared target runs the rest alone", "err", err)
		return
	}
	defer func() {
		if err := spare.Stop(); err != nil {
			r.Log.Warn("stopping the spare target", "err", err)
		}
	}()
	lane := &targetLane{runner: r, target: spare}
	for !q.empty() && ctx.Err() == nil {
		if err := lane.ensureStarted(ctx); err != nil {
			r.Log.Warn("the spare target is down; the shared target runs the rest alone", "err", err)
			return
		}
		i, ok := q.back()
		if !ok {
			return
		}
		results[i] = lane.run(ctx, scenarios[i])
		report(results[i])
	}
}

// sharedQueue hands out the shared target's scenarios (indices into the
// run's list) from either end.
type sharedQueue struct {
	mu    sync.Mutex
	items []int
}

func (q *sharedQueue) front() (int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return 0, false
	}
	i := q.items[0]
	q.items = q.items[1:]
	return i, true
}

func (q *sharedQueue) back() (int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return 0, false
	}
	i := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return i, true
}

func (q *sharedQueue) empty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) == 0
}

// targetLane runs scenarios one at a time on one target, starting it
// when it is down (at most maxRestarts times after the first start).
// Owned by one goroutine.
type targetLane struct {
	runner   *Runner
	target   Target
	restarts int
	started  bool
	startErr error
}

// ensureStarted starts the target if it is not running, and reports why
// it cannot be.
func (l *targetLane) ensureStarted(ctx context.Context) error {
	if l.startErr != nil {
		return l.startErr
	}
	err := l.target.Alive()
	if err == nil {
		return nil
	}
	if l.started {
		l.restarts++
		l.runner.Log.Warn("target is down; restarting", "target", l.target.Name(), "err", err)
	}
	if l.restarts > maxRestarts {
		l.startErr = fmt.Errorf("gave up after %d restarts: %w", maxRestarts, err)
	} else if err := l.target.Start(ctx); err != nil {
		l.startErr = err
	}
	l.started = l.startErr == nil
	return l.startErr
}

// run runs s on the lane's target, or fails it when the target cannot run.
func (l *targetLane) run(ctx context.Context, s Scenario) Result {
	res := Result{Scenario: s.Name, Status: Fail}
	if ctx.Err() != nil {
		res.Reason = "not run: " + ctx.Err().Error()
		return res
	}
	if err := l.ensureStarted(ctx); err != nil {
		res.Reason = "target did not start: " + err.Error()
		return res
	}
	return l.runner.runOne(ctx, l.target, s)
}

func (r *Runner) runOne(ctx context.Context, target Target, s Scenario) Result {
	start := time.Now()
	res := Result{Scenario: s.Name}
	dir := filepath.Join(r.WorkDir, "scenarios", strings.ReplaceAll(s.Name, "/", "_"))
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		res.Status, res.Reason = Fail, err.Error()
		return res
	}
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	env := &Env{Target: target, Tools: r.Tools, Dir: dir, Log: r.Log.With("scenario", s.Name)}
	err := runProtected(sctx, s, env)
	env.cleanup()
	res.Elapsed = time.Since(start)
	res.Note = env.note
	var skip *SkipError
	switch {
	case err == nil:
		res.Status = Pass
	case errors.As(err, &skip):
		res.Status, res.Reason = Skip, skip.Reason
	default:
		res.Status, res.Reason = Fail, oneLine(err.Error())
		if sctx.Err() == context.DeadlineExceeded {
			res.Reason = fmt.Sprintf("timed out after %s: %s", timeout, res.Reason)
		}
		if aerr := target.Alive(); aerr != nil {
			res.Reason += " [target died: " + oneLine(aerr.Error()) + "]"
		}
	}
	return res
}

// runProtected turns a panic in scenario code into a failure, so a harness
// bug in one scenario cannot take the whole run (and its cleanup) down.
func runProtected(ctx context.Context, s Scenario, env *Env) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("harness panic in scenario: %v", p)
		}
	}()
	return s.Run(ctx, env)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return truncate(s, 400)
}

// Summary counts results.
func Summary(results []Result) (pass, fail, skip int) {
	for _, r := range results {
		switch r.Status {
		case Pass:
			pass++
		case Fail:
			fail++
		case Skip:
			skip++
		}
	}
	return
}
