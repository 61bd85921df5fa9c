package faults

import (
	"fmt"
	"sort"
	"strings"
)

// The share queue's invariants (KIP-932): every acknowledged record is
// eventually accepted or archived, none is handed over again once its
// acceptance was confirmed, none past the delivery limit.
const (
	// ShareLost: an acknowledged send that no member was ever handed.
	ShareLost Kind = "share-lost"
	// ShareStuck: at the end, a partition still has records to deliver
	// (shareBehind).
	ShareStuck Kind = "share-stuck"
	// ShareAcceptedAgain: a record handed over again after a member's
	// acceptance of it was confirmed.
	ShareAcceptedAgain Kind = "share-accepted-again"
	// ShareOverLimit: a record handed over with a delivery count above
	// share.delivery.count.limit, or below 1.
	ShareOverLimit Kind = "share-over-limit"
	// ShareUnexpected: a value handed over that no share send wrote (or
	// whose send certainly failed), or at another position than its
	// acknowledged one.
	ShareUnexpected Kind = "share-unexpected"
)

// ShareKinds are the share kinds, in the order the summary prints them.
var ShareKinds = []Kind{ShareLost, ShareStuck, ShareAcceptedAgain, ShareOverLimit, ShareUnexpected}

// ShareSummary is what CheckShare found.
type ShareSummary struct {
	Sends, Acked, Failed, Indeterminate int
	Polls, Delivered                    int
	// Redelivered counts deliveries of a record after its first.
	Redelivered int
	// AcceptsOK and AcceptsUnknown count acceptances confirmed and not;
	// Accepted is how many records had one confirmed.
	AcceptsOK, AcceptsUnknown, Accepted int
	MaxDeliveries                       int32
	Violations                          []Violation
}

// Count is the number of violations of kind k.
func (s ShareSummary) Count(k Kind) int { return countKind(s.Violations, k) }

func (s ShareSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "writes: %d sent, %d acked, %d failed, %d indeterminate; deliveries: %d polls, %d records (%d redelivered, most deliveries of one record %d); "+
		"acceptances: %d confirmed, %d not, %d records accepted\n",
		s.Sends, s.Acked, s.Failed, s.Indeterminate, s.Polls, s.Delivered, s.Redelivered, s.MaxDeliveries, s.AcceptsOK, s.AcceptsUnknown, s.Accepted)
	writeViolations(&b, s.Violations, ShareKinds)
	return b.String()
}

// CheckShare reads a history's share operations (ShareWorkload's) and
// reports their counts and every violation of the share kinds. A history
// without a ShareFinal cannot show that nothing was left behind: that is
// a ShareStuck violation of its own.
func CheckShare(ops []Op) ShareSummary {
	var s ShareSummary
	sends, order := collectSends(ops, ShareSend)
	for _, sd := range order {
		s.Sends++
		tally(sd.outcome, &s.Acked, &s.Failed, &s.Indeterminate)
	}
	add := func(k Kind, format string, args ...any) {
		s.Violations = append(s.Violations, Violation{Kind: k, Detail: fmt.Sprintf(format, args...)})
	}
	delivered := map[string]int{}
	acceptedAt := map[string]int{} // value -> index of the op that confirmed its acceptance
	var final *Op
	for i := range ops {
		op := &ops[i]
		switch {
		case op.F == SharePoll && op.Type == OK:
			s.Polls++
			for _, r := range op.Records {
				s.Delivered++
				if delivered[r.Value] > 0 {
					s.Redelivered++
				}
				delivered[r.Value]++
				s.MaxDeliveries = max(s.MaxDeliveries, r.Deliveries)
				if r.Deliveries < 1 || r.Deliveries > ShareDeliveryLimit {
					add(ShareOverLimit, "%s (%d/%d) handed to %s with delivery count %d (op %d)", r.Value, r.Partition, r.Offset, op.Process, r.Deliveries, op.Index)
				}
				if at, ok := acceptedAt[r.Value]; ok {
					add(ShareAcceptedAgain, "%s (%d/%d) handed to %s (op %d) after its acceptance was confirmed (op %d)", r.Value, r.Partition, r.Offset, op.Process, op.Index, at)
				}
				sd := sends[r.Value]
				switch {
				case sd == nil:
					add(ShareUnexpected, "%s (%d/%d) handed over, never sent", r.Value, r.Partition, r.Offset)
				case sd.outcome == Fail:
					add(ShareUnexpected, "%s (%d/%d) handed over, its send failed", r.Value, r.Partition, r.Offset)
				case sd.outcome == OK && sd.at != (position{r.Partition, r.Offset}):
					add(ShareUnexpected, "%s acknowledged at %s, handed over at %d/%d", r.Value, sd.at, r.Partition, r.Offset)
				}
			}
		case op.F == ShareAccept && op.Type == OK:
			s.AcceptsOK++
			for _, r := range op.Records {
				if _, ok := acceptedAt[r.Value]; !ok {
					acceptedAt[r.Value] = op.Index
					s.Accepted++
				}
			}
		case op.F == ShareAccept && (op.Type == Info || op.Type == Fail):
			s.AcceptsUnknown++
		case op.F == ShareFinal && op.Type == OK:
			final = op
		}
	}
	for _, sd := range order {
		if sd.outcome == OK && delivered[sd.value] == 0 {
			add(ShareLost, "%s (%s seq %d) acknowledged at %s, never handed to a member", sd.value, sd.process, sd.seq, sd.at)
		}
	}
	if final == nil {
		add(ShareStuck, "no final share-group offsets: nothing shows that the %d acknowledged records were all accepted or archived", s.Acked)
		return s
	}
	for _, b := range shareBehind(*final) {
		add(ShareStuck, "%s", b)
	}
	return s
}

// shareBehind describes each partition of a ShareFinal op that still has
// records neither accepted nor archived: a lag above 0 where the broker
// gives one (KIP-1226; Kafka's start offset may stay behind records
// already accepted, which the lag counts as delivered), else a start
// offset below the end offset.
func shareBehind(final Op) []string {
	var ps []int32
	for p := range final.Ends {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	var out []string
	for _, p := range ps {
		end := final.Ends[p]
		start, known := final.Offsets[p]
		lag, hasLag := final.Lags[p]
		switch {
		case end == 0:
		case hasLag && lag >= 0:
			if lag > 0 {
				out = append(out, fmt.Sprintf("partition %d: lag %d (start offset %d, end offset %d)", p, lag, start, end))
			}
		case !known || start < end:
			out = append(out, fmt.Sprintf("partition %d: share-partition start offset %s, end offset %d, no lag given", p, committedString(start, known), end))
		}
	}
	return out
}
