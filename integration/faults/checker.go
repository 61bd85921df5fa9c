package faults

import (
	"fmt"
	"sort"
	"strings"
)

// Kind names an invariant a history can break.
type Kind string

const (
	// Lost: a send was acknowledged, and the final read does not have it.
	Lost Kind = "lost"
	// Duplicate: one value stored at two positions (partition, offset),
	// which an idempotent producer never causes.
	Duplicate Kind = "duplicate"
	// OffsetMismatch: a value was acknowledged at one position and read
	// at another.
	OffsetMismatch Kind = "offset-mismatch"
	// Reorder: two acknowledged sends of one producer to one partition
	// are stored in the other order than they were sent.
	Reorder Kind = "reorder"
	// Unexpected: a value was read that no producer sent, or whose send
	// certainly failed.
	Unexpected Kind = "unexpected"
	// PollNonMonotonic: while a consumer held a partition, a poll handed
	// it an offset at or below one it had already had.
	PollNonMonotonic Kind = "poll-nonmonotonic"
	// PollSkip: while a consumer held a partition, it was handed an offset
	// past the next one. The suite's topics have dense offsets (no
	// transactions, no compaction), so every offset holds a record
	// (CheckRetention: unless retention deleted the ones skipped).
	PollSkip Kind = "poll-skip"
	// CommitRegressed: a partition's committed offset went below one
	// already acknowledged: a later acknowledged commit was smaller, a
	// consumer given the partition after the commit started reading
	// below it, or the final committed offsets are below it.
	CommitRegressed Kind = "commit-regressed"
	// GroupSkip: a consumer given a partition started reading above every
	// offset a commit so far may have set (0 when none): the group as a
	// whole skipped the records in between (CheckRetention: unless
	// retention deleted them).
	GroupSkip Kind = "group-skip"
)

// Kinds are all the kinds, in the order the summary prints them.
var Kinds = []Kind{Lost, Duplicate, OffsetMismatch, Reorder, Unexpected, PollNonMonotonic, PollSkip, CommitRegressed, GroupSkip}

// Violation is one broken invariant, with what shows it.
type Violation struct {
	Kind   Kind
	Detail string
}

// Summary is what Check found: counts of operations and the violations.
type Summary struct {
	Sends, Acked, Failed, Indeterminate int
	// IndeterminateSeen is how many indeterminate sends the final read
	// holds (they happened after all).
	IndeterminateSeen int
	Polls, Polled     int // ok polls, and the records they handed over
	Redelivered       int // records a consumer was handed again at the same position (allowed)
	CommitsOK         int
	CommitsFailed     int // failed or indeterminate commits
	Faults            int // faults injected
	FinalRead         int // records in the final read
	// Retention is set by CheckRetention: records may have been deleted.
	// Expired is how many acknowledged sends the final read lacks below
	// the log start observed after it; Resets how many times a consumer
	// was handed an offset past the next one (or past every commit) that
	// the log start observed after that poll had passed; LogStarts how
	// many LogStart observations there were.
	Retention                  bool
	Expired, Resets, LogStarts int
	Violations                 []Violation
}

// Count is the number of violations of kind k.
func (s Summary) Count(k Kind) int { return countKind(s.Violations, k) }

// String is the summary for a test log: one line of counts, one line of
// violations by kind, then the first few violations of each kind.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "writes: %d sent, %d acked, %d failed, %d indeterminate (%d of them in the log); "+
		"reads: %d polls, %d records (%d redelivered), final read %d records; commits: %d ok, %d failed or indeterminate; faults: %d\n",
		s.Sends, s.Acked, s.Failed, s.Indeterminate, s.IndeterminateSeen, s.Polls, s.Polled, s.Redelivered, s.FinalRead, s.CommitsOK, s.CommitsFailed, s.Faults)
	if s.Retention {
		fmt.Fprintf(&b, "retention: %d acknowledged records deleted before the final read; %d consumer jumps past deleted offsets; %d log start observations\n",
			s.Expired, s.Resets, s.LogStarts)
	}
	writeViolations(&b, s.Violations, Kinds)
	return b.String()
}

// tally counts an outcome: OK, Fail, or anything else (unknown).
func tally(t Type, ok, failed, unknown *int) {
	switch t {
	case OK:
		*ok++
	case Fail:
		*failed++
	default:
		*unknown++
	}
}

type position struct {
	partition int32
	offset    int64
}

func (p position) String() string { return fmt.Sprintf("%d/%d", p.partition, p.offset) }

// send is one send's invocation and what became of it.
type send struct {
	process string
	seq     int64
	key     string
	value   string
	outcome Type // OK, Fail or Info (Info too when it never completed)
	at      position
}

