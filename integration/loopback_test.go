package integration

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// testPool claims n addresses for real (so that no other test binds them
// while these tests probe them) and returns them with a lock directory of
// the test's own, in which the tests claim them again.
func testPool(t *testing.T, n int) (dir string, pool []string) {
	t.Helper()
	for range n {
		l, err := ClaimLoopback()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Release)
		if !strings.HasPrefix(l.IP, "127.100.") {
			t.Fatalf("claimed %s, want an address of 127.100.0.0/22", l.IP)
		}
		pool = append(pool, l.IP)
	}
	return t.TempDir(), pool
}

// A claim holds its address against every other claim: in this process,
// and in another process (another test package's), until released or
// until the claiming process dies.
func TestClaimLoopbackIsExclusive(t *testing.T) {
	dir, pool := testPool(t, 3)
	a, err := claimLoopback(dir, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	if a.IP != pool[0] {
		t.Fatalf("first claim got %s, want the pool's first, %s", a.IP, pool[0])
	}

	// Another process claims the next one and holds it while it runs.
	cmd := exec.Command(os.Args[0], "-test.run=^TestClaimLoopbackHelper$")
	cmd.Env = append(os.Environ(), "GREGOR_LOOPBACK_HELPER="+dir+" "+strings.Join(pool, " "))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the other process's claim: %v", err)
	}
	if other := strings.TrimSpace(strings.TrimPrefix(line, "claimed ")); other != pool[1] {
		t.Fatalf("the other process claimed %q, want %s (%s is held here)", other, pool[1], pool[0])
	}
	c, err := claimLoopback(dir, pool)
	if err != nil {
		t.Fatal(err)
	}
	if c.IP != pool[2] {
		t.Fatalf("third claim got %s, want %s (the others are held)", c.IP, pool[2])
	}
	if _, err := claimLoopback(dir, pool); err == nil || !strings.Contains(err.Error(), "all 3 are claimed") {
		t.Fatalf("a fourth claim of three addresses: %v, want all claimed", err)
	}

	// Released here, or by the death of the process that held it, an
	// address is claimed again.
	c.Release()
	if d, err := claimLoopback(dir, pool); err != nil || d.IP != pool[2] {
		t.Fatalf("after its release, a claim got %v (%v), want %s", d, err, pool[2])
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if d, err := claimLoopback(dir, pool); err != nil || d.IP != pool[1] {
		t.Fatalf("after its holder was killed, a claim got %v (%v), want %s", d, err, pool[1])
	}
}

// TestClaimLoopbackHelper is the other process of
// TestClaimLoopbackIsExclusive: it claims an address of the pool it is
// given, prints it and holds it until its stdin closes.
func TestClaimLoopbackHelper(t *testing.T) {
	args := strings.Fields(os.Getenv("GREGOR_LOOPBACK_HELPER"))
	if len(args) < 2 {
		t.Skip("run by TestClaimLoopbackIsExclusive")
	}
	l, err := claimLoopback(args[0], args[1:])
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("claimed " + l.IP + "\n")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	l.Release()
}

// An address on which something outside the harness listens (on a role
// port) is passed over.
func TestClaimLoopbackPassesOverSquattedAddresses(t *testing.T) {
	dir, pool := testPool(t, 2)
	squatter, err := net.Listen("tcp", net.JoinHostPort(pool[0], "19093"))
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	l, err := claimLoopback(dir, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if l.IP != pool[1] {
		t.Fatalf("claimed %s, want %s: something listens on %s:19093", l.IP, pool[1], pool[0])
	}
	l.Release()
	if _, err := claimLoopback(dir, pool[:1]); err == nil || !strings.Contains(err.Error(), "passed over") {
		t.Fatalf("claiming only the squatted address: %v, want it passed over", err)
	}
}
