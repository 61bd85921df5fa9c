package bench

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

const (
	metricsCostBegin = "<!-- metrics cost bench: begin (written by make bench-metrics; the other writers keep it) -->"
	metricsCostEnd   = "<!-- metrics cost bench: end -->"
)

// MetricsCostSection is the part `make bench-metrics` writes.
func MetricsCostSection() Section { return Section{metricsCostBegin, metricsCostEnd} }

// MetricsCostRun is one run of `make bench-metrics`: Gregor's CPU seconds
// per GB produced in each mode (ModeOff first), every round's value in
// round order.
type MetricsCostRun struct {
	Started     time.Time
	Elapsed     time.Duration
	Rounds      int
	Records     int
	ScrapeEvery time.Duration
	ModeOff     string
	ModeOn      string
	Runs        map[string][]float64
	LoadAvg     [2]string // at the start and at the end
	LoadLine    string    // the load generator's command line
}

// Median is the median CPU per GB of mode over the rounds.
func (r *MetricsCostRun) Median(mode string) float64 { return median(r.Runs[mode]) }

// Ratio is the median CPU per GB with the scraper over the median without.
func (r *MetricsCostRun) Ratio() float64 {
	off := median(r.Runs[r.ModeOff])
	if off == 0 {
		return 0
	}
	return median(r.Runs[r.ModeOn]) / off
}

// RenderMetricsCost writes the metrics-cost section of RESULTS.md for
// run, between its markers. command is the command line that produced it.
func RenderMetricsCost(run *MetricsCostRun, m Machine, commit, command string) []byte {
	var b bytes.Buffer
	b.WriteString(metricsCostBegin + "\n\n")
	b.WriteString("## What the metrics cost on the produce path\n\n")
	fmt.Fprintf(&b, "Written by `make bench-metrics` (`%s`). Do not edit by hand.\n\n", command)
	if run.Rounds < 3 {
		fmt.Fprintf(&b, "**A trial, not the full benchmark:** %d round(s).\n\n", run.Rounds)
	}
	fmt.Fprintf(&b, "- date: %s, took %s\n", run.Started.UTC().Format("2006-01-02 15:04 UTC"), run.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "- commit: %s\n", commit)
	fmt.Fprintf(&b, "- machine: %d cores (%s), %.1f GiB memory, Linux %s; load average %s at the start, %s at the end\n",
		m.Cores, m.CPUModel, m.MemGiB, m.Kernel, run.LoadAvg[0], run.LoadAvg[1])
	fmt.Fprintf(&b, "- workload: %s records of 1 KiB (lz4, 16 partitions, acks=1) from one load generator to one fresh Gregor node per run; the figure is the node's CPU time (user and system, from /proc) over the produce, per GB of payload\n", thousands(run.Records))
	fmt.Fprintf(&b, "- modes: %q (no `gregor.http.listener`) and %q (`gregor.http.listener` set and `/metrics` read every %s by this process for the whole produce); each round runs both, in alternating order, each on a fresh node\n",
		run.ModeOff, run.ModeOn, run.ScrapeEvery)
	b.WriteString("- between runs the finished run's data directory is deleted and `sync` waits for the page cache to be clean, so that every run starts in the same state: without it, the runs after the first five or so wrote into a cache full of their predecessors' dirty pages, where writeback throttling and reclaim (charged to the broker as system time) made CPU per GB five times higher in both modes\n")
	fmt.Fprintf(&b, "- load generator: `%s`\n\n", run.LoadLine)
	b.WriteString("| mode | CPU s/GB (median) | every round |\n|---|---|---|\n")
	for _, mode := range []string{run.ModeOff, run.ModeOn} {
		fmt.Fprintf(&b, "| %s | %.2f | %s |\n", mode, median(run.Runs[mode]), floatList(run.Runs[mode]))
	}
	ratio := run.Ratio()
	fmt.Fprintf(&b, "| scraped / none | %.3f (%+.1f %%) | |\n\n", ratio, (ratio-1)*100)
	verdict := "within"
	if ratio > 1.03 {
		verdict = "**over**"
	}
	fmt.Fprintf(&b, "The goal is a cost within 3 %%: this run is %s it.\n\n", verdict)
	b.WriteString(metricsCostEnd + "\n")
	return b.Bytes()
}

func floatList(vs []float64) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprintf("%.2f", v)
	}
	return strings.Join(s, ", ")
}
