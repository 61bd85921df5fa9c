package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/golang/snappy"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

func TestCompressionRoundTrip(t *testing.T) {
	inputs := [][]byte{
		{},
		[]byte("a"),
		bytes.Repeat([]byte{0}, 64<<10),   // exactly one lz4 block
		bytes.Repeat([]byte{1}, 64<<10+1), // one byte into the second
		bytes.Repeat([]byte("abc"), 100_000),
		pseudoRandom(100_000, 9),
	}
	for _, c := range allCodecs {
		for i, in := range inputs {
			t.Run(fmt.Sprintf("%s/%d", c, i), func(t *testing.T) {
				prefix := []byte("keep")
				enc, err := AppendCompressed(bytes.Clone(prefix), c, in)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(enc, prefix) {
					t.Fatal("AppendCompressed clobbered dst")
				}
				dec, err := AppendDecompressed(bytes.Clone(prefix), c, enc[len(prefix):], 0)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(dec[:len(prefix)], prefix) || !bytes.Equal(dec[len(prefix):], in) {
					t.Fatalf("round trip mismatch: %d bytes back for %d", len(dec)-len(prefix), len(in))
				}
				// The exact size is allowed; one byte less is not.
				if _, err := AppendDecompressed(nil, c, enc[len(prefix):], max(len(in), 1)); err != nil {
					t.Fatalf("limit == size: %v", err)
				}
				if len(in) > 1 {
					if _, err := AppendDecompressed(nil, c, enc[len(prefix):], len(in)-1); !errors.Is(err, ErrDecompressedTooLarge) {
						t.Fatalf("limit below size: %v", err)
					}
				}
			})
		}
	}
}

func TestUnknownCodec(t *testing.T) {
	for _, c := range []Codec{5, 6, 7, -1} {
		if _, err := AppendCompressed(nil, c, []byte("x")); !errors.Is(err, ErrUnknownCodec) {
			t.Errorf("compress %d: %v", c, err)
		}
		if _, err := AppendDecompressed(nil, c, []byte("x"), 0); !errors.Is(err, ErrUnknownCodec) {
			t.Errorf("decompress %d: %v", c, err)
		}
	}
}

// The Java client's snappy is snappy-java's stream format; check the bytes
// it is made of rather than only that we can read ourselves.
func TestXerialFraming(t *testing.T) {
	in := bytes.Repeat([]byte("0123456789"), 7000) // 70000 bytes: 32K + 32K + 4464
	enc, err := AppendCompressed(nil, CodecSnappy, in)
	if err != nil {
		t.Fatal(err)
	}
	wantHeader := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	if !bytes.Equal(enc[:16], wantHeader) {
		t.Fatalf("header % x", enc[:16])
	}
	rest := enc[16:]
	var sizes []int
	for len(rest) > 0 {
		n := int(binary.BigEndian.Uint32(rest))
		block := rest[4 : 4+n]
		dec, err := snappy.Decode(nil, block)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(dec))
		rest = rest[4+n:]
	}
	if fmt.Sprint(sizes) != "[32768 32768 4464]" {
		t.Fatalf("chunk sizes %v", sizes)
	}
}

func TestSnappyDecodeForms(t *testing.T) {
	in := bytes.Repeat([]byte("snappy "), 20_000)
	raw := snappy.Encode(nil, in)
	got, err := AppendDecompressed(nil, CodecSnappy, raw, 0)
	if err != nil || !bytes.Equal(got, in) {
		t.Fatalf("raw block: %v", err)
	}
	// Two xerial streams back to back, as snappy-java reads them.
	one, _ := AppendCompressed(nil, CodecSnappy, in[:1000])
	two, _ := AppendCompressed(nil, CodecSnappy, in[1000:])
	got, err = AppendDecompressed(nil, CodecSnappy, append(one, two...), 0)
	if err != nil || !bytes.Equal(got, in) {
		t.Fatalf("concatenated xerial: %v", err)
	}
}

func TestLZ4FrameMatchesKafka(t *testing.T) {
	enc, err := AppendCompressed(nil, CodecLZ4, bytes.Repeat([]byte("lz4"), 50_000))
	if err != nil {
		t.Fatal(err)
	}
	if binary.LittleEndian.Uint32(enc) != 0x184D2204 {
		t.Fatalf("magic % x", enc[:4])
	}
	// FLG: version 01, independent blocks, no block checksum, no content
	// size, no content checksum. BD: 64 KiB blocks.
	if enc[4] != 0x60 || enc[5] != 0x40 {
		t.Fatalf("FLG %#x BD %#x", enc[4], enc[5])
	}
	if !bytes.HasSuffix(enc, []byte{0, 0, 0, 0}) {
		t.Fatalf("frame does not end with the end mark alone: % x", enc[len(enc)-8:])
	}
	// The whole descriptor, header checksum included, is what
	// Lz4BlockOutputStream writes for magic v2.
	kafkaHeader := []byte{0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82}
	if !bytes.Equal(enc[:7], kafkaHeader) {
		t.Fatalf("descriptor % x", enc[:7])
	}
	// A frame as Kafka writes an incompressible block: the block size
	// with the high bit set, then the bytes as they are.
	payload := []byte("stored, not compressed")
	frame := bytes.Clone(kafkaHeader)
	frame = binary.LittleEndian.AppendUint32(frame, uint32(len(payload))|0x80000000)
	frame = append(frame, payload...)
	frame = binary.LittleEndian.AppendUint32(frame, 0)
	got, err := AppendDecompressed(nil, CodecLZ4, frame, 0)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("Kafka-style stored block: %q %v", got, err)
	}
}

