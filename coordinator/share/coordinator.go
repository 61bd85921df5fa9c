package share

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/coordinator/runtime"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
)

// PartitionLog is one __share_group_state partition as a shard sees it.
type PartitionLog = runtime.PartitionLog

// CoordinatorKey is the FindCoordinator key of a share partition (key type
// SHARE): "group:topicId:partition".
func (k Key) CoordinatorKey() string {
	return k.Group + ":" + protocol.UUID(k.TopicID).String() + ":" + strconv.Itoa(int(k.Partition))
}

// PartitionFor maps a share partition to its __share_group_state partition
// for n partitions, as Kafka does (the hash of its coordinator key).
func PartitionFor(k Key, n int32) int32 { return runtime.PartitionFor(k.CoordinatorKey(), n) }

// state is one share partition's durable state.
type state struct {
	snapshotEpoch int32
	stateEpoch    int32
	leaderEpoch   int32
	startOffset   int64
	complete      int32 // DeliveryCompleteCount, -1 unknown
	created       int64
	written       int64
	batches       []Batch // sorted, not overlapping, at or after startOffset
	// updates counts the ShareUpdate records since the last snapshot.
	updates int32
}

// shard is one loaded __share_group_state partition.
type shard struct {
	c         *Coordinator
	partition int32
	plog      PartitionLog

	// mu is held across a write's append: the writes of a shard are
	// applied in the order they are logged.
	mu     sync.Mutex
	status runtime.ShardStatus
	states map[Key]*state
	// snapshots is where each share partition's current snapshot record
	// is in the log: nothing below the lowest is needed (pruning).
	snapshots map[Key]int64
	// next is one past the last record; pruned is where the log was last
	// pruned to.
	next, pruned int64
}

// Coordinator serves the share partitions whose __share_group_state
// partitions this node leads.
type Coordinator struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	shards runtime.Shards[*shard]
}

// New returns a coordinator with no partitions loaded.
func New(cfg Config) *Coordinator {
	c := &Coordinator{cfg: cfg, log: cfg.Logger, now: cfg.Now}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.cfg.NumPartitions < 1 {
		c.cfg.NumPartitions = 1
	}
	return c
}

// Prepare marks partition as loading from the moment this node leads it.
func (c *Coordinator) Prepare(partition int32) {
	c.shards.AddIfAbsent(partition, func() *shard {
		return &shard{c: c, partition: partition, status: runtime.ShardLoading, states: map[Key]*state{}, snapshots: map[Key]int64{}}
	})
}

// Load replays partition and then serves its share partitions.
func (c *Coordinator) Load(ctx context.Context, partition int32, plog PartitionLog) error {
	s := &shard{c: c, partition: partition, plog: plog, status: runtime.ShardLoading, states: map[Key]*state{}, snapshots: map[Key]int64{}}
	if old, ok := c.shards.Replace(partition, s); ok {
		old.unload()
	}
	started := c.now()
	var scratch []byte
	records := 0
	err := plog.ReadFrom(ctx, 0, func(batch []byte) error {
		h, err := protocol.ParseBatchHeader(batch)
		if err != nil || h.IsControl() {
			return err
		}
		return protocol.ForEachRecord(batch, &scratch, func(r *protocol.Record) error {
			records++
			offset := h.BaseOffset + int64(r.OffsetDelta)
			s.next = offset + 1
			return s.replay(offset, r.Key, r.Value)
		})
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.status = runtime.ShardUnloaded
		c.shards.RemoveIf(partition, s)
		return fmt.Errorf("loading %s-%d: %w", StateTopic, partition, err)
	}
	if s.status == runtime.ShardLoading {
		s.status = runtime.ShardActive
	}
	c.log.Info("loaded share state partition", "partition", partition, "share_partitions", len(s.states),
		"records", records, "took", c.now().Sub(started))
	return nil
}

// Run prunes the state topic every share.coordinator.state.topic.prune.interval.ms
// until ctx ends (the runtime runs it).
func (c *Coordinator) Run(ctx context.Context) {
	every := time.Duration(c.cfg.PruneIntervalMs) * time.Millisecond
	if every <= 0 {
		every = 5 * time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.Prune()
		}
	}
}

