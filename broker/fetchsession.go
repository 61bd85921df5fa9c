package broker

// Incremental fetch sessions (KIP-227).
//
// A client opens a session with a full fetch (SessionId 0, epoch 0); later
// fetches name the session and the next epoch and list only the partitions
// that changed (plus ForgottenTopics), and the response carries only the
// partitions with news: records, an error, or a moved high watermark, last
// stable offset or log start offset. The cache holds at most
// max.incremental.fetch.session.cache.slots sessions; when full, the least
// recently used session idle for longer than the eviction time makes room,
// otherwise the client gets a sessionless answer (SessionId 0), which every
// client handles.
//
// Locking: fetchSessionCache.mu guards the map and every session's fields;
// a session is used by one fetch at a time (its epoch check enforces that
// for well-behaved clients, and the lock keeps a misbehaving one safe).

import (
	"math/rand/v2"
	"sync"
	"time"
)

const (
	sessionEpochInitial int32 = 0
	sessionEpochFinal   int32 = -1
	sessionEvictionIdle       = 120 * time.Second
)

// sessionKey identifies a partition in a session: by topic ID (fetch v13+)
// or by name.
type sessionKey struct {
	topicID   [16]byte
	topic     string
	partition int32
}

// sessionPartition is what the session remembers of one partition.
type sessionPartition struct {
	key               sessionKey
	fetchOffset       int64
	maxBytes          int32
	currentEpoch      int32
	lastFetchedEpoch  int32
	followerLogStart  int64
	sentHighWatermark int64
	sentLastStable    int64
	sentLogStart      int64
}

type fetchSession struct {
	id           int32
	epoch        int32 // the epoch the next request must carry
	usesTopicIDs bool
	order        []sessionKey
	parts        map[sessionKey]*sessionPartition
	lastUsed     time.Time
}

type fetchSessionCache struct {
	mu       sync.Mutex
	max      int
	sessions map[int32]*fetchSession
	now      func() time.Time
}

func newFetchSessionCache(max int, now func() time.Time) *fetchSessionCache {
	return &fetchSessionCache{max: max, sessions: map[int32]*fetchSession{}, now: now}
}

// create makes a new session, or returns nil when the cache has no room.
func (c *fetchSessionCache) create(usesTopicIDs bool) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.sessions) >= c.max {
		var lru *fetchSession
		for _, s := range c.sessions {
			if lru == nil || s.lastUsed.Before(lru.lastUsed) {
				lru = s
			}
		}
		if lru == nil || now.Sub(lru.lastUsed) < sessionEvictionIdle {
			return nil
		}
		delete(c.sessions, lru.id)
	}
	id := int32(0)
	for id == 0 || c.sessions[id] != nil {
		id = rand.Int32()
	}
	s := &fetchSession{id: id, epoch: 1, usesTopicIDs: usesTopicIDs, parts: map[sessionKey]*sessionPartition{}, lastUsed: now}
	c.sessions[id] = s
	return s
}

func (c *fetchSessionCache) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[id]
	if s != nil {
		s.lastUsed = c.now()
	}
	return s
}

func (c *fetchSessionCache) remove(id int32) {
	c.mu.Lock()
	delete(c.sessions, id)
	c.mu.Unlock()
}

// upsert adds or updates a partition, keeping insertion order for new ones.
func (s *fetchSession) upsert(p sessionPartition) {
	if cur, ok := s.parts[p.key]; ok {
		cur.fetchOffset, cur.maxBytes, cur.currentEpoch = p.fetchOffset, p.maxBytes, p.currentEpoch
		cur.lastFetchedEpoch, cur.followerLogStart = p.lastFetchedEpoch, p.followerLogStart
		return
	}
	np := p
	np.sentHighWatermark, np.sentLastStable, np.sentLogStart = -1, -1, -1
	s.parts[p.key] = &np
	s.order = append(s.order, p.key)
}

func (s *fetchSession) forget(key sessionKey) {
	if _, ok := s.parts[key]; !ok {
		return
	}
	delete(s.parts, key)
	for i, k := range s.order {
		if k == key {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}

// moveToEnd puts partitions that returned records at the end of the
// iteration order so that the others get their turn next time.
func (s *fetchSession) moveToEnd(keys map[sessionKey]bool) {
	if len(keys) == 0 {
		return
	}
	out := make([]sessionKey, 0, len(s.order))
	var moved []sessionKey
	for _, k := range s.order {
		if keys[k] {
			moved = append(moved, k)
		} else {
			out = append(out, k)
		}
	}
	s.order = append(out, moved...)
}
