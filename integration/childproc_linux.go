package integration

import "syscall"

// ChildProcAttr is how the harness starts a process (a node, a tool):
// in a process group of its own, so that it and its children can be
// signalled together, and killed by the kernel if the test binary dies
// first (a go test timeout, a kill), so that no node outlives the test
// that started it and holds its address for the next run.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