// Check reads a history and reports its counts and every violation of
// the queue invariants (see the Kind constants). A history with no ok
// final read cannot show that nothing was lost: that is reported as a
// lost violation of its own rather than passed.
func Check(ops []Op) Summary { return check(ops, nil) }

// CheckRetention is Check for a topic whose retention deletes records
// all along, which the history's LogStart observations show. Log start
// offsets only move forward, so an observation invoked after an
// operation completed bounds from above where the log started at any
// moment of that operation. Then an acknowledged record the final read
// lacks is not lost when its offset is below the log start first
// observed after the read completed (it may have been deleted before the
// read reached it); and a consumer that jumps past the next offset, or
// past every commit when given a partition, to offset x skips nothing
// when x is at most the log start first observed after that poll
// completed (it may have been reset to the log start of that moment,
// everything below being deleted). Without such an observation nothing
// is excused. Everything else is checked as Check does.
func CheckRetention(ops []Op) Summary {
	tl := collectLogStarts(ops)
	s := check(ops, tl)
	s.Retention, s.LogStarts = true, len(tl)
	return s
}

// logStartObs is one LogStart observation: the index of its invocation
// and the log starts it returned.
type logStartObs struct {
	invoked int
	starts  map[int32]int64
}

// startTimeline is a history's ok LogStart observations in the order they
// were invoked; nil for Check, which excuses nothing.
type startTimeline []logStartObs

func collectLogStarts(ops []Op) startTimeline {
	type call struct {
		process string
		seq     int64
	}
	invoked := map[call]int{}
	tl := startTimeline{}
	for _, op := range ops {
		if op.F != LogStart {
			continue
		}
		c := call{op.Process, op.Seq}
		switch op.Type {
		case Invoke:
			invoked[c] = op.Index
		case OK:
			if i, ok := invoked[c]; ok {
				tl = append(tl, logStartObs{i, op.Offsets})
			}
		}
	}
	sort.SliceStable(tl, func(i, j int) bool { return tl[i].invoked < tl[j].invoked })
	return tl
}

// after is partition p's log start as the first observation invoked
// after op index i saw it, or -1 when none did.
func (tl startTimeline) after(i int, p int32) int64 {
	j := sort.Search(len(tl), func(j int) bool { return tl[j].invoked > i })
	for ; j < len(tl); j++ {
		if s, ok := tl[j].starts[p]; ok {
			return s
		}
	}
	return -1
}

// deleted reports whether retention may have deleted every offset below
// x of partition p by the time op index i completed: x is at most the
// log start first observed after it.
func (tl startTimeline) deleted(i int, p int32, x int64) bool {
	return tl != nil && x <= tl.after(i, p)
}

func check(ops []Op, tl startTimeline) Summary {
	var s Summary
	sends, order := collectSends(ops, Send)
	var final *Op
	for i := range ops {
		op := &ops[i]
		switch op.F {
		case FinalRead:
			if op.Type == OK {
				final = op
			}
		case Fault:
			if op.Value == FaultStart {
				s.Faults++
			}
		case Commit:
			switch op.Type {
			case OK:
				s.CommitsOK++
			case Fail, Info:
				s.CommitsFailed++
			}
		case Poll:
			if op.Type == OK {
				s.Polls++
				s.Polled += len(op.Records)
			}
		}
	}
	for _, sd := range order {
		s.Sends++
		tally(sd.outcome, &s.Acked, &s.Failed, &s.Indeterminate)
	}
	add := func(k Kind, format string, args ...any) {
		s.Violations = append(s.Violations, Violation{Kind: k, Detail: fmt.Sprintf(format, args...)})
	}

	// Where each value is stored, from everything that read it.
	stored := map[string]map[position]bool{}
	note := func(r Record) {
		if stored[r.Value] == nil {
			stored[r.Value] = map[position]bool{}
		}
		stored[r.Value][position{r.Partition, r.Offset}] = true
	}
	finalAt := map[string]map[position]bool{}
	if final == nil {
		add(Lost, "no successful final read: nothing shows that the %d acknowledged values survived", s.Acked)
	} else {
		s.FinalRead = len(final.Records)
		for _, r := range final.Records {
			note(r)
			if finalAt[r.Value] == nil {
				finalAt[r.Value] = map[position]bool{}
			}
			finalAt[r.Value][position{r.Partition, r.Offset}] = true
		}
	}
	for _, op := range ops {
		if op.F == Poll && op.Type == OK {
			for _, r := range op.Records {
				note(r)
			}
		}
	}

	expired := func(sd *send) bool { return final != nil && tl.deleted(final.Index, sd.at.partition, sd.at.offset+1) }
	checkValues(&s, add, order, sends, stored, finalAt, final != nil, expired)
	checkOrder(add, order)
	checkPolls(&s, add, ops, tl)
	checkCommits(add, ops)
	checkGroupSkip(&s, add, ops, tl)
	return s
}

