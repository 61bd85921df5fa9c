package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// RESULTS.md holds the single-node report (Render, rewritten by `make
// bench`) and, after it, marked sections that other commands rewrite: the
// cluster one (RenderCluster, `make bench-cluster`), the replication one
// (RenderReplication, `make bench-replication`), the security one
// (RenderSecurity, `make bench-security`), the metrics-cost one
// (RenderMetricsCost, `make bench-metrics`), the share-group one
// (RenderShare, `make bench-share`), the tiered-storage one
// (RenderTiered, `make bench-tiered`), the partition-scale one
// (RenderScale, `make bench-scale`), the connections one
// (RenderConnections, `make bench-connections`) and the soak's
// (RenderSoak, `make soak`). Each writer keeps what the others wrote.
const (
	clusterBegin     = "<!-- cluster bench: begin (written by make bench-cluster; make bench keeps it) -->"
	clusterEnd       = "<!-- cluster bench: end -->"
	replicationBegin = "<!-- replication bench: begin (written by make bench-replication; make bench and make bench-cluster keep it) -->"
	replicationEnd   = "<!-- replication bench: end -->"
)

// Section is a marked part of RESULTS.md: its begin and end marker lines.
type Section struct{ Begin, End string }

// ClusterSection is the part `make bench-cluster` writes.
func ClusterSection() Section { return Section{clusterBegin, clusterEnd} }

// ReplicationSection is the part `make bench-replication` writes.
func ReplicationSection() Section { return Section{replicationBegin, replicationEnd} }

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

// cut finds s in doc: its bounds, markers and the newline after the end
// marker included, or ok false.
func (s Section) cut(doc []byte) (start, end int, ok bool) {
	start = bytes.Index(doc, []byte(s.Begin))
	if start < 0 {
		return 0, 0, false
	}
	rel := bytes.Index(doc[start:], []byte(s.End))
	if rel < 0 {
		return 0, 0, false
	}
	end = start + rel + len(s.End)
	if end < len(doc) && doc[end] == '\n' {
		end++
	}
	return start, end, true
}

// markedSections are every section another command writes: the ones
// `make bench` keeps when it rewrites the single-node report.
func markedSections() []Section {
	return []Section{ClusterSection(), ReplicationSection(), SecuritySection(), MetricsCostSection(), ShareSection(), TieredSection(), ScaleSection(), ClusterScaleSection(), ConnectionsSection(), SoakSection()}
}

// KeepSections is a freshly rendered single-node report followed by the
// marked sections of old (the file it replaces), in the order old had
// them.
func KeepSections(old, fresh []byte) []byte {
	type span struct{ start, end int }
	var kept []span
	for _, s := range markedSections() {
		if start, end, ok := s.cut(old); ok {
			kept = append(kept, span{start, end})
		}
	}
	if len(kept) == 0 {
		return fresh
	}
	slices.SortFunc(kept, func(a, b span) int { return a.start - b.start })
	out := bytes.TrimRight(bytes.Clone(fresh), "\n")
	for _, k := range kept {
		out = append(append(out, "\n\n"...), bytes.TrimRight(old[k.start:k.end], "\n")...)
	}
	return append(out, '\n')
}

