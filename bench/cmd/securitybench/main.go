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
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gregorbroker/gregor/bench"
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
	cmd, err := bench.StartCommand("securitybench", *rounds)
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
	if *records < 1 || *rate < 1 || *latencyTime <= 0 || *acls < 0 {
		cmd.Log.Error("-records, -rate and -latency-time must be positive, -acls not negative")
		return 2
	}
	cfg := bench.SecurityConfig{Root: cmd.Root, Targets: targets, Rounds: *rounds, Records: *records, Rate: *rate,
		LatencyTime: *latencyTime, ACLs: *acls, Log: cmd.Log}
	cfg.BrokerCPU, cfg.LoadCPU = bench.PinnedCPUs()
	res, err := bench.ExecuteSecurity(cmd.Ctx, cfg)
	if res == nil {
		cmd.Log.Error("security bench", "err", err)
		return 1
	}
	code := cmd.Finish(*out, err, res.Rounds, func(old []byte, commit string) []byte {
		return bench.SecuritySection().Put(old, bench.RenderSecurity(res, bench.DescribeMachine(), commit, cmd.Line))
	})
	for t, why := range res.NoAuthorizer {
		fmt.Printf("securitybench: %s: authorization not measured: %s\n", t, why)
	}
	return code
}
