package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	// The newest protocol version this sarama knows: sarama refuses brokers
	// whose ApiVersions lag it, which is exactly what we want to catch.
	cfg.Version = sarama.MaxVersion
	cfg.ClientID = "gregor-compat-sarama"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Compression = sarama.CompressionLZ4
	cfg.Net.MaxOpenRequests = 1
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Return.Errors = true
	return cfg
}

func checkSarama(ctx context.Context, bootstrap, topic, group string, count int) (report, error) {
	rep := report{Version: sarama.MaxVersion.String()}
	cfg := saramaConfig()
	if err := saramaSASL(cfg); err != nil {
		return rep, err
	}
	admin, err := sarama.NewClusterAdmin(seeds(bootstrap), cfg)
	if err != nil {
		return rep, fmt.Errorf("cluster admin: %w", err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		return rep, fmt.Errorf("create topic: %w", err)
	}

	producer, err := sarama.NewSyncProducer(seeds(bootstrap), cfg)
	if err != nil {
		return rep, fmt.Errorf("producer: %w", err)
	}
	want := values(count)
	msgs := make([]*sarama.ProducerMessage, count)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i%10)), Value: sarama.StringEncoder(want[i])}
	}
	if err := producer.SendMessages(msgs); err != nil {
		producer.Close()
		return rep, fmt.Errorf("produce: %w", err)
	}
	rep.Produced = count
	if err := producer.Close(); err != nil {
		return rep, fmt.Errorf("closing producer: %w", err)
	}

	cg, err := sarama.NewConsumerGroup(seeds(bootstrap), group, cfg)
	if err != nil {
		return rep, fmt.Errorf("consumer group: %w", err)
	}
	h := &saramaHandler{want: count, done: make(chan struct{})}
	if err := consumeGroup(ctx, cg, topic, h, h.done, 60*time.Second); err != nil {
		return rep, err
	}
	got := h.values()
	rep.Consumed = len(got)
	if err := sameValues(got, want); err != nil {
		return rep, err
	}

	groups, err := admin.ListConsumerGroups()
	if err != nil {
		return rep, fmt.Errorf("list groups: %w", err)
	}
	_, rep.GroupListed = groups[group]
	offs, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2}})
	if err != nil {
		return rep, fmt.Errorf("fetch offsets: %w", err)
	}
	for _, b := range offs.Blocks[topic] {
		if b.Err != sarama.ErrNoError {
			return rep, fmt.Errorf("fetch offsets: %w", b.Err)
		}
		if b.Offset > 0 {
			rep.Committed += b.Offset
		}
	}
	desc, err := admin.DescribeConsumerGroups([]string{group})
	if err != nil {
		return rep, fmt.Errorf("describe group: %w", err)
	}
	if len(desc) == 1 {
		rep.GroupState = desc[0].State
	}
	return rep, nil
}

// saramaHandler collects values and commits synchronously once it has
// seen all of them. mu guards got; Consume calls ConsumeClaim from one
// goroutine per partition.
type saramaHandler struct {
	want int
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	got  []string
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		h.mu.Lock()
		h.got = append(h.got, string(m.Value))
		n := len(h.got)
		h.mu.Unlock()
		if n >= h.want {
			s.Commit()
			h.once.Do(func() { close(h.done) })
		}
	}
	s.Commit()
	return nil
}

func (h *saramaHandler) values() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

// consumeGroup runs cg's sessions on topic with h until done is closed or
// timeout passes, then closes cg. It returns the first consumer group error
// or consume failure.
func consumeGroup(ctx context.Context, cg sarama.ConsumerGroup, topic string, h sarama.ConsumerGroupHandler, done <-chan struct{}, timeout time.Duration) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	consumeErr := make(chan error, 1)
	go func() {
		for cctx.Err() == nil {
			if err := cg.Consume(cctx, []string{topic}, h); err != nil {
				consumeErr <- err
				return
			}
		}
		consumeErr <- nil
	}()
	select {
	case <-done:
	case <-cctx.Done():
	case err := <-cg.Errors():
		cancel()
		cg.Close()
		return fmt.Errorf("consumer group error: %w", err)
	}
	cancel()
	if err := <-consumeErr; err != nil && !errors.Is(err, context.Canceled) {
		cg.Close()
		return fmt.Errorf("consume: %w", err)
	}
	if err := cg.Close(); err != nil {
		return fmt.Errorf("closing consumer group: %w", err)
	}
	return nil
}
