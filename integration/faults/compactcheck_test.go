package faults

import (
	"slices"
	"testing"
)

func (b *builder) csent(proc string, seq int64, key, value string, outcome Type, p int32, o int64) {
	b.add(Op{Process: proc, Type: Invoke, F: CompactSend, Seq: seq, Key: key, Value: value})
	b.add(Op{Process: proc, Type: outcome, F: CompactSend, Seq: seq, Key: key, Value: value, Partition: p, Offset: o})
}

func (b *builder) compactRead(recs ...Record) {
	b.add(Op{Process: "final", Type: Invoke, F: CompactRead})
	b.add(Op{Process: "final", Type: OK, F: CompactRead, Records: recs})
}

func krec(p int32, o int64, key, v string) Record {
	return Record{Partition: p, Offset: o, Key: key, Value: v}
}

// compacted is a history of a compacted topic that breaks nothing: in
// partition 0, k0 written at 0 and 2, k1 at 1 and (outcome unknown) at
// 3, k0 once more at 4 (unknown, never stored); in partition 1, k2 at 0
// and a refused write at 1. The cleaner removed offsets 0 and 1: each
// has a later record of its key.
func compacted() *builder {
	b := &builder{}
	b.csent("p0", 0, "k0", "a0", OK, 0, 0)
	b.csent("p0", 1, "k1", "a1", OK, 0, 1)
	b.csent("p0", 2, "k0", "a2", OK, 0, 2)
	b.csent("p1", 0, "k1", "b0", Info, 0, 0)
	b.csent("p1", 1, "k0", "b1", Info, 0, 0)
	b.csent("p1", 2, "k2", "b2", OK, 1, 0)
	b.csent("p0", 3, "k2", "a3", Fail, 0, 0)
	b.compactRead(krec(0, 2, "k0", "a2"), krec(0, 3, "k1", "b0"), krec(1, 0, "k2", "b2"))
	return b
}

func TestCheckCompactedHealthyHistory(t *testing.T) {
	s := CheckCompacted(compacted().ops)
	if len(s.Violations) != 0 {
		t.Fatalf("violations in a healthy compacted history:\n%s", s)
	}
	if s.Sends != 7 || s.Acked != 4 || s.Failed != 1 || s.Indeterminate != 2 || s.IndeterminateSeen != 1 ||
		s.FinalRead != 3 || s.Keys != 3 || s.Compacted != 2 {
		t.Errorf("counts: %+v", s)
	}
	t.Log(s)
}

// TestCheckCompactedFindsEachViolation breaks the compacted history in
// one way per case and wants exactly the kinds that break reported.
func TestCheckCompactedFindsEachViolation(t *testing.T) {
	// read replaces the final read's records.
	read := func(b *builder, recs ...Record) *builder {
		b.ops[len(b.ops)-1].Records = recs
		return b
	}
	cases := []struct {
		name  string
		kinds []Kind
		build func() *builder
	}{
		{"a key's last acknowledged write missing, an older one kept", []Kind{Lost, KeyStale}, func() *builder {
			return read(compacted(), krec(0, 0, "k0", "a0"), krec(0, 3, "k1", "b0"), krec(1, 0, "k2", "b2"))
		}},
		{"a key gone from the log", []Kind{Lost, KeyStale}, func() *builder {
			return read(compacted(), krec(0, 2, "k0", "a2"), krec(0, 3, "k1", "b0"))
		}},
		{"removed by compaction with no later record of its key", []Kind{Lost, KeyStale}, func() *builder {
			return read(compacted(), krec(0, 2, "k0", "a2"), krec(1, 0, "k2", "b2"))
		}},
		{"a key ending with a refused write", []Kind{KeyStale, Unexpected}, func() *builder {
			return read(compacted(), krec(0, 2, "k0", "a2"), krec(0, 3, "k1", "b0"), krec(1, 0, "k2", "b2"), krec(1, 1, "k2", "a3"))
		}},
		{"a record under another key than it was sent with", []Kind{Unexpected}, func() *builder {
			b := compacted()
			b.ops = b.ops[:len(b.ops)-2] // the read, again after one more send
			b.csent("p1", 3, "k3", "b3", Info, 0, 0)
			b.compactRead(krec(0, 2, "k0", "a2"), krec(0, 3, "k1", "b0"), krec(1, 0, "k2", "b2"), krec(1, 1, "k4", "b3"))
			return b
		}},
		{"a value nobody sent", []Kind{Unexpected}, func() *builder {
			return read(compacted(), krec(0, 2, "k0", "a2"), krec(0, 3, "k1", "b0"), krec(0, 5, "k9", "zz"), krec(1, 0, "k2", "b2"))
		}},
		{"a value stored twice", []Kind{Duplicate, KeyStale}, func() *builder {
			return read(compacted(), krec(0, 2, "k0", "a2"), krec(0, 3, "k1", "b0"), krec(0, 5, "k0", "a2"), krec(1, 0, "k2", "b2"))
		}},
		{"acknowledged at one offset, read at another", []Kind{OffsetMismatch, KeyStale}, func() *builder {
			return read(compacted(), krec(0, 3, "k1", "b0"), krec(0, 5, "k0", "a2"), krec(1, 0, "k2", "b2"))
		}},
		{"one producer's sends stored out of order", []Kind{Reorder}, func() *builder {
			b := &builder{}
			b.csent("p0", 0, "k0", "a0", OK, 0, 1)
			b.csent("p0", 1, "k1", "a1", OK, 0, 0)
			b.compactRead(krec(0, 0, "k1", "a1"), krec(0, 1, "k0", "a0"))
			return b
		}},
		{"no final read at all", []Kind{Lost}, func() *builder {
			b := compacted()
			b.ops = b.ops[:len(b.ops)-2]
			return b
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := CheckCompacted(c.build().ops)
			var got []Kind
			for _, k := range CompactKinds {
				if s.Count(k) > 0 {
					got = append(got, k)
				}
			}
			slices.Sort(got)
			want := slices.Clone(c.kinds)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("found %v, want %v:\n%s", got, want, s)
			}
		})
	}
}
