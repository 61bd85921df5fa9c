package controllerclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/internal/peerdial"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DialFunc opens a connection to another node's listener at addr
// (host:port), secured and authenticated as that listener asks
// (broker/ssl's Dialer); ctx bounds it.
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

// dialTCP is the DialFunc of a PLAINTEXT listener.
func dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, forwardDialTime)
	defer cancel()
	return peerdial.Dial(ctx, addr)
}

// Pool keeps one pipelined connection per key (a peer), dialled on
// first use and again once it fails or the peer's address changes. mu
// guards conns; a connection's own lock is taken after it. Every
// connection a node opens to another node is dialled here: the Client's
// to the controllers, the broker's to other brokers.
type Pool[K comparable] struct {
	nodeID int32 // ours, in the client id
	dial   DialFunc
	mu     sync.Mutex
	conns  map[K]*Conn
	closed bool
}

// NewPool returns a pool of connections that name nodeID in their client
// id and are opened with dial (nil: plain TCP).
func NewPool[K comparable](nodeID int32, dial DialFunc) *Pool[K] {
	if dial == nil {
		dial = dialTCP
	}
	return &Pool[K]{nodeID: nodeID, dial: dial, conns: map[K]*Conn{}}
}

var errPoolClosed = errors.New("shutting down")

// Get is key's connection to addr: the one open, or a new one when there
// is none, it failed, addr changed or its SASL session is due for renewal.
func (p *Pool[K]) Get(ctx context.Context, key K, addr string) (*Conn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	if c := p.conns[key]; c != nil && c.addr == addr && c.usable() {
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, forwardDialTime)
	nc, err := p.dial(dctx, addr)
	cancel()
	if err != nil {
		return nil, err
	}
	c := newPeerConn(nc, addr, p.nodeID)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.close(errPoolClosed)
		return nil, errPoolClosed
	}
	if old := p.conns[key]; old != nil && old.addr == addr && old.usable() {
		// Another caller dialled meanwhile: use its connection.
		c.close(errors.New("not needed"))
		return old, nil
	}
	if old := p.conns[key]; old != nil {
		if old.addr == addr && !old.Closed() {
			// Its SASL session is to be renewed: the requests it
			// carries are answered, then it closes.
			old.retire()
		} else {
			old.close(errors.New("the peer moved"))
		}
	}
	p.conns[key] = c
	return c, nil
}

// Drop forgets c (if it is still key's) and closes it with err.
func (p *Pool[K]) Drop(key K, c *Conn, err error) {
	p.mu.Lock()
	if p.conns[key] == c {
		delete(p.conns, key)
	}
	p.mu.Unlock()
	c.close(err)
}

// Close closes every connection; requests waiting on them fail.
func (p *Pool[K]) Close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[K]*Conn{}
	p.mu.Unlock()
	for _, c := range conns {
		c.close(errPoolClosed)
	}
}

// Conn is one pipelined connection to a controller or a broker: requests
// are written in order and answered in order (Kafka's guarantee per
// connection).
type Conn struct {
	nc        net.Conn
	addr      string
	formatter *kmsg.RequestFormatter

	writeMu sync.Mutex
	corr    int32
	waiting []*forwardWait // in request order
	dead    error
	// retired: a replacement carries new requests; this one closes once
	// it has no request waiting.
	retired bool
}

type forwardWait struct {
	corr int32
	resp kmsg.Response
	done chan error // buffered
}

func newPeerConn(nc net.Conn, addr string, nodeID int32) *Conn {
	cc := &Conn{nc: nc, addr: addr,
		formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID("gregor-broker-" + strconv.Itoa(int(nodeID))))}
	go cc.readLoop()
	return cc
}

// Closed reports whether the connection has failed or been closed.
func (cc *Conn) Closed() bool {
	cc.writeMu.Lock()
	defer cc.writeMu.Unlock()
	return cc.dead != nil
}

// usable reports whether the pool may hand the connection out: it is
// alive and, on a SASL listener, its session is not due for renewal.
func (cc *Conn) usable() bool {
	return !cc.Closed() && !sasl.Expiring(cc.nc)
}

// errRetired closes a connection whose SASL session was renewed by a
// fresh connection.
var errRetired = errors.New("its SASL session was renewed on a new connection")

// retire closes the connection once the requests it carries are answered.
func (cc *Conn) retire() {
	cc.writeMu.Lock()
	cc.retired = true
	idle := len(cc.waiting) == 0
	cc.writeMu.Unlock()
	if idle {
		cc.close(errRetired)
	}
}

// RoundTrip sends req and waits for its answer; sent reports whether any
// of it may have reached the peer.
func (cc *Conn) RoundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, bool, error) {
	w := &forwardWait{resp: req.ResponseKind(), done: make(chan error, 1)}
	w.resp.SetVersion(req.GetVersion())
	cc.writeMu.Lock()
	if cc.dead != nil {
		err := cc.dead
		cc.writeMu.Unlock()
		return nil, false, err
	}
	cc.corr++
	w.corr = cc.corr
	frame := cc.formatter.AppendRequest(nil, req, w.corr)
	cc.waiting = append(cc.waiting, w)
	_ = cc.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	n, err := cc.nc.Write(frame)
	cc.writeMu.Unlock()
	if err != nil {
		cc.close(err)
		return nil, n > 0, err
	}
	select {
	case err := <-w.done:
		if err != nil {
			return nil, true, err
		}
		return w.resp, true, nil
	case <-ctx.Done():
		return nil, true, ctx.Err()
	}
}

func (cc *Conn) readLoop() {
	br := bufio.NewReaderSize(cc.nc, 64<<10)
	for {
		frame, err := protocol.ReadFrame(br, 1<<30, nil)
		if err != nil {
			cc.close(err)
			return
		}
		cc.writeMu.Lock()
		if len(cc.waiting) == 0 {
			cc.writeMu.Unlock()
			cc.close(errors.New("a response to no request"))
			return
		}
		w := cc.waiting[0]
		cc.waiting = cc.waiting[1:]
		drained := cc.retired && len(cc.waiting) == 0
		cc.writeMu.Unlock()
		corr, err := protocol.ParseResponse(frame, w.resp)
		if err == nil && corr != w.corr {
			err = fmt.Errorf("response with correlation id %d to request %d", corr, w.corr)
		}
		w.done <- err
		if err == nil && drained {
			err = errRetired
		}
		if err != nil {
			cc.close(err)
			return
		}
	}
}

// close fails every waiting request with err and closes the connection.
func (cc *Conn) close(err error) {
	cc.writeMu.Lock()
	if cc.dead == nil {
		cc.dead = err
	}
	waiting := cc.waiting
	cc.waiting = nil
	cc.writeMu.Unlock()
	cc.nc.Close()
	for _, w := range waiting {
		w.done <- fmt.Errorf("%w: %w", errForwardLost, err)
	}
}
