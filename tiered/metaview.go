package tiered

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// MetadataLog is __remote_log_metadata as the manager uses it: Kafka's
// TopicBasedRemoteLogMetadataManager keeps every tiered partition's remote
// segments there, so that the metadata survives the loss of any broker
// and every replica sees the same segments. TopicLog is the topic on a
// cluster; tests use a log in memory.
type MetadataLog interface {
	// Partitions is the partition count of the topic.
	Partitions() int32
	// Init creates the topic, or checks the one there; the manager calls
	// it until it succeeds.
	Init(ctx context.Context) error
	// Append adds value to partition and returns its offset once the
	// topic has acknowledged it (acks=all).
	Append(ctx context.Context, partition int32, value []byte) (int64, error)
	// EndOffsets are the partitions' log end offsets now.
	EndOffsets(ctx context.Context, partitions []int32) (map[int32]int64, error)
	// Follow makes Poll return the partitions' records, each from its
	// first offset.
	Follow(partitions []int32)
	// Poll waits for records of the followed partitions, in offset order
	// within a partition.
	Poll(ctx context.Context) ([]MetadataEntry, error)
	Close()
}

// MetadataEntry is one record of __remote_log_metadata.
type MetadataEntry struct {
	Partition int32
	Offset    int64
	Value     []byte
}

// partKey names a topic partition as the metadata does: by topic id.
type partKey struct {
	topicID   [16]byte
	partition int32
}

// metaView is this node's view of __remote_log_metadata, built by
// applying the records of the partitions it follows in order (Kafka's
// ConsumerTask and RemoteLogMetadataCache). A metadata partition is
// ready once the records up to its end offset when it was first followed
// are applied: until then what it says of a topic partition may be stale,
// and the manager neither copies nor deletes for it.
//
// Goroutines: apply runs on the manager's consumer goroutine; the rest on
// tasks and readers. mu guards everything and is a leaf.
type metaView struct {
	log    MetadataLog
	logger *slog.Logger

	mu sync.Mutex
	// changed is closed, and replaced, whenever a record is applied or a
	// partition is followed.
	changed  chan struct{}
	followed map[int32]*metaPartition
	parts    map[partKey]*remotePartition
}

// metaPartition is a followed partition of the metadata topic.
type metaPartition struct {
	// next is the offset after the last record applied; readyAt the end
	// offset to reach before the partition is ready (-1: not known yet).
	next, readyAt int64
}

// remotePartition is what the metadata says of one topic partition.
type remotePartition struct {
	// segs are its segments in every state but DELETE_SEGMENT_FINISHED.
	segs map[[16]byte]SegmentMetadata
	// deleting is the partition's deletion state, -1 without one.
	deleting PartitionDeleteState
}

func newMetaView(log MetadataLog, logger *slog.Logger) *metaView {
	return &metaView{log: log, logger: logger, changed: make(chan struct{}),
		followed: map[int32]*metaPartition{}, parts: map[partKey]*remotePartition{}}
}

func (v *metaView) partitionOf(k partKey) int32 {
	return MetadataPartition(k.topicID, k.partition, v.log.Partitions())
}

func (v *metaView) notifyLocked() {
	close(v.changed)
	v.changed = make(chan struct{})
}

// follow starts following the metadata partitions not followed yet, and
// learns their end offsets (the records they must apply to be ready).
func (v *metaView) follow(ctx context.Context, partitions []int32) error {
	v.mu.Lock()
	var fresh []int32
	for _, p := range partitions {
		if v.followed[p] == nil && !slices.Contains(fresh, p) {
			fresh = append(fresh, p)
		}
	}
	unknown := slices.Clone(fresh)
	for p, mp := range v.followed {
		if mp.readyAt < 0 && !slices.Contains(unknown, p) {
			unknown = append(unknown, p)
		}
	}
	for _, p := range fresh {
		v.followed[p] = &metaPartition{readyAt: -1}
	}
	v.mu.Unlock()
	if len(fresh) > 0 {
		v.log.Follow(fresh)
	}
	if len(unknown) == 0 {
		return nil
	}
	ends, err := v.log.EndOffsets(ctx, unknown)
	if err != nil {
		return fmt.Errorf("reading the end offsets of __remote_log_metadata: %w", err)
	}
	v.mu.Lock()
	for p, end := range ends {
		if mp := v.followed[p]; mp != nil && mp.readyAt < 0 {
			mp.readyAt = end
		}
	}
	v.notifyLocked()
	v.mu.Unlock()
	return nil
}

// ready reports whether the metadata partition of k is followed and
// caught up.
func (v *metaView) ready(k partKey) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	mp := v.followed[v.partitionOf(k)]
	return mp != nil && mp.readyAt >= 0 && mp.next >= mp.readyAt
}

