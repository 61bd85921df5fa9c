// Command connbench is the connections benchmark: on one fresh node per
// target and round, gregor and kafka alternated, a storm of -connections
// TCP connections (each answered ApiVersions), the node's memory and
// descriptors per idle connection, then one Metadata on every connection
// at once and the memory again; then, on a second fresh node, -producers
// idempotent producers and -members classic group members in -groups
// groups (bench/clients.go). It rewrites the connections section of
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
	producers := flag.Int("producers", 1000, "idempotent producers of the producer phase (0 skips it)")
	producerPartitions := flag.Int("producer-partitions", 10, "partitions of the producer phase's topic")
	members := flag.Int("members", 10_000, "classic consumer group members of the group phase (0 skips it)")
	groups := flag.Int("groups", 1000, "groups the members are spread over")
	storm := flag.Int("storm", 10_000, "connections of the rate storm against max.connection.creation.rate (0 skips the storms against the limits)")
	profile := flag.String("profile", "", "directory for gregor's heap profiles (idle connections, heartbeating members)")
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
	if *conns < 1 || *dialers < 1 || *producerPartitions < 1 || *groups < 1 || *producers < 0 || *members < 0 || *storm < 0 {
		cmd.Log.Error("-connections, -dialers, -producer-partitions and -groups must be positive, -producers and -members not negative")
		return 2
	}
	cfg := bench.ConnConfig{Root: cmd.Root, Targets: targets, Rounds: *rounds, Connections: *conns, Dialers: *dialers,
		Producers: *producers, ProducerPartitions: *producerPartitions, Members: *members, Groups: *groups, StormConnections: *storm, ProfileDir: *profile}
	res, err := bench.ExecuteConnections(cmd.Ctx, cfg, cmd.Log)
	if res == nil {
		cmd.Log.Error("connections bench", "err", err)
		return 1
	}
	return cmd.Finish(*out, err, res.Rounds, func(old []byte, commit string) []byte {
		return bench.ConnectionsSection().Put(old, bench.RenderConnections(res, bench.DescribeMachine(), commit, cmd.Line))
	})
}
