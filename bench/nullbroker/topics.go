package nullbroker

import (
	"crypto/sha256"
	"sort"
	"sync"
	"sync/atomic"
)

// topic is immutable once created except for its produce offsets.
type topic struct {
	name string
	id   [16]byte
	// next is the base offset the next produce to each partition gets.
	next []atomic.Int64
}

func (t *topic) partitions() int32 { return int32(len(t.next)) }

func (t *topic) has(partition int32) bool { return partition >= 0 && partition < t.partitions() }

// topics is the topic table. mu guards the maps, never the topics in them.
type topics struct {
	mu     sync.RWMutex
	byName map[string]*topic
	byID   map[[16]byte]*topic
}

func newTopics() *topics {
	return &topics{byName: map[string]*topic{}, byID: map[[16]byte]*topic{}}
}

// topicID is derived from the name so that it is the same on every request
// and every run; clients only need it stable and non-zero.
func topicID(name string) [16]byte {
	sum := sha256.Sum256([]byte("nullbroker topic " + name))
	var id [16]byte
	copy(id[:], sum[:])
	id[0] |= 1
	return id
}

// create adds a topic with n partitions; it returns the existing topic and
// false when the name is taken.
func (ts *topics) create(name string, n int32) (*topic, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t, ok := ts.byName[name]; ok {
		return t, false
	}
	t := &topic{name: name, id: topicID(name), next: make([]atomic.Int64, n)}
	ts.byName[name] = t
	ts.byID[t.id] = t
	return t, true
}

func (ts *topics) named(name string) *topic {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	return ts.byName[name]
}

func (ts *topics) withID(id [16]byte) *topic {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	return ts.byID[id]
}

// lookup finds a topic by id from the version on which a request names
// topics by id (idFrom), by name before it.
func (ts *topics) lookup(version, idFrom int16, name string, id [16]byte) *topic {
	if version >= idFrom {
		return ts.withID(id)
	}
	return ts.named(name)
}

// all lists every topic by name.
func (ts *topics) all() []*topic {
	ts.mu.RLock()
	out := make([]*topic, 0, len(ts.byName))
	for _, t := range ts.byName {
		out = append(out, t)
	}
	ts.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}
