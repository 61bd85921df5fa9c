package txn

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/coordinator/runtime"
	"github.com/twmb/franz-go/pkg/kerr"
)

// PartitionLog is one __transaction_state partition as the coordinator
// sees it (the coordinator runtime provides it, bound to the leader epoch
// the shard was loaded at, which is the coordinator epoch).
type PartitionLog = runtime.PartitionLog

// Marker asks for one transaction marker in each of Partitions.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	// TransactionVersion is the transaction's client version (markers of
	// TV2 transactions carry it in WriteTxnMarkers v2).
	TransactionVersion int16
	Partitions         []TopicPartition
}

// MarkerWriter writes transaction markers to the leaders of their
// partitions (Kafka's TransactionMarkerChannelManager sending
// WriteTxnMarkers). It returns one error code per partition, in order:
// 0 once the marker is in the partition's log (or the partition no longer
// exists), a retriable code to be tried again, or INVALID_PRODUCER_EPOCH /
// TRANSACTION_COORDINATOR_FENCED when this coordinator is stale.
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, m Marker) []int16
}

// Options are what a Coordinator needs besides its Config.
type Options struct {
	Config Config
	// ProducerIDs hands out a fresh producer id (from the blocks the
	// controller allocates).
	ProducerIDs func(ctx context.Context) (int64, error)
	Markers     MarkerWriter
	// TransactionVersion is the finalized transaction.version (it picks
	// the record value version); nil means 0.
	TransactionVersion func() int16
}

// Coordinator is the transaction coordinator of one broker: it serves the
// transactional ids whose __transaction_state partitions are loaded here.
//
// Concurrency: the shards map (runtime.Shards) has its own lock, released
// before a shard's is taken. Each shard has its own mu, guarding its
// transactions; it is released while a state record is appended (the
// transaction is marked pending meanwhile, so no other request transitions
// it) and while markers are written. Never two shard locks at once
// (LOCKS.md).
// Marker rounds and completions run on goroutines of their shard, which
// Unload cancels and waits for; Run's goroutine fires the timers.
type Coordinator struct {
	cfg  Config
	opts Options
	log  *slog.Logger
	now  func() time.Time

	shards runtime.Shards[*shard]
}

