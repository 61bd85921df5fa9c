// Command scalebench is the partition-scale benchmark: on one fresh node
// per target and round, gregor and kafka alternated, a burst of
// CreateTopics of -topics × -per-topic partitions, Metadata and
// DescribeTopicPartitions over all of them, memory and descriptors per idle
// partition, SIGTERM, a clean restart and a restart after kill -9, each
// until every partition is led and acknowledges a record. It rewrites the
// scale section of bench/RESULTS.md and keeps the rest.
//
//	go run ./bench/cmd/scalebench -rounds 3
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gregorbroker/gregor/bench"
)

func main() { os.Exit(run()) }

func run() int {
	target := flag.String("target", "gregor,kafka", "comma-separated list of gregor, kafka, in alternation order")
	rounds := flag.Int("rounds", 3, "rounds (each target once per round, each time on a fresh node)")
	topics := flag.Int("topics", 100, "topics created at once")
	perTopic := flag.Int("per-topic", 100, "partitions per topic")
	idle := flag.Duration("idle", 50*time.Second, "time without traffic before memory and descriptors are read (gregor closes idle segments' files 30 to 45 s after their last use)")
	limit := flag.Duration("limit", 10*time.Minute, "give up on one measurement after this long")
	profile := flag.String("profile", "", "directory for gregor's CPU profiles (create burst, restarts) and idle heap profile")
	out := flag.String("out", "", "report path (default bench/RESULTS.md); its scale section (or cluster scale section) is replaced, the rest kept")
	cluster := flag.Bool("cluster", false, "run the three-node cluster benchmark (replication factor 3) instead of the one-node one")
	cpuWindow := flag.Duration("cpu-window", 30*time.Second, "cluster: how long the idle cluster's CPU is measured")
	flag.Parse()
	cmd, err := bench.StartCommand("scalebench", *rounds)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer cmd.Close()
	targets, err := bench.ParseBrokerTargets(*target)
	if err != nil {
		cmd.Log.Error(err.Error())
		return 2
	}
	if *topics < 1 || *perTopic < 1 {
		cmd.Log.Error("-topics and -per-topic must be positive")
		return 2
	}
	cfg := bench.ScaleConfig{Root: cmd.Root, Targets: targets, Rounds: *rounds, Topics: *topics, PerTopic: *perTopic, Idle: *idle, Limit: *limit, ProfileDir: *profile}
	if *cluster {
		cfg := bench.ClusterScaleConfig{ScaleConfig: cfg, CPUWindow: *cpuWindow, Log: cmd.Log}
		res, err := bench.ExecuteClusterScale(cmd.Ctx, cfg)
		if res == nil {
			cmd.Log.Error("cluster scale bench", "err", err)
			return 1
		}
		return cmd.Finish(*out, err, res.Rounds, func(old []byte, commit string) []byte {
			return bench.ClusterScaleSection().Put(old, bench.RenderClusterScale(res, bench.DescribeMachine(), commit, cmd.Line))
		})
	}
	res, err := bench.ExecuteScale(cmd.Ctx, cfg, cmd.Log)
	if res == nil {
		cmd.Log.Error("scale bench", "err", err)
		return 1
	}
	return cmd.Finish(*out, err, res.Rounds, func(old []byte, commit string) []byte {
		return bench.ScaleSection().Put(old, bench.RenderScale(res, bench.DescribeMachine(), commit, cmd.Line))
	})
}
