package replica

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TopicPartition names one partition.
type TopicPartition = storage.TopicPartition

// AbortedTransaction is an aborted transaction a read_committed fetch
// reports.
type AbortedTransaction = storage.AbortedTransaction

// Partition is one hosted partition: its log and its replica state. The
// log never changes; the leadership state is guarded by mu (see doc.go).
type Partition struct {
	tp      TopicPartition
	topicID protocol.UUID
	// partitionLabel is tp.Partition in decimal, the partition label of
	// its metrics, made once instead of at every scrape.
	partitionLabel string
	self           int32
	// log is nil while the partition is offline: its log could not be
	// opened (operations answer KAFKA_STORAGE_ERROR).
	log *storage.Log

	mu          sync.RWMutex
	leader      int32
	leaderEpoch int32
	// partitionEpoch is the image's (every change to the partition's
	// record bumps it); AlterPartition names it.
	partitionEpoch int32
	replicas       []int32
	isr            []int32
	// config is the topic's, shared by its partitions: never written
	// through.
	config *config.Topic
	// leaderEpochStart is the log end offset when this node became the
	// leader at leaderEpoch: a follower joins the ISR only once it has
	// reached it (Kafka's leaderEpochStartOffsetOpt).
	leaderEpochStart int64
	// recovering: the leader came from an unclean election (KIP-704)
	// and has not yet told the controller it recovered.
	recovering bool
	// pendingISR is the ISR of an AlterPartition in flight (nil: none).
	// Until the controller answers, the high watermark waits for the
	// union of it and the ISR (Kafka's maximal ISR).
	pendingISR []int32
	// remotes are the other replicas, with what the leader knows of each
	// from its fetches (replication.go).
	remotes map[int32]*remoteReplica
	// removed is set when the partition stops being hosted; operations
	// holding it answer NOT_LEADER_OR_FOLLOWER from then on.
	removed bool

	// lease is the node's leader lease, shared by its partitions.
	lease *leaderLease

	// announcedEpoch is the leader epoch the leadership listeners were
	// last told about (-1: they know this node does not lead). Only
	// ApplyImage touches it, under Manager.applyMu.
	announcedEpoch int32
}

// remoteReplica is what the leader knows of another replica, from its
// fetches. The fields are atomics because fetches update them under
// Partition.mu held shared; one follower fetches a partition from one
// fetcher, so their updates do not race with each other in practice, and
// a lost update only delays the next ISR decision by one fetch.
type remoteReplica struct {
	// logEndOffset is the offset the replica last fetched from (its log
	// end), -1 until it fetches in this leadership term.
	logEndOffset atomic.Int64
	// logStartOffset is the replica's log start, from its fetches (-1
	// until it fetches): DeleteRecords waits for every replica's.
	logStartOffset atomic.Int64
	// lastCaughtUpMs is when the replica last had everything the leader
	// had (Kafka's lastCaughtUpTimeMs): the ISR drops it once this is
	// older than replica.lag.time.max.ms.
	lastCaughtUpMs atomic.Int64
	// lastFetchLeaderEnd and lastFetchMs are the leader's log end and the
	// time at the replica's previous fetch: a fetch from at least that
	// offset shows the replica was caught up then.
	lastFetchLeaderEnd atomic.Int64
	lastFetchMs        atomic.Int64
	// brokerEpoch is the broker epoch the replica's fetches carry
	// (ReplicaState, Fetch v15+; -1 before), named in AlterPartition.
	brokerEpoch atomic.Int64
	// sentHighWatermark is the high watermark last sent to the replica:
	// a waiting follower fetch is answered as soon as it moves, so that
	// followers learn the high watermark without waiting for data.
	sentHighWatermark atomic.Int64
}

func newRemoteReplica(caughtUpMs int64) *remoteReplica {
	r := &remoteReplica{}
	r.logEndOffset.Store(-1)
	r.logStartOffset.Store(-1)
	r.lastCaughtUpMs.Store(caughtUpMs)
	r.lastFetchLeaderEnd.Store(-1)
	r.brokerEpoch.Store(-1)
	r.sentHighWatermark.Store(-1)
	return r
}

