package network

// A connection's read buffer, held only while it has unread bytes.
//
// An idle client connection (a consumer between long polls, a producer
// between batches, one of ten thousand connections a fleet keeps open)
// spent most of its memory on an 8 KiB bufio.Reader it was not using: 7.6
// of the 12.5 KiB of Go heap each idle connection held. connReader takes
// its buffer from the server's pool when bytes arrive and gives it back as
// soon as it has handed out every byte it read. On a TCP socket the buffer
// is taken inside the raw read itself (socket.go), once the netpoller says
// the socket is readable, so that a connection parked waiting for its next
// request holds no buffer at all and the read costs no extra system call.
// A TLS connection reads through crypto/tls, which blocks inside its Read:
// it keeps the buffer while it waits, as before (crypto/tls holds buffers
// of its own anyway).
//
// The reader goroutine alone uses a connReader.

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
)

// readBuffer is one pooled read buffer.
type readBuffer [ReadBufferSize]byte

// readBuffers is a server's pool of read buffers.
type readBuffers struct {
	pool sync.Pool
	// held counts the buffers out of the pool (what the tests check).
	held atomic.Int64
}

func (b *readBuffers) get() *readBuffer {
	b.held.Add(1)
	if rb, ok := b.pool.Get().(*readBuffer); ok {
		return rb
	}
	return new(readBuffer)
}

func (b *readBuffers) put(rb *readBuffer) {
	b.held.Add(-1)
	b.pool.Put(rb)
}

// connReader is what bufio.Reader was to the connection (Peek, Discard and
// Read, which protocol.ReadPooledFrame uses), with its buffer borrowed.
// buf is nil exactly when no unread byte is held (r == w).
type connReader struct {
	buffers *readBuffers
	// raw is the socket's raw connection (a PLAINTEXT or SASL_PLAINTEXT
	// listener), nil when the connection reads through src (TLS).
	raw    syscall.RawConn
	src    io.Reader
	active func() // marks the connection active when bytes arrive
	buf    *readBuffer
	r, w   int
	err    error // the error that ended the stream, given once the bytes before it are read
	// fill's raw read: the callback given to raw.Read (made once, so that
	// a read allocates nothing) and what it read.
	rawFill func(fd uintptr) bool
	rawN    int
	rawErr  syscall.Errno
}

func newConnReader(in io.Reader, buffers *readBuffers, active func()) *connReader {
	cr := &connReader{buffers: buffers, src: in, active: active}
	if rr, ok := in.(*rawReader); ok {
		cr.raw = rr.rc
		cr.rawFill = cr.fillRaw
	}
	return cr
}

// Peek returns the next n bytes (n at most ReadBufferSize) without
// consuming them; fewer, with the error, when the stream ends first.
func (cr *connReader) Peek(n int) ([]byte, error) {
	if n > ReadBufferSize {
		return nil, errors.New("peek beyond the read buffer")
	}
	for cr.w-cr.r < n && cr.err == nil {
		cr.fill()
	}
	if cr.w-cr.r < n {
		if cr.buf == nil {
			return nil, cr.err
		}
		return cr.buf[cr.r:cr.w], cr.err
	}
	return cr.buf[cr.r : cr.r+n], nil
}

// Discard skips the next n bytes, which Peek returned.
func (cr *connReader) Discard(n int) (int, error) {
	n = min(n, cr.w-cr.r)
	cr.r += n
	cr.releaseIfEmpty()
	return n, nil
}

// Read reads into p: what the buffer holds, or, with the buffer empty,
// from the socket (straight into p when p is at least a buffer's size,
// as bufio.Reader does).
func (cr *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if cr.r == cr.w {
		if cr.err != nil {
			return 0, cr.takeErr()
		}
		if len(p) >= ReadBufferSize {
			n, err := cr.src.Read(p)
			if n > 0 {
				cr.active()
			}
			return n, err
		}
		cr.fill()
		if cr.r == cr.w {
			return 0, cr.takeErr()
		}
	}
	n := copy(p, cr.buf[cr.r:cr.w])
	cr.r += n
	cr.releaseIfEmpty()
	return n, nil
}

// takeErr returns the stream's error once, as bufio.Reader does.
func (cr *connReader) takeErr() error {
	err := cr.err
	cr.err = nil
	return err
}

// releaseIfEmpty gives the buffer back once every byte is handed out.
func (cr *connReader) releaseIfEmpty() {
	if cr.r == cr.w && cr.buf != nil {
		cr.buffers.put(cr.buf)
		cr.buf, cr.r, cr.w = nil, 0, 0
	}
}

// fill reads once more into the buffer, after what it holds.
func (cr *connReader) fill() {
	if cr.buf != nil && cr.r > 0 {
		copy(cr.buf[:], cr.buf[cr.r:cr.w])
		cr.w -= cr.r
		cr.r = 0
	}
	before := cr.w
	if cr.raw != nil {
		cr.err = cr.readRaw()
	} else {
		if cr.buf == nil {
			cr.buf = cr.buffers.get()
		}
		// A reader that returns neither bytes nor an error is asked
		// again a few times, as bufio.Reader does.
		for range 100 {
			n, err := cr.src.Read(cr.buf[cr.w:])
			cr.w += n
			cr.err = err
			if n > 0 || err != nil {
				break
			}
		}
		if cr.w == before && cr.err == nil {
			cr.err = io.ErrNoProgress
		}
	}
	if cr.w > before {
		cr.active()
	}
	cr.releaseIfEmpty()
}

// readRaw reads the socket into the buffer, taking the buffer only once
// the socket has bytes; its errors are rawReader's.
func (cr *connReader) readRaw() error {
	cr.rawN, cr.rawErr = 0, 0
	err := rawReadError(cr.rawN, cr.rawErr, cr.raw.Read(cr.rawFill))
	if err == nil {
		cr.w += cr.rawN
	}
	return err
}

// fillRaw is raw.Read's callback: false sends the goroutine to wait in the
// netpoller, having given the buffer back if it holds nothing.
func (cr *connReader) fillRaw(fd uintptr) bool {
	if cr.buf == nil {
		cr.buf = cr.buffers.get()
	}
	n, errno, ready := readNow(fd, cr.buf[cr.w:])
	if !ready {
		cr.releaseIfEmpty()
		return false
	}
	cr.rawN, cr.rawErr = n, errno
	return true
}
