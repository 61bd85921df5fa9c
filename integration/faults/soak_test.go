package faults

// The soak (make soak, issue 27): a fresh three-node Gregor cluster under
// the suite's workloads for SOAK_DURATION (2 h), no nemesis: the queue
// workload (many keyed producers, a consumer group whose members leave
// and join all along) on a topic whose retention deletes segments every
// few seconds, CompactWorkload's keyed load on a compacted topic the
// cleaner compacts all along, and the transactions workload (some
// aborted) with its read_committed reader. Every SOAK_INTERVAL (a
// minute) each node's RSS, descriptors, goroutines and log bytes are
// sampled, with the produce latency of the sends acknowledged since.
// At the end the fault campaign's checkers hold the history
// (CheckRetention and CheckCompacted where retention and compaction may
// remove records, CheckTxn), the samples' first and last windows are
// compared (bench.JudgeFlatness), and bench/soak.svg and the soak
// section of bench/RESULTS.md are written, pass or fail. It runs only
// with SOAK=1.

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/bench"
	"github.com/gregorbroker/gregor/integration"
)

// The soak's topics and their configs: the queue topic's segments roll
// every 30 s and are deleted two minutes later (or beyond 256 KiB a
// partition), the compacted topic's roll every 20 s and are cleaned
// once 1% of the log is dirty.
const (
	soakQueueTopic   = "soak-queue"
	soakCompactTopic = "soak-compact"
	soakTxnTopic     = "soak-txn"
	soakGroup        = "soak-group"
)

var (
	soakQueueConfigs = map[string]string{"segment.bytes": "1048576", "segment.ms": "30000",
		"retention.ms": "120000", "retention.bytes": "262144"}
	soakCompactConfigs = map[string]string{"cleanup.policy": "compact", "segment.bytes": "1048576", "segment.ms": "20000",
		"min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}
	// soakProperties are the nodes' properties beyond the suite's
	// (clusterProperties): retention checked every 5 s, the cleaner
	// back at work 5 s after it found nothing to do.
	soakProperties = []string{"log.retention.check.interval.ms=5000", "log.cleaner.backoff.ms=5000"}
)

// logStartEvery is how often the queue topic's log start offsets are
// observed for CheckRetention: the sooner after a consumer's jump, the
// tighter the check of it.
const logStartEvery = 2 * time.Second

func soakEnv(t *testing.T, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%s: want a positive duration", name, s)
	}
	return d
}

