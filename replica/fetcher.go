package replica

// Follower fetchers (Kafka's ReplicaFetcherManager and ReplicaFetcherThread):
// a partition this node follows is fetched from its leader by one of
// num.replica.fetchers fetchers per leader broker (chosen by the
// partition's hash), each a goroutine with a connection of its own. A
// fetcher sends one Fetch at a time for all its partitions (replica id and
// broker epoch in ReplicaState, topic IDs) in an incremental fetch session
// (KIP-227, as Kafka's FetchSessionHandler keeps one per fetcher): after a
// full fetch opens it, a fetch lists only the partitions whose fetch
// position changed and forgets those left out, and the leader answers only
// the partitions with news, so that a follower of thousands of idle
// partitions sends and decodes a few bytes per fetch rather than all of
// them (session.go). It appends what
// comes back as it came (the leader's offsets and epochs, byte for byte),
// takes the high watermark and log start offset the leader sent, and
// truncates where the leader says the follower's log diverged
// (DivergingEpoch) or, on OFFSET_OUT_OF_RANGE, to the leader's log end or
// from its log start, as Kafka does.
//
// Goroutines: the metadata goroutine assigns and removes partitions
// (fetchers.sync, from reconcile) and never waits for a fetcher; each
// fetcher's goroutine owns its requests and the appends of its partitions.
// A fetcher left with no partitions stops.
//
// Locks: fetchers.mu guards the fetcher map and the assignment; a
// fetcher's mu guards its partitions' fetch states. Order: fetchers.mu,
// then a fetcher's mu; neither is held while fetching, appending or
// taking a Partition's mu.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FetcherConfig is the replica.fetch.* configuration.
type FetcherConfig struct {
	// Fetchers is num.replica.fetchers: fetchers per leader broker.
	Fetchers int
	// MaxBytes is replica.fetch.max.bytes, per partition.
	MaxBytes int32
	// ResponseMaxBytes is replica.fetch.response.max.bytes.
	ResponseMaxBytes int32
	// MinBytes is replica.fetch.min.bytes.
	MinBytes int32
	// MaxWait is replica.fetch.wait.max.ms.
	MaxWait time.Duration
	// Backoff is replica.fetch.backoff.ms: the pause after an error.
	Backoff time.Duration
}

// DefaultFetcherConfig is Kafka's defaults.
func DefaultFetcherConfig() FetcherConfig {
	return FetcherConfig{Fetchers: 1, MaxBytes: 1 << 20, ResponseMaxBytes: 10 << 20, MinBytes: 1, MaxWait: 500 * time.Millisecond, Backoff: time.Second}
}

// followerFetchVersion is the Fetch version followers send: topic IDs
// (v13) and ReplicaState (v15).
const followerFetchVersion = 16

// throttleRecheck is how soon a fetcher left with only throttled
// partitions looks at the rate again.
const throttleRecheck = 100 * time.Millisecond

type fetcherKey struct {
	leader int32
	index  int
}

// fetchers assigns followed partitions to fetchers.
type fetchers struct {
	m   *Manager
	cfg FetcherConfig

	mu       sync.Mutex
	ctx      context.Context // nil until Start, then until Stop
	running  map[fetcherKey]*fetcher
	assigned map[TopicPartition]*fetchState
	wg       sync.WaitGroup
}

// fetchState is one followed partition in its fetcher.
type fetchState struct {
	p *Partition
	// leader and leaderEpoch are the leadership this state fetches under
	// (CurrentLeaderEpoch); a change of either makes a new state.
	leader      int32
	leaderEpoch int32
	key         fetcherKey

	// Guarded by the fetcher's mu.
	fetchOffset      int64
	lastFetchedEpoch int32
	delayedUntil     time.Time
}

func newFetchers(m *Manager, cfg FetcherConfig) *fetchers {
	if cfg.Fetchers < 1 {
		cfg.Fetchers = 1
	}
	return &fetchers{m: m, cfg: cfg, running: map[fetcherKey]*fetcher{}, assigned: map[TopicPartition]*fetchState{}}
}

// start lets fetchers run (partitions assigned before it wait for it).
func (fs *fetchers) start(ctx context.Context) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.ctx = ctx
	for _, st := range fs.assigned {
		fs.enqueueLocked(st)
	}
}

// stop stops every fetcher and waits for them.
func (fs *fetchers) stop() {
	fs.mu.Lock()
	fs.ctx = nil
	for k, f := range fs.running {
		f.cancel()
		delete(fs.running, k)
	}
	fs.mu.Unlock()
	fs.wg.Wait()
}

