package faults

// The fault suite: one test per nemesis, each running the workload for
// FAULTS_DURATION (60 s) while the nemesis injects and heals its fault
// again and again, then checking the history. They start three-node
// clusters and take minutes, so they run only with FAULTS=1 (make
// faults); FAULTS_TARGET picks the cluster (gregor-cluster, the default,
// or kafka-cluster). Each test prints the history summary and fails on
// any violation; its history and the cluster's logs are kept under
// integration/.work/faults/ when it fails.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/integration"
)

// env is one test's cluster and clients.
type env struct {
	target string
	dir    string
	tools  *integration.Tools
	faults *Faults
	seeds  []string
	log    *slog.Logger
}

func duration(t *testing.T) time.Duration {
	d := 60 * time.Second
	if s := os.Getenv("FAULTS_DURATION"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("FAULTS_DURATION=%s: %v", s, err)
		}
	}
	return d
}

// schedule is every nemesis's rhythm: a fault lasts long enough for the
// cluster to notice it (broker.session.timeout.ms is 4 s, see
// clusterProperties), and the cluster gets time to heal in between.
var schedule = Schedule{Hold: 8 * time.Second, Settle: 40 * time.Second, Between: 3 * time.Second}

// faultTarget is FAULTS_TARGET, gregor-cluster when unset.
func faultTarget() string {
	if t := os.Getenv("FAULTS_TARGET"); t != "" {
		return t
	}
	return "gregor-cluster"
}

// start brings up the target's three combined nodes (in network
// namespaces when network is set) and the suite's topic, or skips the
// test when the suite is not asked for.
func start(t *testing.T, ctx context.Context, network bool) *env {
	t.Helper()
	return startLayout(t, ctx, integration.Combined3, network)
}

// startLayout is start with the cluster laid out as layout (one of
// Layouts).
func startLayout(t *testing.T, ctx context.Context, layout integration.ClusterLayout, network bool) *env {
	t.Helper()
	if os.Getenv("FAULTS") != "1" {
		t.Skip("the fault suite runs with FAULTS=1 (make faults TARGET=gregor-cluster|kafka-cluster)")
	}
	target := faultTarget()
	if !slices.Contains(Targets, target) {
		t.Fatalf("FAULTS_TARGET=%s: want one of %s", target, strings.Join(Targets, ", "))
	}
	if _, err := exec.LookPath("java"); err != nil && target == "kafka-cluster" {
		t.Fatal("java not found: the Apache Kafka cluster needs a JDK")
	}
	root, err := integration.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{target: target, tools: integration.NewTools(root), log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	e.dir = filepath.Join(root, "integration", ".work", "faults", fmt.Sprintf("%s-%s-%s", strings.ReplaceAll(t.Name(), "/", "-"), target, time.Now().Format("150405")))
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("history and cluster logs kept in %s", e.dir)
		} else {
			_ = os.RemoveAll(e.dir)
		}
	})
	var net *Network
	if network {
		ids, ok := Layouts[layout]
		if !ok {
			t.Fatalf("no node ids known for layout %s", layout)
		}
		if net, err = NewNetwork(ctx, e.tools, ids); err != nil {
			t.Fatalf("network namespaces for the partition nemesis: %v", err)
		}
		// Registered before the cluster's cleanup, so it runs after it:
		// the nodes leave their namespaces first.
		t.Cleanup(func() {
			if err := net.Close(); err != nil {
				t.Errorf("removing the fault network: %v", err)
			}
		})
	}
	cl, err := StartCluster(ctx, e.tools, target, layout, filepath.Join(e.dir, "cluster"), net)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	t.Logf("started %s; bootstrap %s", cl.Describe, cl.Bootstrap())
	e.seeds = strings.Split(cl.Bootstrap(), ",")
	adminClient, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adminClient.Close)
	e.faults = &Faults{Cluster: cl, Net: net, Admin: kadm.NewClient(adminClient), Client: adminClient, Topic: "faults"}
	if err := CreateTopic(ctx, target, e.faults.Admin, e.faults.Topic); err != nil {
		t.Fatal(err)
	}
	return e
}

