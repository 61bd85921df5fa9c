package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// compactionResult is what the compaction mode measures: how fast the
// cleaner cleans a dirty log, and the produce latency of another topic
// before and while it does.
type compactionResult struct {
	DirtyBytes   int64   `json:"dirty_bytes"`
	CleanedBytes int64   `json:"cleaned_bytes"`
	Seconds      float64 `json:"seconds"`
	MBPerSec     float64 `json:"mb_per_sec"`
	Produced     int     `json:"produced"`
	IdleP99Ms    float64 `json:"idle_p99_ms"`
	DuringP50Ms  float64 `json:"during_p50_ms"`
	DuringP99Ms  float64 `json:"during_p99_ms"`
	DuringP999Ms float64 `json:"during_p999_ms"`
	DuringCount  int     `json:"during_count"`
}

// compaction writes records of size bytes over keys keys (uncompressed,
// incompressible values) into a delete-policy topic of 1 MiB segments,
// then sets cleanup.policy=compact and times the cleaner until the log is
// down to about its live keys, polling DescribeLogDirs every 50 ms. The
// cleaner's backoff is set to 100 ms as a cluster default for the run (it
// is 15 s by default, which would be measured instead). Meanwhile a
// producer sends 1 KiB records, acks=all, at rate records/s to a second
// topic; its latencies (send to acknowledgement) are reported for the 3 s
// before the switch and for the cleaning.
func compaction(ctx context.Context, bootstrap, topic string, records, keys, size, rate int) (compactionResult, error) {
	var res compactionResult
	admin, err := newClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return res, err
	}
	defer admin.Close()
	if err := alterBrokerDefault(ctx, admin, "log.cleaner.backoff.ms", kmsg.StringPtr("100")); err != nil {
		return res, err
	}
	defer func() { _ = alterBrokerDefault(context.WithoutCancel(ctx), admin, "log.cleaner.backoff.ms", nil) }()
	if err := createTopicWith(ctx, admin, topic, 1, map[string]string{"segment.bytes": "1048576", "cleanup.policy": "delete"}); err != nil {
		return res, err
	}
	prod, err := newClient(kgo.SeedBrokers(bootstrap), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return res, err
	}
	defer prod.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	var failed error
	var mu sync.Mutex
	for i := range records {
		v := make([]byte, size)
		for j := 0; j < size; j += 8 {
			u := rng.Uint64()
			for k := 0; k < 8 && j+k < size; k++ {
				v[j+k] = byte(u >> (8 * k))
			}
		}
		prod.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "key-%06d", i%keys), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failed = err
				mu.Unlock()
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		return res, err
	}
	if failed != nil {
		return res, fmt.Errorf("filling %s: %w", topic, failed)
	}
	if res.DirtyBytes, err = logSize(ctx, admin, topic); err != nil {
		return res, err
	}

	lat := newLatencyProducer(bootstrap, topic+"-latency", rate)
	if err := lat.start(ctx, admin); err != nil {
		return res, err
	}
	defer lat.stop()
	time.Sleep(3 * time.Second)
	idle := lat.take()
	if len(idle) == 0 {
		return res, errors.New("the latency producer got no acknowledgement in 3 s")
	}
	res.IdleP99Ms = quantile(idle, 0.99)

	// Live keys plus the active segment, with room for record overhead.
	target := int64(keys)*int64(size+64)*3/2 + 2<<20
	started := time.Now()
	if err := alterTopic(ctx, admin, topic, "cleanup.policy", "compact"); err != nil {
		return res, err
	}
	for {
		s, err := logSize(ctx, admin, topic)
		if err != nil {
			return res, err
		}
		if s <= target {
			res.CleanedBytes = s
			break
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("%s still %d bytes (from %d) after %s: %w", topic, s, res.DirtyBytes, time.Since(started).Round(time.Millisecond), ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
	res.Seconds = time.Since(started).Seconds()
	res.MBPerSec = float64(res.DirtyBytes) / 1e6 / res.Seconds
	during := lat.take()
	if err := lat.err(); err != nil {
		return res, err
	}
	res.Produced = records
	res.DuringCount = len(during)
	if len(during) > 0 {
		res.DuringP50Ms, res.DuringP99Ms, res.DuringP999Ms = quantile(during, 0.5), quantile(during, 0.99), quantile(during, 0.999)
	}
	return res, nil
}

func quantile(sorted []float64, p float64) float64 {
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// latencyProducer sends records at a fixed rate and keeps the latency of
// each acknowledgement.
type latencyProducer struct {
	bootstrap, topic string
	rate             int

	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	lat     []float64
	failure error
}

func newLatencyProducer(bootstrap, topic string, rate int) *latencyProducer {
	return &latencyProducer{bootstrap: bootstrap, topic: topic, rate: rate, done: make(chan struct{})}
}

func (p *latencyProducer) start(ctx context.Context, admin *kgo.Client) error {
	if err := createTopicWith(ctx, admin, p.topic, 1, nil); err != nil {
		return err
	}
	cl, err := newClient(append(producerOpts(p.bootstrap, "all"), kgo.DefaultProduceTopic(p.topic), kgo.ProducerLinger(0))...)
	if err != nil {
		return err
	}
	p.cl = cl
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm-up")}).FirstErr(); err != nil {
		return fmt.Errorf("warm-up produce: %w", err)
	}
	ctx, p.cancel = context.WithCancel(ctx)
	value := make([]byte, 1024)
	go func() {
		defer close(p.done)
		interval := time.Second / time.Duration(p.rate)
		next := time.Now()
		for ctx.Err() == nil {
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
			next = next.Add(interval)
			sent := time.Now()
			cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				p.mu.Lock()
				defer p.mu.Unlock()
				if err != nil {
					if ctx.Err() == nil && p.failure == nil {
						p.failure = err
					}
					return
				}
				p.lat = append(p.lat, float64(time.Since(sent).Microseconds())/1000)
			})
		}
	}()
	return nil
}

