// Package bench runs the same workloads against Gregor and Apache Kafka on
// this machine, and the throughput workloads against the null broker
// (bench/nullbroker) as the ceiling the load generators set, and writes
// bench/RESULTS.md.
//
// Each round starts every target afresh, one after the other (A B N A B
// N…), so that slow drift of the machine (page cache, thermal, neighbours)
// touches all alike. The broker runs pinned to one core and every load
// generator to the other, with taskset.
//
// Of Gregor's packages it imports only integration (to build and start the
// targets); nothing imports it but its commands.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/integration"
)

// Config is one benchmark run.
type Config struct {
	Root      string   // repository root
	Targets   []string // in alternation order, e.g. gregor, kafka
	Rounds    int
	Records   int    // records per throughput workload
	BrokerCPU string // taskset list for the broker
	LoadCPU   string // taskset list for load generators
	E2ERate   int    // records/s for the latency workload
	E2ETime   time.Duration
	// CommitTime is how long each offset-commit workload commits.
	CommitTime time.Duration
	// Only, when set, runs only the workloads whose name contains it
	// (start-up, CPU and RSS are always taken): for trying a workload
	// out, not for RESULTS.md.
	Only string
	Log  *slog.Logger
}

// Figure names, in report order. Units are part of the name.
const (
	figStartup = "start-up to first acknowledged produce (s)"
	figCPU     = "broker CPU seconds per GB moved"
	figRSS     = "broker peak RSS (MiB)"
	figIdleRSS = "broker idle RSS after start-up (MiB)"
	// idleSettle is how long a freshly started broker idles (after one
	// small produce) before its resident memory is read.
	idleSettle = 5 * time.Second
)

// Round is what one target did in one round: figure -> value.
type Round struct {
	Target  string             `json:"target"`
	Round   int                `json:"round"`
	Figures map[string]float64 `json:"figures"`
	Errors  []string           `json:"errors,omitempty"`
}

