// Command clusterbench runs the cluster benchmark (three combined nodes,
// Gregor against Apache Kafka, alternated every round) and writes its
// section of bench/RESULTS.md, keeping the rest of the file. With
// -replication it runs the replication benchmark instead (replication
// factor 3: produce throughput on 1, 6 and 64 partitions with acks=1 and
// acks=all, the brokers' and a follower's CPU per GB, produce latency at
// half the acks=all maximum, end-to-end latency, partition leader
// failover, rejoining the ISR, a stopped broker catching up a backlog
// under load) and writes that section.
//
//	go run ./bench/cmd/clusterbench                    # 3 rounds, gregor then kafka
//	go run ./bench/cmd/clusterbench -rounds 1 -out /tmp/trial.md
//	go run ./bench/cmd/clusterbench -replication       # make bench-replication
//	go run ./bench/cmd/clusterbench -replication -rounds 1 -records 50000 -catchup-bytes 512MiB -out /tmp/repl-trial.md
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
	rounds := flag.Int("rounds", 3, "rounds (each target once per round, each time on a fresh cluster)")
	creations := flag.Int("creations", 20, "topic creations per round for the visibility figures")
	clients := flag.Int("clients", 4, "concurrent config-changing clients")
	commitTime := flag.Duration("commit-time", 10*time.Second, "duration of the concurrent config-change workload")
	seqTime := flag.Duration("seq-commit-time", 5*time.Second, "duration of the one-client config-change workload")
	failovers := flag.Int("failovers", 3, "kills of the active controller per round")
	out := flag.String("out", "", "report path (default bench/RESULTS.md); its cluster (or replication) section is replaced, the rest kept")
	replication := flag.Bool("replication", false, "run the replication benchmark (the flags below) instead of the cluster one")
	records := flag.Int("records", 500_000, "replication: records of each produce throughput workload (and of the follower CPU one)")
	halfTime := flag.Duration("half-time", 20*time.Second, "replication: duration of the produce latency workload at half the round's acks=all 6-partition records/s")
	e2eRate := flag.Int("e2e-rate", 1000, "replication: records/s of the end-to-end latency workload")
	e2eTime := flag.Duration("e2e-time", 15*time.Second, "replication: duration of the end-to-end latency workload")
	leaderKills := flag.Int("leader-kills", 2, "replication: partition leaders killed per round")
	writeRate := flag.Int("write-rate", 1000, "replication: records/s written through each leader kill")
	down := flag.Duration("down", 15*time.Second, "replication: time from a failover (first acknowledged write after the kill) to the killed broker's restart, writes going on")
	rejoinLimit := flag.Duration("rejoin-limit", time.Minute, "replication: wait, from the restart, for the broker to be back in every ISR")
	catchupBytes := int64(10 << 30)
	flag.Func("catchup-bytes", "replication: payload written while a broker is stopped, for it to catch up (10GiB, 512MiB, ...; 0 skips the catch-up) (default 10GiB)", func(s string) error {
		n, err := bench.ParseSize(s)
		catchupBytes = n
		return err
	})
	catchupRate := flag.Int("catchup-rate", 2000, "replication: records/s loading the leaders before and during the catch-up")
	catchupBefore := flag.Duration("catchup-before", 15*time.Second, "replication: time the load runs before the stopped broker's restart")
	catchupLimit := flag.Duration("catchup-limit", 30*time.Minute, "replication: bound on writing the backlog, and on the wait from the restart for the broker to be back in every ISR")
	flag.Parse()
	cmd, err := bench.StartCommand("clusterbench", *rounds)
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
	if *replication && (*records < 1 || *e2eRate < 1 || *writeRate < 1 || *leaderKills < 0 || *catchupRate < 1 || *halfTime <= 0) {
		cmd.Log.Error("-records, -e2e-rate, -write-rate, -catchup-rate and -half-time must be positive, -leader-kills not negative")
		return 2
	}

	// Each benchmark gives its rounds, or nil if it could not start, and
	// the section of RESULTS.md it rewrites.
	var targetRounds []bench.Round
	var section bench.Section
	var render func(commit string) []byte
	if *replication {
		cfg := bench.ReplicationConfig{Root: cmd.Root, Targets: targets, Rounds: *rounds, Records: *records, HalfTime: *halfTime,
			E2ERate: *e2eRate, E2ETime: *e2eTime, LeaderKills: *leaderKills, WriteRate: *writeRate, Down: *down, RejoinLimit: *rejoinLimit,
			CatchupBytes: catchupBytes, CatchupRate: *catchupRate, CatchupBefore: *catchupBefore, CatchupLimit: *catchupLimit, Log: cmd.Log}
		var res *bench.ReplicationRun
		if res, err = bench.ExecuteReplication(cmd.Ctx, cfg); res != nil {
			targetRounds, section = res.Rounds, bench.ReplicationSection()
			render = func(commit string) []byte {
				return bench.RenderReplication(res, bench.DescribeMachine(), commit, cmd.Line)
			}
		}
	} else {
		cfg := bench.ClusterConfig{Root: cmd.Root, Targets: targets, Rounds: *rounds, Creations: *creations, Clients: *clients,
			CommitTime: *commitTime, SeqCommitTime: *seqTime, Failovers: *failovers, Log: cmd.Log}
		var res *bench.ClusterRun
		if res, err = bench.ExecuteCluster(cmd.Ctx, cfg); res != nil {
			targetRounds, section = res.Rounds, bench.ClusterSection()
			render = func(commit string) []byte { return bench.RenderCluster(res, bench.DescribeMachine(), commit, cmd.Line) }
		}
	}
	if render == nil {
		cmd.Log.Error("cluster bench", "err", err)
		return 1
	}
	return cmd.Finish(*out, err, targetRounds, func(old []byte, commit string) []byte {
		return section.Put(old, render(commit))
	})
}
