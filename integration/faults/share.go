package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ShareWorkload is the suite's queue of share-group consumers (KIP-932):
// one idempotent acks=all producer sends unique values to Topic
// (ShareSend), and Consumers members of the share group Group poll, record
// what they were handed with each record's delivery count (SharePoll),
// accept every record and flush the acknowledgements, recording whether
// the brokers confirmed them (ShareAccept: ok only when every partition's
// answer was without error). After ctx ends the members go on for up to
// Drain, until the group has settled (settled), and the group's
// share-partition start offsets are recorded beside the partitions' end
// offsets (ShareFinal). CheckShare holds the history to the queue's
// invariants.
type ShareWorkload struct {
	Seeds     []string
	Topic     string
	Group     string
	Consumers int
	// Rate is the producer's sends a second; Keys how many keys they
	// spread over.
	Rate            int
	Keys            int
	DeliveryTimeout time.Duration
	// Drain bounds how long the members keep consuming after the run,
	// waiting for the last records to be accepted.
	Drain time.Duration

	History *History
	Log     *slog.Logger
}

// ShareDeliveryLimit is share.delivery.count.limit as the suite leaves it
// (Kafka's default): no record may be handed over with a delivery count
// above it.
const ShareDeliveryLimit = 5

// ConfigureShareGroup sets the group's share.auto.offset.reset to
// earliest, so that the members read the topic from its start whenever
// they first join, and its record lock duration to the smallest the
// brokers allow by default (15 s), so that records held by a member cut
// off from the cluster come back within a run.
func ConfigureShareGroup(ctx context.Context, cl *kgo.Client, group string) error {
	configs := map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "15000"}
	var err error
	for attempt := 0; attempt < 30; attempt++ {
		if err = integration.SetGroupConfigs(ctx, cl, group, configs); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("configuring share group %s: %w", group, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	return err
}

// Run runs the producer and the members until ctx ends and the members
// have drained, then records the final offsets through adm.
func (w *ShareWorkload) Run(ctx context.Context, adm *kadm.Client) error {
	producer := &Workload{Seeds: w.Seeds, Topic: w.Topic, Rate: w.Rate, Keys: w.Keys, DeliveryTimeout: w.DeliveryTimeout, History: w.History, Log: w.Log}
	cl, err := producer.producerClient()
	if err != nil {
		return err
	}
	produced := make(chan struct{})
	fns := []func() error{func() error {
		defer close(produced)
		defer cl.Close()
		producer.produce(ctx, cl, "share-producer", ShareSend)
		return nil
	}}
	// The members outlive ctx: once the producer has flushed, they stop
	// when the group has settled, or after Drain.
	members, stopMembers := context.WithCancel(context.Background())
	defer stopMembers()
	go func() {
		select {
		case <-produced:
		case <-members.Done():
			return
		}
		check := func() string {
			cctx, cancel := context.WithTimeout(members, 10*time.Second)
			defer cancel()
			return w.settled(cctx, adm)
		}
		deadline := time.After(w.Drain)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-deadline:
				w.Log.Warn("share workload: drain time over before the group settled", "state", check())
				stopMembers()
				return
			case <-tick.C:
				if check() == "" {
					stopMembers()
					return
				}
			case <-members.Done():
				return
			}
		}
	}()
	for i := range w.Consumers {
		fns = append(fns, func() error { return w.member(members, fmt.Sprintf("share-consumer-%d", i)) })
	}
	err = runAll(fns)
	fctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return errors.Join(err, w.recordFinal(fctx, adm))
}

// settled is "" once every acknowledged send was handed to a member and
// no partition has records left to deliver (shareBehind), or else what is
// still missing.
// A record whose acceptance was applied but never confirmed is not handed
// over again, so confirmations alone cannot tell.
func (w *ShareWorkload) settled(ctx context.Context, adm *kadm.Client) string {
	delivered := map[string]bool{}
	ops := w.History.Ops()
	for _, op := range ops {
		if op.F == SharePoll && op.Type == OK {
			for _, r := range op.Records {
				delivered[r.Value] = true
			}
		}
	}
	undelivered := 0
	for _, op := range ops {
		if op.F == ShareSend && op.Type == OK && !delivered[op.Value] {
			undelivered++
		}
	}
	if undelivered > 0 {
		return fmt.Sprintf("%d acknowledged sends not handed over", undelivered)
	}
	final, err := w.offsets(ctx, adm)
	if err != nil {
		return err.Error()
	}
	if behind := shareBehind(final); len(behind) > 0 {
		return behind[0]
	}
	return ""
}