// sync makes p fetched from its leader if this node follows it, and not
// fetched otherwise. It runs on the metadata goroutine and does not wait.
func (fs *fetchers) sync(p *Partition) {
	p.mu.RLock()
	follow := !p.removed && p.log != nil && p.leader >= 0 && p.leader != p.self
	leader, epoch := p.leader, p.leaderEpoch
	p.mu.RUnlock()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	cur := fs.assigned[p.tp]
	if cur != nil && follow && cur.p == p && cur.leader == leader && cur.leaderEpoch == epoch {
		return
	}
	if cur != nil {
		fs.unassignLocked(cur)
	}
	if !follow {
		return
	}
	st := &fetchState{p: p, leader: leader, leaderEpoch: epoch, fetchOffset: p.log.LogEndOffset(), lastFetchedEpoch: -1}
	if e, ok := p.log.LatestEpoch(); ok {
		st.lastFetchedEpoch = e
	}
	h := fnv.New32a()
	h.Write([]byte(p.tp.Topic))
	st.key = fetcherKey{leader: leader, index: int((h.Sum32() + uint32(p.tp.Partition)) % uint32(fs.cfg.Fetchers))}
	fs.assigned[p.tp] = st
	if fs.ctx != nil {
		fs.enqueueLocked(st)
	}
}

// unassignLocked takes st out of its fetcher; the caller holds fs.mu.
func (fs *fetchers) unassignLocked(st *fetchState) {
	delete(fs.assigned, st.p.tp)
	f := fs.running[st.key]
	if f == nil {
		return
	}
	f.mu.Lock()
	if f.parts[st.p.tp] == st {
		delete(f.parts, st.p.tp)
	}
	empty := len(f.parts) == 0
	f.mu.Unlock()
	if empty {
		f.cancel()
		delete(fs.running, st.key)
	}
}

// enqueueLocked hands st to its fetcher, starting the fetcher if needed;
// the caller holds fs.mu.
func (fs *fetchers) enqueueLocked(st *fetchState) {
	f := fs.running[st.key]
	if f == nil {
		ctx, cancel := context.WithCancel(fs.ctx)
		f = &fetcher{fs: fs, key: st.key, parts: map[TopicPartition]*fetchState{}, wake: make(chan struct{}, 1), cancel: cancel,
			log: fs.m.log.With("leader", st.key.leader, "fetcher", st.key.index)}
		fs.running[st.key] = f
		fs.wg.Add(1)
		go func() {
			defer fs.wg.Done()
			f.run(ctx)
		}()
	}
	f.mu.Lock()
	f.parts[st.p.tp] = st
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// current reports whether st is still its partition's assignment.
func (fs *fetchers) current(st *fetchState) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.assigned[st.p.tp] == st
}

// fetcher is one fetcher goroutine's state.
type fetcher struct {
	fs     *fetchers
	key    fetcherKey
	log    *slog.Logger
	cancel context.CancelFunc
	wake   chan struct{}

	mu    sync.Mutex
	parts map[TopicPartition]*fetchState

	// session is the fetch session with the leader (the fetcher's
	// goroutine's own).
	session fetchSessionClient

	// failing is set after a failed request so that only the first of a
	// run of failures is logged at warning level.
	failing bool
}

func (f *fetcher) run(ctx context.Context) {
	for ctx.Err() == nil {
		req, states, wait := f.build()
		if len(states) == 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
			case <-f.wake:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		resp, err := f.fs.m.peers.SendToBroker(ctx, f.key.leader, f.key.index, req)
		if err != nil {
			// The connection may be new next time and the leader may
			// have restarted: open a new session.
			f.session.reset()
			if ctx.Err() != nil {
				return
			}
			if !f.failing {
				f.log.Warn("fetching from the leader failed", "partitions", len(states), "err", err)
			}
			f.failing = true
			f.delay(states)
			continue
		}
		if f.failing {
			f.log.Info("fetching from the leader again")
			f.failing = false
		}
		f.process(ctx, resp.(*kmsg.FetchResponse), states)
	}
}