// Put is old with its section s replaced by section (as the section's
// renderer writes it, markers included), or with section added at the end.
func (s Section) Put(old, section []byte) []byte {
	if start, end, ok := s.cut(old); ok {
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
	writeRunHeader(&b, clusterBegin, "Three-node cluster (combined broker and controller nodes)", "bench-cluster", command,
		run.runInfo, m, commit, cfg.Targets, cfg.Rounds)
	b.WriteString("- clients: franz-go in this process, one client per broker seeded with that broker alone, requests issued on that broker (no routing by the client)\n")
	b.WriteString("- start-up: the clock starts when the first node's process is launched, **after** every node was formatted (formatting is not timed, for either target), and stops when a franz-go producer (idempotent, acks=all, retry backoff 10 ms, metadata min age 10 ms) on a one-partition RF 1 topic is acknowledged. Between the two: the harness waits until every broker answers ApiVersions (polled every 250 ms) and Metadata from each lists all three (polled every 100 ms), then CreateTopics goes to broker 1 (retried every 10 ms until it succeeds), then the produce (retried until acknowledged). The second row is the harness's part alone. RSS is VmRSS of the three processes right after the first produce\n")
	fmt.Fprintf(&b, "- topic visibility: %d creations, one after the other, of a 3-partition RF 1 topic through broker 1 (CreateTopics timeout 30 s); per creation the time from the CreateTopics answer until the last of the three brokers answers a Metadata request for the topic (auto-creation off; each broker asked directly, every %s, all three at once) listing it with %d partitions, each with a leader and no error. p99 is nearest-rank over the round's %d creations (so it is the largest); the table gives the median over rounds of each round's p50 and p99\n", cfg.Creations, visibilityPoll, 3, cfg.Creations)
	fmt.Fprintf(&b, "- metadata commits: IncrementalAlterConfigs SET of `retention.ms` on a one-partition topic, a new value every request; %d clients (client i talks to broker i mod 3), each waiting for its answer before the next, for %s; commits/s counts successful answers over the whole time. Then one client through broker 1 alone for %s: latency of each change\n", cfg.Clients, cfg.CommitTime, cfg.SeqCommitTime)
	fmt.Fprintf(&b, "- failover, %d per round: DescribeQuorum through broker 1 names the active controller; it is killed with SIGKILL (the clock starts just before the signal). Two pollers, each starting an attempt every %s on a connection of its own (a broker answers one connection's requests in order, so a request parked until a controller answers would hold back later ones), without waiting for earlier attempts (at most 64 in flight), until the first attempt is answered to its liking; the clock stops at that answer: (a) DescribeQuorum through the first surviving broker until it names a leader other than the killed node at a higher epoch (request timeout 10 s); (b) CreateTopics of a fresh one-partition RF 1 topic through the last surviving broker until it succeeds (timeout_ms 5 s; TOPIC_ALREADY_EXISTS, an earlier attempt that was committed after its client gave up, would count as success). Then the killed node is restarted, and the next kill waits until DescribeQuorum shows every voter at or past the high watermark of when it came back, every broker lists three brokers, and 2 s more. The table gives the median over rounds of each round's median; every kill is listed below it\n\n", cfg.Failovers, clusterPoll)

	vals, errs := gather(run.Rounds)
	writeMedians(&b, "Cluster medians", clusterFigures(cfg.Clients), cfg.Targets, vals, nil)
	b.WriteString("\nHigher is better for commits/s; lower is better for everything else.\n")
	writePerTarget(&b, "Every failover", cfg.Targets, run.Failovers)
	writePerTarget(&b, "Cluster failures", cfg.Targets, errs)
	writeProperties(&b, run.runInfo)
	b.WriteString("\n" + clusterEnd + "\n")
	return b.Bytes()
}

// writeRunHeader opens a cluster-wide section: its begin marker, title,
// the command that wrote it (made by `make <makeTarget>`), and the list
// items every such report starts with: when, which commit, the machine
// and its load, the targets and the cluster layout.
func writeRunHeader(b *bytes.Buffer, begin, title, makeTarget, command string, ri runInfo, m Machine, commit string, targets []string, rounds int) {
	b.WriteString(begin + "\n\n")
	fmt.Fprintf(b, "## %s\n\n", title)
	fmt.Fprintf(b, "Written by `make %s` (`%s`). Do not edit by hand.\n\n", makeTarget, command)
	if rounds < 3 {
		fmt.Fprintf(b, "**A trial, not the full benchmark:** %d round(s).\n\n", rounds)
	}
	fmt.Fprintf(b, "- date: %s, took %s\n", ri.Started.UTC().Format("2006-01-02 15:04 UTC"), ri.Elapsed.Round(1e9))
	fmt.Fprintf(b, "- commit: %s\n", commit)
	fmt.Fprintf(b, "- machine: %d cores (%s), %.1f GiB memory, Linux %s; load average %s at the start, %s at the end. **Noise:** the three nodes (three JVMs for Kafka), this benchmark's clients and whatever else runs on the machine share these %d cores, unpinned; figures of a few milliseconds move with the scheduler\n",
		m.Cores, m.CPUModel, m.MemGiB, m.Kernel, ri.LoadAvg[0], ri.LoadAvg[1], m.Cores)
	if len(ri.RoundLoads) > 0 {
		fmt.Fprintf(b, "- load average as each round started (the previous round's cluster included): %s\n", strings.Join(ri.RoundLoads, "; "))
	}
	fmt.Fprintf(b, "- targets, alternated in this order every round: %s; %d round(s); every round starts a fresh cluster (new directories, new ports) with `integration.StartCluster(..., integration.Combined3, ...)`\n", strings.Join(targets, ", "), rounds)
	for _, t := range targets {
		if d := ri.Describe[t]; d != "" {
			fmt.Fprintf(b, "- %s: %s\n", t, d)
		}
	}
	b.WriteString("- layout: nodes 1-3, each `process.roles=broker,controller`, static quorum (`controller.quorum.voters`), formatted with the target's own storage tool (`kafka-storage.sh format` as `kafka.tools.StorageTool`, or `gregor storage format`) and one cluster id; Kafka's JVMs run with `-Xms1G -Xmx1G` and kafka-server-start.sh's G1 flags. Both targets read the same properties file (below, node 1 of the first cluster; ports differ per round); Gregor ignores the keys it does not use (`num.network.threads`, `num.io.threads`). No other difference\n")
}

// writeMedians writes the table of medians over rounds: one row per
// figure, gregor beside kafka with their ratio and every round's value. A
// target not in targets is "not run". note (nil: none) may say something
// of a target's figure: the cell is then the note alone when the figure
// has no value, or the median followed by the note in parentheses. A
// figure with no value and no note "failed".
func writeMedians(b *bytes.Buffer, title string, figures, targets []string, vals map[string]map[string][]float64, note func(target, figure string) string) {
	fmt.Fprintf(b, "### %s\n\n| figure | gregor | kafka | gregor/kafka | rounds (gregor) | rounds (kafka) |\n|---|---|---|---|---|---|\n", title)
	for _, f := range figures {
		cell := func(t string) (string, float64, string) {
			if !slices.Contains(targets, t) {
				return "not run", 0, ""
			}
			cell, md, raw := medianCell(vals[t][f])
			if note == nil {
				return cell, md, raw
			}
			switch n := note(t, f); {
			case n == "":
			case len(vals[t][f]) == 0:
				cell = n
			default:
				cell += " (" + n + ")"
			}
			return cell, md, raw
		}
		g, gm, graw := cell("gregor")
		k, km, kraw := cell("kafka")
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", f, g, k, ratio(gm, km), graw, kraw)
	}
}

// writePerTarget writes, for each target with lines, a "title (target)"
// heading and the lines as a list (a "|" cannot end a table cell there).
func writePerTarget(b *bytes.Buffer, title string, targets []string, lines map[string][]string) {
	for _, t := range targets {
		if len(lines[t]) == 0 {
			continue
		}
		fmt.Fprintf(b, "\n### %s (%s)\n\n", title, t)
		for _, l := range lines[t] {
			fmt.Fprintf(b, "- %s\n", strings.ReplaceAll(l, "|", "\\|"))
		}
	}
}

// writeCommands lists the load generator's command lines of the first
// round ("workload\n    command line"), when there are any.
func writeCommands(b *bytes.Buffer, commands []string) {
	if len(commands) == 0 {
		return
	}
	b.WriteString("\n### Load generator command lines (first round; ports and paths change every round)\n\n```\n")
	for _, c := range commands {
		b.WriteString(c + "\n")
	}
	b.WriteString("```\n")
}

// writeProperties closes a cluster-wide report with node 1's properties.
func writeProperties(b *bytes.Buffer, ri runInfo) {
	if ri.Properties != "" {
		b.WriteString("\n### Node 1's server.properties (first cluster)\n\n```\n" + strings.TrimRight(ri.Properties, "\n") + "\n```\n")
	}
}
