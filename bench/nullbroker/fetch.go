package nullbroker

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchTopicIDsFrom is the version from which Fetch names topics by id.
const fetchTopicIDsFrom = 13

// fetch answers from the ring without copying a batch: the response is
// encoded here rather than by kmsg, so that each batch goes to the wire
// straight from the ring, behind its own 8-byte base offset (the one field
// that differs, and it is outside the CRC). Fields follow FetchResponse
// v4-v18 as kmsg encodes it; no fetch session is ever created (session id
// 0), so clients keep sending full fetches. Returns nil: it writes the
// response itself.
func (c *conn) fetch(kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.FetchRequest)
	v, r := req.Version, c.srv.ring
	e := fetchEncoder{p: &c.out, flexible: v >= 12}
	budget := int(req.MaxBytes)
	if budget <= 0 {
		budget = math.MaxInt32
	}
	sent, failed := false, false

	start := e.beginFrame(c.corr)
	e.i32(0) // throttle
	if v >= 7 {
		e.i16(0) // error
		e.i32(0) // session id
	}
	e.arrayLen(len(req.Topics))
	for _, rt := range req.Topics {
		t := c.srv.topics.lookup(v, fetchTopicIDsFrom, rt.Topic, rt.TopicID)
		if v >= fetchTopicIDsFrom {
			e.p.buf = append(e.p.buf, rt.TopicID[:]...)
		} else {
			e.str(rt.Topic)
		}
		e.arrayLen(len(rt.Partitions))
		for _, rp := range rt.Partitions {
			var code int16
			switch {
			case t == nil:
				code = unknownTopic(v, fetchTopicIDsFrom)
			case !t.has(rp.Partition):
				code = kerr.UnknownTopicOrPartition.Code
			case rp.FetchOffset < 0 || rp.FetchOffset > r.end:
				code = kerr.OffsetOutOfRange.Code
			}
			e.i32(rp.Partition)
			e.i16(code)
			if code != 0 {
				failed = true
				e.i64(-1) // high watermark
				e.i64(-1) // last stable offset
				if v >= 5 {
					e.i64(-1) // log start offset
				}
				e.partitionTail(v, r, 0, 0, 0)
				continue
			}
			e.i64(r.end)
			e.i64(r.end)
			if v >= 5 {
				e.i64(0)
			}
			first, n, size := r.span(rp.FetchOffset, min(int(rp.PartitionMaxBytes), budget), !sent)
			budget -= size
			sent = sent || n > 0
			e.partitionTail(v, r, first, n, size)
		}
		if e.flexible {
			e.p.buf = append(e.p.buf, 0) // topic tags
		}
	}
	if e.flexible {
		e.p.buf = append(e.p.buf, 0) // response tags
	}
	e.endFrame(start)
	// Only a fetch wholly at the high watermark can get here without
	// data; it waits as a long poll would rather than spin the client.
	if !sent && !failed && req.MaxWaitMillis > 0 {
		c.wait(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	}
	return nil
}

// fetchEncoder appends one Fetch response to a pending output.
type fetchEncoder struct {
	p        *pending
	flexible bool
	ext0     int // p.ext when the frame began
}

func (e *fetchEncoder) beginFrame(corr int32) int {
	start := len(e.p.buf)
	e.ext0 = e.p.ext
	e.p.buf = binary.BigEndian.AppendUint32(e.p.buf, 0) // size, set by endFrame
	e.i32(corr)
	if e.flexible {
		e.p.buf = append(e.p.buf, 0) // header tags
	}
	return start
}

func (e *fetchEncoder) endFrame(start int) {
	size := len(e.p.buf) - start - 4 + e.p.ext - e.ext0
	binary.BigEndian.PutUint32(e.p.buf[start:], uint32(size))
}

func (e *fetchEncoder) i16(x int16) { e.p.buf = binary.BigEndian.AppendUint16(e.p.buf, uint16(x)) }
func (e *fetchEncoder) i32(x int32) { e.p.buf = binary.BigEndian.AppendUint32(e.p.buf, uint32(x)) }
func (e *fetchEncoder) i64(x int64) { e.p.buf = binary.BigEndian.AppendUint64(e.p.buf, uint64(x)) }

// arrayLen and bytesLen are compact (length+1 as a uvarint) in flexible
// versions.
func (e *fetchEncoder) arrayLen(n int) {
	if e.flexible {
		e.p.buf = binary.AppendUvarint(e.p.buf, uint64(n)+1)
	} else {
		e.i32(int32(n))
	}
}

func (e *fetchEncoder) bytesLen(n int) { e.arrayLen(n) }

func (e *fetchEncoder) str(s string) {
	if e.flexible {
		e.p.buf = binary.AppendUvarint(e.p.buf, uint64(len(s))+1)
	} else {
		e.i16(int16(len(s)))
	}
	e.p.buf = append(e.p.buf, s...)
}

// partitionTail writes what follows a partition's offsets: no aborted
// transactions (null), no preferred read replica, then n log batches from
// batch first (size bytes), then no tagged fields.
func (e *fetchEncoder) partitionTail(v int16, r *ring, first, n int64, size int) {
	if e.flexible {
		e.p.buf = append(e.p.buf, 0) // null array
	} else {
		e.i32(-1)
	}
	if v >= 11 {
		e.i32(-1)
	}
	e.bytesLen(size)
	for k := first; k < first+n; k++ {
		e.i64(k * r.per)
		e.p.external(r.batch(k)[8:])
	}
	if e.flexible {
		e.p.buf = append(e.p.buf, 0) // partition tags
	}
}
