// Package protocol holds Kafka's wire framing, request and response
// headers, the API version registry and the record-batch codec. It knows no
// sockets and keeps no global state (a FramePool belongs to its caller).
//
// It imports nothing of Gregor's (the README's import table): every other
// package may use it.
package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrFrameTooLarge is returned for a frame whose size prefix exceeds the
// limit (socket.request.max.bytes) or is negative; the connection is closed.
var ErrFrameTooLarge = errors.New("request frame size out of range")

// ReadFrame reads one size-prefixed frame. buf is reused when large enough.
func ReadFrame(r io.Reader, maxSize int32, buf []byte) ([]byte, error) {
	n, err := readFrameSize(r, maxSize)
	if err != nil {
		return nil, err
	}
	return readFrameBody(r, int(n), buf, int(n))
}

// ReadPooledFrame is ReadFrame with the buffer taken from pool when it holds
// one large enough. A new buffer is sized so that pool can hold it later;
// the caller decides whether to give it back (FramePool.Put).
func ReadPooledFrame(r io.Reader, maxSize int32, pool *FramePool) ([]byte, error) {
	n, err := readFrameSize(r, maxSize)
	if err != nil {
		return nil, err
	}
	return readFrameBody(r, int(n), pool.get(int(n)), pooledCap(int(n)))
}

// peekReader is what bufio.Reader offers to read a frame's size prefix in
// place.
type peekReader interface {
	Peek(n int) ([]byte, error)
	Discard(n int) (int, error)
}

func readFrameSize(r io.Reader, maxSize int32) (int32, error) {
	var n int32
	if pr, ok := r.(peekReader); ok {
		size, err := pr.Peek(4)
		if err != nil {
			if len(size) > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF // as io.ReadFull reports it
			}
			return 0, err
		}
		n = int32(binary.BigEndian.Uint32(size))
		_, _ = pr.Discard(4)
	} else {
		var err error
		if n, err = readSizePrefix(r); err != nil {
			return 0, err
		}
	}
	if n < 0 || n > maxSize {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, maxSize)
	}
	return n, nil
}

// readSizePrefix reads the four size bytes from a reader that cannot peek;
// the array it reads into escapes to the heap, which is why the peek path
// above does not share it.
func readSizePrefix(r io.Reader) (int32, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(size[:])), nil
}

// readFrameBody reads an n-byte frame body into buf when it is large
// enough, else into a new buffer of capacity newCap (>= n). A reused
// buffer is not zeroed first: the read overwrites exactly the n bytes the
// frame is.
func readFrameBody(r io.Reader, n int, buf []byte, newCap int) ([]byte, error) {
	if cap(buf) >= n || n <= eagerFrameAlloc {
		if cap(buf) < n {
			buf = make([]byte, n, newCap)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, noEOF(err)
		}
		return buf, nil
	}
	// A large frame grows with the bytes that actually arrive, so a peer
	// that announces 100 MiB and sends nothing costs nothing. Capacity
	// doubles up to newCap, so the copies add up to less than the frame.
	buf = buf[:0]
	for len(buf) < n {
		chunk := min(n-len(buf), max(len(buf), eagerFrameAlloc))
		if cap(buf)-len(buf) < chunk {
			next := make([]byte, len(buf), min(newCap, max(2*cap(buf), len(buf)+chunk)))
			copy(next, buf)
			buf = next
		}
		buf = buf[:len(buf)+chunk]
		if _, err := io.ReadFull(r, buf[len(buf)-chunk:]); err != nil {
			return nil, noEOF(err)
		}
	}
	return buf, nil
}

// eagerFrameAlloc is the frame size up to which the buffer is allocated
// before reading.
const eagerFrameAlloc = 1 << 20

// FramePool recycles request frame buffers, so that a busy connection does
// not allocate, zero and later collect a fresh buffer for every large
// request. Buffers are kept in power-of-two classes from 64 KiB to 16 MiB
// (smaller frames are cheap to allocate; larger ones are rare enough). The
// zero value is ready to use and safe for concurrent use.
//
// A buffer may only be Put once nothing refers to it any more: decoded
// requests alias their frame (kmsg keeps byte fields such as Produce
// records as slices of it), so the caller must know that the request and
// every slice taken from it are dead.
type FramePool struct {
	classes [maxFrameClass - minFrameClass + 1]sync.Pool // of *[]byte
	// holders keeps the emptied *[]byte that carried a buffer, so that a
	// Put needs no new one.
	holders sync.Pool
}

const (
	minFrameClass = 16 // 64 KiB
	maxFrameClass = 24 // 16 MiB
)

// frameClass is the smallest class whose buffers hold n bytes, or -1 when
// frames of n bytes are not pooled.
func frameClass(n int) int {
	c := max(bits.Len(uint(n-1)), minFrameClass)
	if n <= 1<<(minFrameClass-1) || c > maxFrameClass {
		return -1
	}
	return c
}

// pooledCap is the capacity a new buffer for an n-byte frame gets: its
// class size, so that the pool can take it back, or n when not pooled.
func pooledCap(n int) int {
	if c := frameClass(n); c >= 0 {
		return 1 << c
	}
	return n
}

