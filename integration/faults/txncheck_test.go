package faults

import (
	"fmt"
	"testing"
)

// txn appends one transaction's ops: its writes (value "<name>-<j>" to
// partition ps[j]) and its outcome (Invoke alone: it never completed).
func (b *builder) txn(proc string, seq int64, name string, outcome Type, ps ...int32) {
	inv := Op{Process: proc, Type: Invoke, F: Txn, Seq: seq, Value: name}
	for j, p := range ps {
		inv.Records = append(inv.Records, Record{Partition: p, Value: fmt.Sprintf("%s-%d", name, j)})
	}
	b.add(inv)
	if outcome != Invoke {
		b.add(Op{Process: proc, Type: outcome, F: Txn, Seq: seq, Value: name})
	}
}

func (b *builder) txnPoll(recs ...Record) {
	b.add(Op{Process: "txn-reader", Type: OK, F: TxnPoll, Records: recs})
}

func (b *builder) txnRead(recs ...Record) {
	b.add(Op{Process: "final", Type: Invoke, F: TxnRead})
	b.add(Op{Process: "final", Type: OK, F: TxnRead, Records: recs})
}

// healthyTxns: two producers; t0-0 and t1-0 commit, t0-1 is aborted,
// t1-1's commit outcome is unknown and it committed, t0-2's is unknown
// and it did not; the reader sees a prefix. Offsets leave gaps where
// markers and aborted records sit.
func healthyTxns() *builder {
	b := &builder{}
	b.txn("tp0", 0, "t0-0", OK, 0, 1)
	b.txn("tp1", 0, "t1-0", OK, 1, 2, 3)
	b.txn("tp0", 1, "t0-1", Fail, 0, 2)
	b.txnPoll(rec(0, 0, "t0-0-0"), rec(1, 0, "t0-0-1"))
	b.txn("tp1", 1, "t1-1", Info, 0, 3)
	b.txn("tp0", 2, "t0-2", Info, 4, 5)
	b.txnPoll(rec(1, 2, "t1-0-0"), rec(2, 0, "t1-0-1"))
	b.txnRead(
		rec(0, 0, "t0-0-0"), rec(0, 4, "t1-1-0"),
		rec(1, 0, "t0-0-1"), rec(1, 2, "t1-0-0"),
		rec(2, 0, "t1-0-1"),
		rec(3, 0, "t1-0-2"), rec(3, 2, "t1-1-1"),
	)
	return b
}

func TestCheckTxnHealthyHistory(t *testing.T) {
	s := CheckTxn(healthyTxns().ops)
	if len(s.Violations) != 0 {
		t.Fatalf("violations in a healthy history:\n%s", s)
	}
	if s.Txns != 5 || s.Committed != 2 || s.Aborted != 1 || s.Indeterminate != 2 || s.IndeterminateCommitted != 1 {
		t.Errorf("transaction counts: %+v", s)
	}
	if s.Polls != 2 || s.Polled != 4 || s.FinalRead != 7 {
		t.Errorf("read counts: %+v", s)
	}
	t.Log(s)
}

// TestCheckTxnFindsEachViolation breaks the healthy history in one way
// per case and wants exactly that kind reported.
func TestCheckTxnFindsEachViolation(t *testing.T) {
	final := func(b *builder) *Op { return &b.ops[len(b.ops)-1] }
	cases := []struct {
		name  string
		kind  Kind
		build func() *builder
	}{
		{"a committed transaction missing from the final read", TxnLost, func() *builder {
			b := healthyTxns()
			b.txn("tp0", 3, "t0-3", OK, 5)
			return b
		}},
		{"no final read at all", TxnLost, func() *builder {
			b := &builder{}
			b.txn("tp0", 0, "t0-0", OK, 0)
			return b
		}},
		{"half a committed transaction", TxnPartial, func() *builder {
			b := healthyTxns()
			f := final(b)
			f.Records = append(f.Records[:2:2], f.Records[3:]...) // drops t0-0-1
			return b
		}},
		{"half an indeterminate transaction", TxnPartial, func() *builder {
			b := healthyTxns()
			f := final(b)
			f.Records = append(f.Records, rec(4, 0, "t0-2-0"))
			return b
		}},
		{"an aborted record in the final read", AbortedRead, func() *builder {
			b := healthyTxns()
			f := final(b)
			// Both of t0-1's records, so that it is no partial transaction too.
			f.Records = append(f.Records, rec(0, 6, "t0-1-0"), rec(2, 2, "t0-1-1"))
			return b
		}},
		{"an aborted record in a poll", AbortedRead, func() *builder {
			b := healthyTxns()
			b.txnPoll(rec(0, 2, "t0-1-0"))
			return b
		}},
		{"a record read at two offsets", Duplicate, func() *builder {
			b := healthyTxns()
			b.txnPoll(rec(0, 1, "t0-0-0"))
			return b
		}},
		{"a record no transaction wrote", Unexpected, func() *builder {
			b := healthyTxns()
			f := final(b)
			f.Records = append(f.Records, rec(5, 0, "zz"))
			return b
		}},
		{"a record read on another partition than written", Unexpected, func() *builder {
			b := &builder{}
			b.txn("tp0", 0, "t0-0", OK, 0)
			b.txnRead(rec(1, 0, "t0-0-0"))
			return b
		}},
		{"a producer's later transaction before its earlier one", TxnReorder, func() *builder {
			b := &builder{}
			b.txn("tp0", 0, "t0-0", OK, 0)
			b.txn("tp0", 1, "t0-1", OK, 0)
			b.txnRead(rec(0, 0, "t0-1-0"), rec(0, 2, "t0-0-0"))
			return b
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := CheckTxn(c.build().ops)
			wantOnly(t, c.kind, s.Violations, s.String())
		})
	}
}
