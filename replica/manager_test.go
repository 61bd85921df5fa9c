package replica

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metadata/persist"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The one leadership check: Kafka's choice and order of errors
// (ReplicaManager.getPartitionOrError, then Partition.getLocalLog: the
// epoch before leadership), and the leader hints that come with them.
func TestLeaderPartitionErrors(t *testing.T) {
	f := newFixture(t)
	f.setTopic("led", 1, solo(5))
	f.setTopic("followed", 2, led(2, 7, []int32{2, self}, []int32{2, self}))
	f.setTopic("elsewhere", 3, led(3, 4, []int32{3}, []int32{3}))
	f.setTopic("leaderless", 4, led(-1, 8, []int32{self}, []int32{}))
	tests := []struct {
		name          string
		tp            TopicPartition
		currentEpoch  int32
		requireLeader bool
		want          *kerr.Error
		hint          LeaderHint
	}{
		{"leader, no epoch", TopicPartition{Topic: "led"}, -1, true, nil, noLeaderHint},
		{"leader, current epoch", TopicPartition{Topic: "led"}, 5, true, nil, noLeaderHint},
		{"leader, older epoch", TopicPartition{Topic: "led"}, 4, true, kerr.FencedLeaderEpoch, LeaderHint{self, 5}},
		{"leader, newer epoch", TopicPartition{Topic: "led"}, 6, true, kerr.UnknownLeaderEpoch, noLeaderHint},
		{"follower", TopicPartition{Topic: "followed"}, -1, true, kerr.NotLeaderForPartition, LeaderHint{2, 7}},
		{"follower, leader not required", TopicPartition{Topic: "followed"}, -1, false, nil, noLeaderHint},
		// The epoch check comes before the leadership check.
		{"follower, older epoch", TopicPartition{Topic: "followed"}, 6, true, kerr.FencedLeaderEpoch, LeaderHint{2, 7}},
		{"follower, newer epoch", TopicPartition{Topic: "followed"}, 8, true, kerr.UnknownLeaderEpoch, noLeaderHint},
		{"follower, same epoch", TopicPartition{Topic: "followed"}, 7, true, kerr.NotLeaderForPartition, LeaderHint{2, 7}},
		{"no leader", TopicPartition{Topic: "leaderless"}, -1, true, kerr.NotLeaderForPartition, LeaderHint{-1, 8}},
		{"not hosted here, exists", TopicPartition{Topic: "elsewhere"}, -1, true, kerr.NotLeaderForPartition, LeaderHint{3, 4}},
		{"not hosted here, epoch not checked", TopicPartition{Topic: "elsewhere"}, 1, true, kerr.NotLeaderForPartition, LeaderHint{3, 4}},
		{"unknown topic", TopicPartition{Topic: "missing"}, -1, true, kerr.UnknownTopicOrPartition, noLeaderHint},
		{"partition out of range", TopicPartition{Topic: "led", Partition: 1}, -1, true, kerr.UnknownTopicOrPartition, noLeaderHint},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, ke, hint := f.m.leaderPartition(tc.tp, tc.currentEpoch, tc.requireLeader)
			if ke != tc.want || hint != tc.hint {
				t.Fatalf("got %v with hint %+v, want %v with hint %+v", ke, hint, tc.want, tc.hint)
			}
			if (p == nil) != (ke != nil) {
				t.Fatalf("partition %v with error %v", p, ke)
			}
		})
	}

	// An offline partition (its log could not be opened) is
	// KAFKA_STORAGE_ERROR, before any epoch check; it comes online when a
	// later image finds the disk working.
	f.fs.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpMkdir {
			return errIO
		}
		return nil
	})
	f.setTopic("broken", 5, solo(1))
	f.fs.Inject(nil)
	if _, ke, _ := f.m.leaderPartition(TopicPartition{Topic: "broken"}, 0, true); ke != kerr.KafkaStorageError {
		t.Fatalf("an offline partition: %v, want KAFKA_STORAGE_ERROR", ke)
	}
	if r := f.produce(TopicPartition{Topic: "broken"}, 1, 1); r.Err != kerr.KafkaStorageError {
		t.Fatalf("append to an offline partition: %v", r.Err)
	}
	f.setTopic("broken", 5, solo(2))
	if r := f.produce(TopicPartition{Topic: "broken"}, 1, 1); r.Err != nil {
		t.Fatalf("append once the log opened: %v", r.Err)
	}
}

var errIO = fmt.Errorf("input/output error")

