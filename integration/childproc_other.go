//go:build !linux

package integration

import "syscall"

// ChildProcAttr is how the harness starts a process: in a process group
// of its own (the kill on the test binary's death is Linux's).
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
