package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// DefaultMaxDecompressedBytes bounds how large the records of one batch may
// inflate to when the caller gives no bound of its own. Kafka has no such
// bound and relies on the JVM heap; a single hostile batch must not be able
// to take the process down, so Gregor refuses anything larger with
// CORRUPT_MESSAGE. Java producers close a batch near batch.size of
// *compressed* bytes, so real batches inflate to a few MiB at most.
const DefaultMaxDecompressedBytes = 64 << 20

// ErrDecompressedTooLarge means the records inflate beyond the allowed bound.
var ErrDecompressedTooLarge = errors.New("decompressed records exceed the size limit")

// ErrUnknownCodec is returned for compression ids Kafka does not define (5-7).
var ErrUnknownCodec = errors.New("unknown compression codec")

// Valid reports whether c is one of the codecs Kafka defines.
func (c Codec) Valid() bool { return c >= CodecNone && c <= CodecZstd }

// AppendDecompressed appends the decompressed form of src (the records
// section of a batch compressed with codec) to dst and returns the extended
// slice. At most limit bytes are appended; more gives
// ErrDecompressedTooLarge. A limit <= 0 means DefaultMaxDecompressedBytes.
func AppendDecompressed(dst []byte, codec Codec, src []byte, limit int) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultMaxDecompressedBytes
	}
	switch codec {
	case CodecNone:
		if len(src) > limit {
			return dst, ErrDecompressedTooLarge
		}
		return append(dst, src...), nil
	case CodecGzip:
		return gunzip(dst, src, limit)
	case CodecSnappy:
		return unsnappy(dst, src, limit)
	case CodecLZ4:
		return unlz4(dst, src, limit)
	case CodecZstd:
		return unzstd(dst, src, limit)
	}
	return dst, fmt.Errorf("decompressing: %w %d", ErrUnknownCodec, int8(codec))
}

// AppendCompressed appends src compressed with codec, in the framing the
// Java client writes for magic v2 batches, to dst.
func AppendCompressed(dst []byte, codec Codec, src []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		return append(dst, src...), nil
	case CodecGzip:
		return appendGzip(dst, src)
	case CodecSnappy:
		return appendXerialSnappy(dst, src), nil
	case CodecLZ4:
		return appendLZ4(dst, src)
	case CodecZstd:
		return appendZstd(dst, src), nil
	}
	return dst, fmt.Errorf("compressing: %w %d", ErrUnknownCodec, int8(codec))
}

