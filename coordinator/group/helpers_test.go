package group

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/coordinator/runtime/runtimetest"
	"github.com/gregorbroker/gregor/protocol"
)

// memLog is an in-memory PartitionLog.
type memLog struct{ runtimetest.MemLog }

func (l *memLog) setFail(err error) { l.Fail(err) }

func (l *memLog) records(t *testing.T) []record {
	t.Helper()
	var out []record
	err := l.ReadFrom(context.Background(), 0, func(b []byte) error {
		return decodeBatch(b, func(h protocol.BatchHeader, _ int64, r record) error {
			if h.IsControl() {
				return nil // transaction markers are not group records
			}
			out = append(out, record{key: append([]byte(nil), r.key...), value: append([]byte(nil), r.value...)})
			if r.value == nil {
				out[len(out)-1].value = nil
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var errInjected = errors.New("injected append failure")

// fakeTopics is a TopicView over a fixed map.
type fakeTopics struct {
	mu     sync.Mutex
	byName map[string]TopicInfo
}

func newFakeTopics(topics map[string]int32) *fakeTopics {
	ft := &fakeTopics{byName: map[string]TopicInfo{}}
	for name, n := range topics {
		ft.add(name, n)
	}
	return ft
}

func (f *fakeTopics) add(name string, partitions int32) TopicInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	var id [16]byte
	copy(id[:], name)
	id[15] = 0x7f
	info := TopicInfo{Name: name, ID: id, Partitions: partitions}
	f.byName[name] = info
	return info
}

func (f *fakeTopics) TopicByName(name string) (TopicInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.byName[name]
	return t, ok
}

func (f *fakeTopics) TopicByID(id [16]byte) (TopicInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.byName {
		if t.ID == id {
			return t, true
		}
	}
	return TopicInfo{}, false
}

func (f *fakeTopics) TopicNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// harness is a coordinator over in-memory partitions with a fake clock.
type harness struct {
	t      testing.TB
	c      *Coordinator
	cfg    Config
	clock  *fakeClock
	topics *fakeTopics
	logs   map[int32]*memLog
}

func newHarness(t testing.TB, tweak func(*Config)) *harness {
	t.Helper()
	cfg := DefaultConfig()
	cfg.OffsetsTopicNumPartitions = 3
	cfg.InitialRebalanceDelayMs = 0
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg.Now = clock.Now
	if tweak != nil {
		tweak(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, cfg: cfg, clock: clock, logs: map[int32]*memLog{},
		topics: newFakeTopics(map[string]int32{"foo": 6, "bar": 4, "baz": 3})}
	h.c = New(cfg, h.topics)
	for p := int32(0); p < cfg.OffsetsTopicNumPartitions; p++ {
		h.logs[p] = &memLog{}
		if err := h.c.Load(context.Background(), p, h.logs[p]); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// reload builds a fresh coordinator over the same logs (a restart).
func (h *harness) reload() *Coordinator {
	h.t.Helper()
	c := New(h.cfg, h.topics)
	for p, l := range h.logs {
		if err := c.Load(context.Background(), p, l); err != nil {
			h.t.Fatal(err)
		}
	}
	return c
}

func (h *harness) advance(d time.Duration) {
	h.clock.Advance(d)
	h.c.Tick(context.Background())
}

func (h *harness) logFor(group string) *memLog { return h.logs[h.c.PartitionFor(group)] }
