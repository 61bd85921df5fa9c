package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnThroughput is what txn-produce measures.
type txnThroughput struct {
	throughput
	RecordsPerTxn      int     `json:"records_per_transaction"`
	Transactions       int     `json:"transactions"`
	TransactionsPerSec float64 `json:"transactions_per_sec"`
	// TransactionVersion is the finalized transaction.version the broker
	// reports in ApiVersions (0 when it lists none, as brokers leave
	// features at level 0 out): at 2 (KIP-890 part 2) the
	// producer adds partitions with its Produce requests, below 2 with
	// AddPartitionsToTxn, so the two brokers may be doing different work.
	TransactionVersion int16 `json:"transaction_version"`
}

// txnProducer is a franz-go transactional producer with the options of
// the acks=all throughput producer. Records that have failed since the
// last commit are kept so that a commit never hides them.
type txnProducer struct {
	cl     *kgo.Client
	failed atomic.Pointer[error]
}

func newTxnProducer(bootstrap, topic string, extra ...kgo.Opt) (*txnProducer, error) {
	opts := append(producerOpts(bootstrap, "all"), kgo.DefaultProduceTopic(topic), kgo.TransactionalID("loadgen-"+topic))
	cl, err := newClient(append(opts, extra...)...)
	if err != nil {
		return nil, err
	}
	return &txnProducer{cl: cl}, nil
}

func (p *txnProducer) close() { p.cl.Close() }

func (p *txnProducer) begin() error {
	if err := p.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	return nil
}

func (p *txnProducer) produce(ctx context.Context, value []byte) {
	p.cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
		if err != nil {
			p.failed.CompareAndSwap(nil, &err)
		}
	})
}

// commit flushes the transaction's records and commits it; if any record
// failed it aborts instead and returns why, as the benchmark then measures
// something else than it claims.
func (p *txnProducer) commit(ctx context.Context) error {
	if err := p.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flushing a transaction: %w", err)
	}
	if e := p.failed.Load(); e != nil {
		_ = p.cl.EndTransaction(ctx, kgo.TryAbort)
		return fmt.Errorf("produce in a transaction: %w", *e)
	}
	if err := p.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("committing a transaction: %w", err)
	}
	return nil
}

// prepare creates topic, reads the finalized transaction.version, and
// commits one transaction of warmUp alone, which initialises the producer
// id and the metadata before anything is timed.
func (p *txnProducer) prepare(ctx context.Context, topic string, partitions int, warmUp []byte) (int16, error) {
	if err := createTopic(ctx, p.cl, topic, partitions); err != nil {
		return 0, err
	}
	tv, err := finalizedTransactionVersion(ctx, p.cl)
	if err != nil {
		return 0, err
	}
	if err := p.begin(); err != nil {
		return 0, err
	}
	p.produce(ctx, warmUp)
	if err := p.commit(ctx); err != nil {
		return 0, fmt.Errorf("warm-up transaction: %w", err)
	}
	return tv, nil
}

// finalizedTransactionVersion asks the broker for the cluster's finalized
// transaction.version; 0 when it lists none (a feature at level 0 is
// not listed).
func finalizedTransactionVersion(ctx context.Context, cl *kgo.Client) (int16, error) {
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("ApiVersions: %w", err)
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" {
			return f.MaxVersionLevel, nil
		}
	}
	return 0, nil
}

// txnProduce writes n records in transactions of perTxn records each, one
// transaction after the other from one producer: begin, produce perTxn
// records, flush, commit. Before the clock starts, one transaction of one
// record initialises the producer id and warms up metadata.
func txnProduce(ctx context.Context, bootstrap, topic string, partitions, n, perTxn int, payloadFile string) (txnThroughput, error) {
	if perTxn < 1 || n < 1 {
		return txnThroughput{}, errors.New("-records and -per-txn must be positive")
	}
	payloads, err := readPayloads(payloadFile)
	if err != nil {
		return txnThroughput{}, err
	}
	p, err := newTxnProducer(bootstrap, topic)
	if err != nil {
		return txnThroughput{}, err
	}
	defer p.close()
	tv, err := p.prepare(ctx, topic, partitions, payloads[0])
	if err != nil {
		return txnThroughput{}, err
	}
	var bytes int64
	txns := 0
	start := time.Now()
	for sent := 0; sent < n; txns++ {
		if err := p.begin(); err != nil {
			return txnThroughput{}, err
		}
		for end := min(sent+perTxn, n); sent < end; sent++ {
			v := payloads[sent%len(payloads)]
			bytes += int64(len(v))
			p.produce(ctx, v)
		}
		if err := p.commit(ctx); err != nil {
			return txnThroughput{}, fmt.Errorf("after %d transactions: %w", txns, err)
		}
	}
	d := time.Since(start)
	return txnThroughput{throughput: newThroughput(n, bytes, d), RecordsPerTxn: perTxn, Transactions: txns,
		TransactionsPerSec: float64(txns) / d.Seconds(), TransactionVersion: tv}, nil
}