// testWriter sends the suite's slog lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// check runs the checker on h, prints the summary, keeps the history,
// and fails the test on any violation or on a run that proved nothing.
func (e *env) check(t *testing.T, h *History) Summary {
	t.Helper()
	path := filepath.Join(e.dir, "history.jsonl")
	if err := h.WriteFile(path); err != nil {
		t.Error(err)
	}
	s := Check(h.Ops())
	t.Logf("history summary, %s against %s:\n%s", t.Name(), e.target, s)
	if len(s.Violations) > 0 {
		t.Errorf("%d violations (history: %s)", len(s.Violations), path)
	}
	if s.Acked == 0 || s.Faults == 0 {
		t.Errorf("the run proves nothing: %d acknowledged writes, %d faults", s.Acked, s.Faults)
	}
	return s
}

// queueWorkload is the suite's queue workload on e's topic.
func (e *env) queueWorkload(h *History) *Workload {
	return &Workload{Seeds: e.seeds, Topic: e.faults.Topic, Group: "faults-group", Producers: 2, Consumers: 2,
		Rate: 100, Keys: 60, DeliveryTimeout: 30 * time.Second, History: h, Log: e.log}
}

// healOnCleanup heals nem once more when the test ends: whatever
// happened, a stopped or cut-off node must not stay so.
func healOnCleanup(t *testing.T, nem Nemesis) {
	t.Cleanup(func() {
		if _, err := nem.Heal(context.Background()); err != nil {
			t.Errorf("healing %s: %v", nem.Name(), err)
		}
	})
}

// finalReads waits for the topic to be in sync again, then records the
// final read and the group's committed offsets.
func (e *env) finalReads(t *testing.T, ctx context.Context, h *History, group string) {
	t.Helper()
	if err := WaitInSync(ctx, e.faults.Admin, e.faults.Topic, time.Minute); err != nil {
		t.Logf("before the final read: %v", err)
	}
	if err := RecordFinalRead(ctx, h, e.log, e.seeds, e.faults.Admin, e.faults.Topic); err != nil {
		t.Errorf("final read: %v", err)
	}
	if err := FetchCommitted(ctx, h, e.faults.Admin, group, e.faults.Topic); err != nil {
		t.Errorf("committed offsets: %v", err)
	}
}

// runWorkload runs the franz-go workload and the nemesis together for the
// test's duration, heals, reads everything back and checks the history.
func runWorkload(t *testing.T, network bool, nemesis func(*Faults) Nemesis) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := start(t, ctx, network)
	h := NewHistory()
	w := e.queueWorkload(h)
	nem := nemesis(e.faults)
	healOnCleanup(t, nem)
	runCtx, stop := context.WithTimeout(ctx, duration(t))
	defer stop()
	var wg sync.WaitGroup
	var workErr, nemErr error
	wg.Add(2)
	go func() { defer wg.Done(); workErr = w.Run(runCtx) }()
	go func() { defer wg.Done(); nemErr = RunNemesis(runCtx, h, e.log, e.faults, nem, schedule) }()
	wg.Wait()
	if nemErr != nil {
		t.Errorf("nemesis %s: %v", nem.Name(), nemErr)
	}
	if workErr != nil {
		t.Errorf("workload: %v", workErr)
	}
	e.finalReads(t, ctx, h, w.Group)
	e.check(t, h)
}

func TestFaultKillLeader(t *testing.T) {
	runWorkload(t, false, func(f *Faults) Nemesis { return Kill(f, "kill-leader", LeaderOf) })
}

func TestFaultKillFollower(t *testing.T) {
	runWorkload(t, false, func(f *Faults) Nemesis { return Kill(f, "kill-follower", FollowerOf) })
}

func TestFaultKillRandomNode(t *testing.T) {
	runWorkload(t, false, func(f *Faults) Nemesis { return Kill(f, "kill-random", AnyNode) })
}

