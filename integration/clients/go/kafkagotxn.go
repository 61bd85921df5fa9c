package main

// segmentio/kafka-go's transactions. Its Writer cannot write
// transactional records (every batch it builds carries producer id -1), so
// what kafka-go offers of transactions is the request API: InitProducerID
// with a transactional id, AddOffsetsToTxn, TxnOffsetCommit and EndTxn,
// routed to the transaction and group coordinators by its transport. With
// them a kafka-go consumer commits its group's offsets exactly once, in a
// transaction that either commits or aborts. This check reads count input
// records, commits the group's offset count/2 in a first transaction,
// writes offset 1 in a second one that it aborts, and commits count in a
// third; after each it fetches the group's offset, which must move only on
// a commit. A second InitProducerID must then fence the first session.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// kafkaGoTxnReport is what the kafka-go transactions check prints.
type kafkaGoTxnReport struct {
	Client string `json:"client"`
	Input  int    `json:"input"`
	// Offsets are the group's committed offset after each transaction:
	// commit count/2, abort (offset 1), commit count.
	Offsets []int64 `json:"offsets"`
	// Fenced is the error the first session's EndTxn got after a second
	// InitProducerID for the same transactional id.
	Fenced string `json:"fenced"`
}

func checkKafkaGoTxn(ctx context.Context, bootstrap, topic, group string, count int) (kafkaGoTxnReport, error) {
	rep := kafkaGoTxnReport{Client: "kafka-go"}
	client := &kafka.Client{Addr: kafka.TCP(seeds(bootstrap)...), Timeout: 30 * time.Second}
	cres, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}}})
	if err != nil {
		return rep, fmt.Errorf("create topic: %w", err)
	}
	if err := cres.Errors[topic]; err != nil {
		return rep, fmt.Errorf("create topic: %w", err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(seeds(bootstrap)...), Topic: topic, RequiredAcks: kafka.RequireAll, BatchTimeout: 10 * time.Millisecond}
	msgs := make([]kafka.Message, count)
	for i, v := range values(count) {
		msgs[i] = kafka.Message{Value: []byte(v)}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		w.Close()
		return rep, fmt.Errorf("produce: %w", err)
	}
	if err := w.Close(); err != nil {
		return rep, fmt.Errorf("closing writer: %w", err)
	}

	// The input is read without a group: the group's offsets are written
	// only by the transactions.
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: seeds(bootstrap), Topic: topic, Partition: 0, MaxWait: 500 * time.Millisecond})
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for rep.Input < count {
		if _, err := r.ReadMessage(rctx); err != nil {
			r.Close()
			return rep, fmt.Errorf("read %d of %d input records: %w", rep.Input, count, err)
		}
		rep.Input++
	}
	if err := r.Close(); err != nil {
		return rep, fmt.Errorf("closing reader: %w", err)
	}

	txnID := group + "-txn"
	session, err := initProducer(ctx, client, txnID)
	if err != nil {
		return rep, err
	}
	// A commit's offsets become visible once its marker is written, which
	// the coordinator does after answering EndTxn: the offset is polled
	// for. An abort's outcome is looked at once the next transaction could
	// begin (AddOffsetsToTxn waits for the abort to complete).
	half, all := int64(count/2), int64(count)
	if err := offsetsTransaction(ctx, client, txnID, session, group, topic, half, true); err != nil {
		return rep, err
	}
	got, err := awaitGroupOffset(ctx, client, group, topic, half)
	if err != nil {
		return rep, err
	}
	rep.Offsets = append(rep.Offsets, got)
	if err := offsetsTransaction(ctx, client, txnID, session, group, topic, 1, false); err != nil {
		return rep, err
	}
	if err := addOffsets(ctx, client, txnID, session, group); err != nil {
		return rep, err
	}
	if got, err = groupOffset(ctx, client, group, topic); err != nil {
		return rep, err
	}
	rep.Offsets = append(rep.Offsets, got)
	if err := offsetsTransaction(ctx, client, txnID, session, group, topic, all, true); err != nil {
		return rep, err
	}
	if got, err = awaitGroupOffset(ctx, client, group, topic, all); err != nil {
		return rep, err
	}
	rep.Offsets = append(rep.Offsets, got)

	// A second session of the same transactional id fences the first.
	if _, err := initProducer(ctx, client, txnID); err != nil {
		return rep, err
	}
	if err := addOffsets(ctx, client, txnID, session, group); err != nil {
		rep.Fenced = errorName(err)
	} else {
		rep.Fenced = "none"
	}
	return rep, nil
}