func TestDecompressionBombs(t *testing.T) {
	zeros := make([]byte, 8<<20)
	const limit = 1 << 20
	for _, c := range allCodecs[1:] {
		t.Run(c.String(), func(t *testing.T) {
			enc, err := AppendCompressed(nil, c, zeros)
			if err != nil {
				t.Fatal(err)
			}
			out, err := AppendDecompressed(nil, c, enc, limit)
			if !errors.Is(err, ErrDecompressedTooLarge) {
				t.Fatalf("got %v", err)
			}
			if cap(out) > 2*limit {
				t.Fatalf("buffer grew to %d bytes for a %d limit", cap(out), limit)
			}
		})
	}
	// A raw snappy block that claims 4 GiB must be refused before any
	// allocation.
	claim := binary.AppendUvarint(nil, 1<<32-1)
	if _, err := AppendDecompressed(nil, CodecSnappy, append(claim, 0, 0), 0); err == nil {
		t.Fatal("accepted a lying snappy length")
	}
}

func TestCorruptCompressedInput(t *testing.T) {
	in := bytes.Repeat([]byte("corrupt me "), 5000)
	for _, c := range allCodecs[1:] {
		enc, _ := AppendCompressed(nil, c, in)
		for _, cut := range []int{1, len(enc) / 2, len(enc) - 1} {
			got, err := AppendDecompressed(nil, c, enc[:cut], 0)
			if err == nil && bytes.Equal(got, in) {
				t.Errorf("%s: truncation at %d decoded to the full input", c, cut)
			}
		}
		bad := bytes.Clone(enc)
		for i := len(bad) / 3; i < len(bad)/3+8 && i < len(bad); i++ {
			bad[i] ^= 0xA5
		}
		if got, err := AppendDecompressed(nil, c, bad, 0); err == nil && bytes.Equal(got, in) {
			t.Errorf("%s: corrupted input decoded to the original", c)
		}
	}
}

func TestDecompressReusesScratch(t *testing.T) {
	in := bytes.Repeat([]byte("reuse"), 10_000)
	for _, c := range allCodecs[1:] {
		enc, _ := AppendCompressed(nil, c, in)
		scratch := make([]byte, 0, 1<<20)
		out, err := AppendDecompressed(scratch, c, enc, 0)
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("%s: %v", c, err)
		}
		if &out[:1][0] != &scratch[:1][0] {
			t.Errorf("%s: did not decompress into the scratch buffer", c)
		}
	}
}

// A zstd frame of a few bytes can declare a huge window, which the decoder
// allocates before reading any data.
func TestZstdHostileWindow(t *testing.T) {
	frame := func(windowExp byte) []byte {
		// Magic, descriptor (no content size, not single segment),
		// window 2^(10+exp), then one last RLE block of a single 'a'.
		return []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, windowExp << 3, 0x0B, 0x00, 0x00, 'a'}
	}
	if _, err := AppendDecompressed(nil, CodecZstd, frame(17), 0); err == nil {
		t.Fatal("accepted a 128 MiB window")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, err := AppendDecompressed(nil, CodecZstd, frame(14), 0) // 16 MiB
	runtime.ReadMemStats(&after)
	if err != nil || string(out) != "a" {
		t.Fatalf("16 MiB window: %q %v", out, err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 40<<20 {
		t.Fatalf("one frame allocated %d MiB", grew>>20)
	}
}

func TestGzipMembersAndTrailingBytes(t *testing.T) {
	a, _ := AppendCompressed(nil, CodecGzip, []byte("first "))
	b, _ := AppendCompressed(nil, CodecGzip, []byte("second"))
	got, err := AppendDecompressed(nil, CodecGzip, append(bytes.Clone(a), b...), 0)
	if err != nil || string(got) != "first second" {
		t.Fatalf("two members: %q %v", got, err)
	}
	got, err = AppendDecompressed(nil, CodecGzip, append(bytes.Clone(a), "junk"...), 0)
	if err != nil || string(got) != "first " {
		t.Fatalf("trailing junk: %q %v", got, err)
	}
	// The limit covers all members together.
	if _, err := AppendDecompressed(nil, CodecGzip, append(bytes.Clone(a), b...), 8); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Fatalf("limit across members: %v", err)
	}
}

type stallingReader struct{}

func (stallingReader) Read([]byte) (int, error) { return 0, nil }

func TestReadBoundedStopsOnStalls(t *testing.T) {
	if _, err := readBounded(nil, stallingReader{}, 100, 0); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("got %v", err)
	}
}
