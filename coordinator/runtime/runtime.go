// Package runtime is what every coordinator whose state lives in the
// partitions of an internal topic needs: the group coordinator
// (__consumer_offsets) and the transaction coordinator
// (__transaction_state) today, the share coordinator
// (__share_group_state) next, as siblings on the same runtime (Kafka's
// coordinator-common CoordinatorRuntime).
//
// # What it owns
//
//   - Loading and unloading a coordinator's shard as its partition's
//     leadership moves, through the replica manager's leadership
//     listener: a shard is loaded (its partition replayed) when this node
//     becomes the partition's leader, loaded again when it is re-elected
//     with a new epoch, and unloaded when it resigns or the partition
//     goes away. Loads and unloads of one partition run one after the
//     other in the order leadership changed; different partitions load in
//     parallel.
//   - The PartitionLog a shard writes and replays through, bound to the
//     leader epoch its shard was loaded at: appends have acks=all
//     semantics (min.insync.replicas checked, answered once the high
//     watermark passes the batch, through the replica manager's
//     purgatory) and are refused with NOT_LEADER_OR_FOLLOWER once the
//     leadership or its epoch moved, even before the unload arrives; reads
//     see only committed batches.
//   - The internal topic's spec (partitions, replication factor, configs)
//     and its creation on first use, asked of the controller once however
//     many requests want it.
//
// It does not own the state machines (coordinator/group and its
// siblings), the network, or which partition a key maps to.
//
// # Goroutines and locks
//
// The listener calls (BecameLeader, Resigned) run on the replica
// manager's metadata goroutine and never block: each queues its load or
// unload on a goroutine of its own, chained after the partition's previous
// one. Runtime.mu guards loaded, tails and stopped; it is never held while
// a coordinator's Load or Unload runs. Run (the coordinator's timers, if
// it has any) has one goroutine for the runtime's lifetime; it, the loads
// and the topic creation end with the runtime's context, and Stop waits
// for them. The whole broker's lock order is in LOCKS.md at the
// repository root.
//
// It imports, of Gregor's packages, replica and protocol; the README's
// import table allows metadata and config besides.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// PartitionLog is one partition of a coordinator's topic as its shard
// sees it.
type PartitionLog interface {
	// Append writes one record batch and returns once it is committed
	// (acks=all semantics), with its base offset.
	Append(ctx context.Context, batch []byte) (baseOffset int64, err error)
	// ReadFrom calls fn for each committed batch from offset on, in order.
	ReadFrom(ctx context.Context, offset int64, fn func(batch []byte) error) error
}

// Coordinator is a state machine with one shard per partition of its
// topic. Load replays the partition through log and then serves its keys;
// Unload stops serving them (answering parked requests). A Coordinator
// that also has a Run(ctx) method gets it called on a goroutine of its own
// for the runtime's lifetime (its timers); one with a Prepare(partition)
// method gets it called, without blocking, the moment this node becomes a
// partition's leader, before its Load is queued (so that it answers
// COORDINATOR_LOAD_IN_PROGRESS for that partition at once, as Kafka's
// runtime does once it has scheduled a load).
type Coordinator interface {
	Load(ctx context.Context, partition int32, log PartitionLog) error
	Unload(partition int32)
}

// Replicas is what the runtime needs of the replica layer
// (*replica.Manager implements it).
type Replicas interface {
	AddLeadershipListener(topic string, l replica.LeadershipListener) (remove func())
	AppendWait(ctx context.Context, acks int16, origin replica.Origin, entries []replica.AppendEntry) error
	ReadForLoad(tp replica.TopicPartition, offset int64, maxBytes int32) ([]byte, error)
	DeleteRecords(tp replica.TopicPartition, offset int64) (lowWatermark int64, ke *kerr.Error, msg string)
}

// TopicSpec is how an internal topic is created.
type TopicSpec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	// Configs are the topic configs it is created with, in order.
	Configs [][2]string
}

// CreateTopic is the spec as a CreateTopics entry.
func (s TopicSpec) CreateTopic() kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = s.Name, s.Partitions, s.ReplicationFactor
	for _, kv := range s.Configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		v := kv[1]
		c.Name, c.Value = kv[0], &v
		t.Configs = append(t.Configs, c)
	}
	return t
}