// Run executes the benchmark and returns every round's figures plus the
// exact commands it ran (with the ports of the first round).
type Run struct {
	Config   Config
	Rounds   []Round
	Commands []string
	Payload  string // description of the payload file
	Started  time.Time
	Elapsed  time.Duration
	// LoadAvg is /proc/loadavg at the start and the end: the machine is
	// shared, and other work on it skews both targets' numbers.
	LoadAvg [2]string
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// loadgen wraps the franz-go load generator binary.
type runner struct {
	cfg      Config
	tools    *integration.Tools
	loadgen  string
	nullBin  string // bench/cmd/nullbroker, built when a target is null
	payloads string
	workDir  string
	commands commandLog
}

func (r *runner) note(workload string, c integration.Cmd) { r.commands.note(workload, c) }

// commandLog keeps the first command line run for each workload, in the
// order the workloads first ran, for the report.
type commandLog struct {
	seen  map[string]bool
	lines []string // "workload\n    command line"
}

func (l *commandLog) note(workload string, c integration.Cmd) {
	if l.seen[workload] {
		return
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	l.seen[workload] = true
	l.lines = append(l.lines, workload+"\n    "+c.String())
}

// selected reports whether the workload named name runs (Config.Only).
func (r *runner) selected(name string) bool {
	return r.cfg.Only == "" || strings.Contains(name, r.cfg.Only)
}

// pinned wraps c to run under taskset on the load-generator core.
func (r *runner) pinned(c integration.Cmd) integration.Cmd { return taskset(r.cfg.LoadCPU, c) }

// taskset wraps c to run on cpus; with no cpus it runs as it is.
func taskset(cpus string, c integration.Cmd) integration.Cmd { return integration.Pinned(cpus, c) }

// buildLoadgen builds bench/loadgen into the tools cache and returns the
// binary's path.
func buildLoadgen(ctx context.Context, tools *integration.Tools) (string, error) {
	bin := filepath.Join(tools.Cache, "bin", "loadgen")
	if _, err := integration.Run(ctx, integration.Cmd{Name: "go", Args: []string{"build", "-o", bin, "."},
		Dir: filepath.Join(tools.Root, "bench", "loadgen"), Timeout: 10 * time.Minute}); err != nil {
		return "", fmt.Errorf("building the load generator: %w", err)
	}
	return bin, nil
}

// writePayloads has loadgen write the benchmark's payload file (10,000
// records of 1 KiB) at path, and describes it for the report.
func writePayloads(ctx context.Context, loadgen, path string) (string, error) {
	out, err := integration.Run(ctx, integration.Cmd{Name: loadgen, Args: []string{"payloads", "-out", path, "-n", "10000", "-size", "1024"}, Timeout: time.Minute})
	if err != nil {
		return "", fmt.Errorf("generating payloads: %w", err)
	}
	var pr struct {
		Count    int     `json:"count"`
		Size     int     `json:"size"`
		LZ4Ratio float64 `json:"lz4_ratio"`
	}
	_ = json.Unmarshal([]byte(out.Stdout), &pr)
	return fmt.Sprintf("%d distinct %d-byte JSON-like event records (seeded generator in bench/loadgen), lz4 ratio %.2f:1 over 16 KiB blocks", pr.Count, pr.Size, pr.LZ4Ratio), nil
}

// Execute runs the benchmark.
func Execute(ctx context.Context, cfg Config) (*Run, error) {
	tools := integration.NewTools(cfg.Root)
	workDir := filepath.Join(cfg.Root, "bench", ".work")
	_ = os.RemoveAll(workDir)
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, tools: tools, workDir: workDir}
	var err error
	if r.loadgen, err = buildLoadgen(ctx, tools); err != nil {
		return nil, err
	}
	if slices.Contains(cfg.Targets, targetNull) {
		r.nullBin = filepath.Join(tools.Cache, "bin", "nullbroker")
		if _, err := integration.Run(ctx, integration.Cmd{Name: "go", Args: []string{"build", "-o", r.nullBin, "./bench/cmd/nullbroker"},
			Dir: cfg.Root, Timeout: 10 * time.Minute}); err != nil {
			return nil, fmt.Errorf("building the null broker: %w", err)
		}
	}
	if _, err := tools.MavenLibs(ctx, integration.SetKafka); err != nil {
		return nil, err
	}
	r.payloads = filepath.Join(workDir, "payloads.txt")
	payload, err := writePayloads(ctx, r.loadgen, r.payloads)
	if err != nil {
		return nil, err
	}
	run := &Run{Config: cfg, Started: time.Now(), LoadAvg: [2]string{loadAvg(), ""}, Payload: payload}
	for round := 1; round <= cfg.Rounds; round++ {
		for _, t := range cfg.Targets {
			if ctx.Err() != nil {
				return run, ctx.Err()
			}
			cfg.Log.Info("bench round", "round", round, "target", t)
			rd := r.round(ctx, t, round)
			for _, e := range rd.Errors {
				cfg.Log.Warn("bench error", "round", round, "target", t, "err", e)
			}
			run.Rounds = append(run.Rounds, rd)
		}
	}
	run.Commands = r.commands.lines
	run.Elapsed = time.Since(run.Started)
	run.LoadAvg[1] = loadAvg()
	return run, nil
}

// round starts target fresh, measures start-up, runs every workload, and
// reads the broker's CPU time and peak RSS before stopping it.
func (r *runner) round(ctx context.Context, target string, round int) Round {
	rd := Round{Target: target, Round: round, Figures: map[string]float64{}}
	fail := func(format string, args ...any) { rd.Errors = append(rd.Errors, fmt.Sprintf(format, args...)) }
	if target == targetNull {
		r.nullRound(ctx, round, &rd, fail)
		return rd
	}

	var launched time.Time
	var first *integration.Proc
	firstOut := filepath.Join(r.workDir, fmt.Sprintf("first-%s-%d.json", target, round))
	opts := integration.TargetOptions{
		WorkDir: filepath.Join(r.workDir, fmt.Sprintf("%s-round%d", target, round)), CPUList: r.cfg.BrokerCPU, ReadyWait: 2 * time.Minute,
		OnLaunch: func(bootstrap string) {
			launched = time.Now()
			c := r.pinned(integration.Cmd{Name: "sh", Args: []string{"-c", `exec "$0" first-produce -bootstrap "$1" -topic bench-first -timeout 2m > "$2"`, r.loadgen, bootstrap, firstOut}})
			r.note("start-up: first acknowledged produce (retried from the moment the broker process is launched)", c)
			p, err := integration.Start(c, firstOut+".log")
			if err != nil {
				fail("starting first-produce probe: %v", err)
				return
			}
			first = p
		},
	}
	if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
		fail("%v", err)
		return rd
	}
	tgt, err := integration.NewTarget(target, r.tools, opts)
	if err != nil {
		fail("%v", err)
		return rd
	}
	defer tgt.Stop()
	startErr := tgt.Start(ctx)
	if first != nil {
		select {
		case <-first.Done():
		case <-time.After(2 * time.Minute):
		case <-ctx.Done():
		}
		_ = first.Stop(time.Second)
	}
	if startErr != nil {
		fail("target did not start: %v", oneLine(startErr.Error()))
		return rd
	}
	var fa struct {
		AckedUnixNanos int64 `json:"acked_unix_nanos"`
	}
	if b, err := os.ReadFile(firstOut); err == nil && json.Unmarshal(b, &fa) == nil && fa.AckedUnixNanos > 0 {
		rd.Figures[figStartup] = time.Unix(0, fa.AckedUnixNanos).Sub(launched).Seconds()
	} else {
		fail("first produce never acknowledged")
	}

	select {
	case <-time.After(idleSettle):
	case <-ctx.Done():
	}
	if rss, err := rssMiB(tgt.Pid()); err == nil {
		rd.Figures[figIdleRSS] = rss
	}

	bootstrap := tgt.Bootstrap()
	cpu0, _ := cpuSeconds(tgt.Pid())
	moved := r.throughput(ctx, bootstrap, round, &rd, fail)
	if r.selected(r.e2eName()) {
		if lat, err := r.e2e(ctx, bootstrap, round); err != nil {
			fail("end-to-end latency: %v", oneLine(err.Error()))
		} else {
			prefix := r.e2eName() + " (ms)"
			rd.Figures[prefix+" p50"] = lat.P50Ms
			rd.Figures[prefix+" p99"] = lat.P99Ms
			rd.Figures[prefix+" p99.9"] = lat.P999Ms
			moved += 2 * float64(lat.Records) * 1024
		}
	}
	// CPU per GB covers the produce, consume and latency workloads
	// above. The group workloads below move no payload; the cleaner and
	// transaction workloads are left out so that the figure stays the
	// one earlier reports measured.
	if cpu1, err := cpuSeconds(tgt.Pid()); err == nil && moved > 0 {
		rd.Figures[figCPU] = (cpu1 - cpu0) / (moved / 1e9)
	}
	r.groupWorkloads(ctx, bootstrap, round, &rd, fail)
	r.compactionWorkload(ctx, bootstrap, round, &rd, fail)
	r.txnWorkloads(ctx, bootstrap, round, &rd, fail)
	if rss, err := peakRSSMiB(tgt.Pid()); err == nil {
		rd.Figures[figRSS] = rss
	}
	return rd
}

