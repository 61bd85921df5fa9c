package network

// A client connection.
//
// Goroutine ownership: the reader goroutine (serve) reads frames, decodes
// requests and calls the handler inline, in request order; a handler that
// must wait (long-poll fetch, acks=all produce, JoinGroup, an admin change
// waiting for commit) finishes its slot from its own goroutine. Running the
// synchronous part inline keeps produce appends in the order the client
// sent them, which idempotent sequences rely on. The writer goroutine
// (writeLoop) sends finished slots strictly in request order: clients
// pipeline requests and match responses by order. On a SASL listener the
// reader also runs the authentication exchange inline, before it reads any
// other request (sasl.go); a failed one stops the reader while the
// writer sends its answer (lingering), then closes.
//
// Memory: a connection's requests being handled and its responses waiting
// to be written are counted in held (request frames by capacity, responses
// by their heap bytes; a file range is not heap: it is sent with sendfile
// or copied into the writer's fixed buffer when its turn comes). The
// reader reads the next request only while held is under the budget, so a
// client that pipelines and never reads stalls only itself; a single
// response larger than the budget still goes out, after which reading
// resumes. Kafka is stricter: it mutes a channel from a request's arrival
// until its response is sent, one request per connection at a time.
//
// Idleness (connections.max.idle.ms): a connection is idle while nothing
// is read from it and nothing written to it, and the broker is not working
// on the oldest request it owes an answer (the one the writer waits for).
// Kafka measures from the last socket event only, so it reaps a connection
// whose JoinGroup or long-poll fetch waits longer than the idle time; Gregor
// does not, and like Kafka it does reap a connection whose peer stops
// reading its responses.
//
// The reader also waits for room before it reads a request (budget and
// maxInFlight), then for queued.max.request.bytes, which the server shares
// among all connections; it never holds a queued.max.request.bytes
// reservation while it waits for its own writer.
//
// Shared state: held and idle are atomics written by the reader, the
// writer and handlers finishing their slots, and read by the idle timer's
// function (expireIdle, on a goroutine of the runtime's); room is a
// one-token channel the writer and finishing handlers signal and only the
// reader waits on. No lock is held while waiting.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/broker/quota"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxInFlight bounds the requests of one connection being handled or
// waiting to be written; the reader stops reading past it.
const maxInFlight = 128

// DefaultConnectionBudget is the bytes one connection may hold in requests
// being handled and responses waiting to be written before its reader
// stops reading. It is maxInFlight answers of 2 KiB: small requests
// (produce acknowledgements, heartbeats, offset commits, fetch headers
// whose records go by sendfile) pipeline as deep as maxInFlight allows,
// and only a client that lets large answers pile up (DescribeConfigs with
// documentation, Metadata for many topics) meets the byte bound, which
// then costs it nothing it could use: it is not reading anyway, and the
// kernel's socket buffer keeps a reading client's pipe full. Kafka keeps
// one request per connection in flight; a request larger than the budget
// (a 1 MiB produce batch waiting for acks=all) is that.
const DefaultConnectionBudget = maxInFlight * (2 << 10)

// drainTimeout bounds how long a shutting-down connection waits for its
// in-flight requests to be answered.
const drainTimeout = 10 * time.Second