func TestSoak(t *testing.T) {
	if os.Getenv("SOAK") != "1" {
		t.Skip("the soak runs with SOAK=1 (make soak; SOAK_DURATION=2h)")
	}
	d := soakEnv(t, "SOAK_DURATION", bench.SoakFullDuration)
	interval := soakEnv(t, "SOAK_INTERVAL", time.Minute)
	command := os.Getenv("SOAK_COMMAND")
	if command == "" {
		command = fmt.Sprintf("SOAK=1 SOAK_DURATION=%s go test -count=1 -v -timeout 0 -run '^TestSoak$' ./integration/faults/", d)
	}
	// make soak runs go test without its timeout (the soak's length is a
	// variable); this one dumps every goroutine as go test would.
	watchdog := time.AfterFunc(d+45*time.Minute, func() {
		debug.SetTraceback("all")
		panic(fmt.Sprintf("soak of %s still running %s after it started", d, d+45*time.Minute))
	})
	defer watchdog.Stop()
	run := &bench.SoakRun{Started: time.Now(), Duration: d, Interval: interval}
	run.LoadAvg[0] = bench.LoadAvg()
	ctx, cancel := context.WithTimeout(context.Background(), d+40*time.Minute)
	defer cancel()

	root, err := integration.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tools := integration.NewTools(root)
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	dir := filepath.Join(root, "integration", ".work", "soak", time.Now().Format("20060102-150405"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("history and cluster logs kept in %s", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	})
	lc, err := StartLoopbackCluster(ctx, tools, "gregor-cluster", integration.Combined3, filepath.Join(dir, "cluster"), soakProperties)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lc.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	run.Cluster = lc.Describe
	// Each node's heap profile is kept (also after a pass) at the end of
	// the warm-up, every half hour and at the end, to explain what grows.
	profiles := os.Getenv("SOAK_PROFILES")
	if profiles == "" {
		profiles = filepath.Join(root, "integration", ".work", "soak-profiles", filepath.Base(dir))
	}
	if err := os.MkdirAll(profiles, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("heap profiles go to %s", profiles)
	if b, err := os.ReadFile(filepath.Join(lc.Nodes[0].Dir, "server.properties")); err == nil {
		run.Properties = string(b)
	}
	t.Logf("started %s; bootstrap %s; HTTP listeners %v", lc.Describe, lc.Bootstrap(), lc.HTTP)
	seeds := strings.Split(lc.Bootstrap(), ",")
	adminClient, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adminClient.Close)
	adm := kadm.NewClient(adminClient)
	for topic, configs := range map[string]map[string]string{soakQueueTopic: soakQueueConfigs, soakCompactTopic: soakCompactConfigs, soakTxnTopic: nil} {
		if err := CreateTopicWith(ctx, "gregor-cluster", adm, topic, configs); err != nil {
			t.Fatal(err)
		}
	}

	h := NewHistory()
	queue := &Workload{Seeds: seeds, Topic: soakQueueTopic, Group: soakGroup, Producers: 8, Consumers: 3, Churn: 20 * time.Second,
		Rate: 25, Keys: 200, DeliveryTimeout: 30 * time.Second, History: h, Log: log}
	compact := &CompactWorkload{Seeds: seeds, Topic: soakCompactTopic, Producers: 4, Rate: 25, Keys: 100,
		DeliveryTimeout: 30 * time.Second, History: h, Log: log}
	txns := &TxnWorkload{Seeds: seeds, Topic: soakTxnTopic, TxnPrefix: "soak-txn", Producers: 2, Partitions: TopicPartitions,
		Rate: 5, Abort: 0.2, History: h, Log: log}
	run.Config = soakConfig(queue, compact, txns)

	// The workloads run until the last sample is taken (at d): a sample
	// at their end would catch their clients closing.
	start := time.Now()
	runCtx, stop := context.WithTimeout(ctx, d+time.Minute)
	defer stop()
	var wg sync.WaitGroup
	var queueErr, compactErr, txnErr error
	var samplerFailure string
	wg.Add(5)
	go func() { defer wg.Done(); queueErr = queue.Run(runCtx) }()
	go func() { defer wg.Done(); compactErr = compact.Run(runCtx) }()
	go func() { defer wg.Done(); txnErr = txns.Run(runCtx) }()
	go func() {
		defer wg.Done()
		for seq := int64(0); ; seq++ {
			octx, ocancel := context.WithTimeout(runCtx, 5*time.Second)
			_ = ObserveLogStart(octx, h, adm, soakQueueTopic, "log-start", seq)
			ocancel()
			select {
			case <-runCtx.Done():
				return
			case <-time.After(logStartEvery):
			}
		}
	}()
	go func() {
		defer wg.Done()
		run.Samples, samplerFailure = sampleSoak(ctx, t, lc, h, start, d, interval, profiles)
		stop()
	}()
	wg.Wait()
	for what, err := range map[string]error{"queue workload": queueErr, "compacted workload": compactErr, "transactions workload": txnErr} {
		if err != nil {
			run.Failures = append(run.Failures, fmt.Sprintf("%s: %v", what, err))
		}
	}
	if samplerFailure != "" {
		run.Failures = append(run.Failures, samplerFailure)
	}

	// The final reads, with retention and the cleaner still at work.
	if err := WaitInSync(ctx, adm, soakQueueTopic, time.Minute); err != nil {
		t.Logf("before the final read: %v", err)
	}
	if err := RecordRetainedRead(ctx, h, log, seeds, adm, soakQueueTopic); err != nil {
		run.Failures = append(run.Failures, fmt.Sprintf("final read of %s: %v", soakQueueTopic, err))
	}
	if err := ObserveLogStart(ctx, h, adm, soakQueueTopic, "final", 0); err != nil {
		run.Failures = append(run.Failures, fmt.Sprintf("log start after the final read: %v", err))
	}
	if err := FetchCommitted(ctx, h, adm, soakGroup, soakQueueTopic); err != nil {
		run.Failures = append(run.Failures, fmt.Sprintf("committed offsets: %v", err))
	}
	if err := RecordCompactRead(ctx, h, log, seeds, adm, soakCompactTopic); err != nil {
		run.Failures = append(run.Failures, fmt.Sprintf("final read of %s: %v", soakCompactTopic, err))
	}
	if err := RecordTxnRead(ctx, h, log, seeds, adm, soakTxnTopic); err != nil {
		run.Failures = append(run.Failures, fmt.Sprintf("read_committed final read of %s: %v", soakTxnTopic, err))
	}
	if err := lc.Alive(); err != nil {
		run.Failures = append(run.Failures, err.Error())
	}

	ops := h.Ops()
	qs, cs, ts := CheckRetention(ops), CheckCompacted(ops), CheckTxn(ops)
	run.Summaries = []string{"queue workload (CheckRetention):\n" + qs.String(), "compacted workload (CheckCompacted):\n" + cs.String(),
		"transactions workload (CheckTxn):\n" + ts.String()}
	for _, s := range run.Summaries {
		t.Log(s)
	}
	run.Rows = []bench.SoakRow{
		{Workload: "queue+group (retention)", Operations: qs.Sends + qs.Polls + qs.CommitsOK + qs.CommitsFailed, Acked: qs.Acked,
			Lost: qs.Count(Lost), Duplicated: qs.Count(Duplicate), Invalid: len(qs.Violations),
			Note: fmt.Sprintf("%s acknowledged records deleted by retention before the final read; %d consumer jumps past deleted offsets", thousands(qs.Expired), qs.Resets)},
		{Workload: "compacted", Operations: cs.Sends, Acked: cs.Acked, Lost: cs.Count(Lost), Duplicated: cs.Count(Duplicate), Invalid: len(cs.Violations),
			Note: fmt.Sprintf("%s acknowledged records compacted away; final read %s records of %d keys", thousands(cs.Compacted), thousands(cs.FinalRead), cs.Keys)},
		{Workload: "transactions", Operations: ts.Txns + ts.Polls, Acked: ts.Committed, Lost: ts.Count(TxnLost), Duplicated: ts.Count(Duplicate), Invalid: len(ts.Violations),
			Note: fmt.Sprintf("%s committed, %s not committed, %d unknown", thousands(ts.Committed), thousands(ts.Aborted), ts.Indeterminate)},
	}
	switch {
	case qs.Acked == 0 || cs.Acked == 0 || ts.Committed == 0:
		run.Failures = append(run.Failures, fmt.Sprintf("the soak proves nothing: %d queue sends, %d compacted sends acknowledged, %d transactions committed", qs.Acked, cs.Acked, ts.Committed))
	case qs.Expired == 0:
		run.Failures = append(run.Failures, "retention deleted no acknowledged record before the final read: the soak did not exercise it")
	case cs.Compacted == 0:
		run.Failures = append(run.Failures, "the cleaner removed no acknowledged record of the compacted topic: the soak did not exercise it")
	}

	run.Flatness = bench.JudgeFlatness(run.Samples, bench.SoakWarmup(d), bench.SoakWindow)
	t.Log(run.Flatness.String())
	run.Elapsed = time.Since(run.Started)
	run.LoadAvg[1] = bench.LoadAvg()
	svgPath := filepath.Join(root, "bench", "soak.svg")
	if err := os.WriteFile(svgPath, bench.SoakSVG(run), 0o644); err != nil {
		t.Errorf("writing the picture: %v", err)
	}
	commit := integration.GitCommit(ctx, root)
	path, err := bench.UpdateResults(root, "", func(old []byte) []byte {
		return bench.SoakSection().Put(old, bench.RenderSoak(run, bench.DescribeMachine(), commit, command, "soak.svg"))
	})
	if err != nil {
		t.Error(err)
	}
	t.Logf("wrote %s and %s", svgPath, path)

	for _, f := range run.Failures {
		t.Error(f)
	}
	if n := len(qs.Violations) + len(cs.Violations) + len(ts.Violations); n > 0 {
		t.Errorf("%d violations (history: %s)", n, filepath.Join(dir, "history.jsonl"))
	}
	if !run.Flatness.OK() {
		t.Errorf("not flat:\n%s", run.Flatness)
	}
	if t.Failed() {
		if err := h.WriteFile(filepath.Join(dir, "history.jsonl")); err != nil {
			t.Error(err)
		}
	}
}

// soakConfig is the report's description of the workloads.
func soakConfig(q *Workload, c *CompactWorkload, tx *TxnWorkload) []string {
	configs := func(m map[string]string) string {
		var kv []string
		for k, v := range m {
			kv = append(kv, k+"="+v)
		}
		sort.Strings(kv)
		return strings.Join(kv, ", ")
	}
	topic := fmt.Sprintf("%d partitions, replication factor %d, min.insync.replicas=%d", TopicPartitions, ReplicationFactor, MinInsyncReplicas)
	return []string{
		fmt.Sprintf("queue workload: topic `%s` (%s, %s): %d idempotent acks=all franz-go producers, %d sends/s each, unique values under %d keys; %d consumers in group `%s` (read_uncommitted, reset to the earliest offset, a commit after every poll), each leaving and joining again as a new member every %s to %s",
			soakQueueTopic, topic, configs(soakQueueConfigs), q.Producers, q.Rate, q.Keys, q.Consumers, soakGroup, q.Churn/2, q.Churn*3/2),
		fmt.Sprintf("compacted workload: topic `%s` (%s, %s): %d idempotent acks=all producers, %d sends/s each, unique values under %d keys",
			soakCompactTopic, topic, configs(soakCompactConfigs), c.Producers, c.Rate, c.Keys),
		fmt.Sprintf("transactions workload: topic `%s` (%s, default retention): %d transactional producers, %d transactions/s each of 2-4 records to distinct partitions, %.0f%% aborted on purpose; a read_committed reader of every partition",
			soakTxnTopic, topic, tx.Producers, tx.Rate, tx.Abort*100),
		fmt.Sprintf("the bounded topics (their logs' size judged): `%s` and `%s`; the log start offsets of `%s` observed every %s (for CheckRetention); no nemesis; the nodes' properties beyond the harness's: %s",
			soakQueueTopic, soakCompactTopic, soakQueueTopic, logStartEvery, strings.Join(lastWins(append(slices.Clone(clusterProperties), soakProperties...)), ", ")),
	}
}

// lastWins is key=value lines with each key once, at its first place,
// with its last value (as a properties file reads them).
func lastWins(lines []string) []string {
	var keys []string
	values := map[string]string{}
	for _, l := range lines {
		k, _, _ := strings.Cut(l, "=")
		if _, ok := values[k]; !ok {
			keys = append(keys, k)
		}
		values[k] = l
	}
	var out []string
	for _, k := range keys {
		out = append(out, values[k])
	}
	return out
}

// sampleSoak takes a sample every interval of the run's d from start,
// the last at its end: each node's figures, and the latency of the sends
// acknowledged since the sample before. A node found dead ends the
// sampling and is the returned failure.
func sampleSoak(ctx context.Context, t *testing.T, lc *LoopbackCluster, h *History, start time.Time, d, interval time.Duration, profiles string) ([]bench.SoakSample, string) {
	var times []time.Duration
	for at := interval; at < d; at += interval {
		times = append(times, at)
	}
	times = append(times, d)
	var samples []bench.SoakSample
	lat := &latencies{pending: map[string]Duration{}}
	for _, at := range times {
		select {
		case <-ctx.Done():
			return samples, ""
		case <-time.After(time.Until(start.Add(at))):
		}
		s := bench.SoakSample{At: at}
		for _, n := range lc.Nodes {
			s.Nodes = append(s.Nodes, sampleNode(ctx, n, lc.HTTP[n.ID], soakQueueTopic, soakCompactTopic))
		}
		s.Acked, s.P50, s.P99, s.P999 = lat.take(h)
		samples = append(samples, s)
		t.Logf("sample %s: %s", minutesOf(at), describeSample(s))
		warmup := bench.SoakWarmup(d)
		if at == d || (at >= warmup && at-interval < warmup) || at%(30*time.Minute) == 0 {
			for _, n := range lc.Nodes {
				path := filepath.Join(profiles, fmt.Sprintf("node%d-%s.heap.pb.gz", n.ID, minutesOf(at)))
				if err := saveHeapProfile(ctx, lc.HTTP[n.ID], path); err != nil {
					t.Logf("heap profile of node %d at %s: %v", n.ID, minutesOf(at), err)
				}
			}
		}
		if err := lc.Alive(); err != nil {
			return samples, fmt.Sprintf("at %s: %v", minutesOf(at), err)
		}
	}
	return samples, ""
}

func minutesOf(d time.Duration) string { return strconv.FormatFloat(d.Minutes(), 'f', -1, 64) + "m" }

func describeSample(s bench.SoakSample) string {
	var parts []string
	for _, n := range s.Nodes {
		p := fmt.Sprintf("node %d: RSS %.1f MiB (anonymous %.1f, Go runtime's not returned %.1f), Go heap %.1f MiB, %d fds, %d goroutines, log %.1f MiB (%.1f MiB of the bounded topics) in %d segments",
			n.ID, float64(n.RSS)/(1<<20), float64(n.Anon)/(1<<20), float64(n.GoHeld)/(1<<20), float64(n.Heap)/(1<<20), n.FDs, n.Goroutines, float64(n.LogBytes)/(1<<20), float64(n.TopicBytes)/(1<<20), n.Segments)
		if n.Err != "" {
			p += " (" + n.Err + ")"
		}
		parts = append(parts, p)
	}
	return fmt.Sprintf("%s; %d acks, p50 %s p99 %s p99.9 %s", strings.Join(parts, "; "), s.Acked, s.P50, s.P99, s.P999)
}

// sampleNode reads node n's figures: RSS and descriptors from /proc,
// goroutines and log bytes (all, and bounded's) from its /metrics at addr.
func sampleNode(ctx context.Context, n *integration.ClusterNode, addr string, bounded ...string) bench.SoakNode {
	s := bench.SoakNode{ID: n.ID, RSS: -1, Anon: -1, GoHeld: -1, Heap: -1, FDs: -1, Goroutines: -1, LogBytes: -1, Segments: -1, TopicBytes: -1}
	var errs []string
	pid := n.Pid()
	if pid == 0 {
		s.Err = "not running"
		return s
	}
	if rss, anon, err := residentMemory(pid); err == nil {
		s.RSS, s.Anon = rss, anon
	} else {
		errs = append(errs, err.Error())
	}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		s.FDs = len(fds)
	} else {
		errs = append(errs, err.Error())
	}
	if err := scrape(ctx, addr, &s, bounded); err != nil {
		errs = append(errs, err.Error())
	}
	s.Err = strings.Join(errs, "; ")
	return s
}

