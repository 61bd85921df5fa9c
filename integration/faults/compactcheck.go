package faults

import (
	"fmt"
	"sort"
	"strings"
)

// KeyStale is the compacted topic's own invariant (CheckCompacted): for
// a key, the final read's latest record (its highest offset) is neither
// the key's last acknowledged write (the highest offset acknowledged)
// nor a later write whose outcome was unknown. Compaction keeps the
// latest record of every key, so a reader of the compacted topic that
// reads it to the end must find each key's last write.
const KeyStale Kind = "key-stale"

// CompactKinds are the kinds CheckCompacted reports, in the order it
// prints them; all but KeyStale are the queue checker's.
var CompactKinds = []Kind{Lost, KeyStale, Duplicate, OffsetMismatch, Reorder, Unexpected}

// CompactSummary is what CheckCompacted found.
type CompactSummary struct {
	Sends, Acked, Failed, Indeterminate int
	// IndeterminateSeen is how many indeterminate sends the final read
	// holds.
	IndeterminateSeen int
	FinalRead         int // records in the final read
	Keys              int // keys in the final read
	// Compacted is how many acknowledged records the final read lacks
	// that a later record of their key (in the final read) superseded:
	// the cleaner removed them.
	Compacted  int
	Violations []Violation
}

// Count is the number of violations of kind k.
func (s CompactSummary) Count(k Kind) int { return countKind(s.Violations, k) }

// String is the summary for a test log, as Summary's.
func (s CompactSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "writes: %d sent, %d acked, %d failed, %d indeterminate (%d of them in the log); "+
		"final read %d records of %d keys; %d acknowledged records compacted away (a later record of their key is in the log)\n",
		s.Sends, s.Acked, s.Failed, s.Indeterminate, s.IndeterminateSeen, s.FinalRead, s.Keys, s.Compacted)
	writeViolations(&b, s.Violations, CompactKinds)
	return b.String()
}

// CheckCompacted holds CompactWorkload's sends to the compacted topic's
// final read (its last ok CompactRead). The cleaner may remove a record
// only when a later record of the same key is in the log, and that later
// record is removed only for a later one still, so: every acknowledged
// record is in the final read, at the position it was acknowledged at,
// unless the final read holds a record of its key at a higher offset
// (then it counts as compacted; Lost otherwise); each key's latest record
// in the final read is its last acknowledged write or a later one of
// unknown outcome (KeyStale); every record read was sent under its key
// and not refused (Unexpected), and is stored once (Duplicate); each
// producer's acknowledged sends to a partition are in the order it sent
// them (Reorder). A history with no ok final read is a Lost violation of
// its own.
func CheckCompacted(ops []Op) CompactSummary {
	var s CompactSummary
	sends, order := collectSends(ops, CompactSend)
	var final *Op
	for i := range ops {
		if ops[i].F == CompactRead && ops[i].Type == OK {
			final = &ops[i]
		}
	}
	for _, sd := range order {
		s.Sends++
		tally(sd.outcome, &s.Acked, &s.Failed, &s.Indeterminate)
	}
	add := func(k Kind, format string, args ...any) {
		s.Violations = append(s.Violations, Violation{Kind: k, Detail: fmt.Sprintf(format, args...)})
	}
	checkOrder(add, order)
	if final == nil {
		add(Lost, "no successful final read of the compacted topic: nothing shows that the %d acknowledged values survived", s.Acked)
		return s
	}
	s.FinalRead = len(final.Records)

	// A key lives in one partition (the producers' partitioner hashes
	// it), but nothing here relies on that: a key's records are followed
	// per partition.
	type slot struct {
		key       string
		partition int32
	}
	latest := map[slot]Record{} // the final read's highest offset of each key
	finalAt := map[string]map[position]bool{}
	keys := map[string]bool{}
	for _, r := range final.Records {
		if finalAt[r.Value] == nil {
			finalAt[r.Value] = map[position]bool{}
		}
		finalAt[r.Value][position{r.Partition, r.Offset}] = true
		keys[r.Key] = true
		sl := slot{r.Key, r.Partition}
		if l, ok := latest[sl]; !ok || r.Offset > l.Offset {
			latest[sl] = r
		}
		switch sd := sends[r.Value]; {
		case sd == nil:
			add(Unexpected, "%s read at %d/%d under key %q, never sent", r.Value, r.Partition, r.Offset, r.Key)
		case sd.outcome == Fail:
			add(Unexpected, "%s read at %d/%d, its send failed", r.Value, r.Partition, r.Offset)
		case sd.key != r.Key:
			add(Unexpected, "%s read at %d/%d under key %q, sent under key %q", r.Value, r.Partition, r.Offset, r.Key, sd.key)
		}
	}
	s.Keys = len(keys)
	var values []string
	for v, at := range finalAt {
		if len(at) > 1 {
			values = append(values, v)
		}
	}
	sort.Strings(values)
	for _, v := range values {
		add(Duplicate, "%s stored at %s", v, positions(finalAt[v]))
	}

	lastAcked := map[slot]*send{}
	for _, sd := range order {
		at, inFinal := finalAt[sd.value]
		if sd.outcome != OK {
			if sd.outcome == Info && inFinal {
				s.IndeterminateSeen++
			}
			continue
		}
		sl := slot{sd.key, sd.at.partition}
		if l := lastAcked[sl]; l == nil || sd.at.offset > l.at.offset {
			lastAcked[sl] = sd
		}
		l, keyRead := latest[sl]
		switch {
		case inFinal && !at[sd.at]:
			add(OffsetMismatch, "%s acknowledged at %s, read at %s", sd.value, sd.at, positions(at))
		case inFinal:
		case keyRead && l.Offset > sd.at.offset:
			s.Compacted++
		case keyRead:
			add(Lost, "%s (%s seq %d, key %q) acknowledged at %s, not in the final read, whose latest record of the key is %s at %d/%d",
				sd.value, sd.process, sd.seq, sd.key, sd.at, l.Value, l.Partition, l.Offset)
		default:
			add(Lost, "%s (%s seq %d, key %q) acknowledged at %s, not in the final read, which has no record of the key in partition %d",
				sd.value, sd.process, sd.seq, sd.key, sd.at, sd.at.partition)
		}
	}

	var slots []slot
	for sl := range lastAcked {
		slots = append(slots, sl)
	}
	sort.Slice(slots, func(i, j int) bool {
		if slots[i].partition != slots[j].partition {
			return slots[i].partition < slots[j].partition
		}
		return slots[i].key < slots[j].key
	})
	for _, sl := range slots {
		w := lastAcked[sl]
		l, ok := latest[sl]
		switch {
		case ok && l.Value == w.value && l.Offset == w.at.offset:
		case ok && l.Offset > w.at.offset && sends[l.Value] != nil && sends[l.Value].outcome == Info:
		case ok:
			add(KeyStale, "key %q in partition %d: the final read ends with %s at offset %d, want the last acknowledged %s (at %s) or a later write of unknown outcome",
				sl.key, sl.partition, l.Value, l.Offset, w.value, w.at)
		default:
			add(KeyStale, "key %q in partition %d: not in the final read, want the last acknowledged %s (at %s)", sl.key, sl.partition, w.value, w.at)
		}
	}
	return s
}
