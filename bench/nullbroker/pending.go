package nullbroker

import (
	"io"
	"net"
)

// pending is a connection's output not yet written: encoded bytes in buf,
// and the pieces that say what goes on the wire in order, ranges of buf
// and slices sent as they are (the ring's batches, so that a fetch
// response is never copied in user space). One writev sends it all.
type pending struct {
	buf     []byte
	pieces  []piece
	covered int // buf[:covered] is in pieces
	ext     int // bytes in external pieces
	iov     [][]byte
}

// piece is buf[from:to], or ext when ext is set.
type piece struct {
	from, to int
	ext      []byte
}

// external queues b after what buf holds so far. b must not change until
// written.
func (p *pending) external(b []byte) {
	p.cover()
	p.pieces = append(p.pieces, piece{ext: b})
	p.ext += len(b)
}

func (p *pending) cover() {
	if len(p.buf) > p.covered {
		p.pieces = append(p.pieces, piece{from: p.covered, to: len(p.buf)})
		p.covered = len(p.buf)
	}
}

// len is the number of bytes waiting.
func (p *pending) len() int { return len(p.buf) + p.ext }

// bytes lists the pieces in order, as they would be written.
func (p *pending) bytes() [][]byte {
	p.cover()
	iov := p.iov[:0]
	for _, pc := range p.pieces {
		if pc.ext != nil {
			iov = append(iov, pc.ext)
		} else {
			iov = append(iov, p.buf[pc.from:pc.to])
		}
	}
	p.iov = iov
	return iov
}

// writeTo writes everything waiting and empties p.
func (p *pending) writeTo(w io.Writer) error {
	if p.len() == 0 {
		return nil
	}
	bufs := net.Buffers(p.bytes())
	_, err := bufs.WriteTo(w)
	p.buf, p.pieces, p.covered, p.ext = p.buf[:0], p.pieces[:0], 0, 0
	return err
}