// Prune deletes, in every partition this node leads, the records below the
// oldest current snapshot of a share partition: no state needs them (a
// later snapshot or tombstone shadows each of them).
func (c *Coordinator) Prune() {
	for _, s := range c.shards.All() {
		s.mu.Lock()
		if s.status == runtime.ShardActive {
			s.prune()
		}
		s.mu.Unlock()
	}
}

func (s *shard) prune() {
	// Cold share partitions are snapshotted again first.
	cold := s.c.now().UnixMilli() - int64(s.c.cfg.ColdSnapshotIntervalMs)
	for k, st := range s.states {
		if st.written > cold || s.snapshots[k] >= s.next-1 {
			continue
		}
		v := &snapshotValue{SnapshotEpoch: st.snapshotEpoch + 1, StateEpoch: st.stateEpoch, LeaderEpoch: st.leaderEpoch,
			StartOffset: st.startOffset, DeliveryCompleteCount: st.complete, CreateTimestamp: st.created,
			WriteTimestamp: s.c.now().UnixMilli(), Batches: slices.Clone(st.batches)}
		if code := s.write(context.Background(), k, recSnapshot, v); code != 0 {
			return
		}
	}
	below := s.next
	for _, off := range s.snapshots {
		below = min(below, off)
	}
	if below <= s.pruned {
		return
	}
	d, ok := s.plog.(interface{ DeleteBelow(offset int64) error })
	if !ok {
		return
	}
	if err := d.DeleteBelow(below); err != nil {
		s.c.log.Warn("pruning the share state topic failed", "partition", s.partition, "err", err)
		return
	}
	s.pruned = below
}

// Unload stops serving partition.
func (c *Coordinator) Unload(partition int32) {
	if s, ok := c.shards.Remove(partition); ok {
		s.unload()
	}
}

func (s *shard) unload() {
	s.mu.Lock()
	s.status = runtime.ShardUnloaded
	s.states = map[Key]*state{}
	s.mu.Unlock()
}

// replay applies one record of the log, found at offset.
func (s *shard) replay(offset int64, key, value []byte) error {
	typ, k, err := decodeKey(key)
	if err != nil {
		return err
	}
	if typ != recSnapshot && typ != recUpdate {
		return nil
	}
	if value == nil {
		if typ == recSnapshot {
			delete(s.states, k)
			delete(s.snapshots, k)
		}
		return nil
	}
	v, err := decodeValue(typ, value)
	if err != nil {
		return fmt.Errorf("decoding share state of %s: %w", k.CoordinatorKey(), err)
	}
	if typ == recSnapshot {
		s.snapshots[k] = offset
	}
	s.apply(k, typ, &v)
	return nil
}

// apply installs a snapshot, or merges an update into the state.
func (s *shard) apply(k Key, typ int16, v *snapshotValue) {
	if typ == recSnapshot {
		s.states[k] = &state{snapshotEpoch: v.SnapshotEpoch, stateEpoch: v.StateEpoch, leaderEpoch: v.LeaderEpoch,
			startOffset: v.StartOffset, complete: v.DeliveryCompleteCount, created: v.CreateTimestamp,
			written: v.WriteTimestamp, batches: prune(slices.Clone(v.Batches), v.StartOffset)}
		return
	}
	st := s.states[k]
	if st == nil || v.SnapshotEpoch != st.snapshotEpoch {
		return // an update of a snapshot since replaced or deleted
	}
	st.leaderEpoch = max(st.leaderEpoch, v.LeaderEpoch)
	if v.StartOffset >= 0 {
		st.startOffset = v.StartOffset
	}
	if v.DeliveryCompleteCount >= 0 {
		st.complete = v.DeliveryCompleteCount
	}
	st.batches = prune(merge(st.batches, v.Batches), st.startOffset)
	st.updates++
}

