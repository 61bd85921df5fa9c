// Command connbench is the connections benchmark: on one fresh node per
// target and round, gregor and kafka alternated, a storm of -connections
// TCP connections (each answered ApiVersions), the node's memory and
// descriptors per idle connection, then one Metadata on every connection
// at once and the memory again. It rewrites the connections section of
// bench/RESULTS.md and keeps the rest.
//
//	go run ./bench/cmd/connbench -rounds 3
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gregorbroker/gregor/bench"
)

func main() { os.Exit(run()) }

func run() int {
	target := flag.String("target", "gregor,kafka", "comma-separated list of gregor, kafka, in alternation order")
	rounds := flag.Int("rounds", 3, "rounds (each target once per round, each time on a fresh node)")
	conns := flag.Int("connections", 10_000, "connections held open at once")
	dialers := flag.Int("dialers", 64, "goroutines opening (and later using) the connections")
	out := flag.String("out", "", "report path (default bench/RESULTS.md); its connections section is replaced, the rest kept")
	flag.Parse()
	cmd, err := bench.StartCommand("connbench", *rounds)
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
	if *conns < 1 || *dialers < 1 {
		cmd.Log.Error("-connections and -dialers must be positive")
		return 2
	}
	cfg := bench.ConnConfig{Root: cmd.Root, Targets: targets, Rounds: *rounds, Connections: *conns, Dialers: *dialers}
	res, err := bench.ExecuteConnections(cmd.Ctx, cfg, cmd.Log)
	if res == nil {
		cmd.Log.Error("connections bench", "err", err)
		return 1
	}
	return cmd.Finish(*out, err, res.Rounds, func(old []byte, commit string) []byte {
		return bench.ConnectionsSection().Put(old, bench.RenderConnections(res, bench.DescribeMachine(), commit, cmd.Line))
	})
}