// New returns a coordinator with no partitions loaded.
func New(opts Options) *Coordinator {
	c := &Coordinator{cfg: opts.Config, opts: opts, log: opts.Config.Logger, now: opts.Config.Now}
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

func (c *Coordinator) nowMs() int64 { return c.now().UnixMilli() }

func (c *Coordinator) transactionVersion() int16 {
	if c.opts.TransactionVersion == nil {
		return 0
	}
	return c.opts.TransactionVersion()
}

// PartitionFor maps a transactional id to its __transaction_state
// partition as Kafka does: Utils.abs(transactionalId.hashCode()) %
// transaction.state.log.num.partitions.
func (c *Coordinator) PartitionFor(id string) int32 { return PartitionFor(id, c.cfg.NumPartitions) }

// PartitionFor is Kafka's transactional-id-to-partition mapping for n
// partitions (the same hash as the group mapping).
func PartitionFor(id string, n int32) int32 { return runtime.PartitionFor(id, n) }

// shard is one loaded __transaction_state partition.
type shard struct {
	c                *Coordinator
	partition        int32
	plog             PartitionLog
	coordinatorEpoch int32

	// ctx ends when the shard is unloaded; its goroutines (marker rounds)
	// run under it and wg counts them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	status runtime.ShardStatus
	txns   map[string]*txnMeta
	// written is closed, and replaced, whenever a state write of the shard
	// ends (AddPartitionsWaiting waits on it for the previous
	// transaction to complete).
	written chan struct{}
}

func (c *Coordinator) newShard(partition int32, plog PartitionLog) *shard {
	s := &shard{c: c, partition: partition, plog: plog, coordinatorEpoch: -1, status: runtime.ShardLoading, txns: map[string]*txnMeta{},
		written: make(chan struct{})}
	if e, ok := plog.(interface{ LeaderEpoch() int32 }); ok {
		s.coordinatorEpoch = e.LeaderEpoch()
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Prepare marks partition as loading from the moment this node becomes
// its leader, so requests get COORDINATOR_LOAD_IN_PROGRESS until Load ends.
func (c *Coordinator) Prepare(partition int32) {
	c.shards.AddIfAbsent(partition, func() *shard { return c.newShard(partition, nil) })
}

// Load replays partition and then serves its transactional ids. Prepared
// transactions (PrepareCommit, PrepareAbort) get their markers written and
// are completed, as Kafka's coordinator does when it takes a partition
// over: a coordinator that died mid-commit has its commit finished.
func (c *Coordinator) Load(ctx context.Context, partition int32, plog PartitionLog) error {
	s := c.newShard(partition, plog)
	if old, ok := c.shards.Replace(partition, s); ok {
		old.unload()
	}
	started := c.now()
	var scratch []byte
	records := 0
	err := plog.ReadFrom(ctx, 0, func(batch []byte) error {
		return replayBatch(batch, &scratch, func(key, value []byte) error {
			records++
			return s.replay(key, value)
		})
	})
	if err != nil {
		s.mu.Lock()
		s.status = runtime.ShardUnloaded
		s.mu.Unlock()
		c.shards.RemoveIf(partition, s)
		s.cancel()
		return err
	}
	s.mu.Lock()
	if s.status == runtime.ShardLoading {
		s.status = runtime.ShardActive
		for _, m := range s.txns {
			if m.state == StatePrepareCommit || m.state == StatePrepareAbort {
				s.startMarkersLocked(m)
			}
		}
	}
	n := len(s.txns)
	s.mu.Unlock()
	c.log.Info("loaded transaction state partition", "partition", partition, "coordinator_epoch", s.coordinatorEpoch,
		"transactional_ids", n, "records", records, "took", c.now().Sub(started))
	return nil
}

// replay applies one record of the log. The caller is the loading
// goroutine; no request sees the shard until it is active.
func (s *shard) replay(key, value []byte) error {
	id, ok, err := decodeKey(key)
	if err != nil || !ok {
		return err
	}
	if value == nil {
		delete(s.txns, id)
		return nil
	}
	st, err := decodeValue(value)
	if err != nil {
		return err
	}
	s.txns[id] = &txnMeta{id: id, txnState: st}
	return nil
}

// Unload stops serving partition's transactional ids and waits for the
// shard's marker rounds to stop. The next leader finishes what they left.
func (c *Coordinator) Unload(partition int32) {
	if s, ok := c.shards.Remove(partition); ok {
		s.unload()
	}
}

func (s *shard) unload() {
	s.mu.Lock()
	s.status = runtime.ShardUnloaded
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// shardFor returns the active shard serving id, or the error Kafka's
// TransactionStateManager.getTransactionState gives: NOT_COORDINATOR when
// the partition is not led here, COORDINATOR_LOAD_IN_PROGRESS while it
// loads.
func (c *Coordinator) shardFor(id string) (*shard, int16) {
	s, ok := c.shards.Get(c.PartitionFor(id))
	if !ok {
		return nil, kerr.NotCoordinator.Code
	}
	s.mu.Lock()
	status := s.status
	s.mu.Unlock()
	switch status {
	case runtime.ShardLoading:
		return nil, kerr.CoordinatorLoadInProgress.Code
	case runtime.ShardActive:
		return s, 0
	}
	return nil, kerr.NotCoordinator.Code
}

// CoordinatorFor answers the transaction half of FindCoordinator: the
// partition owning id and whether it is served here.
func (c *Coordinator) CoordinatorFor(id string) (partition int32, errCode int16) {
	partition = c.PartitionFor(id)
	if id == "" {
		return partition, kerr.InvalidRequest.Code
	}
	_, code := c.shardFor(id)
	return partition, code
}

// appendTimeout bounds the wait for one state record to be committed
// (Kafka waits up to its request timeout).
const appendTimeout = 30 * time.Second

// persist appends next as id's state and installs it once committed. The
// caller holds s.mu and has checked that m is not pending; persist
// releases s.mu during the append and holds it again when it returns. The
// answer is the error code for the client (Kafka's
// appendTransactionToLog mapping of append errors).
func (s *shard) persist(ctx context.Context, m *txnMeta, next txnState) int16 {
	return s.write(ctx, m, encodeValue(&next, s.c.transactionVersion()), next.state, func() { m.txnState = next })
}

// write appends value (nil: the tombstone) as m's record, as persist
// does, and calls apply once it is committed.
func (s *shard) write(ctx context.Context, m *txnMeta, value []byte, to State, apply func()) int16 {
	batch, err := recordBatch(encodeKey(m.id), value, s.c.nowMs())
	if err != nil {
		s.c.log.Error("encoding a transaction state record", "transactional_id", m.id, "err", err)
		return kerr.UnknownServerError.Code
	}
	m.pending = true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, appendTimeout)
	_, err = s.plog.Append(ctx, batch)
	cancel()
	s.mu.Lock()
	m.pending = false
	close(s.written)
	s.written = make(chan struct{})
	if err != nil {
		code := runtime.AppendErrorCode(err)
		s.c.log.Info("writing transaction state failed", "transactional_id", m.id, "state", to, "err", err, "answer", kerr.ErrorForCode(code))
		return code
	}
	if s.status != runtime.ShardActive || s.txns[m.id] != m {
		// Unloaded meanwhile: the next coordinator replays the record.
		return kerr.NotCoordinator.Code
	}
	apply()
	return 0
}

// Run fires the coordinator's timers until ctx ends: aborting transactions
// open longer than their timeout, and expiring transactional ids idle for
// transactional.id.expiration.ms.
func (c *Coordinator) Run(ctx context.Context) {
	abort := time.NewTicker(time.Duration(c.cfg.AbortTimedOutIntervalMs) * time.Millisecond)
	defer abort.Stop()
	expire := time.NewTicker(time.Duration(c.cfg.RemoveExpiredIntervalMs) * time.Millisecond)
	defer expire.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-abort.C:
			c.AbortTimedOut(ctx)
		case <-expire.C:
			c.ExpireTransactionalIDs(ctx)
		}
	}
}

func (c *Coordinator) activeShards() []*shard { return c.shards.All() }
