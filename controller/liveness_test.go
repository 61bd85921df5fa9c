package controller

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/internal/await"
	"github.com/gregorbroker/gregor/vfs"
)

// registerListening registers broker id with addr as its one listener
// and unfences it.
func registerListening(t *testing.T, c *Controller, id int32, addr string) int64 {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return registerBrokerAt(t, c, id, host, uint16(p))
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A broker whose listener was seen accepting and now refuses is fenced at
// once by a probe; one that still accepts is not; one whose listener was
// never reachable from the controller is never fenced by a probe (its
// session lapses as in Kafka).
func TestProbeFencesOnlyBrokersWhoseListenersWentAway(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	live, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	dying, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Ids other than the controller's own node id: its own process's
	// broker is never probed.
	liveEpoch := registerListening(t, c, 11, live.Addr().String())
	dyingEpoch := registerListening(t, c, 12, dying.Addr().String())
	neverEpoch := registerListening(t, c, 13, freeAddr(t))
	waitFor(t, "brokers 11 and 12 seen reachable at their epochs", func() bool {
		c.probeMu.Lock()
		defer c.probeMu.Unlock()
		return c.reachable[11] == liveEpoch && c.reachable[12] == dyingEpoch
	})
	dying.Close()
	for id, epoch := range map[int32]int64{11: liveEpoch, 12: dyingEpoch, 13: neverEpoch} {
		c.ProbeBroker(id, epoch)
	}
	waitFor(t, "broker 12 fenced by a probe", func() bool { return c.Image().Brokers[12].Fenced })
	await.Until(t, 5*time.Second, "every probe to finish its tries", func() error {
		c.probeMu.Lock()
		defer c.probeMu.Unlock()
		if len(c.probing) > 0 {
			return fmt.Errorf("probing %v", c.probing)
		}
		return nil
	})
	if c.Image().Brokers[11].Fenced || c.Image().Brokers[13].Fenced {
		t.Fatalf("fenced: broker 11 %v, broker 13 %v", c.Image().Brokers[11].Fenced, c.Image().Brokers[13].Fenced)
	}
}
