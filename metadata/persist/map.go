// Package persist holds the persistent (immutable, structure-sharing)
// collections the metadata image is built of, so that applying a batch
// that touches a few topics or partitions copies O(changed · log n), not
// the whole image (issue 27: metadata changes O(changed), not O(all)).
//
// A Map or Vector value is never changed once published: Set on one
// returns a new one sharing every node the change did not touch. A batch
// of changes goes through an Editor, which owns the nodes it has copied
// and changes them in place until Done, so that a batch of k changes
// copies each touched node once rather than once per change (the
// "transient" of Clojure's persistent collections). An Editor is used by
// one goroutine; the values it returns from Done may be shared freely.
package persist

import (
	"hash/maphash"
	"iter"
	"math/bits"
)

// hashSeed is fixed for the process: every Map shares it, so that two
// versions of one map place a key in the same node and Diff can skip
// the subtrees they share. Nothing persists a hash.
var hashSeed = maphash.MakeSeed()

const (
	bitsPerLevel = 5
	fanout       = 1 << bitsPerLevel
	levelMask    = fanout - 1
	// maxShift is the shift of the last level that still has hash bits;
	// below it, keys with equal 64-bit hashes share a collision node.
	maxShift = 60
)

// owner marks the nodes an Editor created and may change in place.
type owner struct{ _ byte }

// Map is a persistent hash array mapped trie from K to V. The zero Map is
// empty and ready to use.
type Map[K comparable, V any] struct {
	root *mapNode[K, V]
	n    int
}

// mapNode is an inner node: bitmap has a bit per occupied 5-bit slot of
// the hash at this level, slots holds them in order. A node below
// maxShift is a collision node: every slot is an entry, bitmap unused.
type mapNode[K comparable, V any] struct {
	bitmap uint32
	slots  []mapSlot[K, V]
	owner  *owner
}

// mapSlot is an entry (child nil) or a subtree (child set).
type mapSlot[K comparable, V any] struct {
	child *mapNode[K, V]
	hash  uint64
	key   K
	val   V
}

func hashOf[K comparable](k K) uint64 { return maphash.Comparable(hashSeed, k) }

// Len is the number of entries.
func (m Map[K, V]) Len() int { return m.n }

// Get returns the value of k and whether k is in the map.
func (m Map[K, V]) Get(k K) (V, bool) {
	var zero V
	n := m.root
	if n == nil {
		return zero, false
	}
	h := hashOf(k)
	for shift := uint(0); ; shift += bitsPerLevel {
		if shift > maxShift {
			for i := range n.slots {
				if n.slots[i].key == k {
					return n.slots[i].val, true
				}
			}
			return zero, false
		}
		bit := uint32(1) << ((h >> shift) & levelMask)
		if n.bitmap&bit == 0 {
			return zero, false
		}
		s := &n.slots[bits.OnesCount32(n.bitmap&(bit-1))]
		if s.child == nil {
			if s.hash == h && s.key == k {
				return s.val, true
			}
			return zero, false
		}
		n = s.child
	}
}

// Lookup is Get without the second result, for maps whose zero value
// means absent (pointers).
func (m Map[K, V]) Lookup(k K) V {
	v, _ := m.Get(k)
	return v
}

// Has reports whether k is in the map.
func (m Map[K, V]) Has(k K) bool {
	_, ok := m.Get(k)
	return ok
}

// All yields every entry, in no particular order (stable for one Map
// value).
func (m Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if m.root != nil {
			m.root.each(yield)
		}
	}
}

// Keys yields every key, in All's order.
func (m Map[K, V]) Keys() iter.Seq[K] {
	return func(yield func(K) bool) {
		for k := range m.All() {
			if !yield(k) {
				return
			}
		}
	}
}

// Values yields every value, in All's order.
func (m Map[K, V]) Values() iter.Seq[V] {
	return func(yield func(V) bool) {
		for _, v := range m.All() {
			if !yield(v) {
				return
			}
		}
	}
}

func (n *mapNode[K, V]) each(yield func(K, V) bool) bool {
	for i := range n.slots {
		s := &n.slots[i]
		if s.child != nil {
			if !s.child.each(yield) {
				return false
			}
		} else if !yield(s.key, s.val) {
			return false
		}
	}
	return true
}

// Set returns a map with k set to v. m is unchanged.
func (m Map[K, V]) Set(k K, v V) Map[K, V] {
	e := m.Edit()
	e.Set(k, v)
	return e.Done()
}

// Delete returns a map without k. m is unchanged.
func (m Map[K, V]) Delete(k K) Map[K, V] {
	e := m.Edit()
	e.Delete(k)
	return e.Done()
}

