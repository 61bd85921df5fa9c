package broker

// A client connection.
//
// Goroutine ownership: the reader goroutine (serve) reads frames, decodes
// requests and calls the handler inline, in request order; a handler that
// must wait (long-poll fetch, acks=all produce, JoinGroup, an admin change
// waiting for commit) finishes its slot from its own goroutine. Running the
// synchronous part inline keeps produce appends in the order the client
// sent them, which idempotent sequences rely on. The writer goroutine
// (writeLoop) sends finished slots strictly in request order: clients
// pipeline requests and match responses by order.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxInFlight bounds the requests of one connection being handled or
// waiting to be written; the reader stops reading past it.
const maxInFlight = 128

// drainTimeout bounds how long a shutting-down connection waits for its
// in-flight requests to be answered.
const drainTimeout = 10 * time.Second

type conn struct {
	srv      *Server
	nc       net.Conn
	listener *listener
	log      *slog.Logger
	ctx      context.Context
	cancel   context.CancelFunc
	queue    chan *slot
	// closeOnce guards closing nc.
	closeOnce sync.Once
}

// slot is one request's place in the response order.
//
// The file ranges of a response hold their segment files open until they
// are released: by the writer once the response is sent or fails, or, when
// the writer gives up on the slot (the connection is closing), by whichever
// of abandon and finish comes second.
type slot struct {
	done chan struct{}
	// Exactly one of the following describes the outcome.
	frame      []byte      // a whole encoded response frame
	chunks     []respChunk // a response built from bytes and file ranges
	noResponse bool        // acks=0 produce: nothing is sent
	closeConn  bool        // close the connection instead of answering

	mu        sync.Mutex
	finished  bool // the outcome is set
	abandoned bool // the writer will never send it
}

// respChunk is a piece of a response: bytes, or a file range sent with
// sendfile.
type respChunk struct {
	bytes []byte
	file  vfs.FileRange
}

// finish publishes the outcome to the writer; a response finished after
// the writer gave up on it releases its file ranges at once.
func (s *slot) finish() {
	s.mu.Lock()
	s.finished = true
	abandoned := s.abandoned
	s.mu.Unlock()
	close(s.done)
	if abandoned {
		releaseChunks(s.chunks)
	}
}

// abandon is the writer giving up on the slot without sending it.
func (s *slot) abandon() {
	s.mu.Lock()
	s.abandoned = true
	finished := s.finished
	s.mu.Unlock()
	if finished {
		releaseChunks(s.chunks)
	}
}

func releaseChunks(chunks []respChunk) {
	for _, c := range chunks {
		c.file.Release()
	}
}

// request is what a handler receives.
type request struct {
	conn *conn
	hdr  protocol.RequestHeader
	kreq kmsg.Request
	slot *slot
}

func (r *request) version() int16 { return r.hdr.APIVersion }

// respond encodes resp at the request's version and releases the slot.
func (r *request) respond(resp kmsg.Response) {
	resp.SetVersion(r.hdr.APIVersion)
	r.slot.frame = protocol.AppendResponse(nil, r.hdr.CorrelationID, resp)
	r.slot.finish()
}

// respondChunks sends a pre-encoded response body made of chunks; the frame
// size prefix and header are added here.
func (r *request) respondChunks(body []respChunk) {
	var size int64
	for _, c := range body {
		size += int64(len(c.bytes)) + c.file.Size
	}
	hdrLen := protocol.ResponseHeaderSize(r.hdr.Flexible)
	head := make([]byte, hdrLen)
	binary.BigEndian.PutUint32(head, uint32(size+int64(hdrLen)-4))
	binary.BigEndian.PutUint32(head[4:], uint32(r.hdr.CorrelationID))
	r.slot.chunks = append([]respChunk{{bytes: head}}, body...)
	r.slot.finish()
}

// noResponse releases the slot without sending anything (acks=0).
func (r *request) noResponse() {
	r.slot.noResponse = true
	r.slot.finish()
}

// closeConnection answers by closing the connection, as Kafka does for
// requests it cannot process (and for failed acks=0 produce).
func (r *request) closeConnection() {
	r.slot.closeConn = true
	r.slot.finish()
}

func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		c.nc.Close()
	})
}

// serve runs the reader loop until the connection ends.
func (c *conn) serve() {
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	defer func() {
		// On a graceful shutdown the requests already read are answered
		// (bounded by drainTimeout); otherwise the peer is gone and
		// in-flight work is cancelled.
		if !c.srv.draining.Load() {
			c.cancel()
		}
		close(c.queue)
		select {
		case <-writerDone:
		case <-time.After(drainTimeout):
			c.cancel()
			<-writerDone
		}
		c.close()
	}()

	br := bufio.NewReaderSize(c.nc, 64<<10)
	maxSize := c.srv.opts.MaxRequestSize
	for {
		// A fresh buffer per frame: decoded requests alias it (produce
		// records are appended straight from it) and async handlers
		// may hold it after the next frame is read.
		frame, err := protocol.ReadFrame(br, maxSize, nil)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && c.ctx.Err() == nil {
				c.log.Debug("closing connection", "err", err)
			}
			return
		}
		if !c.handleFrame(frame) {
			return
		}
	}
}