// merge lays the batches of a write over the state's: the offsets they
// cover take their state; the rest keep theirs.
func merge(old, add []Batch) []Batch {
	out := slices.Clone(old)
	for _, a := range add {
		if a.Last < a.First {
			continue
		}
		var next []Batch
		for _, b := range out {
			if b.Last < a.First || b.First > a.Last {
				next = append(next, b)
				continue
			}
			if b.First < a.First {
				left := b
				left.Last = a.First - 1
				next = append(next, left)
			}
			if b.Last > a.Last {
				right := b
				right.First = a.Last + 1
				next = append(next, right)
			}
		}
		next = append(next, a)
		slices.SortFunc(next, func(x, y Batch) int { return cmp.Compare(x.First, y.First) })
		out = next
	}
	return coalesce(out)
}

// prune drops what lies below start.
func prune(bs []Batch, start int64) []Batch {
	out := bs[:0]
	for _, b := range bs {
		if b.Last < start {
			continue
		}
		b.First = max(b.First, start)
		out = append(out, b)
	}
	return out
}

// coalesce joins adjacent batches of one state and count.
func coalesce(bs []Batch) []Batch {
	var out []Batch
	for _, b := range bs {
		if n := len(out); n > 0 && out[n-1].Last+1 == b.First && out[n-1].State == b.State && out[n-1].Deliveries == b.Deliveries {
			out[n-1].Last = b.Last
			continue
		}
		out = append(out, b)
	}
	return out
}

// lockKey returns the active shard of k locked, or the error code: the
// partition not led here NOT_COORDINATOR, loading
// COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) lockKey(k Key) (*shard, int16) {
	s, ok := c.shards.Get(PartitionFor(k, c.cfg.NumPartitions))
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

// CoordinatorFor answers the share half of FindCoordinator (key type 2):
// the partition owning key ("group:topicId:partition") and whether it is
// served here; INVALID_REQUEST for a malformed key.
func (c *Coordinator) CoordinatorFor(key string) (partition int32, errCode int16) {
	k, ok := ParseCoordinatorKey(key)
	if !ok {
		return 0, kerr.InvalidRequest.Code
	}
	partition = PartitionFor(k, c.cfg.NumPartitions)
	s, code := c.lockKey(k)
	if code != 0 {
		return partition, code
	}
	s.mu.Unlock()
	return partition, 0
}

// ParseCoordinatorKey parses "group:topicId:partition" (the group may hold
// colons: the last two fields are split off from the right).
func ParseCoordinatorKey(key string) (Key, bool) {
	i := lastIndex(key, ':')
	if i < 0 {
		return Key{}, false
	}
	p, err := strconv.ParseInt(key[i+1:], 10, 32)
	if err != nil || p < 0 {
		return Key{}, false
	}
	rest := key[:i]
	j := lastIndex(rest, ':')
	if j <= 0 {
		return Key{}, false
	}
	id, err := protocol.ParseUUID(rest[j+1:])
	if err != nil {
		return Key{}, false
	}
	return Key{Group: rest[:j], TopicID: id, Partition: int32(p)}, true
}

func lastIndex(s string, b byte) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == b {
			return i
		}
	}
	return -1
}

// write appends one record of k and applies it once committed. The caller
// holds s.mu.
func (s *shard) write(ctx context.Context, k Key, typ int16, v *snapshotValue) int16 {
	var value []byte
	switch {
	case v == nil:
	case typ == recSnapshot:
		value = encodeSnapshot(v)
	default:
		value = encodeUpdate(v)
	}
	b := protocol.NewBatchBuilder(protocol.CodecNone)
	b.Add(encodeKey(typ, k), value, nil, s.c.now().UnixMilli())
	batch, err := b.Build()
	if err != nil {
		s.c.log.Error("encoding a share state record", "key", k.CoordinatorKey(), "err", err)
		return kerr.UnknownServerError.Code
	}
	timeout := time.Duration(s.c.cfg.WriteTimeoutMs) * time.Millisecond
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	base, err := s.plog.Append(actx, batch)
	cancel()
	if err != nil {
		s.c.log.Info("writing share state failed", "key", k.CoordinatorKey(), "err", err)
		return runtime.AppendErrorCode(err)
	}
	s.next = base + 1
	switch {
	case v == nil:
		delete(s.states, k)
		delete(s.snapshots, k)
	case typ == recSnapshot:
		s.snapshots[k] = base
		s.apply(k, typ, v)
	default:
		s.apply(k, typ, v)
	}
	return 0
}
