package persist

import "iter"

// Vector is a persistent array of T indexed from 0: a trie of fanout 32
// whose leaves hold the elements themselves, so that changing one element
// copies its leaf and the nodes above it (O(log n)), and the whole vector
// costs a pointer per 32 elements beyond the elements. The zero Vector is
// empty.
type Vector[T any] struct {
	root *vecNode[T]
	n    int
	// shift is the height of the trie in bits: 0 when the root is a leaf.
	shift uint
}

type vecNode[T any] struct {
	kids  []*vecNode[T]
	elems []T
	owner *owner
}

// Len is the number of elements.
func (v Vector[T]) Len() int { return v.n }

// At returns a pointer to element i, which the caller must not modify.
// It panics if i is out of range, as indexing a slice does.
func (v Vector[T]) At(i int) *T {
	if uint(i) >= uint(v.n) {
		panic("persist: Vector index out of range")
	}
	n := v.root
	for s := v.shift; s > 0; s -= bitsPerLevel {
		n = n.kids[(i>>s)&levelMask]
	}
	return &n.elems[i&levelMask]
}

// Get returns element i and true, or the zero T and false if i is out of
// range (a negative i included).
func (v Vector[T]) Get(i int) (T, bool) {
	if uint(i) >= uint(v.n) {
		var zero T
		return zero, false
	}
	return *v.At(i), true
}

// All yields every index and a pointer to its element (not to be
// modified), in order.
func (v Vector[T]) All() iter.Seq2[int, *T] {
	return func(yield func(int, *T) bool) {
		if v.root != nil {
			v.root.each(v.shift, 0, yield)
		}
	}
}

func (n *vecNode[T]) each(shift uint, base int, yield func(int, *T) bool) bool {
	if shift == 0 {
		for i := range n.elems {
			if !yield(base+i, &n.elems[i]) {
				return false
			}
		}
		return true
	}
	for i, k := range n.kids {
		if !k.each(shift-bitsPerLevel, base+i<<shift, yield) {
			return false
		}
	}
	return true
}

// Slice copies the elements into a new slice.
func (v Vector[T]) Slice() []T {
	out := make([]T, 0, v.n)
	for _, e := range v.All() {
		out = append(out, *e)
	}
	return out
}

// VectorOf builds a vector of elems (copied).
func VectorOf[T any](elems ...T) Vector[T] {
	e := Vector[T]{}.Edit()
	for _, x := range elems {
		e.Append(x)
	}
	return e.Done()
}

// VectorEditor applies a batch of changes to a Vector, copying each node
// it touches once.
type VectorEditor[T any] struct {
	v     Vector[T]
	owner *owner
}

// Edit starts a batch of changes on v; v itself is not changed.
func (v Vector[T]) Edit() *VectorEditor[T] {
	return &VectorEditor[T]{v: v, owner: &owner{}}
}

// Len is the number of elements as edited so far.
func (e *VectorEditor[T]) Len() int { return e.v.n }

// Done ends the batch: the vector returned is never changed again.
func (e *VectorEditor[T]) Done() Vector[T] {
	e.owner = &owner{}
	return e.v
}

// Vector is the vector as edited so far; it must not be used after a
// further change through the editor (Done's result may).
func (e *VectorEditor[T]) Vector() Vector[T] { return e.v }

func (e *VectorEditor[T]) mutable(n *vecNode[T]) *vecNode[T] {
	if n.owner == e.owner {
		return n
	}
	cp := &vecNode[T]{owner: e.owner}
	if n.kids != nil {
		cp.kids = append(make([]*vecNode[T], 0, fanout), n.kids...)
	} else {
		cp.elems = append(make([]T, 0, len(n.elems)), n.elems...)
	}
	return cp
}

