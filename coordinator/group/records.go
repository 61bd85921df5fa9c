package group

// Records of the __consumer_offsets topic, in Kafka's key/value schemas so
// that Kafka's own GroupMetadataMessageFormatter and OffsetsMessageFormatter
// read what Gregor writes. A key starts with an int16 naming the record
// type (Kafka calls it the key version); a value starts with its own int16
// version. Classic records use kmsg's generated codecs; the KIP-848
// consumer group records are encoded here from Kafka 4.3's group-coordinator
// JSON schemas (keys are non-flexible, values flexible from version 0).

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// Record types (the key's leading int16).
const (
	recOffsetCommitV0          int16 = 0
	recOffsetCommit            int16 = 1
	recGroupMetadata           int16 = 2
	recConsumerGroupMetadata   int16 = 3
	recConsumerGroupPartitions int16 = 4 // deprecated since 4.0, read and ignored
	recConsumerMemberMetadata  int16 = 5
	recConsumerTargetMetadata  int16 = 6
	recConsumerTargetMember    int16 = 7
	recConsumerCurrentMember   int16 = 8
	recConsumerRegex           int16 = 16
)

// record is one key/value pair; a nil value is a tombstone.
type record struct {
	key   []byte
	value []byte
}

// Value versions Gregor writes.
const (
	groupMetadataValueVersion = 3 // non-flexible v3 carries static instance ids; readable by every Kafka since 2.3
	offsetValueVersion        = 3 // leader epoch, no expire timestamp
	offsetValueVersionExpire  = 1 // carries an explicit expire timestamp (OffsetCommit v2-v4 retention)
	offsetValueVersionTopicID = 4 // flexible, TopicID tag (commits that named a topic id)
)

// --- keys -----------------------------------------------------------------

func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: recOffsetCommit, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

func groupMetadataKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: recGroupMetadata, Group: group}
	return k.AppendTo(nil)
}

func consumerGroupKey(typ int16, group string) []byte {
	b := kbin.AppendInt16(nil, typ)
	return kbin.AppendString(b, group)
}

func consumerMemberKey(typ int16, group, member string) []byte {
	b := consumerGroupKey(typ, group)
	return kbin.AppendString(b, member)
}

func consumerRegexKey(group, regex string) []byte {
	b := consumerGroupKey(recConsumerRegex, group)
	return kbin.AppendString(b, regex)
}

// parsedKey is a decoded key of any type.
type parsedKey struct {
	typ       int16
	group     string
	member    string // member records
	topic     string // offset records
	partition int32  // offset records
	regex     string // regex records
}

func parseKey(b []byte) (parsedKey, error) {
	if len(b) < 2 {
		return parsedKey{}, errors.New("record key shorter than its type")
	}
	k := parsedKey{typ: int16(binary.BigEndian.Uint16(b))}
	r := kbin.Reader{Src: b[2:]}
	switch k.typ {
	case recOffsetCommitV0, recOffsetCommit:
		k.group = r.String()
		k.topic = r.String()
		k.partition = r.Int32()
	case recGroupMetadata, recConsumerGroupMetadata, recConsumerGroupPartitions, recConsumerTargetMetadata,
		recShareGroupMetadata, recShareTargetMetadata, recShareStatePartitions,
		recStreamsGroupMetadata, recStreamsPartitionMetadata, recStreamsTargetMetadata, recStreamsTopology:
		k.group = r.String()
	case recConsumerMemberMetadata, recConsumerTargetMember, recConsumerCurrentMember,
		recShareMemberMetadata, recShareTargetMember, recShareCurrentMember,
		recStreamsMemberMetadata, recStreamsTargetMember, recStreamsCurrentMember:
		k.group = r.String()
		k.member = r.String()
	case recConsumerRegex:
		k.group = r.String()
		k.regex = r.String()
	default:
		// Future record types: not ours to
		// interpret, but not corruption either.
		return k, nil
	}
	if err := r.Complete(); err != nil {
		return k, fmt.Errorf("decoding record key of type %d: %w", k.typ, err)
	}
	return k, nil
}

