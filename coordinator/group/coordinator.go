package group

// Concurrency: the shards map (runtime.Shards) has its own lock. Each shard
// (one __consumer_offsets partition) has its own mu, which guards all of
// that shard's groups and offsets and is held across PartitionLog.Append,
// so that the order of records in the log is the order in which they were
// applied in memory: replaying the partition rebuilds the same state. The
// shards map's lock is released before a shard.mu is taken; never two
// shard locks at once (the append path under shard.mu: LOCKS.md at the
// repository root).
// Requests run on the caller's goroutine; a request that must wait (a
// JoinGroup parked until the rebalance completes, a SyncGroup waiting for
// the leader's assignment) registers a buffered channel under shard.mu,
// releases the lock and waits on the channel or its context. Run's
// goroutine fires timers (session, rebalance and sync timeouts, offsets
// expiry) by taking each shard's lock in turn.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/coordinator/runtime"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
)

// PartitionLog is one __consumer_offsets partition as the coordinator sees
// it: Append has acks=all semantics, ReadFrom sees committed batches (the
// coordinator runtime provides it, bound to the leader epoch the shard was
// loaded at).
type PartitionLog = runtime.PartitionLog

// TopicInfo is one topic of the metadata image.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// TopicView answers topic questions from the current metadata image. It
// must be safe for concurrent use and cheap: the coordinator calls it
// while holding a shard lock.
type TopicView interface {
	TopicByName(name string) (TopicInfo, bool)
	TopicByID(id [16]byte) (TopicInfo, bool)
	// TopicNames lists every topic (for regex subscriptions).
	TopicNames() []string
}

// Client identifies the connection a request came from, for the member
// fields Kafka records (client.id and host).
type Client struct {
	ID   string
	Host string
	// DescribeTopic reports whether the request's principal may DESCRIBE
	// a topic; nil allows every topic. A regex subscription resolved
	// during the request's heartbeat matches only such topics, as
	// Kafka's TopicRegexResolver filters them by the member's principal.
	DescribeTopic func(topic string) bool
}

// OffsetsTopic is the internal topic holding group state.
const OffsetsTopic = "__consumer_offsets"

// Coordinator is the group coordinator of one broker: it serves the groups
// whose __consumer_offsets partitions are loaded here.
type Coordinator struct {
	cfg    Config
	topics TopicView
	log    *slog.Logger
	now    func() time.Time
	// zeroDelayJoinWindow: see defaultZeroDelayJoinWindow (tests widen it
	// so that a loaded machine cannot split their joins).
	zeroDelayJoinWindow time.Duration

	shards runtime.Shards[*shard]
	// events are the counters Stats reports (stats.go).
	events eventCounts

	expiryMu   sync.Mutex
	lastExpiry time.Time // guarded by expiryMu; only Run's goroutine and tests touch it
}

// New returns a coordinator with no partitions loaded. cfg is used as
// given; call cfg.Validate first to refuse bad settings at start-up.
func New(cfg Config, topics TopicView) *Coordinator {
	c := &Coordinator{cfg: cfg, topics: topics, log: cfg.Logger, now: cfg.Now, zeroDelayJoinWindow: defaultZeroDelayJoinWindow}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.cfg.ExpiryNow == nil {
		c.cfg.ExpiryNow = c.now
	}
	if c.cfg.OffsetsTopicNumPartitions < 1 {
		c.cfg.OffsetsTopicNumPartitions = 1
	}
	return c
}

func (c *Coordinator) nowMs() int64 { return c.now().UnixMilli() }

// PartitionFor maps a group to its __consumer_offsets partition the way
// Kafka does: Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions.
func (c *Coordinator) PartitionFor(groupID string) int32 {
	return PartitionFor(groupID, c.cfg.OffsetsTopicNumPartitions)
}

// PartitionFor is Kafka's group-to-partition mapping for n partitions.
func PartitionFor(groupID string, n int32) int32 { return runtime.PartitionFor(groupID, n) }

