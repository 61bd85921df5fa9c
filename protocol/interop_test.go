package protocol

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file checks Gregor's codec against franz-go's independent one: kgo's
// compressors and kmsg's record encoding make batches the way kgo produces
// them, and kgo's decompressor plus kmsg decode what BatchBuilder writes.

var kgoCodecs = []struct {
	codec Codec
	kgo   kgo.CompressionCodec
}{
	{CodecNone, kgo.NoCompression()},
	{CodecGzip, kgo.GzipCompression()},
	{CodecSnappy, kgo.SnappyCompression()},
	{CodecLZ4, kgo.Lz4Compression()},
	{CodecZstd, kgo.ZstdCompression()},
}

type testRecord struct {
	key, value []byte
	headers    []RecordHeader
	ts         int64
}

// sampleRecords returns n records with null and empty keys, values and
// header values mixed in, and some compressible bulk.
func sampleRecords(n int, baseTs int64) []testRecord {
	recs := make([]testRecord, n)
	for i := range recs {
		r := &recs[i]
		r.ts = baseTs + int64(i*7%13) - 3
		switch i % 4 {
		case 0:
			r.key = nil
		case 1:
			r.key = []byte{}
		default:
			r.key = fmt.Appendf(nil, "key-%d", i)
		}
		if i%5 != 3 {
			r.value = bytes.Repeat(fmt.Appendf(nil, "value %d ", i), 1+i%40)
		}
		for h := range i % 3 {
			hd := RecordHeader{Key: fmt.Appendf(nil, "h%d", h)}
			if h != 1 {
				hd.Value = fmt.Appendf(nil, "hv%d-%d", i, h)
			}
			r.headers = append(r.headers, hd)
		}
	}
	return recs
}

type kgoBatchOpts struct {
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	transactional bool
}

var noProducer = kgoBatchOpts{producerID: -1, producerEpoch: -1, baseSequence: -1}

// kgoBatch encodes records with kmsg and compresses them with kgo's default
// compressor, as kgo's producer does.
func kgoBatch(tb testing.TB, c kgo.CompressionCodec, recs []testRecord, o kgoBatchOpts) []byte {
	tb.Helper()
	var raw []byte
	baseTs := recs[0].ts
	maxTs := int64(-1)
	for i, r := range recs {
		kr := kmsg.Record{
			TimestampDelta64: r.ts - baseTs,
			OffsetDelta:      int32(i),
			Key:              r.key,
			Value:            r.value,
		}
		for _, h := range r.headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: string(h.Key), Value: h.Value})
		}
		body := kr.AppendTo(nil) // Length 0 encodes as one byte
		kr.Length = int32(len(body) - 1)
		raw = kr.AppendTo(raw)
		maxTs = max(maxTs, r.ts)
	}
	comp, err := kgo.DefaultCompressor(c)
	if err != nil {
		tb.Fatal(err)
	}
	var codec int16
	records := raw
	if comp != nil {
		var buf bytes.Buffer
		out, used := comp.Compress(&buf, raw)
		records = append([]byte(nil), out...)
		codec = int16(used)
	}
	attrs := codec
	if o.transactional {
		attrs |= AttrTransactional
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		Length:               int32(BatchHeaderSize - BatchOverhead + len(records)),
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       baseTs,
		MaxTimestamp:         maxTs,
		ProducerID:           o.producerID,
		ProducerEpoch:        o.producerEpoch,
		FirstSequence:        o.baseSequence,
		NumRecords:           int32(len(recs)),
		Records:              records,
	}
	b := rb.AppendTo(nil)
	crc := crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(b[17:], crc)
	return b
}

