package replica

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// waitEvents waits until the listener has heard want (in any order) and
// nothing else.
func waitEvents(t *testing.T, l *listener, want ...string) {
	t.Helper()
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		got = append(got, l.take()...)
		slices.Sort(got)
		if len(got) >= len(want) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("listener heard %v, want %v", got, want)
	}
}

// Without the lease, this node leads none of its replicated partitions:
// appends are refused with NOT_LEADER_OR_FOLLOWER, a parked acks=all
// append fails, and the listeners hear it resign (a coordinator unloads);
// a partition with one replica, which no other node could lead, goes on.
// With the lease back, it leads again; and a lease that is not renewed
// lapses by itself.
func TestLeaderLeaseGatesReplicatedLeaderships(t *testing.T) {
	f := newFixture(t)
	f.setTopic("t", 1, led(self, 0, []int32{self, 2}, []int32{self}), solo(0), led(self, 0, []int32{self, 2}, []int32{self, 2}))
	var l listener
	defer f.m.AddLeadershipListener("t", &l)()
	waitEvents(t, &l, "lead t-0@0", "lead t-1@0", "lead t-2@0")
	replicated, single, waiting := TopicPartition{Topic: "t", Partition: 0}, TopicPartition{Topic: "t", Partition: 1}, TopicPartition{Topic: "t", Partition: 2}
	if res := f.produce(replicated, -1, 1); res.Err != nil {
		t.Fatalf("append with the lease never set: %v", res.Err)
	}
	// An acks=all append waits for replica 2, which never fetches.
	parked := make(appendResults, 1)
	appendTo(f.m, -1, time.Minute, OriginClient, []AppendEntry{{TopicPartition: waiting, Records: batch(t, 1, time.Now().UnixMilli()), LeaderEpoch: -1}}, parked)
	pending(t, parked)

	f.m.SetLeaderLease(time.Time{})
	if res := f.produce(replicated, -1, 1); !errors.Is(res.Err, kerr.NotLeaderForPartition) {
		t.Fatalf("append without the lease: %v, want NOT_LEADER_OR_FOLLOWER", res.Err)
	}
	if res := f.produce(single, -1, 1); res.Err != nil {
		t.Fatalf("append to a partition with one replica without the lease: %v", res.Err)
	}
	if got := receive(t, parked)[0].Result.Err; !errors.Is(got, kerr.NotLeaderForPartition) {
		t.Fatalf("parked acks=all append when the lease ended: %v, want NOT_LEADER_OR_FOLLOWER", got)
	}
	waitEvents(t, &l, "resign t-0", "resign t-2")

	f.m.SetLeaderLease(time.Now().Add(time.Hour))
	waitEvents(t, &l, "lead t-0@0", "lead t-2@0")
	if res := f.produce(replicated, -1, 1); res.Err != nil {
		t.Fatalf("append with the lease back: %v", res.Err)
	}

	f.m.SetLeaderLease(time.Now().Add(50 * time.Millisecond))
	waitEvents(t, &l, "resign t-0", "resign t-2")
	if res := f.produce(replicated, -1, 1); !errors.Is(res.Err, kerr.NotLeaderForPartition) {
		t.Fatalf("append after the lease lapsed: %v, want NOT_LEADER_OR_FOLLOWER", res.Err)
	}
}
