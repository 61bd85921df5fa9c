package tiered

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kbin"
)

// SegmentState is Kafka's RemoteLogSegmentState.
type SegmentState int8

const (
	CopySegmentStarted    SegmentState = 0
	CopySegmentFinished   SegmentState = 1
	DeleteSegmentStarted  SegmentState = 2
	DeleteSegmentFinished SegmentState = 3
)

// EpochStart is one leader epoch of a segment and the first offset of the
// segment written in it.
type EpochStart struct {
	Epoch  int32
	Offset int64
}

// SegmentMetadata is Kafka's RemoteLogSegmentMetadata: one segment in
// remote storage, published to __remote_log_metadata as Kafka's
// RemoteLogSegmentMetadataRecord (records.go) when its copy starts.
type SegmentMetadata struct {
	Topic        string
	TopicID      [16]byte
	Partition    int32
	SegmentID    [16]byte
	StartOffset  int64
	EndOffset    int64 // the last offset in the segment
	BrokerID     int32
	MaxTimestamp int64
	EventTimeMs  int64
	// LeaderEpochs is the segment's epochs, each with the first offset in
	// the segment written in it, ascending.
	LeaderEpochs   []EpochStart
	SizeInBytes    int32
	CustomMetadata []byte
	State          SegmentState
	// TxnIndexEmpty: the segment has no transaction index (the
	// record's tagged field 0, which Kafka writes when true).
	TxnIndexEmpty bool
}

// Encode renders m as Kafka's serialized RemoteLogSegmentMetadataRecord.
func (m *SegmentMetadata) Encode() []byte {
	dst := appendFrame(nil, apiKeySegmentMetadata)
	dst = appendSegmentID(dst, m.Topic, m.TopicID, m.Partition, m.SegmentID)
	dst = kbin.AppendInt64(dst, m.StartOffset)
	dst = kbin.AppendInt64(dst, m.EndOffset)
	dst = kbin.AppendInt32(dst, m.BrokerID)
	dst = kbin.AppendInt64(dst, m.MaxTimestamp)
	dst = kbin.AppendInt64(dst, m.EventTimeMs)
	dst = kbin.AppendCompactArrayLen(dst, len(m.LeaderEpochs))
	for _, e := range m.LeaderEpochs {
		dst = kbin.AppendInt32(dst, e.Epoch)
		dst = kbin.AppendInt64(dst, e.Offset)
		dst = kbin.AppendUvarint(dst, 0)
	}
	dst = kbin.AppendInt32(dst, m.SizeInBytes)
	dst = kbin.AppendCompactNullableBytes(dst, m.CustomMetadata)
	dst = kbin.AppendInt8(dst, int8(m.State))
	if !m.TxnIndexEmpty {
		return kbin.AppendUvarint(dst, 0)
	}
	dst = kbin.AppendUvarint(dst, 1) // one tagged field
	dst = kbin.AppendUvarint(dst, 0) // TxnIndexEmpty's tag
	dst = kbin.AppendUvarint(dst, 1) // its size
	return kbin.AppendBool(dst, true)
}

var errBadMetadata = errors.New("malformed remote log metadata record")

// decodeSegmentMetadata parses the body of a RemoteLogSegmentMetadataRecord
// (tagged fields skipped).
func decodeSegmentMetadata(r *kbin.Reader) (SegmentMetadata, error) {
	var m SegmentMetadata
	m.Topic, m.TopicID, m.Partition, m.SegmentID = readSegmentID(r)
	m.StartOffset = r.Int64()
	m.EndOffset = r.Int64()
	m.BrokerID = r.Int32()
	m.MaxTimestamp = r.Int64()
	m.EventTimeMs = r.Int64()
	n := r.CompactArrayLen()
	if n < 0 || int(n) > len(r.Src) {
		return m, fmt.Errorf("%w: %d leader epochs", errBadMetadata, n)
	}
	for range n {
		e := EpochStart{Epoch: r.Int32(), Offset: r.Int64()}
		skipTags(r)
		m.LeaderEpochs = append(m.LeaderEpochs, e)
	}
	m.SizeInBytes = r.Int32()
	m.CustomMetadata = r.CompactNullableBytes()
	m.State = SegmentState(r.Int8())
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		tag, size := r.Uvarint(), int(r.Uvarint())
		field := r.Span(size)
		if tag == 0 {
			if len(field) != 1 {
				return m, fmt.Errorf("%w: TxnIndexEmpty of %d bytes", errBadMetadata, len(field))
			}
			m.TxnIndexEmpty = field[0] != 0
		}
	}
	if err := r.Complete(); err != nil {
		return m, fmt.Errorf("%w: %v", errBadMetadata, err)
	}
	if m.EndOffset < m.StartOffset || m.StartOffset < 0 || m.SizeInBytes < 0 {
		return m, fmt.Errorf("%w: offsets [%d, %d], %d bytes", errBadMetadata, m.StartOffset, m.EndOffset, m.SizeInBytes)
	}
	return m, nil
}

// skipTags skips a tagged-field section.
func skipTags(r *kbin.Reader) {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		r.Uvarint()
		r.Span(int(r.Uvarint()))
	}
}

// A partition's objects live under one directory of the store, named as
// Kafka's LocalTieredStorage names it, <topic>-<partition>-<topic id>/, and
// each segment's objects are <start offset>-<segment id> with the
// segment file suffixes of a local log.
const (
	suffixLog      = ".log"
	suffixIndex    = ".index"
	suffixTime     = ".timeindex"
	suffixTxn      = ".txnindex"
	suffixSnapshot = ".snapshot"
	suffixEpochs   = ".leader_epoch_checkpoint"
)

// segmentSuffixes are the objects a segment may have.
var segmentSuffixes = []string{suffixLog, suffixIndex, suffixTime, suffixEpochs, suffixTxn, suffixSnapshot}

var b64 = base64.RawURLEncoding

// partitionDir is the directory of a partition's objects.
func partitionDir(topic string, partition int32, topicID [16]byte) string {
	return topic + "-" + strconv.Itoa(int(partition)) + "-" + b64.EncodeToString(topicID[:]) + "/"
}

// segmentStem is a segment's object name without its suffix.
func segmentStem(startOffset int64, segmentID [16]byte) string {
	return fmt.Sprintf("%020d-%s", startOffset, b64.EncodeToString(segmentID[:]))
}