// Options configure a Runtime.
type Options struct {
	Topic       TopicSpec
	Coordinator Coordinator
	Replicas    Replicas
	// CreateTopic asks the controller to create the topic (the broker's
	// forwarding to the active controller); EnsureTopic uses it.
	CreateTopic func(ctx context.Context, t kmsg.CreateTopicsRequestTopic) error
	Logger      *slog.Logger
	// Loaded, if set, is told how long each shard that loaded took, from
	// the start of its replay to serving (Kafka's partition-load-time of
	// the coordinator's metrics).
	Loaded func(took time.Duration)
}

// Runtime loads and unloads one coordinator's shards.
type Runtime struct {
	opts Options
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// removeListener unregisters from the replica manager.
	removeListener func()

	mu      sync.Mutex
	stopped bool
	// loaded is the partitions this node leads, by the leader epoch their
	// shard was (or is being) loaded at; tails the last queued load or
	// unload of each partition.
	loaded map[int32]int32
	tails  map[int32]chan struct{}

	// creating is set while a creation of the topic is in flight.
	creating atomic.Bool
}

// Start starts the runtime: the coordinator's timers, and its shards'
// loads for the partitions this node leads now and later.
func Start(ctx context.Context, opts Options) *Runtime {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	rt := &Runtime{opts: opts, log: opts.Logger, loaded: map[int32]int32{}, tails: map[int32]chan struct{}{}}
	rt.ctx, rt.cancel = context.WithCancel(ctx)
	if r, ok := opts.Coordinator.(interface{ Run(context.Context) }); ok {
		rt.wg.Add(1)
		go func() {
			defer rt.wg.Done()
			r.Run(rt.ctx)
		}()
	}
	rt.removeListener = opts.Replicas.AddLeadershipListener(opts.Topic.Name, (*listener)(rt))
	return rt
}

// Topic is the spec of the runtime's topic.
func (rt *Runtime) Topic() TopicSpec { return rt.opts.Topic }

// Stop unloads every shard, which answers parked requests (a JoinGroup
// waiting for its rebalance) so that clients move on to whichever node
// leads next, stops the timers and waits for the runtime's goroutines.
func (rt *Runtime) Stop() {
	rt.removeListener()
	rt.cancel()
	rt.mu.Lock()
	rt.stopped = true
	for p := range rt.loaded {
		rt.enqueueLocked(p, func() { rt.opts.Coordinator.Unload(p) })
	}
	clear(rt.loaded)
	rt.mu.Unlock()
	rt.wg.Wait()
}

// listener is the runtime as the replica manager's leadership listener.
type listener Runtime

func (l *listener) BecameLeader(tp replica.TopicPartition, epoch int32) {
	rt := (*Runtime)(l)
	p := tp.Partition
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.stopped {
		return
	}
	if loadedEpoch, ok := rt.loaded[p]; ok && loadedEpoch == epoch {
		return
	}
	rt.loaded[p] = epoch
	if c, ok := rt.opts.Coordinator.(interface{ Prepare(int32) }); ok {
		c.Prepare(p)
	}
	plog := &partitionLog{replicas: rt.opts.Replicas, tp: tp, epoch: epoch}
	rt.enqueueLocked(p, func() {
		started := time.Now()
		err := rt.opts.Coordinator.Load(rt.ctx, p, plog)
		switch {
		case err != nil && rt.ctx.Err() == nil:
			rt.log.Error("loading coordinator partition", "topic", tp.Topic, "partition", p, "leader_epoch", epoch, "err", err)
		case err == nil && rt.opts.Loaded != nil:
			rt.opts.Loaded(time.Since(started))
		}
	})
}

func (l *listener) Resigned(tp replica.TopicPartition) {
	rt := (*Runtime)(l)
	p := tp.Partition
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if _, ok := rt.loaded[p]; !ok || rt.stopped {
		return
	}
	delete(rt.loaded, p)
	rt.enqueueLocked(p, func() { rt.opts.Coordinator.Unload(p) })
}

