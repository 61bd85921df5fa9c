package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// RESULTS.md holds two reports: the single-node one (Render, rewritten by
// `make bench`) and the cluster one (RenderCluster, by `make
// bench-cluster`), which sits between these markers. Each writer keeps the
// other's part.
const (
	clusterBegin = "<!-- cluster bench: begin (written by make bench-cluster; make bench keeps it) -->"
	clusterEnd   = "<!-- cluster bench: end -->"
)

// UpdateResults rewrites the report at out (bench/RESULTS.md under root
// when out is empty) as rewrite makes it from what the file held (nothing
// if it did not exist), and returns the path written.
func UpdateResults(root, out string, rewrite func(old []byte) []byte) (string, error) {
	path := out
	if path == "" {
		path = filepath.Join(root, "bench", "RESULTS.md")
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return path, fmt.Errorf("reading the previous results: %w", err)
	}
	if err := os.WriteFile(path, rewrite(old), 0o644); err != nil {
		return path, fmt.Errorf("writing results: %w", err)
	}
	return path, nil
}

// cutClusterSection finds the cluster section in doc: its bounds, markers
// included, or ok false.
func cutClusterSection(doc []byte) (start, end int, ok bool) {
	start = bytes.Index(doc, []byte(clusterBegin))
	if start < 0 {
		return 0, 0, false
	}
	rel := bytes.Index(doc[start:], []byte(clusterEnd))
	if rel < 0 {
		return 0, 0, false
	}
	end = start + rel + len(clusterEnd)
	if end < len(doc) && doc[end] == '\n' {
		end++
	}
	return start, end, true
}

// KeepClusterSection is a freshly rendered single-node report with the
// cluster section of old (the file it replaces) after it, if old had one.
func KeepClusterSection(old, fresh []byte) []byte {
	start, end, ok := cutClusterSection(old)
	if !ok {
		return fresh
	}
	out := append(bytes.TrimRight(bytes.Clone(fresh), "\n"), "\n\n"...)
	return append(out, old[start:end]...)
}

// PutClusterSection is old with its cluster section replaced by section
// (as RenderCluster writes it, markers included), or with section added at
// the end.
func PutClusterSection(old, section []byte) []byte {
	if start, end, ok := cutClusterSection(old); ok {
		out := append(bytes.Clone(old[:start]), section...)
		return append(out, old[end:]...)
	}
	if len(bytes.TrimSpace(old)) == 0 {
		return bytes.Clone(section)
	}
	out := append(bytes.TrimRight(bytes.Clone(old), "\n"), "\n\n"...)
	return append(out, section...)
}