// CoordinatorFor answers the group half of FindCoordinator: the
// __consumer_offsets partition that owns key, and the error to return when
// that partition is not served here. The broker maps the partition to its
// leader's endpoint (NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE when it
// has none).
func (c *Coordinator) CoordinatorFor(key string) (partition int32, errCode int16) {
	partition = c.PartitionFor(key)
	if key == "" {
		return partition, kerr.InvalidRequest.Code
	}
	s, ok := c.shards.Get(partition)
	if !ok {
		return partition, kerr.NotCoordinator.Code
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.status {
	case runtime.ShardLoading:
		return partition, kerr.CoordinatorLoadInProgress.Code
	case runtime.ShardActive:
		return partition, 0
	}
	return partition, kerr.NotCoordinator.Code
}

// shard is one loaded __consumer_offsets partition.
type shard struct {
	c         *Coordinator
	partition int32
	plog      PartitionLog

	mu       sync.Mutex
	status   runtime.ShardStatus
	classic  map[string]*classicGroup
	consumer map[string]*consumerGroup
	share    map[string]*shareGroup
	streams  map[string]*streamsGroup
	offsets  map[string]*groupOffsets
	// pending holds transactional offsets (TxnOffsetCommit) by producer
	// id until that producer's transaction marker commits or aborts them;
	// openTxns indexes it by group: a group's entry lists the producers
	// with at least one pending offset in it (txnoffsets.go).
	pending  map[int64]map[string]*groupOffsets
	openTxns map[string]map[int64]bool
}

func newShard(c *Coordinator, partition int32, plog PartitionLog) *shard {
	s := &shard{c: c, partition: partition, plog: plog, status: runtime.ShardLoading}
	s.reset()
	return s
}

func (s *shard) reset() {
	s.classic = map[string]*classicGroup{}
	s.consumer = map[string]*consumerGroup{}
	s.share = map[string]*shareGroup{}
	s.streams = map[string]*streamsGroup{}
	s.offsets = map[string]*groupOffsets{}
	s.pending = map[int64]map[string]*groupOffsets{}
	s.openTxns = map[string]map[int64]bool{}
}

// Prepare marks partition as loading from the moment this node becomes its
// leader (the runtime calls it synchronously from the leadership change;
// Load follows on a goroutine of its own): until the replay ends, requests
// for its groups get COORDINATOR_LOAD_IN_PROGRESS and ListGroups says the
// listing is incomplete, instead of NOT_COORDINATOR and a listing that
// silently lacks the partition's groups. A shard already present (a
// re-election) keeps serving until Load replaces it.
func (c *Coordinator) Prepare(partition int32) {
	c.shards.AddIfAbsent(partition, func() *shard { return newShard(c, partition, nil) })
}

// Load replays partition's log and then serves its groups. Requests for
// its groups get COORDINATOR_LOAD_IN_PROGRESS until the replay ends.
func (c *Coordinator) Load(ctx context.Context, partition int32, log PartitionLog) error {
	s := newShard(c, partition, log)
	if old, ok := c.shards.Replace(partition, s); ok {
		old.unload()
	}
	// The replay builds its state in a private shard, without locks, and
	// hands the maps over under s.mu once complete.
	staging := newShard(c, partition, log)
	err := staging.replayAll(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status != runtime.ShardLoading {
		return fmt.Errorf("loading %s-%d: unloaded during load", OffsetsTopic, partition)
	}
	if err != nil {
		s.status = runtime.ShardFailed
		return fmt.Errorf("loading %s-%d: %w", OffsetsTopic, partition, err)
	}
	s.classic, s.consumer, s.share, s.offsets = staging.classic, staging.consumer, staging.share, staging.offsets
	s.streams = staging.streams
	s.pending, s.openTxns = staging.pending, staging.openTxns
	s.status = runtime.ShardActive
	s.afterLoad()
	c.log.Info("loaded group coordinator partition", "partition", partition,
		"classic_groups", len(s.classic), "consumer_groups", len(s.consumer), "share_groups", len(s.share), "streams_groups", len(s.streams), "open_transactions", len(s.pending))
	return nil
}

// Unload stops serving partition (leadership moved away). Parked requests
// are answered with NOT_COORDINATOR.
func (c *Coordinator) Unload(partition int32) {
	if s, ok := c.shards.Remove(partition); ok {
		s.unload()
	}
}

func (s *shard) unload() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = runtime.ShardUnloaded
	s.failWaiters(kerr.NotCoordinator.Code)
	s.reset()
}

// replayAll replays the whole partition. Records of a transactional batch
// are held pending for their producer until its transaction marker (a
// control batch) commits or aborts them; a transaction without a marker
// yet stays pending after the load, for the transaction coordinator to
// finish.
func (s *shard) replayAll(ctx context.Context) error {
	return s.plog.ReadFrom(ctx, 0, func(batch []byte) error {
		return decodeBatch(batch, s.replayLogged)
	})
}

// replayLogged applies one record read from the log at offset, in the
// batch whose header is h.
func (s *shard) replayLogged(h protocol.BatchHeader, offset int64, r record) error {
	var err error
	switch {
	case h.IsControl():
		err = s.replayControl(h, r)
	case h.IsTransactional():
		err = s.replayAt(offset, h.ProducerID, r)
	default:
		err = s.replayAt(offset, protocol.NoProducerID, r)
	}
	if err != nil {
		return fmt.Errorf("replaying offset %d: %w", offset, err)
	}
	return nil
}

// lockGroup finds the shard serving groupID and returns it locked, or the
// error code to answer with.
func (c *Coordinator) lockGroup(groupID string) (*shard, int16) {
	return c.lockPartition(c.PartitionFor(groupID))
}

// lockPartition returns the shard of a __consumer_offsets partition
// locked, or the error code to answer with.
func (c *Coordinator) lockPartition(partition int32) (*shard, int16) {
	s, ok := c.shards.Get(partition)
	if !ok {
		return nil, kerr.NotCoordinator.Code
	}
	s.mu.Lock()
	switch s.status {
	case runtime.ShardActive:
		return s, 0
	case runtime.ShardLoading:
		s.mu.Unlock()
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	s.mu.Unlock()
	return nil, kerr.NotCoordinator.Code
}

// activeShards returns the shards in partition order.
func (c *Coordinator) activeShards() []*shard { return c.shards.All() }

// write appends recs as one batch and returns once it is committed. The
// caller holds s.mu. On failure the in-memory state may be ahead of the
// log, so the shard is rebuilt from the log (the log is the truth), parked
// requests are failed, and the caller must not touch group pointers it
// holds.
func (s *shard) write(ctx context.Context, recs []record) error {
	if len(recs) == 0 {
		return nil
	}
	_, err := s.appendBatch(ctx, encodeBatch(recs, s.c.nowMs()), len(recs))
	return err
}

// appendBatch appends one batch of n records (or one marker) as write
// does, and returns its base offset: what replay needs to know which of
// two commits of a partition came last.
func (s *shard) appendBatch(ctx context.Context, batch []byte, n int) (int64, error) {
	// A client that goes away must not cancel an append half way: whether
	// it landed would be unknown. offsets.commit.timeout.ms bounds it.
	timeout := time.Duration(s.c.cfg.OffsetsCommitTimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	base, err := s.plog.Append(actx, batch)
	if err != nil {
		s.c.log.Warn("appending to the offsets topic failed; rebuilding state from the log",
			"partition", s.partition, "records", n, "err", err)
		s.rebuild(ctx)
		return 0, fmt.Errorf("appending %d records to %s-%d: %w", n, OffsetsTopic, s.partition, err)
	}
	return base, nil
}

func (s *shard) rebuild(ctx context.Context) {
	s.failWaiters(kerr.NotCoordinator.Code)
	s.reset()
	if err := s.replayAll(context.WithoutCancel(ctx)); err != nil {
		s.c.log.Error("rebuilding group state from the log failed; partition no longer served",
			"partition", s.partition, "err", err)
		s.status = runtime.ShardFailed
		s.reset()
		return
	}
	s.afterLoad()
}

// appendErrorCode maps a failed append to the error Kafka's coordinator
// returns for it.
func appendErrorCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
			return kerr.CoordinatorNotAvailable.Code
		case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
			return kerr.NotCoordinator.Code
		case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidFetchSize:
			return kerr.UnknownServerError.Code
		}
		return ke.Code
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return kerr.CoordinatorNotAvailable.Code
	}
	return kerr.NotCoordinator.Code
}