// --- KIP-848 values ---------------------------------------------------------

// topicPartitions is Kafka's TopicPartitions common struct.
type topicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

// memberMetadataValue is ConsumerGroupMemberMetadataValue v0.
type memberMetadataValue struct {
	InstanceID           *string
	RackID               *string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	RebalanceTimeoutMs   int32
	ServerAssignor       *string
	// Classic is the tagged ClassicMemberMetadata (tag 0): set for a
	// member of a consumer group that speaks the classic protocol.
	Classic *classicMemberMetadata
}

// classicMemberMetadata is what a consumer group keeps about a member that
// joined with JoinGroup: its session timeout and supported protocols.
type classicMemberMetadata struct {
	SessionTimeoutMs int32
	Protocols        []classicProtocol
}

func (c *classicMemberMetadata) equal(o *classicMemberMetadata) bool {
	if c == nil || o == nil {
		return c == o
	}
	if c.SessionTimeoutMs != o.SessionTimeoutMs || len(c.Protocols) != len(o.Protocols) {
		return false
	}
	for i := range c.Protocols {
		if c.Protocols[i].name != o.Protocols[i].name || string(c.Protocols[i].metadata) != string(o.Protocols[i].metadata) {
			return false
		}
	}
	return true
}

// encode is the struct's flexible encoding (without the presence marker
// a nullable tagged struct carries).
func (c *classicMemberMetadata) encode(b []byte) []byte {
	b = kbin.AppendInt32(b, c.SessionTimeoutMs)
	b = kbin.AppendCompactArrayLen(b, len(c.Protocols))
	for _, p := range c.Protocols {
		b = kbin.AppendCompactString(b, p.name)
		b = kbin.AppendCompactBytes(b, p.metadata)
		b = kbin.AppendUvarint(b, 0) // tagged fields
	}
	return kbin.AppendUvarint(b, 0)
}

func decodeClassicMemberMetadata(r *kbin.Reader) *classicMemberMetadata {
	c := &classicMemberMetadata{SessionTimeoutMs: r.Int32()}
	n := r.CompactArrayLen()
	if n > 0 && int(n) <= len(r.Src) {
		c.Protocols = make([]classicProtocol, n)
		for i := range c.Protocols {
			c.Protocols[i].name = r.CompactString()
			c.Protocols[i].metadata = append([]byte(nil), r.CompactBytes()...)
			skipTags(r)
		}
	} else if n > 0 {
		r.Span(len(r.Src) + 1) // poison the reader
	}
	skipTags(r)
	return c
}

// currentAssignmentValue is ConsumerGroupCurrentMemberAssignmentValue v0.
type currentAssignmentValue struct {
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               int8
	Assigned            []topicPartitions
	PendingRevocation   []topicPartitions
}

// regexValue is ConsumerGroupRegularExpressionValue v0.
type regexValue struct {
	Topics    []string
	Version   int64
	Timestamp int64
}

func appendTopicPartitions(b []byte, tps []topicPartitions) []byte {
	b = kbin.AppendCompactArrayLen(b, len(tps))
	for _, tp := range tps {
		b = kbin.AppendUuid(b, tp.TopicID)
		b = kbin.AppendCompactArrayLen(b, len(tp.Partitions))
		for _, p := range tp.Partitions {
			b = kbin.AppendInt32(b, p)
		}
		b = kbin.AppendUvarint(b, 0) // tagged fields
	}
	return b
}

// readArray reads a compact array whose elements take at least minSize
// bytes each: nil when empty or null; a length the remaining bytes cannot
// hold poisons the reader instead of allocating it.
func readArray[T any](r *kbin.Reader, minSize int, elem func(*kbin.Reader) T) []T {
	n := r.CompactArrayLen()
	if n <= 0 || !r.Ok() {
		return nil
	}
	if int(n)*minSize > len(r.Src) {
		r.Span(len(r.Src) + 1) // poison the reader
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = elem(r)
	}
	if !r.Ok() {
		return nil
	}
	return out
}