// kgoDecode decodes a batch with kmsg and kgo's decompressor, checking the
// CRC independently.
func kgoDecode(tb testing.TB, batch []byte) (kmsg.RecordBatch, []kmsg.Record) {
	tb.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(batch); err != nil {
		tb.Fatalf("kmsg ReadFrom: %v", err)
	}
	if int(rb.Length)+12 != len(batch) {
		tb.Fatalf("batch length %d for %d bytes", rb.Length, len(batch))
	}
	if want := crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(rb.CRC) != want {
		tb.Fatalf("crc %x, want %x", uint32(rb.CRC), want)
	}
	raw, err := kgo.DefaultDecompressor().Decompress(rb.Records, kgo.CompressionCodecType(rb.Attributes&7))
	if err != nil {
		tb.Fatalf("kgo decompress: %v", err)
	}
	var recs []kmsg.Record
	for len(raw) > 0 {
		l, n := binary.Varint(raw)
		if n <= 0 || int(l)+n > len(raw) {
			tb.Fatalf("bad record length prefix")
		}
		var r kmsg.Record
		if err := r.ReadFrom(raw[:n+int(l)]); err != nil {
			tb.Fatalf("kmsg record: %v", err)
		}
		recs = append(recs, r)
		raw = raw[n+int(l):]
	}
	return rb, recs
}

func TestKgoBatchesIterateAndValidate(t *testing.T) {
	recs := sampleRecords(300, 1_700_000_000_000)
	for _, c := range kgoCodecs {
		t.Run(c.codec.String(), func(t *testing.T) {
			batch := kgoBatch(t, c.kgo, recs, kgoBatchOpts{producerID: 42, producerEpoch: 3, baseSequence: 17, transactional: true})
			if got := Codec(binary.BigEndian.Uint16(batch[21:]) & 7); got != c.codec {
				t.Fatalf("kgo used codec %v", got)
			}
			var scratch []byte
			i := 0
			err := ForEachRecord(batch, &scratch, func(r *Record) error {
				want := recs[i]
				checkRecordEqual(t, i, r, want, recs[0].ts)
				i++
				return nil
			})
			if err != nil || i != len(recs) {
				t.Fatalf("ForEachRecord: %v after %d records", err, i)
			}
			out, info, rerrs, err := ValidateBatch(bytes.Clone(batch), clientOpts(1_700_000_000_000))
			if err != nil || rerrs != nil {
				t.Fatalf("ValidateBatch: %v %v", err, rerrs)
			}
			if info.Rewritten || !bytes.Equal(out, batch) {
				t.Fatalf("a valid kgo batch was rewritten")
			}
			if info.MaxTimestamp != recs[0].ts+12 || info.Header.ProducerID != 42 {
				t.Fatalf("info %+v", info)
			}
		})
	}
}

func checkRecordEqual(t *testing.T, i int, r *Record, want testRecord, baseTs int64) {
	t.Helper()
	if r.OffsetDelta != int32(i) || baseTs+r.TimestampDelta != want.ts {
		t.Fatalf("record %d: offset delta %d ts delta %d", i, r.OffsetDelta, r.TimestampDelta)
	}
	if (r.Key == nil) != (want.key == nil) || !bytes.Equal(r.Key, want.key) {
		t.Fatalf("record %d: key %q want %q", i, r.Key, want.key)
	}
	if (r.Value == nil) != (want.value == nil) || !bytes.Equal(r.Value, want.value) {
		t.Fatalf("record %d: value %q want %q", i, r.Value, want.value)
	}
	if len(r.Headers) != len(want.headers) {
		t.Fatalf("record %d: %d headers want %d", i, len(r.Headers), len(want.headers))
	}
	for j, h := range r.Headers {
		w := want.headers[j]
		if !bytes.Equal(h.Key, w.Key) || (h.Value == nil) != (w.Value == nil) || !bytes.Equal(h.Value, w.Value) {
			t.Fatalf("record %d header %d: %q=%q want %q=%q", i, j, h.Key, h.Value, w.Key, w.Value)
		}
	}
}

