package bench

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The soak (`make soak`, integration/faults TestSoak) writes this section
// of RESULTS.md and bench/soak.svg, the picture the section shows.
const (
	soakBegin = "<!-- soak: begin (written by make soak; the other writers keep it) -->"
	soakEnd   = "<!-- soak: end -->"
)

// SoakSection is the part `make soak` writes.
func SoakSection() Section { return Section{soakBegin, soakEnd} }

// SoakFullDuration is how long the soak runs unless told otherwise; a
// shorter run's report says it is a trial.
const SoakFullDuration = 2 * time.Hour

// SoakNode is one node's figures in one sample.
type SoakNode struct {
	ID  int
	RSS int64 // bytes, VmRSS of /proc/<pid>/status
	// Anon is RssAnon of /proc/<pid>/status: the resident pages no file
	// backs (the Go runtime's heap and stacks, cgo-free, are all of it);
	// RSS less Anon is the binary's text and the mmap'ed indexes.
	Anon int64
	// GoHeld is go_memstats_sys_bytes less go_memstats_heap_released_bytes:
	// what the Go runtime has mapped and not given back, the most of Anon
	// it can account for.
	GoHeld int64
	// Heap is go_memstats_heap_inuse_bytes of the node's /metrics: the
	// part of RSS that is the Go heap's spans in use.
	Heap       int64
	FDs        int   // entries of /proc/<pid>/fd
	Goroutines int   // go_goroutines of the node's /metrics
	LogBytes   int64 // kafka_log_log_size summed over the node's partitions
	Segments   int   // kafka_log_log_numlogsegments summed likewise
	// TopicBytes is kafka_log_log_size summed over the partitions of the
	// topics whose size retention and the cleaner bound (the others, the
	// internal topics among them, may grow).
	TopicBytes int64
	// Err says what could not be read; the figures it concerns are -1.
	Err string
}

// SoakSample is one sample of the soak: every node's figures, and the
// latency of the sends acknowledged since the sample before.
type SoakSample struct {
	At    time.Duration // since the workloads started
	Nodes []SoakNode    // in id order
	// Acked is how many sends were acknowledged in the interval; P50, P99
	// and P999 their latency from send to acknowledgement (nearest rank),
	// 0 when none was.
	Acked          int
	P50, P99, P999 time.Duration
}

// SoakRow is one workload's line of the checker's table.
type SoakRow struct {
	Workload                                     string
	Operations, Acked, Lost, Duplicated, Invalid int
	Note                                         string
}

// SoakRun is one soak: how it was run, its samples, the checkers' verdict
// and the flatness verdict.
type SoakRun struct {
	Started  time.Time
	Elapsed  time.Duration
	Duration time.Duration // the workloads' time (SOAK_DURATION)
	Interval time.Duration // between samples
	Cluster  string        // what ran
	LoadAvg  [2]string     // at the start and at the end
	// Config is the workloads' and topics' configuration, one item a
	// line; Properties node 1's server.properties.
	Config     []string
	Properties string
	Samples    []SoakSample
	Rows       []SoakRow
	// Summaries are the checkers' own summaries, one per workload.
	Summaries []string
	Flatness  Flatness
	// Failures are what failed the soak besides the flatness verdict.
	Failures []string
}

// Passed reports whether the soak passed: no failure, no violation, and
// flat.
func (r *SoakRun) Passed() bool {
	for _, row := range r.Rows {
		if row.Invalid > 0 {
			return false
		}
	}
	return len(r.Failures) == 0 && r.Flatness.OK()
}

// The flatness bound: the median of the last window of samples may
// exceed the median of the first (after the warm-up) by FlatGrowth of
// it plus a slack of the metric's own (a few descriptors and goroutines
// come and go with the clients' connections). Latency p99 gets a looser
// bound: it moves with whatever else the machine runs.
const (
	FlatGrowth        = 0.25
	FlatRSSSlackMiB   = 32
	FlatFDSlack       = 32
	FlatGoSlack       = 32
	FlatTopicSlackMiB = 8
	FlatLatencyGrowth = 1.0
	FlatLatencySlack  = 50 * time.Millisecond
)

// FlatnessRow is one metric of one node (Node 0: the cluster's latency)
// judged.
type FlatnessRow struct {
	Metric      string
	Node        int
	First, Last float64 // the windows' medians
	Limit       float64 // what Last may reach
	Note        string  // why it could not be judged
	OK          bool
}

// Flatness is the verdict on the samples: every row OK.
type Flatness struct {
	Warmup time.Duration
	// Window is how many samples each window has; First and Last are
	// their spans.
	Window             int
	FirstFrom, FirstTo time.Duration
	LastFrom, LastTo   time.Duration
	Rows               []FlatnessRow
	Note               string // set when there was nothing to judge
}