func TestFaultPauseLeader(t *testing.T) {
	runWorkload(t, false, func(f *Faults) Nemesis { return Pause(f, "pause-leader", LeaderOf) })
}

func TestFaultPartitionLeader(t *testing.T) {
	runWorkload(t, true, func(f *Faults) Nemesis { return Isolate(f, "partition-leader", LeaderOf) })
}

func TestFaultSlowLeader(t *testing.T) {
	runWorkload(t, true, func(f *Faults) Nemesis { return Slow(f, "slow-leader", LeaderOf) })
}

func TestFaultDiskFullLeader(t *testing.T) {
	runWorkload(t, false, func(f *Faults) Nemesis { return DiskFull(f, "disk-full-leader", LeaderOf) })
}

func TestFaultClockStepLeader(t *testing.T) {
	runWorkload(t, false, func(f *Faults) Nemesis { return ClockStep(f, "clock-step-leader", LeaderOf) })
}

func TestFaultDiskFailRandomNode(t *testing.T) {
	runWorkload(t, false, func(f *Faults) Nemesis { return DiskFail(f, "disk-fail-random", AnyNode) })
}

// TestFaultVerifiableKillLeader is Apache's own verifiable clients while
// partition leaders are killed with kill -9 again and again: every
// acknowledged record is consumed, none twice at two offsets (the
// producer is idempotent), each partition keeps the producer's order.
func TestFaultVerifiableKillLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := start(t, ctx, false)
	d := duration(t)
	const rate = 200
	v := &Verifiable{Tools: e.tools, Dir: e.dir, Bootstrap: strings.Join(e.seeds, ","), Topic: e.faults.Topic,
		Group: "verifiable-group", Messages: int(d.Seconds()) * rate, Rate: rate}
	consumer, err := v.StartConsumer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = consumer.Stop(10 * time.Second) })
	nem := Kill(e.faults, "kill-leader", LeaderOf)
	t.Cleanup(func() { _, _ = nem.Heal(context.Background()) })
	h := NewHistory()
	nemCtx, stopNem := context.WithCancel(ctx)
	nemDone := make(chan error, 1)
	go func() { nemDone <- RunNemesis(nemCtx, h, e.log, e.faults, nem, schedule) }()
	out, perr := v.Produce(ctx)
	stopNem()
	if err := <-nemDone; err != nil {
		t.Errorf("nemesis: %v", err)
	}
	if perr != nil {
		t.Errorf("%v", perr)
	}
	if err := ProducerHistory(h, out, v.Messages); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	for _, op := range h.Ops() {
		if op.F == Send && op.Type == OK {
			acked[op.Value] = true
		}
	}
	// The consumer has until a minute after the last heal to see them all.
	deadline := time.Now().Add(time.Minute)
	var consumed []string
	for {
		b, _ := os.ReadFile(v.ConsumerLog())
		scratch := NewHistory()
		if consumed, err = ConsumerHistory(scratch, string(b), v.Topic); err != nil {
			t.Fatal(err)
		}
		if missing(acked, consumed) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if err := consumer.Stop(10 * time.Second); err != nil {
		t.Errorf("stopping VerifiableConsumer: %v", err)
	}
	b, err := os.ReadFile(v.ConsumerLog())
	if err != nil {
		t.Fatal(err)
	}
	if consumed, err = ConsumerHistory(h, string(b), v.Topic); err != nil {
		t.Fatal(err)
	}
	if n := missing(acked, consumed); n > 0 {
		t.Errorf("VerifiableConsumer never consumed %d of %d acknowledged records", n, len(acked))
	}
	if err := RecordFinalRead(ctx, h, e.log, e.seeds, e.faults.Admin, e.faults.Topic); err != nil {
		t.Errorf("final read: %v", err)
	}
	e.check(t, h)
}

func missing(acked map[string]bool, consumed []string) int {
	seen := map[string]bool{}
	for _, v := range consumed {
		seen[v] = true
	}
	n := 0
	for v := range acked {
		if !seen[v] {
			n++
		}
	}
	return n
}
