package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceLatency produces the payloads at a fixed rate for dur with
// acks=all and linger 0 (the end-to-end mode's producer), and measures each
// record from its Produce call to its acknowledgement: the produce path
// alone, without a consumer, which is what the authorizer sits on. Records
// go out on schedule whatever the acknowledgements do (open loop), so a
// slow broker shows as latency, not as a lower rate.
func produceLatency(ctx context.Context, bootstrap, topic string, partitions, rate int, dur time.Duration, payloadFile string, create bool) (latency, error) {
	if rate < 1 || dur <= 0 {
		return latency{}, fmt.Errorf("rate %d and duration %s must be positive", rate, dur)
	}
	payloads, err := readPayloads(payloadFile)
	if err != nil {
		return latency{}, err
	}
	cl, err := newClient(append(producerOpts(bootstrap, "all"), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))...)
	if err != nil {
		return latency{}, err
	}
	defer cl.Close()
	if create {
		if err := createTopic(ctx, cl, topic, partitions); err != nil {
			return latency{}, err
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: payloads[0]}).FirstErr(); err != nil {
		return latency{}, fmt.Errorf("warm-up produce: %w", err)
	}
	total := max(1, int(dur.Seconds()*float64(rate)))
	acks := newAckLatencies(total)
	interval := time.Second / time.Duration(rate)
	began := time.Now()
	next := began
	for i := 0; i < total; i++ {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		sent := time.Now()
		cl.Produce(ctx, &kgo.Record{Value: payloads[i%len(payloads)]}, func(_ *kgo.Record, err error) {
			acks.add(time.Since(sent), err)
		})
	}
	sent := time.Since(began)
	if err := cl.Flush(ctx); err != nil {
		return latency{}, fmt.Errorf("flushing: %w", err)
	}
	res, err := acks.result(rate)
	res.SentSeconds = sent.Seconds()
	return res, err
}

// ackLatencies collects acknowledgement latencies from the client's
// callbacks, which run on franz-go's goroutines; mu guards the rest.
type ackLatencies struct {
	mu     sync.Mutex
	ms     []float64
	failed int
	first  error
}

func newAckLatencies(n int) *ackLatencies { return &ackLatencies{ms: make([]float64, 0, n)} }

func (a *ackLatencies) add(d time.Duration, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.failed++
		if a.first == nil {
			a.first = err
		}
		return
	}
	a.ms = append(a.ms, float64(d)/float64(time.Millisecond))
}

// result summarises the latencies; any failed record fails the run, since
// the quantiles would leave it out.
func (a *ackLatencies) result(rate int) (latency, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failed > 0 {
		return latency{}, fmt.Errorf("%d of %d records failed (first: %w)", a.failed, a.failed+len(a.ms), a.first)
	}
	if len(a.ms) == 0 {
		return latency{}, fmt.Errorf("no record acknowledged")
	}
	sorted := append([]float64(nil), a.ms...)
	sort.Float64s(sorted)
	return latencyOf(sorted, rate), nil
}
