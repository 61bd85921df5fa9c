package protocol

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// RecordError names one bad record inside a batch (ProduceResponse
// RecordErrors: BatchIndex is the record's index in its batch).
type RecordError struct {
	BatchIndex int32
	Message    string
}

// String matches Kafka's RecordError.toString, which ends up inside the
// top-level error message.
func (e RecordError) String() string {
	return fmt.Sprintf("RecordError(batchIndex=%d, message='%s')", e.BatchIndex, e.Message)
}

// ValidationError is a Kafka error code with the message Kafka would put in
// the response's ErrorMessage. It unwraps to the *kerr.Error (use errors.As
// or errors.Is) and to the underlying cause, if any.
type ValidationError struct {
	Code    *kerr.Error
	Message string
	cause   error
}

func (e *ValidationError) Error() string { return e.Code.Message + ": " + e.Message }

func (e *ValidationError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.Code, e.cause}
	}
	return []error{e.Code}
}

func validationErr(code *kerr.Error, format string, args ...any) *ValidationError {
	return &ValidationError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// TargetCodecProducer is ValidateOptions.TargetCodec for
// compression.type=producer: keep whatever codec the producer used.
const TargetCodecProducer Codec = -1

// ValidateOptions are the topic and broker settings a batch is checked
// against. The zero value is not a useful configuration: callers fill every
// field from the topic's config (Kafka's defaults are
// message.timestamp.before.max.ms=Long.MAX_VALUE,
// message.timestamp.after.max.ms=3600000, max.message.bytes=1048588,
// compression.type=producer).
type ValidateOptions struct {
	NowMs                int64
	LogAppendTime        bool  // message.timestamp.type=LogAppendTime
	TimestampBeforeMaxMs int64 // message.timestamp.before.max.ms
	TimestampAfterMaxMs  int64 // message.timestamp.after.max.ms
	Compacted            bool  // cleanup.policy has compact: keyless records are INVALID_RECORD
	MaxBatchBytes        int32 // max.message.bytes; <= 0 disables the check
	// TargetCodec is compression.type: TargetCodecProducer (-1) for
	// "producer" (keep the producer's codec), else the codec the broker
	// must store.
	TargetCodec Codec
	// Origin client: control batches from clients are refused, and the
	// client-only header checks (base offset 0, offset range, count,
	// sequence) apply.
	FromClient bool

	// ProduceVersion is the Produce request version the batch came in,
	// 0 when unknown. Versions 3-6 may not use zstd.
	ProduceVersion int16
	// SegmentBytes is segment.bytes; a batch that cannot fit in one
	// segment is RECORD_LIST_TOO_LARGE. <= 0 disables the check.
	SegmentBytes int32
	// MaxDecompressedBytes bounds the decompressed records of one batch;
	// <= 0 means DefaultMaxDecompressedBytes.
	MaxDecompressedBytes int
	// Topic and Partition only name the partition in error messages.
	Topic     string
	Partition int32
}

func (o *ValidateOptions) topicPartition() string {
	return fmt.Sprintf("%s-%d", o.Topic, o.Partition)
}

// BatchInfo is what validation learned about a batch.
type BatchInfo struct {
	// Header is the header of the batch returned as out, after any
	// timestamp fix-up or rewrite.
	Header BatchHeader
	// MaxTimestamp and OffsetDeltaOfMaxTimestamp locate the earliest
	// record holding the largest timestamp: what ListOffsets with
	// MAX_TIMESTAMP must answer (KAFKA-16310). Under LogAppendTime every
	// record has the append time, so the offset delta is 0. Kafka's time
	// index instead uses the batch's last offset (Header.LastOffsetDelta).
	MaxTimestamp              int64
	OffsetDeltaOfMaxTimestamp int32
	// Rewritten is true when out is a new batch (recompressed, or offset
	// deltas renumbered) rather than the input.
	Rewritten bool
}

// noTimestamp is Kafka's RecordBatch.NO_TIMESTAMP.
const noTimestamp = -1

// scratchBuffers holds decompression buffers for compressed batches.
var scratchBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledScratch keeps one outsized batch from pinning its buffer
// forever. It leaves room for the common worst case: a batch near the
// default max.message.bytes inflating a few times, decoded with room for
// one more 4 MiB LZ4 block (the Go lz4 writer's default block size).
const maxPooledScratch = 16 << 20

// ValidateBatch checks one v2 record batch sent for a partition the way
// Kafka 4.3 does (ProduceRequest.validateRecords, UnifiedLog's
// analyzeAndValidateRecords and LogValidator) and returns the batch to
// store: the input itself, or a rebuilt batch when TargetCodec differs from
// the batch's codec or the record offset deltas are not 0,1,2,... (Kafka
// rewrites those too rather than refusing old clients).
//
// batch is the partition's records from the Produce request. As in Kafka it
// must hold exactly one batch; trailing bytes too short to be another batch
// are dropped (out excludes them).
//
// When the input is stored as is, ValidateBatch updates its header in place:
// the max timestamp and timestamp type (LogAppendTime, or the true max of a
// CreateTime batch) and the CRC, as Kafka does. Uncompressed and LZ4
// batches are validated without allocating: compressed ones decompress into
// a pooled scratch buffer that is written over, not cleared, and only its
// growth allocates. The CRC is computed once unless a stamp inside it
// changes.
//
// Errors are *ValidationError values unwrapping to *kerr.Error:
// INVALID_RECORD, CORRUPT_MESSAGE, INVALID_TIMESTAMP, MESSAGE_TOO_LARGE,
// RECORD_LIST_TOO_LARGE, UNSUPPORTED_COMPRESSION_TYPE. With INVALID_RECORD
// or INVALID_TIMESTAMP caused by individual records, recordErrors lists
// each bad record as Kafka's ProduceResponse does.
func ValidateBatch(batch []byte, opts ValidateOptions) (out []byte, info BatchInfo, recordErrors []RecordError, err error) {
	first, err := splitSingleBatch(batch, &opts)
	if err != nil {
		return nil, info, nil, err
	}
	h, err := ParseBatchHeader(first)
	if err != nil {
		// splitSingleBatch guarantees the header size, but a header
		// parse error must never be ignored.
		return nil, info, nil, validationErr(kerr.CorruptMessage, "Record batch is corrupt: %v", err)
	}
	return validateBatch(Batch{Bytes: first, Header: h}, &opts)
}

// ValidateParsedBatch is ValidateBatch for a batch already split off and
// parsed (by ParseProduceBatch or NextBatch): its header is used as it is,
// not parsed again. b must be exactly one whole v2 batch with its own
// header, as those functions return it.
func ValidateParsedBatch(b Batch, opts ValidateOptions) (out []byte, info BatchInfo, recordErrors []RecordError, err error) {
	if b.Header.Magic != 2 || b.Header.TotalSize() != int64(len(b.Bytes)) || len(b.Bytes) < BatchHeaderSize {
		return nil, info, nil, validationErr(kerr.CorruptMessage, "Record batch is corrupt: header does not describe the %d bytes given", len(b.Bytes))
	}
	if err := checkCodec(b.Header.Codec(), &opts); err != nil {
		return nil, info, nil, err
	}
	return validateBatch(b, &opts)
}

// validateBatch is ValidateBatch after the batch has been split off and its
// header parsed and its codec checked.
func validateBatch(b Batch, opts *ValidateOptions) (out []byte, info BatchInfo, recordErrors []RecordError, err error) {
	h := b.Header
	if err := checkBatchHeader(b.Bytes, h, opts); err != nil {
		return nil, info, nil, err
	}
	if err := checkRecordCount(h); err != nil {
		return nil, info, nil, err
	}

	codec := h.Codec()
	var scratch *[]byte
	if codec != CodecNone {
		scratch = scratchBuffers.Get().(*[]byte)
		defer putScratch(scratch)
	}
	records, err := RecordsSection(b.Bytes, h, scratch, opts.MaxDecompressedBytes)
	if err != nil {
		return nil, info, nil, err
	}

	target := codec
	if opts.TargetCodec != TargetCodecProducer {
		target = opts.TargetCodec
		if !target.Valid() {
			return nil, info, nil, validationErr(kerr.UnsupportedCompressionType, "Unknown compression type id: %d", int8(target))
		}
	}
	// Kafka never compresses control batches that were written
	// uncompressed.
	if codec == CodecNone && h.IsControl() {
		target = CodecNone
	}

	scan, err := scanRecords(records, h, opts)
	if err != nil {
		return nil, info, scan.recordErrors, err
	}

	info.MaxTimestamp = scan.maxTimestamp
	info.OffsetDeltaOfMaxTimestamp = scan.offsetDeltaOfMax
	if opts.LogAppendTime {
		info.MaxTimestamp = opts.NowMs
		info.OffsetDeltaOfMaxTimestamp = 0
	}

	// A batch without records (only the broker's own writers may send
	// one) has nothing to rewrite.
	if (target == codec && scan.denseOffsets) || h.NumRecords == 0 {
		if opts.LogAppendTime {
			b.SetLogAppendTime(opts.NowMs)
		} else {
			b.setCreateTimeMax(scan.maxTimestamp)
		}
		info.Header = b.Header
		out = b.Bytes
	} else {
		out, err = rebuildBatch(records, h, target, opts)
		if err != nil {
			return nil, BatchInfo{}, nil, err
		}
		// A new batch: its header is parsed once, here.
		info.Header, _ = ParseBatchHeader(out)
		info.Rewritten = true
		if opts.MaxBatchBytes > 0 && len(out) > int(opts.MaxBatchBytes) {
			return nil, BatchInfo{}, nil, validationErr(kerr.MessageTooLarge,
				"Message batch size is %d bytes in append to partition %s which exceeds the maximum configured size of %d.",
				len(out), opts.topicPartition(), opts.MaxBatchBytes)
		}
	}
	if opts.SegmentBytes > 0 && len(out) > int(opts.SegmentBytes) {
		return nil, BatchInfo{}, nil, validationErr(kerr.RecordListTooLarge,
			"Message batch size is %d bytes in append to partition %s, which exceeds the maximum configured segment size of %d.",
			len(out), opts.topicPartition(), opts.SegmentBytes)
	}
	return out, info, nil, nil
}

func putScratch(scratch *[]byte) {
	if cap(*scratch) <= maxPooledScratch {
		*scratch = (*scratch)[:0]
		scratchBuffers.Put(scratch)
	}
}

// ParseProduceBatch applies the rule a Produce v3+ handler checks before
// the partition's log sees the records (Kafka's
// ProduceRequest.validateRecords): exactly one record batch, of magic 2,
// and zstd only from Produce v7. It returns the batch with its header
// parsed, so that ValidateParsedBatch and the log append reuse the header
// instead of parsing it again.
//
// Errors are *ValidationError values: INVALID_RECORD with the message the
// Produce response carries, or UNSUPPORTED_COMPRESSION_TYPE with an empty
// message (the response then carries none).
func ParseProduceBatch(records []byte, version int16) (Batch, error) {
	if len(records) == 0 {
		return Batch{}, validationErr(kerr.InvalidRecord,
			"Produce requests with version %d must have at least one record batch per partition", version)
	}
	batch, rest, h, err := NextBatch(records)
	if err != nil {
		if batch != nil {
			return Batch{}, validationErr(kerr.InvalidRecord,
				"Produce requests with version %d are only allowed to contain record batches with magic version 2", version)
		}
		return Batch{}, validationErr(kerr.InvalidRecord, "invalid record batch: %v", err)
	}
	if h.Codec() == CodecZstd && version < 7 {
		return Batch{}, &ValidationError{Code: kerr.UnsupportedCompressionType}
	}
	if len(rest) != 0 {
		return Batch{}, validationErr(kerr.InvalidRecord,
			"Produce requests with version %d are only allowed to contain exactly one record batch per partition", version)
	}
	return Batch{Bytes: batch, Header: h}, nil
}

// headerSizeUpToMagic is how much of a batch Kafka's log input stream needs
// to see before it treats the bytes as a batch at all.
const headerSizeUpToMagic = 17

// minRecordOverhead is Kafka's LegacyRecord.RECORD_OVERHEAD_V0: a length
// field below it is corrupt whatever the magic.
const minRecordOverhead = 14

// splitSingleBatch applies ProduceRequest.validateRecords and Kafka's batch
// iterator to the partition's records and returns the one whole batch.
func splitSingleBatch(b []byte, opts *ValidateOptions) ([]byte, error) {
	first, ok, err := peekBatch(b)
	if err != nil {
		return nil, err
	}
	if !ok {
		if opts.ProduceVersion >= 3 {
			return nil, validationErr(kerr.InvalidRecord,
				"Produce requests with version %d must have at least one record batch per partition", opts.ProduceVersion)
		}
		return nil, validationErr(kerr.InvalidRecord, "Record batch has no batches at all")
	}
	if magic := int8(first[batchMagicPos]); magic != 2 {
		if opts.ProduceVersion >= 3 {
			return nil, validationErr(kerr.InvalidRecord,
				"Produce requests with version %d are only allowed to contain record batches with magic version 2", opts.ProduceVersion)
		}
		// Kafka 4 no longer writes magic 0 and 1 at all.
		return nil, validationErr(kerr.InvalidRecord, "Record batch magic %d is not supported: only magic 2 is", magic)
	}
	if len(first) < BatchHeaderSize {
		return nil, validationErr(kerr.CorruptMessage,
			"Record batch is corrupt (the size %d is smaller than the minimum allowed overhead %d)", len(first), BatchHeaderSize)
	}
	codec := Codec(binary.BigEndian.Uint16(first[batchAttributesPos:]) & AttrCompressionMask)
	if err := checkCodec(codec, opts); err != nil {
		return nil, err
	}
	_, more, err := peekBatch(b[len(first):])
	if err != nil {
		return nil, err
	}
	if more {
		return nil, validationErr(kerr.InvalidRecord,
			"Produce requests with version %d are only allowed to contain exactly one record batch per partition", opts.ProduceVersion)
	}
	return first, nil
}

// checkCodec refuses codec ids Kafka does not define, and zstd before
// Produce v7.
func checkCodec(codec Codec, opts *ValidateOptions) error {
	if !codec.Valid() {
		return validationErr(kerr.UnsupportedCompressionType, "Unknown compression type id: %d", int8(codec))
	}
	if codec == CodecZstd && opts.ProduceVersion > 0 && opts.ProduceVersion < 7 {
		return validationErr(kerr.UnsupportedCompressionType,
			"Produce requests with version %d are not allowed to use ZStandard compression", opts.ProduceVersion)
	}
	return nil
}

// peekBatch mirrors Kafka's ByteBufferLogInputStream.nextBatch: fewer than
// 17 bytes, or fewer than the length field promises, is "no batch"; a length
// below the minimum overhead is corrupt.
func peekBatch(b []byte) ([]byte, bool, error) {
	if len(b) < headerSizeUpToMagic {
		return nil, false, nil
	}
	size := int32(binary.BigEndian.Uint32(b[batchLengthPos:]))
	if size < minRecordOverhead {
		return nil, false, validationErr(kerr.CorruptMessage,
			"Record size %d is less than the minimum record overhead (%d)", size, minRecordOverhead)
	}
	total := int64(size) + BatchOverhead
	if int64(len(b)) < total {
		return nil, false, nil
	}
	return b[:total], true, nil
}

// checkBatchHeader applies the header-only checks of UnifiedLog's
// analyzeAndValidateRecords and LogValidator.validateBatch, in Kafka's
// order.
func checkBatchHeader(batch []byte, h BatchHeader, opts *ValidateOptions) error {
	if opts.FromClient && h.BaseOffset != 0 {
		return validationErr(kerr.InvalidRecord,
			"The baseOffset of the record batch in the append to %s should be 0, but it is %d", opts.topicPartition(), h.BaseOffset)
	}
	if opts.MaxBatchBytes > 0 && len(batch) > int(opts.MaxBatchBytes) {
		return validationErr(kerr.MessageTooLarge,
			"The record batch size in the append to %s is %d bytes which exceeds the maximum configured value of %d.",
			opts.topicPartition(), len(batch), opts.MaxBatchBytes)
	}
	if !CheckBatchCRC(batch) {
		return validationErr(kerr.CorruptMessage,
			"Record is corrupt (stored crc = %d, computed crc = %d) in topic partition %s.", h.CRC, ComputeBatchCRC(batch), opts.topicPartition())
	}
	if !opts.FromClient {
		return nil
	}
	countFromOffsets := int64(h.LastOffsetDelta) + 1
	if countFromOffsets <= 0 {
		return validationErr(kerr.InvalidRecord, "Batch has an invalid offset range: [%d, %d] in topic partition %s",
			h.BaseOffset, h.LastOffset(), opts.topicPartition())
	}
	if h.NumRecords <= 0 {
		return validationErr(kerr.InvalidRecord, "Invalid reported count for record batch: %d in topic partition %s",
			h.NumRecords, opts.topicPartition())
	}
	if countFromOffsets != int64(h.NumRecords) {
		return validationErr(kerr.InvalidRecord, "Inconsistent batch offset range [%d, %d] and count of records %d in topic partition %s",
			h.BaseOffset, h.LastOffset(), h.NumRecords, opts.topicPartition())
	}
	if h.IsControl() {
		return validationErr(kerr.InvalidRecord, "Clients are not allowed to write control records in topic partition %s", opts.topicPartition())
	}
	if h.HasProducerID() && h.BaseSequence < 0 {
		return validationErr(kerr.InvalidRecord, "Invalid sequence number %d in record batch with producerId %d in topic partition %s",
			h.BaseSequence, h.ProducerID, opts.topicPartition())
	}
	// Kafka stores such a batch and then cannot track its transaction
	// (no producer state without a producer id), leaving it neither
	// committed nor aborted. Gregor refuses it.
	if h.IsTransactional() && !h.HasProducerID() {
		return validationErr(kerr.InvalidRecord, "Transactional record batch has no producer id in topic partition %s", opts.topicPartition())
	}
	return nil
}

// recordScan is what one pass over the records learned.
type recordScan struct {
	maxTimestamp     int64
	offsetDeltaOfMax int32
	denseOffsets     bool
	recordErrors     []RecordError
}

// scanRecords parses every record and applies LogValidator's per-record
// checks (key on compacted topics, timestamp bounds).
func scanRecords(records []byte, h BatchHeader, opts *ValidateOptions) (recordScan, error) {
	scan := recordScan{maxTimestamp: noTimestamp, denseOffsets: true}
	var rr RecordReader
	rr.Reset(records, h.NumRecords, true)
	var rec Record
	var invalidTimestamp bool
	for {
		index := rr.Index()
		err := rr.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			// A structural error ends the batch before Kafka gets to
			// report per-record problems.
			scan.recordErrors = nil
			return scan, err
		}
		if rec.OffsetDelta != index {
			scan.denseOffsets = false
		}
		ts := h.BaseTimestamp + rec.TimestampDelta
		if h.LogAppendTime() {
			// Kafka reads every record of a LogAppendTime batch as
			// having the batch's max timestamp.
			ts = h.MaxTimestamp
		}
		if msg, bad := checkRecord(&rec, ts, h, opts); bad {
			if msg.timestamp {
				invalidTimestamp = true
			}
			scan.recordErrors = append(scan.recordErrors, RecordError{BatchIndex: index, Message: msg.text})
			continue
		}
		if ts > scan.maxTimestamp {
			scan.maxTimestamp = ts
			// The index, not the record's own delta: the two differ
			// only when the batch is renumbered on rebuild.
			scan.offsetDeltaOfMax = index
		}
	}
	if len(scan.recordErrors) == 0 {
		return scan, nil
	}
	if invalidTimestamp {
		return scan, &ValidationError{Code: kerr.InvalidTimestamp,
			Message: "One or more records have been rejected due to invalid timestamp"}
	}
	shown := scan.recordErrors[:min(3, len(scan.recordErrors))]
	parts := make([]string, len(shown))
	for i, e := range shown {
		parts[i] = e.String()
	}
	return scan, validationErr(kerr.InvalidRecord,
		"One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [%s]",
		len(scan.recordErrors), strings.Join(parts, ", "))
}

