package protocol

// The record-batch codec: records.go iterates the records of a v2 batch,
// compression.go holds the four codecs, validate.go applies Kafka's produce
// validation, builder.go writes batches.
//
// Concurrency: every function here works on the caller's buffers and may be
// called from any number of goroutines. The only shared state is caches of
// reusable codec state (sync.Pools and the zstd encoder, whose EncodeAll is
// safe for concurrent use); nothing in them outlives a call.

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// RecordHeader is one record header. Value is nil when the header value is
// null; a header key is never null.
type RecordHeader struct {
	Key, Value []byte
}

// Record is one record of a v2 batch, as it sits on the wire. Key and Value
// are nil when null. The byte slices alias the batch or the decompression
// scratch buffer: they are valid only until the next record is read (or,
// with ForEachRecord, until fn returns).
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key, Value     []byte
	Headers        []RecordHeader
}

// RecordReader walks the records section of one batch (already
// decompressed). The zero value is ready for Reset; a RecordReader can be
// reused across batches, so that iterating allocates nothing once its header
// slice has grown to the largest header count seen.
type RecordReader struct {
	data    []byte
	pos     int
	left    int32 // records the batch header says are still to come
	index   int32 // index of the next record in its batch
	skipHdr bool
	headers []RecordHeader
	rec     Record // handed to ForEachRecord's callback, so it needs no allocation
}

// Reset points the reader at a records section holding count records. With
// skipHeaders set, Next checks the headers' structure but leaves
// Record.Headers nil, which keeps validation free of any allocation.
func (rr *RecordReader) Reset(records []byte, count int32, skipHeaders bool) {
	rr.data = records
	rr.pos = 0
	rr.left = count
	rr.index = 0
	rr.skipHdr = skipHeaders
}

// Index is the index in its batch of the record Next returns next.
func (rr *RecordReader) Index() int32 { return rr.index }

// errInvalidRecord builds the INVALID_RECORD error Kafka's DefaultRecord
// parser raises for a malformed record.
func errInvalidRecord(format string, args ...any) error {
	return &ValidationError{Code: kerr.InvalidRecord, Message: fmt.Sprintf(format, args...)}
}

// Next decodes the next record into r. It returns io.EOF after the last
// record, having checked that no bytes are left over. Malformed records
// give errors that unwrap to kerr.InvalidRecord, with Kafka's messages.
func (rr *RecordReader) Next(r *Record) error {
	if rr.left <= 0 {
		if rr.pos != len(rr.data) {
			return errInvalidRecord("Incorrect declared batch size, records still remaining in file")
		}
		return io.EOF
	}
	size, n := binary.Varint(rr.data[rr.pos:])
	if n <= 0 || n > 5 || size < 0 || size > int64(len(rr.data)-rr.pos-n) {
		if n <= 0 {
			return errInvalidRecord("Incorrect declared batch size, premature EOF reached")
		}
		return errInvalidRecord("Invalid record size: expected %d bytes in record payload, but instead the buffer has only %d remaining bytes", size, len(rr.data)-rr.pos-max(n, 0))
	}
	body := rr.data[rr.pos+n : rr.pos+n+int(size)]
	if err := rr.parseBody(body, r); err != nil {
		return err
	}
	rr.pos += n + int(size)
	rr.left--
	rr.index++
	return nil
}

// parseBody decodes a record body, which must be consumed exactly.
func (rr *RecordReader) parseBody(b []byte, r *Record) error {
	structure := func() error { return errInvalidRecord("Found invalid record structure") }
	if len(b) < 1 {
		return structure()
	}
	r.Attributes = int8(b[0])
	p := 1
	ts, n := binary.Varint(b[p:])
	if n <= 0 {
		return structure()
	}
	r.TimestampDelta = ts
	p += n
	od, n := varint32(b[p:])
	if n <= 0 {
		return structure()
	}
	r.OffsetDelta = od
	p += n
	var ok bool
	if r.Key, p, ok = nullableBytes(b, p); !ok {
		return structure()
	}
	if r.Value, p, ok = nullableBytes(b, p); !ok {
		return structure()
	}
	count, n := varint32(b[p:])
	if n <= 0 {
		return structure()
	}
	p += n
	if count < 0 {
		return errInvalidRecord("Found invalid number of record headers %d", count)
	}
	// Each header takes at least two bytes: a bound that keeps a lying
	// count from sizing the header slice.
	if int(count) > (len(b)-p)/2 {
		return errInvalidRecord("Found invalid number of record headers. %d is larger than the remaining size of the buffer", count)
	}
	r.Headers = nil
	if !rr.skipHdr {
		rr.headers = rr.headers[:0]
	}
	for range count {
		kl, n := varint32(b[p:])
		if n <= 0 {
			return structure()
		}
		p += n
		if kl < 0 {
			return errInvalidRecord("Invalid negative header key size %d", kl)
		}
		if int(kl) > len(b)-p {
			return structure()
		}
		key := b[p : p+int(kl) : p+int(kl)]
		p += int(kl)
		var val []byte
		if val, p, ok = nullableBytes(b, p); !ok {
			return structure()
		}
		if !rr.skipHdr {
			rr.headers = append(rr.headers, RecordHeader{Key: key, Value: val})
		}
	}
	if p != len(b) {
		return errInvalidRecord("Invalid record size: expected to read %d bytes in record payload, but instead read %d", len(b), p)
	}
	if !rr.skipHdr && count > 0 {
		r.Headers = rr.headers
	}
	return nil
}