func readInt32s(r *kbin.Reader) []int32 {
	return readArray(r, 4, func(r *kbin.Reader) int32 { return r.Int32() })
}

func readTopicPartitions(r *kbin.Reader) []topicPartitions {
	return readArray(r, 1, func(r *kbin.Reader) topicPartitions {
		tp := topicPartitions{TopicID: r.Uuid(), Partitions: readInt32s(r)}
		skipTags(r)
		return tp
	})
}

func skipTags(r *kbin.Reader) {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint()
		r.Span(int(r.Uvarint()))
	}
}

func appendStrings(b []byte, ss []string) []byte {
	b = kbin.AppendCompactArrayLen(b, len(ss))
	for _, s := range ss {
		b = kbin.AppendCompactString(b, s)
	}
	return b
}

func readStrings(r *kbin.Reader) []string {
	return readArray(r, 1, func(r *kbin.Reader) string { return r.CompactString() })
}

func encodeGroupEpochValue(epoch int32) []byte {
	b := kbin.AppendInt16(nil, 0)
	b = kbin.AppendInt32(b, epoch)
	return kbin.AppendUvarint(b, 0)
}

// encodeTargetMetadataValue is ConsumerGroupTargetAssignmentMetadataValue v0.
func encodeTargetMetadataValue(epoch int32) []byte { return encodeGroupEpochValue(epoch) }

func decodeEpochValue(b []byte) (int32, error) {
	r := kbin.Reader{Src: b}
	if v := r.Int16(); v != 0 {
		return 0, fmt.Errorf("unsupported value version %d", v)
	}
	e := r.Int32()
	skipTags(&r)
	return e, r.Complete()
}

func (v *memberMetadataValue) encode() []byte {
	b := kbin.AppendInt16(nil, 0)
	b = kbin.AppendCompactNullableString(b, v.InstanceID)
	b = kbin.AppendCompactNullableString(b, v.RackID)
	b = kbin.AppendCompactString(b, v.ClientID)
	b = kbin.AppendCompactString(b, v.ClientHost)
	b = appendStrings(b, v.SubscribedTopicNames)
	b = kbin.AppendCompactNullableString(b, v.SubscribedTopicRegex)
	b = kbin.AppendInt32(b, v.RebalanceTimeoutMs)
	b = kbin.AppendCompactNullableString(b, v.ServerAssignor)
	if v.Classic == nil {
		return kbin.AppendUvarint(b, 0)
	}
	// One tagged field, tag 0: a nullable struct is written with a
	// presence marker (1) ahead of its fields, counted in its size.
	body := v.Classic.encode(kbin.AppendUvarint(nil, 1))
	b = kbin.AppendUvarint(b, 1)
	b = kbin.AppendUvarint(b, 0)
	b = kbin.AppendUvarint(b, uint32(len(body)))
	return append(b, body...)
}

func (v *memberMetadataValue) decode(b []byte) error {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return fmt.Errorf("unsupported ConsumerGroupMemberMetadataValue version %d", ver)
	}
	v.InstanceID = r.CompactNullableString()
	v.RackID = r.CompactNullableString()
	v.ClientID = r.CompactString()
	v.ClientHost = r.CompactString()
	v.SubscribedTopicNames = readStrings(&r)
	v.SubscribedTopicRegex = r.CompactNullableString()
	v.RebalanceTimeoutMs = r.Int32()
	v.ServerAssignor = r.CompactNullableString()
	v.Classic = nil
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		tag, size := r.Uvarint(), int(r.Uvarint())
		field := kbin.Reader{Src: r.Span(size)}
		if tag != 0 {
			continue
		}
		if field.Uvarint() == 0 {
			continue // null
		}
		v.Classic = decodeClassicMemberMetadata(&field)
		if err := field.Complete(); err != nil {
			return fmt.Errorf("decoding ClassicMemberMetadata: %w", err)
		}
	}
	return r.Complete()
}