// collectSends is the sends of ops whose Func is f: by value (values are
// unique) and in invocation order, each with its outcome.
func collectSends(ops []Op, f Func) (map[string]*send, []*send) {
	sends := map[string]*send{}
	var order []*send
	for _, op := range ops {
		if op.F != f {
			continue
		}
		switch op.Type {
		case Invoke:
			sd := &send{process: op.Process, seq: op.Seq, key: op.Key, value: op.Value, outcome: Info}
			sends[op.Value] = sd
			order = append(order, sd)
		case OK, Fail, Info:
			if sd := sends[op.Value]; sd != nil {
				sd.outcome = op.Type
				sd.at = position{op.Partition, op.Offset}
			}
		}
	}
	return sends, order
}

// checkValues: every acknowledged send is in the final read (unless
// expired says retention deleted it), where it was acknowledged; every
// value read was sent, by a send that did not fail, and is stored once.
func checkValues(s *Summary, add func(Kind, string, ...any), order []*send, sends map[string]*send,
	stored map[string]map[position]bool, finalAt map[string]map[position]bool, haveFinal bool, expired func(*send) bool) {
	for _, sd := range order {
		at, inFinal := finalAt[sd.value]
		switch {
		case sd.outcome == OK && haveFinal && !inFinal && expired(sd):
			s.Expired++
		case sd.outcome == OK && haveFinal && !inFinal:
			add(Lost, "%s (%s seq %d) acknowledged at %s, not in the final read", sd.value, sd.process, sd.seq, sd.at)
		case sd.outcome == OK && inFinal && !at[sd.at]:
			add(OffsetMismatch, "%s acknowledged at %s, read at %s", sd.value, sd.at, positions(at))
		case sd.outcome == Info && inFinal:
			s.IndeterminateSeen++
		}
	}
	var values []string
	for v := range stored {
		values = append(values, v)
	}
	sort.Strings(values)
	for _, v := range values {
		at := stored[v]
		if len(at) > 1 {
			add(Duplicate, "%s stored at %s", v, positions(at))
		}
		sd := sends[v]
		switch {
		case sd == nil:
			add(Unexpected, "%s read, never sent", v)
		case sd.outcome == Fail:
			add(Unexpected, "%s read, its send failed", v)
		}
	}
}

func positions(set map[position]bool) string {
	var ps []string
	for p := range set {
		ps = append(ps, p.String())
	}
	sort.Strings(ps)
	return strings.Join(ps, ", ")
}

// checkOrder holds each producer's acknowledged sends to one partition to
// the order it sent them in.
func checkOrder(add func(Kind, string, ...any), order []*send) {
	type stream struct {
		process   string
		partition int32
	}
	last := map[stream]*send{}
	for _, sd := range order { // invocation order
		if sd.outcome != OK {
			continue
		}
		st := stream{sd.process, sd.at.partition}
		if prev := last[st]; prev != nil && prev.seq < sd.seq && sd.at.offset <= prev.at.offset {
			add(Reorder, "%s sent %s (seq %d) then %s (seq %d) to partition %d; stored at offsets %d then %d",
				sd.process, prev.value, prev.seq, sd.value, sd.seq, sd.at.partition, prev.at.offset, sd.at.offset)
		}
		if prev := last[st]; prev == nil || sd.seq > prev.seq {
			last[st] = sd
		}
	}
}

// checkPolls follows each consumer's hold on each partition: from an
// assignment to its revocation, offsets go up one at a time (or jump to
// where retention had deleted everything below, tl); offsets it is
// handed again at the same position after a new assignment are
// redeliveries, allowed for an at-least-once consumer.
func checkPolls(s *Summary, add func(Kind, string, ...any), ops []Op, tl startTimeline) {
	type hold struct {
		process   string
		partition int32
	}
	next := map[hold]int64{} // next offset expected; absent: not held or nothing read yet
	seen := map[position]bool{}
	for _, op := range ops {
		if op.Type != OK && op.Type != Info {
			continue
		}
		switch op.F {
		case Assign, Revoke:
			for p := range op.Offsets {
				delete(next, hold{op.Process, p})
			}
		case Poll:
			if op.Type != OK {
				continue
			}
			for _, r := range op.Records {
				pos := position{r.Partition, r.Offset}
				if seen[pos] {
					s.Redelivered++
				}
				seen[pos] = true
				h := hold{op.Process, r.Partition}
				want, held := next[h]
				switch {
				case held && r.Offset < want:
					add(PollNonMonotonic, "%s read partition %d offset %d after offset %d (op %d)", op.Process, r.Partition, r.Offset, want-1, op.Index)
				case held && r.Offset > want && tl.deleted(op.Index, r.Partition, r.Offset):
					s.Resets++
				case held && r.Offset > want:
					add(PollSkip, "%s read partition %d offset %d after offset %d, skipping %d (op %d)", op.Process, r.Partition, r.Offset, want-1, r.Offset-want, op.Index)
				}
				if !held || r.Offset >= want {
					next[h] = r.Offset + 1
				}
			}
		}
	}
}

