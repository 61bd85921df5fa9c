package tiered

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/metrics"
	"github.com/gregorbroker/gregor/storage"
)

// Partition is a hosted partition of a topic with remote.storage.enable,
// as the replica layer reports it to the manager.
type Partition struct {
	TP          storage.TopicPartition
	TopicID     [16]byte
	Log         *storage.Log
	Leader      bool
	LeaderEpoch int32
}

// Source is the replica layer: which tiered partitions this node hosts
// now, and whether it still leads one at an epoch.
type Source interface {
	TieredPartitions(dst []Partition) []Partition
	StillLeader(tp storage.TopicPartition, leaderEpoch int32) bool
}

// Options configure a Manager.
type Options struct {
	Store Store
	// Metadata is __remote_log_metadata (TopicLog).
	Metadata MetadataLog
	// MetadataWait is remote.log.metadata.consume.wait.ms: how long a
	// publication waits to be read back, and a read for the metadata to
	// load.
	MetadataWait time.Duration
	BrokerID     int32
	// TaskInterval is remote.log.manager.task.interval.ms: how often each
	// partition's copy and expiration run (and a follower's view of the
	// remote metadata is refreshed).
	TaskInterval time.Duration
	// CopierThreads is remote.log.manager.copier.thread.pool.size: the
	// partitions worked on at once.
	CopierThreads int
	// CacheBytes bounds the chunks and indexes of remote segments kept in
	// memory for reads.
	CacheBytes int64
	// ReaderThreads is remote.log.reader.threads: the remote reads run at
	// once; FetchMaxWait is remote.fetch.max.wait.ms: how long a fetch
	// waits for its remote read (read.go).
	ReaderThreads int
	FetchMaxWait  time.Duration
	// CopyQuotaWindow and FetchQuotaWindow measure the copy and fetch
	// quotas (quota.go); 11 samples of a second when zero.
	CopyQuotaWindow, FetchQuotaWindow QuotaWindow
	Logger                            *slog.Logger
	Now                               func() time.Time
}

// Manager is Gregor's RemoteLogManager: for every hosted partition of a
// tiered topic it copies the leader's rolled segments to the store,
// deletes remote segments past retention.*, keeps each replica's view of
// what is remote (so local retention may delete what is copied), and reads
// remote segments for fetches and offset lookups.
//
// Remote log metadata lives in __remote_log_metadata as Kafka's
// TopicBasedRemoteLogMetadataManager keeps it (metaview.go): a copy
// publishes its segment as COPY_SEGMENT_STARTED before the first object
// is put and COPY_SEGMENT_FINISHED after the last, and a deletion
// DELETE_SEGMENT_STARTED before the first object goes and
// DELETE_SEGMENT_FINISHED after the last. Only finished copies are read.
// A leader deletes the segments it finds started and never finished (a
// crash cut them short).
//
// Goroutines: Run's loop works on the partitions CopierThreads at a time
// and waits for them before its next round; its consumer goroutine
// applies the metadata records; reads run on the fetching goroutine. A
// partition's state is guarded by its mu, the view by its own; both are
// leaves, and m.mu guards the map.
type Manager struct {
	opts  Options
	src   Source
	cache *cache
	view  *metaView
	// initialized: the metadata topic exists (Init succeeded).
	initialized atomic.Bool

	mu    sync.Mutex
	parts map[storage.TopicPartition]*partState

	metrics Metrics

	copyQuota, fetchQuota *metrics.ByteRate
	// readers holds a token per remote read running (ReaderThreads).
	readers chan struct{}
}

// partState is what the manager knows of one partition's remote segments.
type partState struct {
	tp      storage.TopicPartition
	topicID [16]byte
	dir     string

	mu sync.Mutex
	// leading, lagBytes and lagSegments are the last leader task's view
	// (for the metrics): this node led, and what was left to copy.
	leading     bool
	lagBytes    int64
	lagSegments int
}

// New returns a manager; Run drives it.
func New(opts Options, src Source) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.TaskInterval <= 0 {
		opts.TaskInterval = 30 * time.Second
	}
	if opts.CopierThreads <= 0 {
		opts.CopierThreads = 10
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 64 << 20
	}
	if opts.ReaderThreads <= 0 {
		opts.ReaderThreads = 10
	}
	if opts.FetchMaxWait <= 0 {
		opts.FetchMaxWait = 500 * time.Millisecond
	}
	if opts.MetadataWait <= 0 {
		opts.MetadataWait = 2 * time.Minute
	}
	return &Manager{opts: opts, src: src, cache: newCache(opts.CacheBytes), view: newMetaView(opts.Metadata, opts.Logger),
		parts:     map[storage.TopicPartition]*partState{},
		copyQuota: metrics.NewByteRate(opts.CopyQuotaWindow), fetchQuota: metrics.NewByteRate(opts.FetchQuotaWindow),
		readers: make(chan struct{}, opts.ReaderThreads)}
}

