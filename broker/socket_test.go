package broker

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair is a connected pair of loopback TCP connections: the broker's
// end, read and written through socketIO, and the peer's.
func tcpPair(t *testing.T) (broker net.Conn, sock io.ReadWriter, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- nc
	}()
	peer, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	broker = <-accepted
	if broker == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { broker.Close(); peer.Close() })
	sock = socketIO(broker)
	if _, ok := sock.(*rawSocket); !ok {
		t.Fatalf("socketIO(%T) = %T, want the raw socket", broker, sock)
	}
	return broker, sock, peer
}

// Bytes go both ways whole, also when a write has to wait for the peer to
// read (the socket buffers hold far less than is written).
func TestRawSocketCarriesBytesBothWays(t *testing.T) {
	_, sock, peer := tcpPair(t)
	out := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(peer, int64(len(out))))
		got <- b
	}()
	if n, err := sock.Write(out); n != len(out) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, out) {
		t.Fatalf("the peer read %d bytes, not what was written", len(b))
	}
	in := []byte("request bytes")
	if _, err := peer.Write(in); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(in))
	if _, err := io.ReadFull(sock, buf); err != nil || !bytes.Equal(buf, in) {
		t.Fatalf("read %q, %v", buf, err)
	}
}

// waiting runs op on its own goroutine and gives it a moment to start
// waiting in the poller (the test holds whatever op returns, early or
// not, against what it must be).
func waiting(op func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- op() }()
	time.Sleep(20 * time.Millisecond)
	return done
}

// The errors are the ones the connection's code tells apart, as net.Conn
// reports them: end of stream, a closed connection, a passed deadline.
func TestRawSocketErrors(t *testing.T) {
	t.Run("peer closes", func(t *testing.T) {
		_, sock, peer := tcpPair(t)
		peer.Close()
		if _, err := sock.Read(make([]byte, 8)); err != io.EOF {
			t.Fatalf("Read after the peer closed: %v, want io.EOF", err)
		}
	})
	t.Run("closed while reading", func(t *testing.T) {
		broker, sock, _ := tcpPair(t)
		done := waiting(func() error { _, err := sock.Read(make([]byte, 8)); return err })
		broker.Close()
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read on a closed connection: %v, want net.ErrClosed", err)
		}
	})
	t.Run("deadline while reading", func(t *testing.T) {
		broker, sock, _ := tcpPair(t)
		done := waiting(func() error { _, err := sock.Read(make([]byte, 8)); return err })
		broker.SetReadDeadline(time.Now()) // how Shutdown wakes readers
		if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Read past its deadline: %v, want os.ErrDeadlineExceeded", err)
		}
	})
	t.Run("closed while writing", func(t *testing.T) {
		broker, sock, _ := tcpPair(t)
		// The peer never reads: the write waits for room.
		done := waiting(func() error { _, err := sock.Write(make([]byte, 64<<20)); return err })
		broker.Close()
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Write on a closed connection: %v, want net.ErrClosed", err)
		}
	})
	t.Run("peer gone while writing", func(t *testing.T) {
		_, sock, peer := tcpPair(t)
		peer.(*net.TCPConn).SetLinger(0) // close with a reset
		peer.Close()
		var err error
		for i := 0; i < 100 && err == nil; i++ {
			_, err = sock.Write(make([]byte, 1<<10))
			time.Sleep(time.Millisecond)
		}
		if err == nil || errors.Is(err, net.ErrClosed) {
			t.Fatalf("writing to a reset connection: %v, want the errno", err)
		}
	})
}