// build is the next Fetch for the partitions not backing off; with none,
// wait is how long until one is due.
func (f *fetcher) build() (*kmsg.FetchRequest, map[fetchPartKey]*fetchState, time.Duration) {
	cfg := f.fs.cfg
	m := f.fs.m
	now := time.Now()
	wait := time.Hour
	req := kmsg.NewPtrFetchRequest()
	req.Version = followerFetchVersion
	req.ReplicaID = -1
	req.ReplicaState.ID = m.self
	req.ReplicaState.Epoch = m.brokerEpoch.Load()
	req.MaxWaitMillis = int32(cfg.MaxWait.Milliseconds())
	req.MinBytes = cfg.MinBytes
	req.MaxBytes = cfg.ResponseMaxBytes
	states := map[fetchPartKey]*fetchState{}
	wanted := map[fetchPartKey]sessionPartition{}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, st := range f.parts {
		if d := st.delayedUntil.Sub(now); d > 0 {
			wait = min(wait, d)
			continue
		}
		if st.p.followerThrottled() && m.followerQuota.Exceeded(now) {
			// Over follower.replication.throttled.rate: left out until
			// the rate falls.
			wait = min(wait, throttleRecheck)
			continue
		}
		k := fetchPartKey{st.p.topicID, st.p.tp.Partition}
		wanted[k] = sessionPartition{
			topic:            st.p.tp.Topic,
			leaderEpoch:      st.leaderEpoch,
			fetchOffset:      st.fetchOffset,
			lastFetchedEpoch: st.lastFetchedEpoch,
			logStartOffset:   st.p.log.LogStartOffset(),
			maxBytes:         cfg.MaxBytes,
		}
		states[k] = st
	}
	if len(states) > 0 {
		f.session.build(req, wanted)
	}
	return req, states, wait
}

type fetchPartKey struct {
	topicID   protocol.UUID
	partition int32
}

// delay backs the partitions off for replica.fetch.backoff.ms.
func (f *fetcher) delay(states map[fetchPartKey]*fetchState) {
	until := time.Now().Add(f.fs.cfg.Backoff)
	f.mu.Lock()
	for _, st := range states {
		st.delayedUntil = until
	}
	f.mu.Unlock()
}

// delayOne backs one partition off.
func (f *fetcher) delayOne(st *fetchState) {
	f.mu.Lock()
	st.delayedUntil = time.Now().Add(f.fs.cfg.Backoff)
	f.mu.Unlock()
}

// process applies a fetch response. states are the session's partitions,
// whether or not the request listed them: an incremental answer may carry
// any of them.
func (f *fetcher) process(ctx context.Context, resp *kmsg.FetchResponse, states map[fetchPartKey]*fetchState) {
	if !f.session.answered(resp) {
		// The leader lost the session (evicted, or restarted) or the
		// epochs crossed: a full fetch opens a new one, at once, as
		// Kafka's fetcher does for these errors.
		f.log.Info("fetch session refused by the leader; opening a new one", "err", kerr.ErrorForCode(resp.ErrorCode))
		return
	}
	if resp.ErrorCode != 0 {
		f.log.Warn("fetch refused by the leader", "err", kerr.ErrorForCode(resp.ErrorCode))
		f.delay(states)
		return
	}
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			rp := &t.Partitions[pi]
			k := fetchPartKey{protocol.UUID(t.TopicID), rp.Partition}
			st := states[k]
			if st == nil {
				continue
			}
			delete(states, k)
			f.processPartition(ctx, st, rp)
		}
	}
	// Partitions the leader left out of its answer are fetched again.
}

// processPartition applies one partition's answer, unless the partition
// moved to another leader or epoch meanwhile.
func (f *fetcher) processPartition(ctx context.Context, st *fetchState, rp *kmsg.FetchResponseTopicPartition) {
	if !f.fs.current(st) {
		return
	}
	p, l := st.p, st.p.log
	f.mu.Lock()
	offset := st.fetchOffset
	f.mu.Unlock()
	switch ke := kerr.ErrorForCode(rp.ErrorCode); {
	case ke == nil:
	case errors.Is(ke, kerr.OffsetOutOfRange):
		if err := f.outOfRange(ctx, st); err != nil {
			f.log.Warn("handling an out-of-range fetch", "topic", p.tp.Topic, "partition", p.tp.Partition, "offset", offset, "err", err)
			f.delayOne(st)
		}
		return
	case errors.Is(ke, kerr.OffsetMovedToTieredStorage):
		if err := f.movedToTiered(ctx, st); err != nil {
			f.log.Warn("starting over at the leader's local log start", "topic", p.tp.Topic, "partition", p.tp.Partition, "offset", offset, "err", err)
			f.delayOne(st)
		}
		return
	default:
		// NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
		// UNKNOWN_TOPIC_ID, ...: the metadata will say what changed.
		f.log.Debug("partition fetch refused", "topic", p.tp.Topic, "partition", p.tp.Partition, "err", ke)
		f.delayOne(st)
		return
	}
	if rp.DivergingEpoch.Epoch >= 0 || rp.DivergingEpoch.EndOffset >= 0 {
		f.truncateDiverged(st, rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset)
		return
	}
	if records := wholeBatches(rp.RecordBatches); len(records) > 0 {
		if p.followerThrottled() {
			f.fs.m.followerQuota.Record(int64(len(records)), time.Now())
		}
		if err := p.appendAsFollower(st, records); err != nil {
			if errors.Is(err, storage.ErrUnexpectedAppendOffset) {
				f.log.Warn("replicated batches do not follow the log end; fetching from it", "topic", p.tp.Topic, "partition", p.tp.Partition, "err", err)
				f.reset(st)
				return
			}
			f.log.Error("appending replicated batches", "topic", p.tp.Topic, "partition", p.tp.Partition, "err", err)
			f.delayOne(st)
			return
		}
	}
	moved := l.AdvanceHighWatermark(rp.HighWatermark)
	if rp.LogStartOffset > l.LogStartOffset() {
		if _, err := l.DeleteRecordsBefore(min(rp.LogStartOffset, l.HighWatermark())); err != nil {
			f.log.Warn("moving the log start offset to the leader's", "topic", p.tp.Topic, "partition", p.tp.Partition, "err", err)
		}
	}
	f.reset(st)
	if moved {
		f.fs.m.wake(p.tp)
	}
}