// residentMemory is VmRSS and RssAnon of /proc/<pid>/status, in bytes.
func residentMemory(pid int) (rss, anon int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	fields := map[string]*int64{"VmRSS:": &rss, "RssAnon:": &anon}
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "kB" || fields[f[0]] == nil {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, line, err)
		}
		*fields[f[0]] = kb << 10
		found++
	}
	if found != len(fields) {
		return 0, 0, fmt.Errorf("no VmRSS or RssAnon in /proc/%d/status", pid)
	}
	return rss, anon, nil
}

// scrape reads go_goroutines and the sums of kafka_log_log_size (over
// all partitions and over those of the bounded topics) and
// kafka_log_log_numlogsegments from the node's /metrics at addr.
func scrape(ctx context.Context, addr string, s *bench.SoakNode, bounded []string) error {
	body, err := integration.HTTPGet(ctx, "http://"+addr+"/metrics", 10*time.Second)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	samples, err := integration.ParseExposition(string(body))
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	var size, topics, segments float64
	sys, released := -1.0, -1.0
	for _, m := range samples {
		switch m.Name {
		case "go_memstats_sys_bytes":
			sys = m.Value
		case "go_memstats_heap_released_bytes":
			released = m.Value
		case "go_goroutines":
			s.Goroutines = int(m.Value)
		case "go_memstats_heap_inuse_bytes":
			s.Heap = int64(m.Value)
		case "kafka_log_log_size":
			size += m.Value
			if slices.Contains(bounded, m.Labels["topic"]) {
				topics += m.Value
			}
		case "kafka_log_log_numlogsegments":
			segments += m.Value
		}
	}
	s.LogBytes, s.TopicBytes, s.Segments = int64(size), int64(topics), int(segments)
	if sys >= 0 && released >= 0 {
		s.GoHeld = int64(sys - released)
	}
	if s.Goroutines < 0 {
		return fmt.Errorf("metrics: no go_goroutines")
	}
	return nil
}