func newPartition(tp TopicPartition, topicID protocol.UUID, self int32, log *storage.Log, lease *leaderLease) *Partition {
	return &Partition{tp: tp, topicID: topicID, partitionLabel: strconv.Itoa(int(tp.Partition)), self: self, log: log, lease: lease, leader: -1, leaderEpoch: -1, announcedEpoch: -1}
}

// TopicPartition names the partition.
func (p *Partition) TopicPartition() TopicPartition { return p.tp }

// update applies the image's view of the partition, and its topic's
// configuration when cfg is not nil.
func (p *Partition) update(meta metadata.Partition, cfg *config.Topic, nowMs int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	newTerm := meta.Leader != p.leader || meta.LeaderEpoch != p.leaderEpoch
	if newTerm {
		// A new leadership term: what this node knew of the other
		// replicas' progress belongs to the old one (Kafka resets the
		// remote replica states on makeLeader).
		p.remotes = map[int32]*remoteReplica{}
	}
	if newTerm || meta.PartitionEpoch != p.partitionEpoch {
		// The image decided: an AlterPartition in flight is either in
		// it or refused.
		p.pendingISR = nil
	}
	p.leader, p.leaderEpoch, p.partitionEpoch = meta.Leader, meta.LeaderEpoch, meta.PartitionEpoch
	p.replicas, p.isr = meta.Replicas, meta.ISR
	p.recovering = meta.LeaderRecoveryState == metadata.LeaderRecovering
	if cfg != nil {
		p.config = cfg
	}
	if newTerm && p.leader == p.self && p.log != nil {
		// Kafka's makeLeader: the new epoch starts at the log end, in the
		// epoch cache at once, so that followers of an older epoch learn
		// where it ended (DivergingEpoch) before anything is appended.
		start, err := p.log.AssignLeaderEpoch(p.leaderEpoch)
		if err != nil {
			start = p.log.LogEndOffset()
		}
		p.leaderEpochStart = start
	}
	for _, id := range p.replicas {
		if id != p.self && p.remotes[id] == nil {
			// ISR members start caught up (Kafka's resetReplicaState):
			// a new leader gives them a full lag time to fetch.
			caughtUp := int64(0)
			if slices.Contains(p.isr, id) {
				caughtUp = nowMs
			}
			p.remotes[id] = newRemoteReplica(caughtUp)
		}
	}
	for id := range p.remotes {
		if !slices.Contains(p.replicas, id) {
			delete(p.remotes, id)
		}
	}
}

// markRemoved stops the partition from serving.
func (p *Partition) markRemoved() {
	p.mu.Lock()
	p.removed = true
	p.mu.Unlock()
}

// isLeaderLocked reports whether this node leads: the image says so and,
// where another replica could have been made the leader meanwhile, the
// leader lease runs (lease.go). The caller holds mu.
func (p *Partition) isLeaderLocked() bool {
	return !p.removed && p.leader == p.self && p.log != nil && (len(p.replicas) <= 1 || p.lease.held())
}

// effectiveMinISRLocked is Kafka's effective minimum ISR size:
// min.insync.replicas capped at the replication factor (KAFKA-15583).
// The caller holds mu.
func (p *Partition) effectiveMinISRLocked() int {
	return min(int(p.config.MinInsyncReplicas), max(len(p.replicas), 1))
}

// checkLeaderEpochLocked is Kafka's check of a request's current leader
// epoch against this partition's (-1: the request names none). The
// caller holds mu.
func (p *Partition) checkLeaderEpochLocked(current int32) *kerr.Error {
	switch {
	case current < 0:
		return nil
	case p.leaderEpoch > current:
		return kerr.FencedLeaderEpoch
	case p.leaderEpoch < current:
		return kerr.UnknownLeaderEpoch
	}
	return nil
}

// maybeAdvanceHighWatermarkLocked moves the high watermark to the
// smallest log end offset over the ISR (and the ISR of an AlterPartition
// in flight: Kafka's maximal ISR), if that is further than it is,
// and reports whether it moved. Kafka's maybeIncrementLeaderHW: only the
// leader advances it, and not while the ISR is below the effective
// minimum. The caller holds mu (shared is enough: the log keeps the high
// watermark monotonic whatever order concurrent callers store in).
func (p *Partition) maybeAdvanceHighWatermarkLocked() bool {
	if !p.isLeaderLocked() || len(p.isr) < p.effectiveMinISRLocked() {
		return false
	}
	hw := p.log.LogEndOffset()
	for _, set := range [2][]int32{p.isr, p.pendingISR} {
		for _, id := range set {
			if id == p.self {
				continue
			}
			r := p.remotes[id]
			if r == nil {
				return false
			}
			hw = min(hw, r.logEndOffset.Load())
		}
	}
	return p.log.AdvanceHighWatermark(hw)
}