// Conn is one accepted connection. Its state is the server's own; what
// tests and diagnostics may read of it is in inspect.go.
type Conn struct {
	srv *Server
	// nc is the accepted socket: deadlines and closing act on it.
	nc net.Conn
	// in and out are what the connection reads and writes: on a
	// PLAINTEXT listener nc (its socket read directly, socket.go), on an
	// SSL one the TLS connection over nc (connsecurity.go).
	in       io.Reader
	out      net.Conn
	listener *listener
	// session is who the peer is (session.go).
	session session
	// software is what the client said it is in ApiVersions v3+
	// (KIP-511), nil before; set by the reader or a handler, read by
	// handlers on other goroutines (client telemetry matches on it).
	software atomic.Pointer[ClientSoftware]
	// auth is the SASL authentication state on a SASL listener, nil on
	// others (sasl.go); the reader's alone.
	auth *saslSession
	// lingering: the reader stopped after a failed authentication whose
	// answer is still to be sent; the connection closes once it is.
	lingering bool
	ctx       context.Context
	cancel    context.CancelFunc
	// queue holds the slots of the requests read and not yet answered,
	// in request order; the reader sends on it and closes it, the
	// writer receives.
	queue chan *slot
	// closeOnce guards closing nc.
	closeOnce sync.Once
	// watchClose starts, once, the watch of its end that a handler asks
	// for (Request.WatchClose).
	watchClose sync.Once
	// held is the memory the connection's requests and unwritten
	// responses hold.
	held heldBytes
	// room has space for one token, dropped in whenever held falls
	// below its budget or the writer takes a slot off the queue, so a
	// reader waiting for room never misses the change.
	room chan struct{}
	idle idleClock
	// idleTimer closes the connection after connections.max.idle.ms
	// idle; nil when the limit is -1.
	idleTimer *time.Timer
	// mutedUntil is when a quota throttle ends (monotonic, 0: never
	// throttled); the reader handles no request before it (KIP-219).
	mutedUntil atomic.Int64
}

// logger is the server's logger with the connection's peer and listener.
// It is built when a message is logged, which happens a few times in a
// connection's life at most, rather than kept by every connection.
func (c *Conn) logger() *slog.Logger {
	if c.nc == nil {
		return c.srv.log // a DetachedConn
	}
	return c.srv.log.With("remote", c.nc.RemoteAddr().String(), "listener", c.listener.Name)
}

// monotonic is the connection's clock: nanoseconds since it was accepted.
func (c *Conn) monotonic() int64 { return int64(time.Since(c.idle.born)) }

// mute keeps the reader from handling another request for ms
// milliseconds (a throttled client; a longer throttle already running
// stands).
func (c *Conn) mute(ms int32) {
	until := c.monotonic() + int64(time.Duration(ms)*time.Millisecond)
	for cur := c.mutedUntil.Load(); until > cur && !c.mutedUntil.CompareAndSwap(cur, until); cur = c.mutedUntil.Load() {
	}
}

// waitMuted blocks while the connection is muted by a throttle; it
// reports false when the connection ends or the server drains first.
// Kafka stops reading a muted channel; here the request may already be
// read, but it is not handled before the throttle ends, which is what
// the client sees.
func (c *Conn) waitMuted() bool {
	until := c.mutedUntil.Load()
	if until == 0 {
		return true
	}
	d := time.Duration(until - c.monotonic())
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.ctx.Done():
		return false
	case <-c.srv.drain:
		return false
	}
}

// heldBytes counts bytes against a connection's budget.
type heldBytes struct {
	budget int64
	n      atomic.Int64
	// peak is the highest n reached (tests hold it against the budget).
	peak atomic.Int64
	// freed is signalled when n drops below the budget.
	freed func()
}

func (h *heldBytes) add(delta int64) {
	n := h.n.Add(delta)
	if delta < 0 {
		if n < h.budget {
			h.freed()
		}
		return
	}
	for p := h.peak.Load(); n > p && !h.peak.CompareAndSwap(p, n); p = h.peak.Load() {
	}
}

func (h *heldBytes) full() bool { return h.n.Load() >= h.budget }

// signalRoom tells a reader waiting in waitRoom to look again.
func (c *Conn) signalRoom() {
	select {
	case c.room <- struct{}{}:
	default:
	}
}

// waitRoom blocks while the connection is at its budget or has
// maxInFlight requests unanswered; it reports false when the connection
// ends or the server drains first. Only the reader sends on the queue, so
// a free place seen here is still free when it sends.
func (c *Conn) waitRoom() bool {
	for c.held.full() || len(c.queue) == cap(c.queue) {
		select {
		case <-c.room:
		case <-c.ctx.Done():
			return false
		case <-c.srv.drain:
			return false
		}
	}
	return true
}

// idleClock tells how long a connection has been idle.
type idleClock struct {
	born time.Time
	// lastActive is when a byte was last read or written, as time since
	// born (monotonic).
	lastActive atomic.Int64
	// awaitingBroker is set while the writer waits for a handler to
	// finish the oldest unanswered request. The writer touches
	// lastActive before clearing it and idleFor loads it first, so a
	// reader of a cleared flag also sees the touch.
	awaitingBroker atomic.Bool
}

