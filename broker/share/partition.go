// Package share keeps the share-partition state of share groups (KIP-932)
// on a partition's leader: which records of the log a share group has
// handed out, to whom, how often, and which are done with.
//
// A Partition is one (share group, topic partition) pair. Its window runs
// from the share-partition start offset (SPSO, the first offset not yet
// acknowledged or archived) to its end (one past the last offset ever
// acquired); every offset in the window is in one span of consecutive
// offsets sharing a state (AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED), a
// delivery count and, while acquired, an owner and a lock deadline. Kafka
// keeps a map of in-flight batches, each tracked whole or per offset; the
// spans here are the same states with the splitting done once, where an
// acquisition, acknowledgement or expiry draws a boundary, and undone
// (adjacent equal spans merge) as soon as it no longer matters.
//
// What Kafka does and this follows: records are acquired whole log batch
// by whole log batch (max records is a soft limit, as Kafka extends the
// last batch to its end; in ShareFetch's record_limit mode,
// AcquireExactly, it is exact and a batch is split), at most group.share.partition.max.record.locks
// offsets are in the window, a record goes back to AVAILABLE when its lock
// expires or its holder releases it, unless it has been delivered
// share.delivery.count.limit times already (it is ARCHIVED then);
// acknowledgements of one request apply to a partition all or nothing;
// the SPSO moves past every leading terminal offset.
//
// Delivery-count throttling (Kafka 4.2+) is done as Kafka does it, span
// by span: records delivered at least half the limit times go out in
// groups halved with each further delivery, and a record on its last
// attempt alone (throttle).
//
// Deliberate differences: offsets in the window with no record
// (compacted away, or transaction markers) are acquired with the batches
// around them, and the client acknowledges them as gaps, as Kafka's
// client does.
//
// A Partition is not safe for concurrent use: its owner (the share
// partition manager) holds a lock around every call.
package share

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// State is a record's state (Kafka's RecordState ids; 0, 2 and 4 are also
// the DeliveryState values of the share state records and RPCs).
type State int8

const (
	Available    State = 0
	Acquired     State = 1
	Acknowledged State = 2
	Archived     State = 4
)