func encodeTargetMemberValue(tps []topicPartitions) []byte {
	b := kbin.AppendInt16(nil, 0)
	b = appendTopicPartitions(b, tps)
	return kbin.AppendUvarint(b, 0)
}

func decodeTargetMemberValue(b []byte) ([]topicPartitions, error) {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return nil, fmt.Errorf("unsupported ConsumerGroupTargetAssignmentMemberValue version %d", ver)
	}
	tps := readTopicPartitions(&r)
	skipTags(&r)
	return tps, r.Complete()
}

func (v *currentAssignmentValue) encode() []byte {
	b := kbin.AppendInt16(nil, 0)
	b = kbin.AppendInt32(b, v.MemberEpoch)
	b = kbin.AppendInt32(b, v.PreviousMemberEpoch)
	b = kbin.AppendInt8(b, v.State)
	b = appendTopicPartitions(b, v.Assigned)
	b = appendTopicPartitions(b, v.PendingRevocation)
	return kbin.AppendUvarint(b, 0)
}

func (v *currentAssignmentValue) decode(b []byte) error {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return fmt.Errorf("unsupported ConsumerGroupCurrentMemberAssignmentValue version %d", ver)
	}
	v.MemberEpoch = r.Int32()
	v.PreviousMemberEpoch = r.Int32()
	v.State = r.Int8()
	v.Assigned = readTopicPartitions(&r)
	v.PendingRevocation = readTopicPartitions(&r)
	skipTags(&r)
	return r.Complete()
}

func (v *regexValue) encode() []byte {
	b := kbin.AppendInt16(nil, 0)
	b = appendStrings(b, v.Topics)
	b = kbin.AppendInt64(b, v.Version)
	b = kbin.AppendInt64(b, v.Timestamp)
	return kbin.AppendUvarint(b, 0)
}

func (v *regexValue) decode(b []byte) error {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return fmt.Errorf("unsupported ConsumerGroupRegularExpressionValue version %d", ver)
	}
	v.Topics = readStrings(&r)
	v.Version = r.Int64()
	v.Timestamp = r.Int64()
	skipTags(&r)
	return r.Complete()
}

// --- record batches ---------------------------------------------------------

// batchProducer is whom a batch is written for: nobody (the coordinator's
// own records) or a transaction's producer (TxnOffsetCommit).
type batchProducer struct {
	id    int64
	epoch int16
}

var noProducer = batchProducer{id: protocol.NoProducerID, epoch: protocol.NoProducerEpoch}

// encodeBatch builds one uncompressed v2 record batch (base offset 0; the
// log stamps the real one) holding recs, all with timestamp nowMs.
func encodeBatch(recs []record, nowMs int64) []byte {
	return encodeProducerBatch(recs, nowMs, noProducer)
}

