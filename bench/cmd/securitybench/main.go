// Command securitybench runs the security benchmark (one combined node,
// Gregor against Apache Kafka 4.3.1, alternated every round: produce and
// consume throughput and latency over PLAINTEXT and SSL, and produce
// throughput and latency with StandardAuthorizer and 1,001 ACLs against
// none) and writes its section of bench/RESULTS.md, keeping the rest.
//
//	go run ./bench/cmd/securitybench                   # make bench-security: 3 rounds, gregor then kafka
//	go run ./bench/cmd/securitybench -rounds 1 -records 20000 -latency-time 5s -out /tmp/trial.md
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/bench"
	"github.com/gregorbroker/gregor/integration"
)

func main() { os.Exit(run()) }

func run() int {
	target := flag.String("target", "gregor,kafka", "comma-separated list of gregor, kafka, in alternation order")
	rounds := flag.Int("rounds", 3, "rounds (each target once per round, each time on fresh nodes)")
	records := flag.Int("records", 200_000, "records of each produce and consume throughput workload")
	rate := flag.Int("rate", 2000, "records/s of the produce latency and end-to-end latency workloads")
	latencyTime := flag.Duration("latency-time", 15*time.Second, "duration of each latency workload")
	acls := flag.Int("acls", 1000, "ACLs besides the producer's on the authorizer node")
	out := flag.String("out", "", "report path (default bench/RESULTS.md); its security section is replaced, the rest kept")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	root, err := integration.FindRepoRoot()
	if err != nil {
		log.Error("finding repository", "err", err)
		return 2
	}
	targets, err := bench.ParseBrokerTargets(*target)
	if err != nil {
		log.Error(err.Error())
		return 2
	}
	if *records < 1 || *rate < 1 || *latencyTime <= 0 || *acls < 0 {
		log.Error("-records, -rate and -latency-time must be positive, -acls not negative")
		return 2
	}
	if *rounds < 3 {
		log.Warn("fewer than 3 rounds: medians will be weak", "rounds", *rounds)
	}
	cfg := bench.SecurityConfig{Root: root, Targets: targets, Rounds: *rounds, Records: *records, Rate: *rate,
		LatencyTime: *latencyTime, ACLs: *acls, Log: log}
	if _, err := exec.LookPath("taskset"); err == nil {
		cfg.BrokerCPU, cfg.LoadCPU = "0", "1"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Hour)
	defer cancel()
	command := strings.TrimSpace("go run ./bench/cmd/securitybench " + strings.Join(os.Args[1:], " "))

	res, err := bench.ExecuteSecurity(ctx, cfg)
	if res == nil {
		log.Error("security bench", "err", err)
		return 1
	}
	path, err2 := bench.UpdateResults(root, *out, func(old []byte) []byte {
		return bench.SecuritySection().Put(old, bench.RenderSecurity(res, bench.DescribeMachine(), integration.GitCommit(ctx, root), command))
	})
	if err2 != nil {
		log.Error("security bench", "err", err2)
		return 1
	}
	fmt.Println("wrote", path)
	failed := bench.FailedRounds(res.Rounds)
	fmt.Printf("securitybench: %d target-rounds, %d with failures\n", len(res.Rounds), failed)
	for t, why := range res.NoAuthorizer {
		fmt.Printf("securitybench: %s: authorization not measured: %s\n", t, why)
	}
	if err != nil || failed > 0 {
		return 1
	}
	return 0
}