// OK reports whether every row is within its bound (false when nothing
// could be judged).
func (f Flatness) OK() bool {
	if f.Note != "" || len(f.Rows) == 0 {
		return false
	}
	for _, r := range f.Rows {
		if !r.OK {
			return false
		}
	}
	return true
}

// SoakWarmup is the warm-up before the first window: 5 minutes, or a
// quarter of a run shorter than 20 minutes.
func SoakWarmup(d time.Duration) time.Duration { return min(5*time.Minute, d/4) }

// SoakWindow is how many samples a window has at most: 10 (ten minutes
// at the default interval).
const SoakWindow = 10

// JudgeFlatness compares, per node, the median RSS, descriptors and
// goroutines of the first window samples after warmup with those of the
// last window samples (and the cluster's p99 latency likewise). Fewer
// than 2*window samples after the warm-up make the windows half of them
// each; fewer than 2 leave nothing to judge, which fails.
func JudgeFlatness(samples []SoakSample, warmup time.Duration, window int) Flatness {
	f := Flatness{Warmup: warmup}
	var after []SoakSample
	for _, s := range samples {
		if s.At > warmup {
			after = append(after, s)
		}
	}
	f.Window = min(window, len(after)/2)
	if f.Window < 1 {
		f.Note = fmt.Sprintf("%d samples after the %s warm-up: too few to compare a first and a last window", len(after), warmup)
		return f
	}
	first, last := after[:f.Window], after[len(after)-f.Window:]
	f.FirstFrom, f.FirstTo = first[0].At, first[len(first)-1].At
	f.LastFrom, f.LastTo = last[0].At, last[len(last)-1].At
	var ids []int
	for _, s := range samples {
		for _, n := range s.Nodes {
			if !slices.Contains(ids, n.ID) {
				ids = append(ids, n.ID)
			}
		}
	}
	slices.Sort(ids)
	type metric struct {
		name         string
		ratio, slack float64
		value        func(SoakNode) float64 // NaN: not read
	}
	metrics := []metric{
		{"RSS (MiB)", FlatGrowth, FlatRSSSlackMiB, func(n SoakNode) float64 { return nonNegative(float64(n.RSS) / (1 << 20)) }},
		{"open descriptors", FlatGrowth, FlatFDSlack, func(n SoakNode) float64 { return nonNegative(float64(n.FDs)) }},
		{"goroutines", FlatGrowth, FlatGoSlack, func(n SoakNode) float64 { return nonNegative(float64(n.Goroutines)) }},
		{"bounded topics (MiB)", FlatGrowth, FlatTopicSlackMiB, func(n SoakNode) float64 { return nonNegative(float64(n.TopicBytes) / (1 << 20)) }},
	}
	for _, m := range metrics {
		for _, id := range ids {
			pick := func(ss []SoakSample) []float64 {
				var vs []float64
				for _, s := range ss {
					for _, n := range s.Nodes {
						if v := m.value(n); n.ID == id && !math.IsNaN(v) {
							vs = append(vs, v)
						}
					}
				}
				return vs
			}
			f.Rows = append(f.Rows, judge(m.name, id, pick(first), pick(last), m.ratio, m.slack))
		}
	}
	p99 := func(ss []SoakSample) []float64 {
		var vs []float64
		for _, s := range ss {
			if s.Acked > 0 {
				vs = append(vs, float64(s.P99)/float64(time.Millisecond))
			}
		}
		return vs
	}
	f.Rows = append(f.Rows, judge("produce p99 (ms)", 0, p99(first), p99(last), FlatLatencyGrowth, float64(FlatLatencySlack)/float64(time.Millisecond)))
	return f
}

func nonNegative(v float64) float64 {
	if v < 0 {
		return math.NaN()
	}
	return v
}

func judge(name string, node int, first, last []float64, ratio, slack float64) FlatnessRow {
	r := FlatnessRow{Metric: name, Node: node}
	if len(first) == 0 || len(last) == 0 {
		r.Note = "no samples in a window"
		return r
	}
	r.First, r.Last = median(first), median(last)
	r.Limit = r.First*(1+ratio) + slack
	r.OK = r.Last <= r.Limit
	return r
}

// BoundText says the flatness bound in words.
func BoundText() string {
	return fmt.Sprintf("the median of the last window may exceed the median of the first by at most %.0f%% plus %d MiB of RSS, %d descriptors, %d goroutines or %d MiB of the bounded topics' logs (per node), and produce p99 by at most %.0f%% plus %s",
		FlatGrowth*100, FlatRSSSlackMiB, FlatFDSlack, FlatGoSlack, FlatTopicSlackMiB, FlatLatencyGrowth*100, FlatLatencySlack)
}