func TestBuilderBatchesDecodeWithKgo(t *testing.T) {
	recs := sampleRecords(500, 1_600_000_000_000)
	for _, c := range kgoCodecs {
		t.Run(c.codec.String(), func(t *testing.T) {
			b := NewBatchBuilder(c.codec).SetProducer(7, 2, 100).SetTransactional(true)
			for _, r := range recs {
				b.Add(r.key, r.value, r.headers, r.ts)
			}
			batch, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			rb, krecs := kgoDecode(t, batch)
			if rb.Magic != 2 || rb.Attributes != int16(c.codec)|AttrTransactional || rb.ProducerID != 7 ||
				rb.ProducerEpoch != 2 || rb.FirstSequence != 100 || rb.NumRecords != int32(len(recs)) ||
				rb.LastOffsetDelta != int32(len(recs)-1) || rb.FirstTimestamp != recs[0].ts ||
				rb.MaxTimestamp != recs[0].ts+12 || rb.PartitionLeaderEpoch != -1 || rb.FirstOffset != 0 {
				t.Fatalf("header %+v", rb)
			}
			if len(krecs) != len(recs) {
				t.Fatalf("%d records, want %d", len(krecs), len(recs))
			}
			for i, kr := range krecs {
				w := recs[i]
				if kr.OffsetDelta != int32(i) || rb.FirstTimestamp+kr.TimestampDelta64 != w.ts ||
					(kr.Key == nil) != (w.key == nil) || !bytes.Equal(kr.Key, w.key) ||
					(kr.Value == nil) != (w.value == nil) || !bytes.Equal(kr.Value, w.value) ||
					len(kr.Headers) != len(w.headers) {
					t.Fatalf("record %d: %+v want %+v", i, kr, w)
				}
				for j, h := range kr.Headers {
					if h.Key != string(w.headers[j].Key) || (h.Value == nil) != (w.headers[j].Value == nil) {
						t.Fatalf("record %d header %d: %+v", i, j, h)
					}
				}
			}
		})
	}
}

func TestCompressionInteropWithKgo(t *testing.T) {
	inputs := [][]byte{
		[]byte("x"),
		bytes.Repeat([]byte("gregor speaks kafka "), 10_000), // several lz4/xerial blocks
		pseudoRandom(150_000, 3),
	}
	dec := kgo.DefaultDecompressor()
	for _, c := range kgoCodecs[1:] {
		for i, in := range inputs {
			t.Run(fmt.Sprintf("%s/%d", c.codec, i), func(t *testing.T) {
				ours, err := AppendCompressed(nil, c.codec, in)
				if err != nil {
					t.Fatal(err)
				}
				got, err := dec.Decompress(ours, kgo.CompressionCodecType(c.codec))
				if err != nil || !bytes.Equal(got, in) {
					t.Fatalf("kgo cannot read ours: %v", err)
				}
				comp, err := kgo.DefaultCompressor(c.kgo)
				if err != nil {
					t.Fatal(err)
				}
				var buf bytes.Buffer
				theirs, _ := comp.Compress(&buf, in)
				got, err = AppendDecompressed(nil, c.codec, theirs, 0)
				if err != nil || !bytes.Equal(got, in) {
					t.Fatalf("we cannot read kgo's: %v", err)
				}
			})
		}
	}
}

// pseudoRandom returns incompressible bytes, deterministically.
func pseudoRandom(n int, seed uint64) []byte {
	b := make([]byte, n)
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// clientOpts are Kafka's topic defaults for a client's produce.
func clientOpts(now int64) ValidateOptions {
	return ValidateOptions{
		NowMs:                now,
		TimestampBeforeMaxMs: 1<<63 - 1,
		TimestampAfterMaxMs:  3_600_000,
		MaxBatchBytes:        1_048_588,
		TargetCodec:          TargetCodecProducer,
		FromClient:           true,
		ProduceVersion:       11,
		Topic:                "t",
		Partition:            0,
	}
}
