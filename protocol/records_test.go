package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func buildBatch(tb testing.TB, codec Codec, recs []testRecord) []byte {
	tb.Helper()
	b := NewBatchBuilder(codec)
	for _, r := range recs {
		b.Add(r.key, r.value, r.headers, r.ts)
	}
	out, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func TestForEachRecordAllCodecs(t *testing.T) {
	recs := sampleRecords(100, 1000)
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			batch := buildBatch(t, c, recs)
			var scratch []byte
			for range 2 { // the second pass reuses scratch
				i := 0
				err := ForEachRecord(batch, &scratch, func(r *Record) error {
					checkRecordEqual(t, i, r, recs[i], recs[0].ts)
					i++
					return nil
				})
				if err != nil || i != len(recs) {
					t.Fatalf("%v after %d", err, i)
				}
			}
			if c != CodecNone && cap(scratch) == 0 {
				t.Fatal("scratch buffer was not kept for reuse")
			}
		})
	}
}

func TestForEachRecordStopsOnCallbackError(t *testing.T) {
	batch := buildBatch(t, CodecNone, sampleRecords(10, 0))
	stop := errors.New("stop")
	n := 0
	err := ForEachRecord(batch, nil, func(*Record) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Fatalf("err %v after %d", err, n)
	}
}

// rawRecord encodes a record body by hand so that tests can break it.
func rawRecord(body ...[]byte) []byte {
	var b []byte
	for _, p := range body {
		b = append(b, p...)
	}
	return append(binary.AppendVarint(nil, int64(len(b))), b...)
}

func vi(v int64) []byte { return binary.AppendVarint(nil, v) }

// batchOf wraps a records section in a valid header claiming count records.
func batchOf(records []byte, count int32) []byte {
	b := NewBatchBuilder(CodecNone)
	b.Add(nil, nil, nil, 0)
	batch, _ := b.Build()
	batch = append(batch[:BatchHeaderSize], records...)
	binary.BigEndian.PutUint32(batch[batchLengthPos:], uint32(len(batch)-BatchOverhead))
	binary.BigEndian.PutUint32(batch[batchRecordCountPos:], uint32(count))
	binary.BigEndian.PutUint32(batch[batchLastOffsetDeltaPos:], uint32(count-1))
	binary.BigEndian.PutUint32(batch[batchCRCPos:], ComputeBatchCRC(batch))
	return batch
}

func TestRecordStructureErrors(t *testing.T) {
	good := rawRecord([]byte{0}, vi(0), vi(0), vi(1), []byte("k"), vi(1), []byte("v"), vi(0))
	tests := []struct {
		name    string
		records []byte
		count   int32
		want    string
	}{
		{"fewer records than declared", good, 2, "premature EOF"},
		{"more bytes than declared records", append(bytes.Clone(good), good...), 1, "records still remaining"},
		{"length past the end", append(vi(50), 0, 0, 0), 1, "Invalid record size: expected 50 bytes"},
		{"negative length", vi(-2), 1, "Invalid record size"},
		{"length varint runs off the end", []byte{0x80}, 1, "premature EOF"},
		{"body longer than its fields", rawRecord([]byte{0}, vi(0), vi(0), vi(-1), vi(-1), vi(0), []byte{9}), 1, "expected to read"},
		{"key past the body", rawRecord([]byte{0}, vi(0), vi(0), vi(5), []byte("k")), 1, "invalid record structure"},
		{"negative header count", rawRecord([]byte{0}, vi(0), vi(0), vi(-1), vi(-1), vi(-1)), 1, "invalid number of record headers -1"},
		{"header count beyond the bytes", rawRecord([]byte{0}, vi(0), vi(0), vi(-1), vi(-1), vi(1000)), 1, "larger than the remaining size"},
		{"null header key", rawRecord([]byte{0}, vi(0), vi(0), vi(-1), vi(-1), vi(1), vi(-1), vi(-1)), 1, "Invalid negative header key size"},
		{"offset delta beyond int32", rawRecord([]byte{0}, vi(0), vi(1<<40), vi(-1), vi(-1), vi(0)), 1, "invalid record structure"},
		{"empty body", rawRecord(), 1, "invalid record structure"},
		{"negative count", nil, -1, "Found invalid record count -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ForEachRecord(batchOf(tt.records, tt.count), nil, func(*Record) error { return nil })
			if !errors.Is(err, kerr.InvalidRecord) {
				t.Fatalf("got %v, want INVALID_RECORD", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("message %q lacks %q", err, tt.want)
			}
		})
	}
}