// checkCommits holds committed offsets to never going below one already
// acknowledged: by a later acknowledged commit, by where a consumer given
// the partition afterwards starts, or in the final committed offsets.
func checkCommits(add func(Kind, string, ...any), ops []Op) {
	type acked struct {
		offset int64
		op     int
	}
	high := map[int32]acked{} // highest acknowledged commit so far
	// fresh marks holds that have polled nothing since their assignment;
	// its value is the highest acknowledged commit when it was assigned.
	type hold struct {
		process   string
		partition int32
	}
	fresh := map[hold]acked{}
	for _, op := range ops {
		switch {
		case op.F == Commit && op.Type == OK:
			for p, o := range op.Offsets {
				if h, ok := high[p]; ok && o < h.offset {
					add(CommitRegressed, "%s committed partition %d at %d (op %d) after %d was acknowledged (op %d)", op.Process, p, o, op.Index, h.offset, h.op)
				}
				if h, ok := high[p]; !ok || o > h.offset {
					high[p] = acked{o, op.Index}
				}
			}
		case op.F == Assign && (op.Type == OK || op.Type == Info):
			for p := range op.Offsets {
				if h, ok := high[p]; ok {
					fresh[hold{op.Process, p}] = h
				}
			}
		case op.F == Revoke:
			for p := range op.Offsets {
				delete(fresh, hold{op.Process, p})
			}
		case op.F == Poll && op.Type == OK:
			firsts := map[int32]int64{}
			for _, r := range op.Records {
				if _, ok := firsts[r.Partition]; !ok {
					firsts[r.Partition] = r.Offset
				}
			}
			for p, o := range firsts {
				h := hold{op.Process, p}
				if c, ok := fresh[h]; ok {
					if o < c.offset {
						add(CommitRegressed, "%s was given partition %d after the commit of %d (op %d) and started reading at %d (op %d)", op.Process, p, c.offset, c.op, o, op.Index)
					}
					delete(fresh, h)
				}
			}
		case op.F == Committed && op.Type == OK:
			var ps []int32
			for p := range high {
				ps = append(ps, p)
			}
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			for _, p := range ps {
				if o, ok := op.Offsets[p]; !ok || o < high[p].offset {
					add(CommitRegressed, "final committed offset of partition %d is %s, below the acknowledged %d (op %d)", p, committedString(o, ok), high[p].offset, high[p].op)
				}
			}
		}
	}
}

func committedString(o int64, ok bool) string {
	if !ok {
		return "missing"
	}
	return fmt.Sprint(o)
}

// checkGroupSkip holds a consumer's first read of a partition it was
// given to start at or below the highest offset any commit invoked so far
// may have set (an indeterminate one too), or 0 when there was none, or
// where retention had deleted everything below (tl).
func checkGroupSkip(s *Summary, add func(Kind, string, ...any), ops []Op, tl startTimeline) {
	type hold struct {
		process   string
		partition int32
	}
	maybe := map[int32]int64{}
	fresh := map[hold]bool{}
	for _, op := range ops {
		switch {
		case op.F == Commit && op.Type == Invoke:
			for p, o := range op.Offsets {
				maybe[p] = max(maybe[p], o)
			}
		case op.F == Assign:
			for p := range op.Offsets {
				fresh[hold{op.Process, p}] = true
			}
		case op.F == Revoke:
			for p := range op.Offsets {
				delete(fresh, hold{op.Process, p})
			}
		case op.F == Poll && op.Type == OK:
			for _, r := range op.Records {
				h := hold{op.Process, r.Partition}
				if !fresh[h] {
					continue
				}
				delete(fresh, h)
				if r.Offset > maybe[r.Partition] && tl.deleted(op.Index, r.Partition, r.Offset) {
					s.Resets++
				} else if r.Offset > maybe[r.Partition] {
					add(GroupSkip, "%s was given partition %d and started reading at %d, above every commit so far (%d): offsets %d-%d skipped (op %d)",
						op.Process, r.Partition, r.Offset, maybe[r.Partition], maybe[r.Partition], r.Offset-1, op.Index)
				}
			}
		}
	}
}