// txnLatency is what txn-e2e measures.
type txnLatency struct {
	latency
	RecordsPerTxn int `json:"records_per_transaction"`
	// AchievedRate is records sent per second: below Rate when commits
	// take longer than the schedule leaves them.
	AchievedRate float64 `json:"achieved_rate"`
	// CommitP50Ms and CommitP99Ms time Flush plus EndTxn, as the
	// producer sees them.
	CommitP50Ms        float64 `json:"commit_p50_ms"`
	CommitP99Ms        float64 `json:"commit_p99_ms"`
	TransactionVersion int16   `json:"transaction_version"`
}

// txnEndToEnd sends records on a fixed schedule of rate records/s, in
// transactions of perTxn records committed as soon as their last record
// is sent, round-robin over the partitions so that every transaction with
// at least as many records as partitions spans them all. A read_committed
// consumer in the same process (one clock) measures each record from the
// Produce call (the send time is in its first 8 bytes) to its arrival,
// which includes waiting for the transaction's commit marker and the last
// stable offset to pass it. Commits run on the producing goroutine: while
// one takes longer than the schedule's gap, the next records are sent late
// and then back to back (the schedule is kept, not shifted), and their
// latency counts from when they were actually sent.
func txnEndToEnd(ctx context.Context, bootstrap, topic string, partitions, rate, perTxn int, dur time.Duration, payloadFile string) (txnLatency, error) {
	if perTxn < 1 || rate < 1 {
		return txnLatency{}, errors.New("-rate and -per-txn must be positive")
	}
	payloads, err := readPayloads(payloadFile)
	if err != nil {
		return txnLatency{}, err
	}
	p, err := newTxnProducer(bootstrap, topic, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		return txnLatency{}, err
	}
	defer p.close()
	// The warm-up record's send time is zero: the consumer, which may
	// still see it, ignores it.
	tv, err := p.prepare(ctx, topic, partitions, stamped(payloads[0], 0))
	if err != nil {
		return txnLatency{}, err
	}
	cons, err := newClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return txnLatency{}, err
	}
	defer cons.Close()
	total := max(1, int(dur.Seconds()*float64(rate)))
	done := tail(ctx, cons, total)

	interval := time.Second / time.Duration(rate)
	var commits []float64
	start := time.Now()
	next := start
	for i := 0; i < total; i++ {
		if i%perTxn == 0 {
			if err := p.begin(); err != nil {
				return txnLatency{}, err
			}
		}
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		p.produce(ctx, stamped(payloads[i%len(payloads)], time.Now().UnixNano()))
		if (i+1)%perTxn == 0 || i+1 == total {
			c0 := time.Now()
			if err := p.commit(ctx); err != nil {
				return txnLatency{}, fmt.Errorf("after %d records: %w", i+1, err)
			}
			commits = append(commits, float64(time.Since(c0))/1e6)
		}
	}
	sendTime := time.Since(start)
	got := <-done
	if got.err != nil {
		return txnLatency{}, fmt.Errorf("read_committed: %w", got.err)
	}
	sort.Float64s(commits)
	return txnLatency{
		latency: latencyOf(got.ms, rate), RecordsPerTxn: perTxn, AchievedRate: float64(total) / sendTime.Seconds(),
		CommitP50Ms: quantile(commits, 0.50), CommitP99Ms: quantile(commits, 0.99), TransactionVersion: tv,
	}, nil
}

// stamped is a copy of payload with sentNanos in its first 8 bytes.
func stamped(payload []byte, sentNanos int64) []byte {
	v := append([]byte(nil), payload...)
	binary.BigEndian.PutUint64(v, uint64(sentNanos))
	return v
}
