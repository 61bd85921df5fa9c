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
// open resolves a fetch's session and the partitions it reads; respond
// records what the answer told the client and picks the partitions an
// incremental answer carries. Everything a session is lives in this file.
//
// Locking: fetchSessionCache.mu guards the map and every session's fields;
// a session is used by one fetch at a time (its epoch check enforces that
// for well-behaved clients, and the lock keeps a misbehaving one safe). It
// is a leaf lock (LOCKS.md): nothing is called while holding it.

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/metrics"
	"github.com/twmb/franz-go/pkg/kerr"
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

// newSessionKey is a request partition's key: by topic ID from fetch v13,
// by name before.
func newSessionKey(version int16, topic string, id [16]byte, partition int32) sessionKey {
	if version >= 13 {
		return sessionKey{topicID: id, partition: partition}
	}
	return sessionKey{topic: topic, partition: partition}
}

// fetchItem is one partition to read in a fetch.
type fetchItem struct {
	key          sessionKey
	fetchOffset  int64
	maxBytes     int32
	currentEpoch int32
	// lastFetchedEpoch is the fetcher's last epoch (v12+; -1: none).
	lastFetchedEpoch int32
	// logStartOffset is a follower's log start (v5+; -1: none).
	logStartOffset int64
}

// sessionRequest is what a fetch says about its session: the session id
// and epoch, its partitions (all of them for a full fetch, the changed
// ones for an incremental one) and the partitions it forgets.
type sessionRequest struct {
	version   int16
	id        int32
	epoch     int32
	items     []fetchItem
	forgotten []sessionKey
}

// open resolves a fetch's session as Kafka's FetchManager.newContext does
// and returns the partitions to read, whether the answer is full (every
// partition) or incremental, and the session (nil: sessionless). Its
// rules:
//   - before v7, or id 0 with the final epoch: a sessionless full fetch;
//   - the final epoch (-1) with an id: that session closes, and the fetch
//     is sessionless and full;
//   - the initial epoch (0): a new session with the request's partitions
//     (a previous one named by id closes), full; no partitions, or a full
//     cache (see create), means a sessionless answer instead;
//   - any other epoch: the named session, which must exist
//     (FETCH_SESSION_ID_NOT_FOUND), expect exactly that epoch
//     (INVALID_FETCH_SESSION_EPOCH) and use topic IDs as the request does
//     (FETCH_SESSION_TOPIC_ID_ERROR); its partitions are updated, the
//     forgotten ones dropped, its epoch advanced, and every partition it
//     holds is read, incrementally. Id 0 with such an epoch is
//     INVALID_FETCH_SESSION_EPOCH.
func (c *fetchSessionCache) open(req sessionRequest) (s *fetchSession, items []fetchItem, full bool, errCode int16) {
	useIDs := req.version >= 13
	switch {
	case req.version < 7 || (req.id == 0 && req.epoch == sessionEpochFinal):
		return nil, req.items, true, 0
	case req.epoch == sessionEpochFinal:
		c.remove(req.id)
		return nil, req.items, true, 0
	case req.epoch == sessionEpochInitial:
		if req.id != 0 {
			c.remove(req.id)
		}
		if len(req.items) == 0 {
			return nil, req.items, true, 0
		}
		s = c.create(useIDs)
		if s == nil {
			return nil, req.items, true, 0 // no room: sessionless
		}
		c.mu.Lock()
		for _, it := range req.items {
			s.upsert(it)
		}
		c.mu.Unlock()
		return s, req.items, true, 0
	case req.id == 0:
		return nil, nil, false, kerr.InvalidFetchSessionEpoch.Code
	}
	s = c.get(req.id)
	if s == nil {
		return nil, nil, false, kerr.FetchSessionIDNotFound.Code
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.epoch != req.epoch {
		return nil, nil, false, kerr.InvalidFetchSessionEpoch.Code
	}
	if s.usesTopicIDs != useIDs {
		return nil, nil, false, kerr.FetchSessionTopicIDError.Code
	}
	for _, it := range req.items {
		s.upsert(it)
	}
	for _, k := range req.forgotten {
		s.forget(k)
	}
	s.epoch = nextSessionEpoch(s.epoch)
	items = make([]fetchItem, 0, len(s.order))
	for _, k := range s.order {
		sp := s.parts[k]
		items = append(items, fetchItem{key: k, fetchOffset: sp.fetchOffset, maxBytes: sp.maxBytes, currentEpoch: sp.currentEpoch, lastFetchedEpoch: sp.lastFetchedEpoch, logStartOffset: sp.logStartOffset})
	}
	return s, items, false, 0
}

func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// respond records in the session what the answer tells the client and
// returns which items it includes: all of a full answer, and of an
// incremental one only the partitions with news (records, an error, a
// leader hint, or a high watermark, last stable offset or log start offset
// that differs from what the client was last told). Partitions that
// returned records move to the end of the session's order, so that the
// others get the response's byte budget first next time.
func (c *fetchSessionCache) respond(s *fetchSession, full bool, items []fetchItem, results []fetchPartitionResult, commit bool) []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	include := make([]bool, len(items))
	var movedBuf [4]sessionKey
	moved := movedBuf[:0]
	for i, it := range items {
		pr := &results[i]
		sp := s.parts[it.key]
		if sp == nil { // forgotten meanwhile by a concurrent request
			continue
		}
		changed := full || pr.records.Size > 0 || pr.errorCode != 0 ||
			pr.highWatermark != sp.sentHighWatermark || pr.lastStableOffset != sp.sentLastStable ||
			pr.logStartOffset != sp.sentLogStart || pr.currentLeaderID != -1
		include[i] = changed
		if !commit {
			continue
		}
		if changed {
			sp.sentHighWatermark, sp.sentLastStable, sp.sentLogStart = pr.highWatermark, pr.lastStableOffset, pr.logStartOffset
		}
		if pr.records.Size > 0 && !full {
			moved = append(moved, it.key)
		}
	}
	s.moveToEnd(moved)
	return include
}

