package bench

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
)

// Machine describes where the numbers were taken.
type Machine struct {
	CPUModel string
	Cores    int
	MemGiB   float64
	Kernel   string
}

// DescribeMachine reads /proc for the report.
func DescribeMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), CPUModel: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				var kb float64
				fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, "MemTotal:")), "%f", &kb)
				m.MemGiB = kb / (1 << 20)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func median(vs []float64) float64 {
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// figureOrder lists figures in the order the rounds first produced them.
func figureOrder(rounds []Round) []string {
	var names []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	add(figStartup)
	for _, w := range produceWorkloads() {
		add(w.name() + " records/s")
		add(w.name() + " MB/s")
	}
	for _, tool := range consumeTools() {
		add(consumeName(tool) + " records/s")
		add(consumeName(tool) + " MB/s")
	}
	later := map[string]bool{} // listed after the rest, below
	for _, f := range append(groupFigures(), txnFigures()...) {
		later[f] = true
	}
	for _, r := range rounds {
		keys := make([]string, 0, len(r.Figures))
		for k := range r.Figures {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k != figCPU && k != figRSS && k != figIdleRSS && !later[k] {
				add(k)
			}
		}
	}
	for _, f := range groupFigures() {
		add(f)
	}
	for _, f := range txnFigures() {
		add(f)
	}
	add(figCPU)
	add(figIdleRSS)
	add(figRSS)
	return names
}

func fmtNum(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// makeTarget is the TARGET value that selects targets: the report names
// the command that reproduces it.
func makeTarget(targets []string) string {
	if slices.Equal(targets, bothTargets) {
		return "both"
	}
	return strings.Join(targets, ",")
}

func ratio(a, b float64) string {
	if a > 0 && b > 0 {
		return fmt.Sprintf("%.2f", a/b)
	}
	return "–"
}

// gather sorts the rounds' figures and errors by target: target -> figure
// -> one value per round, and target -> "round n: error" lines.
func gather(rounds []Round) (map[string]map[string][]float64, map[string][]string) {
	vals := map[string]map[string][]float64{}
	errs := map[string][]string{}
	for _, r := range rounds {
		if vals[r.Target] == nil {
			vals[r.Target] = map[string][]float64{}
		}
		for k, v := range r.Figures {
			vals[r.Target][k] = append(vals[r.Target][k], v)
		}
		for _, e := range r.Errors {
			errs[r.Target] = append(errs[r.Target], fmt.Sprintf("round %d: %s", r.Round, e))
		}
	}
	return vals, errs
}

// medianCell is a table cell for one figure's values over the rounds: the
// median formatted, the median, and every value formatted.
func medianCell(vs []float64) (string, float64, string) {
	if len(vs) == 0 {
		return "failed", 0, ""
	}
	raw := make([]string, len(vs))
	for i, v := range vs {
		raw[i] = fmtNum(v)
	}
	md := median(vs)
	return fmtNum(md), md, strings.Join(raw, ", ")
}

// FailedRounds counts the rounds with an error.
func FailedRounds(rounds []Round) int {
	n := 0
	for _, r := range rounds {
		if len(r.Errors) > 0 {
			n++
		}
	}
	return n
}

// Render writes RESULTS.md for run.
func Render(run *Run, m Machine, commit string) []byte {
	var b bytes.Buffer
	cfg := run.Config
	b.WriteString("# Benchmark results\n\n")
	fmt.Fprintf(&b, "Written by `make bench TARGET=%s` (`go run ./bench/cmd/bench`). Do not edit by hand.\n\n", makeTarget(cfg.Targets))
	if cfg.Only != "" {
		fmt.Fprintf(&b, "**A trial, not the full benchmark:** `-only %q` ran only the workloads whose name contains it.\n\n", cfg.Only)
	}
	fmt.Fprintf(&b, "- date: %s, took %s\n", run.Started.UTC().Format("2006-01-02 15:04 UTC"), run.Elapsed.Round(1e9))
	fmt.Fprintf(&b, "- commit: %s\n", commit)
	fmt.Fprintf(&b, "- machine: %d cores (%s), %.1f GiB memory, Linux %s; load average %s at the start, %s at the end (the machine is shared with other work)\n", m.Cores, m.CPUModel, m.MemGiB, m.Kernel, run.LoadAvg[0], run.LoadAvg[1])
	fmt.Fprintf(&b, "- targets, alternated in this order every round: %s; %d round(s); every round starts each broker fresh (new data dir, new ports)\n", strings.Join(cfg.Targets, ", "), cfg.Rounds)
	if cfg.BrokerCPU != "" {
		fmt.Fprintf(&b, "- pinning: the broker runs under `taskset -c %s`; every load generator (perf tools, franz-go) and topic creation under `taskset -c %s`. Broker and load share this 2-core machine, so each gets one core.\n", cfg.BrokerCPU, cfg.LoadCPU)
	} else {
		b.WriteString("- pinning: none (taskset not available)\n")
	}
	fmt.Fprintf(&b, "- Apache Kafka %s: kafka_2.13 jars from Maven Central, KRaft combined mode, `-Xms1G -Xmx1G` and kafka-server-start.sh's G1 flags, the 4.3.1 sample server.properties\n", "4.3.1")
	b.WriteString("- Gregor: `./cmd/gregor` built from this commit, started with the overrides in integration/target.go\n")
	pinning := "unpinned (taskset not available)"
	if cfg.BrokerCPU != "" {
		pinning = fmt.Sprintf("pinned like the brokers (`taskset -c %s`)", cfg.BrokerCPU)
	}
	fmt.Fprintf(&b, "- null: "+nullDescription+"\n", nullRecordsPerBatch, pinning)
	fmt.Fprintf(&b, "- payloads: %s; each throughput workload sends %d records (%d MiB of payload)\n", run.Payload, cfg.Records, cfg.Records/1024)
	b.WriteString("- consume rates from kafka-consumer-perf-test are its fetch.* columns (group join time excluded); franz-go consumes without a group\n")
	fmt.Fprintf(&b, "- group settings: %s\n", groupSettings)
	fmt.Fprintf(&b, "- group of %[1]d becomes stable: one loadgen process starts %[1]d franz-go consumers at once (separate clients with franz-go's defaults, each polling as an application does; classic members heartbeat every 3 s with a 45 s session, KIP-848 members at the interval the broker sets) on a fresh %[1]d-partition topic, after FindCoordinator for the group already answers (so creating __consumer_offsets is not timed). The clock runs from the first JoinGroup (classic) or ConsumerGroupHeartbeat (consumer protocol) any member issued to the reply of the first describe (DescribeGroups, or ConsumerGroupDescribe for KIP-848) that shows the group Stable with every member holding exactly the partitions its OnPartitionsAssigned/Revoked callbacks report and all %[1]d partitions owned exactly once; describes start when the callbacks report a complete assignment and repeat every 10 ms. Classic uses franz-go's default cooperative-sticky balancer (a member that must give up partitions revokes them first, which costs another JoinGroup/SyncGroup round); the consumer protocol uses kgo.ServerSideBalancer(), which asks for the broker's uniform assignor. The request counts are what all members sent until then\n", groupMembers)
	fmt.Fprintf(&b, "- offset commits: each committer is a franz-go client acting as a standalone consumer of one shared group (as Java's assign() plus commitSync(): generation -1, no member id) that commits offsets for its own %d partitions (topic name and id, metadata \"\") in a loop, one request in flight, for %s; only requests whose every partition came back without error count, and at the end OffsetFetch must return each partition's last acknowledged offset\n", commitPartitions, cfg.CommitTime)
	fmt.Fprintf(&b, "- transactions: %s\n", txnSettings())
	b.WriteString("- CPU seconds per GB: the broker process's utime+stime over the produce, consume and latency workloads of a round (not the group workloads, which move no payload, nor the log cleaner and transaction workloads), divided by the payload bytes produced plus consumed (1 GB = 10^9 bytes); idle RSS is VmRSS 5 s after the first acknowledged produce, before any workload; peak RSS is VmHWM at the end of the round (after the group workloads)\n\n")

	targets := []string{"gregor", "kafka", targetNull}
	vals, errs := gather(run.Rounds)
	ran := map[string]bool{}
	for _, t := range cfg.Targets {
		ran[t] = true
	}
	b.WriteString("## Medians\n\n| figure | gregor | kafka | null | gregor/kafka | gregor/null | rounds (gregor) | rounds (kafka) | rounds (null) |\n|---|---|---|---|---|---|---|---|---|\n")
	throughput := throughputFigures()
	taken := map[string]bool{}
	for _, r := range run.Rounds {
		for k := range r.Figures {
			taken[k] = true
		}
	}
	for _, f := range figureOrder(run.Rounds) {
		if cfg.Only != "" && !taken[f] && !strings.Contains(f, cfg.Only) {
			continue // not selected
		}
		cellFor := func(t string) (string, float64, string) {
			if t == targetNull && !throughput[f] {
				return "–", 0, ""
			}
			if !ran[t] {
				return "not run", 0, ""
			}
			return medianCell(vals[t][f])
		}
		g, gm, graw := cellFor("gregor")
		k, km, kraw := cellFor("kafka")
		n, nm, nraw := cellFor(targetNull)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f, g, k, n, ratio(gm, km), ratio(gm, nm), graw, kraw, nraw)
	}
	b.WriteString("\nHigher is better for records/s, MB/s and commits/s; lower is better for latency, start-up, time to a stable group, group requests, CPU and RSS.\n")
	for _, t := range targets {
		if len(errs[t]) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## Failures (%s)\n\n", t)
		for _, e := range errs[t] {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(e, "|", "\\|"))
		}
	}
	b.WriteString("\n## Exact command lines\n\n")
	b.WriteString("As run in the first round (ports and paths change every round). `loadgen` is `bench/loadgen` built into `.cache/bin/`; `payloads.txt` is written by `loadgen payloads -n 10000 -size 1024`.\n\n```\n")
	for _, c := range run.Commands {
		b.WriteString(c + "\n")
	}
	b.WriteString("```\n")
	return b.Bytes()
}
