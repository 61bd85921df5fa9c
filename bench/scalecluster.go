package bench

// The cluster partition-scale benchmark (make bench-scale-cluster): one
// fresh three-node combined cluster (integration.Combined3) per target and
// round, gregor and kafka alternated, with thousands of partitions of
// replication factor 3. Each round measures, in order:
//
//   - create: a burst of concurrent CreateTopics (-topics of -per-topic
//     partitions, replication factor 3, min.insync.replicas=2) through
//     broker 1 until all are answered, and until every partition has
//     acknowledged one record (acks=all: both followers have it);
//   - Metadata for all topics through broker 1 (v12, the median of 5);
//   - idle: after -idle without traffic, the CPU the three processes use
//     over -cpu-window (followers fetching thousands of idle partitions:
//     with fetch sessions a fetch lists none of them) and their RSS, less
//     the fresh cluster's, per partition replica;
//   - a broker that is not the active controller stopped with SIGTERM,
//     then, once it is out of every ISR, started again and timed until it
//     is back in the ISR of every partition; then the same after SIGKILL.
//
// The clients never wait on their own backoffs (scaleClient).

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClusterScaleConfig is one run of the cluster scale benchmark: the
// one-node benchmark's settings (its ProfileDir unused, its topics given
// replication factor 3), how long the idle cluster's CPU is measured, and
// the log.
type ClusterScaleConfig struct {
	ScaleConfig
	CPUWindow time.Duration
	Log       *slog.Logger
}

// ClusterScaleRun is the cluster scale benchmark's result.
type ClusterScaleRun struct {
	Config ClusterScaleConfig
	runInfo
	Notes map[string][]string
}

const (
	figCScaleCreate   = "CreateTopics burst answered (s)"
	figCScaleAcked    = "burst to every partition acknowledging an acks=all record (s)"
	figCScaleMetadata = "Metadata, all topics (ms)"
	figCScaleIdleCPU  = "idle: CPU of the three nodes (ms per s, per 1,000 partitions)"
	figCScaleRSS      = "RSS per partition replica (KiB)"
	figCScaleRestart  = "clean restart of a broker: launch to back in every ISR (s)"
	figCScaleKill     = "kill -9 of a broker: launch to back in every ISR (s)"
)

// ClusterScaleFigures are the figures in report order.
func ClusterScaleFigures() []string {
	return []string{figCScaleCreate, figCScaleAcked, figCScaleMetadata, figCScaleIdleCPU, figCScaleRSS, figCScaleRestart, figCScaleKill}
}

// ExecuteClusterScale runs every round, the targets alternated.
func ExecuteClusterScale(ctx context.Context, cfg ClusterScaleConfig) (*ClusterScaleRun, error) {
	tools, workDir, err := prepareClusterBench(ctx, cfg.Root, "scale-cluster", cfg.Targets)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(workDir)
	run := &ClusterScaleRun{Config: cfg, runInfo: newRunInfo(), Notes: map[string][]string{}}
	err = run.alternate(ctx, cfg.Log, "cluster scale bench", cfg.Targets, cfg.Rounds, func(round int, t string) Round {
		rd := Round{Target: t, Round: round, Figures: map[string]float64{}}
		dir := filepath.Join(workDir, fmt.Sprintf("%s-round%d", t, round))
		note, err := clusterScaleRound(ctx, cfg, tools, t, dir, rd.Figures, run)
		if err != nil {
			rd.Errors = append(rd.Errors, oneLine(err.Error()))
		}
		if note != "" {
			run.Notes[t] = append(run.Notes[t], fmt.Sprintf("round %d: %s", round, note))
		}
		_ = os.RemoveAll(dir) // thousands of partitions' files, three times
		return rd
	})
	return run, err
}

