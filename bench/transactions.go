package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/gregorbroker/gregor/integration"
)

// The transaction workloads, run by bench/loadgen against both
// brokers with the same franz-go client and command line (Kafka's
// ProducerPerformance commits on a timer, --transaction-duration-ms, which
// is not the same workload): transactional produce throughput in
// transactions of a fixed number of records, and end-to-end latency as a
// read_committed consumer sees it. The null broker has no transaction
// coordinator, so they are not run against it.
const (
	txnPartitions = 16 // as the acks=all 16-partition produce, so the two compare
	// txnE2ERate and txnE2EPerTxn: a transaction every 10 ms, each of 10
	// records round-robin over txnE2EPartitions partitions, so every
	// transaction writes a commit marker to all of them.
	txnE2ERate       = 1000
	txnE2EPerTxn     = 10
	txnE2EPartitions = 4
)

// txnSizes are the records per transaction of the throughput workloads.
func txnSizes() []int { return []int{100, 10_000} }

func txnProduceName(perTxn int) string {
	return fmt.Sprintf("transactional produce 1 KiB lz4, %s records per transaction, %d partitions, franz-go", groupedInt(perTxn), txnPartitions)
}

func txnE2EName() string {
	return fmt.Sprintf("end-to-end latency, read_committed, transactions of %d records at %d records/s, %d partitions, franz-go", txnE2EPerTxn, txnE2ERate, txnE2EPartitions)
}

// txnCommitFigure is the latency producer's commit (Flush plus EndTxn)
// at quantile q: the part of the end-to-end latency the producer waits.
func txnCommitFigure(q string) string {
	return txnE2EName() + ": commit (Flush+EndTxn) " + q + " (ms)"
}

// txnSentFigure is the rate the latency producer kept: below txnE2ERate
// when commits took longer than the schedule leaves them.
func txnSentFigure() string { return txnE2EName() + ": records/s actually sent" }

// figTxnVersion is not a performance figure: it says whether the two
// brokers ran the same transaction protocol (KIP-890 part 2 at 2).
const figTxnVersion = "finalized transaction.version the transactional producer saw (not a performance figure)"

// txnSettings is what the report says about the transaction workloads.
func txnSettings() string {
	gap := time.Second / txnE2ERate
	return fmt.Sprintf(txnSettingsFormat, (txnE2EPerTxn-1)*gap, (txnE2EPerTxn-1)*gap/2)
}

const txnSettingsFormat = "one franz-go transactional producer (acks=all, lz4, linger 5 ms, the options of the franz-go throughput producer) loops begin, produce, Flush, EndTxn(commit); the clock starts after one warm-up transaction has initialised the producer id. " +
	"The read_committed latency producer sends on a fixed schedule (linger 0, round-robin partitioner) and commits each transaction right after its last record is sent, on the producing goroutine; a read_committed consumer in the same process measures each record from its Produce call to its arrival, which includes waiting for the commit marker; a record also waits for the rest of its transaction to be sent (up to %v at this schedule), so about %v of the median, and up to %[1]v of any quantile, is the schedule, not the broker. " +
	"The brokers run with their transaction defaults; the finalized transaction.version the producer saw in ApiVersions is listed among the figures (at 2, KIP-890 part 2, partitions join a transaction with the Produce request; below 2, with AddPartitionsToTxn)"

type txnProduceResult struct {
	RecordsPerSec      float64 `json:"records_per_sec"`
	MBPerSec           float64 `json:"mb_per_sec"`
	TransactionsPerSec float64 `json:"transactions_per_sec"`
	TransactionVersion int16   `json:"transaction_version"`
}

type txnLatencyResult struct {
	latencyResult
	AchievedRate       float64 `json:"achieved_rate"`
	CommitP50Ms        float64 `json:"commit_p50_ms"`
	CommitP99Ms        float64 `json:"commit_p99_ms"`
	TransactionVersion int16   `json:"transaction_version"`
}

// txnFigures lists the transaction workloads' figures in report order.
func txnFigures() []string {
	var names []string
	for _, k := range txnSizes() {
		n := txnProduceName(k)
		names = append(names, n+" records/s", n+" MB/s", n+" transactions/s")
	}
	for _, q := range []string{"p50", "p99", "p99.9"} {
		names = append(names, txnE2EName()+" (ms) "+q)
	}
	return append(names, txnCommitFigure("p50"), txnCommitFigure("p99"), txnSentFigure(), figTxnVersion)
}

// txnWorkloads runs the transaction workloads selected against bootstrap
// and records their figures in rd.
func (r *runner) txnWorkloads(ctx context.Context, bootstrap string, round int, rd *Round, fail func(string, ...any)) {
	for _, k := range txnSizes() {
		name := txnProduceName(k)
		if !r.selected(name) {
			continue
		}
		c := r.pinned(integration.Cmd{Name: r.loadgen, Args: []string{"txn-produce", "-bootstrap", bootstrap, "-topic", fmt.Sprintf("bench-txn-%d-%d", k, round),
			"-partitions", strconv.Itoa(txnPartitions), "-records", strconv.Itoa(r.cfg.Records), "-per-txn", strconv.Itoa(k), "-payloads", r.payloads},
			Timeout: 5 * time.Minute})
		r.note(name, c)
		res, err := runJSON[txnProduceResult](ctx, c)
		if err != nil {
			fail("%s: %v", name, oneLine(err.Error()))
			continue
		}
		rd.Figures[name+" records/s"] = res.RecordsPerSec
		rd.Figures[name+" MB/s"] = res.MBPerSec
		rd.Figures[name+" transactions/s"] = res.TransactionsPerSec
		rd.Figures[figTxnVersion] = float64(res.TransactionVersion)
	}
	name := txnE2EName()
	if !r.selected(name) {
		return
	}
	c := r.pinned(integration.Cmd{Name: r.loadgen, Args: []string{"txn-e2e", "-bootstrap", bootstrap, "-topic", fmt.Sprintf("bench-txn-e2e-%d", round),
		"-partitions", strconv.Itoa(txnE2EPartitions), "-rate", strconv.Itoa(txnE2ERate), "-per-txn", strconv.Itoa(txnE2EPerTxn),
		"-duration", r.cfg.E2ETime.String(), "-payloads", r.payloads}, Timeout: r.cfg.E2ETime + 2*time.Minute})
	r.note(name, c)
	res, err := runJSON[txnLatencyResult](ctx, c)
	if err != nil {
		fail("%s: %v", name, oneLine(err.Error()))
		return
	}
	rd.Figures[txnSentFigure()] = res.AchievedRate
	rd.Figures[name+" (ms) p50"] = res.P50Ms
	rd.Figures[name+" (ms) p99"] = res.P99Ms
	rd.Figures[name+" (ms) p99.9"] = res.P999Ms
	rd.Figures[txnCommitFigure("p50")] = res.CommitP50Ms
	rd.Figures[txnCommitFigure("p99")] = res.CommitP99Ms
	rd.Figures[figTxnVersion] = float64(res.TransactionVersion)
}
