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
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/bench"
	"github.com/gregorbroker/gregor/integration"
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
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	root, err := integration.FindRepoRoot()
	if err != nil {
		log.Error("finding repository", "err", err)
		return 2
	}
	targets, err := bench.ParseTargets(*target)
	if err != nil {
		log.Error("parsing -target", "err", err)
		return 2
	}
	if *rounds < 3 {
		log.Warn("fewer than 3 rounds: medians will be weak", "rounds", *rounds)
	}
	cfg := bench.Config{Root: root, Targets: targets, Rounds: *rounds, Records: *records, E2ERate: *rate, E2ETime: *e2eTime, CommitTime: *commitTime, Only: *only, Log: log}
	if _, err := exec.LookPath("taskset"); err == nil {
		cfg.BrokerCPU, cfg.LoadCPU = "0", "1"
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Hour)
	defer cancel()
	res, err := bench.Execute(ctx, cfg)
	if err != nil && res == nil {
		log.Error("bench", "err", err)
		return 1
	}
	// The cluster benchmark's section (make bench-cluster) stays.
	path, err2 := bench.UpdateResults(root, *out, func(old []byte) []byte {
		return bench.KeepSections(old, bench.Render(res, bench.DescribeMachine(), integration.GitCommit(ctx, root)))
	})
	if err2 != nil {
		log.Error("bench", "err", err2)
		return 1
	}
	fmt.Println("wrote", path)
	failed := bench.FailedRounds(res.Rounds)
	fmt.Printf("bench: %d target-rounds, %d with failures\n", len(res.Rounds), failed)
	if err != nil || failed > 0 {
		return 1
	}
	return 0
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
