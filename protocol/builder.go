package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Header field values that mean "none" in a v2 batch.
const (
	NoProducerID           int64 = -1
	NoProducerEpoch        int16 = -1
	NoSequence             int32 = -1
	NoPartitionLeaderEpoch int32 = -1
)

// BatchBuilder assembles one v2 record batch: the broker's own writers
// (group and transaction coordinators, control markers, recompression in
// ValidateBatch) use it. Records are encoded as they are added; Build
// compresses them and writes the header. The batch has base offset 0 and
// partition leader epoch -1: the log stamps both on append.
//
// A BatchBuilder is not safe for concurrent use.
type BatchBuilder struct {
	codec         Codec
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	transactional bool
	control       bool
	logAppendTime bool
	appendTimeMs  int64

	// deleteHorizonMs, when >= 0, is written as the base timestamp with
	// AttrDeleteHorizonSet (KIP-534: the log cleaner's mark of when its
	// tombstones and markers may go); record timestamps are then deltas
	// from it.
	deleteHorizonMs int64
	// lastDeltaOverride, when >= 0, is written as lastOffsetDelta instead
	// of the last record's delta (a cleaned batch keeps its original
	// last offset, which producer state relies on).
	lastDeltaOverride int32

	records       []byte // encoded records, uncompressed
	count         int32
	lastDelta     int32 // offset delta of the last record added, -1 before any
	baseTimestamp int64
	maxTimestamp  int64
}

// NewBatchBuilder returns a builder for a CreateTime batch compressed with
// codec, without producer id, not transactional, not control.
func NewBatchBuilder(codec Codec) *BatchBuilder {
	return new(BatchBuilder).ResetFor(codec)
}

// SetProducer sets the idempotent producer fields. Transaction markers use
// NoSequence as the base sequence, as Kafka does.
func (b *BatchBuilder) SetProducer(id int64, epoch int16, baseSequence int32) *BatchBuilder {
	b.producerID, b.producerEpoch, b.baseSequence = id, epoch, baseSequence
	return b
}

// SetTransactional marks the batch as part of a transaction.
func (b *BatchBuilder) SetTransactional(on bool) *BatchBuilder {
	b.transactional = on
	return b
}

// SetControl marks the batch as a control batch (transaction markers).
func (b *BatchBuilder) SetControl(on bool) *BatchBuilder {
	b.control = on
	return b
}

// SetLogAppendTime makes the batch a LogAppendTime batch whose max
// timestamp is ms. Records keep the timestamps given to Add, as Kafka's
// MemoryRecordsBuilder does.
func (b *BatchBuilder) SetLogAppendTime(ms int64) *BatchBuilder {
	b.logAppendTime, b.appendTimeMs = true, ms
	return b
}

// SetDeleteHorizon marks the batch with a delete horizon (KIP-534): ms is
// stored as the base timestamp with AttrDeleteHorizonSet. Call it before
// the first Add: record timestamps are encoded relative to it.
func (b *BatchBuilder) SetDeleteHorizon(ms int64) *BatchBuilder {
	b.deleteHorizonMs = ms
	return b
}

// SetLastOffsetDelta makes Build write delta as lastOffsetDelta, which
// must be at least the last record's delta: a batch the log cleaner
// rewrote keeps its original offset range even when its last records
// were removed.
func (b *BatchBuilder) SetLastOffsetDelta(delta int32) *BatchBuilder {
	b.lastDeltaOverride = delta
	return b
}

// ResetFor makes the builder as NewBatchBuilder(codec) returns it, keeping
// its buffer: a writer that builds many batches of different kinds (the
// log cleaner) reuses one builder.
func (b *BatchBuilder) ResetFor(codec Codec) *BatchBuilder {
	records := b.records
	*b = BatchBuilder{
		codec:             codec,
		producerID:        NoProducerID,
		producerEpoch:     NoProducerEpoch,
		baseSequence:      NoSequence,
		deleteHorizonMs:   -1,
		lastDeltaOverride: -1,
		records:           records,
	}
	b.Reset()
	return b
}

// Reset drops the records added so far and keeps the settings.
func (b *BatchBuilder) Reset() {
	b.records = b.records[:0]
	b.count = 0
	b.lastDelta = -1
	b.baseTimestamp = noTimestamp
	b.maxTimestamp = noTimestamp
}

// NumRecords is how many records have been added.
func (b *BatchBuilder) NumRecords() int { return int(b.count) }

// UncompressedSize is the size Build would return without compression;
// callers use it to decide when to start another batch.
func (b *BatchBuilder) UncompressedSize() int { return BatchHeaderSize + len(b.records) }

// Add appends a record at the next offset. A nil key or value is written
// as null; a nil header value as a null value. The bytes are copied.
func (b *BatchBuilder) Add(key, value []byte, headers []RecordHeader, timestampMs int64) {
	b.add(b.lastDelta+1, key, value, headers, timestampMs)
}

