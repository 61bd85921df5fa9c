package group

import (
	"sync"
	"testing"
	"time"
)

// groupConfigTable is a GroupConfigs lookup whose entries a test changes
// between heartbeats, as committed GROUP configs change the image.
type groupConfigTable struct {
	mu sync.Mutex
	m  map[string]DynamicConfig
}

func (g *groupConfigTable) lookup(id string) (DynamicConfig, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	d, ok := g.m[id]
	return d, ok
}

func (g *groupConfigTable) set(id string, d *DynamicConfig) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if d == nil {
		delete(g.m, id)
		return
	}
	g.m[id] = *d
}

// A consumer-protocol member is told the group's heartbeat interval and
// kept for the group's session timeout from its next heartbeat on, as in
// Kafka's GroupMetadataManager; other groups keep the broker's settings,
// and removing the group's configs brings the broker's back.
func TestConsumerGroupFollowsGroupConfig(t *testing.T) {
	table := &groupConfigTable{m: map[string]DynamicConfig{}}
	h := newHarness(t, func(c *Config) { c.GroupConfigs = table.lookup })
	a := newKip("cg-configured", "a", "foo")
	o := newKip("cg-other", "o", "foo")
	if r := h.hb(a, true); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("before any group config: %+v", r)
	}
	h.hb(o, true)

	table.set(a.group, &DynamicConfig{ConsumerSessionTimeoutMs: 55000, ConsumerHeartbeatIntervalMs: 6000})
	if r := h.hb(a, false); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 6000 {
		t.Fatalf("after the group config: %+v", r)
	}
	if r := h.hb(o, false); r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("another group's interval changed: %+v", r)
	}

	// Past the broker's 45s the other group's member is gone; the
	// configured one lasts its group's 55s.
	h.advance(50 * time.Second)
	if d := h.describeConsumer(o.group); len(d.Members) != 0 {
		t.Fatalf("member of the other group outlived the broker's session timeout: %+v", d.Members)
	}
	if d := h.describeConsumer(a.group); len(d.Members) != 1 {
		t.Fatalf("member fenced before its group's session timeout: %+v", d.Members)
	}
	h.advance(6 * time.Second)
	if d := h.describeConsumer(a.group); len(d.Members) != 0 {
		t.Fatalf("member outlived its group's session timeout: %+v", d.Members)
	}

	// A new member after the configs are removed gets the broker's values.
	table.set(a.group, nil)
	b := newKip(a.group, "b", "foo")
	if r := h.hb(b, true); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("after removing the group config: %+v", r)
	}
	h.advance(46 * time.Second)
	if d := h.describeConsumer(a.group); len(d.Members) != 0 {
		t.Fatalf("member outlived the broker's session timeout: %+v", d.Members)
	}
}
