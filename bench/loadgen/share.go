package main

// Share-group (KIP-932) modes: acknowledgement latency of one share
// consumer, and how long records held by a member that stopped polling
// take to reach another member once their acquisition lock expires.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// setShareEarliest sets the group's share.auto.offset.reset to earliest,
// so that a new group reads what is already in the topic.
func setShareEarliest(ctx context.Context, cl *kgo.Client, group string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("configuring share group %s: %w", group, err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		return fmt.Errorf("configuring share group %s: %w", group, err)
	}
	return nil
}

type shareAckLatency struct {
	Records       int     `json:"records"`
	Acks          int     `json:"acks"` // acknowledgements flushed, one per poll
	RecordsPerSec float64 `json:"records_per_sec"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	MaxMs         float64 `json:"max_ms"`
}

// shareAck reads n records of topic (already produced) with one share
// consumer of a new group, accepting each poll's records and flushing the
// acceptance before the next poll; the latency is the flush's, from the
// call until the broker's answer: ShareAcknowledge with the share
// partition's state persisted.
func shareAck(ctx context.Context, bootstrap, topic, group string, n, maxRecords int) (shareAckLatency, error) {
	admin, err := newClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return shareAckLatency{}, err
	}
	defer admin.Close()
	if err := setShareEarliest(ctx, admin, group); err != nil {
		return shareAckLatency{}, err
	}
	var mu sync.Mutex
	var ackErr error
	cl, err := newClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(topic), kgo.ShareGroup(group), kgo.ShareMaxRecords(int32(maxRecords)),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			mu.Lock()
			defer mu.Unlock()
			if err := rs.Error(); err != nil && ackErr == nil {
				ackErr = err
			}
		}))
	if err != nil {
		return shareAckLatency{}, err
	}
	defer cl.Close()
	var lat []float64
	got := 0
	var start time.Time
	for got < n {
		fs := cl.PollRecords(ctx, maxRecords)
		if err := ctx.Err(); err != nil {
			return shareAckLatency{}, fmt.Errorf("consumed %d of %d: %w", got, n, err)
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if start.IsZero() {
			start = time.Now() // the clock starts with the first records, after the join
		}
		for _, r := range recs {
			r.Ack(kgo.AckAccept)
		}
		got += len(recs)
		t := time.Now()
		if err := cl.FlushAcks(ctx); err != nil {
			return shareAckLatency{}, fmt.Errorf("flushing acknowledgements: %w", err)
		}
		lat = append(lat, float64(time.Since(t))/1e6)
		mu.Lock()
		err := ackErr
		mu.Unlock()
		if err != nil {
			return shareAckLatency{}, fmt.Errorf("acknowledgement refused: %w", err)
		}
	}
	d := time.Since(start)
	sort.Float64s(lat)
	return shareAckLatency{Records: got, Acks: len(lat), RecordsPerSec: float64(got) / d.Seconds(),
		P50Ms: quantile(lat, 0.50), P99Ms: quantile(lat, 0.99), MaxMs: lat[len(lat)-1]}, nil
}

type lockExpiry struct {
	Samples int       `json:"samples"`
	LockMs  float64   `json:"lock_ms"`
	DelayMs []float64 `json:"delay_ms"` // per sample, beyond the lock duration
	P50Ms   float64   `json:"p50_ms"`
	MaxMs   float64   `json:"max_ms"`
}

// shareLockExpiry measures, samples times, how long after its lock
// expires a record reaches another member: two members of a new share
// group on a new one-partition topic, ten records produced in one batch;
// the member handed them first (delivery count 1) holds them and stops
// polling, and the clock runs from that poll's return until the other
// member is handed one of them again (delivery count 2). The delay is
// that time less lock (the brokers' group.share.record.lock.duration.ms).
func shareLockExpiry(ctx context.Context, bootstrap, prefix string, samples int, lock time.Duration) (lockExpiry, error) {
	admin, err := newClient(kgo.SeedBrokers(bootstrap), kgo.ProducerLinger(0))
	if err != nil {
		return lockExpiry{}, err
	}
	defer admin.Close()
	res := lockExpiry{Samples: samples, LockMs: float64(lock) / 1e6}
	for i := range samples {
		topic, group := fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("%s-group-%d", prefix, i)
		if err := createTopic(ctx, admin, topic, 1); err != nil {
			return res, err
		}
		if err := setShareEarliest(ctx, admin, group); err != nil {
			return res, err
		}
		d, err := lockExpirySample(ctx, admin, bootstrap, topic, group)
		if err != nil {
			return res, fmt.Errorf("sample %d: %w", i+1, err)
		}
		res.DelayMs = append(res.DelayMs, float64(d-lock)/1e6)
	}
	sorted := append([]float64(nil), res.DelayMs...)
	sort.Float64s(sorted)
	res.P50Ms, res.MaxMs = quantile(sorted, 0.5), sorted[len(sorted)-1]
	return res, nil
}

func lockExpirySample(ctx context.Context, producer *kgo.Client, bootstrap, topic, group string) (time.Duration, error) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var held time.Time
	done := make(chan time.Duration, 1)
	var wg sync.WaitGroup
	var errs [2]error
	for m := range 2 {
		cl, err := newClient(kgo.SeedBrokers(bootstrap), kgo.ClientID(fmt.Sprintf("member-%d", m)), kgo.ConsumeTopics(topic),
			kgo.ShareGroup(group), kgo.ShareMaxRecords(10))
		if err != nil {
			return 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for sctx.Err() == nil {
				recs := cl.PollRecords(sctx, 10).Records()
				now := time.Now()
				for _, r := range recs {
					mu.Lock()
					first := held.IsZero()
					switch {
					case r.DeliveryCount() == 1 && first:
						held = now
					case r.DeliveryCount() >= 2 && !first:
						select {
						case done <- now.Sub(held):
						default:
						}
						mu.Unlock()
						<-sctx.Done()
						return
					}
					mu.Unlock()
				}
				mu.Lock()
				holder := !held.IsZero() && len(recs) > 0 && recs[0].DeliveryCount() == 1
				mu.Unlock()
				if holder {
					// Holds its records unacknowledged until the end
					// (polling again would accept them).
					<-sctx.Done()
					return
				}
			}
			if ctx.Err() != nil {
				errs[m] = ctx.Err()
			}
		}()
	}
	// Both members poll before the records exist.
	time.Sleep(3 * time.Second)
	rs := make([]*kgo.Record, 10)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("record-%d", i))}
	}
	if err := producer.ProduceSync(sctx, rs...).FirstErr(); err != nil {
		cancel()
		wg.Wait()
		return 0, fmt.Errorf("producing: %w", err)
	}
	var d time.Duration
	select {
	case d = <-done:
	case <-sctx.Done():
	}
	cancel()
	wg.Wait()
	if d == 0 {
		return 0, errors.Join(errors.New("no record came back to another member within 2 minutes"), errs[0], errs[1])
	}
	return d, nil
}
