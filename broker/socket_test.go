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
// end, also read through socketReader, and the peer's.
func tcpPair(t *testing.T) (broker net.Conn, in io.Reader, peer net.Conn) {
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
	in = socketReader(broker)
	if _, ok := in.(*rawReader); !ok {
		t.Fatalf("socketReader(%T) = %T, want the raw reader", broker, in)
	}
	return broker, in, peer
}

// The bytes arrive whole and in order, also when the reader has to wait
// for the peer again and again (the socket buffers hold far less than is
// sent).
func TestRawReaderReadsEverything(t *testing.T) {
	_, in, peer := tcpPair(t)
	out := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	go func() {
		for rest := out; len(rest) > 0; rest = rest[min(len(rest), 1000):] {
			if _, err := peer.Write(rest[:min(len(rest), 1000)]); err != nil {
				return
			}
		}
	}()
	got := make([]byte, len(out))
	if _, err := io.ReadFull(in, got); err != nil || !bytes.Equal(got, out) {
		t.Fatalf("read %d bytes that differ from what was sent: %v", len(got), err)
	}
	if n, err := in.Read(nil); n != 0 || err != nil {
		t.Fatalf("an empty read: %d, %v", n, err)
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
func TestRawReaderErrors(t *testing.T) {
	t.Run("peer closes", func(t *testing.T) {
		_, in, peer := tcpPair(t)
		peer.Write([]byte("last"))
		peer.Close()
		buf := make([]byte, 8)
		if n, err := io.ReadFull(in, buf[:4]); n != 4 || err != nil {
			t.Fatalf("the bytes before the end: %d, %v", n, err)
		}
		if _, err := in.Read(buf); err != io.EOF {
			t.Fatalf("Read after the peer closed: %v, want io.EOF", err)
		}
	})
	t.Run("closed while reading", func(t *testing.T) {
		broker, in, _ := tcpPair(t)
		done := waiting(func() error { _, err := in.Read(make([]byte, 8)); return err })
		broker.Close()
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read on a closed connection: %v, want net.ErrClosed", err)
		}
	})
	t.Run("deadline while reading", func(t *testing.T) {
		broker, in, _ := tcpPair(t)
		done := waiting(func() error { _, err := in.Read(make([]byte, 8)); return err })
		broker.SetReadDeadline(time.Now()) // how Shutdown wakes readers
		if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Read past its deadline: %v, want os.ErrDeadlineExceeded", err)
		}
	})
	t.Run("peer resets", func(t *testing.T) {
		_, in, peer := tcpPair(t)
		peer.(*net.TCPConn).SetLinger(0) // close with a reset
		peer.Close()
		_, err := in.Read(make([]byte, 8))
		var se *os.SyscallError
		if !errors.As(err, &se) {
			t.Fatalf("Read after a reset: %v, want the errno", err)
		}
	})
}