// waitApplied waits until the records of k's metadata partition below
// upTo are applied (upTo < 0: until it is ready), following it first.
func (v *metaView) waitApplied(ctx context.Context, k partKey, upTo int64) error {
	p := v.partitionOf(k)
	if err := v.follow(ctx, []int32{p}); err != nil {
		return err
	}
	for {
		v.mu.Lock()
		mp := v.followed[p]
		want := upTo
		if want < 0 {
			want = mp.readyAt
		}
		done := want >= 0 && mp.next >= want
		ch := v.changed
		v.mu.Unlock()
		if done {
			return nil
		}
		if want < 0 {
			// The end offsets could not be read yet: try again.
			if err := v.follow(ctx, nil); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for partition %d of __remote_log_metadata to be read up to offset %d: %w", p, want, ctx.Err())
		case <-ch:
		case <-time.After(time.Second):
		}
	}
}

// catchUp waits until k's metadata partition is applied up to its end
// offset now: what any leader published before is in the view.
func (v *metaView) catchUp(ctx context.Context, k partKey) error {
	p := v.partitionOf(k)
	if err := v.waitApplied(ctx, k, -1); err != nil {
		return err
	}
	ends, err := v.log.EndOffsets(ctx, []int32{p})
	if err != nil {
		return fmt.Errorf("reading the end offset of __remote_log_metadata partition %d: %w", p, err)
	}
	return v.waitApplied(ctx, k, ends[p])
}

// apply applies records read from the topic.
func (v *metaView) apply(entries []MetadataEntry) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range entries {
		mp := v.followed[e.Partition]
		if mp == nil || e.Offset < mp.next {
			continue
		}
		mp.next = e.Offset + 1
		rec, err := DecodeMetadataRecord(e.Value)
		if err != nil {
			v.logger.Warn("skipping a record of __remote_log_metadata that cannot be read", "partition", e.Partition, "offset", e.Offset, "err", err)
			continue
		}
		v.applyLocked(rec, e)
	}
	v.notifyLocked()
}

// validTransition is Kafka's RemoteLogSegmentState.isValidTransition.
func validTransition(from, to SegmentState) bool {
	switch from {
	case CopySegmentStarted:
		return to == CopySegmentFinished || to == DeleteSegmentStarted
	case CopySegmentFinished:
		return to == DeleteSegmentStarted
	case DeleteSegmentStarted:
		return to == DeleteSegmentFinished
	}
	return false
}

func (v *metaView) applyLocked(rec MetadataRecord, e MetadataEntry) {
	k := rec.key()
	rp := v.parts[k]
	if rp == nil {
		if rec.PartitionDelete != nil && rec.PartitionDelete.State == DeletePartitionFinished {
			return
		}
		rp = &remotePartition{segs: map[[16]byte]SegmentMetadata{}, deleting: -1}
		v.parts[k] = rp
	}
	switch {
	case rec.Segment != nil:
		s := *rec.Segment
		if _, dup := rp.segs[s.SegmentID]; dup || s.State != CopySegmentStarted {
			v.logger.Warn("skipping a remote segment record out of order", "topic", s.Topic, "partition", s.Partition, "state", s.State, "offset", e.Offset)
			return
		}
		rp.segs[s.SegmentID] = s
	case rec.Update != nil:
		u := rec.Update
		s, ok := rp.segs[u.SegmentID]
		if !ok || !validTransition(s.State, u.State) {
			// A deposed leader's late commit of a segment a new leader
			// already started deleting, for one: the first word wins.
			v.logger.Info("skipping a remote segment update that does not apply", "topic", u.Topic, "partition", u.Partition,
				"known", ok, "from", s.State, "to", u.State, "offset", e.Offset)
			return
		}
		if u.State == DeleteSegmentFinished {
			delete(rp.segs, u.SegmentID)
			return
		}
		s.State, s.BrokerID, s.EventTimeMs = u.State, u.BrokerID, u.EventTimeMs
		if u.CustomMetadata != nil {
			s.CustomMetadata = u.CustomMetadata
		}
		rp.segs[u.SegmentID] = s
	default:
		d := rec.PartitionDelete
		if d.State == DeletePartitionFinished {
			delete(v.parts, k)
			return
		}
		rp.deleting = d.State
	}
}

// committed are k's copied segments (COPY_SEGMENT_FINISHED), by start
// offset.
func (v *metaView) committed(k partKey) []SegmentMetadata {
	return v.segments(k, func(s SegmentState) bool { return s == CopySegmentFinished })
}

// unfinished are k's segments whose copy or deletion did not finish.
func (v *metaView) unfinished(k partKey) []SegmentMetadata {
	return v.segments(k, func(s SegmentState) bool { return s == CopySegmentStarted || s == DeleteSegmentStarted })
}

// all are k's segments in every state.
func (v *metaView) all(k partKey) []SegmentMetadata {
	return v.segments(k, func(SegmentState) bool { return true })
}

func (v *metaView) segments(k partKey, keep func(SegmentState) bool) []SegmentMetadata {
	v.mu.Lock()
	var segs []SegmentMetadata
	if rp := v.parts[k]; rp != nil {
		for _, s := range rp.segs {
			if keep(s.State) {
				segs = append(segs, s)
			}
		}
	}
	v.mu.Unlock()
	slices.SortFunc(segs, func(a, b SegmentMetadata) int {
		if a.StartOffset != b.StartOffset {
			return cmp.Compare(a.StartOffset, b.StartOffset)
		}
		return cmp.Compare(a.EndOffset, b.EndOffset)
	})
	return segs
}
