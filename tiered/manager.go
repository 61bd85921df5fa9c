package tiered

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
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
	Store    Store
	BrokerID int32
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
// Remote log metadata: each segment's SegmentMetadata (Kafka's
// RemoteLogSegmentMetadataRecord) is an object beside its files, written
// after them; a replica learns the partition's remote segments by listing
// the partition's directory. Segments whose files are there without the
// metadata object are copies a crash cut short: a new leader deletes them.
//
// Goroutines: Run's loop works on the partitions CopierThreads at a time
// and waits for them before its next round; reads run on the fetching
// goroutine. A partition's state is guarded by its mu (a leaf); m.mu
// guards the map.
type Manager struct {
	opts  Options
	src   Source
	cache *cache

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
	// segs are the committed segments, by start offset.
	segs []SegmentMetadata
	// listed: segs reflect a listing of the store (or this node's own
	// writes since); cleanedEpoch is the leader epoch at which this node
	// last removed uncommitted copies (-1: not as leader).
	listed       bool
	cleanedEpoch int32
	// known are the metadata objects read so far, by name.
	known map[string]SegmentMetadata
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
	return &Manager{opts: opts, src: src, cache: newCache(opts.CacheBytes), parts: map[storage.TopicPartition]*partState{},
		copyQuota: metrics.NewByteRate(opts.CopyQuotaWindow), fetchQuota: metrics.NewByteRate(opts.FetchQuotaWindow),
		readers: make(chan struct{}, opts.ReaderThreads)}
}

// Store is the manager's object store.
func (m *Manager) Store() Store { return m.opts.Store }

