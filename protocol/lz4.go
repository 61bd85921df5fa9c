package protocol

// The LZ4 frame reader for record batches. It decodes each block straight
// into the caller's buffer with lz4.UncompressBlock, and it checks what
// Kafka's reader (Lz4BlockInputStream in Kafka 4.x) checks: the magic, the
// frame descriptor and its header checksum, the block sizes, and block
// checksums when a frame has them. Like Kafka it does not verify the
// content checksum (the xxh32 of all decompressed bytes, which franz-go and
// the Go lz4 writer add by default): the batch CRC-32C, checked before
// decompression, already covers every compressed byte, so a second hash over
// the output only costs time (it was an eighth of the broker's CPU under a
// produce load). The content size field is skipped as Kafka skips it.
//
// Where Kafka's reader is narrower, this one keeps what the lz4 library's
// reader accepted before it: frames after the first (Kafka stops at the
// first end mark), skippable frames, and linked (dependent) blocks. Legacy
// frames (magic 0x184C2102) are refused, as Kafka refuses them; no Kafka
// client writes them.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/pierrec/lz4/v4"
)

const (
	lz4FrameMagic     = 0x184D2204
	lz4SkippableMagic = 0x184D2A50 // the low four bits are free
	lz4LegacyMagic    = 0x184C2102

	lz4FlagDictID          = 1 << 0
	lz4FlagReserved        = 1 << 1
	lz4FlagContentChecksum = 1 << 2
	lz4FlagContentSize     = 1 << 3
	lz4FlagBlockChecksum   = 1 << 4
	lz4FlagIndependent     = 1 << 5

	lz4BlockUncompressed = 1 << 31
	// lz4Window is how far back a linked block may reach.
	lz4Window = 64 << 10
)

var errLZ4Truncated = errors.New("lz4 frame truncated")

// unlz4 appends the decompression of src, one or more LZ4 frames, to dst.
// At most limit bytes are appended.
func unlz4(dst, src []byte, limit int) ([]byte, error) {
	start := len(dst)
	for len(src) > 0 {
		if len(src) < 4 {
			return dst, errLZ4Truncated
		}
		magic := binary.LittleEndian.Uint32(src)
		switch {
		case magic == lz4FrameMagic:
			var err error
			dst, src, err = appendLZ4Frame(dst, src[4:], limit-(len(dst)-start))
			if err != nil {
				return dst, fmt.Errorf("decompressing lz4: %w", err)
			}
		case magic&^0xF == lz4SkippableMagic:
			if len(src) < 8 {
				return dst, errLZ4Truncated
			}
			n := uint64(binary.LittleEndian.Uint32(src[4:]))
			if n > uint64(len(src)-8) {
				return dst, errLZ4Truncated
			}
			src = src[8+n:]
		case magic == lz4LegacyMagic:
			return dst, errors.New("decompressing lz4: legacy frames are not supported")
		default:
			return dst, fmt.Errorf("decompressing lz4: invalid frame magic %#08x", magic)
		}
	}
	return dst, nil
}

