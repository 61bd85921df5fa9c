package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const now = int64(1_700_000_000_000)

// recs returns n keyed records stamped at ts.
func recsAt(n int, ts int64) []testRecord {
	out := make([]testRecord, n)
	for i := range out {
		out[i] = testRecord{key: []byte{'k', byte(i)}, value: bytes.Repeat([]byte{byte(i)}, 20), ts: ts}
	}
	return out
}

// reCRC recomputes the CRC after a test edits the header.
func reCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[batchCRCPos:], ComputeBatchCRC(b))
	return b
}

func TestValidateBatchErrors(t *testing.T) {
	valid := func() []byte { return buildBatch(t, CodecNone, recsAt(3, now)) }
	idempotent := func() []byte {
		b := NewBatchBuilder(CodecNone).SetProducer(5, 0, 0)
		b.Add([]byte("k"), []byte("v"), nil, now)
		out, _ := b.Build()
		return out
	}
	type edit func(b []byte) []byte
	put32 := func(pos int, v int32) edit {
		return func(b []byte) []byte { binary.BigEndian.PutUint32(b[pos:], uint32(v)); return reCRC(b) }
	}
	tests := []struct {
		name  string
		batch func() []byte
		edit  edit
		opts  func(o *ValidateOptions)
		code  *kerr.Error
		msg   string
	}{
		{name: "empty", batch: func() []byte { return nil }, code: kerr.InvalidRecord, msg: "must have at least one record batch"},
		{name: "truncated", batch: valid, edit: func(b []byte) []byte { return b[:len(b)-1] }, code: kerr.InvalidRecord, msg: "at least one record batch"},
		{name: "length below minimum overhead", batch: valid, edit: put32(batchLengthPos, 13), code: kerr.CorruptMessage, msg: "less than the minimum record overhead"},
		{name: "length below v2 header", batch: valid, edit: func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[batchLengthPos:], 20)
			return b[:32]
		}, code: kerr.CorruptMessage, msg: "smaller than the minimum allowed overhead 61"},
		{name: "magic 1", batch: valid, edit: func(b []byte) []byte { b[batchMagicPos] = 1; return b }, code: kerr.InvalidRecord, msg: "magic version 2"},
		{name: "two batches", batch: valid, edit: func(b []byte) []byte { return append(b, b...) }, code: kerr.InvalidRecord, msg: "exactly one record batch"},
		{name: "garbage second batch length", batch: valid, edit: func(b []byte) []byte {
			return append(b, make([]byte, 17)...)
		}, code: kerr.CorruptMessage, msg: "Record size 0 is less than the minimum"},
		{name: "codec 7", batch: valid, edit: func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[batchAttributesPos:], 7)
			return reCRC(b)
		}, code: kerr.UnsupportedCompressionType, msg: "Unknown compression type id: 7"},
		{name: "zstd on produce v6", batch: func() []byte { return buildBatch(t, CodecZstd, recsAt(2, now)) },
			opts: func(o *ValidateOptions) { o.ProduceVersion = 6 }, code: kerr.UnsupportedCompressionType, msg: "not allowed to use ZStandard"},
		{name: "base offset not zero", batch: valid, edit: func(b []byte) []byte { SetBaseOffset(b, 5); return b },
			code: kerr.InvalidRecord, msg: "should be 0, but it is 5"},
		{name: "larger than max.message.bytes", batch: valid, opts: func(o *ValidateOptions) { o.MaxBatchBytes = 100 },
			code: kerr.MessageTooLarge, msg: "exceeds the maximum configured value of 100"},
		{name: "bad crc", batch: valid, edit: func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, code: kerr.CorruptMessage, msg: "Record is corrupt (stored crc"},
		{name: "negative last offset delta", batch: valid, edit: put32(batchLastOffsetDeltaPos, -1), code: kerr.InvalidRecord, msg: "invalid offset range"},
		{name: "zero count", batch: valid, edit: put32(batchRecordCountPos, 0), code: kerr.InvalidRecord, msg: "Invalid reported count for record batch: 0"},
		{name: "count disagrees with offsets", batch: valid, edit: put32(batchRecordCountPos, 2), code: kerr.InvalidRecord, msg: "Inconsistent batch offset range [0, 2] and count of records 2"},
		{name: "count above records present", batch: valid, edit: func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[batchRecordCountPos:], 4)
			binary.BigEndian.PutUint32(b[batchLastOffsetDeltaPos:], 3)
			return reCRC(b)
		}, code: kerr.InvalidRecord, msg: "premature EOF"},
		{name: "control batch from client", batch: valid, edit: func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[batchAttributesPos:], AttrControl)
			return reCRC(b)
		}, code: kerr.InvalidRecord, msg: "not allowed to write control records"},
		{name: "idempotent without sequence", batch: idempotent, edit: put32(batchBaseSequencePos, -1), code: kerr.InvalidRecord, msg: "Invalid sequence number -1"},
		{name: "transactional without producer", batch: valid, edit: func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[batchAttributesPos:], AttrTransactional)
			return reCRC(b)
		}, code: kerr.InvalidRecord, msg: "no producer id"},
		{name: "corrupt compressed payload", batch: func() []byte { return buildBatch(t, CodecGzip, recsAt(3, now)) }, edit: func(b []byte) []byte {
			b[BatchHeaderSize] ^= 0xFF
			return reCRC(b)
		}, code: kerr.CorruptMessage, msg: "Failed to decompress gzip"},
		{name: "decompression bomb", batch: func() []byte {
			return buildBatch(t, CodecZstd, []testRecord{{key: []byte("k"), value: make([]byte, 1<<20), ts: now}})
		}, opts: func(o *ValidateOptions) { o.MaxDecompressedBytes = 64 << 10 }, code: kerr.CorruptMessage, msg: "exceed the size limit"},
		{name: "bigger than a segment", batch: valid, opts: func(o *ValidateOptions) { o.SegmentBytes = 100 },
			code: kerr.RecordListTooLarge, msg: "maximum configured segment size of 100"},
		{name: "recompressed batch too large", batch: func() []byte {
			return buildBatch(t, CodecZstd, []testRecord{{key: []byte("k"), value: make([]byte, 4000), ts: now}})
		}, opts: func(o *ValidateOptions) { o.TargetCodec = CodecNone; o.MaxBatchBytes = 2000 },
			code: kerr.MessageTooLarge, msg: "Message batch size is"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.batch()
			if tt.edit != nil {
				b = tt.edit(b)
			}
			opts := clientOpts(now)
			if tt.opts != nil {
				tt.opts(&opts)
			}
			out, _, rerrs, err := ValidateBatch(b, opts)
			if !errors.Is(err, tt.code) {
				t.Fatalf("got %v, want %v", err, tt.code.Message)
			}
			var kerrErr *kerr.Error
			if !errors.As(err, &kerrErr) || kerrErr != tt.code {
				t.Fatalf("errors.As gave %v", kerrErr)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !strings.Contains(ve.Message, tt.msg) {
				t.Fatalf("message %q lacks %q", err, tt.msg)
			}
			if out != nil || rerrs != nil {
				t.Fatalf("out %d bytes, record errors %v on failure", len(out), rerrs)
			}
		})
	}
}

