package broker

// Socket reads and writes that do not wake the runtime's monitor thread.
//
// A Go system call made through syscall.Syscall (what net.Conn's Read and
// Write use) tells the scheduler it may block: if the runtime's monitor
// thread (sysmon) is in its deep sleep, which it enters whenever every P
// is idle, that call wakes it, and sysmon then polls every 20 µs until it
// sees the process idle again. A broker answering small requests goes idle
// between nearly every pair of them, so each burst of work paid for waking
// sysmon, at least one of its short sleeps and its return to deep sleep:
// three context switches on the broker's core. In the bench's end-to-end
// latency workload (one record per produce and per fetch) sysmon was a
// quarter of the broker's CPU time (golang/go#18236 is the runtime's side
// of it).
//
// Reads and writes on the connection's socket never block: Go opens it
// non-blocking, and EAGAIN hands the wait to the netpoller through
// syscall.RawConn, as net.Conn itself does. They are therefore issued with
// syscall.RawSyscall, which skips the scheduler's bookkeeping and so never
// wakes sysmon: a burst that only reads a request and answers it from
// memory (a fetch that parks, a heartbeat) now leaves sysmon asleep. That
// cut the broker's CPU per record in that workload by about a tenth.
// Anything that can block on a disk (a segment's pwrite or pread, a
// sendfile reading a segment) keeps the ordinary calls, so that a slow
// disk still hands the P to another thread; those still wake sysmon.
//
// A raw call holds its P for its duration, as ordinary Go code does: a
// write to a loopback socket runs the receiver's TCP processing inline,
// tens of microseconds at most, never a wait.

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// rawSocket reads and writes a TCP connection's descriptor directly. Its
// errors are those net.Conn would return for the same events as far as the
// connection's code tells them apart: io.EOF at the peer's end of stream,
// net.ErrClosed (wrapped) once the connection is closed, the deadline's
// error when a deadline passes, and the errno otherwise.
type rawSocket struct {
	rc syscall.RawConn
}

// socketIO is what a connection reads and writes through: a rawSocket for
// a TCP connection, the net.Conn itself for anything else.
func socketIO(nc net.Conn) io.ReadWriter {
	tcp, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	rc, err := tcp.SyscallConn()
	if err != nil {
		return nc
	}
	return &rawSocket{rc: rc}
}

func (s *rawSocket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := s.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait until readable
			}
			n, errno = int(r), e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, os.NewSyscallError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (s *rawSocket) Write(p []byte) (int, error) {
	written := 0
	var errno syscall.Errno
	err := s.rc.Write(func(fd uintptr) bool {
		for written < len(p) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[written])), uintptr(len(p)-written))
			switch e {
			case 0:
				written += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // wait until writable
			default:
				errno = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return written, err
	case errno != 0:
		return written, os.NewSyscallError("write", errno)
	}
	return written, nil
}
