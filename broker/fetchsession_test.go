package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// sessionClock is a settable clock for the cache.
type sessionClock struct{ now time.Time }

func (c *sessionClock) Now() time.Time { return c.now }

func item(topic string, partition int32, offset int64) fetchItem {
	return fetchItem{key: sessionKey{topic: topic, partition: partition}, fetchOffset: offset, maxBytes: 100, currentEpoch: -1}
}

func keysOf(items []fetchItem) []string {
	var out []string
	for _, it := range items {
		out = append(out, fmt.Sprintf("%s-%d@%d", it.key.topic, it.key.partition, it.fetchOffset))
	}
	return out
}

// Every rule of fetchSessionCache.open, one request at a time against a
// cache holding one session (id 7, next epoch 3, partitions a-0 and a-1).
func TestFetchSessionOpen(t *testing.T) {
	type want struct {
		session bool // a session in the answer
		full    bool
		items   []string
		code    int16
		cached  int // sessions in the cache afterwards
	}
	existing := []fetchItem{item("a", 0, 10), item("a", 1, 20)}
	tests := []struct {
		name string
		req  sessionRequest
		want want
	}{
		{"before v7: sessionless", sessionRequest{version: 6, id: 7, epoch: 3, items: []fetchItem{item("b", 0, 1)}},
			want{full: true, items: []string{"b-0@1"}, cached: 1}},
		{"id 0, final epoch: sessionless", sessionRequest{version: 12, id: 0, epoch: -1, items: []fetchItem{item("b", 0, 1)}},
			want{full: true, items: []string{"b-0@1"}, cached: 1}},
		{"final epoch closes the session", sessionRequest{version: 12, id: 7, epoch: -1, items: []fetchItem{item("b", 0, 1)}},
			want{full: true, items: []string{"b-0@1"}, cached: 0}},
		{"initial epoch creates a session", sessionRequest{version: 12, id: 0, epoch: 0, items: []fetchItem{item("b", 0, 1), item("b", 1, 2)}},
			want{session: true, full: true, items: []string{"b-0@1", "b-1@2"}, cached: 2}},
		{"initial epoch with an id replaces it", sessionRequest{version: 12, id: 7, epoch: 0, items: []fetchItem{item("b", 0, 1)}},
			want{session: true, full: true, items: []string{"b-0@1"}, cached: 1}},
		{"initial epoch without partitions: sessionless", sessionRequest{version: 12, id: 0, epoch: 0},
			want{full: true, cached: 1}},
		{"incremental: upsert and forget", sessionRequest{version: 12, id: 7, epoch: 3, items: []fetchItem{item("a", 1, 25), item("c", 0, 5)}, forgotten: []sessionKey{{topic: "a", partition: 0}}},
			want{session: true, items: []string{"a-1@25", "c-0@5"}, cached: 1}},
		{"incremental with nothing new reads the session", sessionRequest{version: 12, id: 7, epoch: 3},
			want{session: true, items: []string{"a-0@10", "a-1@20"}, cached: 1}},
		{"unknown session", sessionRequest{version: 12, id: 8, epoch: 3},
			want{code: kerr.FetchSessionIDNotFound.Code, cached: 1}},
		{"wrong epoch", sessionRequest{version: 12, id: 7, epoch: 4},
			want{code: kerr.InvalidFetchSessionEpoch.Code, cached: 1}},
		{"an epoch without an id", sessionRequest{version: 12, id: 0, epoch: 3},
			want{code: kerr.InvalidFetchSessionEpoch.Code, cached: 1}},
		{"topic IDs where the session used names", sessionRequest{version: 13, id: 7, epoch: 3},
			want{code: kerr.FetchSessionTopicIDError.Code, cached: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := &sessionClock{now: time.Unix(1000, 0)}
			c := newFetchSessionCache(10, clock.Now)
			s := &fetchSession{id: 7, epoch: 3, parts: map[sessionKey]*sessionPartition{}, lastUsed: clock.now}
			for _, it := range existing {
				s.upsert(it)
			}
			c.sessions[7] = s
			got, items, full, code := c.open(tc.req)
			if code != tc.want.code || (got != nil) != tc.want.session || full != tc.want.full || !slices.Equal(keysOf(items), tc.want.items) {
				t.Fatalf("session %v, items %v, full %v, code %d; want %+v", got != nil, keysOf(items), full, code, tc.want)
			}
			if len(c.sessions) != tc.want.cached {
				t.Fatalf("%d sessions cached, want %d", len(c.sessions), tc.want.cached)
			}
			if tc.want.session && !full {
				if got.epoch != 4 {
					t.Fatalf("the session's next epoch is %d, want 4", got.epoch)
				}
			}
			if tc.want.session && full && (got.id == 0 || got.epoch != 1) {
				t.Fatalf("a new session with id %d and epoch %d", got.id, got.epoch)
			}
		})
	}
}

// The epoch wraps from the largest int32 to 1 (0 means a new session).
func TestFetchSessionEpochWraps(t *testing.T) {
	if e := nextSessionEpoch(1<<31 - 1); e != 1 {
		t.Fatalf("next epoch after MaxInt32: %d", e)
	}
}

