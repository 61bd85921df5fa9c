package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const testTopic = "__test_state"

// fakeReplicas is a replica layer holding one topic's partitions in memory.
type fakeReplicas struct {
	mu       sync.Mutex
	listener replica.LeadershipListener
	removed  bool
	// appends records every Append; answer decides its result (nil:
	// success at the next offset).
	appends []fakeAppend
	answer  func(e replica.AppendEntry) *kerr.Error
	// hold, when set, keeps appends waiting until their context ends.
	hold    bool
	batches map[int32][][]byte // appended batches per partition
}

type fakeAppend struct {
	acks   int16
	origin replica.Origin
	entry  replica.AppendEntry
}

func (f *fakeReplicas) AddLeadershipListener(topic string, l replica.LeadershipListener) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if topic != testTopic {
		panic("listener for " + topic)
	}
	f.listener = l
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.removed = true
	}
}

func (f *fakeReplicas) AppendWait(ctx context.Context, acks int16, origin replica.Origin, entries []replica.AppendEntry) error {
	f.mu.Lock()
	e := entries[0]
	f.appends = append(f.appends, fakeAppend{acks, origin, e})
	if f.hold {
		f.mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	}
	defer f.mu.Unlock()
	var ke *kerr.Error
	if f.answer != nil {
		ke = f.answer(e)
	}
	if ke != nil {
		entries[0].Result = replica.AppendResult{Err: ke, BaseOffset: -1}
		return nil
	}
	p := e.TopicPartition.Partition
	entries[0].Result = replica.AppendResult{BaseOffset: int64(len(f.batches[p]))}
	f.batches[p] = append(f.batches[p], e.Records)
	return nil
}

// ReadForLoad has nothing to replay (ReadFrom is tested over the real
// replica layer in group_test.go).
func (f *fakeReplicas) DeleteRecords(replica.TopicPartition, int64) (int64, *kerr.Error, string) {
	return 0, nil, ""
}

func (f *fakeReplicas) ReadForLoad(replica.TopicPartition, int64, int32) ([]byte, error) {
	return nil, nil
}

func (f *fakeReplicas) lead(p, epoch int32) {
	f.listener.BecameLeader(replica.TopicPartition{Topic: testTopic, Partition: p}, epoch)
}

func (f *fakeReplicas) resign(p int32) {
	f.listener.Resigned(replica.TopicPartition{Topic: testTopic, Partition: p})
}

// fakeCoordinator records loads and unloads; a load blocks while gate is
// set until released.
type fakeCoordinator struct {
	mu     sync.Mutex
	events []string
	logs   map[int32]PartitionLog
	gate   chan struct{}
	ran    atomic.Bool
	// prepared are the partitions Prepare was called for, in order.
	prepared []int32
}

func (c *fakeCoordinator) Prepare(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prepared = append(c.prepared, p)
}

func (c *fakeCoordinator) Load(ctx context.Context, p int32, log PartitionLog) error {
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pl := log.(*partitionLog)
	c.events = append(c.events, fmt.Sprintf("load %d@%d", p, pl.epoch))
	if c.logs == nil {
		c.logs = map[int32]PartitionLog{}
	}
	c.logs[p] = log
	return nil
}

func (c *fakeCoordinator) Unload(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, fmt.Sprintf("unload %d", p))
	delete(c.logs, p)
}

func (c *fakeCoordinator) Run(ctx context.Context) {
	c.ran.Store(true)
	<-ctx.Done()
}

