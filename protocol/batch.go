package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Record batch (magic v2) header layout, in bytes from the batch start.
const (
	batchBaseOffsetPos      = 0
	batchLengthPos          = 8
	batchLeaderEpochPos     = 12
	batchMagicPos           = 16
	batchCRCPos             = 17
	batchAttributesPos      = 21
	batchLastOffsetDeltaPos = 23
	batchBaseTimestampPos   = 27
	batchMaxTimestampPos    = 35
	batchProducerIDPos      = 43
	batchProducerEpochPos   = 51
	batchBaseSequencePos    = 53
	batchRecordCountPos     = 57

	// BatchHeaderSize is the size of a v2 record batch header.
	BatchHeaderSize = 61
	// BatchOverhead is the part of the header not counted in BatchLength.
	BatchOverhead = 12
)

// Batch attribute bits.
const (
	AttrCompressionMask  = 0x07
	AttrLogAppendTime    = 0x08
	AttrTransactional    = 0x10
	AttrControl          = 0x20
	AttrDeleteHorizonSet = 0x40
)

// Codec is a record batch compression codec.
type Codec int8

const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrShortBatch means the bytes end before the batch does.
var ErrShortBatch = errors.New("record batch truncated")

// BatchHeader is the decoded fixed header of a v2 record batch.
type BatchHeader struct {
	BaseOffset           int64
	Length               int32 // bytes after the Length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// ParseBatchHeader decodes the header at the start of b. It checks only that
// the header bytes are present; callers check Magic and Length.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	if len(b) < BatchHeaderSize {
		// The first 17 bytes are enough to learn the magic and length,
		// which callers need to skip or reject older message formats.
		return BatchHeader{}, ErrShortBatch
	}
	be := binary.BigEndian
	return BatchHeader{
		BaseOffset:           int64(be.Uint64(b[batchBaseOffsetPos:])),
		Length:               int32(be.Uint32(b[batchLengthPos:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[batchLeaderEpochPos:])),
		Magic:                int8(b[batchMagicPos]),
		CRC:                  be.Uint32(b[batchCRCPos:]),
		Attributes:           int16(be.Uint16(b[batchAttributesPos:])),
		LastOffsetDelta:      int32(be.Uint32(b[batchLastOffsetDeltaPos:])),
		BaseTimestamp:        int64(be.Uint64(b[batchBaseTimestampPos:])),
		MaxTimestamp:         int64(be.Uint64(b[batchMaxTimestampPos:])),
		ProducerID:           int64(be.Uint64(b[batchProducerIDPos:])),
		ProducerEpoch:        int16(be.Uint16(b[batchProducerEpochPos:])),
		BaseSequence:         int32(be.Uint32(b[batchBaseSequencePos:])),
		NumRecords:           int32(be.Uint32(b[batchRecordCountPos:])),
	}, nil
}

// TotalSize is the batch's size on the wire and on disk.
func (h BatchHeader) TotalSize() int64 { return int64(h.Length) + BatchOverhead }

// LastOffset is the offset of the batch's last record.
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

func (h BatchHeader) Codec() Codec          { return Codec(h.Attributes & AttrCompressionMask) }
func (h BatchHeader) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }
func (h BatchHeader) IsControl() bool       { return h.Attributes&AttrControl != 0 }
func (h BatchHeader) LogAppendTime() bool   { return h.Attributes&AttrLogAppendTime != 0 }

// DeleteHorizon is the delete horizon the log cleaner stored in the base
// timestamp (KIP-534); ok is false when the batch has none.
func (h BatchHeader) DeleteHorizon() (ms int64, ok bool) {
	if h.Attributes&AttrDeleteHorizonSet == 0 {
		return 0, false
	}
	return h.BaseTimestamp, true
}

// HasProducerID reports whether the batch is idempotent or transactional.
func (h BatchHeader) HasProducerID() bool { return h.ProducerID >= 0 }

