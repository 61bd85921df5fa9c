//go:build !linux

package peerdial

import "syscall"

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not available
// (a developer's laptop): connections across a lossy network recover at
// the kernel's own pace there.
func setUserTimeout(_, _ string, _ syscall.RawConn) error { return nil }
