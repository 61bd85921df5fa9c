package broker

// The group coordinator's side of the broker: the __consumer_offsets
// partitions it is loaded and unloaded with, the PartitionLog and
// TopicView adapters it writes and reads through, and the topic's creation
// on first use.
//
// Goroutine ownership and locks:
//   - groupRuntime.mu guards loaded (the __consumer_offsets partitions this
//     broker leads, by the leader epoch their coordinator shard was loaded
//     at) and tails (the last queued load/unload of each partition).
//     leadershipChanged and partitionGone run on the metadata subscription
//     goroutine (replicaManager.reconcile); they never block: loads and
//     unloads run on goroutines of their own, chained per partition so that
//     a partition's loads and unloads happen in the order leadership
//     changed, while different partitions load in parallel.
//   - connMu guards connTails (see groups.go).
//   - Lock order: replicaManager.mu, partition.mu, groupRuntime.mu. The
//     coordinator's own locks are never taken while holding these: Load and
//     Unload run on the chained goroutines, outside groupRuntime.mu.
//   - Run (the coordinator's timers) has one goroutine for the broker's
//     lifetime; it and the load goroutines end with the runtime's context.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupRuntime runs the group coordinator inside the broker.
type groupRuntime struct {
	b     *Broker
	cfg   group.Config
	coord *group.Coordinator

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	loaded map[int32]int32
	tails  map[int32]chan struct{}

	// creating is set while a __consumer_offsets creation is in flight, so
	// that a burst of FindCoordinator requests asks the controller once.
	creating atomic.Bool

	connMu    sync.Mutex
	connTails map[*conn]chan struct{}
}

// newGroupRuntime builds the coordinator. The group-to-partition mapping
// uses the partition count of an existing __consumer_offsets (it cannot
// change once groups live there) and offsets.topic.num.partitions
// otherwise, as Kafka does.
func newGroupRuntime(ctx context.Context, b *Broker) *groupRuntime {
	cfg := group.DefaultConfig()
	if b.opts.Groups != nil {
		cfg = *b.opts.Groups
	} else {
		cfg.OffsetsTopicNumPartitions = b.opts.OffsetsTopicPartitions
		cfg.OffsetsTopicReplicationFactor = b.opts.OffsetsTopicReplicationFactor
	}
	if img := b.ctrl.Image(); img != nil {
		if t := img.Topics[group.OffsetsTopic]; t != nil && len(t.Partitions) > 0 {
			cfg.OffsetsTopicNumPartitions = int32(len(t.Partitions))
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = b.log.With("component", "group-coordinator")
	}
	if cfg.Now == nil {
		cfg.Now = b.now
	}
	rt := &groupRuntime{
		b:         b,
		cfg:       cfg,
		coord:     group.New(cfg, imageTopics{ctrl: b.ctrl}),
		loaded:    map[int32]int32{},
		tails:     map[int32]chan struct{}{},
		connTails: map[*conn]chan struct{}{},
	}
	rt.ctx, rt.cancel = context.WithCancel(ctx)
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		rt.coord.Run(rt.ctx)
	}()
	return rt
}

// stop unloads every partition, which answers parked requests (a JoinGroup
// waiting for its rebalance) with NOT_COORDINATOR so that clients move on
// to whichever broker leads next, and stops the timers.
func (rt *groupRuntime) stop() {
	rt.cancel()
	rt.mu.Lock()
	parts := make([]int32, 0, len(rt.loaded))
	for p := range rt.loaded {
		parts = append(parts, p)
	}
	clear(rt.loaded)
	rt.mu.Unlock()
	for _, p := range parts {
		rt.enqueue(p, func() { rt.coord.Unload(p) })
	}
	rt.wg.Wait()
}

// leadershipChanged reconciles the coordinator with one hosted
// __consumer_offsets partition after a metadata change: load it when this
// broker became its leader (or was re-elected with a new epoch), unload it
// when leadership went elsewhere.
func (rt *groupRuntime) leadershipChanged(part *partition) {
	leader, epoch := part.leadership()
	p := part.tp.Partition
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.ctx.Err() != nil {
		return
	}
	loadedEpoch, isLoaded := rt.loaded[p]
	switch {
	case leader == rt.b.opts.NodeID && (!isLoaded || loadedEpoch != epoch):
		rt.loaded[p] = epoch
		plog := &offsetsPartitionLog{self: rt.b.opts.NodeID, part: part, epoch: epoch}
		rt.enqueueLocked(p, func() {
			if err := rt.coord.Load(rt.ctx, p, plog); err != nil && rt.ctx.Err() == nil {
				rt.b.log.Error("loading group coordinator partition", "partition", p, "leader_epoch", epoch, "err", err)
			}
		})
	case leader != rt.b.opts.NodeID && isLoaded:
		delete(rt.loaded, p)
		rt.enqueueLocked(p, func() { rt.coord.Unload(p) })
	}
}

