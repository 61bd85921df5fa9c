package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/golang/snappy"
	"github.com/twmb/franz-go/pkg/kerr"
)

// fuzzLimit keeps every fuzz input's decompression small enough that
// unbounded growth would show up as a failure, not as a slow run.
const fuzzLimit = 1 << 20

// seedBatches are valid batches of every codec, with and without producer
// fields, to start the fuzzers from.
func seedBatches(tb testing.TB) [][]byte {
	var out [][]byte
	for _, c := range allCodecs {
		out = append(out, buildBatch(tb, c, sampleRecords(7, now)))
		b := NewBatchBuilder(c).SetProducer(3, 1, 10).SetTransactional(true)
		b.Add([]byte("k"), nil, []RecordHeader{{Key: []byte("h"), Value: nil}}, now)
		one, err := b.Build()
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, one)
	}
	for _, c := range kgoCodecs {
		out = append(out, kgoBatch(tb, c.kgo, sampleRecords(5, now), noProducer))
	}
	return out
}

func FuzzForEachRecord(f *testing.F) {
	for _, b := range seedBatches(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, batch []byte) {
		var scratch []byte
		n := 0
		err := ForEachRecord(batch, &scratch, func(r *Record) error {
			n++
			// Everything handed out must lie inside the input or
			// the scratch buffer: touch it all.
			for _, h := range r.Headers {
				_ = len(h.Key) + len(h.Value)
			}
			_ = bytes.Count(r.Key, r.Value)
			return nil
		})
		if err == nil {
			h, _ := ParseBatchHeader(batch)
			if int32(n) != h.NumRecords {
				t.Fatalf("%d records for a header count of %d", n, h.NumRecords)
			}
		}
	})
}

func FuzzValidateBatch(f *testing.F) {
	for _, b := range seedBatches(f) {
		f.Add(b, uint8(0))
		f.Add(b, uint8(0xFF))
	}
	f.Fuzz(func(t *testing.T, batch []byte, knobs uint8) {
		// The fuzzer usually breaks the CRC first: knob bit 0 repairs it
		// so that the checks behind it are reached too.
		if knobs&1 != 0 && len(batch) >= BatchHeaderSize {
			if _, ok, _ := peekBatch(batch); ok {
				first, _, _ := peekBatch(batch)
				reCRC(first)
			}
		}
		opts := clientOpts(now)
		opts.FromClient = knobs&2 != 0
		opts.Compacted = knobs&4 != 0
		opts.LogAppendTime = knobs&8 != 0
		opts.MaxDecompressedBytes = fuzzLimit
		if knobs&0x70 != 0 {
			opts.TargetCodec = Codec(knobs>>4&7) - 1 // -1 (producer) .. 6
		}
		in := bytes.Clone(batch)
		out, info, rerrs, err := ValidateBatch(in, opts)
		// A batch NextBatch splits off whole validates the same way
		// from its parsed header.
		if whole, rest, h, perr := NextBatch(batch); perr == nil && len(rest) == 0 {
			pout, pinfo, prerrs, perr := ValidateParsedBatch(Batch{Bytes: bytes.Clone(whole), Header: h}, opts)
			if fmt.Sprint(perr) != fmt.Sprint(err) || !bytes.Equal(pout, out) || pinfo != info || len(prerrs) != len(rerrs) {
				t.Fatalf("ValidateParsedBatch differs: %v %+v %v, ValidateBatch %v %+v %v", perr, pinfo, prerrs, err, info, rerrs)
			}
		}
		if err != nil {
			var ke *kerr.Error
			if !errors.As(err, &ke) {
				t.Fatalf("error without a Kafka code: %v", err)
			}
			if out != nil {
				t.Fatal("output despite an error")
			}
			if rerrs != nil && ke != kerr.InvalidRecord && ke != kerr.InvalidTimestamp {
				t.Fatalf("record errors with %v", ke)
			}
			return
		}
		// Whatever is accepted must be a well-formed batch that
		// validates again unchanged and iterates.
		if !CheckBatchCRC(out) {
			t.Fatal("accepted batch has a bad CRC")
		}
		if h, _ := ParseBatchHeader(out); h != info.Header {
			t.Fatalf("info header %+v, batch header %+v", info.Header, h)
		}
		opts.TargetCodec = TargetCodecProducer
		if opts.LogAppendTime {
			// The stamped batch now claims LogAppendTime, which a
			// client may not send.
			opts.FromClient = false
		}
		opts.LogAppendTime = false
		again, info2, _, err := ValidateBatch(bytes.Clone(out), opts)
		if err != nil && !errors.Is(err, kerr.MessageTooLarge) && !errors.Is(err, kerr.InvalidTimestamp) {
			t.Fatalf("accepted batch fails again: %v", err)
		}
		if err == nil && (info2.Rewritten || !bytes.Equal(again, out) && !info.Header.LogAppendTime()) {
			t.Fatal("accepted batch changes on a second validation")
		}
		if err := ForEachRecord(out, nil, func(*Record) error { return nil }); err != nil {
			t.Fatalf("accepted batch does not iterate: %v", err)
		}
	})
}