func (ic *idleClock) touch() { ic.lastActive.Store(int64(time.Since(ic.born))) }

// idleFor is how long the connection has been idle; zero while the broker
// works on a request it owes an answer.
func (ic *idleClock) idleFor() time.Duration {
	if ic.awaitingBroker.Load() {
		return 0
	}
	return time.Since(ic.born) - time.Duration(ic.lastActive.Load())
}

// activityWriter stands between the connection's write buffer and its
// socket and marks the connection active on every transfer (connReader
// does on reads). Writes go in pieces so that a large response trickling
// out to a slow reader counts as progress, not as one stall.
type activityWriter struct{ c *Conn }

// activityPiece is the most written to the socket between two touches.
const activityPiece = 64 << 10

func (w activityWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		piece := p[:min(len(p), activityPiece)]
		n, err := w.c.out.Write(piece)
		written += n
		if n > 0 {
			w.c.idle.touch()
		}
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// slot is one request's place in the response order.
//
// The file ranges of a response hold their segment files open until they
// are released: by the writer once the response is sent or fails, or, when
// the writer gives up on the slot (the connection is closing), by whichever
// of abandon and finish comes second.
type slot struct {
	done chan struct{}
	// held is what the slot counts in its connection's budget: its
	// request frame until it is finished, then its response until it is
	// written.
	held  int64
	owner *heldBytes
	// Exactly one of the following describes the outcome.
	frame      []byte  // a whole encoded response frame
	chunks     []Chunk // a response built from bytes and file ranges
	noResponse bool    // acks=0 produce: nothing is sent
	closeConn  bool    // close the connection instead of answering
	// closeAfter closes the connection once the response is sent (a
	// failed authentication's answer).
	closeAfter bool

	mu        sync.Mutex
	answered  bool // the outcome is set
	abandoned bool // the writer will never send it
	// quota is what the client quotas measure of the request; nil
	// while no quota exists (requestquota.go). It lives here, in the slot's
	// spare room, so that requests cost nothing more without quotas.
	quota *requestQuota

	// The request's times (metrics.go): received at start; the others
	// since then. times is nil for a request no handler was called for.
	// dispatched is set before the handler runs and finished before done
	// is closed, so the writer reads them after awaitHandler; localEnd is
	// set by the reader once the handler returned, maybe while the writer
	// reads it.
	start                time.Time
	dispatched, finished time.Duration
	localEnd             atomic.Int64
	times, fetchTimes    *lazyTimes
}

// Chunk is a piece of a response: bytes, or a file range (copied or
// sent with sendfile, writeFileRange).
type Chunk struct {
	Bytes []byte
	File  vfs.FileRange
}

// finish hands the slot to the writer; from here on it holds its
// response, no longer its request. A response finished after the writer
// gave up on it releases its file ranges at once.
func (s *slot) finish() {
	var resp int64
	switch {
	case s.frame != nil:
		resp = int64(cap(s.frame))
	case s.chunks != nil:
		for _, ch := range s.chunks {
			resp += int64(cap(ch.Bytes))
		}
	}
	s.owner.add(resp - s.held)
	s.held = resp
	if s.times != nil {
		s.finished = time.Since(s.start)
	}
	s.mu.Lock()
	s.answered = true
	abandoned := s.abandoned
	s.mu.Unlock()
	close(s.done)
	if abandoned {
		ReleaseChunks(s.chunks)
	}
}

// abandon is the writer giving up on the slot without sending it.
func (s *slot) abandon() {
	s.mu.Lock()
	s.abandoned = true
	answered := s.answered
	s.mu.Unlock()
	if answered {
		ReleaseChunks(s.chunks)
	}
}

// ReleaseChunks lets go of the file ranges of chunks never handed to
// RespondChunks.
func ReleaseChunks(chunks []Chunk) {
	for _, c := range chunks {
		c.File.Release()
	}
}

// Request is what a handler receives: one request of a connection, which
// the handler answers exactly once, with Respond, RespondChunks,
// NoResponse or CloseConnection, inline or from GoAsync. Answers go out
// in the connection's request order whatever order they come in.
type Request struct {
	// Header is the request header.
	Header protocol.RequestHeader
	// Body is the decoded request, at Header's version.
	Body kmsg.Request
	conn *Conn
	slot *slot
}

// Version is the request's API version.
func (r *Request) Version() int16 { return r.Header.APIVersion }

// smallResponse is the capacity a response frame starts with: the common
// answers (a produce acknowledgement, a heartbeat, an offset commit) fit in
// it and are encoded into one allocation instead of a growing series.
const smallResponse = 128

// Respond encodes resp at the request's version and releases the slot.
func (r *Request) Respond(resp kmsg.Response) {
	r.applyQuotas(resp)
	resp.SetVersion(r.Header.APIVersion)
	r.slot.frame = protocol.AppendResponse(make([]byte, 0, smallResponse), r.Header.CorrelationID, resp)
	r.slot.finish()
}

// RespondChunks sends a pre-encoded response made of chunks. The first
// chunk begins with protocol.ResponseHeaderSize bytes of room for the frame
// size prefix and the response header, filled in here (the encoder leaves
// them so that the response's head is one buffer).
func (r *Request) RespondChunks(chunks []Chunk) {
	var size int64
	for _, c := range chunks {
		size += int64(len(c.Bytes)) + c.File.Size
	}
	head := chunks[0].Bytes
	binary.BigEndian.PutUint32(head, uint32(size-4))
	binary.BigEndian.PutUint32(head[4:], uint32(r.Header.CorrelationID))
	if r.Header.Flexible {
		head[8] = 0 // no header tags
	}
	r.slot.chunks = chunks
	r.slot.finish()
}

// NoResponse releases the slot without sending anything (acks=0).
func (r *Request) NoResponse() {
	r.applyQuotas(nil)
	r.slot.noResponse = true
	r.slot.finish()
}

// CloseConnection answers by closing the connection, as Kafka does for
// requests it cannot process (and for failed acks=0 produce).
func (r *Request) CloseConnection() {
	r.slot.closeConn = true
	r.slot.finish()
}

func (c *Conn) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		c.nc.Close()
	})
}

