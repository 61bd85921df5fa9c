package storage

import (
	"sync"
	"syscall"
	"time"
)

// segmentCache bounds the segments whose files are open, across every log
// of a manager. An open segment holds three descriptors (the .log and its
// two indexes) and, on the real filesystem, two memory maps. A segment
// opens its files when it is used (an append, a read, a flush, recovery)
// and stays open afterwards for the next use; the cache closes the least
// recently used ones when more than max are open, and the manager closes
// those idle for longer than the idle timeout, so that an idle partition
// costs no descriptor and no mapping (Kafka opens indexes lazily but keeps
// every .log open).
//
// A segment in use (pinned) is never closed: it is counted, and the cache
// closes others or runs over its bound until it is released. A FileRange
// handed to a fetch holds its own reference to the .log file, which
// therefore stays open for the send even when the segment is closed.
//
// Closing a file does not sync it: its dirty pages stay in the page cache,
// and the next flush reopens the segment and fsyncs it, which makes them
// durable whatever descriptor wrote them (MemFS models the same).
//
// Locking: a segment's fmu is taken before mu, never the other way round;
// eviction takes the victim out of the list under mu, releases mu, then
// locks the victim's fmu and closes it only if nobody used it meanwhile.
type segmentCache struct {
	max int

	mu sync.Mutex
	// The idle list holds the open segments nobody uses, most recently
	// released at the head; it is intrusive (segment.idlePrev/idleNext)
	// so that using a segment allocates nothing.
	head, tail *segment
	// open counts open segments, in use or idle.
	open int
}

// idleLinks is a segment's place in its cache's idle list, guarded by the
// cache's mu.
type idleLinks struct {
	prev, next *segment
	linked     bool
	since      time.Time // when it was released
}

// DefaultSegmentIdleTimeout is how long an unused segment keeps its files
// open.
const DefaultSegmentIdleTimeout = 30 * time.Second

// defaultMaxOpenSegments derives the bound from the descriptor limit: an
// eighth of it for segments (three descriptors each, the rest left for
// connections and everything else), between 32 and 16384 segments (16384
// segments are 32768 memory maps, half of Linux's default vm.max_map_count).
func defaultMaxOpenSegments() int {
	var lim syscall.Rlimit
	n := 1024
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur > 0 && lim.Cur < 1<<31 {
		n = int(lim.Cur)
	}
	return min(max(n/8/3, 32), 16384)
}

func newSegmentCache(maxOpen int) *segmentCache {
	if maxOpen <= 0 {
		maxOpen = defaultMaxOpenSegments()
	}
	return &segmentCache{max: maxOpen}
}

// opened counts a segment that just opened its files (in use).
func (c *segmentCache) opened() {
	c.mu.Lock()
	c.open++
	c.mu.Unlock()
}

// closed counts a segment that closed its files; it is not in the list.
func (c *segmentCache) closed() {
	c.mu.Lock()
	c.open--
	c.mu.Unlock()
}

// inUse takes an open segment out of the idle list; the caller holds its
// fmu.
func (c *segmentCache) inUse(s *segment) {
	c.mu.Lock()
	c.unlinkLocked(s)
	c.mu.Unlock()
}

// released puts an open segment nobody uses at the head of the idle list
// and reports whether more segments are open than the bound (the caller
// then calls evict, without the fmu). The caller holds its fmu.
func (c *segmentCache) released(s *segment, now time.Time) (over bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !s.idle.linked {
		s.idle = idleLinks{next: c.head, linked: true, since: now}
		if c.head != nil {
			c.head.idle.prev = s
		}
		c.head = s
		if c.tail == nil {
			c.tail = s
		}
	}
	return c.open > c.max
}

// evict closes idle segments, least recently used first, while more than
// max are open. The caller holds no segment's fmu.
func (c *segmentCache) evict() {
	for {
		c.mu.Lock()
		s := c.tail
		if c.open <= c.max || s == nil {
			c.mu.Unlock()
			return
		}
		c.unlinkLocked(s)
		c.mu.Unlock()
		s.closeIfIdle()
	}
}

// closeIdle closes the segments released before cutoff and returns how
// many. The caller holds no segment's fmu.
func (c *segmentCache) closeIdle(cutoff time.Time) int {
	var victims []*segment
	c.mu.Lock()
	for s := c.tail; s != nil && s.idle.since.Before(cutoff); s = c.tail {
		c.unlinkLocked(s)
		victims = append(victims, s)
	}
	c.mu.Unlock()
	n := 0
	for _, s := range victims {
		if s.closeIfIdle() {
			n++
		}
	}
	return n
}

// isIdle reports whether s is in the idle list; the caller holds s's fmu.
func (c *segmentCache) isIdle(s *segment) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.idle.linked
}

// unlinkLocked takes s out of the idle list if it is there; the caller
// holds mu.
func (c *segmentCache) unlinkLocked(s *segment) {
	if !s.idle.linked {
		return
	}
	if s.idle.prev != nil {
		s.idle.prev.idle.next = s.idle.next
	} else {
		c.head = s.idle.next
	}
	if s.idle.next != nil {
		s.idle.next.idle.prev = s.idle.prev
	} else {
		c.tail = s.idle.prev
	}
	s.idle = idleLinks{}
}

// openCount is the number of open segments (tests, metrics).
func (c *segmentCache) openCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}