// enqueueLocked runs fn once the partition's previous load or unload has
// finished. The caller holds rt.mu.
func (rt *Runtime) enqueueLocked(p int32, fn func()) {
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

// topicCreationTimeout bounds one creation of the topic.
const topicCreationTimeout = 30 * time.Second

// EnsureTopic starts creating the topic from its spec unless a creation is
// already in flight. It does not wait: the caller answers
// COORDINATOR_NOT_AVAILABLE and the client retries.
func (rt *Runtime) EnsureTopic() {
	if !rt.creating.CompareAndSwap(false, true) {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.stopped {
		rt.creating.Store(false)
		return
	}
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		defer rt.creating.Store(false)
		ctx, cancel := context.WithTimeout(rt.ctx, topicCreationTimeout)
		defer cancel()
		if err := rt.opts.CreateTopic(ctx, rt.opts.Topic.CreateTopic()); err != nil && rt.ctx.Err() == nil {
			rt.log.Warn("creating the coordinator topic failed", "topic", rt.opts.Topic.Name, "err", err)
		}
	}()
}

// partitionLog is one partition as its shard sees it, bound to the leader
// epoch the shard was loaded at.
type partitionLog struct {
	replicas Replicas
	tp       replica.TopicPartition
	epoch    int32
}

// Append writes the shard's batch as a produce with acks=all would, bound
// to the shard's leader epoch, and returns once the high watermark has
// passed it. ctx's deadline bounds the wait.
func (l *partitionLog) Append(ctx context.Context, batch []byte) (int64, error) {
	entries := []replica.AppendEntry{{TopicPartition: l.tp, Records: batch, LeaderEpoch: l.epoch}}
	if err := l.replicas.AppendWait(ctx, -1, replica.OriginCoordinator, entries); err != nil {
		return 0, fmt.Errorf("appending to %s: %w", l.tp, err)
	}
	r := entries[0].Result
	switch {
	case r.Err == nil:
		return r.BaseOffset, nil
	case r.ErrorMessage != "":
		return 0, fmt.Errorf("appending to %s at leader epoch %d: %s: %w", l.tp, l.epoch, r.ErrorMessage, r.Err)
	}
	return 0, fmt.Errorf("appending to %s at leader epoch %d: %w", l.tp, l.epoch, r.Err)
}

// readChunk bounds one read of the log while replaying.
const readChunk = 1 << 20

// ReadFrom hands fn every committed batch from offset on. Each chunk is
// read into a fresh buffer because replay may keep slices of the batches
// it is given (member metadata and assignments).
func (l *partitionLog) ReadFrom(ctx context.Context, offset int64, fn func(batch []byte) error) error {
	pos := offset
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		buf, err := l.replicas.ReadForLoad(l.tp, pos, readChunk)
		if err != nil {
			return err
		}
		if len(buf) == 0 {
			return nil
		}
		next := pos
		for len(buf) > 0 {
			batch, rest, h, err := protocol.NextBatch(buf)
			if err != nil {
				return fmt.Errorf("reading %s at offset %d: %w", l.tp, next, err)
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
			return fmt.Errorf("reading %s at offset %d: the log did not advance", l.tp, pos)
		}
		pos = next
	}
}

// DeleteBelow deletes the partition's records below offset (a coordinator
// that prunes its own log: the share coordinator), as DeleteRecords does.
func (l *partitionLog) DeleteBelow(offset int64) error {
	if _, ke, msg := l.replicas.DeleteRecords(l.tp, offset); ke != nil {
		return fmt.Errorf("deleting the records of %s below %d: %s: %w", l.tp, offset, msg, ke)
	}
	return nil
}

// LeaderEpoch is the leader epoch the shard was loaded at (the transaction
// coordinator's coordinator epoch).
func (l *partitionLog) LeaderEpoch() int32 { return l.epoch }

// PartitionFor maps a coordinator key (a group id, a transactional id) to
// its partition of n the way Kafka does:
// Utils.abs(key.hashCode()) % n, over Java's String.hashCode.
func PartitionFor(key string, n int32) int32 {
	h := javaStringHash(key)
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}

// javaStringHash is Java's String.hashCode: over UTF-16 code units.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// AppendErrorCode maps a failed append of a coordinator's record to the
// error Kafka's coordinators answer with (TransactionStateManager's
// appendTransactionToLog, CoordinatorOperationExceptionHelper): the log's
// replication trouble is COORDINATOR_NOT_AVAILABLE, lost leadership
// NOT_COORDINATOR, a record too large UNKNOWN_SERVER_ERROR.
func AppendErrorCode(err error) int16 {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return kerr.CoordinatorNotAvailable.Code
		}
		return kerr.UnknownServerError.Code
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return kerr.NotCoordinator.Code
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		return kerr.UnknownServerError.Code
	}
	return ke.Code
}
