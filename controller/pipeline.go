package controller

// The write pipeline (Kafka's QuorumController with its deferred event
// queue): the loop decides admin operations one at a time against the
// latest image, the committed image plus every record already proposed and
// not yet applied (the pending image), and appends each operation's records
// to raft as its own entry at once, without waiting for the entries before
// it to commit. So a second CreateTopics of the same name in a burst sees
// the first, producer-id blocks never overlap, and the offset an operation
// is given for its records (a broker epoch) is the raft index its entry
// gets.
//
// Each operation is answered once its own entry is committed and applied
// (invariant 4), in log order. An operation that writes nothing but was
// decided while entries were pending is answered once the last of them is
// applied, because its answer may rest on them (Kafka does the same for
// such "read-only" writes).
//
// The pending image is only for deciding: Image(), subscribers and
// snapshots see the committed image. When this node stops being the leader
// of the term its entries were proposed in, or an applied entry is not the
// one it predicted at that index (a new leader reused the index), every
// pending entry fails with NOT_CONTROLLER and the pending image is dropped;
// the next decisions start from the committed image.
//
// Everything here is owned by the loop goroutine, except inflightCount,
// which mirrors len(inflight) for tests and metrics.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gregorbroker/gregor/controller/decide"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	pb "go.etcd.io/raft/v3/raftpb"
)

const (
	// maxInflightEntries and maxInflightBytes bound what is proposed and
	// not yet applied; the loop takes no operation while either is
	// reached. One operation is always admitted when nothing is in flight,
	// however large its records.
	maxInflightEntries = 256
	maxInflightBytes   = 8 << 20
	// maxEventBatch is how many queued operations the loop decides and
	// proposes before it next persists and sends, so a burst shares one
	// log sync; it bounds how long ticks and peer messages wait.
	maxEventBatch = 64
)

// event is one operation for the loop. fn runs against the latest image
// (committed plus pending records); offset is the log offset the records
// it returns will get. If it returns records they are proposed and reply
// is sent once they are applied (or fail); otherwise reply is sent once
// everything proposed before it is applied.
type event struct {
	fn func(img *metadata.Image, offset int64) ([]metadata.Record, any)
	// conf, set instead of fn, decides a membership change
	// (membership.go).
	conf  func(img *metadata.Image) (*pb.ConfChangeV2, []metadata.Record, any)
	reply chan eventResult
}

type eventResult struct {
	val any
	err error
}

// proposal is one raft entry this leader proposed and has not seen applied.
type proposal struct {
	index uint64
	term  uint64
	data  []byte
	// proposed is when, for raft-metrics' commit latency.
	proposed time.Time
	// done holds the proposer's callback, then those of the operations
	// without records that were decided while this was the last pending
	// entry; they are called in that order with nil once the entry is
	// applied, or with the error that failed it.
	done []func(error)
}

// latest is the image operations are decided against (loop).
func (c *Controller) latest() *metadata.Image {
	if c.pending != nil {
		return c.pending
	}
	return c.committed
}

// hasRoom reports whether another entry may be proposed (loop).
func (c *Controller) hasRoom() bool {
	return len(c.inflight) < maxInflightEntries && c.inflightBytes < maxInflightBytes
}

// nextIndex is the raft index the next proposal will get: raft appends a
// proposal right after the last entry of its log. The loop drains every
// Ready after it steps, ticks or campaigns, so raft's log is rlog's plus
// the entries proposed since the last drain, which are the tail of
// c.inflight (loop).
func (c *Controller) nextIndex() uint64 {
	last, _ := c.rlog.LastIndex()
	if n := len(c.inflight); n > 0 && c.inflight[n-1].index > last {
		last = c.inflight[n-1].index
	}
	return last + 1
}

// handleEvents decides ev and then every other operation already waiting,
// up to maxEventBatch and while there is room in flight; the loop persists
// and sends all of their entries in one Ready afterwards.
func (c *Controller) handleEvents(ev *event) {
	// Everything raft appended must be in rlog before nextIndex is right.
	c.drain()
	c.handleEvent(ev)
	for range maxEventBatch - 1 {
		if c.fatalErr() != nil || !c.canTakeEvents() {
			return
		}
		select {
		case ev := <-c.events:
			c.handleEvent(ev)
		default:
			return
		}
	}
}

func (c *Controller) handleEvent(ev *event) {
	if !c.serving() {
		ev.reply <- eventResult{err: errNotController}
		return
	}
	index := c.nextIndex()
	if ev.conf != nil {
		c.handleConfEvent(ev, index)
		return
	}
	recs, val := ev.fn(c.latest(), int64(index))
	reply := func(err error) { ev.reply <- eventResult{val: val, err: err} }
	if len(recs) == 0 {
		c.afterPending(reply)
		return
	}
	c.propose(recs, index, reply)
}

// afterPending calls done once every entry proposed so far is applied, or
// with the error that failed the last of them (loop).
func (c *Controller) afterPending(done func(error)) {
	if n := len(c.inflight); n > 0 {
		last := c.inflight[n-1]
		last.done = append(last.done, done)
		return
	}
	done(nil)
}

