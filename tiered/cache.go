package tiered

import (
	"container/list"
	"sync"
)

// chunkSize is the unit remote segment files are read and cached in: a
// fetch reads whole chunks (one ranged GET each), and a consumer reading
// on sequentially finds the next chunk read ahead.
const chunkSize = 1 << 20

// cacheKey names a cached object: a chunk of a segment's log file
// (suffix suffixLog, chunk its index) or a whole index (chunk 0).
type cacheKey struct {
	segment [16]byte
	suffix  string
	chunk   int64
}

// cache is an LRU of remote bytes bounded by their total size. Entries
// are immutable (remote objects never change), so readers keep slices of
// them after the lock is released. mu is a leaf.
type cache struct {
	limit int64

	mu    sync.Mutex
	size  int64
	lru   *list.List // of *cacheEntry, most recent first
	items map[cacheKey]*list.Element
	// loading are the keys being read (read-ahead and readers meet
	// there instead of reading twice): closed when done.
	loading map[cacheKey]chan struct{}
}

type cacheEntry struct {
	key  cacheKey
	data []byte
}

func newCache(limit int64) *cache {
	return &cache{limit: limit, lru: list.New(), items: map[cacheKey]*list.Element{}, loading: map[cacheKey]chan struct{}{}}
}

func (c *cache) get(k cacheKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*cacheEntry).data, true
	}
	return nil, false
}

func (c *cache) put(k cacheKey, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.lru.MoveToFront(e)
		return
	}
	c.items[k] = c.lru.PushFront(&cacheEntry{key: k, data: data})
	c.size += int64(len(data))
	for c.size > c.limit && c.lru.Len() > 1 {
		last := c.lru.Back()
		ent := last.Value.(*cacheEntry)
		c.lru.Remove(last)
		delete(c.items, ent.key)
		c.size -= int64(len(ent.data))
	}
}

// load returns k's bytes from the cache or from read, once: concurrent
// loads of one key wait for the first.
func (c *cache) load(k cacheKey, read func() ([]byte, error)) ([]byte, error) {
	for {
		if b, ok := c.get(k); ok {
			return b, nil
		}
		c.mu.Lock()
		if ch, ok := c.loading[k]; ok {
			c.mu.Unlock()
			<-ch
			continue
		}
		ch := make(chan struct{})
		c.loading[k] = ch
		c.mu.Unlock()
		b, err := read()
		if err == nil {
			c.put(k, b)
		}
		c.mu.Lock()
		delete(c.loading, k)
		c.mu.Unlock()
		close(ch)
		return b, err
	}
}

// cached reports whether k is cached or being loaded.
func (c *cache) cached(k cacheKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.items[k]
	_, loading := c.loading[k]
	return ok || loading
}

// dropSegment forgets a deleted segment's entries.
func (c *cache) dropSegment(id [16]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.items {
		if k.segment == id {
			c.lru.Remove(e)
			delete(c.items, k)
			c.size -= int64(len(e.Value.(*cacheEntry).data))
		}
	}
}