// sessionPartition is what the session remembers of one partition.
type sessionPartition struct {
	fetchOffset      int64
	maxBytes         int32
	currentEpoch     int32
	lastFetchedEpoch int32
	logStartOffset   int64
	// What the client was last told (-1: nothing yet).
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
	// evictions counts the sessions evicted for room
	// (IncrementalFetchSessionEvictionsPerSec).
	evictions metrics.Counter
}

// counts is how many sessions the cache holds and how many partitions
// they hold (the FetchSessionCache gauges).
func (c *fetchSessionCache) counts() (sessions, partitions int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sessions {
		partitions += len(s.parts)
	}
	return len(c.sessions), partitions
}

// registerMetrics registers Kafka's FetchSessionCache metrics.
func (c *fetchSessionCache) registerMetrics(r *metrics.Registry) {
	var sessions, partitions int
	r.OnScrape(func() { sessions, partitions = c.counts() })
	r.Gauge(metrics.NumIncrementalFetchSessions, func() float64 { return float64(sessions) })
	r.Gauge(metrics.NumIncrementalFetchPartitionsCached, func() float64 { return float64(partitions) })
	r.RegisterCounter(metrics.IncrementalFetchSessionEvictions, &c.evictions)
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
		c.evictions.Inc()
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

// upsert adds or updates a partition, keeping insertion order for new
// ones. The caller holds the cache's mu.
func (s *fetchSession) upsert(it fetchItem) {
	if cur, ok := s.parts[it.key]; ok {
		cur.fetchOffset, cur.maxBytes, cur.currentEpoch, cur.lastFetchedEpoch, cur.logStartOffset = it.fetchOffset, it.maxBytes, it.currentEpoch, it.lastFetchedEpoch, it.logStartOffset
		return
	}
	s.parts[it.key] = &sessionPartition{
		fetchOffset: it.fetchOffset, maxBytes: it.maxBytes, currentEpoch: it.currentEpoch, lastFetchedEpoch: it.lastFetchedEpoch, logStartOffset: it.logStartOffset,
		sentHighWatermark: -1, sentLastStable: -1, sentLogStart: -1,
	}
	s.order = append(s.order, it.key)
}

// forget drops a partition; the caller holds the cache's mu.
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
// iteration order, in the order they had, so that the others get their
// turn next time; the caller holds the cache's mu. moved comes from a
// fetch's items, which follow the session's order: one pass over the order
// meets them in turn and moves them in place. When it does not (a
// concurrent request on the session reordered it meanwhile), a set of the
// moved keys does it instead.
func (s *fetchSession) moveToEnd(moved []sessionKey) {
	if len(moved) == 0 {
		return
	}
	j := 0
	for _, k := range s.order {
		if j < len(moved) && k == moved[j] {
			j++
		}
	}
	if j < len(moved) {
		s.moveSetToEnd(moved)
		return
	}
	kept, j := 0, 0
	for _, k := range s.order {
		if j < len(moved) && k == moved[j] {
			j++
			continue
		}
		s.order[kept] = k
		kept++
	}
	s.order = append(s.order[:kept], moved...)
}

// moveSetToEnd is moveToEnd for keys in any order.
func (s *fetchSession) moveSetToEnd(moved []sessionKey) {
	set := make(map[sessionKey]bool, len(moved))
	for _, k := range moved {
		set[k] = true
	}
	out := make([]sessionKey, 0, len(s.order))
	var last []sessionKey
	for _, k := range s.order {
		if set[k] {
			last = append(last, k)
		} else {
			out = append(out, k)
		}
	}
	s.order = append(out, last...)
}