// acks=all with this node the only in-sync replica completes inline: no
// purgatory entry, no timer, no goroutine.
func TestAppendAcksAllSingleReplicaCompletesAtOnce(t *testing.T) {
	f := newFixture(t)
	f.setTopic("t", 1, solo(0))
	tp := TopicPartition{Topic: "t"}
	before := runtime.NumGoroutine()
	for i := range 3 {
		entries := []AppendEntry{{TopicPartition: tp, Records: batch(t, 2, 1), LeaderEpoch: -1}}
		if pa := f.m.Append(-1, time.Hour, OriginClient, entries); pa != nil {
			t.Fatal("a single-replica acks=all append waits")
		}
		r := entries[0].Result
		if r.Err != nil || r.BaseOffset != int64(2*i) || r.LastOffset != int64(2*i+1) {
			t.Fatalf("append %d: %+v", i, r)
		}
	}
	if w := f.m.produceWaits.Watched(); w != 0 {
		t.Fatalf("%d produces wait in the purgatory", w)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines, %d before", n, before)
	}
	p := f.m.hosted(tp)
	if p.log.HighWatermark() != 6 {
		t.Fatalf("high watermark %d, want 6", p.log.HighWatermark())
	}
}

// With a follower in the ISR, acks=all waits until the follower's log end
// moves the high watermark; acks=1 does not.
func TestAppendAcksAllWaitsForTheISR(t *testing.T) {
	f := newFixture(t)
	f.setTopic("t", 1, led(self, 0, []int32{self, 2}, []int32{self, 2}))
	tp := TopicPartition{Topic: "t"}
	if r := f.produce(tp, 1, 3); r.Err != nil || r.BaseOffset != 0 {
		t.Fatalf("acks=1: %+v", r)
	}
	done := make(appendResults, 1)
	appendTo(f.m, -1, time.Hour, OriginClient, []AppendEntry{{TopicPartition: tp, Records: batch(t, 2, 1), LeaderEpoch: -1}}, done)
	pending(t, done)
	f.m.recordFollowerLogEnd(tp, 2, 3) // the follower has the acks=1 batch only
	pending(t, done)
	if hw := f.m.hosted(tp).log.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d, want 3", hw)
	}
	f.m.recordFollowerLogEnd(tp, 2, 5)
	if r := receive(t, done)[0].Result; r.Err != nil || r.BaseOffset != 3 {
		t.Fatalf("acks=all after the follower caught up: %+v", r)
	}
	if w := f.m.produceWaits.Watched(); w != 0 {
		t.Fatalf("%d still waiting", w)
	}
}

func TestAppendAcksAllTimesOut(t *testing.T) {
	f := newFixture(t)
	f.setTopic("t", 1, led(self, 0, []int32{self, 2}, []int32{self, 2}))
	tp := TopicPartition{Topic: "t"}
	done := make(appendResults, 1)
	appendTo(f.m, -1, 20*time.Millisecond, OriginClient, []AppendEntry{{TopicPartition: tp, Records: batch(t, 1, 1), LeaderEpoch: -1}}, done)
	if r := receive(t, done)[0].Result; r.Err != kerr.RequestTimedOut {
		t.Fatalf("at the timeout: %+v, want REQUEST_TIMED_OUT", r)
	}
}

// A waiting acks=all append fails when this node loses the leadership or
// the partition; a writer bound to an epoch also when the epoch moves.
func TestAppendAcksAllFailsOnLeadershipChange(t *testing.T) {
	tests := []struct {
		name       string
		boundEpoch int32
		change     func(f *fixture)
		want       *kerr.Error
		hint       LeaderHint
	}{
		{"another leader", -1, func(f *fixture) { f.setTopic("t", 1, led(2, 1, []int32{self, 2}, []int32{2})) }, kerr.NotLeaderForPartition, LeaderHint{2, 1}},
		{"partition deleted", -1, func(f *fixture) { f.setTopic("t", 1) }, kerr.NotLeaderForPartition, noLeaderHint},
		{"re-elected, bound writer", 0, func(f *fixture) { f.setTopic("t", 1, led(self, 1, []int32{self, 2}, []int32{self, 2})) }, kerr.NotLeaderForPartition, LeaderHint{self, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.setTopic("t", 1, led(self, 0, []int32{self, 2}, []int32{self, 2}))
			tp := TopicPartition{Topic: "t"}
			done := make(appendResults, 1)
			appendTo(f.m, -1, time.Hour, OriginClient, []AppendEntry{{TopicPartition: tp, Records: batch(t, 1, 1), LeaderEpoch: tc.boundEpoch}}, done)
			pending(t, done)
			tc.change(f)
			if r := receive(t, done)[0].Result; r.Err != tc.want || r.CurrentLeader != tc.hint {
				t.Fatalf("after the change: %+v, want %v with hint %+v", r, tc.want, tc.hint)
			}
		})
	}
	// Re-elected, not bound: the append completes once committed.
	f := newFixture(t)
	f.setTopic("t", 1, led(self, 0, []int32{self, 2}, []int32{self, 2}))
	tp := TopicPartition{Topic: "t"}
	done := make(appendResults, 1)
	appendTo(f.m, -1, time.Hour, OriginClient, []AppendEntry{{TopicPartition: tp, Records: batch(t, 1, 1), LeaderEpoch: -1}}, done)
	f.setTopic("t", 1, led(self, 1, []int32{self, 2}, []int32{self}))
	if r := receive(t, done)[0].Result; r.Err != nil {
		t.Fatalf("re-elected with a smaller ISR: %+v", r)
	}
}

