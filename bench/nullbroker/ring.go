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

// appendFrom appends to dst the log's batches from the one holding offset
// on, whole, while they fit in limit bytes and end below the high
// watermark. With atLeastOne the first batch is appended even when it
// alone exceeds limit (KIP-74: the first partition of a response with data
// always gets one).
func (r *ring) appendFrom(dst []byte, offset int64, limit int, atLeastOne bool) []byte {
	written := 0
	for k := offset / r.per; k*r.per < r.end; k++ {
		b := r.batches[k%int64(len(r.batches))]
		if written+len(b) > limit && !(atLeastOne && written == 0) {
			break
		}
		at := len(dst)
		dst = append(dst, b...)
		protocol.SetBaseOffset(dst[at:], k*r.per)
		written += len(b)
	}
	return dst
}
