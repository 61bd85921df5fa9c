// Package nullbroker is a Kafka-protocol responder that stores nothing: it
// measures what the benchmark's load generators alone reach on this
// machine, the ceiling that bench/RESULTS.md holds Gregor against.
//
// What it answers (ApiVersions lists exactly these):
//
//   - Metadata: one broker, itself, also the controller; topics created by
//     CreateTopics or auto-created, every partition led by itself at leader
//     epoch 0; topic ids derived from the name, so they are stable.
//   - Produce: acknowledged without storing or checking the records; each
//     partition hands out base offsets counting up from 0 by the records
//     acknowledged; acks=0 gets no response.
//   - Fetch: every partition reads as a log of logBatches lz4 batches from
//     offset 0 to a high watermark no consumer reaches, made of a small
//     ring of batches built once from the configured payloads (records per
//     batch as configured, CRC correct). They go to the wire straight from
//     the ring, each behind the base offset its place in the log gives it,
//     so the consumer sees the offsets it asked for.
//   - ListOffsets: earliest 0, latest the high watermark.
//   - InitProducerId for idempotent producers (no transactions).
//   - FindCoordinator and a classic group coordinator for groups of one
//     member: every JoinGroup starts a new generation with the joiner as
//     its only member and leader, SyncGroup hands the leader back its own
//     assignment, Heartbeat, LeaveGroup and OffsetCommit are acknowledged
//     and forgotten, OffsetFetch knows no committed offset. That is what
//     kafka-consumer-perf-test's single consumer needs.
//
// The read side and the write side are independent: produced records are
// not what a fetch returns. Requests on a connection are handled one at a
// time in the connection's goroutine, so responses leave in request order.
//
// Of Gregor's packages it imports only protocol: it shares no code with the broker,
// so that it measures the load generators and not Gregor.
package nullbroker

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config is one null broker.
type Config struct {
	// Addr is the listen address; port 0 picks one (see Server.Addr).
	Addr string
	// Payloads are the record values of the pre-built fetch batches, used
	// in order and cyclically.
	Payloads [][]byte
	// RecordsPerBatch is the number of records in each pre-built batch
	// (default 128, about 128 KiB of 1 KiB payloads before lz4).
	RecordsPerBatch int
	// DefaultPartitions is the partition count of auto-created topics and
	// of CreateTopics asking for the default (default 1, as Kafka's
	// num.partitions).
	DefaultPartitions int
	Log               *slog.Logger
}

const (
	nodeID    int32 = 0
	clusterID       = "null-broker"
	// maxRequestSize is Kafka's socket.request.max.bytes default.
	maxRequestSize = 100 << 20
	// flushAt bounds the responses held back while more pipelined
	// requests are already buffered.
	flushAt = 1 << 20
)

// handler answers one decoded request. A nil response sends nothing more:
// the handler wrote its own (Fetch) or none is due (acks=0 produce).
type handler func(c *conn, req kmsg.Request) kmsg.Response

