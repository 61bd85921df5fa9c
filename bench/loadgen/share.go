package main

// Share-group (KIP-932) modes: acknowledgement latency of one share
// consumer, and how long records held by a member that stopped polling
// take to reach another member once their acquisition lock expires.

import (
	"context"
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
// expires a record reaches another member. Each sample has a new
// one-partition topic holding ten records (one batch) and a new group: a
// member that speaks the protocol directly joins, acquires the ten with
// one ShareFetch and then stops, as a consumer that hangs while holding
// records (it neither fetches nor acknowledges again); a franz-go member
// then joins and polls. The clock runs from the holder's ShareFetch
// answer until the franz-go member is handed one of the records (delivery
// count 2); the delay is that time less lock (the brokers'
// group.share.record.lock.duration.ms, long enough for the second member
// to join and wait first).
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
		rs := make([]*kgo.Record, 10)
		for i := range rs {
			rs[i] = &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("record-%d", i))}
		}
		if err := admin.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return res, fmt.Errorf("producing: %w", err)
		}
		d, err := lockExpirySample(ctx, admin, bootstrap, topic, group, lock)
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

func lockExpirySample(ctx context.Context, admin *kgo.Client, bootstrap, topic, group string, lock time.Duration) (time.Duration, error) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	held, err := holdRecords(sctx, admin, topic, group)
	if err != nil {
		return 0, fmt.Errorf("the holding member: %w", err)
	}
	cl, err := newClient(kgo.SeedBrokers(bootstrap), kgo.ClientID("waiting-member"), kgo.ConsumeTopics(topic),
		kgo.ShareGroup(group), kgo.ShareMaxRecords(10))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	for sctx.Err() == nil {
		for _, r := range cl.PollRecords(sctx, 10).Records() {
			if r.DeliveryCount() >= 2 {
				d := time.Since(held)
				if d < lock {
					return 0, fmt.Errorf("a held record came back after %s, before its %s lock expired", d, lock)
				}
				return d, nil
			}
		}
	}
	return 0, fmt.Errorf("no held record came back within 2 minutes: %w", sctx.Err())
}

// holdRecords joins group as a member of its own (ShareGroupHeartbeat)
// and acquires records of topic's partition 0 with ShareFetch, and
// returns when the answer came; the member then does nothing more.
func holdRecords(ctx context.Context, cl *kgo.Client, topic, group string) (time.Time, error) {
	member := fmt.Sprintf("holder-%d", time.Now().UnixNano())
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = group, member, []string{topic}
	var topicID [16]byte
	for {
		resp, err := hb.RequestWith(ctx, cl)
		if err != nil {
			return time.Time{}, fmt.Errorf("ShareGroupHeartbeat: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err == nil {
			hb.MemberEpoch = resp.MemberEpoch
			if resp.Assignment != nil && len(resp.Assignment.TopicPartitions) > 0 {
				topicID = resp.Assignment.TopicPartitions[0].TopicID
				break
			}
		} else if !kerr.IsRetriable(err) {
			return time.Time{}, fmt.Errorf("ShareGroupHeartbeat: %w", err)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil || len(md.Brokers) == 0 {
		return time.Time{}, fmt.Errorf("metadata: %v", err)
	}
	var leader int32 = -1
	for _, t := range md.Topics {
		if t.TopicID == topicID && len(t.Partitions) > 0 {
			leader = t.Partitions[0].Leader
		}
	}
	fetch := kmsg.NewPtrShareFetchRequest()
	fetch.GroupID, fetch.MemberID = kmsg.StringPtr(group), kmsg.StringPtr(member)
	fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes, fetch.MaxRecords, fetch.BatchSize = 500, 1, 1<<20, 10, 10
	ft := kmsg.NewShareFetchRequestTopic()
	ft.TopicID = topicID
	ft.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}
	fetch.Topics = []kmsg.ShareFetchRequestTopic{ft}
	for {
		resp, err := fetch.RequestWith(ctx, cl.Broker(int(leader)))
		if err != nil {
			return time.Time{}, fmt.Errorf("ShareFetch: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return time.Time{}, fmt.Errorf("ShareFetch: %w", err)
		}
		fetch.ShareSessionEpoch++
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return time.Time{}, fmt.Errorf("ShareFetch partition %d: %w", p.Partition, err)
				}
				if len(p.AcquiredRecords) > 0 {
					return time.Now(), nil
				}
			}
		}
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
	}
}