// sliceWriter is an io.Writer that appends to b; compressors write into it
// so that output lands directly in the caller's buffer.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// readBounded appends everything r yields to dst, failing once more than
// limit bytes have been appended. It grows dst itself (rather than
// io.ReadAll) so that a reused scratch buffer is filled without copying and
// so that memory never runs ahead of the bound.
func readBounded(dst []byte, r io.Reader, limit int, sizeHint int) ([]byte, error) {
	start := len(dst)
	for stalls := 0; ; {
		if cap(dst)-len(dst) < 512 {
			grow := max(cap(dst), sizeHint, 16<<10)
			// One byte past the limit is enough to detect overflow.
			if room := start + limit + 1 - len(dst); grow > room {
				grow = room
			}
			// Grow rather than make+copy: only the new room is zeroed.
			dst = slices.Grow(dst, grow)
		}
		end := min(cap(dst), start+limit+1)
		n, err := r.Read(dst[len(dst):end])
		dst = dst[:len(dst)+n]
		if n == 0 && err == nil {
			// io.Reader allows this but a decoder that keeps doing it
			// would spin forever.
			if stalls++; stalls > 100 {
				return dst, io.ErrNoProgress
			}
			continue
		}
		stalls = 0
		if len(dst)-start > limit {
			return dst, ErrDecompressedTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// Decoders and encoders are expensive to set up, so they are cached in
// pools. The pools hold no observable state: every user Resets what it
// takes before use.
var (
	gzipReaders sync.Pool // *gzipReader
	gzipWriters sync.Pool // *gzip.Writer
	lz4Writers  sync.Pool // *lz4.Writer
	zstdReaders sync.Pool // *zstdReader
)

type gzipReader struct {
	src bytes.Reader
	zr  gzip.Reader
}

func gunzip(dst, src []byte, limit int) ([]byte, error) {
	gr, _ := gzipReaders.Get().(*gzipReader)
	if gr == nil {
		gr = new(gzipReader)
	}
	defer gzipReaders.Put(gr)
	gr.src.Reset(src)
	if err := gr.zr.Reset(&gr.src); err != nil {
		return dst, fmt.Errorf("reading gzip header: %w", err)
	}
	// Java's GZIPInputStream reads concatenated members and ignores
	// whatever follows the last one if it is not a gzip header; do the
	// same, one member at a time.
	start := len(dst)
	for {
		gr.zr.Multistream(false)
		var err error
		dst, err = readBounded(dst, &gr.zr, limit-(len(dst)-start), 4*len(src))
		if err != nil {
			return dst, fmt.Errorf("decompressing gzip: %w", err)
		}
		if gr.src.Len() == 0 || gr.zr.Reset(&gr.src) != nil {
			return dst, nil
		}
	}
}

func appendGzip(dst, src []byte) ([]byte, error) {
	sw := sliceWriter{b: dst}
	zw, _ := gzipWriters.Get().(*gzip.Writer)
	if zw == nil {
		var err error
		// Kafka's gzip default is Deflater.DEFAULT_COMPRESSION (level 6).
		zw, err = gzip.NewWriterLevel(&sw, gzip.DefaultCompression)
		if err != nil {
			return dst, fmt.Errorf("creating gzip writer: %w", err)
		}
	} else {
		zw.Reset(&sw)
	}
	defer func() {
		zw.Reset(nil)
		gzipWriters.Put(zw)
	}()
	if _, err := zw.Write(src); err != nil {
		return dst, fmt.Errorf("compressing gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return dst, fmt.Errorf("compressing gzip: %w", err)
	}
	return sw.b, nil
}

// The xerial snappy-java stream format, which the Java client's
// SnappyOutputStream writes: a 16-byte header (magic, version 1, minimum
// compatible version 1) then chunks of [int32 big-endian length][raw snappy
// block], each block holding at most 32 KiB of input.
var xerialMagic = [8]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16
	xerialBlockSize  = 32 << 10
)

func hasXerialHeader(b []byte) bool {
	return len(b) >= xerialHeaderSize && bytes.Equal(b[:len(xerialMagic)], xerialMagic[:])
}

// unsnappy decodes both the xerial framing and a bare snappy block (which
// librdkafka and older Go clients may send); snappy-java's input stream
// accepts both the same way, deciding by the magic.
func unsnappy(dst, src []byte, limit int) ([]byte, error) {
	if !hasXerialHeader(src) {
		return appendSnappyBlock(dst, src, limit, len(dst))
	}
	start := len(dst)
	rest := src[xerialHeaderSize:]
	for len(rest) > 0 {
		// snappy-java accepts concatenated streams, each with its header.
		if hasXerialHeader(rest) {
			rest = rest[xerialHeaderSize:]
			continue
		}
		if len(rest) < 4 {
			return dst, errors.New("decompressing snappy: truncated xerial chunk length")
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return dst, fmt.Errorf("decompressing snappy: xerial chunk of %d bytes with only %d left", n, len(rest))
		}
		var err error
		dst, err = appendSnappyBlock(dst, rest[:n], limit, start)
		if err != nil {
			return dst, err
		}
		rest = rest[n:]
	}
	return dst, nil
}

// appendSnappyBlock decodes one raw snappy block onto dst; start is where
// the output of this whole decompression began, for the limit.
func appendSnappyBlock(dst, block []byte, limit, start int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return dst, fmt.Errorf("decompressing snappy: %w", err)
	}
	// DecodedLen reads a declared length: check it before allocating.
	if n > limit-(len(dst)-start) {
		return dst, ErrDecompressedTooLarge
	}
	dst = slices.Grow(dst, n)
	out := dst[len(dst) : len(dst)+n]
	got, err := snappy.Decode(out, block)
	if err != nil {
		return dst, fmt.Errorf("decompressing snappy: %w", err)
	}
	if len(got) != n || (n > 0 && &got[0] != &out[0]) {
		return dst, errors.New("decompressing snappy: block length disagrees with its header")
	}
	return dst[:len(dst)+n], nil
}

func appendXerialSnappy(dst, src []byte) []byte {
	dst = append(dst, xerialMagic[:]...)
	dst = binary.BigEndian.AppendUint32(dst, 1) // version
	dst = binary.BigEndian.AppendUint32(dst, 1) // minimum compatible version
	for len(src) > 0 {
		chunk := src[:min(len(src), xerialBlockSize)]
		src = src[len(chunk):]
		lenAt := len(dst)
		dst = slices.Grow(dst, 4+snappy.MaxEncodedLen(len(chunk)))
		dst = dst[:lenAt+4]
		enc := snappy.Encode(dst[lenAt+4:cap(dst)], chunk)
		binary.BigEndian.PutUint32(dst[lenAt:], uint32(len(enc)))
		dst = dst[:lenAt+4+len(enc)]
	}
	return dst
}

// appendLZ4 writes an LZ4 frame the way Kafka's Lz4BlockOutputStream does
// for magic v2: 64 KiB independent blocks, no block or content checksum, no
// content size, and a correct header checksum.
func appendLZ4(dst, src []byte) ([]byte, error) {
	sw := sliceWriter{b: dst}
	zw, _ := lz4Writers.Get().(*lz4.Writer)
	if zw == nil {
		zw = lz4.NewWriter(nil)
		if err := zw.Apply(
			lz4.BlockSizeOption(lz4.Block64Kb),
			lz4.ChecksumOption(false),
			lz4.BlockChecksumOption(false),
			lz4.ConcurrencyOption(1),
		); err != nil {
			return dst, fmt.Errorf("configuring lz4 writer: %w", err)
		}
	}
	zw.Reset(&sw)
	defer func() {
		zw.Reset(nil)
		lz4Writers.Put(zw)
	}()
	if _, err := zw.Write(src); err != nil {
		return dst, fmt.Errorf("compressing lz4: %w", err)
	}
	if err := zw.Close(); err != nil {
		return dst, fmt.Errorf("compressing lz4: %w", err)
	}
	return sw.b, nil
}

type zstdReader struct {
	src bytes.Reader
	zr  *zstd.Decoder
}

// zstdMaxWindow bounds the history a frame may make the decoder allocate:
// a ten-byte frame can declare any window up to this, and the decoder
// allocates it up front. Producers use 2 MiB (zstd level 3, Kafka's
// default) to 8 MiB (level 19); single-segment frames (kgo) have a window
// as large as the batch. zstd-jni would accept up to 128 MiB; frames above
// 16 MiB (ultra levels, long-distance matching) are refused here with
// CORRUPT_MESSAGE so that hostile frames cost little memory.
const zstdMaxWindow = 16 << 20

func unzstd(dst, src []byte, limit int) ([]byte, error) {
	zr, _ := zstdReaders.Get().(*zstdReader)
	if zr == nil {
		// Concurrency 1 decodes synchronously: no goroutines are left
		// behind when the pool drops a decoder.
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(zstdMaxWindow),
		)
		if err != nil {
			return dst, fmt.Errorf("creating zstd decoder: %w", err)
		}
		zr = &zstdReader{zr: d}
	}
	defer func() {
		_ = zr.zr.Reset(nil)
		zstdReaders.Put(zr)
	}()
	zr.src.Reset(src)
	if err := zr.zr.Reset(&zr.src); err != nil {
		return dst, fmt.Errorf("decompressing zstd: %w", err)
	}
	out, err := readBounded(dst, zr.zr, limit, 4*len(src))
	if err != nil {
		return out, fmt.Errorf("decompressing zstd: %w", err)
	}
	return out, nil
}

// zstdEncoder is shared: EncodeAll is safe for concurrent use and keeps its
// own pool of encoder states. Kafka's zstd default is level 3, which is
// klauspost's SpeedDefault.
var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithZeroFrames(true),
	)
	if err != nil {
		// Only invalid options fail, and the options are constant.
		panic(fmt.Sprintf("protocol: creating zstd encoder: %v", err))
	}
	return enc
})

func appendZstd(dst, src []byte) []byte {
	return zstdEncoder().EncodeAll(src, dst)
}