// take returns the latencies since the last take, sorted.
func (p *latencyProducer) take() []float64 {
	p.mu.Lock()
	out := p.lat
	p.lat = nil
	p.mu.Unlock()
	sort.Float64s(out)
	return out
}

func (p *latencyProducer) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failure
}

func (p *latencyProducer) stop() {
	if p.cancel != nil {
		p.cancel()
		<-p.done
	}
	if p.cl != nil {
		p.cl.Close()
	}
}

func createTopicWith(ctx context.Context, cl *kgo.Client, topic string, partitions int, configs map[string]string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, int32(partitions), 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		t.Configs = append(t.Configs, c)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	return nil
}

func alterTopic(ctx context.Context, cl *kgo.Client, topic, key, value string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = key, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	return alterConfigs(ctx, cl, req)
}

// alterBrokerDefault sets (value nil: deletes) a cluster-wide broker
// default.
func alterBrokerDefault(ctx context.Context, cl *kgo.Client, key string, value *string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, ""
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = key, kmsg.IncrementalAlterConfigOpSet, value
	if value == nil {
		c.Op = kmsg.IncrementalAlterConfigOpDelete
	}
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	return alterConfigs(ctx, cl, req)
}

func alterConfigs(ctx context.Context, cl *kgo.Client, req *kmsg.IncrementalAlterConfigsRequest) error {
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			return fmt.Errorf("altering %s: %w %s", r.ResourceName, err, msg)
		}
	}
	return nil
}

// logSize is the bytes DescribeLogDirs reports for the topic.
func logSize(ctx context.Context, cl *kgo.Client, topic string) (int64, error) {
	req := kmsg.NewPtrDescribeLogDirsRequest()
	t := kmsg.NewDescribeLogDirsRequestTopic()
	t.Topic, t.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	var size int64
	for _, d := range resp.Dirs {
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				size += p.Size
			}
		}
	}
	return size, nil
}