// ComputeBatchCRC computes the CRC-32C that a v2 batch stores: over the bytes
// from the attributes to the end of the batch.
func ComputeBatchCRC(batch []byte) uint32 {
	return crc32.Checksum(batch[batchAttributesPos:], castagnoli)
}

// CheckBatchCRC reports whether the stored CRC matches the batch's bytes.
// batch must be exactly one whole batch.
func CheckBatchCRC(batch []byte) bool {
	if len(batch) < BatchHeaderSize {
		return false
	}
	return binary.BigEndian.Uint32(batch[batchCRCPos:]) == ComputeBatchCRC(batch)
}

// SetBaseOffset stamps the base offset; it is outside the CRC.
func SetBaseOffset(batch []byte, offset int64) {
	binary.BigEndian.PutUint64(batch[batchBaseOffsetPos:], uint64(offset))
}

// SetPartitionLeaderEpoch stamps the leader epoch; it is outside the CRC.
func SetPartitionLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[batchLeaderEpochPos:], uint32(epoch))
}

// SetLogAppendTime marks the batch as LogAppendTime, sets its max timestamp
// to ts and recomputes the CRC (both fields are inside it).
func SetLogAppendTime(batch []byte, ts int64) {
	be := binary.BigEndian
	attrs := be.Uint16(batch[batchAttributesPos:]) | AttrLogAppendTime
	be.PutUint16(batch[batchAttributesPos:], attrs)
	be.PutUint64(batch[batchMaxTimestampPos:], uint64(ts))
	be.PutUint32(batch[batchCRCPos:], ComputeBatchCRC(batch))
}

// Batch is one whole v2 record batch and its decoded header. It is what
// NextBatch and ParseProduceBatch split off the wire, and it travels with
// the batch through validation, offset assignment, producer-state checks
// and indexing, so that the header is parsed once. The setters below change
// the bytes and the header together.
type Batch struct {
	Bytes  []byte
	Header BatchHeader
}

// SetBaseOffset stamps the base offset (outside the CRC).
func (b *Batch) SetBaseOffset(offset int64) {
	SetBaseOffset(b.Bytes, offset)
	b.Header.BaseOffset = offset
}

// SetPartitionLeaderEpoch stamps the leader epoch (outside the CRC).
func (b *Batch) SetPartitionLeaderEpoch(epoch int32) {
	SetPartitionLeaderEpoch(b.Bytes, epoch)
	b.Header.PartitionLeaderEpoch = epoch
}

// SetLogAppendTime marks the batch as LogAppendTime with max timestamp ts
// and recomputes the CRC, as SetLogAppendTime does.
func (b *Batch) SetLogAppendTime(ts int64) {
	SetLogAppendTime(b.Bytes, ts)
	b.Header.Attributes |= AttrLogAppendTime
	b.Header.MaxTimestamp = ts
	b.Header.CRC = binary.BigEndian.Uint32(b.Bytes[batchCRCPos:])
}

// NextBatch splits the first whole batch off b. It returns ErrShortBatch
// when b ends inside the batch (a torn tail, or a partial batch a fetch
// response may legally end with).
func NextBatch(b []byte) (batch, rest []byte, h BatchHeader, err error) {
	if len(b) < BatchOverhead+5 {
		return nil, b, h, ErrShortBatch
	}
	length := int32(binary.BigEndian.Uint32(b[batchLengthPos:]))
	magic := int8(b[batchMagicPos])
	if length < 0 {
		return nil, b, h, fmt.Errorf("record batch length %d is negative", length)
	}
	total := int64(length) + BatchOverhead
	if int64(len(b)) < total {
		return nil, b, h, ErrShortBatch
	}
	if magic != 2 {
		return b[:total], b[total:], BatchHeader{Magic: magic, Length: length}, fmt.Errorf("unsupported record batch magic %d", magic)
	}
	if total < BatchHeaderSize {
		return nil, b, h, fmt.Errorf("record batch length %d is below the header size", length)
	}
	h, err = ParseBatchHeader(b[:total])
	return b[:total], b[total:], h, err
}