func TestRecordNegativeLengthsAreNull(t *testing.T) {
	// Kafka reads any negative key or value length as null.
	rec := rawRecord([]byte{0}, vi(0), vi(0), vi(-7), vi(-3), vi(1), vi(1), []byte("h"), vi(-9))
	err := ForEachRecord(batchOf(rec, 1), nil, func(r *Record) error {
		if r.Key != nil || r.Value != nil || len(r.Headers) != 1 || r.Headers[0].Value != nil {
			t.Fatalf("record %+v", r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestForEachRecordFraming(t *testing.T) {
	batch := buildBatch(t, CodecNone, sampleRecords(3, 0))
	noop := func(*Record) error { return nil }
	if err := ForEachRecord(batch[:40], nil, noop); !errors.Is(err, ErrShortBatch) {
		t.Errorf("short header: %v", err)
	}
	if err := ForEachRecord(batch[:len(batch)-1], nil, noop); err == nil {
		t.Error("accepted a batch shorter than its length")
	}
	if err := ForEachRecord(append(bytes.Clone(batch), 0), nil, noop); err == nil {
		t.Error("accepted trailing bytes")
	}
	old := bytes.Clone(batch)
	old[batchMagicPos] = 1
	if err := ForEachRecord(old, nil, noop); err == nil {
		t.Error("accepted magic 1")
	}
	bad := bytes.Clone(batch)
	binary.BigEndian.PutUint16(bad[batchAttributesPos:], 6)
	if err := ForEachRecord(bad, nil, noop); !errors.Is(err, kerr.UnsupportedCompressionType) {
		t.Errorf("codec 6: %v", err)
	}
	lz := buildBatch(t, CodecLZ4, sampleRecords(3, 0))
	lz[BatchHeaderSize] ^= 0xFF // the frame magic
	if err := ForEachRecord(lz, nil, noop); err == nil {
		t.Error("accepted a corrupt lz4 payload")
	}
}

func TestForEachRecordDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	recs := sampleRecords(50, 0)
	for _, c := range []Codec{CodecNone, CodecSnappy} {
		batch := buildBatch(t, c, recs)
		scratch := make([]byte, 0, 1<<20)
		var n int
		fn := func(r *Record) error { n += len(r.Headers); return nil }
		if err := ForEachRecord(batch, &scratch, fn); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(50, func() {
			_ = ForEachRecord(batch, &scratch, fn)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per batch", c, allocs)
		}
	}
}

func TestControlRecordHelpers(t *testing.T) {
	k := ControlRecordKey(ControlCommit)
	if !bytes.Equal(k, []byte{0, 0, 0, 1}) {
		t.Fatalf("key % x", k)
	}
	if typ, err := ParseControlRecordKey(k); err != nil || typ != ControlCommit {
		t.Fatalf("%v %v", typ, err)
	}
	if typ, err := ParseControlRecordKey([]byte{0, 3, 0, 0, 9}); err != nil || typ != ControlAbort {
		t.Fatalf("newer key version: %v %v", typ, err)
	}
	for _, bad := range [][]byte{nil, {0, 0, 1}, {0xFF, 0xFF, 0, 1}} {
		if _, err := ParseControlRecordKey(bad); !errors.Is(err, kerr.InvalidRecord) {
			t.Errorf("key % x: %v", bad, err)
		}
	}
	v := EndTxnMarkerValue(77)
	if !bytes.Equal(v, []byte{0, 0, 0, 0, 0, 77}) {
		t.Fatalf("value % x", v)
	}
	if e, err := ParseEndTxnMarkerValue(v); err != nil || e != 77 {
		t.Fatalf("%v %v", e, err)
	}
	for _, bad := range [][]byte{nil, {0, 0, 0}, {0x80, 0, 0, 0, 0, 1}} {
		if _, err := ParseEndTxnMarkerValue(bad); !errors.Is(err, kerr.InvalidRecord) {
			t.Errorf("value % x: %v", bad, err)
		}
	}
}
