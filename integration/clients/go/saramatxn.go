package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// txnReport is what a transactions check prints; the harness checks it
// (integration/scenarios_txn.go).
type txnReport struct {
	Client          string         `json:"client"`
	Input           int            `json:"input"`
	Acked           map[string]int `json:"acked"`
	GroupOffset     int64          `json:"group_offset"`
	ReadCommitted   []string       `json:"read_committed"`
	ReadUncommitted []string       `json:"read_uncommitted"`
}

const txnPartitions = 3

// checkSaramaTxn is consume-transform-produce with sarama: a consumer group
// member reads count input records from TOPIC-in; inside its session a
// transactional producer copies them to TOPIC-out with the member's offsets
// (AddOffsetsToTxnWithGroupMetadata, so the broker can fence a stale
// generation) and commits, then writes count/2 records and an offset of 1
// and aborts, then writes count/2 more and commits. Consumers with
// IsolationLevel ReadCommitted and ReadUncommitted read the output back.
func checkSaramaTxn(ctx context.Context, bootstrap, topic, group string, count int) (txnReport, error) {
	rep := txnReport{Client: "sarama " + sarama.MaxVersion.String(), Acked: map[string]int{}}
	inTopic, outTopic := topic+"-in", topic+"-out"
	cfg := saramaConfig()
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	admin, err := sarama.NewClusterAdmin(seeds(bootstrap), cfg)
	if err != nil {
		return rep, fmt.Errorf("cluster admin: %w", err)
	}
	defer admin.Close()
	for _, t := range []struct {
		name       string
		partitions int32
	}{{inTopic, 1}, {outTopic, txnPartitions}} {
		if err := admin.CreateTopic(t.name, &sarama.TopicDetail{NumPartitions: t.partitions, ReplicationFactor: 1}, false); err != nil {
			return rep, fmt.Errorf("create topic %s: %w", t.name, err)
		}
	}

	plain, err := sarama.NewSyncProducer(seeds(bootstrap), cfg)
	if err != nil {
		return rep, fmt.Errorf("producer: %w", err)
	}
	in := make([]*sarama.ProducerMessage, count)
	for i := range in {
		in[i] = &sarama.ProducerMessage{Topic: inTopic, Partition: 0, Value: sarama.StringEncoder(fmt.Sprintf("in-%d", i))}
	}
	err = plain.SendMessages(in)
	if cerr := plain.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rep, fmt.Errorf("producing the input: %w", err)
	}

	tcfg := saramaConfig()
	tcfg.Producer.Partitioner = sarama.NewManualPartitioner
	tcfg.Producer.Transaction.ID = topic + "-txn"
	producer, err := sarama.NewSyncProducer(seeds(bootstrap), tcfg)
	if err != nil {
		return rep, fmt.Errorf("transactional producer: %w", err)
	}
	defer producer.Close()

	cg, err := sarama.NewConsumerGroup(seeds(bootstrap), group, cfg)
	if err != nil {
		return rep, fmt.Errorf("consumer group: %w", err)
	}
	h := &saramaTxnHandler{want: count, group: group, out: outTopic, producer: producer, acked: rep.Acked, done: make(chan struct{})}
	if err := consumeGroup(ctx, cg, inTopic, h, h.done, 90*time.Second); err != nil {
		return rep, err
	}
	rep.Input = h.read
	if h.err != nil {
		return rep, h.err
	}
	if h.read != count {
		return rep, fmt.Errorf("the group consumer read %d of %d input records", h.read, count)
	}

	offs, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{inTopic: {0}})
	if err != nil {
		return rep, fmt.Errorf("fetch offsets: %w", err)
	}
	b := offs.GetBlock(inTopic, 0)
	if b == nil || b.Err != sarama.ErrNoError {
		return rep, fmt.Errorf("fetch offsets: block %+v", b)
	}
	rep.GroupOffset = b.Offset

	extra := count / 2
	if rep.ReadCommitted, err = saramaReadAll(ctx, bootstrap, outTopic, sarama.ReadCommitted, count+extra); err != nil {
		return rep, err
	}
	if rep.ReadUncommitted, err = saramaReadAll(ctx, bootstrap, outTopic, sarama.ReadUncommitted, count+2*extra); err != nil {
		return rep, err
	}
	return rep, nil
}

// saramaTxnHandler runs the three transactions from inside ConsumeClaim
// once it has read want records, so that the offsets carry the live
// session's generation and member id. There is one input partition, hence
// one ConsumeClaim; read, err and acked are written there and read by
// checkSaramaTxn only after done is closed.
type saramaTxnHandler struct {
	want     int
	group    string
	out      string
	producer sarama.SyncProducer
	done     chan struct{}
	once     sync.Once

	read  int
	acked map[string]int
	err   error
}

func (h *saramaTxnHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaTxnHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaTxnHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	var values []string
	for m := range c.Messages() {
		values = append(values, string(m.Value))
		if len(values) < h.want {
			continue
		}
		h.once.Do(func() {
			h.read = len(values)
			h.err = h.transactions(s, m, values)
			close(h.done)
		})
		return nil
	}
	return nil
}