// Mutable returns element i to be changed in place; the pointer is valid
// until the next call on the editor. It panics if i is out of range.
func (e *VectorEditor[T]) Mutable(i int) *T {
	if uint(i) >= uint(e.v.n) {
		panic("persist: Vector index out of range")
	}
	e.v.root = e.mutable(e.v.root)
	n := e.v.root
	for s := e.v.shift; s > 0; s -= bitsPerLevel {
		slot := (i >> s) & levelMask
		n.kids[slot] = e.mutable(n.kids[slot])
		n = n.kids[slot]
	}
	return &n.elems[i&levelMask]
}

// Set sets element i to x.
func (e *VectorEditor[T]) Set(i int, x T) { *e.Mutable(i) = x }

// Append adds x at index Len().
func (e *VectorEditor[T]) Append(x T) {
	i := e.v.n
	switch {
	case e.v.root == nil:
		e.v.root = &vecNode[T]{owner: e.owner, elems: make([]T, 0, 1)}
	case i == fanout<<e.v.shift:
		// Full: a new root above the old one.
		e.v.root = &vecNode[T]{owner: e.owner, kids: append(make([]*vecNode[T], 0, fanout), e.v.root)}
		e.v.shift += bitsPerLevel
	}
	e.v.root = e.mutable(e.v.root)
	n := e.v.root
	for s := e.v.shift; s > 0; s -= bitsPerLevel {
		slot := (i >> s) & levelMask
		if slot == len(n.kids) {
			n.kids = append(n.kids, &vecNode[T]{owner: e.owner})
		}
		n.kids[slot] = e.mutable(n.kids[slot])
		n = n.kids[slot]
	}
	n.elems = append(n.elems, x)
	e.v.n++
}

// Truncate keeps the first n elements (n ≤ Len()).
func (e *VectorEditor[T]) Truncate(n int) {
	if n >= e.v.n {
		return
	}
	// Rare (a batch that failed half-way is never published): rebuild.
	elems := e.v.Slice()[:n]
	e.v = Vector[T]{}
	for _, x := range elems {
		e.Append(x)
	}
}

// DiffVectors calls fn for every index whose element differs between a
// and b (by eq), or that only one has (the other's pointer nil). Leaves
// and subtrees the two share are skipped.
func DiffVectors[T any](a, b Vector[T], eq func(*T, *T) bool, fn func(i int, pa, pb *T)) {
	if a.root == b.root && a.n == b.n {
		return
	}
	if a.shift == b.shift {
		diffVecNodes(a.root, b.root, a.shift, 0, eq, fn)
		return
	}
	// Heights differ (one grew past a power of 32): compare by index.
	for i := range max(a.n, b.n) {
		var pa, pb *T
		if i < a.n {
			pa = a.At(i)
		}
		if i < b.n {
			pb = b.At(i)
		}
		if pa == nil || pb == nil || !eq(pa, pb) {
			fn(i, pa, pb)
		}
	}
}

func diffVecNodes[T any](a, b *vecNode[T], shift uint, base int, eq func(*T, *T) bool, fn func(int, *T, *T)) {
	if a == b {
		return
	}
	if shift == 0 {
		la, lb := 0, 0
		if a != nil {
			la = len(a.elems)
		}
		if b != nil {
			lb = len(b.elems)
		}
		for i := range max(la, lb) {
			var pa, pb *T
			if i < la {
				pa = &a.elems[i]
			}
			if i < lb {
				pb = &b.elems[i]
			}
			if pa == nil || pb == nil || !eq(pa, pb) {
				fn(base+i, pa, pb)
			}
		}
		return
	}
	ka, kb := 0, 0
	if a != nil {
		ka = len(a.kids)
	}
	if b != nil {
		kb = len(b.kids)
	}
	for i := range max(ka, kb) {
		var ca, cb *vecNode[T]
		if i < ka {
			ca = a.kids[i]
		}
		if i < kb {
			cb = b.kids[i]
		}
		diffVecNodes(ca, cb, shift-bitsPerLevel, base+i<<shift, eq, fn)
	}
}