// initProducer gets a producer id and epoch for txnID.
func initProducer(ctx context.Context, client *kafka.Client, txnID string) (*kafka.ProducerSession, error) {
	var session *kafka.ProducerSession
	err := retryTxn(ctx, "InitProducerID", func() error {
		// kafka-go sends its zero values in InitProducerId v3+; -1 says
		// "no producer yet", as every other client sends it.
		res, err := client.InitProducerID(ctx, &kafka.InitProducerIDRequest{TransactionalID: txnID, TransactionTimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1})
		if err != nil {
			return err
		}
		if res.Error != nil {
			return res.Error
		}
		session = res.Producer
		return nil
	})
	return session, err
}

// offsetsTransaction commits (or aborts) a transaction that carries the
// group's offset of the topic's partition 0.
func offsetsTransaction(ctx context.Context, client *kafka.Client, txnID string, s *kafka.ProducerSession, group, topic string, offset int64, commit bool) error {
	if err := addOffsets(ctx, client, txnID, s, group); err != nil {
		return err
	}
	// As Java's TransactionManager does, the group's coordinator is looked
	// up before the offsets go to it (the lookup also creates
	// __consumer_offsets on a fresh cluster).
	err := retryTxn(ctx, "TxnOffsetCommit", func() error {
		fc, err := client.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{Key: group, KeyType: kafka.CoordinatorKeyTypeConsumer})
		if err != nil {
			return err
		}
		if fc.Error != nil {
			return fc.Error
		}
		res, err := client.TxnOffsetCommit(ctx, &kafka.TxnOffsetCommitRequest{
			TransactionalID: txnID, GroupID: group, ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch,
			GenerationID: -1,
			Topics:       map[string][]kafka.TxnOffsetCommit{topic: {{Partition: 0, Offset: offset}}},
		})
		if err != nil {
			return err
		}
		for _, p := range res.Topics[topic] {
			if p.Error != nil {
				return p.Error
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return retryTxn(ctx, "EndTxn", func() error {
		res, err := client.EndTxn(ctx, &kafka.EndTxnRequest{TransactionalID: txnID, ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch, Committed: commit})
		if err != nil {
			return err
		}
		return res.Error
	})
}

func addOffsets(ctx context.Context, client *kafka.Client, txnID string, s *kafka.ProducerSession, group string) error {
	return retryTxn(ctx, "AddOffsetsToTxn", func() error {
		res, err := client.AddOffsetsToTxn(ctx, &kafka.AddOffsetsToTxnRequest{TransactionalID: txnID, ProducerID: s.ProducerID, ProducerEpoch: s.ProducerEpoch, GroupID: group})
		if err != nil {
			return err
		}
		return res.Error
	})
}

// awaitGroupOffset polls the group's offset of partition 0 until it is
// want, for up to 30 s, and returns the last one seen.
func awaitGroupOffset(ctx context.Context, client *kafka.Client, group, topic string, want int64) (int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := groupOffset(ctx, client, group, topic)
		if err != nil || got == want || time.Now().After(deadline) {
			return got, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// groupOffset fetches the group's committed offset of partition 0.
func groupOffset(ctx context.Context, client *kafka.Client, group, topic string) (int64, error) {
	res, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0}}})
	if err != nil {
		return 0, fmt.Errorf("OffsetFetch: %w", err)
	}
	if res.Error != nil {
		return 0, fmt.Errorf("OffsetFetch: %w", res.Error)
	}
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			return 0, fmt.Errorf("OffsetFetch of partition %d: %w", p.Partition, p.Error)
		}
		return p.CommittedOffset, nil
	}
	return 0, fmt.Errorf("OffsetFetch returned no partition of %s", topic)
}

// retryTxn retries what a transactional client retries: a coordinator that
// is loading or moved, and a previous transaction still completing
// (CONCURRENT_TRANSACTIONS), as every Kafka client does.
func retryTxn(ctx context.Context, what string, fn func() error) error {
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if !errors.Is(err, kafka.ConcurrentTransactions) && !errors.Is(err, kafka.GroupLoadInProgress) &&
			!errors.Is(err, kafka.NotCoordinatorForGroup) && !errors.Is(err, kafka.GroupCoordinatorNotAvailable) {
			return fmt.Errorf("%s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// errorName is a Kafka error's code, or the error itself when it is not one.
func errorName(err error) string {
	var ke kafka.Error
	if errors.As(err, &ke) {
		return fmt.Sprintf("%d", int(ke))
	}
	return err.Error()
}