// Kafka's effective min.insync.replicas: capped at the replication factor.
func TestAppendMinInsyncReplicas(t *testing.T) {
	f := newFixture(t)
	cfg := config.DefaultTopic()
	cfg.MinInsyncReplicas = 2
	f.configs["rf1"], f.configs["rf2"] = cfg, cfg
	f.setTopic("rf1", 1, solo(0))
	f.setTopic("rf2", 2, led(self, 0, []int32{self, 2}, []int32{self}))
	if r := f.produce(TopicPartition{Topic: "rf1"}, -1, 1); r.Err != nil {
		t.Fatalf("min.insync.replicas 2 on one replica: %+v (Kafka caps it at the replication factor)", r)
	}
	r := f.produce(TopicPartition{Topic: "rf2"}, -1, 1)
	if r.Err != kerr.NotEnoughReplicas || r.ErrorMessage == "" {
		t.Fatalf("ISR 1 of 2 with min.insync.replicas 2: %+v", r)
	}
	if leo := f.m.hosted(TopicPartition{Topic: "rf2"}).log.LogEndOffset(); leo != 0 {
		t.Fatalf("a refused append reached the log (end %d)", leo)
	}
	if r := f.produce(TopicPartition{Topic: "rf2"}, 1, 1); r.Err != nil {
		t.Fatalf("acks=1 under min ISR: %+v", r)
	}
	// Under the minimum the high watermark does not move.
	if hw := f.m.hosted(TopicPartition{Topic: "rf2"}).log.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d under min ISR", hw)
	}
}

