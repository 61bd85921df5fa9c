package replica

import (
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
)

func TestReplicationQuotaRate(t *testing.T) {
	q := newReplicationQuota(QuotaWindow{Samples: 3, Size: time.Second})
	start := time.Unix(1000, 0)
	if q.Exceeded(start) {
		t.Fatal("no limit, yet exceeded")
	}
	q.SetLimit(100)
	// 250 bytes over the minimum span of 2 s is 125 B/s.
	q.Record(250, start)
	if !q.Exceeded(start.Add(500 * time.Millisecond)) {
		t.Fatal("125 B/s against 100 B/s not exceeded")
	}
	// Once the sample leaves the 3 s window, nothing is counted.
	if q.Exceeded(start.Add(3 * time.Second)) {
		t.Fatal("exceeded after the window passed")
	}
	q.Record(150, start.Add(3*time.Second))
	if q.Exceeded(start.Add(3500 * time.Millisecond)) {
		t.Fatal("75 B/s against 100 B/s exceeded")
	}
}

func TestThrottledReplicaLists(t *testing.T) {
	for _, tc := range []struct {
		list      []string
		partition int32
		broker    int32
		want      bool
	}{
		{[]string{"*"}, 3, 7, true},
		{[]string{"0:1", "1:2"}, 1, 2, true},
		{[]string{"0:1", "1:2"}, 1, 1, false},
		{[]string{" 2 : 3 "}, 2, 3, true},
		{nil, 0, 1, false},
		{[]string{"bad"}, 0, 1, false},
	} {
		if got := throttledReplica(tc.list, tc.partition, tc.broker); got != tc.want {
			t.Errorf("%v partition %d broker %d: %v", tc.list, tc.partition, tc.broker, got)
		}
	}
}

// A throttled leader sends a follower outside the ISR nothing while the
// rate is over leader.replication.throttled.rate; lifting the throttle
// lets it catch up and join the ISR.
func TestLeaderThrottleHoldsBackAFollowerOutsideTheISR(t *testing.T) {
	cfg := replicatedTopic(1)
	cfg.LeaderReplicationThrottledReplicas = []string{"0:1"}
	throttledCatchUp(t, cfg, 1, func(m *Manager, on bool) {
		if on {
			m.SetReplicationThrottles(1, -1) // one byte a second
		} else {
			m.SetReplicationThrottles(-1, -1)
		}
	})
}

// A throttled follower outside the ISR leaves the partition out of its
// fetches while its rate is over follower.replication.throttled.rate.
func TestFollowerThrottleHoldsBackItsFetches(t *testing.T) {
	cfg := replicatedTopic(1)
	cfg.FollowerReplicationThrottledReplicas = []string{"0:2"}
	throttledCatchUp(t, cfg, 2, func(m *Manager, on bool) {
		if on {
			m.SetReplicationThrottles(-1, 1)
		} else {
			m.SetReplicationThrottles(-1, -1)
		}
	})
}

// throttledCatchUp has follower 2 catch up with leader 1, a batch a fetch,
// with node throttled's throttle on: after its first fetch it gets no
// further until the throttle is lifted, then it catches up and joins the
// ISR.
func throttledCatchUp(t *testing.T, cfg config.Topic, throttled int32, throttle func(m *Manager, on bool)) {
	t.Helper()
	c := newClusterFetching(t, []int32{1, 2}, nil, cfg, 10*time.Second, 1, 50*time.Millisecond)
	throttle(c.nodes[throttled], true)
	c.setCut(2, true)
	c.setPartition(led(1, 1, []int32{1, 2}, []int32{1}))
	for i := range 20 {
		c.produce(1, 1, batch(t, 2, int64(i)))
	}
	c.setCut(2, false)
	waitUntil(t, "node 2's first fetch", func() bool { return c.log(2).LogEndOffset() > 0 })
	first := c.log(2).LogEndOffset()
	// That node 2 gets no further within a while is the test: a sleep (a
	// window), not a wait.
	time.Sleep(300 * time.Millisecond)
	if got := c.log(2).LogEndOffset(); got != first || got == 40 {
		t.Fatalf("node 2 at %d after its first fetch reached %d: the throttle let more through", got, first)
	}
	throttle(c.nodes[throttled], false)
	waitUntil(t, "node 2 caught up and in the ISR", func() bool {
		return c.log(2).LogEndOffset() == 40 && len(c.isrOn(1)) == 2
	})
}
