// Command bench runs the benchmark workloads against Gregor, Apache Kafka
// and the null broker (the load generators' ceiling) and writes
// bench/RESULTS.md.
//
//	go run ./bench/cmd/bench -target both          # gregor, kafka, null alternated every round
//	go run ./bench/cmd/bench -target kafka
//	go run ./bench/cmd/bench -target gregor,null
//	go run ./bench/cmd/bench -target gregor,kafka -rounds 1 -only transaction -out /tmp/trial.md
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
	target := flag.String("target", envOr("TARGET", "both"), "both (gregor, kafka and null), or a comma-separated list of gregor, kafka, null")
	rounds := flag.Int("rounds", atoi(envOr("ROUNDS", "3"), 3), "rounds (each target once per round)")
	records := flag.Int("records", 200000, "records per throughput workload")
	rate := flag.Int("e2e-rate", 2000, "records/s for the latency workload (below saturation)")
	e2eTime := flag.Duration("e2e-time", 15*time.Second, "duration of the latency workload")
	commitTime := flag.Duration("commit-time", 10*time.Second, "duration of each offset-commit workload")
	out := flag.String("out", "", "report path (default bench/RESULTS.md)")
	only := flag.String("only", "", "run only the workloads whose name contains this (e.g. transaction); start-up, CPU and RSS are always taken. For trials: write them elsewhere with -out")
	flag.Parse()
	cmd, err := bench.StartCommand("bench", *rounds)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer cmd.Close()
	targets, err := bench.ParseTargets(*target)
	if err != nil {
		cmd.Log.Error("parsing -target", "err", err)
		return 2
	}
	cfg := bench.Config{Root: cmd.Root, Targets: targets, Rounds: *rounds, Records: *records, E2ERate: *rate, E2ETime: *e2eTime, CommitTime: *commitTime, Only: *only, Log: cmd.Log}
	cfg.BrokerCPU, cfg.LoadCPU = bench.PinnedCPUs()
	res, err := bench.Execute(cmd.Ctx, cfg)
	if err != nil && res == nil {
		cmd.Log.Error("bench", "err", err)
		return 1
	}
	// The other benchmarks' sections (make bench-cluster, ...) stay.
	return cmd.Finish(*out, err, res.Rounds, func(old []byte, commit string) []byte {
		return bench.KeepSections(old, bench.Render(res, bench.DescribeMachine(), commit))
	})
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func atoi(s string, def int) int {
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
		return def
	}
	return n
}