// throughput runs the produce and consume workloads and returns the bytes
// of payload they moved (produced plus consumed).
func (r *runner) throughput(ctx context.Context, bootstrap string, round int, rd *Round, fail func(string, ...any)) float64 {
	var moved float64
	n := r.cfg.Records
	for _, w := range produceWorkloads() {
		// The consume workloads read what their tool's 16-partition
		// acks=all produce wrote.
		if !r.selected(w.name()) && !(w.partitions == 16 && w.acks == "all" && r.selected(consumeName(w.tool))) {
			continue
		}
		topic := fmt.Sprintf("bench-%s-p%d-acks%s-%d", w.tool, w.partitions, w.acks, round)
		var res throughputResult
		var err error
		if w.tool == "perf" {
			res, err = r.perfProduce(ctx, bootstrap, topic, w, n)
		} else {
			res, err = r.loadgenProduce(ctx, bootstrap, topic, w, n)
		}
		if err != nil {
			fail("%s: %v", w.name(), oneLine(err.Error()))
			continue
		}
		rd.Figures[w.name()+" records/s"] = res.RecordsPerSec
		rd.Figures[w.name()+" MB/s"] = res.MBPerSec
		moved += float64(n) * 1024
	}
	// Consumers read the 16-partition acks=all topics written above.
	for _, tool := range consumeTools() {
		topic := fmt.Sprintf("bench-%s-p16-acksall-%d", tool, round)
		var res throughputResult
		var err error
		name := consumeName(tool)
		if !r.selected(name) {
			continue
		}
		if tool == "perf" {
			res, err = r.perfConsume(ctx, bootstrap, topic, n, name)
		} else {
			res, err = r.loadgenConsume(ctx, bootstrap, topic, n, name)
		}
		if err != nil {
			fail("%s: %v", name, oneLine(err.Error()))
			continue
		}
		rd.Figures[name+" records/s"] = res.RecordsPerSec
		rd.Figures[name+" MB/s"] = res.MBPerSec
		moved += float64(n) * 1024
	}
	return moved
}