func TestValidateBatchRecordErrors(t *testing.T) {
	t.Run("keyless on compacted topic", func(t *testing.T) {
		recs := recsAt(5, now)
		recs[1].key = nil
		recs[3].key = nil
		opts := clientOpts(now)
		opts.Compacted = true
		opts.Topic, opts.Partition = "compacted", 2
		_, _, rerrs, err := ValidateBatch(buildBatch(t, CodecLZ4, recs), opts)
		if !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("got %v", err)
		}
		wantMsg := "Compacted topic cannot accept message without key in topic partition compacted-2"
		if len(rerrs) != 2 || rerrs[0].BatchIndex != 1 || rerrs[1].BatchIndex != 3 || rerrs[0].Message != wantMsg {
			t.Fatalf("record errors %+v", rerrs)
		}
		if !strings.Contains(err.Error(), "due to 2 record errors in total") ||
			!strings.Contains(err.Error(), "RecordError(batchIndex=1, message='"+wantMsg+"')") {
			t.Fatalf("message %q", err)
		}
	})
	t.Run("timestamps out of range", func(t *testing.T) {
		recs := recsAt(4, now)
		recs[0].ts = now - 2_000 // too old for before.max.ms=1000
		recs[2].ts = now + 3_600_001
		recs[3].key = nil // key error wins for this record; the batch error stays INVALID_TIMESTAMP
		opts := clientOpts(now)
		opts.TimestampBeforeMaxMs = 1_000
		opts.Compacted = true
		_, _, rerrs, err := ValidateBatch(buildBatch(t, CodecNone, recs), opts)
		if !errors.Is(err, kerr.InvalidTimestamp) {
			t.Fatalf("got %v", err)
		}
		if len(rerrs) != 3 || rerrs[0].BatchIndex != 0 || rerrs[1].BatchIndex != 2 || rerrs[2].BatchIndex != 3 {
			t.Fatalf("record errors %+v", rerrs)
		}
		want := "Timestamp 1699999998000 of message with offset 0 is out of range. The timestamp should be within [1699999999000, 1700003600000]"
		if rerrs[0].Message != want {
			t.Fatalf("message %q", rerrs[0].Message)
		}
	})
	t.Run("no timestamp is never out of range", func(t *testing.T) {
		recs := recsAt(2, -1)
		opts := clientOpts(now)
		opts.TimestampBeforeMaxMs = 0
		_, info, _, err := ValidateBatch(buildBatch(t, CodecNone, recs), opts)
		if err != nil || info.MaxTimestamp != -1 {
			t.Fatalf("%v %+v", err, info)
		}
	})
	t.Run("producer claims LogAppendTime", func(t *testing.T) {
		b := NewBatchBuilder(CodecNone).SetLogAppendTime(now)
		b.Add([]byte("k"), []byte("v"), nil, now)
		batch, _ := b.Build()
		opts := clientOpts(now)
		opts.LogAppendTime = true
		_, _, rerrs, err := ValidateBatch(batch, opts)
		if !errors.Is(err, kerr.InvalidTimestamp) || len(rerrs) != 1 ||
			!strings.Contains(rerrs[0].Message, "Producer should not set timestamp type to LogAppendTime") {
			t.Fatalf("%v %+v", err, rerrs)
		}
	})
}

