// Command tieredbench is the tiered-storage benchmark (KIP-405) with the
// remote storage in a local directory: on one fresh node per target and
// round, gregor and kafka alternated, the copier's throughput once a
// producer of 256 MiB stops, a cold read of those 256 MiB from the store
// beside a read of as much from a topic without tiered storage, and the
// produce latency at a fixed rate on a tiered topic the copier works on
// against a plain one. It rewrites the tiered section of bench/RESULTS.md
// and keeps the rest.
//
//	go run ./bench/cmd/tieredbench -rounds 3
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
	records := flag.Int("records", 262_144, "1 KiB records in the tiered topic and in the plain one (262,144: 256 MiB)")
	rate := flag.Int("latency-rate", 20_480, "records/s of the produce-latency workloads (20,480: 20 MiB/s)")
	latencyTime := flag.Duration("latency-time", 15*time.Second, "how long each produce-latency workload sends")
	out := flag.String("out", "", "report path (default bench/RESULTS.md); its tiered section is replaced, the rest kept")
	flag.Parse()
	cmd, err := bench.StartCommand("tieredbench", *rounds)
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
	// Fewer than about 4 MiB would leave too few rolled segments to
	// measure anything.
	if *records < 4096 || *rate < 1 || *latencyTime < time.Second {
		cmd.Log.Error("-records must be at least 4096, -latency-rate positive, -latency-time at least 1s")
		return 2
	}
	cfg := bench.TieredConfig{Root: cmd.Root, Targets: targets, Rounds: *rounds, Records: *records, LatencyRate: *rate, LatencyTime: *latencyTime}
	cfg.BrokerCPU, cfg.LoadCPU = bench.PinnedCPUs()
	res, err := bench.ExecuteTiered(cmd.Ctx, cfg, cmd.Log)
	if res == nil {
		cmd.Log.Error("tiered bench", "err", err)
		return 1
	}
	return cmd.Finish(*out, err, res.Rounds, func(old []byte, commit string) []byte {
		return bench.TieredSection().Put(old, bench.RenderTiered(res, bench.DescribeMachine(), commit, cmd.Line))
	})
}