// Appends from several goroutines at once (a producer on its connection,
// a coordinator on its shard): the high watermark never goes back, and
// when every append has been acknowledged it covers all of them.
func TestHighWatermarkUnderConcurrentAppends(t *testing.T) {
	f := newFixture(t)
	f.setTopic("t", 1, solo(0))
	tp := TopicPartition{Topic: "t"}
	l := f.m.hosted(tp).log
	stop := make(chan struct{})
	var readerErr error
	var readerWG sync.WaitGroup
	readerWG.Add(1)
	go func() {
		defer readerWG.Done()
		last := int64(0)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if hw := l.HighWatermark(); hw < last {
				readerErr = fmt.Errorf("high watermark went back from %d to %d", last, hw)
				return
			} else {
				last = hw
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			origin := OriginClient
			if g%2 == 1 {
				origin = OriginCoordinator
			}
			for range 50 {
				done := make(appendResults, 1)
				appendTo(f.m, -1, time.Second, origin, []AppendEntry{{TopicPartition: tp, Records: batch(t, 1, 1), LeaderEpoch: -1}}, done)
				r := receive(t, done)[0].Result
				if r.Err != nil {
					t.Errorf("append: %v", r.Err)
					return
				}
				if hw := l.HighWatermark(); hw <= r.LastOffset {
					t.Errorf("acknowledged offset %d is above the high watermark %d", r.LastOffset, hw)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readerWG.Wait()
	if readerErr != nil {
		t.Fatal(readerErr)
	}
	if l.HighWatermark() != 200 || l.LogEndOffset() != 200 {
		t.Fatalf("high watermark %d, log end %d, want 200", l.HighWatermark(), l.LogEndOffset())
	}
}

// listener records leadership events.
type listener struct {
	mu     sync.Mutex
	events []string
}

func (l *listener) BecameLeader(tp TopicPartition, epoch int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("lead %s@%d", tp, epoch))
}

func (l *listener) Resigned(tp TopicPartition) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("resign %s", tp))
}

func (l *listener) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

func TestLeadershipListeners(t *testing.T) {
	f := newFixture(t)
	f.setTopic("__internal", 1, solo(0), led(2, 0, []int32{self, 2}, []int32{self, 2}))
	f.setTopic("other", 2, solo(0))
	var l listener
	remove := f.m.AddLeadershipListener("__internal", &l)
	// Registered late: told of what this node leads already.
	if got := l.take(); !slices.Equal(got, []string{"lead __internal-0@0"}) {
		t.Fatalf("on registration: %v", got)
	}
	steps := []struct {
		parts []metadata.Partition
		want  []string
	}{
		// Nothing changed for this node: nothing to say.
		{[]metadata.Partition{solo(0), led(2, 0, []int32{self, 2}, []int32{self, 2})}, nil},
		{[]metadata.Partition{solo(1), led(self, 1, []int32{self, 2}, []int32{self, 2})}, []string{"lead __internal-0@1", "lead __internal-1@1"}},
		{[]metadata.Partition{led(2, 2, []int32{self, 2}, []int32{self, 2}), led(self, 1, []int32{self, 2}, []int32{self, 2})}, []string{"resign __internal-0"}},
		{[]metadata.Partition{led(2, 2, []int32{self, 2}, []int32{self, 2}), led(-1, 2, []int32{self, 2}, nil)}, []string{"resign __internal-1"}},
		{[]metadata.Partition{solo(3), solo(3)}, []string{"lead __internal-0@3", "lead __internal-1@3"}},
		{nil, []string{"resign __internal-0", "resign __internal-1"}},
	}
	for i, s := range steps {
		f.setTopic("__internal", 1, s.parts...)
		got := l.take()
		slices.Sort(got)
		if !slices.Equal(got, s.want) {
			t.Fatalf("step %d: %v, want %v", i, got, s.want)
		}
	}
	f.setTopic("other", 2, solo(5))
	if got := l.take(); got != nil {
		t.Fatalf("another topic's leadership reached the listener: %v", got)
	}
	remove()
	f.setTopic("__internal", 1, solo(9))
	if got := l.take(); got != nil {
		t.Fatalf("after remove: %v", got)
	}
}

// Deleted topics' logs go; a log on disk in no topic is deleted at start;
// a topic recreated under the same name does not inherit the old log.
func TestReconcileDeletesLogs(t *testing.T) {
	fs := vfs.NewMemFS()
	f := newFixtureOn(t, fs)
	f.setTopic("keep", 1, solo(0))
	f.setTopic("drop", 2, solo(0))
	f.setTopic("recreated", 3, solo(0))
	if r := f.produce(TopicPartition{Topic: "recreated"}, 1, 5); r.Err != nil {
		t.Fatal(r.Err)
	}
	f.setTopic("drop", 2)
	if _, ok := f.logs.Get(TopicPartition{Topic: "drop"}); ok || f.m.Hosts(TopicPartition{Topic: "drop"}) {
		t.Fatal("a deleted topic's log is still open")
	}
	// Same name, new ID within one image change.
	next := &metadata.Image{Offset: f.img.Offset + 1}
	for name, tp := range f.img.Topics.All() {
		if name == "recreated" {
			tp = &metadata.Topic{Name: name, ID: protocol.UUID{9}, Partitions: persist.VectorOf(solo(0))}
		}
		next.Topics, next.TopicsByID = next.Topics.Set(name, tp), next.TopicsByID.Set(tp.ID, tp)
	}
	prev := f.img
	f.img = next
	f.m.ApplyImage(prev, next)
	if leo := f.m.hosted(TopicPartition{Topic: "recreated"}).log.LogEndOffset(); leo != 0 {
		t.Fatalf("the recreated topic starts at %d: it kept the deleted topic's log", leo)
	}

	// A restart whose first image no longer has "keep": a stray log.
	f.m.Stop()
	f.logs.Close()
	g := newFixtureOn(t, fs)
	if _, ok := g.logs.Get(TopicPartition{Topic: "keep"}); ok {
		t.Fatal("open before any image")
	}
	for _, tp := range g.logs.OnDisk() {
		t.Fatalf("stray log %s survived the first image", tp)
	}
}

// AppendWait (a coordinator's append) waits with its context's deadline as
// the acks=all timeout, and returns at once when nothing has to wait.
func TestAppendWait(t *testing.T) {
	f := newFixture(t)
	f.setTopic("solo", 1, solo(0))
	f.setTopic("pair", 2, led(self, 0, []int32{self, 2}, []int32{self, 2}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	entries := []AppendEntry{{TopicPartition: TopicPartition{Topic: "solo"}, Records: batch(t, 1, 1), LeaderEpoch: 0}}
	if err := f.m.AppendWait(ctx, -1, OriginCoordinator, entries); err != nil || entries[0].Result.Err != nil || entries[0].Result.BaseOffset != 0 {
		t.Fatalf("AppendWait: %v %+v", err, entries[0].Result)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancelShort()
	entries = []AppendEntry{{TopicPartition: TopicPartition{Topic: "pair"}, Records: batch(t, 1, 1), LeaderEpoch: 0}}
	err := f.m.AppendWait(short, -1, OriginCoordinator, entries)
	if err == nil && entries[0].Result.Err != kerr.RequestTimedOut {
		t.Fatalf("past the deadline: %v %+v", err, entries[0].Result)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.m.produceWaits.Watched() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the append still waits after its deadline: %d watched", f.m.produceWaits.Watched())
		}
		time.Sleep(time.Millisecond)
	}
}
