package txn

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
)

// memLog is a PartitionLog in memory: appends commit at once unless
// failNext is set.
type memLog struct {
	mu       sync.Mutex
	epoch    int32
	batches  [][]byte
	failNext error
}

func (l *memLog) Append(ctx context.Context, batch []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.failNext; err != nil {
		l.failNext = nil
		return 0, err
	}
	h, err := protocol.ParseBatchHeader(batch)
	if err != nil {
		return 0, err
	}
	base := int64(0)
	for _, b := range l.batches {
		bh, _ := protocol.ParseBatchHeader(b)
		base = bh.LastOffset() + 1
	}
	b := append([]byte(nil), batch...)
	protocol.SetBaseOffset(b, base)
	_ = h
	l.batches = append(l.batches, b)
	return base, nil
}

func (l *memLog) ReadFrom(ctx context.Context, offset int64, fn func(batch []byte) error) error {
	l.mu.Lock()
	batches := append([][]byte(nil), l.batches...)
	l.mu.Unlock()
	for _, b := range batches {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

func (l *memLog) LeaderEpoch() int32 { return l.epoch }

// records decodes every record of the log: transactional id and state
// (nil for a tombstone).
func (l *memLog) records(t *testing.T) (ids []string, states []*txnState) {
	t.Helper()
	var scratch []byte
	err := l.ReadFrom(context.Background(), 0, func(b []byte) error {
		return replayBatch(b, &scratch, func(key, value []byte) error {
			id, _, err := decodeKey(key)
			if err != nil {
				return err
			}
			ids = append(ids, id)
			if value == nil {
				states = append(states, nil)
				return nil
			}
			st, err := decodeValue(value)
			states = append(states, &st)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids, states
}

// fakeMarkers records the markers asked for and answers with codes from
// answer (nil: success everywhere).
type fakeMarkers struct {
	mu      sync.Mutex
	written []Marker
	answer  func(tp TopicPartition) int16
	calls   chan struct{}
}

func (f *fakeMarkers) WriteMarkers(ctx context.Context, m Marker) []int16 {
	f.mu.Lock()
	codes := make([]int16, len(m.Partitions))
	var ok []TopicPartition
	for i, tp := range m.Partitions {
		if f.answer != nil {
			codes[i] = f.answer(tp)
		}
		if codes[i] == 0 {
			ok = append(ok, tp)
		}
	}
	if len(ok) > 0 {
		w := m
		w.Partitions = ok
		f.written = append(f.written, w)
	}
	f.mu.Unlock()
	select {
	case f.calls <- struct{}{}:
	default:
	}
	return codes
}

func (f *fakeMarkers) markers() []Marker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Marker(nil), f.written...)
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// env is a coordinator with one partition loaded on a memLog.
type env struct {
	t       *testing.T
	c       *Coordinator
	log     *memLog
	markers *fakeMarkers
	clock   *clock
	nextPID int64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, log: &memLog{epoch: 3}, markers: &fakeMarkers{calls: make(chan struct{}, 64)}, clock: &clock{now: time.UnixMilli(1_700_000_000_000)}, nextPID: 1000}
	cfg := DefaultConfig()
	cfg.NumPartitions = 1
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Now = e.clock.Now
	e.c = New(Options{Config: cfg, Markers: e.markers, ProducerIDs: func(context.Context) (int64, error) {
		e.nextPID++
		return e.nextPID, nil
	}})
	e.load()
	t.Cleanup(func() { e.c.Unload(0) })
	return e
}

// load (re)loads partition 0 from the log, as a new leader would.
func (e *env) load() {
	e.t.Helper()
	e.c.Prepare(0)
	if err := e.c.Load(context.Background(), 0, e.log); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) init(id string) (int64, int16) {
	e.t.Helper()
	pid, epoch, code := e.c.InitProducerID(context.Background(), id, 60000, -1, -1)
	if code != 0 {
		e.t.Fatalf("InitProducerId %s: %v", id, kerr.ErrorForCode(code))
	}
	return pid, epoch
}

func (e *env) add(id string, pid int64, epoch int16, tps ...TopicPartition) {
	e.t.Helper()
	if code := e.c.AddPartitions(context.Background(), id, pid, epoch, tps); code != 0 {
		e.t.Fatalf("AddPartitions %s: %v", id, kerr.ErrorForCode(code))
	}
}

// waitState waits until id reaches state (markers run on goroutines).
func (e *env) waitState(id string, want State) Description {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, code := e.c.Describe(id)
		if code == 0 && d.State == want.String() {
			return d
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: state %s (error %v), want %s", id, d.State, kerr.ErrorForCode(code), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func tp(topic string, p int32) TopicPartition { return TopicPartition{Topic: topic, Partition: p} }

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return fmt.Sprint(kerr.ErrorForCode(code))
}
