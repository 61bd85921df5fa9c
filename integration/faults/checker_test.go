package faults

import (
	"strings"
	"testing"
)

// builder writes hand-made histories: each helper appends the ops one
// real operation would leave.
type builder struct{ ops []Op }

func (b *builder) add(op Op) { op.Index = len(b.ops); b.ops = append(b.ops, op) }

func (b *builder) sent(proc string, seq int64, value string, outcome Type, p int32, o int64) {
	b.add(Op{Process: proc, Type: Invoke, F: Send, Seq: seq, Value: value})
	b.add(Op{Process: proc, Type: outcome, F: Send, Seq: seq, Value: value, Partition: p, Offset: o})
}

func (b *builder) poll(proc string, recs ...Record) {
	b.add(Op{Process: proc, Type: Invoke, F: Poll})
	b.add(Op{Process: proc, Type: OK, F: Poll, Records: recs})
}

func (b *builder) commit(proc string, outcome Type, offsets map[int32]int64) {
	b.add(Op{Process: proc, Type: Invoke, F: Commit, Offsets: offsets})
	b.add(Op{Process: proc, Type: outcome, F: Commit, Offsets: offsets})
}

func (b *builder) assign(proc string, ps ...int32) {
	b.add(Op{Process: proc, Type: OK, F: Assign, Offsets: parts(ps)})
}
func (b *builder) revoke(proc string, ps ...int32) {
	b.add(Op{Process: proc, Type: OK, F: Revoke, Offsets: parts(ps)})
}

func (b *builder) final(recs ...Record) {
	b.add(Op{Process: "final", Type: Invoke, F: FinalRead})
	b.add(Op{Process: "final", Type: OK, F: FinalRead, Records: recs})
}

func (b *builder) committed(offsets map[int32]int64) {
	b.add(Op{Process: "final", Type: OK, F: Committed, Offsets: offsets})
}

func parts(ps []int32) map[int32]int64 {
	m := map[int32]int64{}
	for _, p := range ps {
		m[p] = 0
	}
	return m
}

// wantOnly fails t unless vs has a violation of kind k, and only of k,
// and the summary shows it.
func wantOnly(t *testing.T, k Kind, vs []Violation, summary string) {
	t.Helper()
	if countKind(vs, k) == 0 {
		t.Fatalf("no %s violation found:\n%s", k, summary)
	}
	for _, v := range vs {
		if v.Kind != k {
			t.Errorf("also found %s: %s", v.Kind, v.Detail)
		}
	}
	if !strings.Contains(summary, string(k)+": ") {
		t.Errorf("summary does not show the violation:\n%s", summary)
	}
}

func rec(p int32, o int64, v string) Record { return Record{Partition: p, Offset: o, Value: v} }

// healthy is a history that breaks nothing: two producers, one
// indeterminate send that landed and one failed that did not, a consumer
// that polls, commits, loses a partition to another consumer, which picks
// up at the commit.
func healthy() *builder {
	b := &builder{}
	b.sent("p0", 0, "a0", OK, 0, 0)
	b.sent("p1", 0, "b0", OK, 0, 1)
	b.sent("p0", 1, "a1", OK, 0, 2)
	b.sent("p0", 2, "a2", Info, 1, 0)
	b.sent("p1", 1, "b1", Fail, 0, 0)
	b.sent("p1", 2, "b2", OK, 1, 1)
	b.assign("c0", 0, 1)
	b.poll("c0", rec(0, 0, "a0"), rec(0, 1, "b0"), rec(1, 0, "a2"))
	b.commit("c0", OK, map[int32]int64{0: 2, 1: 1})
	b.revoke("c0", 1)
	b.assign("c1", 1)
	b.poll("c1", rec(1, 1, "b2"))
	b.poll("c0", rec(0, 2, "a1"))
	b.commit("c0", OK, map[int32]int64{0: 3})
	b.commit("c1", OK, map[int32]int64{1: 2})
	b.final(rec(0, 0, "a0"), rec(0, 1, "b0"), rec(0, 2, "a1"), rec(1, 0, "a2"), rec(1, 1, "b2"))
	b.committed(map[int32]int64{0: 3, 1: 2})
	return b
}

func TestCheckHealthyHistory(t *testing.T) {
	s := Check(healthy().ops)
	if len(s.Violations) != 0 {
		t.Fatalf("violations in a healthy history:\n%s", s)
	}
	if s.Sends != 6 || s.Acked != 4 || s.Failed != 1 || s.Indeterminate != 1 || s.IndeterminateSeen != 1 {
		t.Errorf("send counts: %+v", s)
	}
	if s.Polls != 3 || s.Polled != 5 || s.CommitsOK != 3 || s.FinalRead != 5 {
		t.Errorf("read counts: %+v", s)
	}
	t.Log(s)
}