// serve runs the reader loop until the connection ends.
func (c *Conn) serve() {
	if !c.secure() {
		c.cancel()
		c.close()
		return
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	if maxIdle := c.srv.opts.MaxIdle; maxIdle >= 0 {
		// Created far in the future and then reset, so that the timer
		// is assigned before its function can run.
		c.idleTimer = time.AfterFunc(math.MaxInt64, func() { c.expireIdle(maxIdle) })
		c.idleTimer.Reset(maxIdle)
	}
	defer func() {
		if c.idleTimer != nil {
			c.idleTimer.Stop()
		}
		// On a graceful shutdown the requests already read are answered
		// (bounded by drainTimeout); otherwise the peer is gone and
		// in-flight work is cancelled, unless a failed authentication's
		// answer is still to go out.
		if !c.srv.draining.Load() && !c.lingering {
			c.cancel()
		}
		close(c.queue)
		select {
		case <-writerDone:
		case <-time.After(drainTimeout):
			// Closing the socket also frees a writer stuck on a
			// peer that does not read.
			c.close()
			<-writerDone
		}
		c.close()
	}()

	// A request body larger than the buffer is read straight into its
	// frame (the reader reads past an empty buffer), so the buffer only
	// gathers sizes and small requests: 8 KiB, not 64, and only while it
	// holds unread bytes (reader.go).
	br := newConnReader(c.in, &c.srv.readBuffers, c.idle.touch)
	maxSize := c.srv.opts.MaxRequestSize
	for {
		if !c.waitRoom() {
			return
		}
		limit := maxSize
		if c.auth != nil && c.auth.authenticating() {
			limit = c.srv.opts.SASLMaxReceiveSize
		}
		reserved, err := c.reserveRequest(br, limit)
		if err == nil && reserved < 0 {
			return // the server stops or the connection closed
		}
		var frame []byte
		if err == nil {
			// Decoded requests alias their frame (produce records
			// are appended straight from it) and async handlers may
			// hold it after the next frame is read, so a buffer goes
			// back to the pool only when releaseFrame can prove it
			// is dead.
			frame, err = protocol.ReadPooledFrame(br, limit, &c.srv.frames)
		}
		if err != nil {
			c.srv.requestPool.release(max(reserved, 0))
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && c.ctx.Err() == nil {
				c.logger().Debug("closing connection", "err", err)
			}
			return
		}
		if !c.waitMuted() {
			c.srv.requestPool.release(reserved)
			return
		}
		ok := c.handleFrame(frame)
		// As in Kafka, queued.max.request.bytes counts a request until
		// its handler has taken it in.
		c.srv.requestPool.release(reserved)
		if !ok {
			return
		}
	}
}

// reserveRequest waits until the next request's size is known and
// queued.max.request.bytes has room for it, and returns the bytes
// reserved; -1 when the wait was cut short. An oversized or truncated
// prefix reserves nothing and is left for ReadFrame to report.
func (c *Conn) reserveRequest(br *connReader, maxSize int32) (int64, error) {
	if c.srv.requestPool == nil {
		return 0, nil
	}
	prefix, err := br.Peek(4)
	if err != nil {
		return 0, err
	}
	size := int32(binary.BigEndian.Uint32(prefix))
	if size < 0 || size > maxSize {
		return 0, nil
	}
	if !c.srv.requestPool.acquire(c.ctx, c.srv.drain, int64(size)) {
		return -1, nil
	}
	return int64(size), nil
}

// expireIdle runs on the idle timer: it closes the connection once it has
// been idle for maxIdle, and otherwise sets the timer for when it could
// be.
func (c *Conn) expireIdle(maxIdle time.Duration) {
	if c.ctx.Err() != nil {
		return
	}
	idle := c.idle.idleFor()
	if idle >= maxIdle {
		c.logger().Debug("closing idle connection", "idle", idle, "connections.max.idle.ms", maxIdle.Milliseconds())
		c.close()
		return
	}
	c.idleTimer.Reset(maxIdle - idle)
}

// handleFrame decodes and dispatches one request. It returns false when the
// connection must be closed.
func (c *Conn) handleFrame(frame []byte) bool {
	if c.auth != nil {
		if handled, keep := c.handleAuthFrame(frame); handled || !keep {
			return keep
		}
	}
	key, version, s := c.slotFor(frame)
	if s == nil {
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
		r := &Request{conn: c, Header: hdr, slot: s}
		r.Respond(c.srv.apiVersionsUnsupported())
		return true
	}
	hdr, body, err := protocol.ParseRequestHeader(frame, flexible)
	if err != nil || kreq == nil {
		c.logger().Debug("closing connection: unknown API or bad header", "key", key, "version", version, "err", err)
		s.closeConn = true
		s.finish()
		return false
	}
	h, served := c.srv.handlers[key]
	if !served || !c.listener.serves(key) {
		c.logger().Debug("closing connection: API not served on this listener", "key", key, "listener", c.listener.Name)
		s.closeConn = true
		s.finish()
		return false
	}
	if err := kreq.ReadFrom(body); err != nil {
		c.logger().Debug("closing connection: malformed request", "api", kmsg.NameForKey(key), "version", version, "err", err)
		s.closeConn = true
		s.finish()
		return false
	}
	r := &Request{conn: c, Header: hdr, Body: kreq, slot: s}
	c.srv.countRequest(kreq, version)
	if version < h.Min || version > h.Max {
		if h.Unsupported != nil {
			// Produce v0-2: advertised, answered with UNSUPPORTED_VERSION.
			h.Unsupported(r)
			return true
		}
		c.logger().Debug("closing connection: unsupported version", "api", kmsg.NameForKey(key), "version", version)
		s.closeConn = true
		s.finish()
		return false
	}
	c.srv.timeRequest(s, kreq)
	if rl := c.srv.opts.RequestLogger; rl != nil && rl.Enabled(c.ctx, slog.LevelDebug) {
		c.logRequest(rl, r)
	}
	if q := c.srv.quotas; q != nil && q.Active() {
		rq := &requestQuota{size: len(frame)}
		s.quota = rq
		if q.Enabled(quota.Request) {
			rq.start = c.monotonic()
		}
		c.srv.dispatch(c.ctx, h, r)
		rq.localEnd.Store(max(c.monotonic(), rq.start+1))
	} else {
		c.srv.dispatch(c.ctx, h, r)
	}
	localEnd := time.Since(s.start)
	s.localEnd.Store(int64(localEnd))
	c.srv.idle.add(localEnd - s.dispatched)
	c.releaseFrame(key, frame, s)
	return true
}

// logRequest logs a request that is about to be handled, with who sent
// it, where and how.
func (c *Conn) logRequest(rl *slog.Logger, r *Request) {
	rl.LogAttrs(c.ctx, slog.LevelDebug, "request",
		slog.String("api", kmsg.NameForKey(r.Body.Key())),
		slog.Int("version", int(r.Header.APIVersion)),
		slog.Int("correlation_id", int(r.Header.CorrelationID)),
		slog.String("client_id", r.Header.ClientID),
		slog.String("listener", c.listener.Name),
		slog.String("principal", c.session.principal.String()),
		slog.String("from", c.session.hostAddress))
}

// releaseFrame gives a Produce request's frame buffer back to the pool once
// its handler has returned with the response slot already finished. That
// is when nothing can refer to the frame: the handler runs inline, the log
// append copies the records into the segment file before it returns (and
// keeps no slice of them: Log.append clears its batch list), the response
// is encoded into its own buffer, and kmsg copies every string it decodes.
// A produce whose slot is still open has handed its request to another
// goroutine (a parked acks=all produce), which may still read the records,
// so its frame is left to the garbage collector; so is every other API's,
// whose decoded requests may be kept (group member metadata, async
// handlers). The contract this relies on: a Produce handler neither keeps
// the request's records nor touches the request after it finishes the
// slot.
func (c *Conn) releaseFrame(key int16, frame []byte, s *slot) {
	if key != int16(kmsg.Produce) {
		return
	}
	select {
	case <-s.done:
		c.srv.frames.Put(frame)
	default:
	}
}

// writeLoop writes finished responses in request order.
//
// The write buffer is taken from the server's pool when a response is
// due and given back once the queue is empty and flushed: an idle
// connection holds none (64 KiB each at thousands of connections).
func (c *Conn) writeLoop() {
	var bw *bufio.Writer
	release := func() {
		if bw != nil {
			bw.Reset(nil)
			c.srv.writeBuffers.Put(bw)
			bw = nil
		}
	}
	defer func() {
		if bw != nil {
			bw.Flush()
		}
		release()
	}()
	// drain gives up on the responses not sent; the reader closes the
	// queue once it stops.
	drain := func() {
		for s := range c.queue {
			s.abandon()
		}
	}
	for s := range c.queue {
		c.signalRoom()
		if !c.awaitHandler(s) {
			s.abandon()
			drain()
			return
		}
		if s.closeConn {
			if bw != nil {
				bw.Flush()
			}
			c.close()
			drain()
			return
		}
		writeStart := time.Since(s.start)
		if s.noResponse {
			observeTimes(s, writeStart, writeStart)
		} else {
			if bw == nil {
				bw = c.srv.writeBuffers.Get().(*bufio.Writer)
				bw.Reset(activityWriter{c})
			}
			var err error
			if s.frame != nil {
				_, err = bw.Write(s.frame)
				if s.closeAfter {
					bw.Flush()
					c.close()
					drain()
					return
				}
			} else {
				err = c.writeChunks(bw, s.chunks)
				// Sent (sendfile and the copies are done with the
				// files) or failed.
				ReleaseChunks(s.chunks)
			}
			// The response is in the socket or the writer's own
			// buffer. A file range goes by sendfile, around
			// activityWriter: its progress counts here, once it is
			// sent.
			c.idle.touch()
			c.held.add(-s.held)
			if err != nil {
				c.close()
				drain()
				return
			}
		}
		// A response written behind others goes out with them; the
		// last one queued is flushed before the writer looks for
		// more (an acks=0 produce, which sends nothing, may be that
		// last one).
		if bw != nil && len(c.queue) == 0 {
			if err := bw.Flush(); err != nil {
				c.close()
				drain()
				return
			}
			release()
		}
		if !s.noResponse {
			// The send time includes the flush that put it in the
			// socket, when there was one.
			observeTimes(s, writeStart, time.Since(s.start))
		}
	}
}

// awaitHandler waits until s is finished; it reports false when the
// connection ends first. While it waits the connection is not idle: the
// broker owes the client an answer.
func (c *Conn) awaitHandler(s *slot) bool {
	select {
	case <-s.done:
		return true
	default:
	}
	c.idle.awaitingBroker.Store(true)
	defer func() {
		c.idle.touch()
		c.idle.awaitingBroker.Store(false)
	}()
	select {
	case <-s.done:
		return true
	case <-c.ctx.Done():
		return false
	}
}

func (c *Conn) writeChunks(bw *bufio.Writer, chunks []Chunk) error {
	for _, ch := range chunks {
		if ch.Bytes != nil {
			if _, err := bw.Write(ch.Bytes); err != nil {
				return err
			}
			continue
		}
		if ch.File.Size == 0 {
			continue
		}
		if err := c.writeFileRange(bw, ch.File); err != nil {
			return err
		}
	}
	return nil
}

// DefaultCopyRangeMax is the largest file range read into the write
// buffer and sent with the rest of its response instead of by sendfile. A
// fetch that keeps up with the log's tail answers with a few small
// batches: sendfile would split that response into three sends (the bytes
// before the range, the range, the bytes after it), and each send on a
// loopback or LAN socket costs the sender the receiver's wake-up as well.
// Below this size one pread and the one write the response needs anyway
// are cheaper; above it the copy through user space costs more than the
// extra sends (measured on loopback, request and answer in turn: copying
// costs the sender a fifth to a third less CPU per response up to 16 KiB,
// breaks even near 32 KiB and loses at 64 KiB).
const DefaultCopyRangeMax = 16 << 10

// WriteBufferSize is the writer's buffer: responses up to it that are
// finished together go out in one write.
const WriteBufferSize = 64 << 10

// ReadBufferSize is the reader's buffer of a connection, borrowed from
// the server's pool while it holds unread bytes (reader.go).
const ReadBufferSize = 8 << 10

// writeFileRange sends a segment range: a small one copied into the write
// buffer, a larger one with sendfile(2) when both ends are real
// descriptors, else through a copy. The range holds its file open (the
// caller releases it afterwards).
func (c *Conn) writeFileRange(bw *bufio.Writer, fr vfs.FileRange) error {
	if fr.Size <= c.srv.opts.CopyRangeMax {
		return copyFileRange(bw, fr)
	}
	if osf, ok := fr.File.(vfs.OSFiler); ok {
		if tcp, ok := c.out.(*net.TCPConn); ok {
			if err := bw.Flush(); err != nil {
				return err
			}
			return sendfile(tcp, osf.OSFile(), fr.Pos, fr.Size)
		}
	}
	// Through user space (TLS, or a file that is not the OS's): bufio's
	// ReadFrom reads the range straight into the write buffer's free
	// space and writes it out a buffer at a time, so a large range costs
	// one pread and one write (of TLS records) per WriteBufferSize.
	n, err := io.Copy(bw, io.NewSectionReader(fr.File, fr.Pos, fr.Size))
	if err == nil && n < fr.Size {
		// A short copy would leave the frame shorter than its size
		// prefix says: as for sendfile, the connection must close.
		err = fmt.Errorf("reading %d bytes at %d of %s: %w", fr.Size, fr.Pos, fr.File.Name(), io.ErrUnexpectedEOF)
	}
	return err
}

// copyFileRange reads a range of at most CopyRangeMax bytes straight into
// bw's free space (flushing first if it has too little) and commits it
// there. A file shorter than the range is an error, as it is for sendfile.
func copyFileRange(bw *bufio.Writer, fr vfs.FileRange) error {
	if int64(bw.Available()) < fr.Size {
		if err := bw.Flush(); err != nil {
			return err
		}
	}
	buf := bw.AvailableBuffer()[:fr.Size]
	n, err := fr.File.ReadAt(buf, fr.Pos)
	if n < len(buf) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("reading %d bytes at %d of %s: %w", fr.Size, fr.Pos, fr.File.Name(), err)
	}
	// bufio's way to commit bytes placed in its free space.
	_, err = bw.Write(buf)
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
