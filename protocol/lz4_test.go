package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/pierrec/lz4/v4"
)

func TestXXH32(t *testing.T) {
	// Reference values of XXH32 with seed 0.
	for in, want := range map[string]uint32{
		"":    0x02CC5D05,
		"a":   0x550D7456,
		"abc": 0x32D153FF,
	} {
		if got := xxh32([]byte(in)); got != want {
			t.Errorf("xxh32(%q) = %#08x, want %#08x", in, got, want)
		}
	}
}

// writeLZ4 compresses in with the lz4 library's writer, as franz-go and
// other Go producers do, with the given options on top of its defaults (4
// MiB blocks, content checksum on).
func writeLZ4(t *testing.T, in []byte, opts ...lz4.Option) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	if err := w.Apply(append([]lz4.Option{lz4.ConcurrencyOption(1)}, opts...)...); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(in); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestLZ4ReadsGoWriterFrames(t *testing.T) {
	in := append(pseudoRandom(300_000, 3), bytes.Repeat([]byte("gregor "), 100_000)...)
	for name, opts := range map[string][]lz4.Option{
		"defaults":       nil,
		"64KiB blocks":   {lz4.BlockSizeOption(lz4.Block64Kb)},
		"256KiB blocks":  {lz4.BlockSizeOption(lz4.Block256Kb)},
		"block checksum": {lz4.BlockSizeOption(lz4.Block64Kb), lz4.BlockChecksumOption(true)},
		"content size":   {lz4.SizeOption(uint64(len(in)))},
		"no checksums":   {lz4.ChecksumOption(false)},
	} {
		t.Run(name, func(t *testing.T) {
			enc := writeLZ4(t, in, opts...)
			got, err := AppendDecompressed([]byte("x"), CodecLZ4, enc, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[1:], in) || got[0] != 'x' {
				t.Fatalf("decoded %d bytes, want %d", len(got)-1, len(in))
			}
		})
	}
}

func TestLZ4ChecksumsKafkaChecks(t *testing.T) {
	in := pseudoRandom(200_000, 5)

	// The content checksum is not verified (Kafka's Lz4BlockInputStream
	// reads past it): a wrong one still decodes.
	enc := writeLZ4(t, in)
	if enc[4]&lz4FlagContentChecksum == 0 {
		t.Fatal("the writer did not set a content checksum")
	}
	enc[len(enc)-1] ^= 0xFF
	if got, err := AppendDecompressed(nil, CodecLZ4, enc, 0); err != nil || !bytes.Equal(got, in) {
		t.Fatalf("wrong content checksum: %v", err)
	}

	// Block checksums are verified when the frame has them.
	enc = writeLZ4(t, in, lz4.BlockSizeOption(lz4.Block64Kb), lz4.BlockChecksumOption(true))
	bad := bytes.Clone(enc)
	bad[7+4+10] ^= 0x01 // inside the first block's data
	if _, err := AppendDecompressed(nil, CodecLZ4, bad, 0); err == nil || !strings.Contains(err.Error(), "block checksum") {
		t.Fatalf("corrupt block with a block checksum: %v", err)
	}

	// The header checksum is verified, as Kafka does for magic v2.
	bad = bytes.Clone(enc)
	bad[6] ^= 0x01
	if _, err := AppendDecompressed(nil, CodecLZ4, bad, 0); err == nil || !strings.Contains(err.Error(), "descriptor checksum") {
		t.Fatalf("corrupt header checksum: %v", err)
	}
}

// lz4Header is a frame magic and descriptor with the given FLG and BD and a
// correct header checksum.
func lz4Header(flg, bd byte) []byte {
	h := binary.LittleEndian.AppendUint32(nil, lz4FrameMagic)
	h = append(h, flg, bd)
	return append(h, byte(xxh32(h[4:])>>8))
}