func clusterScaleRound(ctx context.Context, cfg ClusterScaleConfig, tools *integration.Tools, target, dir string, figs map[string]float64, run *ClusterScaleRun) (string, error) {
	c, err := integration.StartCluster(ctx, tools, target, integration.Combined3, dir, clusterReadyWait)
	if err != nil {
		return "", fmt.Errorf("cluster did not start: %w", err)
	}
	defer func() { _ = c.Stop() }()
	run.noteCluster(target, c)
	bc := newBrokerClients(c)
	defer bc.close()

	scfg := cfg.ScaleConfig
	scfg.ReplicationFactor, scfg.TopicConfigs = 3, map[string]string{"min.insync.replicas": "2"}
	names := make([]string, cfg.Topics)
	for i := range names {
		names[i] = fmt.Sprintf("scale-%d", i)
	}
	boot := c.Nodes[0].Addr()
	rssBefore := clusterRSS(c)

	start := time.Now()
	if err := createBurst(ctx, scfg, boot, names); err != nil {
		return "", err
	}
	figs[figCScaleCreate] = time.Since(start).Seconds()
	if err := produceEvery(ctx, scfg, boot, names, "one record"); err != nil {
		return "", fmt.Errorf("producing to every partition: %w", err)
	}
	figs[figCScaleAcked] = time.Since(start).Seconds()
	mdTook, mdBytes, err := metadataAll(ctx, boot, cfg.Partitions())
	if err != nil {
		return "", err
	}
	figs[figCScaleMetadata] = float64(mdTook.Microseconds()) / 1000

	if err := sleepCtx(ctx, cfg.Idle); err != nil {
		return "", err
	}
	cpuBefore, err := clusterCPU(c)
	if err != nil {
		return "", err
	}
	if err := sleepCtx(ctx, cfg.CPUWindow); err != nil {
		return "", err
	}
	cpuAfter, err := clusterCPU(c)
	if err != nil {
		return "", err
	}
	rssAfter := clusterRSS(c)
	replicas := float64(3 * cfg.Partitions())
	figs[figCScaleIdleCPU] = (cpuAfter - cpuBefore) * 1000 / cfg.CPUWindow.Seconds() / (float64(cfg.Partitions()) / 1000)
	figs[figCScaleRSS] = (rssAfter - rssBefore) * 1024 / replicas
	note := fmt.Sprintf("Metadata answer %d bytes; RSS of the three nodes %.0f → %.0f MiB; %.2f s of CPU over the %s idle window",
		mdBytes, rssBefore, rssAfter, cpuAfter-cpuBefore, cfg.CPUWindow)

	leader, _, _, _, err := bc.quorumLeader(ctx, 1)
	if err != nil {
		return note, fmt.Errorf("DescribeQuorum: %w", err)
	}
	victim, via := 0, 0
	for _, id := range bc.brokerIDs() {
		switch {
		case victim == 0 && int32(id) != leader:
			victim = id
		case via == 0 && id != victim:
			via = id
		}
	}
	if via == victim || via == 0 {
		via = int(leader)
	}
	for _, restart := range []struct {
		fig, how string
		stop     func(int) error
	}{
		{figCScaleRestart, "SIGTERM", c.StopNode},
		{figCScaleKill, "SIGKILL", c.Kill},
	} {
		if err := restart.stop(victim); err != nil {
			return note, fmt.Errorf("stopping broker %d (%s): %w", victim, restart.how, err)
		}
		bc.forget(victim)
		left, err := waitISR(ctx, &bc, via, names, int32(victim), false, cfg.Limit)
		if err != nil {
			return note, fmt.Errorf("broker %d after %s: %w", victim, restart.how, err)
		}
		launched := time.Now()
		if err := c.Restart(ctx, victim); err != nil {
			return note, err
		}
		bc.forget(victim)
		if _, err := waitISR(ctx, &bc, via, names, int32(victim), true, cfg.Limit); err != nil {
			return note, fmt.Errorf("broker %d restarted after %s: %w", victim, restart.how, err)
		}
		figs[restart.fig] = time.Since(launched).Seconds()
		note += fmt.Sprintf("; broker %d (the active controller is %d) out of every ISR %.1f s after %s", victim, leader, left.Seconds(), restart.how)
	}
	return note, nil
}

