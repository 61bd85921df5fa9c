package main

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestOwnershipComplete(t *testing.T) {
	for _, c := range []struct {
		name  string
		owned [][]int32 // by member, for 3 members and 3 partitions
		want  bool
	}{
		{"one each", [][]int32{{0}, {1}, {2}}, true},
		{"member without partitions", [][]int32{{0, 1}, {}, {2}}, false},
		{"partition owned twice", [][]int32{{0}, {0}, {2}}, false},
		{"partition orphaned", [][]int32{{0}, {1}, {1}}, false},
		{"out of range", [][]int32{{0}, {1}, {3}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := newOwnership(3, 3)
			for i, ps := range c.owned {
				o.update(i, ps, nil)
			}
			s := o.snapshot()
			if got := !s.completeAt.IsZero(); got != c.want {
				t.Fatalf("complete = %v, want %v (%s)", got, c.want, s.summary())
			}
		})
	}
}

func TestOwnershipRevokeMakesIncompleteAndSignals(t *testing.T) {
	o := newOwnership(2, 2)
	o.update(0, []int32{0}, nil)
	o.update(1, []int32{1}, nil)
	first := o.snapshot()
	if first.completeAt.IsZero() {
		t.Fatal("not complete after one partition each")
	}
	<-o.changed // drained: one pending signal, not one per update
	select {
	case <-o.changed:
		t.Fatal("second signal buffered")
	default:
	}
	o.update(0, nil, []int32{0})
	if s := o.snapshot(); !s.completeAt.IsZero() || s.version != first.version+1 {
		t.Fatalf("after revoke: complete at %v, version %d", s.completeAt, s.version)
	}
	select {
	case <-o.changed:
	case <-time.After(time.Second):
		t.Fatal("no signal after revoke")
	}
	o.update(1, []int32{0}, []int32{1})
	o.update(0, []int32{1}, nil)
	if s := o.snapshot(); s.completeAt.IsZero() || s.owned[0][0] != 1 || s.owned[1][0] != 0 {
		t.Fatalf("after swap: %+v", s)
	}
}

func TestSameAssignment(t *testing.T) {
	want := map[string][]int32{"a": {0, 1}, "b": {2}}
	for _, c := range []struct {
		name string
		got  map[string][]int32
		same bool
	}{
		{"equal", map[string][]int32{"a": {0, 1}, "b": {2}}, true},
		{"extra member", map[string][]int32{"a": {0, 1}, "b": {2}, "c": nil}, false},
		{"other member id", map[string][]int32{"a": {0, 1}, "c": {2}}, false},
		{"other partitions", map[string][]int32{"a": {0}, "b": {1, 2}}, false},
	} {
		if got := sameAssignment(want, c.got); got != c.same {
			t.Errorf("%s: sameAssignment = %v, want %v", c.name, got, c.same)
		}
	}
}

func TestRequestClockKeepsEarliestJoin(t *testing.T) {
	var c requestClock
	c.OnBrokerWrite(kgoMeta, keyJoinGroup, 10, 0, 0, nil)
	first := c.firstJoinNanos.Load()
	c.OnBrokerWrite(kgoMeta, keySyncGroup, 10, time.Hour, 0, nil) // not a join: ignored for the clock
	if c.firstJoinNanos.Load() != first {
		t.Fatal("SyncGroup moved the clock")
	}
	c.OnBrokerWrite(kgoMeta, keyConsumerGroupHeartbeat, 10, time.Minute, 0, nil) // queued a minute ago
	if got := c.firstJoinNanos.Load(); got >= first {
		t.Fatalf("earlier heartbeat did not move the clock back: %d >= %d", got, first)
	}
	c.OnBrokerWrite(kgoMeta, keyJoinGroup, 10, 0, 0, errTest) // failed writes are not requests
	if c.joins.Load() != 1 || c.syncs.Load() != 1 || c.heartbeats.Load() != 1 {
		t.Fatalf("counts %d %d %d", c.joins.Load(), c.syncs.Load(), c.heartbeats.Load())
	}
}

var (
	kgoMeta = kgo.BrokerMetadata{NodeID: 1}
	errTest = errors.New("write failed")
)