func (s State) String() string {
	switch s {
	case Available:
		return "AVAILABLE"
	case Acquired:
		return "ACQUIRED"
	case Acknowledged:
		return "ACKNOWLEDGED"
	case Archived:
		return "ARCHIVED"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

func (s State) terminal() bool { return s == Acknowledged || s == Archived }

// AckType is an AcknowledgeTypes value of ShareFetch and ShareAcknowledge.
type AckType int8

const (
	AckGap     AckType = 0 // no record at the offset: archived
	AckAccept  AckType = 1
	AckRelease AckType = 2
	AckReject  AckType = 3
	AckRenew   AckType = 4 // ShareFetch/ShareAcknowledge v2: lock renewed
)

// Limits are the group's settings a partition applies.
type Limits struct {
	// DeliveryLimit is share.delivery.count.limit: a record delivered
	// that often is archived instead of made available again.
	DeliveryLimit int16
	// MaxInFlight is group.share.partition.max.record.locks: the most
	// offsets the window may span.
	MaxInFlight int64
	// LockMs is share.record.lock.duration.ms.
	LockMs int64
}

// span is a run of consecutive offsets in one state.
type span struct {
	first, last int64
	state       State
	deliveries  int16
	owner       string // the member holding an ACQUIRED span
	deadline    int64  // when an ACQUIRED span's lock expires, ms
}

func (s *span) count() int64 { return s.last - s.first + 1 }

// sameAs reports whether s and o may be one span.
func (s *span) sameAs(o *span) bool {
	return s.state == o.state && s.deliveries == o.deliveries && s.owner == o.owner && s.deadline == o.deadline
}

// Batch is one log batch's offsets, as a fetch read them.
type Batch struct{ First, Last int64 }

// AcquiredRecords is an AcquiredRecords entry.
type AcquiredRecords struct {
	First, Last int64
	Deliveries  int16
}

// AckBatch is one AcknowledgementBatches entry: one type for the whole
// range, or one per offset.
type AckBatch struct {
	First, Last int64
	Types       []AckType
}

// StateBatch is a run of offsets as the share state records keep it.
type StateBatch struct {
	First, Last int64
	State       State
	Deliveries  int16
}

// Partition is one share group's state of one topic partition.
type Partition struct {
	start int64 // SPSO
	end   int64 // one past the last offset in the window
	spans []span
	// changed collects the spans whose state changed since the last
	// TakeChanges: what a write of the share state carries.
	changed []StateBatch
}

// NewPartition is a partition whose window starts (empty) at start.
func NewPartition(start int64) *Partition { return &Partition{start: start, end: start} }

// Restore is a partition as the share state records left it: start and the
// persisted batches at or after it (ACKNOWLEDGED and ARCHIVED runs, and
// AVAILABLE runs with their delivery counts). Offsets between them that no
// batch names are available again, delivered as often as the batch before
// them says (never less than what was persisted).
func Restore(start int64, batches []StateBatch) (*Partition, error) {
	p := NewPartition(start)
	batches = slices.Clone(batches)
	slices.SortFunc(batches, func(a, b StateBatch) int { return cmp.Compare(a.First, b.First) })
	for _, b := range batches {
		if b.Last < b.First {
			return nil, fmt.Errorf("state batch %d-%d ends before it starts", b.First, b.Last)
		}
		if b.Last < p.end {
			continue
		}
		first := max(b.First, p.end)
		if first > p.end {
			p.spans = append(p.spans, span{first: p.end, last: first - 1, state: Available})
		}
		st := b.State
		if st == Acquired {
			st = Available // a lock does not outlive its leader
		}
		p.spans = append(p.spans, span{first: first, last: b.Last, state: st, deliveries: b.Deliveries})
		p.end = b.Last + 1
	}
	// The persisted start lags the last write's own move (Kafka writes
	// the start as it was before the acknowledgement it persists).
	p.advance()
	p.normalize()
	return p, nil
}

// Start is the SPSO.
func (p *Partition) Start() int64 { return p.start }

// End is one past the last offset in the window (the SPEO plus one).
func (p *Partition) End() int64 { return p.end }

// InFlight is how many offsets the window spans.
func (p *Partition) InFlight() int64 { return p.end - p.start }

// NextFetchOffset is where the next acquisition reads from: the first
// AVAILABLE offset in the window, or its end.
func (p *Partition) NextFetchOffset() int64 {
	for i := range p.spans {
		if p.spans[i].state == Available {
			return p.spans[i].first
		}
	}
	return p.end
}

// CanAcquire reports whether an acquisition could hand anything out: an
// offset in the window is available, or the window has room.
func (p *Partition) CanAcquire(lim Limits) bool {
	return p.NextFetchOffset() < p.end || p.InFlight() < lim.MaxInFlight
}

// MoveStart moves the window's start to at least offset (the log's start
// moved past it: those records are gone). Records below it are dropped
// whatever their state; locks on them lapse.
func (p *Partition) MoveStart(offset int64) {
	if offset <= p.start {
		return
	}
	p.start = offset
	if p.end < offset {
		p.end = offset
	}
	i := 0
	for i < len(p.spans) && p.spans[i].last < offset {
		i++
	}
	p.spans = p.spans[i:]
	if len(p.spans) > 0 && p.spans[0].first < offset {
		p.spans[0].first = offset
	}
}

// Acquire hands member the available records of batches (the log batches
// a read from NextFetchOffset returned, in order) up to maxRecords, which
// it may exceed to the end of a log batch: records already in the window
// that are AVAILABLE, and records past the window's end while it has room.
// Locks expire at now plus the lock duration.
func (p *Partition) Acquire(member string, batches []Batch, maxRecords int64, now int64, lim Limits) []AcquiredRecords {
	return p.acquire(member, batches, maxRecords, now, lim, false)
}

// AcquireExactly is Acquire in ShareFetch's record_limit acquire mode:
// at most maxRecords offsets, splitting a log batch where the limit falls
// (the window still takes the whole batch in; its offsets past the limit
// stay AVAILABLE, never delivered), as Kafka's record_limit mode does.
func (p *Partition) AcquireExactly(member string, batches []Batch, maxRecords int64, now int64, lim Limits) []AcquiredRecords {
	return p.acquire(member, batches, maxRecords, now, lim, true)
}

func (p *Partition) acquire(member string, batches []Batch, maxRecords int64, now int64, lim Limits, exact bool) []AcquiredRecords {
	var out []AcquiredRecords
	left := maxRecords
	deadline := now + lim.LockMs
	for _, b := range batches {
		if left <= 0 {
			break
		}
		if b.Last < p.start {
			continue
		}
		first := max(b.First, p.start)
		// The part inside the window: whatever is available there.
		if first < p.end {
			last := min(b.Last, p.end-1)
			p.split(first)
			p.split(last + 1)
			for i := 0; i < len(p.spans); i++ {
				s := &p.spans[i]
				if s.first < first || s.last > last || s.state != Available || left <= 0 {
					continue
				}
				if n, throttled := throttle(s.deliveries, b.Last-b.First+1, lim.DeliveryLimit); throttled {
					// Records delivered often already go out in
					// smaller groups, and on their last attempt alone,
					// so that a record that makes its consumer fail
					// does not use up the attempts of its neighbours.
					if len(out) > 0 {
						p.normalize()
						return out
					}
					if exact {
						n = min(n, left)
					}
					p.split(s.first + min(n, s.count()))
					s = &p.spans[i]
					s.state, s.owner, s.deadline = Acquired, member, deadline
					s.deliveries++
					out = appendAcquired(out, AcquiredRecords{First: s.first, Last: s.last, Deliveries: s.deliveries})
					p.normalize()
					return out
				}
				if exact && s.count() > left {
					p.split(s.first + left)
					s = &p.spans[i]
				}
				s.state, s.owner, s.deadline = Acquired, member, deadline
				s.deliveries++
				out = appendAcquired(out, AcquiredRecords{First: s.first, Last: s.last, Deliveries: s.deliveries})
				left -= s.count()
			}
		}
		// The part past the window: new records, the rest of the batch
		// whole, while the window has room.
		if b.Last >= p.end && left > 0 && p.InFlight() < lim.MaxInFlight {
			if len(p.spans) == 0 && first > p.end {
				// Nothing in the window: offsets before the batch hold
				// no record (compacted away, or the log moved on).
				p.start, p.end = first, first
			}
			s := span{first: p.end, last: b.Last, state: Acquired, deliveries: 1, owner: member, deadline: deadline}
			if exact && s.count() > left {
				// The rest of the batch joins the window undelivered.
				s.last = s.first + left - 1
				p.spans = append(p.spans, s, span{first: s.last + 1, last: b.Last, state: Available})
			} else {
				p.spans = append(p.spans, s)
			}
			p.end = b.Last + 1
			out = appendAcquired(out, AcquiredRecords{First: s.first, Last: s.last, Deliveries: 1})
			left -= s.count()
		}
	}
	p.normalize()
	return out
}

// throttle is Kafka's delivery-count throttling (4.2+) for available
// records delivered deliveries times already, in a log batch of
// batchSize records: from half the delivery limit (rounded up, at least
// 2) on, an acquisition takes at most n of them (batchSize halved for
// each delivery from that point, at least one) and nothing after them,
// and only if it has taken nothing before them; a record on its last
// attempt (a limit above 2) goes alone.
func throttle(deliveries int16, batchSize int64, limit int16) (n int64, throttled bool) {
	if limit > 2 && deliveries == limit-1 {
		return 1, true
	}
	from := max(2, (limit+1)/2)
	if deliveries < from {
		return 0, false
	}
	return max(1, batchSize>>(deliveries-from+1)), true
}

// ArchiveAcquired archives what member just acquired of [first, last]
// (the records of an aborted transaction, which read_committed never
// delivers), and returns the acquired ranges less those offsets.
func (p *Partition) ArchiveAcquired(member string, first, last int64, acquired []AcquiredRecords) []AcquiredRecords {
	p.split(first)
	p.split(last + 1)
	for i := range p.spans {
		s := &p.spans[i]
		if s.first >= first && s.last <= last && s.state == Acquired && s.owner == member {
			p.settle(s, Archived)
		}
	}
	p.advance()
	p.normalize()
	var out []AcquiredRecords
	for _, a := range acquired {
		if a.Last < first || a.First > last {
			out = append(out, a)
			continue
		}
		if a.First < first {
			out = append(out, AcquiredRecords{First: a.First, Last: first - 1, Deliveries: a.Deliveries})
		}
		if a.Last > last {
			out = append(out, AcquiredRecords{First: last + 1, Last: a.Last, Deliveries: a.Deliveries})
		}
	}
	return out
}

// appendAcquired appends a, merged into the last entry when they touch and
// were delivered as often.
func appendAcquired(out []AcquiredRecords, a AcquiredRecords) []AcquiredRecords {
	if n := len(out); n > 0 && out[n-1].Last+1 == a.First && out[n-1].Deliveries == a.Deliveries {
		out[n-1].Last = a.Last
		return out
	}
	return append(out, a)
}

// Acknowledge applies member's acknowledgements, all or none: the error
// code is INVALID_REQUEST for a batch beyond the window and
// INVALID_RECORD_STATE for an offset member does not hold. Offsets below
// the SPSO are done with already and are skipped. Whether RENEW is
// allowed (v2 and share.renew.acknowledge.enable) is the caller's check.
func (p *Partition) Acknowledge(member string, acks []AckBatch, now int64, lim Limits) (code int16, msg string) {
	for _, a := range acks {
		if a.Last < a.First || len(a.Types) == 0 || len(a.Types) > 1 && int64(len(a.Types)) != a.Last-a.First+1 {
			return kerr.InvalidRequest.Code, fmt.Sprintf("acknowledgement batch %d-%d has %d types", a.First, a.Last, len(a.Types))
		}
		if a.Last < p.start {
			continue
		}
		if a.First >= p.end || a.Last >= p.end {
			return kerr.InvalidRequest.Code, fmt.Sprintf("acknowledged offsets %d-%d are beyond the share partition's end offset %d", a.First, a.Last, p.end-1)
		}
		for i := range p.spans {
			s := &p.spans[i]
			if s.last < max(a.First, p.start) || s.first > a.Last {
				continue
			}
			if s.state != Acquired || s.owner != member {
				return kerr.InvalidRecordState.Code, fmt.Sprintf("offsets %d-%d are %s, not acquired by member %s", max(s.first, a.First), min(s.last, a.Last), s.state, member)
			}
		}
	}
	for _, a := range acks {
		if a.Last < p.start {
			continue
		}
		if len(a.Types) == 1 {
			p.apply(max(a.First, p.start), a.Last, a.Types[0], now, lim)
			continue
		}
		// One type per offset: apply runs of equal types.
		for o := max(a.First, p.start); o <= a.Last; {
			t := a.Types[o-a.First]
			run := o
			for run+1 <= a.Last && a.Types[run+1-a.First] == t {
				run++
			}
			p.apply(o, run, t, now, lim)
			o = run + 1
		}
	}
	p.advance()
	p.normalize()
	return 0, ""
}

// apply moves [first, last], all ACQUIRED, on by one acknowledgement.
func (p *Partition) apply(first, last int64, t AckType, now int64, lim Limits) {
	p.split(first)
	p.split(last + 1)
	for i := range p.spans {
		s := &p.spans[i]
		if s.first < first || s.last > last {
			continue
		}
		switch t {
		case AckAccept:
			p.settle(s, Acknowledged)
		case AckRelease:
			p.release(s, lim)
		case AckReject, AckGap:
			p.settle(s, Archived)
		case AckRenew:
			s.deadline = now + lim.LockMs
		}
	}
}

// settle puts s in state st (not ACQUIRED) and records the change.
func (p *Partition) settle(s *span, st State) {
	s.state, s.owner, s.deadline = st, "", 0
	p.changed = append(p.changed, StateBatch{First: s.first, Last: s.last, State: st, Deliveries: s.deliveries})
}

// release makes s available again, or archives it when it has been
// delivered as often as the limit allows.
func (p *Partition) release(s *span, lim Limits) {
	if s.deliveries >= lim.DeliveryLimit {
		p.settle(s, Archived)
		return
	}
	p.settle(s, Available)
}

// ReleaseMember makes every record member holds available again (its
// share session closed, or it left the group), and reports whether any
// was.
func (p *Partition) ReleaseMember(member string, lim Limits) bool {
	return p.releaseWhere(func(s *span) bool { return s.owner == member }, lim)
}

// Expire releases the records whose lock expired by now, and reports
// whether any did.
func (p *Partition) Expire(now int64, lim Limits) bool {
	return p.releaseWhere(func(s *span) bool { return s.deadline <= now }, lim)
}

// releaseWhere releases the acquired spans that match.
func (p *Partition) releaseWhere(match func(*span) bool, lim Limits) bool {
	released := false
	for i := range p.spans {
		if s := &p.spans[i]; s.state == Acquired && match(s) {
			p.release(s, lim)
			released = true
		}
	}
	if released {
		p.advance()
		p.normalize()
	}
	return released
}

// NextDeadline is the earliest lock expiry, or 0 when nothing is acquired.
func (p *Partition) NextDeadline() int64 {
	var d int64
	for i := range p.spans {
		if s := &p.spans[i]; s.state == Acquired && (d == 0 || s.deadline < d) {
			d = s.deadline
		}
	}
	return d
}

// TakeChanges returns (and forgets) the state changes since the last call,
// for the share state write that persists them.
func (p *Partition) TakeChanges() []StateBatch {
	c := p.changed
	p.changed = nil
	return c
}

// StateBatches is the window as the share state records keep it: every
// span except the acquired ones, which are written as AVAILABLE (a lock
// is not persisted; its delivery is).
func (p *Partition) StateBatches() []StateBatch {
	out := make([]StateBatch, 0, len(p.spans))
	for _, s := range p.spans {
		st := s.state
		if st == Acquired {
			st = Available
		}
		b := StateBatch{First: s.first, Last: s.last, State: st, Deliveries: s.deliveries}
		if n := len(out); n > 0 && out[n-1].Last+1 == b.First && out[n-1].State == b.State && out[n-1].Deliveries == b.Deliveries {
			out[n-1].Last = b.Last
			continue
		}
		out = append(out, b)
	}
	return out
}

// DeliveryComplete is how many offsets of the window are acknowledged or
// archived (KIP-1226's DeliveryCompleteCount).
func (p *Partition) DeliveryComplete() int64 {
	var n int64
	for i := range p.spans {
		if p.spans[i].state.terminal() {
			n += p.spans[i].count()
		}
	}
	return n
}

// Holds reports the acquired ranges member holds (tests and describe).
func (p *Partition) Holds(member string) []AcquiredRecords {
	var out []AcquiredRecords
	for _, s := range p.spans {
		if s.state == Acquired && s.owner == member {
			out = appendAcquired(out, AcquiredRecords{First: s.first, Last: s.last, Deliveries: s.deliveries})
		}
	}
	return out
}

// split draws a span boundary before offset (a no-op at an existing
// boundary or outside the window).
func (p *Partition) split(offset int64) {
	for i := range p.spans {
		s := p.spans[i]
		if offset <= s.first || offset > s.last {
			continue
		}
		left, right := s, s
		left.last, right.first = offset-1, offset
		p.spans = slices.Insert(p.spans, i+1, right)
		p.spans[i] = left
		return
	}
}

// advance moves the SPSO past the leading terminal spans.
func (p *Partition) advance() {
	i := 0
	for i < len(p.spans) && p.spans[i].state.terminal() {
		i++
	}
	p.spans = p.spans[i:]
	if len(p.spans) == 0 {
		p.start = p.end
		p.spans = nil
		return
	}
	p.start = p.spans[0].first
}

// normalize merges adjacent equal spans.
func (p *Partition) normalize() {
	if len(p.spans) < 2 {
		return
	}
	out := p.spans[:1]
	for _, s := range p.spans[1:] {
		last := &out[len(out)-1]
		if last.sameAs(&s) && last.last+1 == s.first {
			last.last = s.last
			continue
		}
		out = append(out, s)
	}
	p.spans = out
}