// Store is the manager's object store.
func (m *Manager) Store() Store { return m.opts.Store }

// Run works on the tiered partitions every TaskInterval until ctx ends,
// and reads the metadata topic meanwhile; it closes the metadata log when
// it returns.
func (m *Manager) Run(ctx context.Context) {
	defer m.opts.Metadata.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.consume(ctx)
	}()
	defer wg.Wait()
	t := time.NewTicker(m.opts.TaskInterval)
	defer t.Stop()
	var parts []Partition
	for {
		if m.initMetadata(ctx) {
			parts = m.src.TieredPartitions(parts[:0])
			m.round(ctx, parts)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// initMetadata creates (or checks) the metadata topic until it can; ok
// once it has.
func (m *Manager) initMetadata(ctx context.Context) bool {
	if m.initialized.Load() {
		return true
	}
	if err := m.opts.Metadata.Init(ctx); err != nil {
		if ctx.Err() == nil {
			m.opts.Logger.Error("tiered storage waits for __remote_log_metadata: segments stay local until it can be used", "err", err)
		}
		return false
	}
	m.initialized.Store(true)
	return true
}

// consume applies the metadata records of the followed partitions.
func (m *Manager) consume(ctx context.Context) {
	for ctx.Err() == nil {
		entries, err := m.opts.Metadata.Poll(ctx)
		if err != nil {
			if ctx.Err() == nil {
				m.opts.Logger.Warn("reading __remote_log_metadata", "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
			continue
		}
		m.view.apply(entries)
	}
}

// round runs one task for each partition whose metadata is loaded.
func (m *Manager) round(ctx context.Context, parts []Partition) {
	metaParts := make([]int32, 0, len(parts))
	for _, p := range parts {
		metaParts = append(metaParts, m.view.partitionOf(partKey{p.TopicID, p.TP.Partition}))
	}
	if err := m.view.follow(ctx, metaParts); err != nil {
		m.opts.Logger.Warn("following __remote_log_metadata", "err", err)
	}
	sem := make(chan struct{}, m.opts.CopierThreads)
	var wg sync.WaitGroup
	seen := make(map[storage.TopicPartition]bool, len(parts))
	for _, p := range parts {
		seen[p.TP] = true
		st := m.state(p.TP, p.TopicID)
		if !m.view.ready(partKey{p.TopicID, p.TP.Partition}) {
			// Its metadata is still loading: what this node would copy
			// or delete may be what another leader already did.
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			var err error
			if p.Leader {
				err = m.leaderTask(ctx, st, p)
			} else {
				err = m.followerTask(ctx, st, p)
			}
			if err != nil && ctx.Err() == nil {
				m.opts.Logger.Warn("tiered storage task failed, retried next round", "partition", p.TP.String(), "leader", p.Leader, "err", err)
			}
		}()
	}
	wg.Wait()
	m.mu.Lock()
	for tp := range m.parts {
		if !seen[tp] {
			delete(m.parts, tp)
		}
	}
	m.mu.Unlock()
}

// state returns the partition's state, made on first use.
func (m *Manager) state(tp storage.TopicPartition, topicID [16]byte) *partState {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.parts[tp]
	if st == nil || st.topicID != topicID {
		st = &partState{tp: tp, topicID: topicID, dir: partitionDir(tp.Topic, tp.Partition, topicID)}
		m.parts[tp] = st
	}
	return st
}

// highest is the last offset of the segments, -1 with none.
func highest(segs []SegmentMetadata) int64 {
	h := int64(-1)
	for _, s := range segs {
		h = max(h, s.EndOffset)
	}
	return h
}

// followerTask keeps a follower's highest remote offset current, so that
// its local retention deletes what the leader copied.
func (m *Manager) followerTask(_ context.Context, st *partState, p Partition) error {
	st.mu.Lock()
	st.leading = false
	st.mu.Unlock()
	p.Log.SetHighestRemoteOffset(highest(m.view.committed(partKey{p.TopicID, p.TP.Partition})))
	return nil
}

// leaderTask deletes what copies and deletions cut short left, copies
// what is ready and deletes what retention lets go.
func (m *Manager) leaderTask(ctx context.Context, st *partState, p Partition) error {
	k := partKey{p.TopicID, p.TP.Partition}
	err := m.cleanUnfinished(ctx, p)
	copied := highest(m.view.committed(k))
	p.Log.SetHighestRemoteOffset(copied)
	cfg := p.Log.Config()
	if err == nil && !cfg.RemoteLogCopyDisable {
		err = m.copySegments(ctx, st, p, copied)
	}
	if err == nil {
		err = m.expire(ctx, p)
	}
	lagBytes, lagSegments := p.Log.TieringLag(highest(m.view.committed(k)))
	st.mu.Lock()
	st.leading = true
	st.lagBytes, st.lagSegments = lagBytes, lagSegments
	st.mu.Unlock()
	return err
}

// cleanUnfinished deletes the segments whose copy or deletion started and
// never finished: no copy of this node's is running for the partition
// (its copies run in its leader task), and a deposed leader's late commit
// does not apply after DELETE_SEGMENT_STARTED (metaview.go).
func (m *Manager) cleanUnfinished(ctx context.Context, p Partition) error {
	for _, s := range m.view.unfinished(partKey{p.TopicID, p.TP.Partition}) {
		m.opts.Logger.Info("deleting a remote segment whose copy or deletion was cut short", "partition", p.TP.String(),
			"start_offset", s.StartOffset, "state", s.State)
		if err := m.deleteSegment(ctx, p.TP, s); err != nil {
			return err
		}
	}
	return nil
}

// copySegments copies the rolled segments above copied, oldest first.
func (m *Manager) copySegments(ctx context.Context, st *partState, p Partition, copied int64) error {
	from := max(copied+1, p.Log.LocalLogStartOffset())
	for ctx.Err() == nil {
		if err := m.waitCopyQuota(ctx); err != nil {
			return err
		}
		seg, ok, err := p.Log.NextTieringSegment(from)
		if err != nil || !ok {
			return err
		}
		md, err := m.copySegment(ctx, st, p, &seg)
		seg.Release()
		if err != nil {
			m.metrics.copyFailed(p.TP.Topic)
			return err
		}
		p.Log.SetHighestRemoteOffset(md.EndOffset)
		m.metrics.copied(p.TP.Topic, seg.Size)
		m.copyQuota.Record(seg.Size, m.opts.Now())
		from = seg.NextOffset
	}
	return ctx.Err()
}

// waitCopyQuota waits while the copy rate is above
// remote.log.manager.copy.max.bytes.per.second.
func (m *Manager) waitCopyQuota(ctx context.Context) error {
	for m.copyQuota.Exceeded(m.opts.Now()) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// publish appends a metadata record and waits until this node's view has
// applied it.
func (m *Manager) publish(ctx context.Context, rec MetadataRecord) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.MetadataWait)
	defer cancel()
	k := rec.key()
	off, err := m.opts.Metadata.Append(ctx, m.view.partitionOf(k), rec.Encode())
	if err != nil {
		return fmt.Errorf("publishing to __remote_log_metadata: %w", err)
	}
	return m.view.waitApplied(ctx, k, off+1)
}

// update publishes a segment's move to state.
func (m *Manager) update(ctx context.Context, s SegmentMetadata, state SegmentState) error {
	return m.publish(ctx, MetadataRecord{Update: &SegmentUpdate{Topic: s.Topic, TopicID: s.TopicID, Partition: s.Partition,
		SegmentID: s.SegmentID, BrokerID: m.opts.BrokerID, EventTimeMs: m.opts.Now().UnixMilli(), State: state}})
}

// copySegment publishes the segment as started, puts its objects in the
// store, and publishes it as finished, which commits it; only while this
// node still leads at the epoch it copied under. A copy this node stops
// is deleted at once; one the store failed is left to the next leader
// task's cleanUnfinished, since the store is likely still failing.
func (m *Manager) copySegment(ctx context.Context, st *partState, p Partition, seg *storage.TieringSegment) (md SegmentMetadata, err error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return SegmentMetadata{}, err
	}
	md = SegmentMetadata{
		Topic: p.TP.Topic, TopicID: p.TopicID, Partition: p.TP.Partition, SegmentID: id,
		StartOffset: seg.BaseOffset, EndOffset: seg.NextOffset - 1, BrokerID: m.opts.BrokerID,
		MaxTimestamp: seg.MaxTimestamp, EventTimeMs: m.opts.Now().UnixMilli(),
		SizeInBytes: int32(seg.Size), State: CopySegmentStarted, TxnIndexEmpty: seg.TxnIndex == nil,
	}
	for _, e := range seg.LeaderEpochs {
		off := max(e.StartOffset, seg.BaseOffset)
		if n := len(md.LeaderEpochs); n > 0 && md.LeaderEpochs[n-1].Offset == off {
			md.LeaderEpochs[n-1].Epoch = e.Epoch
			continue
		}
		md.LeaderEpochs = append(md.LeaderEpochs, EpochStart{Epoch: e.Epoch, Offset: off})
	}
	if err := m.publish(ctx, MetadataRecord{Segment: &md}); err != nil {
		return md, err
	}
	stem := st.dir + segmentStem(seg.BaseOffset, id)
	storeFailed := false
	defer func() {
		if err == nil || storeFailed {
			return
		}
		// A copy cut short leaves nothing behind when the store and the
		// metadata topic can still be reached.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := m.deleteSegment(dctx, p.TP, md); derr != nil {
			m.opts.Logger.Warn("deleting a copy that failed; the next leader task deletes it", "partition", p.TP.String(), "start_offset", md.StartOffset, "err", derr)
		}
	}()
	put := func(suffix string, b []byte) error {
		err := m.opts.Store.Put(ctx, stem+suffix, bytes.NewReader(b), int64(len(b)))
		storeFailed = err != nil
		return err
	}
	start := m.opts.Now()
	if err := m.opts.Store.Put(ctx, stem+suffixLog, seg.Log.File, seg.Size); err != nil {
		storeFailed = true
		return md, err
	}
	objs := []struct {
		suffix string
		b      []byte
	}{
		{suffixIndex, seg.OffsetIndex}, {suffixTime, seg.TimeIndex},
		{suffixEpochs, storage.EncodeEpochCheckpoint(seg.LeaderEpochs)},
	}
	if seg.TxnIndex != nil {
		objs = append(objs, struct {
			suffix string
			b      []byte
		}{suffixTxn, seg.TxnIndex})
	}
	if seg.ProducerSnapshot != nil {
		objs = append(objs, struct {
			suffix string
			b      []byte
		}{suffixSnapshot, seg.ProducerSnapshot})
	}
	for _, o := range objs {
		if err := put(o.suffix, o.b); err != nil {
			return md, err
		}
	}
	if !m.src.StillLeader(p.TP, p.LeaderEpoch) {
		return md, fmt.Errorf("copying segment %d of %s: no longer the leader at epoch %d", seg.BaseOffset, p.TP, p.LeaderEpoch)
	}
	if err := m.update(ctx, md, CopySegmentFinished); err != nil {
		return md, err
	}
	md.State = CopySegmentFinished
	m.opts.Logger.Info("copied a segment to remote storage", "partition", p.TP.String(), "start_offset", md.StartOffset,
		"end_offset", md.EndOffset, "bytes", seg.Size, "store", m.opts.Store.String(), "took", m.opts.Now().Sub(start))
	return md, nil
}

// expire deletes the remote segments below the log start (DeleteRecords)
// and past retention.ms and retention.bytes (counting the local bytes not
// yet copied, as Kafka does), and moves the log start past them.
func (m *Manager) expire(ctx context.Context, p Partition) error {
	cfg := p.Log.Config()
	segs := m.view.committed(partKey{p.TopicID, p.TP.Partition})
	if len(segs) == 0 {
		return nil
	}
	logStart := p.Log.LogStartOffset()
	nowMs := m.opts.Now().UnixMilli()
	var total int64
	for _, s := range segs {
		total += int64(s.SizeInBytes)
	}
	total += p.Log.LocalSizeAbove(highest(segs))
	n := 0
	for n < len(segs) && segs[n].EndOffset < logStart {
		n++
	}
	if cfg.Delete && cfg.RetentionMs >= 0 {
		for n < len(segs) && segs[n].MaxTimestamp >= 0 && nowMs-segs[n].MaxTimestamp > cfg.RetentionMs {
			n++
		}
	}
	if cfg.Delete && cfg.RetentionBytes >= 0 {
		excess := total - cfg.RetentionBytes
		for _, s := range segs[:n] {
			excess -= int64(s.SizeInBytes)
		}
		for n < len(segs) && excess-int64(segs[n].SizeInBytes) >= 0 {
			excess -= int64(segs[n].SizeInBytes)
			n++
		}
	}
	if n == 0 {
		return nil
	}
	gone := segs[:n]
	newStart := gone[n-1].EndOffset + 1
	if newStart > logStart {
		// The log start moves first: no reader is sent to a segment that
		// is being deleted.
		if err := p.Log.AdvanceLogStartOffset(newStart); err != nil {
			return err
		}
		m.opts.Logger.Info("deleting remote segments past retention", "partition", p.TP.String(), "segments", n, "log_start_offset", newStart)
	}
	for _, s := range gone {
		if err := m.deleteSegment(ctx, p.TP, s); err != nil {
			return err
		}
		m.metrics.deleted(p.TP.Topic)
	}
	return nil
}

// deleteSegment publishes the segment's deletion as started, deletes its
// objects, and publishes it as finished.
func (m *Manager) deleteSegment(ctx context.Context, tp storage.TopicPartition, s SegmentMetadata) error {
	if s.State != DeleteSegmentStarted {
		if err := m.update(ctx, s, DeleteSegmentStarted); err != nil {
			return err
		}
	}
	if err := m.deleteObjects(ctx, s); err != nil {
		return err
	}
	return m.update(ctx, s, DeleteSegmentFinished)
}

// deleteObjects deletes a segment's objects from the store.
func (m *Manager) deleteObjects(ctx context.Context, s SegmentMetadata) error {
	stem := partitionDir(s.Topic, s.Partition, s.TopicID) + segmentStem(s.StartOffset, s.SegmentID)
	for _, suffix := range segmentSuffixes {
		if err := m.opts.Store.Delete(ctx, stem+suffix); err != nil {
			return err
		}
	}
	if d, ok := m.opts.Store.(FileTidier); ok && s.State != CopySegmentFinished {
		// A copy a crash cut short may have left a put's temporary file.
		if err := d.RemoveTemporaries(ctx, stem); err != nil {
			return err
		}
	}
	m.cache.dropSegment(s.SegmentID)
	return nil
}

// DeletePartition removes all of a deleted partition's remote data (topic
// deletion): DELETE_PARTITION_STARTED, the objects of every segment the
// metadata knows and any other under the partition's directory, then
// DELETE_PARTITION_FINISHED, as Kafka's RemoteLogManager does when a
// partition stops with its remote log deleted.
func (m *Manager) DeletePartition(ctx context.Context, tp storage.TopicPartition, topicID [16]byte) error {
	k := partKey{topicID, tp.Partition}
	if err := m.view.catchUp(ctx, k); err != nil {
		return err
	}
	mark := func(state PartitionDeleteState) error {
		return m.publish(ctx, MetadataRecord{PartitionDelete: &PartitionDelete{Topic: tp.Topic, TopicID: topicID, Partition: tp.Partition,
			BrokerID: m.opts.BrokerID, EventTimeMs: m.opts.Now().UnixMilli(), State: state}})
	}
	if err := mark(DeletePartitionStarted); err != nil {
		return err
	}
	// Every object under the partition's directory goes: those of the
	// segments the metadata names, and any other (a deposed leader's put
	// after its copy was deleted, say).
	segs := m.view.all(k)
	for _, s := range segs {
		m.cache.dropSegment(s.SegmentID)
	}
	dir := partitionDir(tp.Topic, tp.Partition, topicID)
	names, err := m.opts.Store.List(ctx, dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := m.opts.Store.Delete(ctx, dir+name); err != nil {
			return err
		}
	}
	if d, ok := m.opts.Store.(FileTidier); ok {
		if err := d.RemoveDir(dir); err != nil {
			return err
		}
	}
	if err := mark(DeletePartitionFinished); err != nil {
		return err
	}
	m.mu.Lock()
	if st := m.parts[tp]; st != nil && st.topicID == topicID {
		delete(m.parts, tp)
	}
	m.mu.Unlock()
	if len(segs)+len(names) > 0 {
		m.opts.Logger.Info("deleted a partition's remote data", "partition", tp.String(), "segments", len(segs), "other_objects", len(names))
	}
	return nil
}

// segments returns the partition's committed segments once its metadata
// is loaded; with refresh, once what was published before now is read
// too (a follower serving what its leader copied since).
func (m *Manager) segments(ctx context.Context, tp storage.TopicPartition, topicID [16]byte, refresh bool) ([]SegmentMetadata, error) {
	k := partKey{topicID, tp.Partition}
	ctx, cancel := context.WithTimeout(ctx, m.opts.MetadataWait)
	defer cancel()
	var err error
	if refresh {
		err = m.view.catchUp(ctx, k)
	} else {
		err = m.view.waitApplied(ctx, k, -1)
	}
	if err != nil {
		return nil, err
	}
	return m.view.committed(k), nil
}