// reset points st at the log's end and latest epoch.
func (f *fetcher) reset(st *fetchState) {
	l := st.p.log
	f.mu.Lock()
	st.fetchOffset = l.LogEndOffset()
	if e, ok := l.LatestEpoch(); ok {
		st.lastFetchedEpoch = e
	} else {
		st.lastFetchedEpoch = -1
	}
	f.mu.Unlock()
}

// truncateDiverged truncates where the leader's log of epoch ends (Kafka's
// truncateOnFetchResponse): to the smaller of that and where this log's
// same or nearest older epoch ends. An unknown epoch (the leader has none
// at or below the follower's) truncates to the high watermark.
func (f *fetcher) truncateDiverged(st *fetchState, epoch int32, leaderEnd int64) {
	p, l := st.p, st.p.log
	var to int64
	if epoch < 0 || leaderEnd < 0 {
		to = l.HighWatermark()
	} else {
		_, followerEnd := l.EndOffsetForEpoch(epoch)
		if followerEnd < 0 {
			followerEnd = l.HighWatermark()
		}
		to = min(leaderEnd, followerEnd)
	}
	if err := p.truncateAsFollower(st, to); err != nil {
		f.log.Error("truncating a diverged log", "topic", p.tp.Topic, "partition", p.tp.Partition, "to", to, "err", err)
		f.delayOne(st)
		return
	}
	f.mu.Lock()
	sentOffset, sentEpoch := st.fetchOffset, st.lastFetchedEpoch
	f.mu.Unlock()
	f.reset(st)
	f.mu.Lock()
	unchanged := st.fetchOffset == sentOffset && st.lastFetchedEpoch == sentEpoch
	f.mu.Unlock()
	if unchanged {
		// The next fetch would be the one just answered, and asked at
		// once the leader would answer the same (where an epoch it no
		// longer writes in ends moves only with its log start or a new
		// leadership): it waits replica.fetch.backoff.ms, not spinning.
		f.log.Warn("truncating a diverged log changed nothing; backing off", "topic", p.tp.Topic, "partition", p.tp.Partition, "to", to, "leaderEpoch", epoch, "leaderEnd", leaderEnd, "logEnd", l.LogEndOffset(), "lastFetchedEpoch", sentEpoch)
		f.delayOne(st)
		return
	}
	f.log.Info("truncated a diverged log", "topic", p.tp.Topic, "partition", p.tp.Partition, "to", to, "leaderEpoch", epoch, "logEnd", l.LogEndOffset())
}

// outOfRange handles OFFSET_OUT_OF_RANGE as Kafka's
// handleOffsetOutOfRange: past the leader's log end, the follower
// truncates to it; below the leader's log start, it starts over there.
func (f *fetcher) outOfRange(ctx context.Context, st *fetchState) error {
	p, l := st.p, st.p.log
	leaderEnd, err := f.leaderOffset(ctx, st, LatestTimestamp)
	if err != nil {
		return err
	}
	if leaderEnd < l.LogEndOffset() {
		if err := p.truncateAsFollower(st, leaderEnd); err != nil {
			return err
		}
		f.reset(st)
		return nil
	}
	leaderStart, err := f.leaderOffset(ctx, st, EarliestTimestamp)
	if err != nil {
		return err
	}
	if l.LogEndOffset() < leaderStart {
		if err := p.startOverAsFollower(st, leaderStart); err != nil {
			return err
		}
		f.log.Info("follower log behind the leader's log start; starting over", "topic", p.tp.Topic, "partition", p.tp.Partition, "offset", leaderStart)
	}
	f.reset(st)
	return nil
}

