package bench

import (
	"bytes"
	"fmt"
	"strings"
)

const (
	tieredBegin = "<!-- tiered bench: begin (written by make bench-tiered; the other writers keep it) -->"
	tieredEnd   = "<!-- tiered bench: end -->"
)

// TieredSection is the part `make bench-tiered` writes.
func TieredSection() Section { return Section{tieredBegin, tieredEnd} }

// RenderTiered writes the tiered-storage section of RESULTS.md for run,
// between its markers. command is the command line that produced it.
func RenderTiered(run *TieredRun, m Machine, commit, command string) []byte {
	var b bytes.Buffer
	cfg := run.Config
	size := mib(cfg.Records)
	b.WriteString(tieredBegin + "\n\n")
	b.WriteString("## Tiered storage (KIP-405) in a local directory, on one node\n\n")
	fmt.Fprintf(&b, "Written by `make bench-tiered` (`%s`). Do not edit by hand.\n\n", command)
	if cfg.Rounds < 3 {
		fmt.Fprintf(&b, "**A trial, not the full benchmark:** %d round(s).\n\n", cfg.Rounds)
	}
	fmt.Fprintf(&b, "- date: %s, took %s\n", run.Started.UTC().Format("2006-01-02 15:04 UTC"), run.Elapsed.Round(1e9))
	fmt.Fprintf(&b, "- commit: %s\n", commit)
	fmt.Fprintf(&b, "- machine: %d cores (%s), %.1f GiB memory, Linux %s; load average %s at the start, %s at the end (the machine is shared with other work)\n",
		m.Cores, m.CPUModel, m.MemGiB, m.Kernel, run.LoadAvg[0], run.LoadAvg[1])
	if len(run.RoundLoads) > 0 {
		fmt.Fprintf(&b, "- load average as each target's round started: %s\n", strings.Join(run.RoundLoads, "; "))
	}
	fmt.Fprintf(&b, "- targets, alternated in this order every round: %s; %d round(s), each on one fresh combined node (new directory, new ports, new remote storage directory, formatted with the target's own storage tool, `integration.StartNode`); both read the same server.properties (below): the harness's (among them `log.retention.check.interval.ms=1000`) and tiered storage on top: `remote.log.storage.system.enable=true`, `remote.log.storage.manager.class.name=org.apache.kafka.server.log.remote.storage.LocalTieredStorage` with `rsm.config.dir` the round's store directory, `remote.log.manager.task.interval.ms=%d`, and for Kafka's topic-based metadata manager its listener and a one-partition, one-replica `__remote_log_metadata`\n",
		strings.Join(cfg.Targets, ", "), cfg.Rounds, tieredTaskIntervalMs)
	for _, t := range cfg.Targets {
		if d := run.Describe[t]; d != "" {
			switch t {
			case "kafka":
				d += "; LocalTieredStorage (Kafka's directory-backed RemoteStorageManager for tests) from `org.apache.kafka:kafka-storage:" + "4.3.1" + ":test` (`remote.log.storage.manager.class.path`), the topic-based RemoteLogMetadataManager, every other remote.log.* key at its default"
			case "gregor":
				d += "; it maps LocalTieredStorage to its own directory backend, in LocalTieredStorage's layout under `<rsm.config.dir>/kafka-tiered-storage`, keeps the remote log metadata in `__remote_log_metadata` as Kafka's topic-based manager does, and loads no class path"
			}
			fmt.Fprintf(&b, "- %s: %s\n", t, d)
		}
	}
	if cfg.BrokerCPU != "" {
		fmt.Fprintf(&b, "- pinning: the node runs under `taskset -c %s`, every load generator under `taskset -c %s`; this process (topic creation, the ListOffsets polls) is not pinned\n", cfg.BrokerCPU, cfg.LoadCPU)
	} else {
		b.WriteString("- pinning: none (taskset not available)\n")
	}
	fmt.Fprintf(&b, "- payload: %s; sent without compression\n", run.Payload)
	fmt.Fprintf(&b, "- topics: one partition each, `segment.bytes=%d` (Kafka's smallest); the tiered ones also `remote.storage.enable=true` and `local.retention.ms=%d`, the plain ones neither (7 days' retention, nothing leaves the disk); one plain latency topic keeps the default segment size\n",
		tieredSegBytes, tieredLocalRetentionMs)
	fmt.Fprintf(&b, "- produce: `loadgen produce` (franz-go, acks=all, idempotent, linger 5 ms, batches up to 1 MiB, no compression) writes %s records of 1 KiB (%d MiB of payload, after one warm-up record) to the plain topic, then, after a `sync`, to the tiered topic; MB/s is MiB of payload per second, as the perf tools print\n",
		thousands(cfg.Records), size)
	fmt.Fprintf(&b, "- copy: from the moment the tiered topic's last record was acknowledged (loadgen's clock) until ListOffsets -5 (latest tiered, v9, polled every %s from this process) reaches the end of the last segment rolled by then (the base offset of the active segment on disk, less one); the backlog is what was left to copy then: the offsets between the last -5 answered before producing ended and that end, times the bytes per offset of the segment files on disk; MiB/s is backlog over time. The copier also works while the producer writes, so the backlog is what it had not caught up with\n", tieredPoll)
	b.WriteString("- local deletion: from the same moment until ListOffsets -4 (earliest local) reaches the active segment's base offset: every segment rolled by then copied and deleted from the local disk, which the cold read needs (the local retention check runs every second on both)\n")
	fmt.Fprintf(&b, "- reads: after a `sync`, `loadgen consume` (one franz-go client, no group, reset to the start, fetch.max.bytes 64 MiB, 8 MiB per partition) reads %s records from offset 0 of the tiered topic (cold: everything but the active segment from the store), then of the plain topic (local); the clock starts at the first poll, the time to first record is from then. **Page cache:** not dropped between producing and reading (no other benchmark here drops it, and `/proc/sys/vm/drop_caches` is not writable on this machine): the store's files and the plain topic's segments, written moments before, are warm in the page cache (%d MiB each, far less than the memory), so the cold read measures the broker's remote read path, not a disk\n",
		thousands(cfg.Records), size)
	fmt.Fprintf(&b, "- produce latency: `loadgen produce-latency` (franz-go, acks=all, linger 0, no compression) sends %s records/s of 1 KiB (%.1f MiB/s) for %s on a fixed schedule (open loop) to each of three topics in turn, with a `sync` before each: a plain topic with the default segments (1 GiB: no roll), a plain topic with 1 MiB segments (about %.0f rolls a second) and a tiered topic with 1 MiB segments, which the copier copies (and local retention deletes) while the producer writes; each record is timed from its Produce call to its acknowledgement. The tiered topic's p99 is compared with the plain topic's of the same segment size, so that only the tiering differs. The MiB copied during the tiered run is from ListOffsets -5 before and after it\n\n",
		thousands(cfg.LatencyRate), float64(cfg.LatencyRate)/1024, cfg.LatencyTime, float64(cfg.LatencyRate)*1024/tieredSegBytes)
	vals, errs := gather(run.Rounds)
	writeMedians(&b, "Tiered storage medians", TieredFigures(cfg), cfg.Targets, vals, nil)
	b.WriteString("\nHigher is better for MB/s and MiB/s; lower is better for seconds and latency. Ratios are per round, then the median.\n")
	writePerTarget(&b, "Offsets behind the copy figures", cfg.Targets, run.Notes)
	writePerTarget(&b, "Tiered bench failures", cfg.Targets, errs)
	writeCommands(&b, run.Commands)
	if run.Properties != "" {
		b.WriteString("\n### The node's server.properties (first round)\n\n```\n" + strings.TrimRight(run.Properties, "\n") + "\n```\n")
	}
	b.WriteString("\n" + tieredEnd + "\n")
	return b.Bytes()
}
