package tiered

import (
	"context"
	"sync"
	"testing"
)

// memLog is __remote_log_metadata in memory, shared by the managers of a
// test as the topic is shared by brokers.
type memLog struct {
	parts int32

	mu       sync.Mutex
	recs     map[int32][][]byte
	changed  chan struct{}
	inits    int
	followed map[*memReader]bool
}

func newMemLog(parts int32) *memLog {
	return &memLog{parts: parts, recs: map[int32][][]byte{}, changed: make(chan struct{}), followed: map[*memReader]bool{}}
}

// memReader is one manager's consumer of a memLog.
type memReader struct {
	*memLog
	next map[int32]int64
}

func (l *memLog) reader() *memReader { return &memReader{memLog: l, next: map[int32]int64{}} }

func (r *memReader) Partitions() int32 { return r.parts }

func (r *memReader) Init(context.Context) error {
	r.mu.Lock()
	r.inits++
	r.mu.Unlock()
	return nil
}

func (r *memReader) Append(_ context.Context, partition int32, value []byte) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs[partition] = append(r.recs[partition], value)
	close(r.changed)
	r.changed = make(chan struct{})
	return int64(len(r.recs[partition]) - 1), nil
}

func (r *memReader) EndOffsets(_ context.Context, partitions []int32) (map[int32]int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ends := map[int32]int64{}
	for _, p := range partitions {
		ends[p] = int64(len(r.recs[p]))
	}
	return ends, nil
}

func (r *memReader) Follow(partitions []int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range partitions {
		if _, ok := r.next[p]; !ok {
			r.next[p] = 0
		}
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *memReader) Poll(ctx context.Context) ([]MetadataEntry, error) {
	for {
		r.mu.Lock()
		var out []MetadataEntry
		for p, next := range r.next {
			for ; next < int64(len(r.recs[p])); next++ {
				out = append(out, MetadataEntry{Partition: p, Offset: next, Value: r.recs[p][next]})
			}
			r.next[p] = next
		}
		ch := r.changed
		r.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

func (r *memReader) Close() {}

// records decodes every record of the log, in partition then offset order.
func (l *memLog) records(t *testing.T) []MetadataRecord {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []MetadataRecord
	for p := range l.parts {
		for _, b := range l.recs[p] {
			rec, err := DecodeMetadataRecord(b)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, rec)
		}
	}
	return out
}
