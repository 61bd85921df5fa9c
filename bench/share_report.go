package bench

import (
	"bytes"
	"fmt"
	"strings"
)

const (
	shareBegin = "<!-- share bench: begin (written by make bench-share; the other writers keep it) -->"
	shareEnd   = "<!-- share bench: end -->"
)

// ShareSection is the part `make bench-share` writes.
func ShareSection() Section { return Section{shareBegin, shareEnd} }

// RenderShare writes the share-group section of RESULTS.md for run,
// between its markers. command is the command line that produced it.
func RenderShare(run *ShareRun, m Machine, commit, command string) []byte {
	var b bytes.Buffer
	cfg := run.Config
	b.WriteString(shareBegin + "\n\n")
	b.WriteString("## Share groups (KIP-932) on one node\n\n")
	fmt.Fprintf(&b, "Written by `make bench-share` (`%s`). Do not edit by hand.\n\n", command)
	if cfg.Rounds < 3 {
		fmt.Fprintf(&b, "**A trial, not the full benchmark:** %d round(s).\n\n", cfg.Rounds)
	}
	fmt.Fprintf(&b, "- date: %s, took %s\n", run.Started.UTC().Format("2006-01-02 15:04 UTC"), run.Elapsed.Round(1e9))
	fmt.Fprintf(&b, "- commit: %s\n", commit)
	fmt.Fprintf(&b, "- machine: %d cores (%s), %.1f GiB memory, Linux %s; load average %s at the start, %s at the end\n",
		m.Cores, m.CPUModel, m.MemGiB, m.Kernel, run.LoadAvg[0], run.LoadAvg[1])
	if len(run.RoundLoads) > 0 {
		fmt.Fprintf(&b, "- load average as each target's round started: %s\n", strings.Join(run.RoundLoads, "; "))
	}
	fmt.Fprintf(&b, "- targets, alternated in this order every round: %s; %d round(s), each on one fresh combined node (new directory, new ports, formatted with the target's own storage tool, `integration.StartNode`) with `group.share.min.record.lock.duration.ms=1000` and `group.share.record.lock.duration.ms=%d` on top of the harness's properties\n",
		strings.Join(cfg.Targets, ", "), cfg.Rounds, cfg.Lock.Milliseconds())
	for _, t := range cfg.Targets {
		if d := run.Describe[t]; d != "" {
			fmt.Fprintf(&b, "- %s: %s\n", t, d)
		}
	}
	if cfg.BrokerCPU != "" {
		fmt.Fprintf(&b, "- pinning: the node runs under `taskset -c %s`, the perf test and every load generator under `taskset -c %s`\n", cfg.BrokerCPU, cfg.LoadCPU)
	} else {
		b.WriteString("- pinning: none (taskset not available)\n")
	}
	fmt.Fprintf(&b, "- payload: %s\n", run.Payload)
	fmt.Fprintf(&b, "- data: `loadgen produce` (acks=1, lz4) writes %s records to a 1-partition and to a 16-partition topic before the consumers start\n", thousands(cfg.Records))
	fmt.Fprintf(&b, "- share consume: Kafka %s's `kafka-share-consumer-perf-test` (`org.apache.kafka.tools.ShareConsumerPerformance`, the same jar against both targets) with `--threads` 1 and 4 (share consumers in one new group, `share.auto.offset.reset=earliest` set through IncrementalAlterConfigs beforehand, implicit acknowledgement, the client's defaults) reads all %s records of each topic; records/s and MB/s are the tool's `nMsg.sec` and `MB.sec` (its clock starts before the consumers join)\n",
		"4.3.1", thousands(cfg.Records))
	fmt.Fprintf(&b, "- acknowledgement flush: `loadgen share-ack`, one franz-go share consumer of a new group on the 16-partition topic, polls up to %d records, accepts them and calls FlushAcks, which returns once the broker answered the acknowledgement (the share state persisted); the latency is that call, one sample per poll, %s records in all; records/s is over the whole read, flushes included\n",
		cfg.MaxPoll, thousands(cfg.AckRecords))
	fmt.Fprintf(&b, "- expired lock to another member: `loadgen share-lock-expiry`, %d samples a round, each on a new one-partition topic holding ten records (one batch) and a new group. A member that speaks the protocol itself joins (ShareGroupHeartbeat), acquires the ten with one ShareFetch and then does nothing more, as a consumer that hangs while holding records (its connection stays open, so nothing is released on disconnect); a franz-go share consumer then joins and polls. The clock runs from the holder's ShareFetch answer until the franz-go member is handed one of the records again (delivery count 2); the figure is that time less the lock duration (%d ms): how late after the lock's expiry the records reach the waiting member. p50 and max are over the round's samples, then the median over rounds\n\n",
		cfg.LockSamples, cfg.Lock.Milliseconds())
	vals, errs := gather(run.Rounds)
	writeMedians(&b, "Share-group medians", ShareFigures(), cfg.Targets, vals, nil)
	b.WriteString("\nHigher is better for records/s and MB/s; lower is better for latency.\n")
	writePerTarget(&b, "Share bench failures", cfg.Targets, errs)
	writeCommands(&b, run.Commands)
	if run.Properties != "" {
		b.WriteString("\n### The node's server.properties (first round)\n\n```\n" + strings.TrimRight(run.Properties, "\n") + "\n```\n")
	}
	b.WriteString("\n" + shareEnd + "\n")
	return b.Bytes()
}