// Server is a running null broker.
//
// Goroutines: Serve runs the accept loop; each connection has one
// goroutine that reads, handles and writes. Shared state is the topic
// table (its own lock, see topics) and atomic counters; conns is guarded
// by mu. No goroutine holds mu while taking the topic lock.
type Server struct {
	cfg      Config
	log      *slog.Logger
	ln       net.Listener
	host     string
	port     int32
	registry *protocol.Registry
	handlers map[int16]handler
	topics   *topics
	ring     *ring

	producerIDs atomic.Int64
	memberIDs   atomic.Int64
	generations atomic.Int32

	closed chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// Listen builds the pre-built batches and opens the listener. Call Serve
// to accept connections and Close to stop.
func Listen(cfg Config) (*Server, error) {
	if cfg.RecordsPerBatch <= 0 {
		cfg.RecordsPerBatch = 128
	}
	if cfg.DefaultPartitions <= 0 {
		cfg.DefaultPartitions = 1
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	r, err := newRing(cfg.Payloads, cfg.RecordsPerBatch, time.Now().UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("building the fetch batches: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.Addr, err)
	}
	host, portStr, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(portStr)
	s := &Server{cfg: cfg, log: cfg.Log, ln: ln, host: host, port: int32(port), ring: r,
		topics: newTopics(), closed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	s.register()
	return s, nil
}

// Addr is host:port of the listener.
func (s *Server) Addr() string { return net.JoinHostPort(s.host, strconv.Itoa(int(s.port))) }

// register fills the registry and the handler table together, so that
// ApiVersions advertises exactly what is answered. The ranges are
// Gregor's (the API descriptors in broker/): every field these handlers
// read or write is defined across them.
func (s *Server) register() {
	s.registry = protocol.NewRegistry()
	s.handlers = map[int16]handler{}
	add := func(key kmsg.Key, min, max int16, h handler) {
		s.registry.Add(key, min, max)
		s.handlers[int16(key)] = h
	}
	add(kmsg.ApiVersions, 0, 4, (*conn).apiVersions)
	add(kmsg.Metadata, 0, 13, (*conn).metadata)
	add(kmsg.Produce, 3, 13, (*conn).produce)
	add(kmsg.Fetch, 4, 18, (*conn).fetch)
	add(kmsg.ListOffsets, 1, 11, (*conn).listOffsets)
	add(kmsg.InitProducerID, 0, 5, (*conn).initProducerID)
	add(kmsg.CreateTopics, 2, 7, (*conn).createTopics)
	add(kmsg.FindCoordinator, 0, 6, (*conn).findCoordinator)
	add(kmsg.JoinGroup, 0, 9, (*conn).joinGroup)
	add(kmsg.SyncGroup, 0, 5, (*conn).syncGroup)
	add(kmsg.Heartbeat, 0, 4, (*conn).heartbeat)
	add(kmsg.LeaveGroup, 0, 5, (*conn).leaveGroup)
	add(kmsg.OffsetCommit, 2, 10, (*conn).offsetCommit)
	add(kmsg.OffsetFetch, 0, 10, (*conn).offsetFetch)
}

// Serve accepts connections until Close. It returns nil after Close.
func (s *Server) Serve() error {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return nil
			default:
			}
			return fmt.Errorf("accepting: %w", err)
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		s.mu.Lock()
		select {
		case <-s.closed:
			s.mu.Unlock()
			nc.Close()
			return nil
		default:
		}
		s.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c := &conn{srv: s, nc: nc}
			c.serve()
			s.mu.Lock()
			delete(s.conns, nc)
			s.mu.Unlock()
			nc.Close()
		}()
	}
}

// Close stops accepting, closes every connection and waits for their
// goroutines. Safe to call twice.
func (s *Server) Close() error {
	s.mu.Lock()
	select {
	case <-s.closed:
		s.mu.Unlock()
		return nil
	default:
	}
	close(s.closed)
	err := s.ln.Close()
	for nc := range s.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// conn is one client connection; only its own goroutine touches it, so its
// buffers are reused from request to request.
type conn struct {
	srv      *Server
	nc       net.Conn
	frame    []byte // the request being handled; decoded requests alias it
	out      pending
	corr     int32 // correlation id of the request being handled
	clientID string
}

func (c *conn) serve() {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		var err error
		c.frame, err = protocol.ReadFrame(br, maxRequestSize, c.frame)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.srv.log.Debug("closing connection", "err", err)
			}
			return
		}
		ok := c.handle()
		// Pipelined requests already read are answered together.
		if !ok || br.Buffered() == 0 || c.out.len() >= flushAt {
			if err := c.out.writeTo(c.nc); err != nil {
				return
			}
		}
		if !ok {
			return
		}
	}
}

// handle decodes c.frame, answers it into c.out, and reports false when
// the connection must be closed (unknown API or version, malformed
// request), as Kafka does.
func (c *conn) handle() bool {
	key, version, ok := protocol.PeekAPI(c.frame)
	if !ok {
		return false
	}
	req := protocol.NewRequest(key, version)
	if key == int16(kmsg.ApiVersions) && (req == nil || !c.srv.registry.Serves(key, version)) {
		// KIP-511: a newer client learns our versions from a v0 body.
		hdr, _, err := protocol.ParseRequestHeader(c.frame, false)
		if err != nil {
			return false
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.ApiKeys = c.srv.registry.APIKeys()
		c.out.buf = protocol.AppendResponse(c.out.buf, hdr.CorrelationID, resp)
		return true
	}
	if req == nil || !c.srv.registry.Serves(key, version) {
		c.srv.log.Debug("closing connection: API or version not served", "api", kmsg.NameForKey(key), "version", version)
		return false
	}
	hdr, body, err := protocol.ParseRequestHeader(c.frame, req.IsFlexible())
	if err != nil {
		return false
	}
	if err := req.ReadFrom(body); err != nil {
		c.srv.log.Debug("closing connection: malformed request", "api", kmsg.NameForKey(key), "version", version, "err", err)
		return false
	}
	c.corr, c.clientID = hdr.CorrelationID, hdr.ClientID
	c.srv.log.Debug("request", "api", kmsg.NameForKey(key), "version", version, "client", hdr.ClientID)
	if resp := c.srv.handlers[key](c, req); resp != nil {
		c.out.buf = protocol.AppendResponse(c.out.buf, hdr.CorrelationID, resp)
	}
	return true
}

// wait sleeps for d or until the server closes (an empty long-poll fetch).
func (c *conn) wait(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.srv.closed:
	}
}

func (c *conn) apiVersions(kreq kmsg.Request) kmsg.Response {
	resp := kreq.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = c.srv.registry.APIKeys()
	return resp
}
