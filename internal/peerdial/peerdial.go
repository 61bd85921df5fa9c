// Package peerdial opens the TCP connections one Gregor node makes to
// another: controller to controller (raft messages), broker to the active
// controller, broker to broker (follower fetches, coordinators' markers).
//
// Such a connection may cross a network that drops packets one way only.
// Then the peer's acknowledgements never arrive, the kernel backs its
// retransmissions off to two minutes apart, and once the network heals the
// connection stays silent until the next one: raft messages written to it
// (one-way, never answered) are held for up to two minutes, and a node
// that was cut off cannot rejoin its quorum that long. A user timeout
// (TCP_USER_TIMEOUT, RFC 5482) makes the kernel fail the connection once
// data has gone unacknowledged for UserTimeout, so the writer sees an error
// and dials again. Kafka reaches the same end with a request timeout on
// every inter-node request; a raft transport that never waits for an
// answer needs it from the kernel.
//
// It imports nothing of Gregor's.
package peerdial

import (
	"context"
	"fmt"
	"net"
	"time"
)

// UserTimeout is how long data written to a peer may go unacknowledged
// before the connection fails. A live peer's kernel acknowledges within
// milliseconds even when its process is stopped or busy; five seconds of
// silence means the path is down.
const UserTimeout = 5 * time.Second

// Dial connects to a peer's listener at addr (host:port) over TCP with
// UserTimeout set; ctx bounds the connect.
func Dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Control: setUserTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dialling %s: %w", addr, err)
	}
	return nc, nil
}