func (c *fakeCoordinator) waitEvents(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		got := slices.Clone(c.events)
		c.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %v, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func startTest(t *testing.T, create func(context.Context, kmsg.CreateTopicsRequestTopic) error) (*Runtime, *fakeReplicas, *fakeCoordinator) {
	t.Helper()
	f := &fakeReplicas{batches: map[int32][][]byte{}}
	c := &fakeCoordinator{}
	if create == nil {
		create = func(context.Context, kmsg.CreateTopicsRequestTopic) error { return nil }
	}
	rt := Start(context.Background(), Options{
		Topic:       TopicSpec{Name: testTopic, Partitions: 3, ReplicationFactor: 1, Configs: [][2]string{{"cleanup.policy", "compact"}}},
		Coordinator: c,
		Replicas:    f,
		CreateTopic: create,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	t.Cleanup(rt.Stop)
	return rt, f, c
}

// Loads and unloads follow leadership in order per partition, even when a
// load is slow; a re-election with a new epoch loads again; Stop unloads
// what is loaded and ends Run.
func TestLoadsAndUnloadsFollowLeadership(t *testing.T) {
	rt, f, c := startTest(t, nil)
	gate := make(chan struct{})
	c.mu.Lock()
	c.gate = gate
	c.mu.Unlock()
	f.lead(0, 1)
	f.resign(0)
	f.lead(0, 2)
	f.lead(0, 2) // told again: nothing new
	f.lead(1, 1)
	f.resign(2) // never led: nothing to unload
	// Prepare ran synchronously with each new leadership, while the loads
	// still wait behind the gate.
	c.mu.Lock()
	prepared := slices.Clone(c.prepared)
	c.mu.Unlock()
	if want := []int32{0, 0, 1}; !slices.Equal(prepared, want) {
		t.Fatalf("prepared %v before any load ran, want %v", prepared, want)
	}
	close(gate)
	got := c.waitEvents(t, 4)
	var p0 []string
	for _, e := range got {
		if strings.HasPrefix(e, "load 0@") || e == "unload 0" {
			p0 = append(p0, e)
		}
	}
	if want := []string{"load 0@1", "unload 0", "load 0@2"}; !slices.Equal(p0, want) {
		t.Fatalf("partition 0 saw %v, want %v (all: %v)", p0, want, got)
	}
	if !slices.Contains(got, "load 1@1") || len(got) != 4 {
		t.Fatalf("events %v", got)
	}
	if !c.ran.Load() {
		t.Fatal("the coordinator's Run did not start")
	}
	rt.Stop()
	got = c.waitEvents(t, 6)
	slices.Sort(got[4:])
	if want := []string{"unload 0", "unload 1"}; !slices.Equal(got[4:], want) {
		t.Fatalf("after Stop: %v", got)
	}
	f.mu.Lock()
	removed := f.removed
	f.mu.Unlock()
	if !removed {
		t.Fatal("Stop left the leadership listener registered")
	}
	f.lead(2, 1) // a late call after Stop does nothing
	if got := c.waitEvents(t, 6); len(got) != 6 {
		t.Fatalf("after Stop: %v", got)
	}
}

// The PartitionLog appends with acks=all as a coordinator, bound to the
// leader epoch it was loaded at, and maps refusals to errors.
func TestPartitionLogAppend(t *testing.T) {
	_, f, c := startTest(t, nil)
	f.lead(1, 7)
	c.waitEvents(t, 1)
	log := c.logs[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if base, err := log.Append(ctx, []byte("batch")); err != nil || base != 0 {
		t.Fatalf("Append: %d %v", base, err)
	}
	a := f.appends[0]
	if a.acks != -1 || a.origin != replica.OriginCoordinator || a.entry.LeaderEpoch != 7 || a.entry.TopicPartition != (replica.TopicPartition{Topic: testTopic, Partition: 1}) {
		t.Fatalf("appended as %+v", a)
	}
	f.answer = func(replica.AppendEntry) *kerr.Error { return kerr.NotLeaderForPartition }
	if _, err := log.Append(ctx, []byte("b")); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("refused: %v", err)
	}
	// A context that ends while the append waits.
	f.answer, f.hold = nil, true
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if _, err := log.Append(short, []byte("b")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after the deadline: %v", err)
	}
}

func TestEnsureTopicCreatesOnce(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	var got kmsg.CreateTopicsRequestTopic
	rt, _, _ := startTest(t, func(ctx context.Context, topic kmsg.CreateTopicsRequestTopic) error {
		calls.Add(1)
		got = topic
		<-release
		return errors.New("refused")
	})
	for range 10 {
		rt.EnsureTopic()
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for rt.creating.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the creation never finished")
		}
		time.Sleep(time.Millisecond)
	}
	if calls.Load() != 1 {
		t.Fatalf("%d creations for 10 concurrent requests", calls.Load())
	}
	if got.Topic != testTopic || got.NumPartitions != 3 || got.ReplicationFactor != 1 || len(got.Configs) != 1 || *got.Configs[0].Value != "compact" {
		t.Fatalf("created as %+v", got)
	}
	// A failed creation is retried by the next request.
	rt.EnsureTopic()
	deadline = time.Now().Add(5 * time.Second)
	for calls.Load() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no retry of the failed creation: %d creations, want 2", calls.Load())
		}
		time.Sleep(time.Millisecond)
	}
}