// handleFrame decodes and dispatches one request. It returns false when the
// connection must be closed.
func (c *conn) handleFrame(frame []byte) bool {
	key, version, ok := protocol.PeekAPI(frame)
	if !ok {
		return false
	}
	s := &slot{done: make(chan struct{})}
	select {
	case c.queue <- s:
	case <-c.ctx.Done():
		return false
	}
	kreq := protocol.NewRequest(key, version)
	flexible := kreq != nil && kreq.IsFlexible()
	if key == int16(kmsg.ApiVersions) && (kreq == nil || !c.srv.registry.Serves(key, version)) {
		// KIP-511: a client newer than us learns our versions from a v0
		// response carrying UNSUPPORTED_VERSION.
		hdr, _, err := protocol.ParseRequestHeader(frame, false)
		if err != nil {
			s.closeConn = true
			s.finish()
			return false
		}
		hdr.APIVersion = 0
		r := &request{conn: c, hdr: hdr, slot: s}
		r.respond(c.srv.apiVersionsUnsupported())
		return true
	}
	hdr, body, err := protocol.ParseRequestHeader(frame, flexible)
	if err != nil || kreq == nil {
		c.log.Debug("closing connection: unknown API or bad header", "key", key, "version", version, "err", err)
		s.closeConn = true
		s.finish()
		return false
	}
	h, served := c.srv.handlers[key]
	if !served || !c.listener.serves(key) {
		c.log.Debug("closing connection: API not served on this listener", "key", key, "listener", c.listener.Name)
		s.closeConn = true
		s.finish()
		return false
	}
	if err := kreq.ReadFrom(body); err != nil {
		c.log.Debug("closing connection: malformed request", "api", kmsg.NameForKey(key), "version", version, "err", err)
		s.closeConn = true
		s.finish()
		return false
	}
	r := &request{conn: c, hdr: hdr, kreq: kreq, slot: s}
	if version < h.min || version > h.max {
		if h.unsupported != nil {
			// Produce v0-2: advertised, answered with UNSUPPORTED_VERSION.
			h.unsupported(r)
			return true
		}
		c.log.Debug("closing connection: unsupported version", "api", kmsg.NameForKey(key), "version", version)
		s.closeConn = true
		s.finish()
		return false
	}
	c.srv.dispatch(c.ctx, h, r)
	return true
}

// writeLoop writes finished responses in request order.
func (c *conn) writeLoop() {
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	// drain gives up on the responses not sent; the reader closes the
	// queue once it stops.
	drain := func() {
		for s := range c.queue {
			s.abandon()
		}
	}
	for s := range c.queue {
		select {
		case <-s.done:
		case <-c.ctx.Done():
			s.abandon()
			drain()
			return
		}
		if s.closeConn {
			bw.Flush()
			c.close()
			drain()
			return
		}
		if s.noResponse {
			continue
		}
		var err error
		if s.frame != nil {
			_, err = bw.Write(s.frame)
		} else {
			err = c.writeChunks(bw, s.chunks)
			// Sent (sendfile is done with the files) or failed.
			releaseChunks(s.chunks)
		}
		if err == nil && len(c.queue) == 0 {
			err = bw.Flush()
		}
		if err != nil {
			c.close()
			drain()
			return
		}
	}
	bw.Flush()
}

func (c *conn) writeChunks(bw *bufio.Writer, chunks []respChunk) error {
	for _, ch := range chunks {
		if ch.bytes != nil {
			if _, err := bw.Write(ch.bytes); err != nil {
				return err
			}
			continue
		}
		if ch.file.Size == 0 {
			continue
		}
		if err := c.writeFileRange(bw, ch.file); err != nil {
			return err
		}
	}
	return nil
}

// writeFileRange sends a segment range: with sendfile(2) when both ends
// are real descriptors, else through a copy. The range holds its file open
// (the caller releases it afterwards).
func (c *conn) writeFileRange(bw *bufio.Writer, fr vfs.FileRange) error {
	if osf, ok := fr.File.(vfs.OSFiler); ok {
		if tcp, ok := c.nc.(*net.TCPConn); ok {
			if err := bw.Flush(); err != nil {
				return err
			}
			return sendfile(tcp, osf.OSFile(), fr.Pos, fr.Size)
		}
	}
	_, err := io.Copy(bw, io.NewSectionReader(fr.File, fr.Pos, fr.Size))
	return err
}

// sendfile copies size bytes at pos of f to the socket without passing them
// through user space. It uses an explicit offset so concurrent readers of
// one segment do not share a file position. The descriptor is used inside
// f's SyscallConn Control, which keeps it from being closed (and its number
// reused) until the send returns; File.Fd would not, and would also switch
// the file to blocking mode.
func sendfile(tcp *net.TCPConn, f *os.File, pos, size int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	if err := rc.Control(func(fd uintptr) { sendErr = sendfileFD(tcp, fd, pos, size) }); err != nil {
		return err
	}
	return sendErr
}

// sendfileFD is the sendfile loop on a descriptor the caller keeps open. It
// waits for the socket to become writable through Go's poller.
func sendfileFD(tcp *net.TCPConn, fd uintptr, pos, size int64) error {
	raw, err := tcp.SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	for size > 0 && sendErr == nil {
		werr := raw.Write(func(sock uintptr) bool {
			for size > 0 {
				chunk := size
				if chunk > 1<<30 {
					chunk = 1 << 30
				}
				n, err := syscall.Sendfile(int(sock), int(fd), &pos, int(chunk))
				if n > 0 {
					size -= int64(n)
				}
				if err == syscall.EAGAIN {
					return false // wait until writable
				}
				if err == syscall.EINTR {
					continue
				}
				if err != nil {
					sendErr = err
					return true
				}
				if n == 0 {
					sendErr = io.ErrUnexpectedEOF // the file is shorter than the range
					return true
				}
			}
			return true
		})
		if werr != nil {
			return werr
		}
	}
	return sendErr
}