// replay applies one record that is not an offset commit, or one whose
// place in the log does not matter (a tombstone), to the shard's state.
func (s *shard) replay(r record) error { return s.replayAt(-1, protocol.NoProducerID, r) }

// replayAt applies one record, found at offset of the log in a batch of
// producerID (NoProducerID unless the batch is transactional), to the
// shard's state. It is the only way persisted state enters a freshly
// loaded shard.
func (s *shard) replayAt(offset, producerID int64, r record) error {
	k, err := parseKey(r.key)
	if err != nil {
		return err
	}
	switch k.typ {
	case recOffsetCommitV0, recOffsetCommit:
		return s.replayOffset(k, r.value, offset, producerID)
	case recGroupMetadata:
		return s.replayGroupMetadata(k.group, r.value)
	case recConsumerGroupMetadata, recConsumerMemberMetadata, recConsumerTargetMetadata,
		recConsumerTargetMember, recConsumerCurrentMember, recConsumerRegex:
		return s.replayConsumer(k, r.value)
	case recShareMemberMetadata, recShareGroupMetadata, recShareTargetMetadata,
		recShareTargetMember, recShareCurrentMember, recShareStatePartitions:
		return s.replayShare(k, r.value)
	case recStreamsGroupMetadata, recStreamsPartitionMetadata, recStreamsMemberMetadata, recStreamsTargetMetadata,
		recStreamsTargetMember, recStreamsCurrentMember, recStreamsTopology:
		return s.replayStreams(k, r.value)
	}
	return nil // deprecated or foreign record types
}

