package network

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/internal/await"
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

// waiting runs op, a rawReader.Read, on its own goroutine and returns
// once a goroutine is parked in the poller inside rawReader.Read (or op
// has returned: the test holds whatever op returns against what it must
// be).
func waiting(t *testing.T, op func() error) <-chan error {
	return waitingIn(t, "network.(*rawReader).Read", op)
}

// waitingIn is waiting for a read parked inside the function named fn.
func waitingIn(t *testing.T, fn string, op func() error) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	returned := make(chan struct{})
	go func() {
		err := op()
		close(returned)
		done <- err
	}()
	buf := make([]byte, 1<<20)
	await.Until(t, 5*time.Second, "a Read parked in the poller", func() error {
		select {
		case <-returned:
			return nil
		default:
		}
		all := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(all, "\n\n") {
			if strings.Contains(g, "[IO wait") && strings.Contains(g, fn) {
				return nil
			}
		}
		return fmt.Errorf("no goroutine in IO wait inside %s among %d", fn, strings.Count(all, "\n\n")+1)
	})
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
		done := waiting(t, func() error { _, err := in.Read(make([]byte, 8)); return err })
		broker.Close()
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read on a closed connection: %v, want net.ErrClosed", err)
		}
	})
	t.Run("deadline while reading", func(t *testing.T) {
		broker, in, _ := tcpPair(t)
		done := waiting(t, func() error { _, err := in.Read(make([]byte, 8)); return err })
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
