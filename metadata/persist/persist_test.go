package persist

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMapAgainstGoMap applies random batches of sets and deletes to a Map
// and to a Go map, checking after each batch that they hold the same, that
// the version before the batch is unchanged, and that Diff between the two
// versions reports exactly the keys the batch changed.
func TestMapAgainstGoMap(t *testing.T) {
	for _, keys := range []int{3, 40, 2000} {
		t.Run(fmt.Sprint(keys), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(keys)))
			var m Map[string, int]
			model := map[string]int{}
			for round := range 300 {
				before, beforeModel := m, maps.Clone(model)
				e := m.Edit()
				for range rng.IntN(20) + 1 {
					k := fmt.Sprintf("k%d", rng.IntN(keys))
					if rng.IntN(3) == 0 {
						e.Delete(k)
						delete(model, k)
					} else {
						v := rng.IntN(5)
						e.Set(k, v)
						model[k] = v
					}
				}
				m = e.Done()
				checkMap(t, round, m, model)
				checkMap(t, round, before, beforeModel)
				want := map[string]bool{}
				for k := range model {
					if v, ok := beforeModel[k]; !ok || v != model[k] {
						want[k] = true
					}
				}
				for k := range beforeModel {
					if _, ok := model[k]; !ok {
						want[k] = true
					}
				}
				got := map[string]bool{}
				Diff(before, m, func(a, b int) bool { return a == b }, func(k string, va int, inA bool, vb int, inB bool) {
					if got[k] {
						t.Fatalf("round %d: Diff reported %s twice", round, k)
					}
					got[k] = true
					if wa, ok := beforeModel[k]; ok != inA || (ok && wa != va) {
						t.Fatalf("round %d: Diff old side of %s: %d %v, want %d %v", round, k, va, inA, wa, ok)
					}
					if wb, ok := model[k]; ok != inB || (ok && wb != vb) {
						t.Fatalf("round %d: Diff new side of %s: %d %v, want %d %v", round, k, vb, inB, wb, ok)
					}
				})
				if !maps.Equal(got, want) {
					t.Fatalf("round %d: Diff reported %v, want %v", round, got, want)
				}
			}
		})
	}
}

func checkMap(t *testing.T, round int, m Map[string, int], model map[string]int) {
	t.Helper()
	if m.Len() != len(model) {
		t.Fatalf("round %d: Len %d, want %d", round, m.Len(), len(model))
	}
	seen := map[string]int{}
	for k, v := range m.All() {
		if _, dup := seen[k]; dup {
			t.Fatalf("round %d: All yielded %s twice", round, k)
		}
		seen[k] = v
	}
	if !maps.Equal(seen, model) {
		t.Fatalf("round %d: All yielded %v, want %v", round, seen, model)
	}
	for k, v := range model {
		if got, ok := m.Get(k); !ok || got != v {
			t.Fatalf("round %d: Get(%s) = %d %v, want %d", round, k, got, ok, v)
		}
	}
	if _, ok := m.Get("absent"); ok {
		t.Fatalf("round %d: Get of an absent key found it", round)
	}
}

// TestMapCollisions drives keys into collision nodes by giving them equal
// hashes: the collision path is otherwise unreachable with 64-bit hashes.
func TestMapCollisions(t *testing.T) {
	// Every key of a collisionKey hashes alike only through maphash, so
	// build the collision node directly through set with a forced hash.
	var e = Map[int, int]{}.Edit()
	e.m.root = &mapNode[int, int]{owner: e.owner}
	var added bool
	for k := range 5 {
		added = false
		e.m.root = e.set(e.m.root, 0, 42, k, k*10, &added)
		if !added {
			t.Fatalf("key %d not added", k)
		}
		e.m.n++
	}
	m := e.Done()
	// Get hashes the key itself; look the entries up by walking instead.
	n := 0
	for k, v := range m.All() {
		if v != k*10 {
			t.Fatalf("entry %d = %d", k, v)
		}
		n++
	}
	if n != 5 {
		t.Fatalf("%d entries, want 5", n)
	}
	e = m.Edit()
	var removed bool
	e.m.root = e.del(e.m.root, 0, 42, 3, &removed)
	if !removed {
		t.Fatal("key 3 not removed")
	}
	e.m.n--
	m2 := e.Done()
	var got []int
	for k := range m2.All() {
		got = append(got, k)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{0, 1, 2, 4}) {
		t.Fatalf("after delete: %v", got)
	}
	var diffs []int
	Diff(m, m2, func(a, b int) bool { return a == b }, func(k, _ int, inA bool, _ int, inB bool) {
		if !inA || inB {
			t.Fatalf("key %d: inA %v inB %v", k, inA, inB)
		}
		diffs = append(diffs, k)
	})
	if !slices.Equal(diffs, []int{3}) {
		t.Fatalf("Diff: %v", diffs)
	}
}

// TestVectorAgainstSlice does the same for Vector: appends past several
// trie heights and random sets, old versions unchanged, DiffVectors exact.
func TestVectorAgainstSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	var v Vector[int]
	var model []int
	for round := range 200 {
		before, beforeModel := v, slices.Clone(model)
		e := v.Edit()
		if round%40 == 39 {
			for range rng.IntN(3000) {
				x := rng.IntN(100)
				e.Append(x)
				model = append(model, x)
			}
		}
		for range rng.IntN(10) + 1 {
			if len(model) == 0 || rng.IntN(4) == 0 {
				x := rng.IntN(100)
				e.Append(x)
				model = append(model, x)
				continue
			}
			i := rng.IntN(len(model))
			x := rng.IntN(100)
			e.Set(i, x)
			model[i] = x
		}
		v = e.Done()
		if got := v.Slice(); !slices.Equal(got, model) {
			t.Fatalf("round %d: %d elements, want %d (or they differ)", round, len(got), len(model))
		}
		if got := before.Slice(); !slices.Equal(got, beforeModel) {
			t.Fatalf("round %d: the version before the batch changed", round)
		}
		for i, x := range model {
			if *v.At(i) != x {
				t.Fatalf("round %d: At(%d) = %d, want %d", round, i, *v.At(i), x)
			}
		}
		want := map[int]bool{}
		for i := range model {
			if i >= len(beforeModel) || beforeModel[i] != model[i] {
				want[i] = true
			}
		}
		got := map[int]bool{}
		DiffVectors(before, v, func(a, b *int) bool { return *a == *b }, func(i int, pa, pb *int) {
			got[i] = true
		})
		if !maps.Equal(got, want) {
			t.Fatalf("round %d: DiffVectors reported %d indexes, want %d", round, len(got), len(want))
		}
	}
	e := v.Edit()
	e.Truncate(5)
	if got := e.Done().Slice(); !slices.Equal(got, model[:5]) {
		t.Fatalf("Truncate: %v", got)
	}
	if _, ok := v.Get(-1); ok {
		t.Fatal("Get(-1) found an element")
	}
}

// BenchmarkMapSetOne and BenchmarkVectorSetOne show a change's cost
// against the collection's size: bytes per op grow with log n only.
func BenchmarkMapSetOne(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			e := Map[string, int]{}.Edit()
			for i := range n {
				e.Set(fmt.Sprintf("topic-%06d", i), i)
			}
			m := e.Done()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				m = m.Set(fmt.Sprintf("topic-%06d", i%n), i)
			}
		})
	}
}

func BenchmarkVectorSetOne(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			e := Vector[[184]byte]{}.Edit()
			for range n {
				e.Append([184]byte{})
			}
			v := e.Done()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				e := v.Edit()
				e.Mutable(i % n)[0]++
				v = e.Done()
			}
		})
	}
}