// TestCheckFindsEachViolation breaks the healthy history in one way per
// case and wants exactly that kind reported.
func TestCheckFindsEachViolation(t *testing.T) {
	cases := []struct {
		name  string
		kind  Kind
		build func() *builder
	}{
		{"acked value missing from the final read", Lost, func() *builder {
			b := healthy()
			b.sent("p0", 3, "a3", OK, 1, 2)
			return b
		}},
		{"no final read at all", Lost, func() *builder {
			b := &builder{}
			b.sent("p0", 0, "a0", OK, 0, 0)
			return b
		}},
		{"a value stored twice", Duplicate, func() *builder {
			b := healthy()
			b.ops[len(b.ops)-2].Records = append(b.ops[len(b.ops)-2].Records, rec(1, 2, "a0"))
			return b
		}},
		{"acked at one offset, read at another", OffsetMismatch, func() *builder {
			b := healthy()
			b.ops[5].Offset = 7 // a1's ok
			return b
		}},
		{"one producer's sends stored out of order", Reorder, func() *builder {
			b := &builder{}
			b.sent("p0", 0, "a0", OK, 0, 1)
			b.sent("p0", 1, "a1", OK, 0, 0)
			b.final(rec(0, 0, "a1"), rec(0, 1, "a0"))
			return b
		}},
		{"a value nobody sent", Unexpected, func() *builder {
			b := healthy()
			b.ops[len(b.ops)-2].Records = append(b.ops[len(b.ops)-2].Records, rec(1, 2, "zz"))
			return b
		}},
		{"a failed send in the log", Unexpected, func() *builder {
			b := healthy()
			b.ops[len(b.ops)-2].Records = append(b.ops[len(b.ops)-2].Records, rec(1, 2, "b1"))
			return b
		}},
		{"a consumer handed an earlier offset", PollNonMonotonic, func() *builder {
			b := healthy()
			b.poll("c0", rec(0, 1, "b0"))
			return b
		}},
		{"a consumer skipping an offset", PollSkip, func() *builder {
			b := &builder{}
			b.sent("p0", 0, "a0", OK, 0, 0)
			b.sent("p0", 1, "a1", OK, 0, 1)
			b.sent("p0", 2, "a2", OK, 0, 2)
			b.assign("c0", 0)
			b.poll("c0", rec(0, 0, "a0"))
			b.poll("c0", rec(0, 2, "a2"))
			b.final(rec(0, 0, "a0"), rec(0, 1, "a1"), rec(0, 2, "a2"))
			return b
		}},
		{"a later acknowledged commit below an earlier one", CommitRegressed, func() *builder {
			b := healthy()
			b.commit("c0", OK, map[int32]int64{0: 1})
			return b
		}},
		{"a new owner starting below the acknowledged commit", CommitRegressed, func() *builder {
			b := healthy()
			b.revoke("c1", 1)
			b.assign("c0", 1)
			b.poll("c0", rec(1, 0, "a2"))
			return b
		}},
		{"a new member starts above every commit", GroupSkip, func() *builder {
			b := &builder{}
			b.sent("p0", 0, "a0", OK, 0, 0)
			b.sent("p0", 1, "a1", OK, 0, 1)
			b.sent("p0", 2, "a2", OK, 0, 2)
			b.assign("c0", 0)
			b.poll("c0", rec(0, 0, "a0"))
			b.commit("c0", OK, map[int32]int64{0: 1})
			b.revoke("c0", 0)
			b.assign("c1", 0)
			b.poll("c1", rec(0, 2, "a2"))
			b.final(rec(0, 0, "a0"), rec(0, 1, "a1"), rec(0, 2, "a2"))
			return b
		}},
		{"a first member starts above offset 0", GroupSkip, func() *builder {
			b := &builder{}
			b.sent("p0", 0, "a0", OK, 0, 0)
			b.sent("p0", 1, "a1", OK, 0, 1)
			b.assign("c0", 0)
			b.poll("c0", rec(0, 1, "a1"))
			b.final(rec(0, 0, "a0"), rec(0, 1, "a1"))
			return b
		}},
		{"final committed offsets below an acknowledged commit", CommitRegressed, func() *builder {
			b := healthy()
			b.committed(map[int32]int64{0: 3, 1: 1})
			return b
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Check(c.build().ops)
			wantOnly(t, c.kind, s.Violations, s.String())
		})
	}
}

// A redelivery (the same position handed over again after a new
// assignment, as an at-least-once consumer may see after a failed commit)
// is counted, not a violation.
func TestCheckAllowsRedelivery(t *testing.T) {
	b := &builder{}
	b.sent("p0", 0, "a0", OK, 0, 0)
	b.sent("p0", 1, "a1", OK, 0, 1)
	b.assign("c0", 0)
	b.poll("c0", rec(0, 0, "a0"), rec(0, 1, "a1"))
	b.commit("c0", Info, map[int32]int64{0: 2})
	b.revoke("c0", 0)
	b.assign("c1", 0)
	b.poll("c1", rec(0, 0, "a0"), rec(0, 1, "a1"))
	b.final(rec(0, 0, "a0"), rec(0, 1, "a1"))
	s := Check(b.ops)
	if len(s.Violations) != 0 || s.Redelivered != 2 || s.CommitsFailed != 1 {
		t.Fatalf("want no violations and 2 redelivered:\n%s", s)
	}
}
