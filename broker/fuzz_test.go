package broker

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzHandlers sends every served API, at every served version, with a
// fuzzed body to a running node. Whatever kmsg can decode reaches the
// handler; the node must answer or close that connection, and no handler
// may panic.
func FuzzHandlers(f *testing.F) {
	n := startTestNode(f, nil)
	for _, h := range n.b.handlers() {
		for v := h.Min; v <= h.Max; v++ {
			req := kmsg.RequestForKey(int16(h.Key))
			req.SetVersion(v)
			f.Add(uint8(h.Key), uint8(v), req.AppendTo(nil))
		}
	}
	f.Fuzz(func(t *testing.T, key, version uint8, body []byte) {
		req := kmsg.RequestForKey(int16(key))
		if req == nil || int16(version) > req.MaxVersion() {
			return
		}
		req.SetVersion(int16(version))
		sendFuzzed(t, n, n.addr, req, body)
	})
}

// sendFuzzed sends req's header with body to addr and fails the test if
// any handler of n has panicked.
func sendFuzzed(t *testing.T, n *testNode, addr string, req kmsg.Request, body []byte) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var frame []byte
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.GetVersion()))
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = binary.BigEndian.AppendUint16(frame, 0xffff)
	if req.IsFlexible() {
		frame = append(frame, 0)
	}
	frame = append(frame, body...)
	nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
	// Read an answer or the close; handlers that wait (long polls,
	// joins) are left to finish on their own.
	nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var buf [4]byte
	nc.Read(buf[:])
	if p := n.b.server.Panics(); p != 0 {
		t.Fatalf("%d handler panics (key %d v%d)", p, req.Key(), req.GetVersion())
	}
}