// appendLZ4Frame decodes the frame whose descriptor starts src (the magic
// already consumed) onto dst and returns what follows the frame.
func appendLZ4Frame(dst, src []byte, limit int) ([]byte, []byte, error) {
	if len(src) < 3 {
		return dst, nil, errLZ4Truncated
	}
	flg, bd := src[0], src[1]
	descLen := 2
	if flg&lz4FlagContentSize != 0 {
		descLen += 8
	}
	if flg&lz4FlagDictID != 0 {
		descLen += 4
	}
	if len(src) < descLen+1 {
		return dst, nil, errLZ4Truncated
	}
	if got, want := src[descLen], byte(xxh32(src[:descLen])>>8); got != want {
		return dst, nil, fmt.Errorf("frame descriptor checksum %#02x, computed %#02x", got, want)
	}
	if v := flg >> 6; v != 1 {
		return dst, nil, fmt.Errorf("frame version %d is not 1", v)
	}
	if flg&lz4FlagReserved != 0 || bd&0x8F != 0 {
		return dst, nil, errors.New("frame descriptor has reserved bits set")
	}
	if flg&lz4FlagDictID != 0 {
		// Decoding without the dictionary would produce garbage.
		return dst, nil, errors.New("frames with a dictionary are not supported")
	}
	sizeIndex := bd >> 4 & 0x7
	if sizeIndex < 4 {
		return dst, nil, fmt.Errorf("block size index %d is not between 4 and 7", sizeIndex)
	}
	maxBlock := 1 << (2*int(sizeIndex) + 8)
	blockSum := flg&lz4FlagBlockChecksum != 0
	linked := flg&lz4FlagIndependent == 0
	src = src[descLen+1:]

	start := len(dst)
	for {
		if len(src) < 4 {
			return dst, nil, errLZ4Truncated
		}
		word := binary.LittleEndian.Uint32(src)
		src = src[4:]
		if word == 0 { // end mark
			if flg&lz4FlagContentChecksum != 0 {
				if len(src) < 4 {
					return dst, nil, errLZ4Truncated
				}
				src = src[4:] // not verified, as in Kafka
			}
			return dst, src, nil
		}
		size := int(word &^ lz4BlockUncompressed)
		if size > maxBlock {
			return dst, nil, fmt.Errorf("block of %d bytes exceeds the frame's %d", size, maxBlock)
		}
		need := size
		if blockSum {
			need += 4
		}
		if len(src) < need {
			return dst, nil, errLZ4Truncated
		}
		block := src[:size]
		if blockSum {
			if got, want := binary.LittleEndian.Uint32(src[size:]), xxh32(block); got != want {
				return dst, nil, fmt.Errorf("block checksum %#08x, computed %#08x", got, want)
			}
		}
		src = src[need:]
		if word&lz4BlockUncompressed != 0 {
			dst = append(dst, block...)
		} else {
			// A block never decodes to more than the frame's block size;
			// room for that much lets it decode in place, once.
			dst = slices.Grow(dst, maxBlock)
			out := dst[len(dst) : len(dst)+maxBlock]
			var dict []byte
			if linked {
				dict = dst[max(start, len(dst)-lz4Window):]
			}
			n, err := lz4.UncompressBlockWithDict(block, out, dict)
			if err != nil {
				return dst, nil, fmt.Errorf("corrupt block: %w", err)
			}
			dst = dst[:len(dst)+n]
		}
		if len(dst)-start > limit {
			return dst, nil, ErrDecompressedTooLarge
		}
	}
}

// xxh32 is the 32-bit xxHash of b with seed 0, which LZ4 frames use for
// their header and block checksums.
func xxh32(b []byte) uint32 {
	const (
		p1 uint32 = 2654435761
		p2 uint32 = 2246822519
		p3 uint32 = 3266489917
		p4 uint32 = 668265263
		p5 uint32 = 374761393
	)
	n := uint32(len(b))
	var h uint32
	if len(b) >= 16 {
		// The accumulators start at seed+p1+p2, seed+p2, seed, seed-p1;
		// computed at run time because the sums overflow as constants.
		v1, v2, v3, v4 := p1, p2, uint32(0), uint32(0)
		v1 += p2
		v4 -= p1
		round := func(acc uint32, lane []byte) uint32 {
			return bits.RotateLeft32(acc+binary.LittleEndian.Uint32(lane)*p2, 13) * p1
		}
		for ; len(b) >= 16; b = b[16:] {
			v1 = round(v1, b[0:])
			v2 = round(v2, b[4:])
			v3 = round(v3, b[8:])
			v4 = round(v4, b[12:])
		}
		h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) + bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
	} else {
		h = p5
	}
	h += n
	for ; len(b) >= 4; b = b[4:] {
		h = bits.RotateLeft32(h+binary.LittleEndian.Uint32(b)*p3, 17) * p4
	}
	for _, c := range b {
		h = bits.RotateLeft32(h+uint32(c)*p5, 11) * p1
	}
	h ^= h >> 15
	h *= p2
	h ^= h >> 13
	h *= p3
	h ^= h >> 16
	return h
}