// saveHeapProfile writes the heap profile of the node whose HTTP listener
// is addr (after a garbage collection, so that in-use is live) to path.
func saveHeapProfile(ctx context.Context, addr, path string) error {
	body, err := integration.HTTPGet(ctx, "http://"+addr+"/debug/pprof/heap?gc=1", 30*time.Second)
	if err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

// latencies follows the history for the sends (queue and compacted)
// acknowledged since it last looked, and their latency from invocation
// to acknowledgement.
type latencies struct {
	next    int
	pending map[string]Duration // value -> invocation time
}

// take is how many sends were acknowledged since the last take, and
// their latency's p50, p99 and p99.9 (nearest rank).
func (l *latencies) take(h *History) (int, time.Duration, time.Duration, time.Duration) {
	ops := h.From(l.next)
	l.next += len(ops)
	var lat []time.Duration
	for _, op := range ops {
		if op.F != Send && op.F != CompactSend {
			continue
		}
		switch op.Type {
		case Invoke:
			l.pending[op.Value] = op.Time
		case OK:
			if t0, ok := l.pending[op.Value]; ok {
				lat = append(lat, time.Duration(op.Time-t0))
			}
			delete(l.pending, op.Value)
		default:
			delete(l.pending, op.Value)
		}
	}
	if len(lat) == 0 {
		return 0, 0, 0, 0
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	rank := func(p float64) time.Duration { return lat[max(0, int(math.Ceil(p*float64(len(lat))))-1)] }
	return len(lat), rank(0.50), rank(0.99), rank(0.999)
}

// thousands writes n with commas.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func TestSoakLatencies(t *testing.T) {
	h := NewHistory()
	l := &latencies{pending: map[string]Duration{}}
	add := func(f Func, typ Type, value string, at time.Duration) {
		h.mu.Lock()
		h.ops = append(h.ops, Op{Index: len(h.ops), F: f, Type: typ, Value: value, Time: Duration(at)})
		h.mu.Unlock()
	}
	for i := range 100 {
		v := fmt.Sprint("a", i)
		add(Send, Invoke, v, time.Duration(i)*time.Millisecond)
		add(Send, OK, v, time.Duration(2*i+1)*time.Millisecond) // latency i+1 ms
	}
	add(CompactSend, Invoke, "c0", 0)
	add(Txn, Invoke, "t0", 0)
	add(Txn, OK, "t0", time.Hour) // not a send
	n, p50, p99, p999 := l.take(h)
	if n != 100 || p50 != 50*time.Millisecond || p99 != 99*time.Millisecond || p999 != 100*time.Millisecond {
		t.Fatalf("got %d acks, p50 %s p99 %s p99.9 %s", n, p50, p99, p999)
	}
	// The next take sees only what came since: c0's ack, and a send that
	// failed.
	add(CompactSend, OK, "c0", 7*time.Second)
	add(Send, Invoke, "b0", 0)
	add(Send, Info, "b0", time.Second)
	if n, p50, _, p999 := l.take(h); n != 1 || p50 != 7*time.Second || p999 != 7*time.Second || len(l.pending) != 0 {
		t.Fatalf("second take: %d acks, p50 %s, p99.9 %s, %d pending", n, p50, p999, len(l.pending))
	}
	if n, _, _, _ := l.take(h); n != 0 {
		t.Fatalf("a take with nothing new: %d acks", n)
	}
}

func TestSoakReadsItsOwnProcess(t *testing.T) {
	rss, anon, err := residentMemory(os.Getpid())
	if err != nil || rss < 1<<20 || anon < 1<<20 || anon > rss {
		t.Fatalf("VmRSS and RssAnon of this process: %d, %d, %v", rss, anon, err)
	}
	if got := thousands(1234567); got != "1,234,567" {
		t.Errorf("thousands: %s", got)
	}
}

func TestSoakLastWins(t *testing.T) {
	got := lastWins([]string{"a=1", "b=2", "a=3", "c=4"})
	if !slices.Equal(got, []string{"a=3", "b=2", "c=4"}) {
		t.Fatalf("lastWins: %v", got)
	}
}