// encodeProducerBatch is encodeBatch for producer p: with a producer id it
// is a transactional batch, with base sequence 0 as Kafka's coordinator
// runtime writes it (the log checks no sequence of coordinator writes).
func encodeProducerBatch(recs []record, nowMs int64, p batchProducer) []byte {
	b := make([]byte, protocol.BatchHeaderSize, protocol.BatchHeaderSize+64*len(recs))
	var body []byte
	for i, r := range recs {
		body = body[:0]
		body = kbin.AppendInt8(body, 0)          // attributes
		body = kbin.AppendVarlong(body, 0)       // timestamp delta
		body = kbin.AppendVarint(body, int32(i)) // offset delta
		body = kbin.AppendVarint(body, int32(len(r.key)))
		body = append(body, r.key...)
		if r.value == nil {
			body = kbin.AppendVarint(body, -1)
		} else {
			body = kbin.AppendVarint(body, int32(len(r.value)))
			body = append(body, r.value...)
		}
		body = kbin.AppendVarint(body, 0) // headers
		b = kbin.AppendVarint(b, int32(len(body)))
		b = append(b, body...)
	}
	attrs, seq := uint16(0), protocol.NoSequence
	if p.id >= 0 {
		attrs, seq = protocol.AttrTransactional, 0
	}
	be := binary.BigEndian
	be.PutUint64(b[0:], 0)
	be.PutUint32(b[8:], uint32(len(b)-protocol.BatchOverhead))
	be.PutUint32(b[12:], 0xffffffff) // partition leader epoch: stamped by the log
	b[16] = 2                        // magic
	be.PutUint16(b[21:], attrs)
	be.PutUint32(b[23:], uint32(len(recs)-1))
	be.PutUint64(b[27:], uint64(nowMs))
	be.PutUint64(b[35:], uint64(nowMs))
	be.PutUint64(b[43:], uint64(p.id))
	be.PutUint16(b[51:], uint16(p.epoch))
	be.PutUint32(b[53:], uint32(seq))
	be.PutUint32(b[57:], uint32(len(recs)))
	be.PutUint32(b[17:], protocol.ComputeBatchCRC(b))
	return b
}

// errCompressedBatch is returned for compressed __consumer_offsets batches,
// which Gregor never writes (offsets.topic.compression.codec=none).
var errCompressedBatch = errors.New("compressed __consumer_offsets batches are not supported")

// decodeBatch calls fn for each record of one whole v2 batch, in order,
// with the batch's header: the records of a control batch (a transaction
// marker) are handed over like any other, for fn to tell apart by the
// header. The key and value slices alias batch.
func decodeBatch(batch []byte, fn func(h protocol.BatchHeader, offset int64, r record) error) error {
	h, err := protocol.ParseBatchHeader(batch)
	if err != nil {
		return err
	}
	if h.Magic != 2 {
		return fmt.Errorf("unsupported record batch magic %d", h.Magic)
	}
	if !protocol.CheckBatchCRC(batch) {
		return fmt.Errorf("record batch at offset %d fails its CRC", h.BaseOffset)
	}
	if h.Codec() != protocol.CodecNone {
		return errCompressedBatch
	}
	rest := batch[protocol.BatchHeaderSize:]
	for i := int32(0); i < h.NumRecords; i++ {
		length, n := kbin.Varint(rest)
		if n == 0 || length < 0 || int(length) > len(rest)-n {
			return fmt.Errorf("record %d of batch at offset %d is truncated", i, h.BaseOffset)
		}
		rec := rest[n : n+int(length)]
		rest = rest[n+int(length):]
		if len(rec) < 1 {
			return fmt.Errorf("record %d of batch at offset %d is empty", i, h.BaseOffset)
		}
		rec = rec[1:] // attributes
		_, n = kbin.Varlong(rec)
		if n == 0 {
			return fmt.Errorf("record %d: bad timestamp delta", i)
		}
		rec = rec[n:]
		delta, n := kbin.Varint(rec)
		if n == 0 {
			return fmt.Errorf("record %d: bad offset delta", i)
		}
		rec = rec[n:]
		var r record
		var ok bool
		if r.key, rec, ok = varBytes(rec); !ok {
			return fmt.Errorf("record %d of batch at offset %d: bad key", i, h.BaseOffset)
		}
		if r.value, _, ok = varBytes(rec); !ok {
			return fmt.Errorf("record %d of batch at offset %d: bad value", i, h.BaseOffset)
		}
		if err := fn(h, h.BaseOffset+int64(delta), r); err != nil {
			return err
		}
	}
	return nil
}

// varBytes reads a varint-length-prefixed byte string (-1 is null).
func varBytes(b []byte) (v, rest []byte, ok bool) {
	l, n := kbin.Varint(b)
	if n == 0 {
		return nil, b, false
	}
	b = b[n:]
	if l < 0 {
		return nil, b, true
	}
	if int(l) > len(b) {
		return nil, b, false
	}
	return b[:l:l], b[l:], true
}
