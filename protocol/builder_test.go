package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

func TestEndTxnMarkerBatch(t *testing.T) {
	for _, commit := range []bool{true, false} {
		batch := EndTxnMarkerBatch(1234, 5, commit, 9, now)
		rb, recs := kgoDecode(t, batch)
		if rb.Attributes != AttrTransactional|AttrControl || rb.ProducerID != 1234 || rb.ProducerEpoch != 5 ||
			rb.FirstSequence != -1 || rb.NumRecords != 1 || rb.FirstTimestamp != now || rb.MaxTimestamp != now {
			t.Fatalf("header %+v", rb)
		}
		typ, err := ParseControlRecordKey(recs[0].Key)
		if err != nil || (typ == ControlCommit) != commit || (typ == ControlAbort) == commit {
			t.Fatalf("type %v %v", typ, err)
		}
		if epoch, err := ParseEndTxnMarkerValue(recs[0].Value); err != nil || epoch != 9 {
			t.Fatalf("epoch %v %v", epoch, err)
		}
		h, _ := ParseBatchHeader(batch)
		if !h.IsControl() || !h.IsTransactional() {
			t.Fatalf("flags %+v", h)
		}
	}
}

func TestBuilderLogAppendTime(t *testing.T) {
	b := NewBatchBuilder(CodecLZ4).SetLogAppendTime(now + 100)
	b.Add([]byte("k"), []byte("v"), nil, now)
	b.Add([]byte("k"), []byte("v"), nil, now+5)
	batch, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rb, recs := kgoDecode(t, batch)
	if rb.Attributes != int16(CodecLZ4)|AttrLogAppendTime || rb.MaxTimestamp != now+100 || rb.FirstTimestamp != now {
		t.Fatalf("header %+v", rb)
	}
	if recs[1].TimestampDelta64 != 5 {
		t.Fatalf("record timestamp delta %d", recs[1].TimestampDelta64)
	}
}

func TestBuilderResetAndSizes(t *testing.T) {
	b := NewBatchBuilder(CodecNone)
	if _, err := b.Build(); !errors.Is(err, ErrEmptyBatch) {
		t.Fatalf("empty build: %v", err)
	}
	b.Add([]byte("a"), []byte("b"), nil, 10)
	first, _ := b.Build()
	if b.UncompressedSize() != len(first) || b.NumRecords() != 1 {
		t.Fatalf("size %d for %d bytes, %d records", b.UncompressedSize(), len(first), b.NumRecords())
	}
	b.Reset()
	b.Add([]byte("c"), nil, nil, 20)
	second, _ := b.Build()
	h, _ := ParseBatchHeader(second)
	if h.NumRecords != 1 || h.BaseTimestamp != 20 || h.MaxTimestamp != 20 {
		t.Fatalf("after Reset: %+v", h)
	}
	// Build hands out a batch the builder no longer touches.
	b.Reset()
	b.Add(bytes.Repeat([]byte("z"), 100), nil, nil, 30)
	if !CheckBatchCRC(second) || !CheckBatchCRC(first) {
		t.Fatal("an earlier batch changed after reuse")
	}
}

func TestBuilderExtremeTimestamps(t *testing.T) {
	// Deltas that need all ten varlong bytes still encode and decode.
	b := NewBatchBuilder(CodecNone)
	b.Add(nil, nil, nil, math.MinInt64+1)
	b.Add(nil, nil, nil, math.MaxInt64)
	batch, _ := b.Build()
	var got []int64
	h, _ := ParseBatchHeader(batch)
	err := ForEachRecord(batch, nil, func(r *Record) error {
		got = append(got, h.BaseTimestamp+r.TimestampDelta)
		return nil
	})
	if err != nil || got[0] != math.MinInt64+1 || got[1] != math.MaxInt64 {
		t.Fatalf("%v %v", got, err)
	}
}

func TestVarintSize(t *testing.T) {
	var buf [binary.MaxVarintLen64]byte
	for _, v := range []int64{0, 1, -1, 63, -64, 64, -65, 1 << 20, -(1 << 40), math.MaxInt64, math.MinInt64} {
		if got, want := varintSize(v), binary.PutVarint(buf[:], v); got != want {
			t.Errorf("varintSize(%d) = %d, want %d", v, got, want)
		}
	}
}

func TestBuilderKeepsOffsetGaps(t *testing.T) {
	b := NewBatchBuilder(CodecGzip)
	for _, d := range []int32{0, 3, 7} {
		if err := b.AddWithOffsetDelta(d, []byte{byte(d)}, nil, nil, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.AddWithOffsetDelta(7, nil, nil, nil, now); err == nil {
		t.Fatal("accepted a repeated offset delta")
	}
	b.Add([]byte{8}, nil, nil, now) // continues after the last delta
	batch, _ := b.Build()
	rb, recs := kgoDecode(t, batch)
	if rb.LastOffsetDelta != 8 || rb.NumRecords != 4 {
		t.Fatalf("header %+v", rb)
	}
	for i, want := range []int32{0, 3, 7, 8} {
		if recs[i].OffsetDelta != want || recs[i].Key[0] != byte(want) {
			t.Fatalf("record %d: %+v", i, recs[i])
		}
	}
}