type recordProblem struct {
	text      string
	timestamp bool // INVALID_TIMESTAMP rather than INVALID_RECORD
}

// checkRecord is LogValidator.validateKey then validateTimestamp.
func checkRecord(rec *Record, ts int64, h BatchHeader, opts *ValidateOptions) (recordProblem, bool) {
	if opts.Compacted && rec.Key == nil {
		return recordProblem{text: "Compacted topic cannot accept message without key in topic partition " + opts.topicPartition()}, true
	}
	offset := h.BaseOffset + int64(rec.OffsetDelta)
	if !opts.LogAppendTime && ts != noTimestamp {
		// Same arithmetic as Kafka, overflow included.
		diff := opts.NowMs - ts
		if diff > opts.TimestampBeforeMaxMs || -diff > opts.TimestampAfterMaxMs {
			return recordProblem{timestamp: true, text: fmt.Sprintf(
				"Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]",
				ts, offset, opts.NowMs-opts.TimestampBeforeMaxMs, opts.NowMs+opts.TimestampAfterMaxMs)}, true
		}
	} else if h.LogAppendTime() {
		return recordProblem{timestamp: true, text: fmt.Sprintf(
			"Invalid timestamp type in message DefaultRecord(offset=%d, timestamp=%d, key=%d bytes, value=%d bytes). Producer should not set timestamp type to LogAppendTime.",
			offset, ts, len(rec.Key), len(rec.Value))}, true
	}
	return recordProblem{}, false
}