// AddWithOffsetDelta appends a record at an explicit offset delta, for
// writers that must keep records' original offsets (log compaction leaves
// gaps). Deltas must increase strictly.
func (b *BatchBuilder) AddWithOffsetDelta(offsetDelta int32, key, value []byte, headers []RecordHeader, timestampMs int64) error {
	if offsetDelta <= b.lastDelta {
		return fmt.Errorf("offset delta %d does not follow %d", offsetDelta, b.lastDelta)
	}
	b.add(offsetDelta, key, value, headers, timestampMs)
	return nil
}

func (b *BatchBuilder) add(delta int32, key, value []byte, headers []RecordHeader, timestampMs int64) {
	if b.count == 0 {
		b.baseTimestamp = timestampMs
		if b.deleteHorizonMs >= 0 {
			b.baseTimestamp = b.deleteHorizonMs
		}
	}
	if timestampMs > b.maxTimestamp {
		b.maxTimestamp = timestampMs
	}
	tsDelta := timestampMs - b.baseTimestamp
	offsetDelta := int64(delta)

	body := 1 + varintSize(tsDelta) + varintSize(offsetDelta) +
		nullableSize(key) + nullableSize(value) + varintSize(int64(len(headers)))
	for _, hd := range headers {
		body += varintSize(int64(len(hd.Key))) + len(hd.Key) + nullableSize(hd.Value)
	}

	r := b.records
	r = binary.AppendVarint(r, int64(body))
	r = append(r, 0) // record attributes: unused in v2
	r = binary.AppendVarint(r, tsDelta)
	r = binary.AppendVarint(r, offsetDelta)
	r = appendNullable(r, key)
	r = appendNullable(r, value)
	r = binary.AppendVarint(r, int64(len(headers)))
	for _, hd := range headers {
		r = binary.AppendVarint(r, int64(len(hd.Key)))
		r = append(r, hd.Key...)
		r = appendNullable(r, hd.Value)
	}
	b.records = r
	b.count++
	b.lastDelta = delta
}

func varintSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func nullableSize(p []byte) int {
	if p == nil {
		return 1
	}
	return varintSize(int64(len(p))) + len(p)
}

func appendNullable(dst, p []byte) []byte {
	if p == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(p)))
	return append(dst, p...)
}

// ErrEmptyBatch is returned by Build when no record was added.
var ErrEmptyBatch = errors.New("record batch has no records")

// Build returns a new, finished batch: records compressed with the
// builder's codec, lastOffsetDelta, timestamps, record count and CRC set.
// The builder may be Reset and reused afterwards.
func (b *BatchBuilder) Build() ([]byte, error) {
	return b.AppendBuild(make([]byte, 0, BatchHeaderSize+len(b.records)/2+64))
}

// AppendBuild is Build writing the batch at the end of dst (which it may
// grow) and returning dst with the batch, for writers that reuse a buffer.
// The batch is the returned slice's tail from len(dst) on.
func (b *BatchBuilder) AppendBuild(dst []byte) ([]byte, error) {
	if b.count == 0 {
		return nil, ErrEmptyBatch
	}
	start := len(dst)
	dst = append(dst, make([]byte, BatchHeaderSize)...)
	dst, err := AppendCompressed(dst, b.codec, b.records)
	if err != nil {
		return nil, fmt.Errorf("building record batch: %w", err)
	}
	out := dst[start:]
	if int64(len(out))-BatchOverhead > int64(^uint32(0)>>1) {
		return nil, fmt.Errorf("building record batch: %d bytes do not fit a batch", len(out))
	}

	attrs := uint16(b.codec) & AttrCompressionMask
	maxTs := b.maxTimestamp
	if b.logAppendTime {
		attrs |= AttrLogAppendTime
		maxTs = b.appendTimeMs
	}
	if b.transactional {
		attrs |= AttrTransactional
	}
	if b.control {
		attrs |= AttrControl
	}
	if b.deleteHorizonMs >= 0 {
		attrs |= AttrDeleteHorizonSet
	}
	lastDelta := b.lastDelta
	if b.lastDeltaOverride > lastDelta {
		lastDelta = b.lastDeltaOverride
	}

	be := binary.BigEndian
	be.PutUint64(out[batchBaseOffsetPos:], 0)
	be.PutUint32(out[batchLengthPos:], uint32(len(out)-BatchOverhead))
	SetPartitionLeaderEpoch(out, NoPartitionLeaderEpoch)
	out[batchMagicPos] = 2
	be.PutUint16(out[batchAttributesPos:], attrs)
	be.PutUint32(out[batchLastOffsetDeltaPos:], uint32(lastDelta))
	be.PutUint64(out[batchBaseTimestampPos:], uint64(b.baseTimestamp))
	be.PutUint64(out[batchMaxTimestampPos:], uint64(maxTs))
	be.PutUint64(out[batchProducerIDPos:], uint64(b.producerID))
	be.PutUint16(out[batchProducerEpochPos:], uint16(b.producerEpoch))
	be.PutUint32(out[batchBaseSequencePos:], uint32(b.baseSequence))
	be.PutUint32(out[batchRecordCountPos:], uint32(b.count))
	be.PutUint32(out[batchCRCPos:], ComputeBatchCRC(out))
	return dst, nil
}

