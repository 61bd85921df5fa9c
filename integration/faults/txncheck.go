package faults

import (
	"fmt"
	"sort"
	"strings"
)

// The transactions' invariants (CheckTxn); Duplicate and Unexpected are
// shared with the queue checker.
const (
	// TxnLost: a transaction's commit was acknowledged and the
	// read_committed final read has none of its records.
	TxnLost Kind = "txn-lost"
	// TxnPartial: the read_committed final read has some of a
	// transaction's records and not the others. (A poll may stop short of
	// a transaction's last batch, so only the final read is held to it.)
	TxnPartial Kind = "txn-partial"
	// AbortedRead: a read_committed read returned a record of a
	// transaction that did not commit.
	AbortedRead Kind = "aborted-read"
	// TxnReorder: in one partition, a producer's records of a later
	// transaction sit before those of an earlier one.
	TxnReorder Kind = "txn-reorder"
)

// TxnKinds are the kinds CheckTxn reports, in the order it prints them.
var TxnKinds = []Kind{TxnLost, TxnPartial, AbortedRead, Duplicate, Unexpected, TxnReorder}

// TxnSummary is what CheckTxn found.
type TxnSummary struct {
	Txns, Committed, Aborted, Indeterminate int
	// IndeterminateCommitted is how many indeterminate transactions the
	// final read holds whole (they committed after all).
	IndeterminateCommitted int
	Polls, Polled          int // read_committed polls, and their records
	FinalRead              int // records in the final read
	Violations             []Violation
}

// Count is the number of violations of kind k.
func (s TxnSummary) Count(k Kind) int { return countKind(s.Violations, k) }

func countKind(vs []Violation, k Kind) int {
	n := 0
	for _, v := range vs {
		if v.Kind == k {
			n++
		}
	}
	return n
}

// String is the summary for a test log, as Summary's.
func (s TxnSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "transactions: %d begun, %d committed, %d not committed, %d indeterminate (%d of them committed); "+
		"read_committed: %d polls, %d records; final read %d records\n",
		s.Txns, s.Committed, s.Aborted, s.Indeterminate, s.IndeterminateCommitted, s.Polls, s.Polled, s.FinalRead)
	writeViolations(&b, s.Violations, TxnKinds)
	return b.String()
}

// writeViolations writes the violation counts by kind, then the first
// few of each kind.
func writeViolations(b *strings.Builder, vs []Violation, kinds []Kind) {
	var counts []string
	for _, k := range kinds {
		counts = append(counts, fmt.Sprintf("%s=%d", k, countKind(vs, k)))
	}
	fmt.Fprintf(b, "violations: %d (%s)", len(vs), strings.Join(counts, " "))
	for _, k := range kinds {
		shown := 0
		for _, v := range vs {
			if v.Kind != k {
				continue
			}
			if shown == 5 {
				fmt.Fprintf(b, "\n  %s: … %d more", k, countKind(vs, k)-5)
				break
			}
			fmt.Fprintf(b, "\n  %s: %s", k, v.Detail)
			shown++
		}
	}
}

// txn is one transaction and what became of it.
type txn struct {
	name    string
	process string
	seq     int64
	writes  map[string]int32 // value -> partition written to
	outcome Type             // OK, Fail or Info (Info too when it never completed)
}