// MapEditor applies a batch of changes to a Map, copying each node it
// touches once.
type MapEditor[K comparable, V any] struct {
	m     Map[K, V]
	owner *owner
}

// Edit starts a batch of changes on m; m itself is not changed.
func (m Map[K, V]) Edit() *MapEditor[K, V] {
	return &MapEditor[K, V]{m: m, owner: &owner{}}
}

// Map is the map as edited so far; it must not be used after a further
// change through the editor (Done's result may).
func (e *MapEditor[K, V]) Map() Map[K, V] { return e.m }

// Len is the number of entries as edited so far.
func (e *MapEditor[K, V]) Len() int { return e.m.n }

// Get reads the map as edited so far.
func (e *MapEditor[K, V]) Get(k K) (V, bool) { return e.m.Get(k) }

// Done ends the batch: the map returned is never changed again, by this
// editor or any other.
func (e *MapEditor[K, V]) Done() Map[K, V] {
	e.owner = &owner{}
	return e.m
}

// mutable returns n itself if this editor owns it, else a copy it owns.
func (e *MapEditor[K, V]) mutable(n *mapNode[K, V], extra int) *mapNode[K, V] {
	if n.owner == e.owner {
		return n
	}
	cp := &mapNode[K, V]{bitmap: n.bitmap, owner: e.owner}
	cp.slots = make([]mapSlot[K, V], len(n.slots), len(n.slots)+extra)
	copy(cp.slots, n.slots)
	return cp
}

// Set sets k to v.
func (e *MapEditor[K, V]) Set(k K, v V) {
	h := hashOf(k)
	if e.m.root == nil {
		e.m.root = &mapNode[K, V]{owner: e.owner}
	}
	var added bool
	e.m.root = e.set(e.m.root, 0, h, k, v, &added)
	if added {
		e.m.n++
	}
}

func (e *MapEditor[K, V]) set(n *mapNode[K, V], shift uint, h uint64, k K, v V, added *bool) *mapNode[K, V] {
	if shift > maxShift {
		for i := range n.slots {
			if n.slots[i].key == k {
				n = e.mutable(n, 0)
				n.slots[i].val = v
				return n
			}
		}
		n = e.mutable(n, 1)
		n.slots = append(n.slots, mapSlot[K, V]{hash: h, key: k, val: v})
		*added = true
		return n
	}
	bit := uint32(1) << ((h >> shift) & levelMask)
	idx := bits.OnesCount32(n.bitmap & (bit - 1))
	if n.bitmap&bit == 0 {
		n = e.mutable(n, 1)
		n.slots = append(n.slots, mapSlot[K, V]{})
		copy(n.slots[idx+1:], n.slots[idx:])
		n.slots[idx] = mapSlot[K, V]{hash: h, key: k, val: v}
		n.bitmap |= bit
		*added = true
		return n
	}
	s := n.slots[idx]
	switch {
	case s.child != nil:
		child := e.set(s.child, shift+bitsPerLevel, h, k, v, added)
		if child != s.child {
			n = e.mutable(n, 0)
			n.slots[idx].child = child
		}
	case s.hash == h && s.key == k:
		n = e.mutable(n, 0)
		n.slots[idx].val = v
	default:
		// Two entries in one slot: push both a level down.
		child := &mapNode[K, V]{owner: e.owner}
		child = e.set(child, shift+bitsPerLevel, s.hash, s.key, s.val, new(bool))
		child = e.set(child, shift+bitsPerLevel, h, k, v, added)
		n = e.mutable(n, 0)
		n.slots[idx] = mapSlot[K, V]{child: child}
	}
	return n
}

// Delete removes k, if present.
func (e *MapEditor[K, V]) Delete(k K) {
	if e.m.root == nil {
		return
	}
	var removed bool
	root := e.del(e.m.root, 0, hashOf(k), k, &removed)
	if !removed {
		return
	}
	e.m.n--
	if e.m.n == 0 {
		root = nil
	}
	e.m.root = root
}