// afterLoad starts the timers Kafka starts when it loads a partition: every
// member gets a fresh session.
func (s *shard) afterLoad() {
	now := s.c.nowMs()
	for _, g := range s.classic {
		for _, m := range g.members {
			g.renewSession(m, now)
		}
	}
	for _, g := range s.consumer {
		for _, m := range g.members {
			g.startSession(s, m, now)
		}
		// Topics are assumed unchanged since the last epoch bump; a
		// change found at the next heartbeat bumps the epoch.
		g.metadataHash = s.subscriptionHash(g)
	}
	for _, g := range s.share {
		for _, m := range g.members {
			m.sessionDeadline = now + int64(s.c.cfg.shareSessionTimeoutMs(g.id))
		}
	}
	for _, g := range s.streams {
		session := int64(s.c.cfg.streamsSettings(g.id).sessionTimeoutMs)
		for _, m := range g.members {
			m.sessionDeadline = now + session
			if m.state == streamsUnrevoked {
				m.rebalanceDeadline, m.rebalanceEpoch = now+int64(max(m.meta.RebalanceTimeoutMs, 0)), m.epoch
			}
		}
	}
}

func (s *shard) failWaiters(code int16) {
	for _, g := range s.classic {
		g.failWaiters(code)
	}
}

// Run fires the coordinator's timers until ctx ends: session, rebalance
// and sync timeouts and the initial rebalance delay every 100ms, offsets
// expiry every offsets.retention.check.interval.ms.
func (c *Coordinator) Run(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.Tick(ctx)
		}
	}
}

// Tick runs every timer that is due at the configured clock's now. Run
// calls it; tests with a fake clock call it directly.
func (c *Coordinator) Tick(ctx context.Context) {
	shards := c.activeShards()
	now := c.nowMs()
	for _, s := range shards {
		s.mu.Lock()
		if s.status == runtime.ShardActive {
			s.fireTimers(ctx, now)
		}
		s.mu.Unlock()
	}
	c.expiryMu.Lock()
	due := c.now().Sub(c.lastExpiry) >= time.Duration(c.cfg.OffsetsRetentionCheckIntervalMs)*time.Millisecond
	if due {
		c.lastExpiry = c.now()
	}
	c.expiryMu.Unlock()
	if due {
		for _, s := range shards {
			s.mu.Lock()
			if s.status == runtime.ShardActive {
				s.expireOffsets(ctx, c.cfg.ExpiryNow().UnixMilli())
			}
			s.mu.Unlock()
		}
	}
}

func (s *shard) fireTimers(ctx context.Context, now int64) {
	for _, id := range sortedKeys(s.classic) {
		if g := s.classic[id]; g != nil {
			s.classicTimers(ctx, g, now)
		}
	}
	for _, id := range sortedKeys(s.consumer) {
		if g := s.consumer[id]; g != nil {
			s.consumerTimers(ctx, g, now)
		}
	}
	for _, id := range sortedKeys(s.share) {
		if g := s.share[id]; g != nil {
			s.shareTimers(ctx, g, now)
		}
	}
	for _, id := range sortedKeys(s.streams) {
		if g := s.streams[id]; g != nil {
			s.streamsTimers(ctx, g, now)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func strPtr(s string) *string { return &s }

func asKerr(err error, target **kerr.Error) bool { return errors.As(err, target) }