func TestValidateBatchTimestampsInPlace(t *testing.T) {
	recs := []testRecord{
		{key: []byte("a"), ts: now - 5},
		{key: []byte("b"), ts: now + 7},
		{key: []byte("c"), ts: now + 7},
		{key: []byte("d"), ts: now},
	}
	t.Run("CreateTime corrects a lying max timestamp", func(t *testing.T) {
		batch := buildBatch(t, CodecNone, recs)
		binary.BigEndian.PutUint64(batch[batchMaxTimestampPos:], uint64(now+1000))
		reCRC(batch)
		out, info, _, err := ValidateBatch(batch, clientOpts(now))
		if err != nil {
			t.Fatal(err)
		}
		if &out[0] != &batch[0] || info.Rewritten {
			t.Fatal("expected the input back")
		}
		if info.MaxTimestamp != now+7 || info.OffsetDeltaOfMaxTimestamp != 1 || info.Header.MaxTimestamp != now+7 {
			t.Fatalf("info %+v", info)
		}
		if !CheckBatchCRC(out) {
			t.Fatal("CRC not recomputed")
		}
	})
	t.Run("LogAppendTime stamps the batch", func(t *testing.T) {
		batch := buildBatch(t, CodecSnappy, recs)
		opts := clientOpts(now)
		opts.LogAppendTime = true
		opts.NowMs = now + 50
		out, info, _, err := ValidateBatch(batch, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Header.LogAppendTime() || info.Header.MaxTimestamp != now+50 || info.MaxTimestamp != now+50 ||
			info.OffsetDeltaOfMaxTimestamp != 0 || !CheckBatchCRC(out) || info.Rewritten {
			t.Fatalf("info %+v", info)
		}
	})
}

func TestValidateBatchRecompresses(t *testing.T) {
	recs := sampleRecords(200, now)
	for _, src := range allCodecs {
		for _, dst := range allCodecs {
			if src == dst {
				continue
			}
			t.Run(src.String()+"->"+dst.String(), func(t *testing.T) {
				b := NewBatchBuilder(src).SetProducer(99, 4, 1234).SetTransactional(true)
				for _, r := range recs {
					b.Add(r.key, r.value, r.headers, r.ts)
				}
				batch, _ := b.Build()
				opts := clientOpts(now)
				opts.TargetCodec = dst
				out, info, _, err := ValidateBatch(batch, opts)
				if err != nil {
					t.Fatal(err)
				}
				h := info.Header
				if !info.Rewritten || h.Codec() != dst || h.ProducerID != 99 || h.ProducerEpoch != 4 ||
					h.BaseSequence != 1234 || !h.IsTransactional() || h.NumRecords != 200 ||
					h.LastOffsetDelta != 199 || h.BaseTimestamp != recs[0].ts || h.MaxTimestamp != info.MaxTimestamp {
					t.Fatalf("header %+v", h)
				}
				i := 0
				err = ForEachRecord(out, nil, func(r *Record) error {
					checkRecordEqual(t, i, r, recs[i], recs[0].ts)
					i++
					return nil
				})
				if err != nil || i != 200 {
					t.Fatalf("%v after %d", err, i)
				}
				kgoDecode(t, out)
			})
		}
	}
}

func TestValidateBatchRenumbersOffsetDeltas(t *testing.T) {
	recs := []testRecord{{key: []byte("a"), ts: now}, {key: []byte("b"), ts: now + 1}, {key: []byte("c"), ts: now + 2}}
	// Records with deltas 0, 2, 4, as some old clients wrote them.
	var raw []byte
	for i, r := range recs {
		raw = append(raw, rawRecord([]byte{0}, vi(r.ts-now), vi(int64(2*i)), vi(1), r.key, vi(-1), vi(0))...)
	}
	for _, c := range []Codec{CodecNone, CodecGzip} {
		t.Run(c.String(), func(t *testing.T) {
			comp, _ := AppendCompressed(nil, c, raw)
			batch := batchOf(comp, 3)
			binary.BigEndian.PutUint16(batch[batchAttributesPos:], uint16(c))
			binary.BigEndian.PutUint64(batch[batchBaseTimestampPos:], uint64(now))
			reCRC(batch)
			out, info, _, err := ValidateBatch(batch, clientOpts(now))
			if err != nil {
				t.Fatal(err)
			}
			if !info.Rewritten || info.Header.Codec() != c || info.OffsetDeltaOfMaxTimestamp != 2 {
				t.Fatalf("info %+v", info)
			}
			i := int32(0)
			_ = ForEachRecord(out, nil, func(r *Record) error {
				if r.OffsetDelta != i || string(r.Key) != string(recs[i].key) {
					t.Fatalf("record %d: delta %d key %q", i, r.OffsetDelta, r.Key)
				}
				i++
				return nil
			})
		})
	}
}

func TestValidateBatchFraming(t *testing.T) {
	batch := buildBatch(t, CodecNone, recsAt(2, now))
	// Trailing bytes too short to be a batch are dropped, as Kafka's
	// iterator stops at them.
	in := append(bytes.Clone(batch), 1, 2, 3)
	out, _, _, err := ValidateBatch(in, clientOpts(now))
	if err != nil || len(out) != len(batch) {
		t.Fatalf("%v, %d bytes", err, len(out))
	}
	// Non-client writers (coordinators) may write control batches.
	b := NewBatchBuilder(CodecNone).SetProducer(1, 0, NoSequence).SetTransactional(true).SetControl(true)
	b.Add(ControlRecordKey(ControlCommit), EndTxnMarkerValue(3), nil, now)
	marker, _ := b.Build()
	opts := clientOpts(now)
	opts.FromClient = false
	opts.TargetCodec = CodecZstd // control batches written uncompressed stay so
	out, info, _, err := ValidateBatch(marker, opts)
	if err != nil || info.Rewritten || !info.Header.IsControl() || len(out) != len(marker) {
		t.Fatalf("%v %+v", err, info)
	}
}

func TestValidateBatchUncompressedDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	batch := buildBatch(t, CodecNone, sampleRecords(100, now))
	opts := clientOpts(now)
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, _, err := ValidateBatch(batch, opts); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per batch", allocs)
	}
}