// maybeAdvanceHighWatermark is maybeAdvanceHighWatermarkLocked taking mu.
func (p *Partition) maybeAdvanceHighWatermark() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.maybeAdvanceHighWatermarkLocked()
}

// leadership is the current leader and epoch.
func (p *Partition) leadership() (leader, epoch int32) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.leader, p.leaderEpoch
}

// checkAppendLocked refuses an append this partition cannot take: not the
// leader (or not at the epoch the writer was bound to), or, for acks=all,
// an ISR below the effective min.insync.replicas. The caller holds mu.
func (p *Partition) checkAppendLocked(acks int16, boundEpoch int32) (*kerr.Error, string) {
	if !p.isLeaderLocked() || (boundEpoch >= 0 && boundEpoch != p.leaderEpoch) {
		return kerr.NotLeaderForPartition, ""
	}
	if acks == -1 {
		if minISR := p.effectiveMinISRLocked(); len(p.isr) < minISR {
			return kerr.NotEnoughReplicas, fmt.Sprintf("The size of the current ISR %v is insufficient to satisfy the min.isr requirement of %d for partition %s", p.isr, minISR, p.tp)
		}
	}
	return nil, ""
}

// appendAsLeader appends an entry's batch as the leader, under mu held
// shared so that leadership cannot change during the append, and advances
// the high watermark. hwMoved tells the caller to wake what waits on it.
func (p *Partition) appendAsLeader(e *AppendEntry, acks int16, origin storage.AppendOrigin) (res storage.AppendResult, recErrs []protocol.RecordError, errMsg string, err error, hwMoved bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if ke, msg := p.checkAppendLocked(acks, e.LeaderEpoch); ke != nil {
		return res, nil, msg, ke, false
	}
	if e.Batch.Bytes != nil {
		res, recErrs, err = p.log.AppendBatchVerified(e.Batch, p.leaderEpoch, origin, e.VerificationGuard)
	} else {
		res, recErrs, err = p.log.AppendVerified(e.Records, p.leaderEpoch, origin, e.VerificationGuard)
	}
	if err != nil {
		return res, recErrs, "", err, false
	}
	return res, nil, "", nil, p.maybeAdvanceHighWatermarkLocked()
}

// committedLocked reports whether the high watermark has passed offset
// (acks=all), or the error that ends the wait: the leadership moved (or,
// for a writer bound to an epoch, the epoch did), or the ISR shrank below
// the minimum after the append. The caller holds mu.
func (p *Partition) committedLocked(offset int64, boundEpoch int32) (bool, *kerr.Error) {
	if !p.isLeaderLocked() || (boundEpoch >= 0 && boundEpoch != p.leaderEpoch) {
		return true, kerr.NotLeaderForPartition
	}
	if p.log.HighWatermark() < offset {
		return false, nil
	}
	if len(p.isr) < p.effectiveMinISRLocked() {
		return true, kerr.NotEnoughReplicasAfterAppend
	}
	return true, nil
}

func (p *Partition) committed(offset int64, boundEpoch int32) (bool, *kerr.Error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.committedLocked(offset, boundEpoch)
}

// recordFollowerLogEnd notes how far a follower's log reaches and moves
// the high watermark if the ISR now allows it: unit tests stand in for a
// follower's fetch with it (followerFetched does this for real ones).
func (m *Manager) recordFollowerLogEnd(tp TopicPartition, replicaID int32, logEnd int64) {
	p := m.hosted(tp)
	if p == nil {
		return
	}
	p.mu.RLock()
	r := p.remotes[replicaID]
	if r != nil {
		r.logEndOffset.Store(logEnd)
	}
	moved := r != nil && p.maybeAdvanceHighWatermarkLocked()
	p.mu.RUnlock()
	if moved {
		m.wake(tp)
	}
}
