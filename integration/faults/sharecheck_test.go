package faults

import "testing"

// shareHistory is a clean share run: three records sent to partitions 0
// and 1, handed over, accepted, and the final offsets at the end.
func shareHistory() *builder {
	b := &builder{}
	send := func(seq int64, v string, p int32, o int64) {
		b.add(Op{Process: "share-producer", Type: Invoke, F: ShareSend, Seq: seq, Value: v})
		b.add(Op{Process: "share-producer", Type: OK, F: ShareSend, Seq: seq, Value: v, Partition: p, Offset: o})
	}
	send(0, "a", 0, 0)
	send(1, "b", 0, 1)
	send(2, "c", 1, 0)
	recs := []Record{{Partition: 0, Offset: 0, Value: "a", Deliveries: 1}, {Partition: 0, Offset: 1, Value: "b", Deliveries: 1}}
	b.sharePoll("m0", recs...)
	b.shareAccept("m0", OK, recs...)
	// c is handed over, its acceptance not confirmed, and handed over again.
	c := Record{Partition: 1, Offset: 0, Value: "c", Deliveries: 1}
	b.sharePoll("m1", c)
	b.shareAccept("m1", Info, c)
	c.Deliveries = 2
	b.sharePoll("m0", c)
	b.shareAccept("m0", OK, c)
	return b
}

func (b *builder) sharePoll(proc string, recs ...Record) {
	b.add(Op{Process: proc, Type: Invoke, F: SharePoll})
	b.add(Op{Process: proc, Type: OK, F: SharePoll, Records: recs})
}

func (b *builder) shareAccept(proc string, outcome Type, recs ...Record) {
	b.add(Op{Process: proc, Type: Invoke, F: ShareAccept, Records: recs})
	b.add(Op{Process: proc, Type: outcome, F: ShareAccept, Records: recs})
}

func (b *builder) shareFinal(starts, ends map[int32]int64) {
	b.add(Op{Process: "share-final", Type: OK, F: ShareFinal, Offsets: starts, Ends: ends})
}

func (b *builder) shareFinalLags(starts, lags, ends map[int32]int64) {
	b.add(Op{Process: "share-final", Type: OK, F: ShareFinal, Offsets: starts, Lags: lags, Ends: ends})
}

func TestCheckShareCleanRun(t *testing.T) {
	b := shareHistory()
	b.shareFinal(map[int32]int64{0: 2, 1: 1}, map[int32]int64{0: 2, 1: 1, 2: 0})
	s := CheckShare(b.ops)
	if len(s.Violations) > 0 {
		t.Fatalf("violations in a clean run:\n%s", s)
	}
	if s.Acked != 3 || s.Polls != 3 || s.Delivered != 4 || s.Redelivered != 1 || s.AcceptsOK != 2 || s.AcceptsUnknown != 1 || s.Accepted != 3 || s.MaxDeliveries != 2 {
		t.Fatalf("counts: %+v", s)
	}
	// Kafka 4.3 leaves the persisted start offset behind records it has
	// accepted; a lag of 0 says they are done.
	b = shareHistory()
	b.shareFinalLags(map[int32]int64{0: 0, 1: 0}, map[int32]int64{0: 0, 1: 0}, map[int32]int64{0: 2, 1: 1})
	if s := CheckShare(b.ops); len(s.Violations) > 0 {
		t.Fatalf("violations with start offsets behind and lags 0:\n%s", s)
	}
	// The queue checker ignores the share operations.
	if q := Check(b.ops); q.Sends != 0 || q.Polls != 0 {
		t.Fatalf("the queue checker counted share operations: %+v", q)
	}
}

// sendD adds an acknowledged send of "d" to partition 1, offset 1.
func sendD(b *builder) {
	b.add(Op{Process: "share-producer", Type: Invoke, F: ShareSend, Seq: 3, Value: "d"})
	b.add(Op{Process: "share-producer", Type: OK, F: ShareSend, Seq: 3, Value: "d", Partition: 1, Offset: 1})
}

func TestCheckShareViolations(t *testing.T) {
	final := func(b *builder) { b.shareFinal(map[int32]int64{0: 2, 1: 1}, map[int32]int64{0: 2, 1: 1}) }
	for name, tc := range map[string]struct {
		kind  Kind
		build func(b *builder)
	}{
		"no final offsets": {ShareStuck, func(b *builder) {}},
		"start offset behind the end": {ShareStuck, func(b *builder) {
			b.shareFinal(map[int32]int64{0: 1, 1: 1}, map[int32]int64{0: 2, 1: 1})
		}},
		"lag above 0": {ShareStuck, func(b *builder) {
			b.shareFinalLags(map[int32]int64{0: 2, 1: 0}, map[int32]int64{0: 0, 1: 1}, map[int32]int64{0: 2, 1: 1})
		}},
		"lag unknown and start offset behind": {ShareStuck, func(b *builder) {
			b.shareFinalLags(map[int32]int64{0: 2, 1: 0}, map[int32]int64{0: -1, 1: -1}, map[int32]int64{0: 2, 1: 1})
		}},
		"partition with records and no start offset": {ShareStuck, func(b *builder) {
			b.shareFinal(map[int32]int64{0: 2}, map[int32]int64{0: 2, 1: 1})
		}},
		"acknowledged and never handed over": {ShareLost, func(b *builder) {
			sendD(b)
			b.shareFinal(map[int32]int64{0: 2, 1: 2}, map[int32]int64{0: 2, 1: 2})
		}},
		"handed over after a confirmed acceptance": {ShareAcceptedAgain, func(b *builder) {
			b.sharePoll("m1", Record{Partition: 0, Offset: 1, Value: "b", Deliveries: 2})
			final(b)
		}},
		"delivery count past the limit": {ShareOverLimit, func(b *builder) {
			sendD(b)
			b.sharePoll("m1", Record{Partition: 1, Offset: 1, Value: "d", Deliveries: ShareDeliveryLimit + 1})
			b.shareFinal(map[int32]int64{0: 2, 1: 2}, map[int32]int64{0: 2, 1: 2})
		}},
		"never sent": {ShareUnexpected, func(b *builder) {
			b.sharePoll("m1", Record{Partition: 1, Offset: 5, Value: "zz", Deliveries: 1})
			final(b)
		}},
		"handed over at another position": {ShareUnexpected, func(b *builder) {
			sendD(b)
			b.sharePoll("m1", Record{Partition: 1, Offset: 7, Value: "d", Deliveries: 1})
			b.shareFinal(map[int32]int64{0: 2, 1: 2}, map[int32]int64{0: 2, 1: 2})
		}},
	} {
		t.Run(name, func(t *testing.T) {
			b := shareHistory()
			tc.build(b)
			s := CheckShare(b.ops)
			wantOnly(t, tc.kind, s.Violations, s.String())
		})
	}
}
