// Package protocol holds Kafka's wire framing, request and response
// headers, the API version registry and the record-batch codec. It knows no
// sockets and keeps no state.
package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrFrameTooLarge is returned for a frame whose size prefix exceeds the
// limit (socket.request.max.bytes) or is negative; the connection is closed.
var ErrFrameTooLarge = errors.New("request frame size out of range")

// ReadFrame reads one size-prefixed frame. buf is reused when large enough.
func ReadFrame(r io.Reader, maxSize int32, buf []byte) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > maxSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, maxSize)
	}
	if cap(buf) >= int(n) || n <= eagerFrameAlloc {
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, noEOF(err)
		}
		return buf, nil
	}
	// A large frame grows with the bytes that actually arrive, so a peer
	// that announces 100 MiB and sends nothing costs nothing.
	buf = buf[:0]
	for len(buf) < int(n) {
		chunk := min(int(n)-len(buf), max(len(buf), eagerFrameAlloc))
		buf = append(buf, make([]byte, chunk)...)
		if _, err := io.ReadFull(r, buf[len(buf)-chunk:]); err != nil {
			return nil, noEOF(err)
		}
	}
	return buf, nil
}

// eagerFrameAlloc is the frame size up to which the buffer is allocated
// before reading.
const eagerFrameAlloc = 1 << 20

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
	req := kmsg.RequestForKey(key)
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

// ResponseHeaderSize is the size of a response header before the body:
// size prefix, correlation id and (flexible) the empty tag section.
func ResponseHeaderSize(flexible bool) int {
	if flexible {
		return 9
	}
	return 8
}