// partitionGone unloads a __consumer_offsets partition this broker no
// longer hosts.
func (rt *groupRuntime) partitionGone(p int32) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.ctx.Err() != nil {
		return
	}
	if _, ok := rt.loaded[p]; ok {
		delete(rt.loaded, p)
		rt.enqueueLocked(p, func() { rt.coord.Unload(p) })
	}
}

func (rt *groupRuntime) enqueue(p int32, fn func()) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.enqueueLocked(p, fn)
}

// enqueueLocked runs fn once the partition's previous load or unload has
// finished. The caller holds rt.mu.
func (rt *groupRuntime) enqueueLocked(p int32, fn func()) {
	prev := rt.tails[p]
	done := make(chan struct{})
	rt.tails[p] = done
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		if prev != nil {
			<-prev
		}
		fn()
		close(done)
		rt.mu.Lock()
		if rt.tails[p] == done {
			delete(rt.tails, p)
		}
		rt.mu.Unlock()
	}()
}

// ensureOffsetsTopic starts creating __consumer_offsets the way Kafka does
// (offsets.topic.num.partitions, offsets.topic.replication.factor,
// compacted) unless a creation is already in flight. It does not wait: the
// caller answers COORDINATOR_NOT_AVAILABLE and the client retries.
func (rt *groupRuntime) ensureOffsetsTopic() {
	if !rt.creating.CompareAndSwap(false, true) {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.ctx.Err() != nil {
		return
	}
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		defer rt.creating.Store(false)
		ctx, cancel := context.WithTimeout(rt.ctx, 30*time.Second)
		defer cancel()
		codes := rt.b.autoCreateTopics(ctx, []string{group.OffsetsTopic})
		if code := codes[group.OffsetsTopic]; code != 0 && rt.ctx.Err() == nil {
			rt.b.log.Warn("creating the offsets topic failed", "topic", group.OffsetsTopic, "err", errFromCode(code))
		}
	}()
}

// offsetsPartitionLog is one __consumer_offsets partition as a coordinator
// shard sees it, bound to the leader epoch the shard was loaded at: once
// leadership moves on, its appends are refused (NOT_LEADER_OR_FOLLOWER)
// even before the shard is unloaded.
type offsetsPartitionLog struct {
	self  int32
	part  *partition
	epoch int32
}

// Append writes the coordinator's batch as a produce with acks=all would:
// min.insync.replicas is checked first, and the call returns once the high
// watermark has passed the batch.
func (l *offsetsPartitionLog) Append(ctx context.Context, batch []byte) (int64, error) {
	tp := l.part.tp
	leader, epoch := l.part.leadership()
	if leader != l.self || epoch != l.epoch {
		return 0, fmt.Errorf("appending to %s: leader epoch %d is no longer ours: %w", tp, l.epoch, kerr.NotLeaderForPartition)
	}
	if isr, minISR := l.part.isrSize(), l.part.logConfig().MinInsyncReplicas; isr < int(minISR) {
		return 0, fmt.Errorf("appending to %s: ISR size %d is below min.insync.replicas %d: %w", tp, isr, minISR, kerr.NotEnoughReplicas)
	}
	res, _, err := l.part.log.Append(batch, l.epoch, storage.AppendCoordinator)
	if err != nil {
		return 0, fmt.Errorf("appending to %s: %w", tp, err)
	}
	l.part.advanceHighWatermark()
	if err := l.awaitHighWatermark(ctx, res.LastOffset+1); err != nil {
		return 0, fmt.Errorf("appending to %s: waiting for offset %d to commit: %w", tp, res.LastOffset, err)
	}
	return res.FirstOffset, nil
}