// propose appends records to the raft log as one entry at index (from
// nextIndex, with nothing proposed in between) and adds them to the
// pending image. done is called once the entry is applied, or fails
// (loop).
func (c *Controller) propose(records []metadata.Record, index uint64, done func(error)) {
	data := metadata.EncodeRecords(records)
	c.proposeEntry(records, index, data, func() error { return c.rn.Propose(data) }, done)
}

// proposeEntry is propose for an entry whose data is given and that send
// hands to raft (a conf change carries the records in its context).
func (c *Controller) proposeEntry(records []metadata.Record, index uint64, data []byte, send func() error, done func(error)) {
	next, err := metadata.ApplyBatch(c.latest(), records, int64(index), int64(c.term))
	if err != nil {
		// A decision whose records do not apply to the image it was made
		// against is a bug; refusing it keeps it out of the log.
		c.logger.Error("refusing metadata records that do not apply to the latest image", "offset", index, "err", err)
		done(fmt.Errorf("deciding metadata records at offset %d: %w", index, err))
		return
	}
	if err := send(); err != nil {
		done(fmt.Errorf("%w: proposing: %w", errNotController, err))
		return
	}
	now := c.now()
	c.inflight = append(c.inflight, &proposal{index: index, term: c.term, data: data, proposed: now, done: []func(error){done}})
	c.raftStats.appendRecords.Record(float64(len(records)), now)
	c.inflightBytes += len(data)
	c.inflightCount.Store(int64(len(c.inflight)))
	c.pending = next
	c.trackSessions(records, int64(index))
}

// settle completes what an applied entry decides (loop): the first pending
// proposal if the entry is that proposal (same index, term and data);
// every pending proposal if the entry took the place of the first one, or
// carries records this leader did not decide (the pending image was built
// without them).
func (c *Controller) settle(e *pb.Entry) {
	if len(c.inflight) == 0 {
		return
	}
	first := c.inflight[0]
	switch {
	case e.GetIndex() == first.index && e.GetTerm() == first.term && bytes.Equal(e.GetData(), first.data):
		c.inflight[0] = nil
		c.inflight = c.inflight[1:]
		c.inflightBytes -= len(first.data)
		if len(c.inflight) == 0 {
			c.inflight, c.pending = nil, nil
		}
		c.inflightCount.Store(int64(len(c.inflight)))
		now := c.now()
		c.raftStats.commitLatency.Record(float64(now.Sub(first.proposed))/float64(time.Millisecond), now)
		for _, done := range first.done {
			done(nil)
		}
	case e.GetIndex() >= first.index || (e.GetType() == pb.EntryNormal && len(e.GetData()) > 0):
		c.failInflight(errNotController)
	}
}

// failInflight fails every pending proposal, in order, and drops the
// pending image (loop).
func (c *Controller) failInflight(err error) {
	failed := c.inflight
	c.inflight, c.inflightBytes, c.pending = nil, 0, nil
	c.inflightCount.Store(0)
	for _, p := range failed {
		for _, done := range p.done {
			done(err)
		}
	}
}

// submit runs fn on the loop and waits for its records to be applied. On
// error val is nil even if fn ran: what it decided may rest on pending
// entries that never committed (a TOPIC_ALREADY_EXISTS for a topic whose
// creation failed), so none of it is an answer; as in Kafka, the whole
// operation fails.
func (c *Controller) submit(ctx context.Context, fn func(img *metadata.Image, offset int64) ([]metadata.Record, any)) (any, error) {
	return c.submitEvent(ctx, &event{fn: fn, reply: make(chan eventResult, 1)})
}

// submitEvent hands ev to the loop and waits for its answer.
func (c *Controller) submitEvent(ctx context.Context, ev *event) (any, error) {
	if err := c.fatalErr(); err != nil {
		return nil, err
	}
	select {
	case c.events <- ev:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		if err := c.fatalErr(); err != nil {
			return nil, err
		}
		return nil, errStopped
	}
	select {
	case res := <-ev.reply:
		return res.answer()
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		select {
		case res := <-ev.reply:
			return res.answer()
		default:
		}
		return nil, errStopped
	}
}

func (r eventResult) answer() (any, error) {
	if r.err != nil {
		return nil, r.err
	}
	return r.val, nil
}

// submitTyped is submit with a typed result.
func submitTyped[T any](c *Controller, ctx context.Context, fn func(img *metadata.Image, offset int64) ([]metadata.Record, T)) (T, bool, error) {
	val, err := c.submit(ctx, func(img *metadata.Image, offset int64) ([]metadata.Record, any) {
		return fn(img, offset)
	})
	t, ok := val.(T)
	return t, ok, err
}

// answerCode is the top-level error of an operation submitted with
// submitTyped: its failure to commit, else the refusal it decided (e), else
// 0.
func answerCode(ok bool, err error, e *decide.Error) int16 {
	if !ok || err != nil {
		return errorCode(err)
	}
	return e.Code()
}

// errorCode maps a failure to commit to the Kafka error a client should see.
func errorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errNotController):
		return kerr.NotController.Code
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, errStopped):
		return kerr.NotController.Code
	default:
		return kerr.UnknownServerError.Code
	}
}
