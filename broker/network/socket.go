package network

// Socket reads that do not wake the runtime's monitor thread.
//
// A Go system call made through syscall.Syscall (what net.Conn's Read
// uses) tells the scheduler it may block: if the runtime's monitor thread
// (sysmon) is in its deep sleep, which it enters whenever every P is idle,
// that call wakes it, and sysmon then polls every 20 µs until it sees the
// process idle again. A broker answering small requests goes idle between
// nearly every pair of them, so each burst of work paid for waking sysmon,
// at least one of its short sleeps and its return to deep sleep: three
// context switches on the broker's core. In the bench's end-to-end latency
// workload (one record per produce and per fetch) sysmon was a quarter of
// the broker's CPU time (golang/go#18236 is the runtime's side of it).
//
// A read of the connection's socket never blocks: Go opens it non-blocking,
// and EAGAIN hands the wait to the netpoller through syscall.RawConn, as
// net.Conn itself does. Reads are therefore issued with syscall.RawSyscall,
// which skips the scheduler's bookkeeping and so never wakes sysmon: a
// burst that only reads a request and parks it (a long-poll fetch waiting
// for records) leaves sysmon asleep, which cut the broker's CPU per record
// in that workload by about a tenth (median of eight runs each).
//
// Writes stay ordinary net.Conn writes. Issued raw as well they saved no
// CPU that could be measured (a burst that answers has usually made a
// disk call already, which wakes sysmon anyway) and they made the tail
// latency of concurrent small requests worse (eight offset committers: p99
// about 15% higher), a raw call holding its P while the kernel delivers the
// answer. Anything that can block on a disk keeps the ordinary calls too,
// so that a slow disk still hands the P to another thread.

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// rawReader reads a TCP connection's descriptor directly. Its errors are
// those net.Conn's Read returns for the same events as far as the
// connection's code tells them apart: io.EOF at the peer's end of stream,
// net.ErrClosed (wrapped) once the connection is closed, the deadline's
// error when a deadline passes, and the errno otherwise.
type rawReader struct {
	rc syscall.RawConn
}

// socketReader is what a connection reads through: a rawReader for a TCP
// connection, the net.Conn itself for anything else.
func socketReader(nc net.Conn) io.Reader {
	tcp, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	rc, err := tcp.SyscallConn()
	if err != nil {
		return nc
	}
	return &rawReader{rc: rc}
}

func (s *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := s.rc.Read(func(fd uintptr) bool {
		var ready bool
		n, errno, ready = readNow(fd, p)
		return ready // not ready: wait until readable
	})
	return n, rawReadError(n, errno, err)
}

// readNow reads fd into p (not empty) without blocking, with a raw
// system call; ready is false when the socket has nothing yet (EAGAIN).
func readNow(fd uintptr, p []byte) (n int, errno syscall.Errno, ready bool) {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return 0, 0, false
		}
		return int(r), e, true
	}
}

// rawReadError is a raw read's error as rawReader reports it: err from
// the raw connection (closed, deadline), the errno, or io.EOF for a read
// of nothing.
func rawReadError(n int, errno syscall.Errno, err error) error {
	switch {
	case err != nil:
		return err
	case errno != 0:
		return os.NewSyscallError("read", errno)
	case n == 0:
		return io.EOF
	}
	return nil
}
