package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Workload is the suite's clients: idempotent acks=all producers sending
// unique values ("<producer>-<seq>") under a few keys, and consumers in
// one group that poll, record what they got, and commit it before the
// next poll. Every operation goes into History.
type Workload struct {
	Seeds     []string
	Topic     string
	Group     string
	Producers int
	Consumers int
	// Churn, when set, makes each consumer leave the group after a random
	// Churn/2 to 3*Churn/2 and join again as a new member (process
	// "<consumer>.<session>").
	Churn time.Duration
	// Rate is sends a second per producer; Keys is how many keys they
	// spread over (keys pick the partition, as in Java's partitioner).
	Rate int
	Keys int
	// DeliveryTimeout bounds how long one send may retry, so that every
	// send completes soon after the faults stop.
	DeliveryTimeout time.Duration

	History *History
	Log     *slog.Logger
}

// Run runs the clients until ctx ends, then waits for every send still
// in flight to complete (or its delivery timeout) and closes them.
func (w *Workload) Run(ctx context.Context) error {
	var fns []func() error
	var clients []*kgo.Client
	for i := range w.Producers {
		cl, err := w.producerClient()
		if err != nil {
			for _, c := range clients {
				c.Close()
			}
			return err
		}
		clients = append(clients, cl)
		fns = append(fns, func() error {
			defer cl.Close()
			w.produce(ctx, cl, fmt.Sprintf("producer-%d", i), Send)
			return nil
		})
	}
	for i := range w.Consumers {
		fns = append(fns, func() error { return w.consume(ctx, fmt.Sprintf("consumer-%d", i)) })
	}
	return runAll(fns)
}

// runAll runs every fn in a goroutine of its own, waits for all of them
// and joins their errors.
func runAll(fns []func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (w *Workload) producerClient() (*kgo.Client, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(w.Seeds...),
		kgo.DefaultProduceTopic(w.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is on by default and needs acks=all
		kgo.RecordDeliveryTimeout(w.DeliveryTimeout),
		kgo.UnknownTopicRetries(-1), // a topic briefly unknown while its leader moves is retried
	)
	if err != nil {
		return nil, fmt.Errorf("producer client: %w", err)
	}
	return cl, nil
}

// produce sends at w.Rate until ctx ends, then flushes: every invoked
// send completes in the history before produce returns. f is the sends'
// Func in the history (Send, or ShareSend for ShareWorkload's producer).
func (w *Workload) produce(ctx context.Context, cl *kgo.Client, process string, f Func) {
	tick := time.NewTicker(time.Second / time.Duration(w.Rate))
	defer tick.Stop()
	var seq int64
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), w.DeliveryTimeout+30*time.Second)
			if err := cl.Flush(fctx); err != nil {
				w.Log.Warn("flushing the last sends", "process", process, "err", err)
			}
			cancel()
			return
		case <-tick.C:
		}
		key := fmt.Sprintf("k%d", rand.IntN(w.Keys))
		value := fmt.Sprintf("%s-%d", process, seq)
		inv := Op{Process: process, Type: Invoke, F: f, Seq: seq, Key: key, Value: value}
		w.History.Add(inv)
		// The record's own context is not ctx: the end of the run must not
		// abort sends in flight, which would only make them indeterminate.
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(key), Value: []byte(value)}, func(r *kgo.Record, err error) {
			done := inv
			if err == nil {
				done.Type, done.Partition, done.Offset = OK, r.Partition, r.Offset
			} else {
				done.Type, done.Error = sendOutcome(err), err.Error()
			}
			w.History.Add(done)
		})
		seq++
	}
}

// sendOutcome classes a failed send: Fail only for a refusal that no
// earlier attempt of the same batch could have been appended despite
// (the batch itself is invalid); anything else (timeouts, lost
// connections, NOT_ENOUGH_REPLICAS_AFTER_APPEND, even NOT_ENOUGH_REPLICAS
// after a retry) may have been written.
func sendOutcome(err error) Type {
	for _, definite := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage,
		kerr.TopicAuthorizationFailed, kerr.InvalidTopicException} {
		if errors.Is(err, definite) {
			return Fail
		}
	}
	return Info
}

// commitOutcome classes a failed commit: the group's refusals of a stale
// member are definite; anything else may have been applied.
func commitOutcome(err error) Type {
	for _, definite := range []error{kerr.IllegalGeneration, kerr.UnknownMemberID, kerr.RebalanceInProgress,
		kerr.FencedInstanceID, kerr.StaleMemberEpoch} {
		if errors.Is(err, definite) {
			return Fail
		}
	}
	return Info
}

// consume is one consumer until ctx ends: one group member, or, with
// Churn, one after another.
func (w *Workload) consume(ctx context.Context, name string) error {
	if w.Churn == 0 {
		return w.member(ctx, name)
	}
	for session := 0; ctx.Err() == nil; session++ {
		sctx, cancel := context.WithTimeout(ctx, w.Churn/2+rand.N(w.Churn))
		err := w.member(sctx, fmt.Sprintf("%s.%d", name, session))
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// member is one group member until ctx ends. Rebalances wait while a
// poll's records are being recorded and committed (BlockRebalanceOnPoll),
// so a member commits only what it polled while it held the partitions.
func (w *Workload) member(ctx context.Context, process string) error {
	partitions := func(f Func, note string) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			if len(m[w.Topic]) == 0 {
				return
			}
			ps := map[int32]int64{}
			for _, p := range m[w.Topic] {
				ps[p] = 0
			}
			w.History.Add(Op{Process: process, Type: OK, F: f, Offsets: ps, Error: note})
		}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(w.Seeds...),
		kgo.ConsumerGroup(w.Group),
		kgo.ConsumeTopics(w.Topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.SessionTimeout(10*time.Second),
		kgo.OnPartitionsAssigned(partitions(Assign, "")),
		kgo.OnPartitionsRevoked(partitions(Revoke, "")),
		kgo.OnPartitionsLost(partitions(Revoke, "lost")),
	)
	if err != nil {
		return fmt.Errorf("consumer client: %w", err)
	}
	defer cl.Close()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fetches := cl.PollRecords(pctx, 500)
		cancel()
		if fetches.IsClientClosed() {
			return nil
		}
		recs := fetches.Records()
		if len(recs) == 0 {
			cl.AllowRebalance()
			continue
		}
		// Empty polls are not recorded; a poll's invocation is written when
		// it returns, which is all the checker needs of it.
		poll := Op{Process: process, Type: Invoke, F: Poll}
		w.History.Add(poll)
		poll.Type = OK
		offsets := map[int32]int64{}
		for _, r := range recs {
			if r.Topic != w.Topic {
				continue
			}
			poll.Records = append(poll.Records, Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			offsets[r.Partition] = max(offsets[r.Partition], r.Offset+1)
		}
		w.History.Add(poll)
		commit := w.History.Add(Op{Process: process, Type: Invoke, F: Commit, Offsets: offsets})
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cl.CommitRecords(cctx, recs...)
		cancel()
		if err == nil {
			commit.Type = OK
		} else {
			commit.Type, commit.Error = commitOutcome(err), err.Error()
		}
		w.History.Add(commit)
		cl.AllowRebalance()
	}
	return nil
}
