package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/integration"
)

// targetNull is the null broker (bench/nullbroker): it stores nothing, so
// what the throughput workloads reach against it is what the load
// generators alone reach on this machine, the ceiling a broker is held to.
const targetNull = "null"

// bothTargets is what TARGET=both runs every round: the two brokers
// compared, and the null broker as their ceiling.
var bothTargets = []string{"gregor", "kafka", targetNull}

// ParseTargets reads -target: "both", or a comma-separated list of
// gregor, kafka and null, run in that order every round.
func ParseTargets(s string) ([]string, error) {
	if s == "both" {
		return slices.Clone(bothTargets), nil
	}
	var out []string
	for _, t := range strings.Split(s, ",") {
		if !slices.Contains(bothTargets, t) || slices.Contains(out, t) {
			return nil, fmt.Errorf("bad target %q in %q (want both, or a list of gregor, kafka, null)", t, s)
		}
		out = append(out, t)
	}
	return out, nil
}

// ParseBrokerTargets reads -target of the benchmarks that compare the two
// brokers only (cluster, replication, security): a comma-separated list
// of gregor and kafka, run in that order every round.
func ParseBrokerTargets(s string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t != "gregor" && t != "kafka" {
			return nil, fmt.Errorf("bad -target %q: want a list of gregor, kafka", t)
		}
		out = append(out, t)
	}
	return out, nil
}

// nullDescription is the report's word on the null broker.
const nullDescription = "the null broker (`bench/cmd/nullbroker`, built from this commit) is a Kafka-protocol responder that stores nothing: " +
	"Metadata names itself as the one broker and controller; Produce is acknowledged from the batch headers alone (per-partition offsets counted, records neither checked nor kept; acks=0 unanswered); " +
	"every Fetch is answered from pre-built lz4 batches of %d records made from the same payloads in order, sent straight from memory with the base offsets the consumer asked for (CRCs valid), below a high watermark no run reaches and which ListOffsets agrees with; " +
	"InitProducerId, FindCoordinator and a group coordinator for groups of one member serve the idempotent producers and kafka-consumer-perf-test's consumer. " +
	"It runs %s, fresh every round, and only the produce and consume workloads run against it; " +
	"gregor/null is Gregor's median as a fraction of the null broker's, how much of what the load generators can reach Gregor delivers"

// nullRecordsPerBatch is the null broker's -records-per-batch (its default).
const nullRecordsPerBatch = 128

// nullRound starts a fresh null broker and runs the throughput workloads
// against it; start-up, latency, group, CPU and RSS figures mean nothing
// for a broker that does no work, so none are taken.
func (r *runner) nullRound(ctx context.Context, round int, rd *Round, fail func(string, ...any)) {
	dir := filepath.Join(r.workDir, fmt.Sprintf("null-round%d", round))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail("%v", err)
		return
	}
	host, err := integration.ClaimLoopback()
	if err != nil {
		fail("%v", err)
		return
	}
	defer host.Release() // after the broker's Stop, deferred below
	addr := host.Addr(integration.ClientPort)
	c := taskset(r.cfg.BrokerCPU, integration.Cmd{Name: r.nullBin, Args: []string{"-addr", addr, "-payloads", r.payloads,
		"-records-per-batch", fmt.Sprint(nullRecordsPerBatch)}})
	r.note("null broker (the ceiling), started fresh every round", c)
	p, err := integration.Start(c, filepath.Join(dir, "nullbroker.log"))
	if err != nil {
		fail("starting the null broker: %v", err)
		return
	}
	defer p.Stop(10 * time.Second)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := integration.WaitReady(rctx, addr, p.Done()); err != nil {
		fail("null broker did not start: %v; log: %s", oneLine(err.Error()), oneLine(p.LogTail(4)))
		return
	}
	r.throughput(ctx, addr, round, rd, fail)
}
