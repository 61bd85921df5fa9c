package replica

// The leader's side of replication (Kafka's Partition.fetchRecords,
// updateFollowerFetchState, maybeExpandIsr, maybeShrinkIsr and the
// AlterPartitionManager): followers fetch with their replica id; the
// leader reads them up to its log end, checks their last fetched epoch
// against its epoch cache (KIP-595 style DivergingEpoch: a follower that
// diverged is told where to truncate instead of being sent records),
// records how far each has fetched and when it was last caught up, moves
// the high watermark to the smallest log end over the ISR, and asks the
// active controller (AlterPartition) to add a follower that caught up to
// the ISR and to drop one that stayed behind for replica.lag.time.max.ms.
//
// Goroutines: follower fetches run on the connection's goroutine (or, for
// one woken in the fetch purgatory, on the goroutine that woke it). The
// ISR expiry runs on a ticker goroutine started by Start; AlterPartition
// requests go out from one sender goroutine (isrSender), one request at a
// time carrying every change queued meanwhile, at most one change in
// flight per partition. Both stop with Stop.
//
// Locks: isrSender.mu guards its queue and is taken with no partition lock
// held. A change is proposed under Partition.mu held exclusively (it sets
// pendingISR); the answer is applied under it too.

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Peers reach the rest of the cluster: other brokers (a follower fetching
// from its leaders, on connections of its own per fetcher) and the active
// controller (AlterPartition). The broker implements it.
type Peers interface {
	// SendToBroker sends req to broker id on the connection numbered conn
	// (each fetcher has its own, so that a long poll holds up nothing
	// else) and returns its answer.
	SendToBroker(ctx context.Context, id int32, conn int, req kmsg.Request) (kmsg.Response, error)
	// SendToController sends req to the active controller, waiting for
	// one until ctx ends.
	SendToController(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// Divergence is where a follower's log left the leader's: the largest
// epoch not above the follower's last fetched one, and where the leader's
// log of it ends. Epoch -1 means none.
type Divergence struct {
	Epoch     int32
	EndOffset int64
}

var noDivergence = Divergence{Epoch: -1, EndOffset: -1}

// preferredReadReplica is the replica a consumer in rack should fetch
// from instead of this leader (KIP-392, Kafka's RackAwareReplicaSelector
// over the replicas findPreferredReadReplica allows: in the ISR, with the
// fetch offset between their log start and log end), or -1 to read here.
// The leader stays the choice when it is in the consumer's rack, when no
// replica is, and without a selector (replica.selector.class unset).
func (m *Manager) preferredReadReplica(p *Partition, rack string, fetchOffset int64) int32 {
	if !m.rackAware || rack == "" {
		return -1
	}
	img := m.image.Load()
	if img == nil {
		return -1
	}
	inRack := func(id int32) bool {
		b := img.Brokers[id]
		return b != nil && !b.Fenced && b.Rack != nil && *b.Rack == rack
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.isLeaderLocked() || inRack(p.self) {
		return -1
	}
	best, bestEnd := int32(-1), int64(-1)
	for _, id := range p.isr {
		r := p.remotes[id]
		if id == p.self || r == nil || !inRack(id) {
			continue
		}
		end := r.logEndOffset.Load()
		if end < fetchOffset || r.logStartOffset.Load() > fetchOffset {
			continue
		}
		if end > bestEnd {
			best, bestEnd = id, end
		}
	}
	return best
}

// readForFollower is readPartition for a follower's fetch of a partition
// this node leads.
func (m *Manager) readForFollower(p *Partition, params FetchParams, e *FetchEntry, budget *int64, minOne *bool) {
	l := p.log
	p.mu.RLock()
	r := p.remotes[params.ReplicaID]
	throttled := r != nil && p.leaderThrottledLocked(params.ReplicaID)
	p.mu.RUnlock()
	if r == nil {
		// Not a replica of the partition (a reassignment the follower
		// learned of first): it waits for the metadata.
		e.Result.Err, e.Result.CurrentLeader = kerr.NotLeaderForPartition, m.hintFor(e.TopicPartition, kerr.NotLeaderForPartition, p)
		return
	}
	leaderEnd := l.LogEndOffset()
	sent := r.sentHighWatermark.Load()
	e.Result.HighWatermark, e.Result.LastStableOffset = l.HighWatermark(), lastStableOffset(l)
	e.Result.LogStartOffset = l.LogStartOffset()
	if div, ok := diverged(l, e); ok {
		// The follower truncates before it fetches on. Its fetch offset
		// says nothing of what it has in common with the leader, so it
		// is not recorded.
		e.Result.Diverging = div
		e.hwNews = true
		r.sentHighWatermark.Store(e.Result.HighWatermark)
		return
	}
	now := m.now()
	if !throttled || !m.leaderQuota.Exceeded(now) {
		limit := max(min(int64(e.MaxBytes), *budget), 0)
		fr, err := l.Read(e.FetchOffset, int32(limit), leaderEnd, *minOne)
		if err != nil {
			e.Result.Err = storageErr(err)
			return
		}
		if fr.Size > 0 {
			e.Result.Records = fr
			*budget -= fr.Size
			*minOne = false
			if throttled {
				m.leaderQuota.Record(fr.Size, now)
			}
		}
	}
	startMoved := e.LogStartOffset > r.logStartOffset.Load()
	e.hwMoved = m.followerFetched(p, r, params, e.FetchOffset, e.LogStartOffset, leaderEnd)
	if startMoved {
		// A DeleteRecords may be waiting for this follower's log start.
		m.lowWaits.CheckAndComplete(e.TopicPartition)
	}
	// The high watermark this fetch may have moved is the one it sends.
	hw := l.HighWatermark()
	e.Result.HighWatermark = hw
	e.hwNews = hw > sent
	r.sentHighWatermark.Store(hw)
}

// followerFetched records a follower's fetch from fetchOffset while the
// leader's log ended at leaderEnd (Kafka's updateFollowerFetchState), asks
// for the follower's return to the ISR when it has caught up, and moves
// the high watermark. It reports whether the high watermark moved.
func (m *Manager) followerFetched(p *Partition, r *remoteReplica, params FetchParams, fetchOffset, logStart, leaderEnd int64) bool {
	nowMs := m.nowMs()
	switch {
	case fetchOffset >= leaderEnd:
		r.lastCaughtUpMs.Store(max(r.lastCaughtUpMs.Load(), nowMs))
	case fetchOffset >= r.lastFetchLeaderEnd.Load():
		r.lastCaughtUpMs.Store(max(r.lastCaughtUpMs.Load(), r.lastFetchMs.Load()))
	}
	r.lastFetchLeaderEnd.Store(leaderEnd)
	r.lastFetchMs.Store(nowMs)
	r.logEndOffset.Store(fetchOffset)
	r.logStartOffset.Store(logStart)
	if params.ReplicaEpoch >= 0 {
		r.brokerEpoch.Store(params.ReplicaEpoch)
	}
	m.maybeExpandISR(p, params.ReplicaID, r)
	return p.maybeAdvanceHighWatermark()
}

// maybeExpandISR proposes adding a follower to the ISR once it has reached
// both the high watermark and the start of the leader's epoch (Kafka's
// isFollowerInSync), and its broker is neither fenced nor shutting down
// (KIP-841; the controller checks again).
func (m *Manager) maybeExpandISR(p *Partition, id int32, r *remoteReplica) {
	p.mu.RLock()
	need := p.isLeaderLocked() && p.pendingISR == nil && !slices.Contains(p.isr, id) &&
		r.logEndOffset.Load() >= p.log.HighWatermark() && r.logEndOffset.Load() >= p.leaderEpochStart
	p.mu.RUnlock()
	if !need || !m.brokerEligible(id) {
		return
	}
	p.mu.Lock()
	if p.isLeaderLocked() && p.pendingISR == nil && !slices.Contains(p.isr, id) {
		isr := append(slices.Clone(p.isr), id)
		slices.Sort(isr)
		m.proposeISRLocked(p, isr)
	}
	p.mu.Unlock()
}

// maybeReportRecovered tells the controller that this leader, elected
// uncleanly (LeaderRecoveryState RECOVERING), has recovered: its log is
// open and its producer state rebuilt, so an AlterPartition with the same
// ISR and RECOVERED goes out at once (Kafka's leader does the same, and
// until then the controller lets no follower into the ISR).
func (m *Manager) maybeReportRecovered(p *Partition) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.recovering && p.isLeaderLocked() && p.pendingISR == nil {
		m.proposeISRLocked(p, slices.Clone(p.isr))
	}
}

// brokerEligible reports whether the image has broker id registered,
// unfenced and not shutting down.
func (m *Manager) brokerEligible(id int32) bool {
	img := m.image.Load()
	if img == nil {
		return false
	}
	b := img.Brokers[id]
	return b != nil && !b.Fenced && !b.InControlledShutdown
}

// shrinkISRs drops from the ISR of every partition this node leads the
// followers that have not caught up for replica.lag.time.max.ms (Kafka's
// maybeShrinkIsr, run every half of it).
func (m *Manager) shrinkISRs() {
	nowMs := m.nowMs()
	lagMs := m.lagTimeMax.Milliseconds()
	for _, p := range m.partitions() {
		p.mu.RLock()
		var out []int32
		if p.isLeaderLocked() && p.pendingISR == nil {
			out = p.laggingLocked(nowMs, lagMs)
		}
		p.mu.RUnlock()
		if len(out) == 0 {
			continue
		}
		p.mu.Lock()
		if p.isLeaderLocked() && p.pendingISR == nil {
			if out = p.laggingLocked(nowMs, lagMs); len(out) > 0 {
				isr := slices.DeleteFunc(slices.Clone(p.isr), func(id int32) bool { return slices.Contains(out, id) })
				m.log.Info("shrinking the ISR", "topic", p.tp.Topic, "partition", p.tp.Partition,
					"isr", p.isr, "newISR", isr, "outOfSync", out, "leaderEnd", p.log.LogEndOffset(), "highWatermark", p.log.HighWatermark())
				m.proposeISRLocked(p, isr)
			}
		}
		p.mu.Unlock()
	}
}

// laggingLocked names the ISR followers last caught up more than lagMs
// ago. The caller holds mu.
func (p *Partition) laggingLocked(nowMs, lagMs int64) []int32 {
	var out []int32
	for _, id := range p.isr {
		if id == p.self {
			continue
		}
		r := p.remotes[id]
		if r == nil || nowMs-r.lastCaughtUpMs.Load() > lagMs {
			out = append(out, id)
		}
	}
	return out
}

// isrChange is one partition's AlterPartition proposal.
type isrChange struct {
	p              *Partition
	topicID        protocol.UUID
	leaderEpoch    int32
	partitionEpoch int32
	isr            []int32
	brokerEpochs   []int64
	// expand: the change adds a replica to the ISR (else it drops one),
	// counted as an ISR expansion or shrink once committed.
	expand bool
}

// proposeISRLocked queues an AlterPartition for p with isr. The caller
// holds p.mu exclusively.
func (m *Manager) proposeISRLocked(p *Partition, isr []int32) {
	if m.isr == nil {
		return
	}
	p.pendingISR = isr
	c := &isrChange{p: p, topicID: p.topicID, leaderEpoch: p.leaderEpoch, partitionEpoch: p.partitionEpoch, isr: isr,
		expand: len(isr) > len(p.isr)}
	for _, id := range isr {
		epoch := int64(-1)
		if id == p.self {
			epoch = m.brokerEpoch.Load()
		} else if r := p.remotes[id]; r != nil {
			epoch = r.brokerEpoch.Load()
		}
		c.brokerEpochs = append(c.brokerEpochs, epoch)
	}
	m.isr.queue(c)
}

// isrSender sends the queued ISR changes to the active controller.
type isrSender struct {
	m       *Manager
	mu      sync.Mutex
	pending []*isrChange
	ready   chan struct{} // signalled (capacity 1) when pending grows

	// failing is set while requests fail, so that a run of failures is
	// logged once (run's goroutine only).
	failing bool
}

func newISRSender(m *Manager) *isrSender {
	return &isrSender{m: m, ready: make(chan struct{}, 1)}
}

func (s *isrSender) queue(c *isrChange) {
	s.mu.Lock()
	s.pending = append(s.pending, c)
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// isrRetryBackoff spaces resends of an AlterPartition the controller did
// not decide (no answer, or a retriable error), doubling up to
// isrRetryBackoffMax while they keep failing.
const (
	isrRetryBackoff    = 100 * time.Millisecond
	isrRetryBackoffMax = 2 * time.Second
)

// isrRequestTimeout bounds one AlterPartition round trip.
const isrRequestTimeout = 30 * time.Second

// run sends what is queued, one request at a time, until ctx ends.
func (s *isrSender) run(ctx context.Context) {
	backoff := isrRetryBackoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.ready:
		}
		for {
			s.mu.Lock()
			batch := s.pending
			s.pending = nil
			s.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			retry := s.send(ctx, batch)
			if len(retry) == 0 {
				backoff = isrRetryBackoff
			} else {
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, isrRetryBackoffMax)
				s.mu.Lock()
				s.pending = append(retry, s.pending...)
				s.mu.Unlock()
			}
		}
	}
}

// stillPending reports whether c is its partition's change in flight.
func (c *isrChange) stillPending() bool {
	p := c.p
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.isLeaderLocked() && p.leaderEpoch == c.leaderEpoch && p.partitionEpoch == c.partitionEpoch && slices.Equal(p.pendingISR, c.isr)
}

// send sends one AlterPartition for batch and applies the answers; it
// returns the changes to send again.
func (s *isrSender) send(ctx context.Context, batch []*isrChange) (retry []*isrChange) {
	m := s.m
	batch = slices.DeleteFunc(batch, func(c *isrChange) bool { return !c.stillPending() })
	if len(batch) == 0 {
		return nil
	}
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 3
	req.BrokerID = m.self
	req.BrokerEpoch = m.brokerEpoch.Load()
	byTopic := map[protocol.UUID]int{}
	type key struct {
		id   protocol.UUID
		part int32
	}
	changes := map[key]*isrChange{}
	for _, c := range batch {
		ti, ok := byTopic[c.topicID]
		if !ok {
			ti = len(req.Topics)
			byTopic[c.topicID] = ti
			t := kmsg.NewAlterPartitionRequestTopic()
			t.TopicID = c.topicID
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition = c.p.tp.Partition
		rp.LeaderEpoch = c.leaderEpoch
		rp.PartitionEpoch = c.partitionEpoch
		// Every change this leader sends says it has recovered: its log
		// is open and its state rebuilt (KIP-704).
		rp.LeaderRecoveryState = int8(metadata.LeaderRecovered)
		for i, id := range c.isr {
			be := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
			be.BrokerID, be.BrokerEpoch = id, c.brokerEpochs[i]
			rp.NewEpochISR = append(rp.NewEpochISR, be)
		}
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, rp)
		changes[key{c.topicID, c.p.tp.Partition}] = c
	}
	rctx, cancel := context.WithTimeout(ctx, isrRequestTimeout)
	defer cancel()
	kresp, err := m.peers.SendToController(rctx, req)
	if err != nil {
		if ctx.Err() == nil {
			s.failed("AlterPartition to the controller failed; retrying", len(batch), err)
		}
		return batch
	}
	resp := kresp.(*kmsg.AlterPartitionResponse)
	if resp.ErrorCode != 0 {
		ke := kerr.ErrorForCode(resp.ErrorCode)
		s.failed("AlterPartition refused", len(batch), ke)
		if kerr.IsRetriable(ke) || ke == kerr.StaleBrokerEpoch {
			return batch
		}
		for _, c := range batch {
			c.settle(m, nil)
		}
		return nil
	}
	if s.failing {
		m.log.Info("AlterPartition answered again")
		s.failing = false
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			c := changes[key{protocol.UUID(t.TopidID), rp.Partition}]
			if c == nil {
				continue
			}
			delete(changes, key{protocol.UUID(t.TopidID), rp.Partition})
			if rp.ErrorCode != 0 {
				ke := kerr.ErrorForCode(rp.ErrorCode)
				if ke == kerr.RequestTimedOut || ke == kerr.NotController || ke == kerr.OperationNotAttempted {
					retry = append(retry, c)
					continue
				}
				m.log.Info("AlterPartition refused", "topic", c.p.tp.Topic, "partition", c.p.tp.Partition, "isr", c.isr, "err", ke)
				c.settle(m, nil)
				continue
			}
			c.settle(m, &rp)
			// Counted once the controller committed it, as Kafka's
			// Partition marks IsrShrinksPerSec and IsrExpandsPerSec.
			if c.expand {
				m.isrExpands.Inc()
			} else {
				m.isrShrinks.Inc()
			}
		}
	}
	for _, c := range changes {
		retry = append(retry, c) // not answered
	}
	return retry
}

