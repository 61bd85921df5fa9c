package share

// The records of __share_group_state, in Kafka 4.3's share-coordinator
// JSON schemas: ShareSnapshotKey (type 0) and ShareUpdateKey (type 1),
// both GroupId, TopicId, Partition (not flexible); their values flexible
// from version 0, with DeliveryCompleteCount a tagged field (tag 0,
// default -1).

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

const (
	recSnapshot int16 = 0
	recUpdate   int16 = 1
)

// Key is one share partition: a share group's state of a topic partition.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// Batch is a StateBatch: a run of offsets in one delivery state.
type Batch struct {
	First, Last int64
	State       int8 // 0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED
	Deliveries  int16
}

// snapshotValue is ShareSnapshotValue v0; an update (ShareUpdateValue v0)
// uses the same fields but StateEpoch and the timestamps.
type snapshotValue struct {
	SnapshotEpoch         int32
	StateEpoch            int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int32
	CreateTimestamp       int64
	WriteTimestamp        int64
	Batches               []Batch
}

func encodeKey(typ int16, k Key) []byte {
	b := kbin.AppendInt16(nil, typ)
	b = kbin.AppendString(b, k.Group)
	b = kbin.AppendUuid(b, k.TopicID)
	return kbin.AppendInt32(b, k.Partition)
}

func decodeKey(b []byte) (int16, Key, error) {
	if len(b) < 2 {
		return 0, Key{}, errors.New("record key shorter than its type")
	}
	typ := int16(binary.BigEndian.Uint16(b))
	r := kbin.Reader{Src: b[2:]}
	k := Key{Group: r.String(), TopicID: r.Uuid(), Partition: r.Int32()}
	if err := r.Complete(); err != nil {
		return typ, k, fmt.Errorf("decoding share state key of type %d: %w", typ, err)
	}
	return typ, k, nil
}

func appendDeliveryComplete(b []byte, n int32) []byte {
	if n == -1 {
		return kbin.AppendUvarint(b, 0)
	}
	b = kbin.AppendUvarint(b, 1) // one tagged field
	b = kbin.AppendUvarint(b, 0) // tag 0
	b = kbin.AppendUvarint(b, 4)
	return kbin.AppendInt32(b, n)
}

func appendBatches(b []byte, batches []Batch) []byte {
	b = kbin.AppendCompactArrayLen(b, len(batches))
	for _, x := range batches {
		b = kbin.AppendInt64(b, x.First)
		b = kbin.AppendInt64(b, x.Last)
		b = kbin.AppendInt8(b, x.State)
		b = kbin.AppendInt16(b, x.Deliveries)
		b = kbin.AppendUvarint(b, 0)
	}
	return b
}

// encodeSnapshot is a ShareSnapshotValue.
func encodeSnapshot(v *snapshotValue) []byte {
	b := kbin.AppendInt16(nil, 0)
	b = kbin.AppendInt32(b, v.SnapshotEpoch)
	b = kbin.AppendInt32(b, v.StateEpoch)
	b = kbin.AppendInt32(b, v.LeaderEpoch)
	b = kbin.AppendInt64(b, v.StartOffset)
	b = kbin.AppendInt64(b, v.CreateTimestamp)
	b = kbin.AppendInt64(b, v.WriteTimestamp)
	b = appendBatches(b, v.Batches)
	return appendDeliveryComplete(b, v.DeliveryCompleteCount)
}

// encodeUpdate is a ShareUpdateValue.
func encodeUpdate(v *snapshotValue) []byte {
	b := kbin.AppendInt16(nil, 0)
	b = kbin.AppendInt32(b, v.SnapshotEpoch)
	b = kbin.AppendInt32(b, v.LeaderEpoch)
	b = kbin.AppendInt64(b, v.StartOffset)
	b = appendBatches(b, v.Batches)
	return appendDeliveryComplete(b, v.DeliveryCompleteCount)
}

// decodeValue decodes a snapshot (typ 0) or an update (typ 1).
func decodeValue(typ int16, b []byte) (snapshotValue, error) {
	v := snapshotValue{DeliveryCompleteCount: -1}
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return v, fmt.Errorf("unsupported share state value version %d", ver)
	}
	v.SnapshotEpoch = r.Int32()
	if typ == recSnapshot {
		v.StateEpoch = r.Int32()
	}
	v.LeaderEpoch = r.Int32()
	v.StartOffset = r.Int64()
	if typ == recSnapshot {
		v.CreateTimestamp = r.Int64()
		v.WriteTimestamp = r.Int64()
	}
	n := r.CompactArrayLen()
	if n > 0 && int(n)*20 > len(r.Src) {
		return v, errors.New("share state batches longer than the record")
	}
	for i := int32(0); i < n && r.Ok(); i++ {
		x := Batch{First: r.Int64(), Last: r.Int64(), State: r.Int8(), Deliveries: r.Int16()}
		for t := r.Uvarint(); t > 0 && r.Ok(); t-- {
			r.Uvarint()
			r.Span(int(r.Uvarint()))
		}
		v.Batches = append(v.Batches, x)
	}
	for t := r.Uvarint(); t > 0 && r.Ok(); t-- {
		tag, size := r.Uvarint(), int(r.Uvarint())
		field := kbin.Reader{Src: r.Span(size)}
		if tag == 0 {
			v.DeliveryCompleteCount = field.Int32()
		}
	}
	return v, r.Complete()
}
