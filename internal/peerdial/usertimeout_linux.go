package peerdial

import (
	"syscall"
)

// tcpUserTimeout is Linux's TCP_USER_TIMEOUT socket option (linux/tcp.h),
// which package syscall does not name.
const tcpUserTimeout = 0x12

func setUserTimeout(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(UserTimeout.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
