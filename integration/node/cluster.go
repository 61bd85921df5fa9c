package node

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Addrs are the client addresses of nodes, to seed a client with.
func Addrs(nodes []*Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Addr())
	}
	return out
}

// NewClient is a kgo client seeded with addrs, closed when the test ends.
func NewClient(t testing.TB, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// WaitFor polls cond every 50 ms until it holds, failing the test after
// wait, and returns how long it took.
func WaitFor(t testing.TB, wait time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > wait {
			t.Fatalf("no %s after %s", what, wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}