func FuzzDecompress(f *testing.F) {
	inputs := [][]byte{{}, []byte("x"), bytes.Repeat([]byte("fuzz me "), 3000), pseudoRandom(2000, 5)}
	for _, c := range allCodecs {
		for _, in := range inputs {
			enc, err := AppendCompressed(nil, c, in)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(c), enc)
		}
	}
	f.Add(uint8(CodecSnappy), snappy.Encode(nil, inputs[2])) // raw block form
	f.Fuzz(func(t *testing.T, codec uint8, data []byte) {
		c := Codec(codec % 8)
		out, err := AppendDecompressed(nil, c, data, fuzzLimit)
		if err != nil {
			return
		}
		if len(out) > fuzzLimit {
			t.Fatalf("%d bytes past a %d limit", len(out), fuzzLimit)
		}
		// Whatever decodes must survive our own round trip.
		enc, err := AppendCompressed(nil, c, out)
		if err != nil {
			t.Fatal(err)
		}
		back, err := AppendDecompressed(nil, c, enc, fuzzLimit)
		if err != nil || !bytes.Equal(back, out) {
			t.Fatalf("round trip of decoded output: %v", err)
		}
	})
}

// FuzzRaftMessages: any body either decodes to messages that encode back
// to the same bytes, or is refused; never a panic or a huge allocation.
func FuzzRaftMessages(f *testing.F) {
	f.Add((&RaftMessagesRequest{ClusterID: "c", From: 1, Messages: [][]byte{[]byte("ab"), {}}}).AppendTo(nil))
	f.Add([]byte{0, 1, 'x', 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		var r RaftMessagesRequest
		if err := r.ReadFrom(body); err != nil {
			return
		}
		if again := r.AppendTo(nil); !bytes.Equal(again, body) {
			t.Fatalf("re-encoded %x, read %x", again, body)
		}
	})
}

// FuzzMetadataFetch: both bodies of MetadataFetch decode and re-encode to
// the same bytes, or are refused; never a panic or a huge allocation.
func FuzzMetadataFetch(f *testing.F) {
	f.Add(false, (&MetadataFetchRequest{ClusterID: "c", NodeID: 1, FetchOffset: 5, MaxBytes: 1 << 20, MaxWaitMs: 500}).AppendTo(nil))
	f.Add(true, (&MetadataFetchResponse{LeaderID: 2, HighWatermark: 9, HasSnapshot: true, SnapshotIndex: 3, SnapshotTerm: 1,
		SnapshotData: []byte("img"), Entries: []MetadataEntry{{Index: 4, Term: 1, Data: []byte("rec")}}}).AppendTo(nil))
	f.Fuzz(func(t *testing.T, response bool, body []byte) {
		var m interface {
			ReadFrom([]byte) error
			AppendTo([]byte) []byte
		} = &MetadataFetchRequest{}
		if response {
			m = &MetadataFetchResponse{}
		}
		if err := m.ReadFrom(body); err != nil {
			return
		}
		if again := m.AppendTo(nil); !bytes.Equal(again, body) {
			t.Fatalf("re-encoded %x, read %x", again, body)
		}
	})
}
