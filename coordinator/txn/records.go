package txn

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// __transaction_state records, in Kafka's schemas (TransactionLogKey and
// TransactionLogValue): the key is version 0 with the transactional id;
// the value is version 0 while transaction.version is 0 (Kafka writes the
// flexible version 1 only from transaction.version 1 on, so that older
// brokers can still read the log) and version 1 from there. A null value
// is the tombstone of an expired transactional id.

const (
	keyVersion = 0
	// valueVersionTV1 is the flexible value version Kafka writes from
	// transaction.version 1.
	valueVersionTV1 = 1
)

func encodeKey(id string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version, k.TransactionalID = keyVersion, id
	return k.AppendTo(nil)
}

// encodeValue is TransactionLog.valueToBytes for the given finalized
// transaction.version.
func encodeValue(s *txnState, transactionVersion int16) []byte {
	v := kmsg.NewTxnMetadataValue()
	if transactionVersion >= 1 {
		v.Version = valueVersionTV1
	}
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = s.producerID, s.epoch, s.timeoutMs
	v.State = kmsg.TransactionState(s.state)
	v.LastUpdateTimestamp, v.StartTimestamp = s.updateMs, s.startMs
	v.PreviousProducerID, v.NextProducerID, v.ClientTransactionVersion = s.prevProducerID, s.nextProducerID, s.clientTV
	if s.state != StateEmpty {
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, tp := range s.partitions {
			if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewTxnMetadataValueTopic()
				t.Topic = tp.Topic
				v.Topics = append(v.Topics, t)
			}
			t := &v.Topics[len(v.Topics)-1]
			t.Partitions = append(t.Partitions, tp.Partition)
		}
	}
	return v.AppendTo(nil)
}

// decodeKey returns the transactional id of a record key; ok is false for
// a key of a version this coordinator does not know (Kafka skips those as
// UnknownKey).
func decodeKey(key []byte) (id string, ok bool, err error) {
	if len(key) < 2 {
		return "", false, fmt.Errorf("transaction log key of %d bytes", len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v != keyVersion {
		return "", false, nil
	}
	k := kmsg.NewTxnMetadataKey()
	if err := k.ReadFrom(key); err != nil {
		return "", false, fmt.Errorf("decoding transaction log key: %w", err)
	}
	return k.TransactionalID, true, nil
}

func decodeValue(value []byte) (txnState, error) {
	if len(value) < 2 {
		return txnState{}, fmt.Errorf("transaction log value of %d bytes", len(value))
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 || v > valueVersionTV1 {
		// An older node must refuse what it cannot read rather than
		// guess (DESIGN.md §4's rule, applied to coordinator records).
		return txnState{}, fmt.Errorf("transaction log value version %d is newer than this broker reads", v)
	}
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(value); err != nil {
		return txnState{}, fmt.Errorf("decoding transaction log value: %w", err)
	}
	s := txnState{
		producerID: v.ProducerID, prevProducerID: v.PreviousProducerID, nextProducerID: v.NextProducerID,
		epoch: v.ProducerEpoch, lastEpoch: noProducerEpoch, timeoutMs: v.TimeoutMillis, state: State(v.State),
		startMs: v.StartTimestamp, updateMs: v.LastUpdateTimestamp, clientTV: v.ClientTransactionVersion,
	}
	if s.state < StateEmpty || s.state > StatePrepareEpochFence {
		return txnState{}, fmt.Errorf("transaction log value with unknown state %d", s.state)
	}
	if s.state != StateEmpty {
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				s.partitions = append(s.partitions, TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		slices.SortFunc(s.partitions, comparePartitions)
		s.partitions = slices.Compact(s.partitions)
	}
	return s, nil
}

// recordBatch is one uncompressed batch holding one record (Kafka writes
// each transition as its own append).
func recordBatch(key, value []byte, nowMs int64) ([]byte, error) {
	b := protocol.NewBatchBuilder(protocol.CodecNone)
	b.Add(key, value, nil, nowMs)
	return b.Build()
}

// replayBatch calls fn for each record of a data batch of the log; control
// batches (there are none in __transaction_state) are skipped.
func replayBatch(batch []byte, scratch *[]byte, fn func(key, value []byte) error) error {
	h, err := protocol.ParseBatchHeader(batch)
	if err != nil {
		return err
	}
	if h.IsControl() {
		return nil
	}
	if err := protocol.ForEachRecord(batch, scratch, func(r *protocol.Record) error { return fn(r.Key, r.Value) }); err != nil {
		return fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
	}
	return nil
}