// del returns the node without k: nil if it became empty; a lone entry
// left in a subtree is pulled up by the caller (collapse), so that the
// trie's shape depends only on its keys.
func (e *MapEditor[K, V]) del(n *mapNode[K, V], shift uint, h uint64, k K, removed *bool) *mapNode[K, V] {
	if shift > maxShift {
		for i := range n.slots {
			if n.slots[i].key == k {
				*removed = true
				if len(n.slots) == 1 {
					return nil
				}
				n = e.mutable(n, 0)
				n.slots = append(n.slots[:i], n.slots[i+1:]...)
				return n
			}
		}
		return n
	}
	bit := uint32(1) << ((h >> shift) & levelMask)
	if n.bitmap&bit == 0 {
		return n
	}
	idx := bits.OnesCount32(n.bitmap & (bit - 1))
	s := n.slots[idx]
	if s.child == nil {
		if s.hash != h || s.key != k {
			return n
		}
		*removed = true
		if len(n.slots) == 1 {
			return nil
		}
		n = e.mutable(n, 0)
		n.slots = append(n.slots[:idx], n.slots[idx+1:]...)
		n.bitmap &^= bit
		return n
	}
	child := e.del(s.child, shift+bitsPerLevel, h, k, removed)
	if child == s.child {
		return n
	}
	n = e.mutable(n, 0)
	switch {
	case child == nil:
		n.slots = append(n.slots[:idx], n.slots[idx+1:]...)
		n.bitmap &^= bit
		if len(n.slots) == 0 {
			return nil
		}
	case len(child.slots) == 1 && child.slots[0].child == nil:
		n.slots[idx] = child.slots[0]
	default:
		n.slots[idx].child = child
	}
	return n
}

// Diff calls fn for every key whose value differs between a and b (by
// eq), is only in a (inB false) or only in b (inA false). Subtrees the two
// share are skipped, so comparing a map with one derived from it by k
// changes costs O(k · log n).
func Diff[K comparable, V any](a, b Map[K, V], eq func(V, V) bool, fn func(k K, va V, inA bool, vb V, inB bool)) {
	diffNodes(a.root, b.root, 0, eq, fn)
}

func diffNodes[K comparable, V any](a, b *mapNode[K, V], shift uint, eq func(V, V) bool, fn func(K, V, bool, V, bool)) {
	if a == b {
		return
	}
	var zero V
	if a == nil || b == nil || shift > maxShift {
		// One side empty, or collision nodes: compare entry by entry.
		diffEntries(a, b, eq, fn)
		return
	}
	for bit := uint32(1); bit != 0; bit <<= 1 {
		inA, inB := a.bitmap&bit != 0, b.bitmap&bit != 0
		if !inA && !inB {
			continue
		}
		var sa, sb *mapSlot[K, V]
		if inA {
			sa = &a.slots[bits.OnesCount32(a.bitmap&(bit-1))]
		}
		if inB {
			sb = &b.slots[bits.OnesCount32(b.bitmap&(bit-1))]
		}
		switch {
		case sa != nil && sb != nil && sa.child == nil && sb.child == nil:
			if sa.key == sb.key {
				if !eq(sa.val, sb.val) {
					fn(sa.key, sa.val, true, sb.val, true)
				}
			} else {
				fn(sa.key, sa.val, true, zero, false)
				fn(sb.key, zero, false, sb.val, true)
			}
		case sa != nil && sb != nil && sa.child != nil && sb.child != nil:
			diffNodes(sa.child, sb.child, shift+bitsPerLevel, eq, fn)
		default:
			diffEntries(slotNode(sa), slotNode(sb), eq, fn)
		}
	}
}

// slotNode is the subtree of s: its child, a node of the one entry, or
// nil.
func slotNode[K comparable, V any](s *mapSlot[K, V]) *mapNode[K, V] {
	switch {
	case s == nil:
		return nil
	case s.child != nil:
		return s.child
	default:
		return &mapNode[K, V]{slots: []mapSlot[K, V]{*s}}
	}
}

// diffEntries compares two small subtrees whose shapes differ by
// collecting b's entries; it is reached only where one side is a single
// entry, empty or a collision node.
func diffEntries[K comparable, V any](a, b *mapNode[K, V], eq func(V, V) bool, fn func(K, V, bool, V, bool)) {
	var zero V
	inB := map[K]V{}
	if b != nil {
		b.each(func(k K, v V) bool { inB[k] = v; return true })
	}
	if a != nil {
		a.each(func(k K, va V) bool {
			vb, ok := inB[k]
			if !ok {
				fn(k, va, true, zero, false)
				return true
			}
			delete(inB, k)
			if !eq(va, vb) {
				fn(k, va, true, vb, true)
			}
			return true
		})
	}
	if b != nil {
		b.each(func(k K, vb V) bool {
			if _, ok := inB[k]; ok {
				fn(k, zero, false, vb, true)
			}
			return true
		})
	}
}

// MapOf builds a map from a Go map (for tests and snapshots).
func MapOf[K comparable, V any](src map[K]V) Map[K, V] {
	e := Map[K, V]{}.Edit()
	for k, v := range src {
		e.Set(k, v)
	}
	return e.Done()
}
