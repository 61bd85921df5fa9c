package faults

import (
	"slices"
	"testing"
)

// logStart records one LogStart observation of process: its invocation,
// then its answer (ok with the offsets, or fail when offsets is nil).
func (b *builder) logStart(proc string, seq int64, offsets map[int32]int64) {
	b.add(Op{Process: proc, Type: Invoke, F: LogStart, Seq: seq})
	if offsets == nil {
		b.add(Op{Process: proc, Type: Fail, F: LogStart, Seq: seq, Error: "timed out"})
		return
	}
	b.add(Op{Process: proc, Type: OK, F: LogStart, Seq: seq, Offsets: offsets})
}

// retained is a history of one partition under retention that breaks
// nothing: c0 reads offsets 0-1 and commits 2; retention then deletes
// offsets 0-3, so c1, given the partition, starts at the log start 4
// (above every commit) and, having fallen behind again, jumps from 5 to
// the new log start 7; the final read has 7-8, and the log start
// observed after it is 7.
func retained() *builder {
	b := &builder{}
	for i := range int64(9) {
		b.sent("p0", i, "a"+string(rune('0'+i)), OK, 0, i)
	}
	b.assign("c0", 0)
	b.poll("c0", rec(0, 0, "a0"), rec(0, 1, "a1"))
	b.commit("c0", OK, map[int32]int64{0: 2})
	b.revoke("c0", 0)
	b.logStart("sampler", 0, map[int32]int64{0: 2})
	b.assign("c1", 0)
	b.poll("c1", rec(0, 4, "a4"))
	b.logStart("sampler", 1, map[int32]int64{0: 4})
	b.poll("c1", rec(0, 5, "a5"))
	b.poll("c1", rec(0, 7, "a7"))
	b.logStart("sampler", 2, nil) // a failed observation tells nothing
	b.logStart("sampler", 3, map[int32]int64{0: 7})
	b.commit("c1", OK, map[int32]int64{0: 8})
	b.final(rec(0, 7, "a7"), rec(0, 8, "a8"))
	b.logStart("final", 0, map[int32]int64{0: 7})
	b.committed(map[int32]int64{0: 8})
	return b
}

func TestCheckRetentionHealthyHistory(t *testing.T) {
	ops := retained().ops
	s := CheckRetention(ops)
	if len(s.Violations) != 0 {
		t.Fatalf("violations in a healthy retained history:\n%s", s)
	}
	// a0-a6 are not in the final read: all below the log start 7.
	if s.Expired != 7 || s.Resets != 2 || s.LogStarts != 4 || !s.Retention {
		t.Errorf("want 7 expired, 2 resets, 4 observations: %+v", s)
	}
	t.Log(s)
	// The same history under Check, which excuses nothing: the deleted
	// records are lost and the jumps are skips.
	plain := Check(ops)
	if plain.Count(Lost) != 7 || plain.Count(GroupSkip) != 1 || plain.Count(PollSkip) != 1 || len(plain.Violations) != 9 {
		t.Errorf("Check must excuse nothing:\n%s", plain)
	}
}

// TestCheckRetentionFindsEachViolation breaks the retained history in
// one way per case; retention excuses none of them.
func TestCheckRetentionFindsEachViolation(t *testing.T) {
	final := func(b *builder) *Op {
		for i := len(b.ops) - 1; i >= 0; i-- {
			if b.ops[i].F == FinalRead && b.ops[i].Type == OK {
				return &b.ops[i]
			}
		}
		t.Fatal("no final read")
		return nil
	}
	// observation returns the ok op of the seq-th observation of proc.
	observation := func(b *builder, proc string, seq int64) *Op {
		for i := range b.ops {
			if op := &b.ops[i]; op.F == LogStart && op.Type == OK && op.Process == proc && op.Seq == seq {
				return op
			}
		}
		t.Fatalf("no observation %s %d", proc, seq)
		return nil
	}
	cases := []struct {
		name  string
		kind  Kind
		build func() *builder
	}{
		{"acked record at or above the log start missing", Lost, func() *builder {
			b := retained()
			f := final(b)
			f.Records = f.Records[1:] // a7 gone, the log start is 7
			return b
		}},
		{"the log start observed only before the final read", Lost, func() *builder {
			// The sampler saw 7 before the read, which could still have
			// found a0-a6 (for all the history shows): they are lost.
			b := retained()
			b.ops = slices.DeleteFunc(b.ops, func(op Op) bool { return op.F == LogStart && op.Process == "final" })
			return b
		}},
		{"a new member starts above the log start observed after", GroupSkip, func() *builder {
			b := retained()
			observation(b, "sampler", 1).Offsets = map[int32]int64{0: 3}
			return b
		}},
		{"a new member starts above every commit, nothing observed after", GroupSkip, func() *builder {
			b := &builder{}
			b.sent("p0", 0, "a0", OK, 0, 0)
			b.sent("p0", 1, "a1", OK, 0, 1)
			b.logStart("sampler", 0, map[int32]int64{0: 1}) // before: proves nothing
			b.assign("c0", 0)
			b.poll("c0", rec(0, 1, "a1"))
			b.final(rec(0, 0, "a0"), rec(0, 1, "a1"))
			return b
		}},
		{"a consumer jumps past the log start observed after", PollSkip, func() *builder {
			b := retained()
			observation(b, "sampler", 3).Offsets = map[int32]int64{0: 6}
			observation(b, "final", 0).Offsets = map[int32]int64{0: 6}
			f := final(b)
			f.Records = append([]Record{rec(0, 6, "a6")}, f.Records...)
			return b
		}},
		{"a value stored twice", Duplicate, func() *builder {
			b := retained()
			f := final(b)
			f.Records = append(f.Records, rec(0, 9, "a8"))
			return b
		}},
		{"a failed send read", Unexpected, func() *builder {
			b := retained()
			b.sent("p1", 0, "x0", Fail, 0, 0)
			b.poll("c1", rec(0, 8, "x0"))
			return b
		}},
		{"an acknowledged commit below an earlier one", CommitRegressed, func() *builder {
			b := retained()
			b.commit("c1", OK, map[int32]int64{0: 7})
			return b
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := CheckRetention(c.build().ops)
			wantOnly(t, c.kind, s.Violations, s.String())
		})
	}
}
