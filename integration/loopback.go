package integration

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Every node a harness starts (the integration tests', the compat
// runner's, the benchmarks') listens on a loopback address of its own,
// 127.100.X.Y, claimed for as long as the node exists, restarts after
// kill -9 included, and its ports are then fixed by role (ClientPort and
// the rest). So no two nodes on this machine can ever want the same
// address, whichever test package or process started them: picking a free
// port, releasing it and binding it later in a child process (the old
// scheme) let another package's node, or a node restarted on "its" port,
// take it in between ("address already in use").
//
// A claim is an exclusive flock on the file named after the address in a
// directory of the machine's temporary dir that every process shares. The
// kernel drops the lock when the claiming process dies, however it dies,
// so a crashed test run leaves nothing claimed. Addresses are tried in
// order, so the files are reused and stay few.
//
// Every address of the pool is named in PKI.Server's certificate, so TLS
// clients that verify the host name accept any node's.

// The ports of a claimed address, by the role of the listener on it.
const (
	ClientPort     = 19092 // PLAINTEXT (or a split broker's EXTERNAL)
	ControllerPort = 19093 // CONTROLLER
	InternalPort   = 19094 // INTERNAL (a split broker's, or a test's own)
	DebugPort      = 19095 // GREGOR_PPROF_ADDR
	// FirstExtraPort is the first of the ports left for listeners of a
	// test's or a scenario's own (ExtraPorts of them).
	FirstExtraPort = 19096
	ExtraPorts     = 8
)

// loopbackPool is how many addresses can be claimed at once: 127.100.0.1
// to 127.100.3.254.
const (
	loopbackNets  = 4
	loopbackHosts = 254
)

// Loopback is a claimed loopback address. Release gives it back; until
// then no other claim on this machine gets it.
type Loopback struct {
	IP string

	mu   sync.Mutex
	lock *os.File // nil once released
}

// Addr is ip:port on the claimed address.
func (l *Loopback) Addr(port int) string {
	return net.JoinHostPort(l.IP, strconv.Itoa(port))
}

// Release gives the address back. The nodes on it must be stopped first.
// Safe to call more than once.
func (l *Loopback) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lock != nil {
		l.lock.Close() // closing the only descriptor drops the flock
		l.lock = nil
	}
}

// LoopbackPool is every address ClaimLoopback can hand out.
func LoopbackPool() []net.IP {
	ips := make([]net.IP, 0, loopbackNets*loopbackHosts)
	for x := range loopbackNets {
		for y := 1; y <= loopbackHosts; y++ {
			ips = append(ips, net.IPv4(127, 100, byte(x), byte(y)))
		}
	}
	return ips
}

// claimMu keeps one process's claims from scanning the pool at once: they
// would only race for the same first free file.
var claimMu sync.Mutex

// ClaimLoopback claims the first free address of the pool. An address on
// which some other program listens on one of the role ports (through a
// wildcard bind, say) is passed over.
func ClaimLoopback() (*Loopback, error) {
	var pool []string
	for _, ip := range LoopbackPool() {
		pool = append(pool, ip.String())
	}
	return claimLoopback(filepath.Join(os.TempDir(), "gregor-loopback"), pool)
}

// claimLoopback claims the first address of pool that no process holds in
// the lock directory dir.
func claimLoopback(dir string, pool []string) (*Loopback, error) {
	claimMu.Lock()
	defer claimMu.Unlock()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("claiming a loopback address: %w", err)
	}
	_ = os.Chmod(dir, 0o1777) // shared by every user's test runs
	var squatted []string
	for _, name := range pool {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return nil, fmt.Errorf("claiming loopback address %s: %w", name, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				continue // claimed by a live process
			}
			return nil, fmt.Errorf("claiming loopback address %s: %w", name, err)
		}
		if err := portsFree(name); err != nil {
			f.Close()
			squatted = append(squatted, err.Error())
			continue
		}
		// Who holds it (or last held it), for whoever looks in the directory.
		if err := f.Truncate(0); err == nil {
			fmt.Fprintf(f, "pid %d\n", os.Getpid())
		}
		return &Loopback{IP: name, lock: f}, nil
	}
	if len(squatted) > 0 {
		return nil, fmt.Errorf("no free loopback address of %d (%d claimed by other processes, see %s; %d passed over, the first: %s)",
			len(pool), len(pool)-len(squatted), dir, len(squatted), squatted[0])
	}
	return nil, fmt.Errorf("no free loopback address: all %d are claimed (see %s)", len(pool), dir)
}

// portsFree checks that nothing outside the harness listens on ip's role
// ports. Nothing else of the harness can: the address is claimed.
func portsFree(ip string) error {
	ports := []int{ClientPort, ControllerPort, InternalPort, DebugPort}
	for i := range ExtraPorts {
		ports = append(ports, FirstExtraPort+i)
	}
	for _, p := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
		if err != nil {
			return fmt.Errorf("%s:%d is taken: %w", ip, p, err)
		}
		l.Close()
	}
	return nil
}