// CheckTxn holds a history's transactions to read_committed's
// guarantees (see TxnLost, TxnPartial, AbortedRead, TxnReorder) and to
// no record being stored twice or read that no transaction wrote there.
// A history with no ok TxnRead cannot show that no committed
// transaction was lost: that is a TxnLost violation of its own.
func CheckTxn(ops []Op) TxnSummary {
	var s TxnSummary
	txns := map[string]*txn{}
	var order []*txn
	of := map[string]*txn{} // value -> its transaction
	var final *Op
	var polls []*Op
	for i := range ops {
		op := &ops[i]
		switch {
		case op.F == Txn && op.Type == Invoke:
			t := &txn{name: op.Value, process: op.Process, seq: op.Seq, writes: map[string]int32{}, outcome: Info}
			for _, r := range op.Records {
				t.writes[r.Value] = r.Partition
				of[r.Value] = t
			}
			txns[t.name] = t
			order = append(order, t)
		case op.F == Txn:
			if t := txns[op.Value]; t != nil {
				t.outcome = op.Type
			}
		case op.F == TxnPoll && op.Type == OK:
			polls = append(polls, op)
			s.Polls++
			s.Polled += len(op.Records)
		case op.F == TxnRead && op.Type == OK:
			final = op
		}
	}
	for _, t := range order {
		s.Txns++
		tally(t.outcome, &s.Committed, &s.Aborted, &s.Indeterminate)
	}
	add := func(k Kind, format string, args ...any) {
		s.Violations = append(s.Violations, Violation{Kind: k, Detail: fmt.Sprintf(format, args...)})
	}

	// Every record read, final or polled: written by a transaction, to
	// that partition, by one that did not certainly fail, at one position.
	stored := map[string]map[position]bool{}
	readRecord := func(r Record, where string) {
		if stored[r.Value] == nil {
			stored[r.Value] = map[position]bool{}
		}
		stored[r.Value][position{r.Partition, r.Offset}] = true
		t := of[r.Value]
		switch {
		case t == nil:
			add(Unexpected, "%s read at %d/%d by %s, no transaction wrote it", r.Value, r.Partition, r.Offset, where)
		case t.writes[r.Value] != r.Partition:
			add(Unexpected, "%s read at %d/%d by %s, written to partition %d", r.Value, r.Partition, r.Offset, where, t.writes[r.Value])
		case t.outcome == Fail:
			add(AbortedRead, "%s of %s (not committed) read at %d/%d by %s", r.Value, t.name, r.Partition, r.Offset, where)
		}
	}
	if final == nil {
		add(TxnLost, "no successful read_committed final read: nothing shows that the %d committed transactions survived", s.Committed)
	} else {
		s.FinalRead = len(final.Records)
		for _, r := range final.Records {
			readRecord(r, "the final read")
		}
	}
	for _, p := range polls {
		for _, r := range p.Records {
			readRecord(r, fmt.Sprintf("poll op %d", p.Index))
		}
	}
	var values []string
	for v, at := range stored {
		if len(at) > 1 {
			values = append(values, v)
		}
	}
	sort.Strings(values)
	for _, v := range values {
		add(Duplicate, "%s stored at %s", v, positions(stored[v]))
	}
	if final != nil {
		checkFinalAtomic(&s, add, order, final)
		checkTxnOrder(add, final, of)
	}
	return s
}

// checkFinalAtomic: each transaction is in the final read whole or not
// at all, and whole when it committed.
func checkFinalAtomic(s *TxnSummary, add func(Kind, string, ...any), order []*txn, final *Op) {
	seen := map[string]bool{}
	for _, r := range final.Records {
		seen[r.Value] = true
	}
	for _, t := range order {
		var have, missing []string
		for v := range t.writes {
			if seen[v] {
				have = append(have, v)
			} else {
				missing = append(missing, v)
			}
		}
		sort.Strings(have)
		sort.Strings(missing)
		switch {
		case len(have) > 0 && len(missing) > 0:
			add(TxnPartial, "%s (%s) in the final read without %v (has %v)", t.name, t.outcome, missing, have)
		case len(have) == 0 && t.outcome == OK:
			add(TxnLost, "%s (%s seq %d) committed, none of its %d records in the final read", t.name, t.process, t.seq, len(t.writes))
		case len(missing) == 0 && t.outcome == Info:
			s.IndeterminateCommitted++
		}
	}
}

// checkTxnOrder: in each partition of the final read, each producer's
// transactions come in the order it ran them.
func checkTxnOrder(add func(Kind, string, ...any), final *Op, of map[string]*txn) {
	type stream struct {
		process   string
		partition int32
	}
	last := map[stream]Record{}
	for _, r := range final.Records { // sorted by partition, then offset
		t := of[r.Value]
		if t == nil {
			continue
		}
		st := stream{t.process, r.Partition}
		if prev, ok := last[st]; ok && of[prev.Value].seq > t.seq {
			add(TxnReorder, "partition %d: %s of %s (seq %d) at offset %d after %s of %s (seq %d) at offset %d",
				r.Partition, r.Value, t.name, t.seq, r.Offset, prev.Value, of[prev.Value].name, of[prev.Value].seq, prev.Offset)
		}
		last[st] = r
	}
}