// eventRecords are n distinct JSON-like 1 KiB values, compressible about
// as well as the bench's payloads (lz4 near 1.9:1), without keys.
func eventRecords(n int) []testRecord {
	noise := pseudoRandom(n*64, 11)
	recs := make([]testRecord, n)
	for i := range recs {
		var v []byte
		for j := 0; len(v) < 1024; j++ {
			v = fmt.Appendf(v, `{"user":%d,"score":%d,"tag":"%x"},`, i*31+j, noise[(i*64+j)%len(noise)], noise[(i*7+j*13)%len(noise)])
		}
		recs[i] = testRecord{value: v[:1024], ts: now + int64(i%5)}
	}
	return recs
}

// validateBatches are the batches whose validation must not allocate:
// uncompressed, lz4 as Kafka's Java client frames it (64 KiB blocks, no
// checksums) and lz4 as franz-go frames it (4 MiB blocks, content checksum).
func validateBatches(tb testing.TB, n int) map[string][]byte {
	recs := eventRecords(n)
	return map[string][]byte{
		"none":       buildBatch(tb, CodecNone, recs),
		"lz4 kafka":  buildBatch(tb, CodecLZ4, recs),
		"lz4 kgo":    kgoBatch(tb, kgo.Lz4Compression(), recs, noProducer),
		"zstd kafka": buildBatch(tb, CodecZstd, recs),
	}
}

func TestValidateParsedBatchDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	for name, batch := range validateBatches(t, 200) {
		if strings.HasPrefix(name, "zstd") {
			continue // the zstd decoder keeps allocating internally
		}
		if name == "lz4 kgo" && batch[BatchHeaderSize+4]&lz4FlagContentChecksum == 0 {
			t.Fatal("kgo's lz4 frame has no content checksum: the test no longer covers it")
		}
		t.Run(name, func(t *testing.T) {
			h, _ := ParseBatchHeader(batch)
			parsed := Batch{Bytes: batch, Header: h}
			opts := clientOpts(now)
			// Warm the pooled scratch buffer first: the steady state is
			// what must not allocate.
			if _, _, _, err := ValidateParsedBatch(parsed, opts); err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(100, func() {
				if _, _, _, err := ValidateParsedBatch(parsed, opts); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per batch", allocs)
			}
		})
	}
}

// BenchmarkValidateBatchEvents validates 1 MiB batches of distinct 1 KiB
// records, the shape of the bench's produce load.
func BenchmarkValidateBatchEvents(b *testing.B) {
	for name, batch := range validateBatches(b, 1000) {
		b.Run(name, func(b *testing.B) {
			h, _ := ParseBatchHeader(batch)
			parsed := Batch{Bytes: batch, Header: h}
			opts := clientOpts(now)
			b.SetBytes(1000 * 1024)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, err := ValidateParsedBatch(parsed, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchmarkValidate(b *testing.B, codec Codec) {
	// JSON-ish text: compressible, but not trivially.
	noise := pseudoRandom(256, 1)
	var value []byte
	for i := 0; len(value) < 1024; i++ {
		value = fmt.Appendf(value, `{"id":%d,"score":%d,"tag":"t%02x"},`, i, noise[i%256], noise[(i*7)%256])
	}
	value = value[:1024]
	bb := NewBatchBuilder(codec)
	for range 64 {
		bb.Add([]byte("some-key"), value, nil, now)
	}
	batch, err := bb.Build()
	if err != nil {
		b.Fatal(err)
	}
	opts := clientOpts(now)
	b.SetBytes(64 * 1024)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := ValidateBatch(batch, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// 64 records of 1 KiB per batch.
func BenchmarkValidateBatch1KiBNone(b *testing.B)   { benchmarkValidate(b, CodecNone) }
func BenchmarkValidateBatch1KiBLZ4(b *testing.B)    { benchmarkValidate(b, CodecLZ4) }
func BenchmarkValidateBatch1KiBZstd(b *testing.B)   { benchmarkValidate(b, CodecZstd) }
func BenchmarkValidateBatch1KiBSnappy(b *testing.B) { benchmarkValidate(b, CodecSnappy) }
func BenchmarkValidateBatch1KiBGzip(b *testing.B)   { benchmarkValidate(b, CodecGzip) }

// ParseProduceBatch gives the codes and messages the Produce handler has
// always answered with for its one-batch rule (broker/produce.go's
// checkSingleBatch), and the batch with its header otherwise.
func TestParseProduceBatch(t *testing.T) {
	one := buildBatch(t, CodecNone, recsAt(3, now))
	zstd := buildBatch(t, CodecZstd, recsAt(3, now))
	magic1 := bytes.Clone(one)
	magic1[16] = 1
	negative := bytes.Clone(one)
	binary.BigEndian.PutUint32(negative[8:], 0xFFFFFFF0)
	for _, c := range []struct {
		name    string
		records []byte
		version int16
		code    *kerr.Error
		msg     string
	}{
		{"empty", nil, 9, kerr.InvalidRecord, "Produce requests with version 9 must have at least one record batch per partition"},
		{"two batches", append(bytes.Clone(one), one...), 9, kerr.InvalidRecord, "Produce requests with version 9 are only allowed to contain exactly one record batch per partition"},
		{"trailing bytes", append(bytes.Clone(one), 1, 2, 3), 9, kerr.InvalidRecord, "Produce requests with version 9 are only allowed to contain exactly one record batch per partition"},
		{"magic 1", magic1, 9, kerr.InvalidRecord, "Produce requests with version 9 are only allowed to contain record batches with magic version 2"},
		{"truncated", one[:len(one)-1], 9, kerr.InvalidRecord, "invalid record batch: record batch truncated"},
		{"short", one[:10], 9, kerr.InvalidRecord, "invalid record batch: record batch truncated"},
		{"negative length", negative, 9, kerr.InvalidRecord, "invalid record batch: record batch length -16 is negative"},
		{"zstd before v7", zstd, 6, kerr.UnsupportedCompressionType, ""},
		{"zstd from v7", zstd, 7, nil, ""},
		{"one batch", one, 3, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := ParseProduceBatch(c.records, c.version)
			if c.code == nil {
				h, _ := ParseBatchHeader(c.records)
				if err != nil || h != b.Header || len(b.Bytes) != len(c.records) {
					t.Fatalf("%v: %+v", err, b.Header)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Code != c.code || ve.Message != c.msg {
				t.Fatalf("got %v, want %v %q", err, c.code, c.msg)
			}
		})
	}
}