// varint32 decodes a zigzag varint that must fit an int32 (at most five
// bytes), as Kafka's ByteUtils.readVarint requires.
func varint32(b []byte) (int32, int) {
	v, n := binary.Varint(b)
	if n <= 0 || n > 5 || v != int64(int32(v)) {
		return 0, -1
	}
	return int32(v), n
}

// nullableBytes reads a varint length and that many bytes at b[p:]. As in
// Kafka, any negative length means null.
func nullableBytes(b []byte, p int) ([]byte, int, bool) {
	l, n := varint32(b[p:])
	if n <= 0 {
		return nil, p, false
	}
	p += n
	if l < 0 {
		return nil, p, true
	}
	if int(l) > len(b)-p {
		return nil, p, false
	}
	return b[p : p+int(l) : p+int(l)], p + int(l), true
}

// RecordsSection returns the records of one whole batch, decompressed into
// *scratch (grown as needed; the caller owns it and may reuse it) when the
// batch is compressed, or aliasing batch otherwise. limit bounds the
// decompressed size (<= 0: DefaultMaxDecompressedBytes). Decompression
// failures unwrap to kerr.CorruptMessage, an unknown codec to
// kerr.UnsupportedCompressionType.
func RecordsSection(batch []byte, h BatchHeader, scratch *[]byte, limit int) ([]byte, error) {
	raw := batch[BatchHeaderSize:]
	codec := h.Codec()
	if codec == CodecNone {
		return raw, nil
	}
	if !codec.Valid() {
		return nil, &ValidationError{Code: kerr.UnsupportedCompressionType,
			Message: fmt.Sprintf("Unknown compression type id: %d", int8(codec))}
	}
	var buf []byte
	if scratch != nil {
		buf = (*scratch)[:0]
	}
	out, err := AppendDecompressed(buf, codec, raw, limit)
	if scratch != nil && cap(out) > cap(*scratch) {
		*scratch = out[:0]
	}
	if err != nil {
		return nil, &ValidationError{Code: kerr.CorruptMessage,
			Message: fmt.Sprintf("Failed to decompress %s record batch: %v", codec, err), cause: err}
	}
	return out, nil
}

// parseWholeBatch checks that batch is exactly one v2 batch and returns its
// header.
func parseWholeBatch(batch []byte) (BatchHeader, error) {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return h, err
	}
	if h.Magic != 2 {
		return h, fmt.Errorf("record batch magic %d is not 2", h.Magic)
	}
	if h.TotalSize() != int64(len(batch)) {
		return h, fmt.Errorf("record batch length %d does not match the %d bytes given", h.Length, len(batch))
	}
	if err := checkRecordCount(h); err != nil {
		return h, err
	}
	return h, nil
}

// checkRecordCount is the check Kafka's record iterator makes first.
func checkRecordCount(h BatchHeader) error {
	if h.NumRecords < 0 {
		return errInvalidRecord("Found invalid record count %d in magic v%d batch", h.NumRecords, h.Magic)
	}
	return nil
}

var recordReaders = sync.Pool{New: func() any { return new(RecordReader) }}

// ForEachRecord calls fn for each record of one whole v2 batch, in order,
// stopping at the first error fn returns (which ForEachRecord returns).
// Compressed batches are decompressed into *scratch, which the caller owns
// and can reuse across calls (nil: a temporary buffer). The Record and its
// slices are only valid during fn. The CRC is not checked here
// (CheckBatchCRC); the record count and structure are.
func ForEachRecord(batch []byte, scratch *[]byte, fn func(r *Record) error) error {
	h, err := parseWholeBatch(batch)
	if err != nil {
		return err
	}
	data, err := RecordsSection(batch, h, scratch, 0)
	if err != nil {
		return err
	}
	rr := recordReaders.Get().(*RecordReader)
	defer func() {
		rr.Reset(nil, 0, false)
		rr.rec = Record{}
		clear(rr.headers)
		recordReaders.Put(rr)
	}()
	rr.Reset(data, h.NumRecords, false)
	rec := &rr.rec
	for {
		err := rr.Next(rec)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
}