// RenderCluster writes the cluster section of RESULTS.md for run, between
// its markers. command is the command line that produced it.
func RenderCluster(run *ClusterRun, m Machine, commit, command string) []byte {
	var b bytes.Buffer
	cfg := run.Config
	b.WriteString(clusterBegin + "\n\n")
	b.WriteString("## Three-node cluster (combined broker and controller nodes)\n\n")
	fmt.Fprintf(&b, "Written by `make bench-cluster` (`%s`). Do not edit by hand.\n\n", command)
	if cfg.Rounds < 3 {
		fmt.Fprintf(&b, "**A trial, not the full benchmark:** %d round(s).\n\n", cfg.Rounds)
	}
	fmt.Fprintf(&b, "- date: %s, took %s\n", run.Started.UTC().Format("2006-01-02 15:04 UTC"), run.Elapsed.Round(1e9))
	fmt.Fprintf(&b, "- commit: %s\n", commit)
	fmt.Fprintf(&b, "- machine: %d cores (%s), %.1f GiB memory, Linux %s; load average %s at the start, %s at the end. **Noise:** the three nodes (three JVMs for Kafka), this benchmark's clients and whatever else runs on the machine share these %d cores, unpinned; figures of a few milliseconds move with the scheduler\n",
		m.Cores, m.CPUModel, m.MemGiB, m.Kernel, run.LoadAvg[0], run.LoadAvg[1], m.Cores)
	if len(run.RoundLoads) > 0 {
		fmt.Fprintf(&b, "- load average as each round started (the previous round's cluster included): %s\n", strings.Join(run.RoundLoads, "; "))
	}
	fmt.Fprintf(&b, "- targets, alternated in this order every round: %s; %d round(s); every round starts a fresh cluster (new directories, new ports) with `integration.StartCluster(..., integration.Combined3, ...)`\n", strings.Join(cfg.Targets, ", "), cfg.Rounds)
	for _, t := range cfg.Targets {
		if d := run.Describe[t]; d != "" {
			fmt.Fprintf(&b, "- %s: %s\n", t, d)
		}
	}
	b.WriteString("- layout: nodes 1-3, each `process.roles=broker,controller`, static quorum (`controller.quorum.voters`), formatted with the target's own storage tool (`kafka-storage.sh format` as `kafka.tools.StorageTool`, or `gregor storage format`) and one cluster id; Kafka's JVMs run with `-Xms1G -Xmx1G` and kafka-server-start.sh's G1 flags. Both targets read the same properties file (below, node 1 of the first cluster; ports differ per round); Gregor ignores the keys it does not use (`num.network.threads`, `num.io.threads`). No other difference\n")
	b.WriteString("- clients: franz-go in this process, one client per broker seeded with that broker alone, requests issued on that broker (no routing by the client)\n")
	b.WriteString("- start-up: the clock starts when the first node's process is launched, **after** every node was formatted (formatting is not timed, for either target), and stops when a franz-go producer (idempotent, acks=all, retry backoff 10 ms, metadata min age 10 ms) on a one-partition RF 1 topic is acknowledged. Between the two: the harness waits until every broker answers ApiVersions (polled every 250 ms) and Metadata from each lists all three (polled every 100 ms), then CreateTopics goes to broker 1 (retried every 10 ms until it succeeds), then the produce (retried until acknowledged). The second row is the harness's part alone. RSS is VmRSS of the three processes right after the first produce\n")
	fmt.Fprintf(&b, "- topic visibility: %d creations, one after the other, of a 3-partition RF 1 topic through broker 1 (CreateTopics timeout 30 s); per creation the time from the CreateTopics answer until the last of the three brokers answers a Metadata request for the topic (auto-creation off; each broker asked directly, every %s, all three at once) listing it with %d partitions, each with a leader and no error. p99 is nearest-rank over the round's %d creations (so it is the largest); the table gives the median over rounds of each round's p50 and p99\n", cfg.Creations, visibilityPoll, 3, cfg.Creations)
	fmt.Fprintf(&b, "- metadata commits: IncrementalAlterConfigs SET of `retention.ms` on a one-partition topic, a new value every request; %d clients (client i talks to broker i mod 3), each waiting for its answer before the next, for %s; commits/s counts successful answers over the whole time. Then one client through broker 1 alone for %s: latency of each change\n", cfg.Clients, cfg.CommitTime, cfg.SeqCommitTime)
	fmt.Fprintf(&b, "- failover, %d per round: DescribeQuorum through broker 1 names the active controller; it is killed with SIGKILL (the clock starts just before the signal). Two pollers, each starting an attempt every %s on a connection of its own (a broker answers one connection's requests in order, so a request parked until a controller answers would hold back later ones), without waiting for earlier attempts (at most 64 in flight), until the first attempt is answered to its liking; the clock stops at that answer: (a) DescribeQuorum through the first surviving broker until it names a leader other than the killed node at a higher epoch (request timeout 10 s); (b) CreateTopics of a fresh one-partition RF 1 topic through the last surviving broker until it succeeds (timeout_ms 5 s; TOPIC_ALREADY_EXISTS, an earlier attempt that was committed after its client gave up, would count as success). Then the killed node is restarted, and the next kill waits until DescribeQuorum shows every voter at or past the high watermark of when it came back, every broker lists three brokers, and 2 s more. The table gives the median over rounds of each round's median; every kill is listed below it\n\n", cfg.Failovers, clusterPoll)

	vals, errs := gather(run.Rounds)
	ran := map[string]bool{}
	for _, t := range cfg.Targets {
		ran[t] = true
	}
	b.WriteString("### Cluster medians\n\n| figure | gregor | kafka | gregor/kafka | rounds (gregor) | rounds (kafka) |\n|---|---|---|---|---|---|\n")
	for _, f := range clusterFigures(cfg.Clients) {
		cell := func(t string) (string, float64, string) {
			if !ran[t] {
				return "not run", 0, ""
			}
			return medianCell(vals[t][f])
		}
		g, gm, graw := cell("gregor")
		k, km, kraw := cell("kafka")
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", f, g, k, ratio(gm, km), graw, kraw)
	}
	b.WriteString("\nHigher is better for commits/s; lower is better for everything else.\n")
	for _, t := range cfg.Targets {
		if len(run.Failovers[t]) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### Every failover (%s)\n\n", t)
		for _, l := range run.Failovers[t] {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, t := range cfg.Targets {
		if len(errs[t]) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### Cluster failures (%s)\n\n", t)
		for _, e := range errs[t] {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(e, "|", "\\|"))
		}
	}
	if run.Properties != "" {
		b.WriteString("\n### Node 1's server.properties (first cluster)\n\n```\n" + strings.TrimRight(run.Properties, "\n") + "\n```\n")
	}
	b.WriteString("\n" + clusterEnd + "\n")
	return b.Bytes()
}