// awaitHighWatermark returns once the high watermark reaches hw. Waiters
// are woken whenever the partition's high watermark may have moved.
func (l *offsetsPartitionLog) awaitHighWatermark(ctx context.Context, hw int64) error {
	if l.part.log.HighWatermark() >= hw {
		return nil
	}
	wake := make(chan struct{}, 1)
	l.part.addWaiter(wake)
	defer l.part.removeWaiter(wake)
	for l.part.log.HighWatermark() < hw {
		if leader, epoch := l.part.leadership(); leader != l.self || epoch != l.epoch {
			return kerr.NotLeaderForPartition
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
	return nil
}

// readChunk bounds one read of the log while replaying.
const readChunk = 1 << 20

// ReadFrom hands fn every committed batch (below the high watermark) from
// offset on. Each chunk is read into a fresh buffer because replay may keep
// slices of the batches it is given (member metadata and assignments).
func (l *offsetsPartitionLog) ReadFrom(ctx context.Context, offset int64, fn func(batch []byte) error) error {
	log := l.part.log
	pos := max(offset, log.LogStartOffset())
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hw := log.HighWatermark()
		if pos >= hw {
			return nil
		}
		fr, err := log.Read(pos, readChunk, hw, true)
		if err != nil {
			if errors.Is(err, kerr.OffsetOutOfRange) && pos < log.LogStartOffset() {
				// Retention or compaction moved the log start past us.
				pos = log.LogStartOffset()
				continue
			}
			return fmt.Errorf("reading %s at offset %d: %w", l.part.tp, pos, err)
		}
		if fr.Size == 0 {
			return nil
		}
		buf := make([]byte, fr.Size)
		n, err := fr.File.ReadAt(buf, fr.Pos)
		fr.Release()
		if n < len(buf) {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading %s at offset %d: %w", l.part.tp, pos, err)
		}
		next := pos
		for len(buf) > 0 {
			batch, rest, h, err := protocol.NextBatch(buf)
			if err != nil {
				return fmt.Errorf("reading %s at offset %d: %w", l.part.tp, next, err)
			}
			if h.LastOffset() >= pos {
				if err := fn(batch); err != nil {
					return err
				}
			}
			next = h.LastOffset() + 1
			buf = rest
		}
		if next <= pos {
			return fmt.Errorf("reading %s at offset %d: the log did not advance", l.part.tp, pos)
		}
		pos = next
	}
}

// imageTopics answers the coordinator's topic questions from the current
// metadata image (an atomic load; no locks).
type imageTopics struct{ ctrl *controller.Controller }

func topicInfo(t *controller.Topic) group.TopicInfo {
	return group.TopicInfo{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions))}
}

func (it imageTopics) TopicByName(name string) (group.TopicInfo, bool) {
	img := it.ctrl.Image()
	if img == nil {
		return group.TopicInfo{}, false
	}
	t := img.Topics[name]
	if t == nil {
		return group.TopicInfo{}, false
	}
	return topicInfo(t), true
}

func (it imageTopics) TopicByID(id [16]byte) (group.TopicInfo, bool) {
	img := it.ctrl.Image()
	if img == nil {
		return group.TopicInfo{}, false
	}
	t := img.TopicsByID[controller.UUID(id)]
	if t == nil {
		return group.TopicInfo{}, false
	}
	return topicInfo(t), true
}

func (it imageTopics) TopicNames() []string {
	img := it.ctrl.Image()
	if img == nil {
		return nil
	}
	names := make([]string, 0, len(img.Topics))
	for name := range img.Topics {
		names = append(names, name)
	}
	return names
}

// offsetsTopicCoordinator answers where a group's coordinator is: the
// leader of its __consumer_offsets partition, on the listener the request
// came in on. It starts creating the topic when it does not exist yet.
func (rt *groupRuntime) offsetsTopicCoordinator(img *controller.Image, listenerName, key string) (kmsg.FindCoordinatorResponseCoordinator, bool) {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key = key
	c.NodeID, c.Port = -1, -1
	t := img.Topics[group.OffsetsTopic]
	if t == nil {
		rt.ensureOffsetsTopic()
		return c, false
	}
	p := rt.coord.PartitionFor(key)
	if int(p) >= len(t.Partitions) {
		return c, false
	}
	leader := t.Partitions[p].Leader
	br := img.Brokers[leader]
	if leader < 0 || br == nil || br.Fenced {
		return c, false
	}
	ep, ok := endpointFor(br, listenerName)
	if !ok {
		return c, false
	}
	c.NodeID, c.Host, c.Port = leader, ep.Host, ep.Port
	return c, true
}
