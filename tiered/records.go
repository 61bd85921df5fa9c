package tiered

// The records of __remote_log_metadata, in Kafka's schemas (its
// storage/src/main/resources/message/RemoteLog*Record.json, all version 0
// and flexible) with the frame of Kafka's metadata serdes: frame version
// 1, api key and version, each an unsigned varint, then the message.
// Kafka's kafka-dump-log --remote-log-metadata-decoder reads them.

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

const frameVersion = 1

// The api keys of the records.
const (
	apiKeySegmentMetadata = 0 // RemoteLogSegmentMetadataRecord
	apiKeySegmentUpdate   = 1 // RemoteLogSegmentMetadataUpdateRecord
	apiKeyPartitionDelete = 2 // RemotePartitionDeleteMetadataRecord
	apiKeySegmentSnapshot = 3 // RemoteLogSegmentMetadataSnapshotRecord
)

// SegmentUpdate is Kafka's RemoteLogSegmentMetadataUpdate: a segment's
// move to another state.
type SegmentUpdate struct {
	Topic          string
	TopicID        [16]byte
	Partition      int32
	SegmentID      [16]byte
	BrokerID       int32
	EventTimeMs    int64
	CustomMetadata []byte
	State          SegmentState
}

// PartitionDeleteState is Kafka's RemotePartitionDeleteState.
type PartitionDeleteState int8

const (
	DeletePartitionMarked   PartitionDeleteState = 0
	DeletePartitionStarted  PartitionDeleteState = 1
	DeletePartitionFinished PartitionDeleteState = 2
)

// PartitionDelete is Kafka's RemotePartitionDeleteMetadata: the deletion
// of all of a partition's remote data.
type PartitionDelete struct {
	Topic       string
	TopicID     [16]byte
	Partition   int32
	BrokerID    int32
	EventTimeMs int64
	State       PartitionDeleteState
}

// MetadataRecord is one decoded record of __remote_log_metadata: exactly
// one of its fields is set.
type MetadataRecord struct {
	Segment         *SegmentMetadata
	Update          *SegmentUpdate
	PartitionDelete *PartitionDelete
}

// key is the partition the record is about.
func (r MetadataRecord) key() partKey {
	switch {
	case r.Segment != nil:
		return partKey{r.Segment.TopicID, r.Segment.Partition}
	case r.Update != nil:
		return partKey{r.Update.TopicID, r.Update.Partition}
	default:
		return partKey{r.PartitionDelete.TopicID, r.PartitionDelete.Partition}
	}
}

// Encode renders u as Kafka's serialized RemoteLogSegmentMetadataUpdateRecord.
func (u *SegmentUpdate) Encode() []byte {
	dst := appendFrame(nil, apiKeySegmentUpdate)
	dst = appendSegmentID(dst, u.Topic, u.TopicID, u.Partition, u.SegmentID)
	dst = kbin.AppendInt32(dst, u.BrokerID)
	dst = kbin.AppendInt64(dst, u.EventTimeMs)
	dst = kbin.AppendCompactNullableBytes(dst, u.CustomMetadata)
	dst = kbin.AppendInt8(dst, int8(u.State))
	return kbin.AppendUvarint(dst, 0)
}

// Encode renders d as Kafka's serialized RemotePartitionDeleteMetadataRecord.
func (d *PartitionDelete) Encode() []byte {
	dst := appendFrame(nil, apiKeyPartitionDelete)
	dst = appendTopicIDPartition(dst, d.Topic, d.TopicID, d.Partition)
	dst = kbin.AppendInt32(dst, d.BrokerID)
	dst = kbin.AppendInt64(dst, d.EventTimeMs)
	dst = kbin.AppendInt8(dst, int8(d.State))
	return kbin.AppendUvarint(dst, 0)
}

// Encode renders the record's one message.
func (r MetadataRecord) Encode() []byte {
	switch {
	case r.Segment != nil:
		return r.Segment.Encode()
	case r.Update != nil:
		return r.Update.Encode()
	default:
		return r.PartitionDelete.Encode()
	}
}

// errSnapshotRecord is a RemoteLogSegmentMetadataSnapshotRecord, which
// Kafka keeps in its metadata manager's snapshot files and never in the
// topic.
var errSnapshotRecord = fmt.Errorf("%w: a RemoteLogSegmentMetadataSnapshotRecord is not a topic record", errBadMetadata)