func (p *FramePool) get(n int) []byte {
	c := frameClass(n)
	if p == nil || c < 0 {
		return nil
	}
	h, ok := p.classes[c-minFrameClass].Get().(*[]byte)
	if !ok {
		return nil
	}
	buf := *h
	*h = nil
	p.holders.Put(h)
	return buf
}

// Put gives a frame buffer back. Buffers of a capacity the pool does not
// keep are left to the garbage collector.
func (p *FramePool) Put(buf []byte) {
	// The class a buffer serves is the largest whose size it reaches.
	c := bits.Len(uint(cap(buf))) - 1
	if c < minFrameClass || c > maxFrameClass {
		return
	}
	h, _ := p.holders.Get().(*[]byte)
	if h == nil {
		h = new([]byte)
	}
	*h = buf[:0]
	p.classes[c-minFrameClass].Put(h)
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// RequestHeader is a decoded request header (v0-v2).
type RequestHeader struct {
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
	ClientID      string
	// Flexible is true when the request (and its response) use the
	// flexible encoding of KIP-482.
	Flexible bool
}

// ErrMalformedHeader means the header could not be decoded; the connection
// is closed.
var ErrMalformedHeader = errors.New("malformed request header")

// ParseRequestHeader decodes the header at the start of frame and returns
// the body after it. Whether a header has tagged fields (v2) depends on the
// API and version; flexible must say so (FlexibleVersion). For an API key
// the broker does not know, pass false: the fields up to the client id are
// the same in every header version, which is all a reply needs.
func ParseRequestHeader(frame []byte, flexible bool) (RequestHeader, []byte, error) {
	var h RequestHeader
	if len(frame) < 10 {
		return h, nil, ErrMalformedHeader
	}
	be := binary.BigEndian
	h.APIKey = int16(be.Uint16(frame[0:]))
	h.APIVersion = int16(be.Uint16(frame[2:]))
	h.CorrelationID = int32(be.Uint32(frame[4:]))
	idLen := int16(be.Uint16(frame[8:]))
	rest := frame[10:]
	if idLen > 0 {
		if int(idLen) > len(rest) {
			return h, nil, ErrMalformedHeader
		}
		h.ClientID = string(rest[:idLen])
		rest = rest[idLen:]
	} else if idLen < -1 {
		return h, nil, ErrMalformedHeader
	}
	if flexible {
		h.Flexible = true
		var err error
		if rest, err = skipTaggedFields(rest); err != nil {
			return h, nil, err
		}
	}
	return h, rest, nil
}

// skipTaggedFields skips a tagged-field section (header tags are unused).
func skipTaggedFields(b []byte) ([]byte, error) {
	n, read := binary.Uvarint(b)
	if read <= 0 || n > uint64(len(b)) {
		return nil, ErrMalformedHeader
	}
	b = b[read:]
	for i := uint64(0); i < n; i++ {
		if _, read = binary.Uvarint(b); read <= 0 {
			return nil, ErrMalformedHeader
		}
		b = b[read:]
		size, read := binary.Uvarint(b)
		if read <= 0 || size > uint64(len(b)-read) {
			return nil, ErrMalformedHeader
		}
		b = b[read+int(size):]
	}
	return b, nil
}

// PeekAPI returns the API key and version of a frame without decoding the
// rest, so the caller can pick the request type and header version.
func PeekAPI(frame []byte) (key, version int16, ok bool) {
	if len(frame) < 4 {
		return 0, 0, false
	}
	return int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:])), true
}

// NewRequest returns the kmsg request for key at version, or nil when kmsg
// does not know the key or the version.
func NewRequest(key, version int16) kmsg.Request {
	var req kmsg.Request
	switch key {
	case RaftMessagesKey:
		req = &RaftMessagesRequest{}
	case MetadataFetchKey:
		req = &MetadataFetchRequest{}
	default:
		req = kmsg.RequestForKey(key)
	}
	if req == nil || version < 0 || version > req.MaxVersion() {
		return nil
	}
	req.SetVersion(version)
	return req
}

// AppendResponse appends a complete response frame (size, correlation id,
// header tags when flexible, body) for resp to dst. ApiVersions responses
// always use header v0 so that a client can read them before it knows the
// broker's versions (KIP-511).
func AppendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		dst = append(dst, 0) // no header tagged fields
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// ParseResponse reads a response frame (without its size prefix) into
// resp, whose version must be the request's, and returns its correlation
// id: the client side of AppendResponse.
func ParseResponse(frame []byte, resp kmsg.Response) (int32, error) {
	if len(frame) < 4 {
		return 0, errors.New("response shorter than its header")
	}
	corr := int32(binary.BigEndian.Uint32(frame))
	body := frame[4:]
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		var err error
		if body, err = skipTaggedFields(body); err != nil {
			return corr, fmt.Errorf("response header: %w", err)
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return corr, fmt.Errorf("decoding %s response v%d: %w", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
	return corr, nil
}

// ResponseHeaderSize is the size of a response header before the body:
// size prefix, correlation id and (flexible) the empty tag section.
func ResponseHeaderSize(flexible bool) int {
	if flexible {
		return 9
	}
	return 8
}
