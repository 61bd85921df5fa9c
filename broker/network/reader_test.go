package network

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"
)

// A connection waiting for its next request holds no read buffer: the
// buffer is taken when bytes arrive and given back once they are read.
func TestConnReaderHoldsNoBufferWhileIdle(t *testing.T) {
	_, in, peer := tcpPair(t)
	var bufs readBuffers
	touched := 0
	cr := newConnReader(in, &bufs, func() { touched++ })
	if cr.raw == nil {
		t.Fatal("a TCP connection's reader does not read the socket raw")
	}
	frame := binary.BigEndian.AppendUint32(nil, 10)
	frame = append(frame, "0123456789"...)
	if _, err := peer.Write(frame); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(frame))
	if _, err := io.ReadFull(cr, got); err != nil || !bytes.Equal(got, frame) {
		t.Fatalf("read %q, %v", got, err)
	}
	if n := bufs.held.Load(); n != 0 || cr.buf != nil {
		t.Fatalf("%d buffers held after every byte was read", n)
	}
	var peeked []byte
	done := waitingIn(t, "network.(*connReader).readRaw", func() error {
		var err error
		peeked, err = cr.Peek(4)
		return err
	})
	if n := bufs.held.Load(); n != 0 {
		t.Fatalf("%d buffers held by a reader waiting for bytes", n)
	}
	if _, err := peer.Write(frame); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || !bytes.Equal(peeked, frame[:4]) {
		t.Fatalf("Peek: %q, %v", peeked, err)
	}
	if n := bufs.held.Load(); n != 1 {
		t.Fatalf("%d buffers held with unread bytes, want 1", n)
	}
	if _, err := cr.Discard(4); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(cr, got[:10]); err != nil || string(got[:10]) != "0123456789" {
		t.Fatalf("read %q, %v", got[:10], err)
	}
	if n := bufs.held.Load(); n != 0 || touched == 0 {
		t.Fatalf("%d buffers held at the end, %d activity marks", n, touched)
	}
}

// Frames of every size, written in pieces of every size, come out whole
// and in order, on a socket read raw and through any other reader (what a
// TLS connection is).
func TestConnReaderReadsFramesWhole(t *testing.T) {
	for _, raw := range []bool{true, false} {
		name := "other reader"
		if raw {
			name = "raw socket"
		}
		t.Run(name, func(t *testing.T) {
			var in io.Reader
			var peer net.Conn
			if raw {
				_, in, peer = tcpPair(t)
			} else {
				var broker net.Conn
				broker, peer = net.Pipe()
				t.Cleanup(func() { broker.Close(); peer.Close() })
				in = broker
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var frames [][]byte
			var stream []byte
			for i := range 300 {
				size := rng.IntN(64)
				switch i % 10 {
				case 3:
					size = ReadBufferSize - 4 + rng.IntN(8)
				case 7:
					size = rng.IntN(5 * ReadBufferSize)
				}
				body := make([]byte, size)
				for j := range body {
					body[j] = byte(rng.Uint32())
				}
				frames = append(frames, body)
				stream = binary.BigEndian.AppendUint32(stream, uint32(size))
				stream = append(stream, body...)
			}
			go func() {
				for rest := stream; len(rest) > 0; {
					n := min(len(rest), 1+rng.IntN(3*ReadBufferSize))
					if _, err := peer.Write(rest[:n]); err != nil {
						return
					}
					rest = rest[n:]
				}
				peer.Close()
			}()
			var bufs readBuffers
			cr := newConnReader(in, &bufs, func() {})
			for i, want := range frames {
				prefix, err := cr.Peek(4)
				if err != nil {
					t.Fatalf("frame %d: Peek: %v", i, err)
				}
				size := int(binary.BigEndian.Uint32(prefix))
				cr.Discard(4)
				body := make([]byte, size)
				if _, err := io.ReadFull(cr, body); err != nil || !bytes.Equal(body, want) {
					t.Fatalf("frame %d of %d bytes: read %d bytes that differ, %v", i, len(want), len(body), err)
				}
			}
			if b, err := cr.Peek(4); len(b) != 0 || err != io.EOF {
				t.Fatalf("after the last frame: %q, %v, want io.EOF", b, err)
			}
			if n := bufs.held.Load(); n != 0 {
				t.Fatalf("%d buffers held at the end of the stream", n)
			}
		})
	}
}

// A stream that ends inside a size prefix gives the bytes before the end
// with io.EOF, which the frame reader reports as a truncated frame.
func TestConnReaderEndsInsideAPrefix(t *testing.T) {
	_, in, peer := tcpPair(t)
	peer.Write([]byte{0, 0})
	peer.Close()
	var bufs readBuffers
	cr := newConnReader(in, &bufs, func() {})
	b, err := cr.Peek(4)
	if len(b) != 2 || !errors.Is(err, io.EOF) {
		t.Fatalf("Peek: %q, %v", b, err)
	}
}
