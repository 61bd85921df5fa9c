package runtime

import (
	"slices"
	"sync"
)

// Shards is a coordinator's shards by partition of its internal topic:
// the map that Prepare, Load and Unload change as leadership moves and
// that requests look their shard up in. It guards only the map; each
// shard guards its own state. Its lock is held only to read or change the
// map, never while a shard's lock is taken (LOCKS.md).
type Shards[S comparable] struct {
	mu sync.RWMutex
	m  map[int32]S
}

// Get is partition's shard, if there is one.
func (s *Shards[S]) Get(partition int32) (S, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	shard, ok := s.m[partition]
	return shard, ok
}

// AddIfAbsent puts the shard made by newShard at partition unless one is
// there already (Prepare: a shard that is serving keeps serving until its
// replacement is loaded).
func (s *Shards[S]) AddIfAbsent(partition int32, newShard func() S) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[partition]; ok {
		return
	}
	if s.m == nil {
		s.m = map[int32]S{}
	}
	s.m[partition] = newShard()
}

// Replace puts shard at partition and returns the one it replaced (Load).
func (s *Shards[S]) Replace(partition int32, shard S) (old S, replaced bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, replaced = s.m[partition]
	if s.m == nil {
		s.m = map[int32]S{}
	}
	s.m[partition] = shard
	return old, replaced
}

// Remove takes partition's shard out and returns it (Unload).
func (s *Shards[S]) Remove(partition int32) (S, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	shard, ok := s.m[partition]
	delete(s.m, partition)
	return shard, ok
}

// RemoveIf takes partition's shard out only if it is still shard (a load
// that failed, unless a newer one replaced it meanwhile).
func (s *Shards[S]) RemoveIf(partition int32, shard S) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.m[partition]; ok && cur == shard {
		delete(s.m, partition)
	}
}

// All is every shard, in partition order.
func (s *Shards[S]) All() []S {
	s.mu.RLock()
	partitions := make([]int32, 0, len(s.m))
	for p := range s.m {
		partitions = append(partitions, p)
	}
	slices.Sort(partitions)
	out := make([]S, 0, len(partitions))
	for _, p := range partitions {
		out = append(out, s.m[p])
	}
	s.mu.RUnlock()
	return out
}

// ShardStatus is where a coordinator's shard is in its life.
type ShardStatus int8

const (
	// ShardLoading: this node leads the partition and replays it;
	// requests are answered COORDINATOR_LOAD_IN_PROGRESS.
	ShardLoading ShardStatus = iota
	// ShardActive: loaded, serving its keys.
	ShardActive
	// ShardFailed: the replay or a rebuild failed; not served.
	ShardFailed
	// ShardUnloaded: the leadership moved away.
	ShardUnloaded
)