// DecodeMetadataRecord parses a value of __remote_log_metadata.
func DecodeMetadataRecord(b []byte) (MetadataRecord, error) {
	r := kbin.Reader{Src: b}
	frame, apiKey, version := r.Uvarint(), r.Uvarint(), r.Uvarint()
	if !r.Ok() || frame != frameVersion || version != 0 {
		return MetadataRecord{}, fmt.Errorf("%w: frame version %d, api key %d, version %d", errBadMetadata, frame, apiKey, version)
	}
	switch apiKey {
	case apiKeySegmentMetadata:
		m, err := decodeSegmentMetadata(&r)
		if err != nil {
			return MetadataRecord{}, err
		}
		return MetadataRecord{Segment: &m}, nil
	case apiKeySegmentUpdate:
		var u SegmentUpdate
		u.Topic, u.TopicID, u.Partition, u.SegmentID = readSegmentID(&r)
		u.BrokerID = r.Int32()
		u.EventTimeMs = r.Int64()
		u.CustomMetadata = r.CompactNullableBytes()
		u.State = SegmentState(r.Int8())
		skipTags(&r)
		if err := r.Complete(); err != nil {
			return MetadataRecord{}, fmt.Errorf("%w: %v", errBadMetadata, err)
		}
		return MetadataRecord{Update: &u}, nil
	case apiKeyPartitionDelete:
		var d PartitionDelete
		d.Topic, d.TopicID, d.Partition = readTopicIDPartition(&r)
		d.BrokerID = r.Int32()
		d.EventTimeMs = r.Int64()
		d.State = PartitionDeleteState(r.Int8())
		skipTags(&r)
		if err := r.Complete(); err != nil {
			return MetadataRecord{}, fmt.Errorf("%w: %v", errBadMetadata, err)
		}
		return MetadataRecord{PartitionDelete: &d}, nil
	case apiKeySegmentSnapshot:
		return MetadataRecord{}, errSnapshotRecord
	}
	return MetadataRecord{}, fmt.Errorf("%w: unknown api key %d", errBadMetadata, apiKey)
}

func appendFrame(dst []byte, apiKey uint32) []byte {
	dst = kbin.AppendUvarint(dst, frameVersion)
	dst = kbin.AppendUvarint(dst, apiKey)
	return kbin.AppendUvarint(dst, 0)
}

// appendTopicIDPartition writes a TopicIdPartitionEntry.
func appendTopicIDPartition(dst []byte, topic string, topicID [16]byte, partition int32) []byte {
	dst = kbin.AppendCompactString(dst, topic)
	dst = kbin.AppendUuid(dst, topicID)
	dst = kbin.AppendInt32(dst, partition)
	return kbin.AppendUvarint(dst, 0)
}

// appendSegmentID writes a RemoteLogSegmentIdEntry.
func appendSegmentID(dst []byte, topic string, topicID [16]byte, partition int32, segmentID [16]byte) []byte {
	dst = appendTopicIDPartition(dst, topic, topicID, partition)
	dst = kbin.AppendUuid(dst, segmentID)
	return kbin.AppendUvarint(dst, 0)
}

func readTopicIDPartition(r *kbin.Reader) (topic string, topicID [16]byte, partition int32) {
	topic = r.CompactString()
	topicID = r.Uuid()
	partition = r.Int32()
	skipTags(r)
	return topic, topicID, partition
}

func readSegmentID(r *kbin.Reader) (topic string, topicID [16]byte, partition int32, segmentID [16]byte) {
	topic, topicID, partition = readTopicIDPartition(r)
	segmentID = r.Uuid()
	skipTags(r)
	return topic, topicID, partition, segmentID
}

// MetadataPartition is the partition of __remote_log_metadata that holds a
// topic partition's records, chosen as Kafka's
// RemoteLogMetadataTopicPartitioner chooses it: Java's Objects.hash of the
// topic id's low and high halves and the partition, as four big-endian
// bytes, through Kafka's murmur2, made positive, modulo the partitions.
func MetadataPartition(topicID [16]byte, partition int32, partitions int32) int32 {
	msb := int64(binary.BigEndian.Uint64(topicID[:8]))
	lsb := int64(binary.BigEndian.Uint64(topicID[8:]))
	javaLongHash := func(v int64) int32 { return int32(v ^ int64(uint64(v)>>32)) }
	h := int32(1)
	h = 31*h + javaLongHash(lsb)
	h = 31*h + javaLongHash(msb)
	h = 31*h + partition
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(h))
	return int32(murmur2(b[:])&0x7fffffff) % partitions
}

// murmur2 is Kafka's Utils.murmur2 (MurmurHash2, seed 0x9747b28c).
func murmur2(data []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	n := len(data)
	h := uint32(seed) ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := binary.LittleEndian.Uint32(data[i:])
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