// setCreateTimeMax is Kafka's setMaxTimestamp(CREATE_TIME, ts): it leaves
// the batch untouched when it already says so, else fixes the attributes,
// max timestamp and CRC, in the bytes and the header.
func (b *Batch) setCreateTimeMax(ts int64) {
	if !b.Header.LogAppendTime() && b.Header.MaxTimestamp == ts {
		return
	}
	b.Header.Attributes &^= AttrLogAppendTime
	b.Header.MaxTimestamp = ts
	be := binary.BigEndian
	be.PutUint16(b.Bytes[batchAttributesPos:], uint16(b.Header.Attributes))
	be.PutUint64(b.Bytes[batchMaxTimestampPos:], uint64(ts))
	b.Header.CRC = ComputeBatchCRC(b.Bytes)
	be.PutUint32(b.Bytes[batchCRCPos:], b.Header.CRC)
}

// rebuildBatch writes the (already validated) records into a new batch with
// the target codec and dense offset deltas, keeping the producer fields and
// every record's timestamp, as Kafka's buildRecordsAndAssignOffsets does.
func rebuildBatch(records []byte, h BatchHeader, target Codec, opts *ValidateOptions) ([]byte, error) {
	b := NewBatchBuilder(target)
	if h.HasProducerID() {
		b.SetProducer(h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	}
	b.SetTransactional(h.IsTransactional())
	b.SetControl(h.IsControl())
	if opts.LogAppendTime {
		b.SetLogAppendTime(opts.NowMs)
	}
	var rr RecordReader
	rr.Reset(records, h.NumRecords, false)
	var rec Record
	for {
		err := rr.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		ts := h.BaseTimestamp + rec.TimestampDelta
		if h.LogAppendTime() {
			ts = h.MaxTimestamp
		}
		b.Add(rec.Key, rec.Value, rec.Headers, ts)
	}
	out, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("rebuilding record batch as %s: %w", target, err)
	}
	return out, nil
}
