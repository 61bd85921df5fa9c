// Package runtimetest has what the tests of the coordinators on the
// coordinator runtime share: an in-memory partition log.
package runtimetest

import (
	"context"
	"sync"

	"github.com/gregorbroker/gregor/protocol"
)

// MemLog is an in-memory runtime.PartitionLog: appends are committed at
// once and numbered from 0; Fail makes the appends fail until cleared.
type MemLog struct {
	mu      sync.Mutex
	batches [][]byte
	next    int64
	fail    error
}

// Append stores a copy of batch at the log's end.
func (l *MemLog) Append(ctx context.Context, batch []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return 0, l.fail
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	h, err := protocol.ParseBatchHeader(batch)
	if err != nil {
		return 0, err
	}
	b := append([]byte(nil), batch...)
	base := l.next
	protocol.SetBaseOffset(b, base)
	l.next += int64(h.LastOffsetDelta) + 1
	l.batches = append(l.batches, b)
	return base, nil
}

// ReadFrom calls fn for each batch that ends at or after offset.
func (l *MemLog) ReadFrom(ctx context.Context, offset int64, fn func([]byte) error) error {
	l.mu.Lock()
	batches := append([][]byte(nil), l.batches...)
	l.mu.Unlock()
	for _, b := range batches {
		h, _ := protocol.ParseBatchHeader(b)
		if h.LastOffset() < offset {
			continue
		}
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

// Fail makes every append fail with err (nil: succeed again).
func (l *MemLog) Fail(err error) {
	l.mu.Lock()
	l.fail = err
	l.mu.Unlock()
}

// DeleteBelow drops the batches that end below offset.
func (l *MemLog) DeleteBelow(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	kept := l.batches[:0]
	for _, b := range l.batches {
		if h, _ := protocol.ParseBatchHeader(b); h.LastOffset() >= offset {
			kept = append(kept, b)
		}
	}
	l.batches = kept
	return nil
}

// Len is how many batches the log holds.
func (l *MemLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.batches)
}
