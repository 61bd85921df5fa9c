package bench

import (
	"bytes"
	"fmt"
	"strings"
)

// failoverSettings are the broker keys that decide how soon a killed
// broker is fenced and its partitions led elsewhere, with Kafka 4.3's
// defaults (Gregor's are the same).
func failoverSettings() [][2]string {
	return [][2]string{
		{"broker.session.timeout.ms", "9000"},
		{"broker.heartbeat.interval.ms", "2000"},
		{"replica.lag.time.max.ms", "30000"},
	}
}

// failoverSettingsIn says, for each of failoverSettings, the value props
// (a server.properties file) sets or that it is left at the default.
func failoverSettingsIn(props string) string {
	set := map[string]string{}
	for _, l := range strings.Split(props, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "!") {
			continue
		}
		if k, v, ok := strings.Cut(l, "="); ok {
			set[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	var parts []string
	for _, kv := range failoverSettings() {
		if v, ok := set[kv[0]]; ok {
			parts = append(parts, fmt.Sprintf("`%s=%s` (set in the properties; the default is %s)", kv[0], v, kv[1]))
		} else {
			parts = append(parts, fmt.Sprintf("`%s=%s` (not set: the default)", kv[0], kv[1]))
		}
	}
	return strings.Join(parts, ", ")
}

// rejoinNote is the rejoin figure's cell note for target: how many of its
// restarted brokers did not rejoin every ISR; "" when all did.
func rejoinNote(run *ReplicationRun, target string) string {
	n := run.NotRejoined[target]
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("did not rejoin: %d of %d restarts, limit %s", n, run.Restarts[target], run.Config.RejoinLimit)
}

// RenderReplication writes the replication section of RESULTS.md for run,
// between its markers. command is the command line that produced it.
func RenderReplication(run *ReplicationRun, m Machine, commit, command string) []byte {
	var b bytes.Buffer
	cfg := run.Config
	writeRunHeader(&b, replicationBegin, "Replication: three-node cluster, replication factor 3", "bench-replication", command,
		run.runInfo, m, commit, cfg.Targets, cfg.Rounds)
	if run.DiskFree != "" {
		fmt.Fprintf(&b, "- disk: %s free at the start on the file system of the clusters' directories; each round's log directories are removed when its cluster has stopped (node.log and server.properties stay)\n", run.DiskFree)
	}
	fmt.Fprintf(&b, "- fencing and ISR settings, the same file for both targets: %s. The harness (`integration.StartCluster`) sets none of them, for either target, in this benchmark or in `make bench-cluster`; the shorter ones of the replication tests (`integration/replication`: 3000/500 ms, lag 4000 ms) are not used here.\n", failoverSettingsIn(run.Properties))
	fmt.Fprintf(&b, "- every topic: replication factor %d, `min.insync.replicas=%d` (a topic config given at creation), %d partitions unless its row says otherwise; created through broker 1 (CreateTopics, timeout 30 s), and used only once every broker's Metadata lists each partition with a leader and all %d replicas in the ISR (asked again %s after each answer). Producers: idempotent (franz-go's default) for acks=all, lz4\n", replFactor, replMinISR, replPartitions, replFactor, clusterPoll)
	fmt.Fprintf(&b, "- payload: %s\n", run.Payload)
	fmt.Fprintf(&b, "- produce throughput: `loadgen produce` (bench/loadgen, the single-node benchmark's franz-go load generator: linger 5 ms, batches up to 1 MiB, 100,000 records buffered, franz-go's sticky partitioner) writes %d records to a fresh topic of 1, 6 and 64 partitions, each with acks=1 (not idempotent, as loadgen sets it) and acks=all, in that order, bootstrapped at broker 1; its own CreateTopics finds the topic there. The controller places the replicas, so leadership is spread over the three brokers. MB/s is MiB of payload per second, from the first record produced (after one warm-up record) to the last acknowledged\n", cfg.Records)
	fmt.Fprintf(&b, "- CPU of the three brokers per GB: the sum of the three broker processes' utime+stime (`/proc/<pid>/stat`), read just before `loadgen produce` starts and just after it exits (its start, metadata and warm-up record are inside), over the acks=all throughput runs, divided by the payload bytes produced (1 GB = 10^9 bytes, uncompressed payload). Each broker leads some partitions and follows the others, so this is the cost of the whole replicated write: one leader and two followers for every byte\n")
	fmt.Fprintf(&b, "- follower fetch CPU per GB: the acks=all, %d-partition throughput workload once more (%d records), on a topic created with a manual replica assignment that lists the active controller (DescribeQuorum) first for every partition, so that it leads all of them (checked in Metadata before the run; bootstrapped at it) and the two other brokers only follow. The follower row is the mean of the two followers' CPU over the run (read as above) divided by the payload bytes produced, each follower having replicated all of them; the leader row is the leader's CPU over the same run per GB produced. The followers' CPU includes their small part in the KRaft quorum (fetching the metadata log); the leader is the active controller\n", replPartitions, cfg.Records)
	fmt.Fprintf(&b, "- produce latency at half the maximum: right after the throughput runs, `loadgen produce-latency` sends, on a fixed schedule (open loop: a slow acknowledgement does not slow the sending until 100,000 records are buffered, then Produce blocks), half the records/s that the round's acks=all %d-partition throughput run measured (the row \"records/s asked\": each target, each round, is loaded at half its own maximum, so the rates differ) for %s to a fresh %d-partition topic, acks=all, linger 0, lz4, idempotent, franz-go's sticky partitioner; each record is timed from its Produce call to its acknowledgement. \"records/s sent\" is the records divided by the time it took to send them all: below the rate asked, the load generator (or a full buffer) did not keep the schedule\n", replPartitions, cfg.HalfTime, replPartitions)
	fmt.Fprintf(&b, "- end-to-end latency: `loadgen e2e` produces %d records/s (linger 0) for %s, each stamped with its send time, and a consumer in the same process (no group, from the log end) tails the topic; latency is Produce to the record's arrival at the consumer, which sees only records below the high watermark, so replication to the ISR is inside it\n", cfg.E2ERate, cfg.E2ETime)
	fmt.Fprintf(&b, "- failover, %d per round, each on a fresh topic: a writer in this process (franz-go, one record at a time to each partition in turn, %d records/s, linger 0, retries unbounded and %s apart, metadata refreshed at most every %s) writes until every partition has taken a record; then the leader of one partition is killed with SIGKILL (the clock starts just before the signal). The broker killed is one that is not the active controller (DescribeQuorum), the lowest such in id order on odd kills, the next on even ones, so that no controller failover is timed with it; it is a combined node, so a controller voter dies too and the quorum keeps its majority. The partition is the lowest it leads. Two clocks stop: when the first surviving broker's Metadata (polled every %s) names another leader for the partition, and when the writer receives the first acknowledgement of a record on that partition sent after the kill (the producer kept trying throughout). Limit %s\n", cfg.LeaderKills, cfg.WriteRate, clusterPoll, clusterPoll, clusterPoll, replFailoverLimit)
	fmt.Fprintf(&b, "- rejoin: the writer goes on; %s after the failover (the first acknowledgement above) the broker is restarted on its own data directory and ports, and the clock starts at the restart (its ApiVersions answer is the part row). It stops when the surviving broker's Metadata of every topic (asked again %s after each answer) lists the broker in the ISR of every partition whose replicas include it: all of the round's topics. Limit %s from the restart; a broker not back by then **did not rejoin**, and a round in which one did not has no rejoin figure. The next kill waits until DescribeQuorum shows every voter caught up and every broker lists three brokers\n", cfg.Down, clusterPoll, cfg.RejoinLimit)
	b.WriteString("- the failover and rejoin rows are the median over rounds of each round's median over its kills\n")
	if cfg.CatchupBytes > 0 {
		fmt.Fprintf(&b, "- catch-up, last in the round, once: on a fresh %d-partition topic, the lowest-id broker that is not the active controller is stopped with SIGTERM (a clean shutdown; SIGKILL had it not exited within 10 s) and, once the first surviving broker's Metadata shows every partition of the topic led and in sync without it, `loadgen produce` (as the throughput runs, acks=all: the two others are the ISR) writes a backlog of **%s of payload** (%s records of the payload above), bootstrapped at that survivor. Then a writer in this process (as the failover's: one record at a time to each partition in turn, linger 0, acks=all) loads the two leaders at %d records/s; %s later the broker is restarted on its data and ports, and the clock starts. It stops when the survivor's Metadata of every topic (asked again %s after each answer) lists the broker in the ISR of every partition it holds: all of the round's topics, the others idle and already caught up. Limit %s for the backlog's writing and, again, from the restart. The MiB/s row is the growth of the broker's log of the topic (DescribeLogDirs to it: the batches as the producer compressed them, so about 1/%s of the payload's size) from its ApiVersions answer to its return, over that time. The latency rows are the writer's records sent in the %s before the restart, and those sent from the restart to the return (p99.9 over a short catch-up rests on few records: the details give the counts)\n",
			replPartitions, fmtSize(cfg.CatchupBytes), thousands(catchupRecords(cfg.CatchupBytes)), cfg.CatchupRate, cfg.CatchupBefore, clusterPoll, cfg.CatchupLimit, lz4RatioOf(run.Payload), cfg.CatchupBefore)
	} else {
		b.WriteString("- catch-up: not run (`-catchup-bytes 0`)\n")
	}
	b.WriteString("\n")

	vals, errs := gather(run.Rounds)
	writeMedians(&b, "Replication medians", replicationFigures(cfg), cfg.Targets, vals, func(target, figure string) string {
		if figure == figRRejoin {
			return rejoinNote(run, target)
		}
		return ""
	})
	b.WriteString("\nHigher is better for records/s and MB/s (the half-rate \"records/s asked\" row excepted: it is the load each target was given); lower is better for everything else.\n")
	writePerTarget(&b, "Every leader kill", cfg.Targets, run.Kills)
	writePerTarget(&b, "Per-round details", cfg.Targets, run.Details)
	writePerTarget(&b, "Replication failures", cfg.Targets, errs)
	writeCommands(&b, run.Commands)
	writeProperties(&b, run.runInfo)
	b.WriteString("\n" + replicationEnd + "\n")
	return b.Bytes()
}

// catchupRecords is how many records of the benchmark's 1 KiB payloads
// make a backlog of n bytes.
func catchupRecords(n int64) int { return int((n + 1023) / 1024) }

// lz4RatioOf takes the "lz4 ratio 1.87:1" out of a payload description,
// "the payload's lz4 ratio" when it has none.
func lz4RatioOf(desc string) string {
	_, rest, ok := strings.Cut(desc, "lz4 ratio ")
	if !ok {
		return "the payload's lz4 ratio"
	}
	r, _, _ := strings.Cut(rest, ":")
	return r
}