// offsets are the group's share-partition start offsets and lags
// (DescribeShareGroupOffsets) and the topic's end offsets, by partition,
// as a ShareFinal op.
func (w *ShareWorkload) offsets(ctx context.Context, adm *kadm.Client) (Op, error) {
	listed, err := adm.ListEndOffsets(ctx, w.Topic)
	if err == nil {
		err = listed.Error()
	}
	var described kadm.DescribedShareGroupsOffsets
	if err == nil {
		described, err = adm.DescribeShareGroupOffsets(ctx, w.Group)
	}
	if err == nil {
		err = described.Error()
	}
	if err != nil {
		return Op{}, err
	}
	op := Op{Process: "share-final", Type: OK, F: ShareFinal, Offsets: map[int32]int64{}, Lags: map[int32]int64{}, Ends: map[int32]int64{}}
	listed.Each(func(o kadm.ListedOffset) { op.Ends[o.Partition] = o.Offset })
	for p, o := range described[w.Group].Offsets[w.Topic] {
		if o.Err != nil {
			return Op{}, fmt.Errorf("share group %s, partition %d: %w", w.Group, p, o.Err)
		}
		op.Offsets[p], op.Lags[p] = o.StartOffset, o.Lag
	}
	return op, nil
}

// member is one share consumer until ctx ends.
func (w *ShareWorkload) member(ctx context.Context, process string) error {
	var mu sync.Mutex
	var ackErrs []string
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(w.Seeds...),
		kgo.ClientID(process),
		kgo.ConsumeTopics(w.Topic),
		kgo.ShareGroup(w.Group),
		kgo.ShareMaxRecords(100),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rs {
				if r.Err != nil {
					ackErrs = append(ackErrs, fmt.Sprintf("%s/%d: %v", r.Topic, r.Partition, r.Err))
				}
			}
		}),
	)
	if err != nil {
		return fmt.Errorf("share consumer client: %w", err)
	}
	defer cl.Close()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fetches := cl.PollRecords(pctx, 100)
		cancel()
		if fetches.IsClientClosed() {
			return nil
		}
		recs := fetches.Records()
		if len(recs) == 0 {
			continue
		}
		poll := Op{Process: process, Type: Invoke, F: SharePoll}
		w.History.Add(poll)
		poll.Type = OK
		for _, r := range recs {
			poll.Records = append(poll.Records, Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value), Deliveries: r.DeliveryCount()})
		}
		w.History.Add(poll)
		mu.Lock()
		ackErrs = nil
		mu.Unlock()
		accept := w.History.Add(Op{Process: process, Type: Invoke, F: ShareAccept, Records: poll.Records})
		for _, r := range recs {
			r.Ack(kgo.AckAccept)
		}
		fctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := cl.FlushAcks(fctx)
		cancel()
		mu.Lock()
		errs := ackErrs
		mu.Unlock()
		switch {
		case err != nil:
			accept.Type, accept.Error = Info, err.Error()
		case len(errs) > 0:
			accept.Type, accept.Error = Info, fmt.Sprint(errs)
		default:
			accept.Type = OK
		}
		w.History.Add(accept)
	}
	return nil
}

// recordFinal records the group's share-partition start offsets and the
// topic's end offsets.
func (w *ShareWorkload) recordFinal(ctx context.Context, adm *kadm.Client) error {
	for {
		op, err := w.offsets(ctx, adm)
		if err == nil {
			w.History.Add(op)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("share group %s's final offsets: %w", w.Group, err)
		case <-time.After(time.Second):
		}
	}
}