// String is the verdict for a test log: the windows, the bound, then one
// line per row.
func (f Flatness) String() string {
	var b strings.Builder
	if f.Note != "" {
		fmt.Fprintf(&b, "flatness: NOT JUDGED: %s\n", f.Note)
		return b.String()
	}
	verdict := "FLAT"
	if !f.OK() {
		verdict = "NOT FLAT"
	}
	fmt.Fprintf(&b, "flatness: %s; warm-up %s; first window %d samples (%s-%s), last window %d samples (%s-%s); bound: %s\n",
		verdict, f.Warmup, f.Window, minutes(f.FirstFrom), minutes(f.FirstTo), f.Window, minutes(f.LastFrom), minutes(f.LastTo), BoundText())
	for _, r := range f.Rows {
		fmt.Fprintf(&b, "  %-18s %-8s first %10.1f  last %10.1f  limit %10.1f  %s\n", r.Metric, nodeName(r.Node), r.First, r.Last, r.Limit, rowVerdict(r))
	}
	return b.String()
}

func nodeName(id int) string {
	if id == 0 {
		return "cluster"
	}
	return fmt.Sprintf("node %d", id)
}

func rowVerdict(r FlatnessRow) string {
	switch {
	case r.Note != "":
		return "not judged: " + r.Note
	case r.OK:
		return "ok"
	}
	return "GREW"
}

// minutes writes d as minutes, "12m" or "7.5m".
func minutes(d time.Duration) string {
	m := d.Minutes()
	if m == math.Trunc(m) {
		return fmt.Sprintf("%.0fm", m)
	}
	return fmt.Sprintf("%.1fm", m)
}

// RenderSoak writes the soak's section of RESULTS.md, between its
// markers. command is the command line that produced it, image the SVG's
// path relative to RESULTS.md.
func RenderSoak(run *SoakRun, m Machine, commit, command, image string) []byte {
	var b bytes.Buffer
	b.WriteString(soakBegin + "\n\n")
	fmt.Fprintf(&b, "## Soak: a three-node Gregor cluster for %s\n\n", run.Duration)
	fmt.Fprintf(&b, "Written by `make soak` (`%s`). Do not edit by hand.\n\n", command)
	if run.Duration < SoakFullDuration {
		fmt.Fprintf(&b, "**A trial, not the soak:** the workloads ran %s (the soak is %s: `make soak`).\n\n", run.Duration, SoakFullDuration)
	}
	verdict := "**passed**"
	if !run.Passed() {
		verdict = "**FAILED**"
	}
	fmt.Fprintf(&b, "- verdict: %s (checkers: %s; flatness: %s)\n", verdict, checkersVerdict(run), flatVerdict(run.Flatness))
	fmt.Fprintf(&b, "- date: %s, took %s\n", run.Started.UTC().Format("2006-01-02 15:04 UTC"), run.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "- commit: %s\n", commit)
	fmt.Fprintf(&b, "- machine: %d cores (%s), %.1f GiB memory, Linux %s; load average %s at the start, %s at the end. The three nodes, the clients (in the test process) and whatever else runs on the machine share these cores\n",
		m.Cores, m.CPUModel, m.MemGiB, m.Kernel, run.LoadAvg[0], run.LoadAvg[1])
	fmt.Fprintf(&b, "- cluster: %s\n", run.Cluster)
	for _, c := range run.Config {
		fmt.Fprintf(&b, "- %s\n", c)
	}
	fmt.Fprintf(&b, "- samples every %s: RSS is VmRSS of /proc/<pid>/status and anonymous RSS its RssAnon (RSS less it is the binary's text and the mmap'ed index pages), the Go runtime's memory not returned `go_memstats_sys_bytes` less `go_memstats_heap_released_bytes` (the most of the anonymous RSS the runtime accounts for; it counts gregor's 16 MiB garbage-collection ballast, which is never written and so never resident), Go heap `go_memstats_heap_inuse_bytes`, descriptors the entries of /proc/<pid>/fd, goroutines `go_goroutines` and log bytes `kafka_log_log_size` (summed over the node's partitions: those of the bounded topics, whose size retention or the cleaner keep down, and those of all; the internal topics' active segments grow to 100 MiB before the cleaner may touch them, and the transactions' topic keeps everything) of the node's /metrics; produce latency is from each send's call to its acknowledgement (queue and compacted topics' sends acknowledged in the interval, nearest rank)\n", run.Interval)
	fmt.Fprintf(&b, "\n![soak](%s)\n", image)
	writeSoakSamples(&b, run)
	b.WriteString("\n### Checkers (the fault campaign's, at the end)\n\n")
	b.WriteString("| workload | operations | acknowledged | lost | duplicated | violations | |\n|---|---:|---:|---:|---:|---:|---|\n")
	for _, r := range run.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %s |\n", r.Workload, thousands(r.Operations), thousands(r.Acked), r.Lost, r.Duplicated, r.Invalid, r.Note)
	}
	if len(run.Summaries) > 0 {
		b.WriteString("\n```\n")
		for _, s := range run.Summaries {
			b.WriteString(strings.TrimRight(s, "\n") + "\n")
		}
		b.WriteString("```\n")
	}
	b.WriteString("\n### Flatness\n\n")
	f := run.Flatness
	if f.Note != "" {
		fmt.Fprintf(&b, "Not judged: %s. That fails the soak.\n", f.Note)
	} else {
		fmt.Fprintf(&b, "Medians of the first %d samples after a %s warm-up (%s to %s) against the last %d (%s to %s); bound: %s.\n\n",
			f.Window, f.Warmup, minutes(f.FirstFrom), minutes(f.FirstTo), f.Window, minutes(f.LastFrom), minutes(f.LastTo), BoundText())
		b.WriteString("| metric | node | first | last | limit | |\n|---|---|---:|---:|---:|---|\n")
		for _, r := range f.Rows {
			fmt.Fprintf(&b, "| %s | %s | %.1f | %.1f | %.1f | %s |\n", r.Metric, nodeName(r.Node), r.First, r.Last, r.Limit, rowVerdict(r))
		}
	}
	if len(run.Failures) > 0 {
		b.WriteString("\n### Failures\n\n")
		for _, fl := range run.Failures {
			fmt.Fprintf(&b, "- %s\n", fl)
		}
	}
	if run.Properties != "" {
		b.WriteString("\n### Node 1's server.properties\n\n```\n" + strings.TrimRight(run.Properties, "\n") + "\n```\n")
	}
	b.WriteString("\n" + soakEnd + "\n")
	return b.Bytes()
}