// EmptyBatch is the header-only batch (no records) the log cleaner keeps
// in place of a batch whose records are all gone but whose producer
// fields and offset range must stay (Kafka's writeEmptyHeader): h's
// offsets, producer, sequence, epoch and timestamp type, no compression,
// both timestamps set to h's max timestamp.
func EmptyBatch(h BatchHeader) []byte {
	out := make([]byte, BatchHeaderSize)
	attrs := uint16(h.Attributes) & (AttrLogAppendTime | AttrTransactional | AttrControl)
	be := binary.BigEndian
	be.PutUint64(out[batchBaseOffsetPos:], uint64(h.BaseOffset))
	be.PutUint32(out[batchLengthPos:], uint32(BatchHeaderSize-BatchOverhead))
	SetPartitionLeaderEpoch(out, h.PartitionLeaderEpoch)
	out[batchMagicPos] = 2
	be.PutUint16(out[batchAttributesPos:], attrs)
	be.PutUint32(out[batchLastOffsetDeltaPos:], uint32(h.LastOffsetDelta))
	be.PutUint64(out[batchBaseTimestampPos:], uint64(h.MaxTimestamp))
	be.PutUint64(out[batchMaxTimestampPos:], uint64(h.MaxTimestamp))
	be.PutUint64(out[batchProducerIDPos:], uint64(h.ProducerID))
	be.PutUint16(out[batchProducerEpochPos:], uint16(h.ProducerEpoch))
	be.PutUint32(out[batchBaseSequencePos:], uint32(h.BaseSequence))
	be.PutUint32(out[batchRecordCountPos:], 0)
	be.PutUint32(out[batchCRCPos:], ComputeBatchCRC(out))
	return out
}

// EndTxnMarkerBatch returns the control batch that ends a transaction on a
// partition: one COMMIT or ABORT record, transactional, no sequence, as
// Kafka's MemoryRecords.withEndTransactionMarker writes it.
func EndTxnMarkerBatch(producerID int64, producerEpoch int16, commit bool, coordinatorEpoch int32, timestampMs int64) []byte {
	typ := ControlAbort
	if commit {
		typ = ControlCommit
	}
	b := NewBatchBuilder(CodecNone).SetProducer(producerID, producerEpoch, NoSequence).SetTransactional(true).SetControl(true)
	b.Add(ControlRecordKey(typ), EndTxnMarkerValue(coordinatorEpoch), nil, timestampMs)
	out, err := b.Build()
	if err != nil {
		// Unreachable: one record, no compression.
		panic(fmt.Sprintf("protocol: building an end transaction marker: %v", err))
	}
	return out
}

// ControlRecordType is the type in a control record's key.
type ControlRecordType int16

// Kafka's control record types.
const (
	ControlAbort          ControlRecordType = 0
	ControlCommit         ControlRecordType = 1
	ControlLeaderChange   ControlRecordType = 2
	ControlSnapshotHeader ControlRecordType = 3
	ControlSnapshotFooter ControlRecordType = 4
	ControlKRaftVersion   ControlRecordType = 5
	ControlKRaftVoters    ControlRecordType = 6
)

// ControlRecordKey is the key of a control record of type t (version 0).
func ControlRecordKey(t ControlRecordType) []byte {
	k := make([]byte, 4)
	binary.BigEndian.PutUint16(k[2:], uint16(t))
	return k
}

// ParseControlRecordKey reads a control record's type. Like Kafka, it
// accepts key versions newer than 0 (their first four bytes keep the
// layout).
func ParseControlRecordKey(key []byte) (ControlRecordType, error) {
	if len(key) < 4 {
		return 0, errInvalidRecord("Invalid value size found for end control record key. Must have at least 4 bytes, but found only %d", len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return 0, errInvalidRecord("Invalid version found for control record: %d. May indicate data corruption", v)
	}
	return ControlRecordType(binary.BigEndian.Uint16(key[2:])), nil
}

// EndTxnMarkerValue is the value of a COMMIT or ABORT control record
// (EndTransactionMarker version 0).
func EndTxnMarkerValue(coordinatorEpoch int32) []byte {
	v := make([]byte, 6)
	binary.BigEndian.PutUint32(v[2:], uint32(coordinatorEpoch))
	return v
}

// ParseEndTxnMarkerValue reads the coordinator epoch from a transaction
// marker's value.
func ParseEndTxnMarkerValue(value []byte) (coordinatorEpoch int32, err error) {
	if len(value) < 2 {
		return 0, errInvalidRecord("Invalid value size found for end transaction marker. Must have at least 6 bytes, but found only %d", len(value))
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 {
		return 0, errInvalidRecord("Invalid version found for end transaction marker: %d. May indicate data corruption", v)
	}
	if len(value) < 6 {
		return 0, errInvalidRecord("Invalid value size found for end transaction marker. Must have at least 6 bytes, but found only %d", len(value))
	}
	return int32(binary.BigEndian.Uint32(value[2:])), nil
}
