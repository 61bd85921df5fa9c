package broker

// Fetch response encoding with zero-copy records.
//
// kmsg would need the records in memory; instead the response body is
// written as a list of chunks in which each partition's records are a
// segment file range, which the connection's writer copies into its
// buffer when it is small and sends with sendfile otherwise. The
// layout follows FetchResponse v4-v18 (flexible from v12); the encoder is
// tested against kmsg's decoder for every version.

import (
	"encoding/binary"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/replica"
	"github.com/gregorbroker/gregor/vfs"
)

// fetchPartitionResult is one partition of a fetch response.
type fetchPartitionResult struct {
	partition        int32
	errorCode        int16
	highWatermark    int64
	lastStableOffset int64
	logStartOffset   int64
	// abortedTxns is nil for read_uncommitted (encoded as null unless
	// abortedTxnsNonNull: read_committed answers an empty list).
	abortedTxns          []replica.AbortedTransaction
	abortedTxnsNonNull   bool
	preferredReadReplica int32
	records              vfs.FileRange
	// Tagged fields (v12+); -1 means absent.
	divergingEpoch     int32
	divergingEndOffset int64
	currentLeaderID    int32
	currentLeaderEpoch int32
}

func newFetchPartitionResult(partition int32) fetchPartitionResult {
	return fetchPartitionResult{
		partition:            partition,
		highWatermark:        -1,
		lastStableOffset:     -1,
		logStartOffset:       -1,
		preferredReadReplica: -1,
		divergingEpoch:       -1,
		divergingEndOffset:   -1,
		currentLeaderID:      -1,
		currentLeaderEpoch:   -1,
	}
}

type fetchTopicResult struct {
	name       string
	id         [16]byte
	partitions []fetchPartitionResult
}

type nodeEndpoint struct {
	nodeID int32
	host   string
	port   int32
	rack   *string
}

type fetchResponseBody struct {
	throttleMillis int32
	errorCode      int16
	sessionID      int32
	topics         []fetchTopicResult
	nodeEndpoints  []nodeEndpoint
}

// chunkWriter accumulates bytes and file ranges: every byte goes into one
// buffer, and each file range marks where in it the range is sent, so that
// a response costs one buffer whatever the number of its ranges.
type chunkWriter struct {
	buf   []byte
	files []fileMark
}

// fileMark is a file range sent after the first at bytes of the buffer.
type fileMark struct {
	at   int
	file vfs.FileRange
}

func (w *chunkWriter) file(fr vfs.FileRange) {
	w.files = append(w.files, fileMark{at: len(w.buf), file: fr})
}

// chunks is the response in send order: the buffer cut at each file range.
func (w *chunkWriter) chunks() []network.Chunk {
	out := make([]network.Chunk, 0, 2*len(w.files)+1)
	start := 0
	for _, m := range w.files {
		if m.at > start {
			out = append(out, network.Chunk{Bytes: w.buf[start:m.at:m.at]})
		}
		out = append(out, network.Chunk{File: m.file})
		start = m.at
	}
	if len(w.buf) > start {
		out = append(out, network.Chunk{Bytes: w.buf[start:]})
	}
	return out
}

func (w *chunkWriter) i16(v int16) { w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(v)) }
func (w *chunkWriter) i32(v int32) { w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(v)) }
func (w *chunkWriter) i64(v int64) { w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(v)) }
func (w *chunkWriter) uvarint(v uint64) {
	w.buf = binary.AppendUvarint(w.buf, v)
}

// arrayLen writes an array length (compact when flexible).
func (w *chunkWriter) arrayLen(n int, flexible bool) {
	if flexible {
		w.uvarint(uint64(n) + 1)
	} else {
		w.i32(int32(n))
	}
}

func (w *chunkWriter) nullArray(flexible bool) {
	if flexible {
		w.uvarint(0)
	} else {
		w.i32(-1)
	}
}

func (w *chunkWriter) str(s string, flexible bool) {
	if flexible {
		w.uvarint(uint64(len(s)) + 1)
	} else {
		w.i16(int16(len(s)))
	}
	w.buf = append(w.buf, s...)
}

