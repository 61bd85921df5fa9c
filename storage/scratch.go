package storage

import "sync"

// appendScratch is the working memory of one append: the producers it
// changes, its batches, the batches as stored and its transaction markers
// (and, while a log loads, the producer changes of the batches replayed).
type appendScratch struct {
	pending producerAppend
	metas   []appendedBatch
	stored  [][]byte
	markers []txnMarker
}

// scratchPool lends appends their working memory. A manager's logs share
// one, so that an idle partition holds none: a log that kept its own held
// about 500 bytes from its first append on, most of the heap of an idle
// partition that had taken a record from an idempotent producer.
type scratchPool struct{ pool sync.Pool }

func newScratchPool() *scratchPool {
	return &scratchPool{pool: sync.Pool{New: func() any { return new(appendScratch) }}}
}

func (p *scratchPool) get() *appendScratch { return p.pool.Get().(*appendScratch) }

// put returns sc, forgetting what it pointed to: the batches are the
// caller's buffers.
func (p *scratchPool) put(sc *appendScratch) {
	sc.pending.reset()
	clear(sc.stored)
	sc.metas, sc.stored, sc.markers = sc.metas[:0], sc.stored[:0], sc.markers[:0]
	p.pool.Put(sc)
}
