package broker

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// socket.send.buffer.bytes and socket.receive.buffer.bytes size the
// accepted sockets' kernel buffers (Linux reports twice the value set, for
// its bookkeeping); -1 leaves the OS default.
func TestSocketBufferSizesApplied(t *testing.T) {
	n := startTestNode(t, map[string]string{"socket.send.buffer.bytes": "65536", "socket.receive.buffer.bytes": "32768"})
	dialRaw(t, n.addr)
	snd, rcv := serverSocketBuffers(t, n)
	if snd != 2*65536 || rcv != 2*32768 {
		t.Fatalf("accepted socket SO_SNDBUF %d SO_RCVBUF %d, want %d and %d", snd, rcv, 2*65536, 2*32768)
	}

	d := startTestNode(t, map[string]string{"socket.send.buffer.bytes": "-1", "socket.receive.buffer.bytes": "-1"})
	dialRaw(t, d.addr)
	snd, rcv = serverSocketBuffers(t, d)
	if snd == 2*102400 || rcv == 2*102400 {
		t.Fatalf("with -1 the OS defaults should stay, got SO_SNDBUF %d SO_RCVBUF %d", snd, rcv)
	}
}

// serverSocketBuffers waits for the node's one client connection and reads
// its buffer sizes.
func serverSocketBuffers(t *testing.T, n *testNode) (snd, rcv int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var tcp *net.TCPConn
		for _, c := range n.b.server.Conns() {
			if !c.ControllerListener() {
				tcp, _ = c.Socket().(*net.TCPConn)
			}
		}
		if tcp == nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		raw, err := tcp.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var serr error
		raw.Control(func(fd uintptr) {
			if snd, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF); serr != nil {
				return
			}
			rcv, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
		})
		if serr != nil {
			t.Fatal(serr)
		}
		return snd, rcv
	}
	t.Fatal("the node never accepted the connection")
	return 0, 0
}