// movedToTiered handles OFFSET_MOVED_TO_TIERED_STORAGE as Kafka's
// handleOffsetMovedToTieredStorage: the follower's log ends below the
// leader's local log start, so it starts over there, with the leader
// epochs and producer state of the remote segment before it, and with the
// leader's log start (the offsets between are in remote storage).
func (f *fetcher) movedToTiered(ctx context.Context, st *fetchState) error {
	p := st.p
	localStart, err := f.leaderOffset(ctx, st, EarliestLocalTimestamp)
	if err != nil {
		return err
	}
	logStart, err := f.leaderOffset(ctx, st, EarliestTimestamp)
	if err != nil {
		return err
	}
	var epochs []storage.EpochEntry
	var snapshot []byte
	if t := f.fs.m.tiered; t != nil && localStart > 0 {
		var found bool
		epochs, snapshot, found, err = t.AuxState(ctx, p.tp, p.topicID, localStart-1)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("no remote segment holds offset %d, before the leader's local log start", localStart-1)
		}
	}
	err = p.asFollower(st, func(l *storage.Log) error {
		if l.LogEndOffset() >= localStart {
			return nil // caught up meanwhile (or a stale answer)
		}
		return l.StartOverFromRemote(localStart, logStart, epochs, snapshot)
	})
	if err != nil {
		return err
	}
	f.log.Info("follower log behind the leader's local log start; started over there from remote storage", "topic", p.tp.Topic, "partition", p.tp.Partition, "local_log_start", localStart, "log_start", logStart)
	f.reset(st)
	return nil
}

// leaderOffset asks the leader for its latest or earliest offset.
func (f *fetcher) leaderOffset(ctx context.Context, st *fetchState, timestamp int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 4
	if timestamp < EarliestTimestamp {
		req.Version = 9 // -4 and -5 (KIP-1005)
	}
	req.ReplicaID = f.fs.m.self
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = st.p.tp.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = st.p.tp.Partition, st.leaderEpoch, timestamp
	t.Partitions = append(t.Partitions, rp)
	req.Topics = append(req.Topics, t)
	kresp, err := f.fs.m.peers.SendToBroker(ctx, f.key.leader, f.key.index, req)
	if err != nil {
		return -1, err
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, errors.New("the leader's ListOffsets answer names no partition")
	}
	ap := resp.Topics[0].Partitions[0]
	if ap.ErrorCode != 0 {
		return -1, kerr.ErrorForCode(ap.ErrorCode)
	}
	return ap.Offset, nil
}

// wholeBatches cuts a trailing partial batch off records (a leader may
// end a fetch answer in the middle of one).
func wholeBatches(records []byte) []byte {
	n := 0
	for rest := records; len(rest) > 0; {
		_, next, _, err := protocol.NextBatch(rest)
		if err != nil {
			break
		}
		n += len(rest) - len(next)
		rest = next
	}
	return records[:n]
}

// errNotFollowing: the partition's leadership moved while a fetch
// answer for the old one was being applied.
var errNotFollowing = errors.New("the partition is no longer followed at that leader epoch")

// followingLocked reports whether p is still followed as st says; the
// caller holds p.mu.
func (p *Partition) followingLocked(st *fetchState) bool {
	return !p.removed && p.leader == st.leader && p.leaderEpoch == st.leaderEpoch && p.leader != p.self
}

// asFollower runs fn on p's log while p is followed as st says, under
// p.mu held shared so that the leadership cannot change meanwhile.
func (p *Partition) asFollower(st *fetchState, fn func(l *storage.Log) error) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.followingLocked(st) {
		return errNotFollowing
	}
	return fn(p.log)
}

// appendAsFollower appends batches fetched from the leader as they are.
func (p *Partition) appendAsFollower(st *fetchState, records []byte) error {
	return p.asFollower(st, func(l *storage.Log) error {
		_, _, err := l.Append(records, -1, storage.AppendReplication)
		return err
	})
}

// truncateAsFollower truncates the log to offset.
func (p *Partition) truncateAsFollower(st *fetchState, offset int64) error {
	return p.asFollower(st, func(l *storage.Log) error { return l.TruncateTo(offset) })
}

// startOverAsFollower empties the log and starts it at offset.
func (p *Partition) startOverAsFollower(st *fetchState, offset int64) error {
	return p.asFollower(st, func(l *storage.Log) error { return l.TruncateFullyAndStartAt(offset) })
}
