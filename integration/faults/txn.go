package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TxnWorkload is the transactions workload: transactional producers
// that each write one transaction after another, every transaction a few
// records to distinct partitions of Topic, committing most and aborting
// some on purpose; and a read_committed reader that follows every
// partition. Each transaction is one Txn op in History: its invocation
// lists the records it writes (Partition and Value), its completion is
// OK when the commit was acknowledged, Fail when it certainly did not
// commit (it was aborted, or its commit was never sent), Info when the
// commit was sent and its outcome is unknown.
type TxnWorkload struct {
	Seeds []string
	Topic string
	// TxnPrefix starts every transactional.id ("<prefix>-<producer>").
	TxnPrefix  string
	Producers  int
	Partitions int32
	// Rate is transactions a second per producer (at most: one
	// transaction waits for the last); Abort is the share aborted on
	// purpose.
	Rate  int
	Abort float64

	History *History
	Log     *slog.Logger
}

// Run runs the producers and the reader until ctx ends; every
// transaction begun ends (or is given up) before Run returns.
func (w *TxnWorkload) Run(ctx context.Context) error {
	fns := []func() error{func() error { return w.read(ctx) }}
	for i := range w.Producers {
		fns = append(fns, func() error { return w.produce(ctx, i) })
	}
	return runAll(fns)
}

func (w *TxnWorkload) client(i int) (*kgo.Client, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(w.Seeds...),
		kgo.TransactionalID(fmt.Sprintf("%s-%d", w.TxnPrefix, i)),
		kgo.TransactionTimeout(20*time.Second),
		kgo.DefaultProduceTopic(w.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(20*time.Second),
		kgo.UnknownTopicRetries(-1),
	)
	if err != nil {
		return nil, fmt.Errorf("transactional producer %d: %w", i, err)
	}
	return cl, nil
}

// produce is producer i: one transaction at a time until ctx ends.
func (w *TxnWorkload) produce(ctx context.Context, i int) error {
	process := fmt.Sprintf("txn-producer-%d", i)
	cl, err := w.client(i)
	if err != nil {
		return err
	}
	defer func() { cl.Close() }()
	tick := time.NewTicker(time.Second / time.Duration(w.Rate))
	defer tick.Stop()
	for seq := int64(0); ; seq++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		// 2 to 4 records to distinct partitions.
		ps := rand.Perm(int(w.Partitions))[:2+rand.IntN(3)]
		inv := Op{Process: process, Type: Invoke, F: Txn, Seq: seq, Value: fmt.Sprintf("t%d-%d", i, seq)}
		for j, p := range ps {
			inv.Records = append(inv.Records, Record{Partition: int32(p), Value: fmt.Sprintf("%s-%d", inv.Value, j)})
		}
		abort := rand.Float64() < w.Abort
		inv.Key = map[bool]string{true: "abort", false: "commit"}[abort]
		w.History.Add(inv)
		outcome, why, healthy := w.transact(cl, inv.Records, abort)
		done := inv
		done.Records = nil
		done.Type, done.Error = outcome, why
		w.History.Add(done)
		if !healthy {
			// A client whose transaction state is unknown is replaced: the new
			// one's InitProducerID fences the old epoch and aborts anything
			// it left open.
			cl.Close()
			if cl, err = w.client(i); err != nil {
				return err
			}
		}
	}
}

// transact writes one transaction and says what became of it, and
// whether the client can go on.
func (w *TxnWorkload) transact(cl *kgo.Client, recs []Record, abort bool) (Type, string, bool) {
	// Not the run's context: ending the run must not cut a transaction
	// short (that would only make its outcome unknown).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return Fail, "begin: " + err.Error(), false
	}
	var mu sync.Mutex
	var produceErr error
	for _, r := range recs {
		cl.Produce(ctx, &kgo.Record{Partition: r.Partition, Value: []byte(r.Value)}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				produceErr = errors.Join(produceErr, err)
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		produceErr = errors.Join(produceErr, fmt.Errorf("flush: %w", err))
	}
	mu.Lock()
	perr := produceErr
	mu.Unlock()
	if perr != nil || abort {
		why := "aborted on purpose"
		if perr != nil {
			why = "aborted after a failed write: " + perr.Error()
			if err := cl.AbortBufferedRecords(ctx); err != nil {
				return Fail, why + "; abort buffered: " + err.Error(), false
			}
		}
		// Whatever the abort's answer, no commit was sent: the
		// transaction cannot have committed.
		if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			return Fail, why + "; abort: " + err.Error(), false
		}
		return Fail, why, true
	}
	err := cl.EndTransaction(ctx, kgo.TryCommit)
	switch {
	case err == nil:
		return OK, "", true
	case errors.Is(err, kerr.OperationNotAttempted):
		return Fail, "commit not attempted: " + err.Error(), false
	default:
		return Info, "commit: " + err.Error(), false
	}
}

// read follows every partition from its start with read_committed and
// records each poll as a TxnPoll op.
func (w *TxnWorkload) read(ctx context.Context) error {
	from := map[int32]kgo.Offset{}
	for p := range w.Partitions {
		from[p] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.Seeds...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.Topic: from}))
	if err != nil {
		return fmt.Errorf("read_committed reader: %w", err)
	}
	defer cl.Close()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		var recs []Record
		fetches.EachRecord(func(r *kgo.Record) {
			recs = append(recs, Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		})
		if len(recs) > 0 {
			w.History.Add(Op{Process: "txn-reader", Type: OK, F: TxnPoll, Records: recs})
		}
	}
	return nil
}

// RecordTxnRead waits until no transaction is open on topic (its last
// stable offsets reach its end offsets), then reads every partition with
// read_committed from offset 0 to its end and records the read as one
// TxnRead op.
func RecordTxnRead(ctx context.Context, h *History, log *slog.Logger, seeds []string, adm *kadm.Client, topic string) error {
	return recordRead(h, TxnRead, func() ([]Record, error) { return readCommitted(ctx, log, seeds, adm, topic) })
}

func readCommitted(ctx context.Context, log *slog.Logger, seeds []string, adm *kadm.Client, topic string) ([]Record, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	want := map[int32]int64{}
	var last string
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		var stable kadm.ListedOffsets
		if err == nil {
			stable, err = adm.ListCommittedOffsets(ctx, topic)
		}
		if err == nil {
			err = stable.Error()
		}
		if err == nil {
			open := 0
			ends.Each(func(o kadm.ListedOffset) {
				want[o.Partition] = o.Offset
				if s, ok := stable.Lookup(topic, o.Partition); !ok || s.Offset < o.Offset {
					open++
				}
			})
			if open == 0 {
				break
			}
			err = fmt.Errorf("%d partitions have a last stable offset below their end (ends %v)", open, want)
		}
		last = err.Error()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s's open transactions to end: %s: %w", topic, last, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	return readPartitions(ctx, log, "read_committed final read", seeds, topic, want, nil,
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
}