// A full cache makes room only by evicting the least recently used
// session, and only once it has been idle for the eviction time; else the
// new client gets a sessionless answer.
func TestFetchSessionEviction(t *testing.T) {
	clock := &sessionClock{now: time.Unix(1000, 0)}
	c := newFetchSessionCache(2, clock.Now)
	first := c.create(false)
	clock.now = clock.now.Add(time.Second)
	second := c.create(false)
	if first == nil || second == nil {
		t.Fatal("no room in an empty cache")
	}
	// Both recently used: no room, sessionless.
	clock.now = clock.now.Add(sessionEvictionIdle - 2*time.Second)
	s, _, full, code := c.open(sessionRequest{version: 12, epoch: 0, items: []fetchItem{item("x", 0, 0)}})
	if s != nil || !full || code != 0 {
		t.Fatalf("with a full cache of busy sessions: session %v, full %v, code %d; want a sessionless full answer", s, full, code)
	}
	// Using the first session makes the second the least recently used.
	if c.get(first.id) == nil {
		t.Fatal("the first session is gone")
	}
	clock.now = clock.now.Add(3 * time.Second) // second idle > eviction time, first not
	third := c.create(false)
	if third == nil {
		t.Fatal("an idle session was not evicted")
	}
	if c.get(second.id) != nil || c.get(first.id) == nil {
		t.Fatal("evicted the wrong session")
	}
}

// respond includes every partition of a full answer and, incrementally,
// only those with news; partitions that returned records go last.
func TestFetchSessionRespond(t *testing.T) {
	c := newFetchSessionCache(10, time.Now)
	s, items, full, _ := c.open(sessionRequest{version: 12, epoch: 0, items: []fetchItem{item("a", 0, 0), item("a", 1, 0), item("a", 2, 0)}})
	res := func(hw int64, records int64, code int16) fetchPartitionResult {
		pr := newFetchPartitionResult(0)
		pr.highWatermark, pr.lastStableOffset, pr.logStartOffset, pr.errorCode = hw, hw, 0, code
		pr.records = vfs.FileRange{Size: records}
		return pr
	}
	include := c.respond(s, full, items, []fetchPartitionResult{res(5, 0, 0), res(5, 0, 0), res(5, 0, 0)}, true)
	if !slices.Equal(include, []bool{true, true, true}) {
		t.Fatalf("a full answer includes %v", include)
	}
	// Incremental: a-0 unchanged, a-1 has records, a-2 a new high watermark.
	s, items, full, _ = c.open(sessionRequest{version: 12, id: s.id, epoch: s.epoch})
	include = c.respond(s, full, items, []fetchPartitionResult{res(5, 0, 0), res(5, 10, 0), res(6, 0, 0)}, true)
	if !slices.Equal(include, []bool{false, true, true}) {
		t.Fatalf("an incremental answer includes %v, want only the changed partitions", include)
	}
	if got := keysOf(func() []fetchItem {
		_, items, _, _ := c.open(sessionRequest{version: 12, id: s.id, epoch: s.epoch})
		return items
	}()); !slices.Equal(got, []string{"a-0@0", "a-2@0", "a-1@0"}) {
		t.Fatalf("order after a-1 returned records: %v", got)
	}
	// An error is news even when nothing else moved.
	include = c.respond(s, false, []fetchItem{item("a", 0, 0)}, []fetchPartitionResult{res(5, 0, kerr.NotLeaderForPartition.Code)}, true)
	if !include[0] {
		t.Fatal("an error was left out")
	}
}

// Partitions that returned records go to the end in the order they had,
// whether the fetch's items still follow the session's order (one pass in
// place) or a concurrent request reordered it (the set).
func TestFetchSessionMoveToEnd(t *testing.T) {
	keys := func(names ...string) []sessionKey {
		var out []sessionKey
		for _, n := range names {
			out = append(out, sessionKey{topic: n[:1], partition: int32(n[1] - '0')})
		}
		return out
	}
	for _, tc := range []struct {
		moved []string
		want  []string
	}{
		{[]string{"a1"}, []string{"a0", "a2", "b0", "b1", "a1"}},
		{[]string{"a1", "b0"}, []string{"a0", "a2", "b1", "a1", "b0"}},
		{[]string{"a0", "b1"}, []string{"a1", "a2", "b0", "a0", "b1"}},
		{[]string{"a0", "a1", "a2", "b0", "b1"}, []string{"a0", "a1", "a2", "b0", "b1"}},
		{[]string{"b0", "a1"}, []string{"a0", "a2", "b1", "a1", "b0"}}, // out of order: the set
		{[]string{"c9"}, []string{"a0", "a1", "a2", "b0", "b1"}},       // not in the session
		{nil, []string{"a0", "a1", "a2", "b0", "b1"}},
	} {
		s := &fetchSession{order: keys("a0", "a1", "a2", "b0", "b1")}
		s.moveToEnd(keys(tc.moved...))
		if !slices.Equal(s.order, keys(tc.want...)) {
			t.Errorf("moving %v: order %v, want %v", tc.moved, s.order, keys(tc.want...))
		}
	}
}
