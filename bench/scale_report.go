package bench

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

const (
	scaleBegin = "<!-- scale bench: begin (written by make bench-scale; the other writers keep it) -->"
	scaleEnd   = "<!-- scale bench: end -->"
)

// ScaleSection is the part `make bench-scale` writes.
func ScaleSection() Section { return Section{scaleBegin, scaleEnd} }

// RenderScale writes the partition-scale section of RESULTS.md for run,
// between its markers. command is the command line that produced it.
func RenderScale(run *ScaleRun, m Machine, commit, command string) []byte {
	var b bytes.Buffer
	cfg := run.Config
	b.WriteString(scaleBegin + "\n\n")
	fmt.Fprintf(&b, "## Partitions at scale: %s partitions on one node\n\n", thousands(cfg.Partitions()))
	fmt.Fprintf(&b, "Written by `make bench-scale` (`%s`). Do not edit by hand.\n\n", command)
	if cfg.Rounds < 3 {
		fmt.Fprintf(&b, "**A trial, not the full benchmark:** %d round(s).\n\n", cfg.Rounds)
	}
	fmt.Fprintf(&b, "- date: %s, took %s\n", run.Started.UTC().Format("2006-01-02 15:04 UTC"), run.Elapsed.Round(1e9))
	fmt.Fprintf(&b, "- commit: %s\n", commit)
	fmt.Fprintf(&b, "- machine: %d cores (%s), %.1f GiB memory, Linux %s; load average %s at the start, %s at the end (the machine is shared with other work); data on ext4 (`discard`)\n",
		m.Cores, m.CPUModel, m.MemGiB, m.Kernel, run.LoadAvg[0], run.LoadAvg[1])
	if len(run.RoundLoads) > 0 {
		fmt.Fprintf(&b, "- load average as each target's round started: %s\n", strings.Join(run.RoundLoads, "; "))
	}
	fmt.Fprintf(&b, "- targets, alternated in this order every round: %s; %d round(s), each on one fresh combined node (new directory, new ports), not pinned\n", strings.Join(cfg.Targets, ", "), cfg.Rounds)
	for _, t := range cfg.Targets {
		if d := run.Describe[t]; d != "" {
			fmt.Fprintf(&b, "- %s: %s\n", t, d)
		}
	}
	fmt.Fprintf(&b, "- create: %s concurrent CreateTopics (one topic each, %s partitions, replication factor 1) on one franz-go client, timed until the last is answered, then one record to every partition (franz-go, acks=all, linger 5 ms, manual partitioner) timed until the last acknowledgement. The two answer different events: Gregor answers CreateTopics once its own replicas of the new partitions are open (so that a produce right after finds them), Kafka once its controller has committed the topic, before the partitions exist; the time until every partition acknowledged a record is the same event on both\n",
		thousands(cfg.Topics), thousands(cfg.PerTopic))
	b.WriteString("- Metadata: v12 for all topics, the median of 5 after one untimed; its size is the answer encoded again by franz-go's kmsg (the bytes on the wire less the 4-byte length). DescribeTopicPartitions: v0 naming every topic, 2,000 partitions a page (the tools' default), every page until no cursor\n")
	fmt.Fprintf(&b, "- idle: %s without traffic after the above, then RSS (VmRSS) and the count of /proc/<pid>/fd, less the fresh node's before the burst, over the partition count; for gregor also go_memstats_heap_inuse_bytes from /metrics right after a collection (a heap profile with gc=1), as the difference. Kafka's RSS counts its objects only where they land on heap pages not touched before (-Xms1G is reserved at start): a lower bound of what a partition costs it\n", cfg.Idle)
	b.WriteString("- restarts: SIGTERM timed to exit; then the same command on the same data, timed from launch until Metadata for the topics names a live leader for every partition (polled every 20 ms on a new connection) and until every partition has acknowledged one more record (acks=all; the client retries every 20 ms and refreshes metadata at most every 20 ms, so its backoffs do not count); then SIGKILL with that record unflushed and the same again: a start that recovers every partition's active segment\n\n")
	vals, errs := gather(run.Rounds)
	writeMedians(&b, "Partition-scale medians", ScaleFigures(), cfg.Targets, vals, goHeapOnly(figScaleHeap))
	b.WriteString("\nLower is better for every figure. Ratios are per round, then the median.\n")
	writePerTarget(&b, "What the figures came from", cfg.Targets, run.Notes)
	writePerTarget(&b, "Scale bench failures", cfg.Targets, errs)
	b.WriteString("\n" + scaleEnd + "\n")
	return b.Bytes()
}

// goHeapOnly notes that figures (a Go heap) are not measured on kafka.
func goHeapOnly(figures ...string) func(target, figure string) string {
	return func(target, figure string) string {
		if target == "kafka" && slices.Contains(figures, figure) {
			return "not measured (a JVM heap is not a Go heap)"
		}
		return ""
	}
}
