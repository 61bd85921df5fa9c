// Command sharebench is the share-group benchmark (KIP-932): share
// consume throughput with kafka-share-consumer-perf-test (1 and 4
// consumers on 1 and 16 partitions), the acknowledgement flush latency of
// a franz-go share consumer, and how late records of an expired lock
// reach another member, on one fresh node per target and round, gregor
// and kafka alternated. It rewrites the share section of bench/RESULTS.md
// and keeps the rest.
//
//	go run ./bench/cmd/sharebench -rounds 3
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
	records := flag.Int("records", 100_000, "1 KiB records in each topic, read by each perf-test run")
	ackRecords := flag.Int("ack-records", 20_000, "records the acknowledgement-latency workload reads")
	maxPoll := flag.Int("max-poll", 100, "records a poll returns at most in the acknowledgement-latency workload")
	lockSamples := flag.Int("lock-samples", 3, "expired-lock measurements per round")
	lock := flag.Duration("lock", 10*time.Second, "the brokers' group.share.record.lock.duration.ms (long enough for a member to join)")
	out := flag.String("out", "", "report path (default bench/RESULTS.md); its share section is replaced, the rest kept")
	flag.Parse()
	cmd, err := bench.StartCommand("sharebench", *rounds)
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
	if *records < 1 || *ackRecords < 1 || *maxPoll < 1 || *lockSamples < 1 || *lock < time.Second {
		cmd.Log.Error("-records, -ack-records, -max-poll and -lock-samples must be positive, -lock at least 1s")
		return 2
	}
	cfg := bench.ShareConfig{Root: cmd.Root, Targets: targets, Rounds: *rounds, Records: *records, AckRecords: *ackRecords,
		MaxPoll: *maxPoll, LockSamples: *lockSamples, Lock: *lock}
	cfg.BrokerCPU, cfg.LoadCPU = bench.PinnedCPUs()
	res, err := bench.ExecuteShare(cmd.Ctx, cfg, cmd.Log)
	if res == nil {
		cmd.Log.Error("share bench", "err", err)
		return 1
	}
	return cmd.Finish(*out, err, res.Rounds, func(old []byte, commit string) []byte {
		return bench.ShareSection().Put(old, bench.RenderShare(res, bench.DescribeMachine(), commit, cmd.Line))
	})
}