func (h *saramaTxnHandler) transactions(s sarama.ConsumerGroupSession, last *sarama.ConsumerMessage, inputs []string) error {
	meta := sarama.NewConsumerGroupMetadataFromSession(s, h.group, nil)
	offsets := func(offset int64) map[string][]*sarama.PartitionOffsetMetadata {
		return map[string][]*sarama.PartitionOffsetMetadata{last.Topic: {{Partition: last.Partition, Offset: offset}}}
	}
	extra := len(inputs) / 2
	numbered := func(prefix string, n int) []string {
		v := make([]string, n)
		for i := range v {
			v[i] = fmt.Sprintf("%s-%d", prefix, i)
		}
		return v
	}
	copies := make([]string, len(inputs))
	for i, v := range inputs {
		copies[i] = "copy-" + v
	}
	steps := []struct {
		what   string
		values []string
		offset int64 // sent to the transaction when > 0
		commit bool
	}{
		{"the copy", copies, last.Offset + 1, true},
		{"the aborted transaction", numbered("aborted", extra), 1, false},
		{"the second commit", numbered("commit2", extra), 0, true},
	}
	for _, st := range steps {
		if err := h.producer.BeginTxn(); err != nil {
			return fmt.Errorf("%s: BeginTxn: %w", st.what, err)
		}
		msgs := make([]*sarama.ProducerMessage, len(st.values))
		for i, v := range st.values {
			msgs[i] = &sarama.ProducerMessage{Topic: h.out, Partition: int32(i % txnPartitions), Value: sarama.StringEncoder(v)}
		}
		if err := h.producer.SendMessages(msgs); err != nil {
			return fmt.Errorf("%s: produce: %w", st.what, err)
		}
		h.acked[st.values[0][:strings.IndexByte(st.values[0], '-')]] += len(msgs)
		if st.offset > 0 {
			if err := h.producer.AddOffsetsToTxnWithGroupMetadata(offsets(st.offset), meta); err != nil {
				return fmt.Errorf("%s: AddOffsetsToTxn: %w", st.what, err)
			}
		}
		end, name := h.producer.CommitTxn, "CommitTxn"
		if !st.commit {
			end, name = h.producer.AbortTxn, "AbortTxn"
		}
		if err := end(); err != nil {
			return fmt.Errorf("%s: %s: %w", st.what, name, err)
		}
	}
	return nil
}

// saramaReadAll reads every partition of topic from the oldest offset until
// want values arrived (or 60 s passed), then one more second for anything
// beyond them.
func saramaReadAll(ctx context.Context, bootstrap, topic string, isolation sarama.IsolationLevel, want int) ([]string, error) {
	cfg := saramaConfig()
	cfg.Consumer.IsolationLevel = isolation
	consumer, err := sarama.NewConsumer(seeds(bootstrap), cfg)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	defer consumer.Close()
	// Stopping order at return: cancel, then wait for the partition
	// goroutines, then close the consumer.
	var wg sync.WaitGroup
	defer wg.Wait()
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	merged := make(chan *sarama.ConsumerMessage)
	for p := int32(0); p < txnPartitions; p++ {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("consume partition %d: %w", p, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pc.AsyncClose()
			errs := pc.Errors()
			for {
				select {
				case m, ok := <-pc.Messages():
					if !ok {
						return
					}
					select {
					case merged <- m:
					case <-rctx.Done():
						return
					}
				case err, ok := <-errs:
					if !ok {
						errs = nil
						continue
					}
					fmt.Fprintf(os.Stderr, "%s/%d: %v\n", topic, p, err)
				case <-rctx.Done():
					return
				}
			}
		}()
	}
	var seen []string
	var drain <-chan time.Time
	for {
		select {
		case m := <-merged:
			seen = append(seen, string(m.Value))
			if len(seen) == want {
				drain = time.After(time.Second)
			}
		case <-drain:
			return seen, nil
		case <-rctx.Done():
			return seen, nil
		}
	}
}

// openSaramaTxn leaves a transaction open: it begins one with
// transactional id TXNID (the GROUP argument), writes count records to
// partition 0 of TOPIC, and exits without ending it, as a producer that
// died would. The transaction timeout is the broker's maximum (15
// minutes), so the coordinator does not abort it while kafka-transactions
// looks at it.
func openSaramaTxn(bootstrap, topic, txnID string, count int) (txnReport, error) {
	rep := txnReport{Client: "sarama " + sarama.MaxVersion.String(), Acked: map[string]int{}}
	cfg := saramaConfig()
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Transaction.ID = txnID
	cfg.Producer.Transaction.Timeout = 15 * time.Minute
	producer, err := sarama.NewSyncProducer(seeds(bootstrap), cfg)
	if err != nil {
		return rep, fmt.Errorf("transactional producer: %w", err)
	}
	if err := producer.BeginTxn(); err != nil {
		return rep, fmt.Errorf("BeginTxn: %w", err)
	}
	msgs := make([]*sarama.ProducerMessage, count)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(fmt.Sprintf("open-%d", i))}
	}
	if err := producer.SendMessages(msgs); err != nil {
		return rep, fmt.Errorf("producing in the open transaction: %w", err)
	}
	rep.Acked["open"] = count
	// No EndTxn and no Close (which would abort): the process exits with
	// the transaction open.
	return rep, nil
}