// failed logs a failed request: the first of a run at warning level, the
// rest at debug.
func (s *isrSender) failed(msg string, partitions int, err error) {
	if s.failing {
		s.m.log.Debug(msg, "partitions", partitions, "err", err)
		return
	}
	s.failing = true
	s.m.log.Warn(msg, "partitions", partitions, "err", err)
}

// settle ends c: with the controller's answer (Kafka applies it at once,
// before the metadata shows it), or, with nil, by dropping the proposal
// (the metadata tells what became of it). Waiting produces and fetches
// are woken when the high watermark moved or the ISR may have shrunk. A
// committed expansion wakes nothing unless the high watermark moved: the
// new member is at or past it, so no waiter's condition changed, and
// waking would complete every parked fetch of the partition's followers
// once per partition — with thousands of partitions returning to the ISR
// in one AlterPartition, that re-read every follower fetch's thousands of
// partitions thousands of times, and the next batch waited on it (a
// restarted broker took 20 to 70 s to rejoin every ISR at 10,000
// partitions; TestRejoiningThousandsOfISRsWakesNoFetchPerPartition).
func (c *isrChange) settle(m *Manager, rp *kmsg.AlterPartitionResponseTopicPartition) {
	p := c.p
	p.mu.Lock()
	if slices.Equal(p.pendingISR, c.isr) && p.leaderEpoch == c.leaderEpoch {
		p.pendingISR = nil
		if rp != nil && rp.LeaderID == p.self && rp.LeaderEpoch == p.leaderEpoch && rp.PartitionEpoch > p.partitionEpoch {
			p.isr, p.partitionEpoch = slices.Clone(rp.ISR), rp.PartitionEpoch
			p.recovering = rp.LeaderRecoveryState == int8(metadata.LeaderRecovering)
		}
	}
	p.mu.Unlock()
	if p.maybeAdvanceHighWatermark() || rp == nil || !c.expand {
		m.wake(p.tp)
	}
}

// isrExpiry runs shrinkISRs every half of replica.lag.time.max.ms until
// ctx ends.
func (m *Manager) isrExpiry(ctx context.Context) {
	t := time.NewTicker(max(m.lagTimeMax/2, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.shrinkISRs()
		}
	}
}