// waitISR polls broker via's Metadata for names every 200 ms until broker
// id is in the ISR of every partition (in true) or of none (in false), and
// returns how long that took.
func waitISR(ctx context.Context, bc *brokerClients, via int, names []string, id int32, in bool, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	last := "no answer"
	for time.Since(start) < limit {
		req := kmsg.NewPtrMetadataRequest()
		for _, n := range names {
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, t)
		}
		resp, err := bc.request(ctx, via, req, 10*time.Second)
		if err == nil {
			with, total := 0, 0
			for _, t := range resp.(*kmsg.MetadataResponse).Topics {
				for _, p := range t.Partitions {
					total++
					for _, r := range p.ISR {
						if r == id {
							with++
							break
						}
					}
				}
			}
			if (in && with == total && total > 0) || (!in && with == 0 && total > 0) {
				return time.Since(start), nil
			}
			last = fmt.Sprintf("in the ISR of %d of %d partitions", with, total)
		} else {
			last = err.Error()
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("after %s still %s", limit, last)
}

// clusterCPU is the CPU seconds the cluster's running processes used.
func clusterCPU(c *integration.Cluster) (float64, error) {
	var sum float64
	for _, n := range c.Nodes {
		s, err := cpuSeconds(n.Pid())
		if err != nil {
			return 0, fmt.Errorf("CPU of node %d: %w", n.ID, err)
		}
		sum += s
	}
	return sum, nil
}

// clusterRSS is the cluster's processes' RSS in MiB.
func clusterRSS(c *integration.Cluster) float64 {
	var sum float64
	for _, n := range c.Nodes {
		if v, err := rssMiB(n.Pid()); err == nil {
			sum += v
		}
	}
	return sum
}

const (
	clusterScaleBegin = "<!-- cluster scale bench: begin (written by make bench-scale-cluster; the other writers keep it) -->"
	clusterScaleEnd   = "<!-- cluster scale bench: end -->"
)

// ClusterScaleSection is the part `make bench-scale-cluster` writes.
func ClusterScaleSection() Section { return Section{clusterScaleBegin, clusterScaleEnd} }

// RenderClusterScale writes the cluster scale section of RESULTS.md.
func RenderClusterScale(run *ClusterScaleRun, m Machine, commit, command string) []byte {
	var b bytes.Buffer
	cfg := run.Config
	writeRunHeader(&b, clusterScaleBegin, fmt.Sprintf("Partitions at scale: a three-node cluster, %s partitions of replication factor 3", thousands(cfg.Partitions())),
		"bench-scale-cluster", command, run.runInfo, m, commit, cfg.Targets, cfg.Rounds)
	fmt.Fprintf(&b, "- create: %s concurrent CreateTopics through broker 1 (one topic each, %s partitions, replication factor 3, `min.insync.replicas=2`) on one franz-go client, timed until the last is answered, then one record to every partition (franz-go, acks=all, linger 5 ms, manual partitioner) until the last acknowledgement: both followers of every partition have it. As on one node, Gregor answers CreateTopics once its own replicas are open, Kafka once its controller committed the topic; the second row is the same event on both\n",
		thousands(cfg.Topics), thousands(cfg.PerTopic))
	b.WriteString("- Metadata: v12 for all topics through broker 1, the median of 5 after one untimed\n")
	fmt.Fprintf(&b, "- idle: %s without traffic after the above, then the CPU time (utime+stime of /proc/<pid>/stat) the three processes used over %s, as milliseconds of CPU per second per 1,000 partitions: what followers fetching idle partitions cost (Kafka's and Gregor's followers fetch in incremental fetch sessions, which list only partitions whose position moved; the leaders hold each fetch up to replica.fetch.wait.max.ms=500). RSS: VmRSS of the three processes at the end of that window less right after the cluster started, over the partition replicas (3 per partition). Kafka's RSS counts its objects only where they land on heap pages not touched before: a lower bound\n", cfg.Idle, cfg.CPUWindow)
	b.WriteString("- restarts: a broker that is not the active controller (DescribeQuorum) is stopped with SIGTERM; once another broker's Metadata (polled every 200 ms) shows it in no ISR, it is started again on its data, timed from launch until that Metadata shows it in the ISR of every partition. Then the same with SIGKILL (the fence after broker.session.timeout.ms, 9 s by default, removes it from the ISRs). Nothing is written while it is down\n\n")
	vals, errs := gather(run.Rounds)
	writeMedians(&b, "Cluster partition-scale medians", ClusterScaleFigures(), cfg.Targets, vals, nil)
	b.WriteString("\nLower is better for every figure. Ratios are per round, then the median.\n")
	writePerTarget(&b, "What the figures came from", cfg.Targets, run.Notes)
	writePerTarget(&b, "Cluster scale bench failures", cfg.Targets, errs)
	writeProperties(&b, run.runInfo)
	b.WriteString("\n" + clusterScaleEnd + "\n")
	return b.Bytes()
}
