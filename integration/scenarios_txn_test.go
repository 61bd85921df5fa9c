package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// txnValues lists the output values of a transactions check of n inputs:
// the copies, optionally the aborted records, and the second commit.
func txnValues(n int, aborted bool) []string {
	var v []string
	for i := range n {
		v = append(v, fmt.Sprintf("copy-in-%d", i))
	}
	for i := range n / 2 {
		if aborted {
			v = append(v, fmt.Sprintf("aborted-%d", i))
		}
		v = append(v, fmt.Sprintf("commit2-%d", i))
	}
	return v
}

func txnReportLine(t *testing.T, r txnReport) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return "some log line\n" + string(b) + "\n"
}

func goodTxnReport(n int) txnReport {
	return txnReport{Client: "test", Input: n, Acked: map[string]int{"copy": n, "aborted": n / 2, "commit2": n / 2},
		GroupOffset: int64(n), ReadCommitted: txnValues(n, false), ReadUncommitted: txnValues(n, true)}
}

func TestCheckTxnReport(t *testing.T) {
	const n = 10
	intp := func(v int) *int { return &v }
	cases := []struct {
		name    string
		mutate  func(r *txnReport)
		wantErr string // "" for a pass
	}{
		{"good", func(*txnReport) {}, ""},
		{"aborted records visible to read_committed", func(r *txnReport) { r.ReadCommitted = txnValues(n, true) },
			"read_committed consumer saw 5 distinct aborted values, want 0"},
		{"aborted records never written", func(r *txnReport) { r.ReadUncommitted = txnValues(n, false) },
			"read_uncommitted consumer saw 0 distinct aborted values, want 5"},
		{"a committed record missing", func(r *txnReport) { r.ReadCommitted = r.ReadCommitted[1:] },
			"read_committed consumer saw 9 distinct copy values, want 10"},
		{"a duplicate", func(r *txnReport) { r.ReadCommitted = append(r.ReadCommitted, "commit2-0") },
			"read_committed consumer saw 1 duplicates"},
		{"an unknown value", func(r *txnReport) { r.ReadCommitted = append(r.ReadCommitted, "commit2-5") },
			"1 unexpected values (commit2-5)"},
		{"the aborted offset reached the group", func(r *txnReport) { r.GroupOffset = 1 }, "group offset on the input is 1, want 10"},
		{"an unacknowledged record", func(r *txnReport) { r.Acked["commit2"]-- }, "4 commit2 records acknowledged, want 5"},
		{"Java 4 under TV2 bumps the epoch", func(r *txnReport) {
			r.Client, r.TransactionVersion, r.ProducerEpoch = "java-4.3.1", intp(2), intp(3)
		}, ""},
		{"Java 4 under TV2 without the bumps", func(r *txnReport) {
			r.Client, r.TransactionVersion, r.ProducerEpoch = "java-4.3.1", intp(2), intp(0)
		}, "producer epoch 0 after 3 transactions, want 3 (transactions V2 under transaction.version 2)"},
		{"Java 3 under TV2 stays at V1", func(r *txnReport) {
			r.Client, r.TransactionVersion, r.ProducerEpoch = "java-3.9.2", intp(2), intp(0)
		}, ""},
		{"Java 4 under TV1 stays at V1", func(r *txnReport) {
			r.Client, r.TransactionVersion, r.ProducerEpoch = "java-4.3.1", intp(0), intp(3)
		}, "want 0 (transactions V1 under transaction.version 0)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := goodTxnReport(n)
			c.mutate(&r)
			_, err := checkTxnReport(txnReportLine(t, r), n)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("want a pass, got %v", err)
			case c.wantErr != "" && err == nil:
				t.Fatalf("want an error containing %q, got a pass", c.wantErr)
			case c.wantErr != "" && !strings.Contains(err.Error(), c.wantErr):
				t.Fatalf("error %q does not contain %q", err, c.wantErr)
			}
		})
	}
	if _, err := checkTxnReport("no json here\n", n); err == nil {
		t.Fatal("a program that printed no report passed")
	}
}

func TestCheckKafkaGoTxnReport(t *testing.T) {
	for _, c := range []struct {
		line string
		ok   bool
	}{
		{`{"client":"kafka-go","input":100,"offsets":[50,50,100],"fenced":"90"}`, true},
		{`{"client":"kafka-go","input":100,"offsets":[50,50,100],"fenced":"47"}`, true},
		{`{"client":"kafka-go","input":100,"offsets":[50,1,100],"fenced":"90"}`, false},    // the abort applied
		{`{"client":"kafka-go","input":100,"offsets":[-1,50,100],"fenced":"90"}`, false},   // a commit never visible
		{`{"client":"kafka-go","input":100,"offsets":[50,50,100],"fenced":"none"}`, false}, // no fencing
		{`{"client":"kafka-go","input":99,"offsets":[50,50,100],"fenced":"90"}`, false},
		{`not json`, false},
	} {
		if _, err := checkKafkaGoTxnReport(c.line, 100); (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok=%v", c.line, err, c.ok)
		}
	}
}
