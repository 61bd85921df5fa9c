package share

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

var testLimits = Limits{DeliveryLimit: 3, MaxInFlight: 100, LockMs: 1000}

func batches(bounds ...int64) []Batch {
	var out []Batch
	for i := 0; i+1 < len(bounds); i += 2 {
		out = append(out, Batch{First: bounds[i], Last: bounds[i+1]})
	}
	return out
}

func accept(first, last int64) AckBatch {
	return AckBatch{First: first, Last: last, Types: []AckType{AckAccept}}
}

func TestAcquireWholeBatchesAndSoftMaxRecords(t *testing.T) {
	p := NewPartition(0)
	// max records 3 ends inside the second batch: it is acquired whole.
	got := p.Acquire("a", batches(0, 1, 2, 5, 6, 9), 3, 0, testLimits)
	if want := []AcquiredRecords{{0, 5, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	if p.NextFetchOffset() != 6 || p.InFlight() != 6 {
		t.Fatalf("next %d in flight %d, want 6 and 6", p.NextFetchOffset(), p.InFlight())
	}
	// Another member gets the rest.
	got = p.Acquire("b", batches(6, 9), 100, 0, testLimits)
	if want := []AcquiredRecords{{6, 9, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	// Nothing is left to hand out.
	if got := p.Acquire("c", batches(0, 1, 2, 5, 6, 9), 100, 0, testLimits); len(got) != 0 {
		t.Fatalf("acquired %v of records others hold", got)
	}
}

func TestAcknowledgeMovesStartAndIsAllOrNothing(t *testing.T) {
	p := NewPartition(10)
	p.Acquire("a", batches(10, 14), 100, 0, testLimits)
	p.Acquire("b", batches(15, 19), 100, 0, testLimits)
	// a may not acknowledge b's records: nothing of the request applies.
	code, _ := p.Acknowledge("a", []AckBatch{accept(10, 14), accept(15, 15)}, 0, testLimits)
	if code != kerr.InvalidRecordState.Code {
		t.Fatalf("code %d, want INVALID_RECORD_STATE", code)
	}
	if p.Start() != 10 || len(p.TakeChanges()) != 0 {
		t.Fatalf("a refused acknowledgement changed the partition: start %d", p.Start())
	}
	// Beyond the window: INVALID_REQUEST.
	if code, _ := p.Acknowledge("a", []AckBatch{accept(18, 25)}, 0, testLimits); code != kerr.InvalidRequest.Code {
		t.Fatalf("code %d, want INVALID_REQUEST", code)
	}
	if code, msg := p.Acknowledge("a", []AckBatch{accept(10, 14)}, 0, testLimits); code != 0 {
		t.Fatalf("acknowledge: %d %s", code, msg)
	}
	if p.Start() != 15 {
		t.Fatalf("start %d after 10-14 accepted, want 15", p.Start())
	}
	if got, want := p.TakeChanges(), []StateBatch{{10, 14, Acknowledged, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	// Acknowledging below the start again is a no-op, not an error.
	if code, _ := p.Acknowledge("a", []AckBatch{accept(10, 14)}, 0, testLimits); code != 0 {
		t.Fatalf("acknowledging done offsets again: %d", code)
	}
}

func TestPerOffsetTypesAndGaps(t *testing.T) {
	p := NewPartition(0)
	p.Acquire("a", batches(0, 4), 100, 0, testLimits)
	ack := AckBatch{First: 0, Last: 4, Types: []AckType{AckAccept, AckGap, AckRelease, AckReject, AckAccept}}
	if code, msg := p.Acknowledge("a", []AckBatch{ack}, 0, testLimits); code != 0 {
		t.Fatalf("acknowledge: %d %s", code, msg)
	}
	// 0-1 done, 2 available again, 3-4 done: the start stops at 2.
	if p.Start() != 2 || p.NextFetchOffset() != 2 {
		t.Fatalf("start %d next %d, want 2 and 2", p.Start(), p.NextFetchOffset())
	}
	got := p.Acquire("b", batches(0, 4), 100, 0, testLimits)
	if want := []AcquiredRecords{{2, 2, 2}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("reacquired %v, want %v", got, want)
	}
	if code, _ := p.Acknowledge("b", []AckBatch{accept(2, 2)}, 0, testLimits); code != 0 {
		t.Fatal(code)
	}
	if p.Start() != 5 || p.InFlight() != 0 {
		t.Fatalf("start %d in flight %d, want 5 and 0", p.Start(), p.InFlight())
	}
}

func TestDeliveryLimitArchives(t *testing.T) {
	p := NewPartition(0)
	lim := testLimits
	for i := int16(1); i <= lim.DeliveryLimit; i++ {
		got := p.Acquire("a", batches(0, 0), 100, 0, lim)
		if want := []AcquiredRecords{{0, 0, i}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("delivery %d: acquired %v, want %v", i, got, want)
		}
		if code, _ := p.Acknowledge("a", []AckBatch{{First: 0, Last: 0, Types: []AckType{AckRelease}}}, 0, lim); code != 0 {
			t.Fatal(code)
		}
	}
	// Released after its last delivery: archived, never handed out again.
	if got := p.Acquire("a", batches(0, 0), 100, 0, lim); len(got) != 0 {
		t.Fatalf("acquired %v past the delivery limit", got)
	}
	if p.Start() != 1 {
		t.Fatalf("start %d, want 1 (offset 0 archived)", p.Start())
	}
}

func TestLockExpiryAndRenew(t *testing.T) {
	p := NewPartition(0)
	p.Acquire("a", batches(0, 4, 5, 9), 100, 0, testLimits)
	if d := p.NextDeadline(); d != 1000 {
		t.Fatalf("deadline %d, want 1000", d)
	}
	// Renew 5-9 at 500: their lock now runs to 1500.
	if code, _ := p.Acknowledge("a", []AckBatch{{First: 5, Last: 9, Types: []AckType{AckRenew}}}, 500, testLimits); code != 0 {
		t.Fatal(code)
	}
	if p.Expire(999, testLimits) {
		t.Fatal("a lock expired early")
	}
	if !p.Expire(1000, testLimits) {
		t.Fatal("the lock on 0-4 did not expire")
	}
	if got, want := p.Holds("a"), []AcquiredRecords{{5, 9, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("a holds %v, want %v", got, want)
	}
	got := p.Acquire("b", batches(0, 4, 5, 9), 100, 1000, testLimits)
	if want := []AcquiredRecords{{0, 4, 2}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("b acquired %v, want %v", got, want)
	}
	// a's late acknowledgement of 0-4 is refused.
	if code, _ := p.Acknowledge("a", []AckBatch{accept(0, 4)}, 1000, testLimits); code != kerr.InvalidRecordState.Code {
		t.Fatalf("late acknowledgement: code %d, want INVALID_RECORD_STATE", code)
	}
}

func TestInFlightLimit(t *testing.T) {
	p := NewPartition(0)
	lim := testLimits
	lim.MaxInFlight = 10
	got := p.Acquire("a", batches(0, 5, 6, 11, 12, 20), 100, 0, lim)
	// 0-5 then 6-11 (the window had room when it began): 12 offsets.
	if want := []AcquiredRecords{{0, 11, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	if p.CanAcquire(lim) {
		t.Fatal("a full window with nothing available can acquire")
	}
	p.ReleaseMember("a", lim)
	if !p.CanAcquire(lim) {
		t.Fatal("released records cannot be acquired")
	}
	if got := p.Acquire("b", batches(0, 5, 6, 11, 12, 20), 100, 0, lim); !reflect.DeepEqual(got, []AcquiredRecords{{0, 11, 2}}) {
		t.Fatalf("acquired %v, want 0-11 delivered twice", got)
	}
}

func TestRestoreAndStateBatches(t *testing.T) {
	p, err := Restore(5, []StateBatch{{0, 6, Acknowledged, 1}, {7, 8, Archived, 3}, {10, 12, Available, 2}, {13, 13, Acknowledged, 1}})
	if err != nil {
		t.Fatal(err)
	}
	// 5-8 are done with (the start moves past them), 9 was never named:
	// available, as is 10-12.
	if p.Start() != 9 || p.NextFetchOffset() != 9 || p.End() != 14 {
		t.Fatalf("start %d next %d end %d, want 9, 9 and 14", p.Start(), p.NextFetchOffset(), p.End())
	}
	// 10-12 are on their last attempt (limit 3): not with 9, and alone.
	got := p.Acquire("a", batches(9, 13), 100, 0, testLimits)
	if want := []AcquiredRecords{{9, 9, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	got = p.Acquire("a", batches(9, 13), 100, 0, testLimits)
	if want := []AcquiredRecords{{10, 10, 3}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	want := []StateBatch{{9, 9, Available, 1}, {10, 10, Available, 3}, {11, 12, Available, 2}, {13, 13, Acknowledged, 1}}
	if got := p.StateBatches(); !reflect.DeepEqual(got, want) {
		t.Fatalf("state batches %v, want %v", got, want)
	}
}

func TestMoveStartDropsGoneRecords(t *testing.T) {
	p := NewPartition(0)
	p.Acquire("a", batches(0, 9), 100, 0, testLimits)
	p.MoveStart(5)
	if p.Start() != 5 || p.InFlight() != 5 {
		t.Fatalf("start %d in flight %d", p.Start(), p.InFlight())
	}
	if got, want := p.Holds("a"), []AcquiredRecords{{5, 9, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("holds %v, want %v", got, want)
	}
	// An empty window before a batch further on starts at the batch.
	q := NewPartition(0)
	if got := q.Acquire("a", batches(40, 44), 100, 0, testLimits); !reflect.DeepEqual(got, []AcquiredRecords{{40, 44, 1}}) {
		t.Fatalf("acquired %v", got)
	}
	if q.Start() != 40 {
		t.Fatalf("start %d, want 40", q.Start())
	}
}

func TestArchiveAcquired(t *testing.T) {
	p := NewPartition(0)
	got := p.Acquire("a", batches(0, 4, 5, 9, 10, 14), 100, 0, testLimits)
	got = p.ArchiveAcquired("a", 5, 9, got)
	if want := []AcquiredRecords{{0, 4, 1}, {10, 14, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	if code, _ := p.Acknowledge("a", []AckBatch{accept(0, 4), accept(10, 14)}, 0, testLimits); code != 0 {
		t.Fatal(code)
	}
	if p.Start() != 15 || p.InFlight() != 0 {
		t.Fatalf("start %d in flight %d: the archived batch holds the start back", p.Start(), p.InFlight())
	}
}

// TestDeliveryCountThrottling: with Kafka's default limit of 5, records
// delivered three times go out half a log batch at a time, and records on
// their fifth (last) attempt one at a time; throttled records are never
// handed out with others taken before them.
func TestDeliveryCountThrottling(t *testing.T) {
	lim := Limits{DeliveryLimit: 5, MaxInFlight: 1000, LockMs: 1000}
	p := NewPartition(0)
	log := batches(0, 99, 100, 109)
	release := func(first, last int64) {
		t.Helper()
		if code, _ := p.Acknowledge("a", []AckBatch{{First: first, Last: last, Types: []AckType{AckRelease}}}, 0, lim); code != 0 {
			t.Fatalf("release %d-%d: code %d", first, last, code)
		}
	}
	acquire := func(want ...AcquiredRecords) {
		t.Helper()
		if got := p.Acquire("a", log, 500, 0, lim); !reflect.DeepEqual(got, want) {
			t.Fatalf("acquired %v, want %v", got, want)
		}
	}
	acquire(AcquiredRecords{0, 109, 1})
	release(0, 99) // 100-109 stay acquired, delivered once
	acquire(AcquiredRecords{0, 99, 2})
	release(0, 99)
	acquire(AcquiredRecords{0, 99, 3})
	release(0, 99)
	// Delivered three times (half of 5, rounded up): 100 >> 1 at a time.
	acquire(AcquiredRecords{0, 49, 4})
	acquire(AcquiredRecords{50, 99, 4})
	// Available records before throttled ones go first, alone.
	release(100, 109)
	release(0, 49)
	acquire(AcquiredRecords{0, 0, 5})
	acquire(AcquiredRecords{1, 1, 5})
	release(50, 50)
	acquire(AcquiredRecords{2, 2, 5})
	if got := p.Acquire("b", log, 500, 0, lim); len(got) != 1 || got[0].Last-got[0].First != 0 {
		t.Fatalf("b acquired %v, want one record on its last attempt", got)
	}
}

// TestAcquireExactly: record_limit takes exactly max records, splitting a
// log batch; the rest of the batch is in the window, available with no
// delivery, and goes to the next acquisition.
func TestAcquireExactly(t *testing.T) {
	p := NewPartition(0)
	log := batches(0, 9, 10, 19)
	if got, want := p.AcquireExactly("a", log, 7, 0, testLimits), []AcquiredRecords{{0, 6, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	if p.End() != 10 || p.NextFetchOffset() != 7 {
		t.Fatalf("end %d next %d, want 10 and 7", p.End(), p.NextFetchOffset())
	}
	if got, want := p.AcquireExactly("b", batches(0, 9, 10, 19), 5, 0, testLimits), []AcquiredRecords{{7, 11, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	// Released offsets are split too.
	if code, _ := p.Acknowledge("a", []AckBatch{{First: 0, Last: 6, Types: []AckType{AckRelease}}}, 0, testLimits); code != 0 {
		t.Fatal(code)
	}
	if got, want := p.AcquireExactly("b", log, 3, 0, testLimits), []AcquiredRecords{{0, 2, 2}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	if got, want := p.Acquire("c", log, 100, 0, testLimits), []AcquiredRecords{{3, 6, 2}, {12, 19, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("batch_optimized acquired %v, want %v", got, want)
	}
}