func checkersVerdict(run *SoakRun) string {
	n := 0
	for _, r := range run.Rows {
		n += r.Invalid
	}
	if n == 0 {
		return "no violations"
	}
	return fmt.Sprintf("%d violations", n)
}

func flatVerdict(f Flatness) string {
	switch {
	case f.Note != "":
		return "not judged"
	case f.OK():
		return "flat"
	}
	return "grew"
}

// writeSoakSamples writes the samples' table: every sample of a run of
// up to 30, else every fifth and the last.
func writeSoakSamples(b *bytes.Buffer, run *SoakRun) {
	if len(run.Samples) == 0 {
		return
	}
	every := 1
	if len(run.Samples) > 30 {
		every = 5
	}
	ids := soakNodeIDs(run.Samples)
	fmt.Fprintf(b, "\n### Samples")
	if every > 1 {
		fmt.Fprintf(b, " (every %dth, and the last)", every)
	}
	b.WriteString("\n\nPer node: RSS MiB / anonymous RSS MiB / Go runtime's memory not returned MiB / Go heap in use MiB / descriptors / goroutines / log MiB of the bounded topics / log MiB of all topics.\n\n| time |")
	for _, id := range ids {
		fmt.Fprintf(b, " node %d |", id)
	}
	b.WriteString(" acks | p50 ms | p99 ms | p99.9 ms |\n|---|")
	for range ids {
		b.WriteString("---|")
	}
	b.WriteString("---:|---:|---:|---:|\n")
	for i, s := range run.Samples {
		if (i+1)%every != 0 && i != len(run.Samples)-1 {
			continue
		}
		fmt.Fprintf(b, "| %s |", minutes(s.At))
		for _, id := range ids {
			n, ok := nodeIn(s, id)
			if !ok {
				b.WriteString(" - |")
				continue
			}
			fmt.Fprintf(b, " %s / %s / %s / %s / %s / %s / %s / %s |", figure(float64(n.RSS)/(1<<20), n.RSS), figure(float64(n.Anon)/(1<<20), n.Anon),
				figure(float64(n.GoHeld)/(1<<20), n.GoHeld), figure(float64(n.Heap)/(1<<20), n.Heap), figure(float64(n.FDs), int64(n.FDs)),
				figure(float64(n.Goroutines), int64(n.Goroutines)), figure(float64(n.TopicBytes)/(1<<20), n.TopicBytes), figure(float64(n.LogBytes)/(1<<20), n.LogBytes))
		}
		fmt.Fprintf(b, " %s | %s | %s | %s |\n", thousands(s.Acked), millis(s.P50), millis(s.P99), millis(s.P999))
	}
}

func figure(v float64, raw int64) string {
	if raw < 0 {
		return "?"
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func millis(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

func nodeIn(s SoakSample, id int) (SoakNode, bool) {
	for _, n := range s.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return SoakNode{}, false
}

func soakNodeIDs(samples []SoakSample) []int {
	var ids []int
	for _, s := range samples {
		for _, n := range s.Nodes {
			if !slices.Contains(ids, n.ID) {
				ids = append(ids, n.ID)
			}
		}
	}
	slices.Sort(ids)
	return ids
}