func (w *chunkWriter) nullableStr(s *string, flexible bool) {
	if s == nil {
		if flexible {
			w.uvarint(0)
		} else {
			w.i16(-1)
		}
		return
	}
	w.str(*s, flexible)
}

// encodeFetchResponse encodes the body of a FetchResponse at version,
// after room bytes left for the frame's size prefix and response header
// (Request.RespondChunks fills them in).
func encodeFetchResponse(r *fetchResponseBody, version int16, room int) []network.Chunk {
	flex := version >= 12
	w := &chunkWriter{buf: make([]byte, room, 256)}
	if n := countFetchPartitions(r); n > 0 {
		w.files = make([]fileMark, 0, n)
	}
	w.i32(r.throttleMillis)
	if version >= 7 {
		w.i16(r.errorCode)
		w.i32(r.sessionID)
	}
	w.arrayLen(len(r.topics), flex)
	for i := range r.topics {
		t := &r.topics[i]
		if version >= 13 {
			w.buf = append(w.buf, t.id[:]...)
		} else {
			w.str(t.name, flex)
		}
		w.arrayLen(len(t.partitions), flex)
		for j := range t.partitions {
			encodeFetchPartition(w, &t.partitions[j], version, flex)
		}
		if flex {
			w.uvarint(0) // topic tags
		}
	}
	if flex {
		if version >= 16 && len(r.nodeEndpoints) > 0 {
			w.uvarint(1)
			w.uvarint(0) // tag 0: NodeEndpoints
			inner := &chunkWriter{}
			inner.arrayLen(len(r.nodeEndpoints), true)
			for _, n := range r.nodeEndpoints {
				inner.i32(n.nodeID)
				inner.str(n.host, true)
				inner.i32(n.port)
				inner.nullableStr(n.rack, true)
				inner.uvarint(0)
			}
			w.uvarint(uint64(len(inner.buf)))
			w.buf = append(w.buf, inner.buf...)
		} else {
			w.uvarint(0)
		}
	}
	return w.chunks()
}

// countFetchPartitions is how many partitions the response carries records
// for.
func countFetchPartitions(r *fetchResponseBody) int {
	n := 0
	for i := range r.topics {
		for j := range r.topics[i].partitions {
			if r.topics[i].partitions[j].records.Size > 0 {
				n++
			}
		}
	}
	return n
}

func encodeFetchPartition(w *chunkWriter, p *fetchPartitionResult, version int16, flex bool) {
	w.i32(p.partition)
	w.i16(p.errorCode)
	w.i64(p.highWatermark)
	w.i64(p.lastStableOffset)
	if version >= 5 {
		w.i64(p.logStartOffset)
	}
	if p.abortedTxns == nil && !p.abortedTxnsNonNull {
		w.nullArray(flex)
	} else {
		w.arrayLen(len(p.abortedTxns), flex)
		for _, a := range p.abortedTxns {
			w.i64(a.ProducerID)
			w.i64(a.FirstOffset)
			if flex {
				w.uvarint(0)
			}
		}
	}
	if version >= 11 {
		w.i32(p.preferredReadReplica)
	}
	size := p.records.Size
	if flex {
		w.uvarint(uint64(size) + 1)
	} else {
		w.i32(int32(size))
	}
	if size > 0 {
		w.file(p.records)
	}
	if !flex {
		return
	}
	var tags int
	hasDiverging := p.divergingEpoch != -1 || p.divergingEndOffset != -1
	hasLeader := p.currentLeaderID != -1 || p.currentLeaderEpoch != -1
	if hasDiverging {
		tags++
	}
	if hasLeader {
		tags++
	}
	w.uvarint(uint64(tags))
	if hasDiverging {
		w.uvarint(0)
		w.uvarint(4 + 8 + 1)
		w.i32(p.divergingEpoch)
		w.i64(p.divergingEndOffset)
		w.uvarint(0)
	}
	if hasLeader {
		w.uvarint(1)
		w.uvarint(4 + 4 + 1)
		w.i32(p.currentLeaderID)
		w.i32(p.currentLeaderEpoch)
		w.uvarint(0)
	}
}