// Run works on the tiered partitions every TaskInterval until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(m.opts.TaskInterval)
	defer t.Stop()
	var parts []Partition
	for {
		parts = m.src.TieredPartitions(parts[:0])
		m.round(ctx, parts)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round runs one task for each partition.
func (m *Manager) round(ctx context.Context, parts []Partition) {
	sem := make(chan struct{}, m.opts.CopierThreads)
	var wg sync.WaitGroup
	seen := make(map[storage.TopicPartition]bool, len(parts))
	for _, p := range parts {
		seen[p.TP] = true
		st := m.state(p.TP, p.TopicID)
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
		st = &partState{tp: tp, topicID: topicID, dir: partitionDir(tp.Topic, tp.Partition, topicID), cleanedEpoch: -1}
		m.parts[tp] = st
	}
	return st
}

// list reads the partition's committed segments from the store. With
// clean, segment objects without their metadata are deleted (a copy cut
// short; only a leader does this).
func (m *Manager) list(ctx context.Context, st *partState, clean bool) ([]SegmentMetadata, error) {
	names, err := m.opts.Store.List(ctx, st.dir)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	known := st.known
	st.mu.Unlock()
	fresh := make(map[string]SegmentMetadata, len(known))
	committed := map[string]bool{}
	var segs []SegmentMetadata
	for _, name := range names {
		stem, suffix, ok := parseObjectName(name)
		if !ok || suffix != suffixMetadata {
			continue
		}
		md, seen := known[name]
		if !seen {
			b, err := m.opts.Store.Get(ctx, st.dir+name, 0, -1)
			if errors.Is(err, ErrNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				return nil, err
			}
			if md, err = DecodeSegmentMetadata(b); err != nil {
				return nil, fmt.Errorf("reading %s%s: %w", st.dir, name, err)
			}
		}
		fresh[name] = md
		if md.State != CopySegmentFinished {
			continue
		}
		committed[stem] = true
		segs = append(segs, md)
	}
	// Metadata objects never change: the next listing reads only new
	// ones.
	st.mu.Lock()
	st.known = fresh
	st.mu.Unlock()
	if clean {
		for _, name := range names {
			stem, _, ok := parseObjectName(name)
			if !ok || committed[stem] {
				continue
			}
			m.opts.Logger.Info("deleting an uncommitted remote segment object", "partition", st.tp.String(), "object", st.dir+name)
			if err := m.opts.Store.Delete(ctx, st.dir+name); err != nil {
				return nil, err
			}
		}
	}
	slices.SortFunc(segs, func(a, b SegmentMetadata) int {
		if a.StartOffset != b.StartOffset {
			return cmpInt64(a.StartOffset, b.StartOffset)
		}
		return cmpInt64(a.EndOffset, b.EndOffset)
	})
	return segs, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// highest is the last offset of the segments, -1 with none.
func highest(segs []SegmentMetadata) int64 {
	h := int64(-1)
	for _, s := range segs {
		h = max(h, s.EndOffset)
	}
	return h
}

// followerTask refreshes a follower's view of the remote segments, so that
// its local retention deletes what the leader copied.
func (m *Manager) followerTask(ctx context.Context, st *partState, p Partition) error {
	segs, err := m.list(ctx, st, false)
	if err != nil {
		return err
	}
	st.mu.Lock()
	st.segs, st.listed, st.cleanedEpoch, st.leading = segs, true, -1, false
	st.mu.Unlock()
	p.Log.SetHighestRemoteOffset(highest(segs))
	return nil
}

// leaderTask copies what is ready and deletes what retention lets go.
func (m *Manager) leaderTask(ctx context.Context, st *partState, p Partition) error {
	st.mu.Lock()
	fresh := st.cleanedEpoch != p.LeaderEpoch
	st.mu.Unlock()
	if fresh {
		// A new leadership starts from the store, not from what this node
		// knew: another leader may have copied and deleted meanwhile.
		segs, err := m.list(ctx, st, true)
		if err != nil {
			return err
		}
		st.mu.Lock()
		st.segs, st.listed, st.cleanedEpoch = segs, true, p.LeaderEpoch
		st.mu.Unlock()
	}
	st.mu.Lock()
	copied := highest(st.segs)
	st.mu.Unlock()
	p.Log.SetHighestRemoteOffset(copied)
	cfg := p.Log.Config()
	var err error
	if !cfg.RemoteLogCopyDisable {
		err = m.copySegments(ctx, st, p, copied)
	}
	if err == nil {
		err = m.expire(ctx, st, p)
	}
	st.mu.Lock()
	st.leading = true
	st.lagBytes, st.lagSegments = p.Log.TieringLag(highest(st.segs))
	st.mu.Unlock()
	return err
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
		st.mu.Lock()
		st.segs = append(st.segs, md)
		st.mu.Unlock()
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

// copySegment puts the segment's objects in the store, then its metadata,
// which commits it. A crash before the metadata leaves objects that the
// next leader deletes; the metadata is written only while this node still
// leads at the epoch it copied under.
func (m *Manager) copySegment(ctx context.Context, st *partState, p Partition, seg *storage.TieringSegment) (md SegmentMetadata, err error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return SegmentMetadata{}, err
	}
	md = SegmentMetadata{
		Topic: p.TP.Topic, TopicID: p.TopicID, Partition: p.TP.Partition, SegmentID: id,
		StartOffset: seg.BaseOffset, EndOffset: seg.NextOffset - 1, BrokerID: m.opts.BrokerID,
		MaxTimestamp: seg.MaxTimestamp, EventTimeMs: m.opts.Now().UnixMilli(),
		SizeInBytes: int32(seg.Size), State: CopySegmentFinished,
	}
	for _, e := range seg.LeaderEpochs {
		off := max(e.StartOffset, seg.BaseOffset)
		if n := len(md.LeaderEpochs); n > 0 && md.LeaderEpochs[n-1].Offset == off {
			md.LeaderEpochs[n-1].Epoch = e.Epoch
			continue
		}
		md.LeaderEpochs = append(md.LeaderEpochs, EpochStart{Epoch: e.Epoch, Offset: off})
	}
	stem := st.dir + segmentStem(seg.BaseOffset, id)
	defer func() {
		if err == nil {
			return
		}
		// A copy cut short leaves no objects behind when the store can
		// still be reached (a new leader deletes those it cannot).
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, suffix := range []string{suffixMetadata, suffixLog, suffixIndex, suffixTime, suffixEpochs, suffixTxn, suffixSnapshot} {
			if derr := m.opts.Store.Delete(dctx, stem+suffix); derr != nil {
				m.opts.Logger.Warn("deleting the objects of a copy that failed", "partition", p.TP.String(), "object", stem+suffix, "err", derr)
				return
			}
		}
	}()
	put := func(suffix string, b []byte) error {
		return m.opts.Store.Put(ctx, stem+suffix, bytes.NewReader(b), int64(len(b)))
	}
	start := m.opts.Now()
	if err := m.opts.Store.Put(ctx, stem+suffixLog, seg.Log.File, seg.Size); err != nil {
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
	if err := put(suffixMetadata, md.Encode()); err != nil {
		return md, err
	}
	m.opts.Logger.Info("copied a segment to remote storage", "partition", p.TP.String(), "start_offset", md.StartOffset,
		"end_offset", md.EndOffset, "bytes", seg.Size, "store", m.opts.Store.String(), "took", m.opts.Now().Sub(start))
	return md, nil
}

// expire deletes the remote segments below the log start (DeleteRecords)
// and past retention.ms and retention.bytes (counting the local bytes not
// yet copied, as Kafka does), and moves the log start past them.
func (m *Manager) expire(ctx context.Context, st *partState, p Partition) error {
	cfg := p.Log.Config()
	st.mu.Lock()
	segs := slices.Clone(st.segs)
	st.mu.Unlock()
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
		if err := m.deleteSegment(ctx, st, s); err != nil {
			return err
		}
		m.metrics.deleted(p.TP.Topic)
	}
	st.mu.Lock()
	st.segs = slices.DeleteFunc(slices.Clone(st.segs), func(s SegmentMetadata) bool {
		return slices.ContainsFunc(gone, func(g SegmentMetadata) bool { return g.SegmentID == s.SegmentID })
	})
	st.mu.Unlock()
	return nil
}

// deleteSegment removes a segment: its metadata first (it is no longer
// committed), then its objects.
func (m *Manager) deleteSegment(ctx context.Context, st *partState, s SegmentMetadata) error {
	stem := st.dir + segmentStem(s.StartOffset, s.SegmentID)
	for _, suffix := range []string{suffixMetadata, suffixLog, suffixIndex, suffixTime, suffixEpochs, suffixTxn, suffixSnapshot} {
		if err := m.opts.Store.Delete(ctx, stem+suffix); err != nil {
			return err
		}
	}
	m.cache.dropSegment(s.SegmentID)
	return nil
}

// DeletePartition removes all of a deleted partition's remote data (topic
// deletion, Kafka's RemotePartitionDeleteMetadata).
func (m *Manager) DeletePartition(ctx context.Context, tp storage.TopicPartition, topicID [16]byte) error {
	dir := partitionDir(tp.Topic, tp.Partition, topicID)
	names, err := m.opts.Store.List(ctx, dir)
	if err != nil {
		return err
	}
	// Metadata first: a half-done deletion leaves objects no reader
	// uses.
	slices.SortStableFunc(names, func(a, b string) int {
		am, bm := strings.HasSuffix(a, suffixMetadata), strings.HasSuffix(b, suffixMetadata)
		switch {
		case am && !bm:
			return -1
		case bm && !am:
			return 1
		}
		return 0
	})
	for _, name := range names {
		if err := m.opts.Store.Delete(ctx, dir+name); err != nil {
			return err
		}
	}
	if d, ok := m.opts.Store.(*DirStore); ok {
		if err := d.RemoveDir(dir); err != nil {
			return err
		}
	}
	m.mu.Lock()
	if st := m.parts[tp]; st != nil && st.topicID == topicID {
		delete(m.parts, tp)
	}
	m.mu.Unlock()
	if len(names) > 0 {
		m.opts.Logger.Info("deleted a partition's remote data", "partition", tp.String(), "objects", len(names))
	}
	return nil
}

// segments returns the partition's committed segments, listing the store
// when this node has not yet.
func (m *Manager) segments(ctx context.Context, tp storage.TopicPartition, topicID [16]byte, refresh bool) ([]SegmentMetadata, error) {
	st := m.state(tp, topicID)
	st.mu.Lock()
	listed := st.listed
	segs := st.segs
	st.mu.Unlock()
	if listed && !refresh {
		return segs, nil
	}
	segs, err := m.list(ctx, st, false)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	if !st.listed || refresh {
		st.segs, st.listed = segs, true
	}
	st.mu.Unlock()
	return segs, nil
}