func consumeTools() []string { return []string{"perf", "franz-go"} }

func consumeName(tool string) string { return "consume 1 KiB lz4, 16 partitions, " + toolName(tool) }

// throughputFigures are the figures the throughput workloads produce, the
// only ones taken against the null broker.
func throughputFigures() map[string]bool {
	figs := map[string]bool{}
	add := func(name string) { figs[name+" records/s"], figs[name+" MB/s"] = true, true }
	for _, w := range produceWorkloads() {
		add(w.name())
	}
	for _, tool := range consumeTools() {
		add(consumeName(tool))
	}
	return figs
}

type produceWorkload struct {
	tool       string // perf or franz-go
	acks       string // 1 or all
	partitions int
}

func (w produceWorkload) name() string {
	return fmt.Sprintf("produce 1 KiB lz4 acks=%s, %d partition%s, %s", w.acks, w.partitions, plural(w.partitions), toolName(w.tool))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func toolName(tool string) string {
	if tool == "perf" {
		return "kafka-*-perf-test"
	}
	return "franz-go"
}

func produceWorkloads() []produceWorkload {
	var ws []produceWorkload
	for _, tool := range []string{"perf", "franz-go"} {
		for _, parts := range []int{1, 16} {
			for _, acks := range []string{"1", "all"} {
				ws = append(ws, produceWorkload{tool: tool, acks: acks, partitions: parts})
			}
		}
	}
	return ws
}

type throughputResult struct {
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	// Records and Bytes of payload in Seconds: loadgen's alone reports
	// them.
	Records int     `json:"records"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

func (r *runner) createTopic(ctx context.Context, bootstrap, topic string, partitions int) error {
	c, err := r.tools.JavaCmd(ctx, integration.SetKafka, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap,
		"--create", "--topic", topic, "--partitions", strconv.Itoa(partitions), "--replication-factor", "1")
	if err != nil {
		return err
	}
	c.Timeout = 2 * time.Minute
	_, err = integration.Run(ctx, r.pinned(c))
	return err
}

// perfCmd is a Kafka perf tool with kafka-run-class.sh's JVM flags (not
// the start-up-trimmed flags the compat scenarios use).
func (r *runner) perfCmd(ctx context.Context, main string, args ...string) (integration.Cmd, error) {
	libs, err := r.tools.MavenLibs(ctx, integration.SetKafka)
	if err != nil {
		return integration.Cmd{}, err
	}
	logCfg, err := r.tools.Log4jConfig(false)
	if err != nil {
		return integration.Cmd{}, err
	}
	jargs := []string{"-Xmx512M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + logCfg, "-cp", libs + "/*", main}
	return r.pinned(integration.Cmd{Name: "java", Args: append(jargs, args...), Timeout: 5 * time.Minute}), nil
}

func (r *runner) perfProduce(ctx context.Context, bootstrap, topic string, w produceWorkload, n int) (throughputResult, error) {
	if err := r.createTopic(ctx, bootstrap, topic, w.partitions); err != nil {
		return throughputResult{}, err
	}
	c, err := r.perfCmd(ctx, "org.apache.kafka.tools.ProducerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
		"--num-records", strconv.Itoa(n), "--payload-file", r.payloads, "--throughput", "-1",
		// One --command-property with every setting: the option takes
		// several values, and a repeated one replaces the previous.
		"--command-property", "acks="+w.acks, "compression.type=lz4", "linger.ms=5", "batch.size=131072")
	if err != nil {
		return throughputResult{}, err
	}
	r.note(w.name(), c)
	out, err := integration.Run(ctx, c)
	if err != nil {
		return throughputResult{}, err
	}
	return parseProducerPerf(out.Stdout)
}

func (r *runner) perfConsume(ctx context.Context, bootstrap, topic string, n int, name string) (throughputResult, error) {
	c, err := r.perfCmd(ctx, "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
		"--num-records", strconv.Itoa(n), "--timeout", "60000", "--command-property", "auto.offset.reset=earliest")
	if err != nil {
		return throughputResult{}, err
	}
	r.note(name, c)
	out, err := integration.Run(ctx, c)
	if err != nil {
		return throughputResult{}, err
	}
	return parseConsumerPerf(out.Stdout)
}

func (r *runner) loadgenProduce(ctx context.Context, bootstrap, topic string, w produceWorkload, n int) (throughputResult, error) {
	c := r.pinned(integration.Cmd{Name: r.loadgen, Args: []string{"produce", "-bootstrap", bootstrap, "-topic", topic,
		"-partitions", strconv.Itoa(w.partitions), "-records", strconv.Itoa(n), "-acks", w.acks, "-payloads", r.payloads}, Timeout: 5 * time.Minute})
	r.note(w.name(), c)
	return runJSON[throughputResult](ctx, c)
}

func (r *runner) loadgenConsume(ctx context.Context, bootstrap, topic string, n int, name string) (throughputResult, error) {
	c := r.pinned(integration.Cmd{Name: r.loadgen, Args: []string{"consume", "-bootstrap", bootstrap, "-topic", topic,
		"-records", strconv.Itoa(n)}, Timeout: 5 * time.Minute})
	r.note(name, c)
	return runJSON[throughputResult](ctx, c)
}

type latencyResult struct {
	Records int     `json:"records"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	P999Ms  float64 `json:"p999_ms"`
	MaxMs   float64 `json:"max_ms"`
	// SentSeconds is how long produce-latency took to send every record.
	SentSeconds float64 `json:"sent_seconds"`
}

func (r *runner) e2eName() string {
	return fmt.Sprintf("end-to-end latency at %d records/s, acks=all, franz-go", r.cfg.E2ERate)
}

func (r *runner) e2e(ctx context.Context, bootstrap string, round int) (latencyResult, error) {
	c := r.pinned(integration.Cmd{Name: r.loadgen, Args: []string{"e2e", "-bootstrap", bootstrap, "-topic", fmt.Sprintf("bench-e2e-%d", round),
		"-partitions", "4", "-rate", strconv.Itoa(r.cfg.E2ERate), "-duration", r.cfg.E2ETime.String(), "-payloads", r.payloads},
		Timeout: r.cfg.E2ETime + 2*time.Minute})
	r.note(r.e2eName(), c)
	return runJSON[latencyResult](ctx, c)
}

func runJSON[T any](ctx context.Context, c integration.Cmd) (T, error) {
	var v T
	out, err := integration.Run(ctx, c)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.Stdout)), &v); err != nil {
		return v, fmt.Errorf("decoding %q: %w", out.Stdout, err)
	}
	return v, nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