func TestLZ4FrameForms(t *testing.T) {
	one := writeLZ4(t, []byte(strings.Repeat("one ", 1000)))
	two := writeLZ4(t, []byte(strings.Repeat("two ", 1000)))
	want := strings.Repeat("one ", 1000) + strings.Repeat("two ", 1000)

	skippable := binary.LittleEndian.AppendUint32(nil, lz4SkippableMagic|0x7)
	skippable = binary.LittleEndian.AppendUint32(skippable, 3)
	skippable = append(skippable, "abc"...)

	// A linked block reaches back into the previous block: the first is
	// stored ("hello world, "), the second copies 8 bytes from 13 back,
	// then ends with 5 literals.
	stored := []byte("hello world, ")
	linkedBlock := []byte{0x04, 13, 0, 0x50, '1', '2', '3', '4', '5'}
	frame := func(flg byte) []byte {
		f := lz4Header(flg, 0x40)
		f = binary.LittleEndian.AppendUint32(f, uint32(len(stored))|lz4BlockUncompressed)
		f = append(f, stored...)
		f = binary.LittleEndian.AppendUint32(f, uint32(len(linkedBlock)))
		f = append(f, linkedBlock...)
		return binary.LittleEndian.AppendUint32(f, 0)
	}

	for _, c := range []struct {
		name string
		in   []byte
		want string
		err  string
	}{
		{"concatenated frames", append(bytes.Clone(one), two...), want, ""},
		{"skippable frame between", append(append(bytes.Clone(one), skippable...), two...), want, ""},
		{"empty", nil, "", ""},
		{"linked blocks", frame(0x40), "hello world, hello wo12345", ""},
		{"independent blocks cannot reach back", frame(0x60), "", "corrupt block"},
		{"legacy frame", binary.LittleEndian.AppendUint32(nil, lz4LegacyMagic), "", "legacy"},
		{"bad magic", []byte{1, 2, 3, 4}, "", "magic"},
		{"trailing bytes", append(bytes.Clone(one), 1, 2), "", "truncated"},
		{"truncated frame", one[:len(one)-6], "", "truncated"},
		{"version 2", append(lz4Header(0xA0, 0x40), 0, 0, 0, 0), "", "version"},
		{"reserved FLG bit", append(lz4Header(0x62, 0x40), 0, 0, 0, 0), "", "reserved"},
		{"reserved BD bit", append(lz4Header(0x60, 0x41), 0, 0, 0, 0), "", "reserved"},
		{"block size index 3", append(lz4Header(0x60, 0x30), 0, 0, 0, 0), "", "block size index"},
		{"dictionary id", append(append(lz4Header(0x61, 0x40)[:6], 1, 2, 3, 4, 0), 0, 0, 0, 0), "", "checksum"},
		{"block above the frame's block size", binary.LittleEndian.AppendUint32(lz4Header(0x60, 0x40), 64<<10+1), "", "exceeds"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := AppendDecompressed(nil, CodecLZ4, c.in, 0)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error with %q", err, c.err)
				}
				return
			}
			if err != nil || string(got) != c.want {
				t.Fatalf("got %q %v", got, err)
			}
		})
	}

	// A frame with a dictionary id and a correct header checksum is
	// refused: it cannot be decoded without the dictionary.
	withDict := binary.LittleEndian.AppendUint32(nil, lz4FrameMagic)
	withDict = append(withDict, 0x61, 0x40, 1, 2, 3, 4)
	withDict = append(withDict, byte(xxh32(withDict[4:])>>8), 0, 0, 0, 0)
	if _, err := AppendDecompressed(nil, CodecLZ4, withDict, 0); err == nil || !strings.Contains(err.Error(), "dictionary") {
		t.Fatalf("dictionary frame: %v", err)
	}
}

func TestLZ4Limit(t *testing.T) {
	in := bytes.Repeat([]byte{7}, 1<<20)
	enc := writeLZ4(t, in)
	if _, err := AppendDecompressed(nil, CodecLZ4, enc, len(in)); err != nil {
		t.Fatal(err)
	}
	if _, err := AppendDecompressed(nil, CodecLZ4, enc, len(in)-1); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Fatalf("got %v", err)
	}
	// Stored blocks count against the limit too.
	stored := lz4Header(0x60, 0x40)
	stored = binary.LittleEndian.AppendUint32(stored, 10|lz4BlockUncompressed)
	stored = append(stored, "0123456789"...)
	stored = binary.LittleEndian.AppendUint32(stored, 0)
	if _, err := AppendDecompressed(nil, CodecLZ4, stored, 9); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Fatalf("stored block: %v", err)
	}
}

// FuzzLZ4MatchesLibrary holds the frame reader against the lz4 library's
// own reader, which this package used before: both decode the same bytes to
// the same output, except where the reader follows Kafka and the frame
// format on purpose (it skips the content checksum and content size, and
// refuses legacy frames and magics the format does not define).
func FuzzLZ4MatchesLibrary(f *testing.F) {
	for _, in := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("fuzz me "), 3000), pseudoRandom(3000, 5)} {
		enc, err := AppendCompressed(nil, CodecLZ4, in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		_ = w.Apply(lz4.BlockChecksumOption(true), lz4.BlockSizeOption(lz4.Block64Kb), lz4.ConcurrencyOption(1))
		_, _ = w.Write(in)
		_ = w.Close()
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ours, ourErr := AppendDecompressed(nil, CodecLZ4, data, fuzzLimit)
		lib, libErr := io.ReadAll(io.LimitReader(lz4.NewReader(bytes.NewReader(data)), fuzzLimit+1))
		if libErr == nil && len(lib) > fuzzLimit {
			libErr = ErrDecompressedTooLarge
		}
		switch {
		case ourErr == nil && libErr == nil:
			if !bytes.Equal(ours, lib) {
				t.Fatalf("decoded %d bytes, the library %d", len(ours), len(lib))
			}
		case ourErr == nil:
			if !errors.Is(libErr, lz4.ErrInvalidFrameChecksum) && !errors.Is(libErr, lz4.ErrInvalidContentSize) {
				t.Fatalf("accepted what the library refuses with %v", libErr)
			}
		case libErr == nil:
			// The library also skips frames with magics 0x184D2A00
			// to 0x184D2AFF; the format (and Kafka) has only
			// 0x184D2A50 to 0x184D2A5F as skippable.
			legacy := bytes.Contains(data, binary.LittleEndian.AppendUint32(nil, lz4LegacyMagic))
			if !legacy && !strings.Contains(ourErr.Error(), "invalid frame magic 0x184d2a") {
				t.Fatalf("refused what the library decodes: %v", ourErr)
			}
		}
	})
}
