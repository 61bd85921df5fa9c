// Command clusterbench runs the cluster benchmark (three combined nodes,
// Gregor against Apache Kafka, alternated every round) and writes its
// section of bench/RESULTS.md, keeping the single-node report around it.
//
//	go run ./bench/cmd/clusterbench                    # 3 rounds, gregor then kafka
//	go run ./bench/cmd/clusterbench -rounds 1 -out /tmp/trial.md
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
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
	rounds := flag.Int("rounds", 3, "rounds (each target once per round, each time on a fresh cluster)")
	creations := flag.Int("creations", 20, "topic creations per round for the visibility figures")
	clients := flag.Int("clients", 4, "concurrent config-changing clients")
	commitTime := flag.Duration("commit-time", 10*time.Second, "duration of the concurrent config-change workload")
	seqTime := flag.Duration("seq-commit-time", 5*time.Second, "duration of the one-client config-change workload")
	failovers := flag.Int("failovers", 3, "kills of the active controller per round")
	out := flag.String("out", "", "report path (default bench/RESULTS.md); its cluster section is replaced, the rest kept")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	root, err := integration.FindRepoRoot()
	if err != nil {
		log.Error("finding repository", "err", err)
		return 2
	}
	var targets []string
	for _, t := range strings.Split(*target, ",") {
		if t != "gregor" && t != "kafka" {
			log.Error("bad -target: want a list of gregor, kafka", "target", t)
			return 2
		}
		targets = append(targets, t)
	}
	if *rounds < 3 {
		log.Warn("fewer than 3 rounds: medians will be weak", "rounds", *rounds)
	}
	cfg := bench.ClusterConfig{Root: root, Targets: targets, Rounds: *rounds, Creations: *creations, Clients: *clients,
		CommitTime: *commitTime, SeqCommitTime: *seqTime, Failovers: *failovers, Log: log}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Hour)
	defer cancel()
	res, err := bench.ExecuteCluster(ctx, cfg)
	if err != nil && res == nil {
		log.Error("cluster bench", "err", err)
		return 1
	}
	command := strings.TrimSpace("go run ./bench/cmd/clusterbench " + strings.Join(os.Args[1:], " "))
	path, err2 := bench.UpdateResults(root, *out, func(old []byte) []byte {
		return bench.ClusterSection().Put(old, bench.RenderCluster(res, bench.DescribeMachine(), integration.GitCommit(ctx, root), command))
	})
	if err2 != nil {
		log.Error("cluster bench", "err", err2)
		return 1
	}
	fmt.Println("wrote", path)
	failed := bench.FailedRounds(res.Rounds)
	fmt.Printf("clusterbench: %d target-rounds, %d with failures\n", len(res.Rounds), failed)
	if err != nil || failed > 0 {
		return 1
	}
	return 0
}
