package nullbroker

import (
	"errors"

	"github.com/gregorbroker/gregor/protocol"
)

// logBatches is how many batches every partition's log holds: with 128
// records a batch the high watermark is 2^39, which no benchmark reaches,
// so a consumer never waits for data.
const logBatches = 1 << 32

// ring is what every partition reads: batch k of the log (records
// [k*per, (k+1)*per)) is a copy of batches[k % len(batches)] with base
// offset k*per. Only the base offset differs, and it is outside the CRC.
type ring struct {
	batches   [][]byte // lz4 batches of per records each, base offset 0
	per       int64
	end       int64 // the high watermark of every partition
	timestamp int64 // every record's timestamp (ms)
}

// newRing builds len(payloads)/per batches (at least one), taking the
// payloads in order and wrapping around when there are fewer than per.
func newRing(payloads [][]byte, per int, timestampMs int64) (*ring, error) {
	if len(payloads) == 0 {
		return nil, errors.New("no payloads")
	}
	n := max(1, len(payloads)/per)
	r := &ring{per: int64(per), end: int64(per) * logBatches, timestamp: timestampMs}
	b := protocol.NewBatchBuilder(protocol.CodecLZ4)
	for i := 0; i < n; i++ {
		b.Reset()
		for j := 0; j < per; j++ {
			b.Add(nil, payloads[(i*per+j)%len(payloads)], nil, timestampMs)
		}
		batch, err := b.Build()
		if err != nil {
			return nil, err
		}
		protocol.SetPartitionLeaderEpoch(batch, 0)
		r.batches = append(r.batches, batch)
	}
	return r, nil
}

// batch is log batch k as built (base offset 0); the sender stamps k*per.
func (r *ring) batch(k int64) []byte { return r.batches[k%int64(len(r.batches))] }

// span picks the log's batches from the one holding offset on, whole,
// while they fit in limit bytes and lie below the high watermark: n
// batches from batch first, size bytes in all. With atLeastOne the first
// batch is taken even when it alone exceeds limit (KIP-74: the first
// partition of a response with data always gets one).
func (r *ring) span(offset int64, limit int, atLeastOne bool) (first, n int64, size int) {
	first = offset / r.per
	for k := first; k*r.per < r.end; k++ {
		b := len(r.batch(k))
		if size+b > limit && !(atLeastOne && size == 0) {
			break
		}
		size += b
		n++
	}
	return first, n, size
}
