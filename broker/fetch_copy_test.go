package broker

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// smallBatch is a batch of 900-byte records carrying tag, about size bytes
// in all, with a fixed timestamp so that two nodes store the same bytes.
func smallBatch(t *testing.T, tag string, size int) []byte {
	t.Helper()
	return batchOf(t, tag, 900, size, 1_700_000_000_000)
}

// recvFrame reads one whole response frame (without its size prefix).
func (c *rawConn) recvFrame() []byte {
	c.t.Helper()
	frame, err := protocol.ReadFrame(c.br, 1<<30, nil)
	if err != nil {
		c.t.Fatalf("reading response: %v", err)
	}
	return frame
}

// copyTopicBatches are what each partition of the topic holds: ranges
// below the copy limit, one above it (sent with sendfile either way), an
// empty partition, and enough small ranges that one response outgrows the
// connection's write buffer.
func copyTopicBatches(t *testing.T) [][][]byte {
	t.Helper()
	var parts [][][]byte
	parts = append(parts, [][]byte{smallBatch(t, "p0a|", 1<<10), smallBatch(t, "p0b|", 3<<10), smallBatch(t, "p0c|", 8<<10)})
	parts = append(parts, [][]byte{smallBatch(t, "p1|", 40<<10)})
	parts = append(parts, nil)
	for p := 3; p < 8; p++ {
		parts = append(parts, [][]byte{smallBatch(t, fmt.Sprintf("p%d|", p), 14<<10)})
	}
	copied := 0
	for p, batches := range parts {
		size := len(bytes.Join(batches, nil))
		if small := size <= network.DefaultCopyRangeMax; small != (p != 1) {
			t.Fatalf("partition %d holds %d bytes: the test means it to be copied unless it is partition 1", p, size)
		}
		if p != 1 {
			copied += size
		}
	}
	if copied <= network.WriteBufferSize {
		t.Fatalf("the copied ranges (%d bytes) fit the write buffer: the test means them not to", copied)
	}
	return parts
}

// fetchAll fetches every partition of topic from offset 0.
func fetchAll(v int16, topic string, id [16]byte, partitions int, sessionID, epoch int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(v)
	req.ReplicaID = -1
	req.MaxBytes = 64 << 20
	req.SessionID, req.SessionEpoch = sessionID, epoch
	rt := kmsg.FetchRequestTopic{Topic: topic, TopicID: id}
	if epoch <= 0 { // an incremental fetch names only what changed: nothing
		for p := range partitions {
			rt.Partitions = append(rt.Partitions, kmsg.FetchRequestTopicPartition{Partition: int32(p), PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1})
		}
		req.Topics = []kmsg.FetchRequestTopic{rt}
	}
	return req
}

// copyNode is one of the two nodes the test compares.
type copyNode struct {
	n  *testNode
	c  *rawConn
	id [16]byte
}

// A fetch response whose small ranges are copied into the connection's
// write buffer is, byte for byte, the response that sends every range with
// sendfile: for every Fetch version, without a session and with one (its
// full and its incremental answers). The two nodes hold the same batches;
// only what each node chose itself (the topic ID, a new session's ID) is
// evened out before comparing.
func TestFetchCopiedRangesMatchSendfile(t *testing.T) {
	parts := copyTopicBatches(t)
	var nodes [2]copyNode
	for i, copyMax := range []int64{0, -1} { // the default, and sendfile only
		n := startTestNodeWithServer(t, nil, 1, func(o *network.ServerOptions) { o.CopyRangeMax = copyMax })
		createTopic(t, n, "ranges", int32(len(parts)), nil)
		for p, batches := range parts {
			for _, b := range batches {
				if code := produceRaw(t, n, "ranges", int32(p), bytes.Clone(b)); code != 0 {
					t.Fatalf("produce to partition %d: %d", p, code)
				}
			}
		}
		nodes[i] = copyNode{n: n, c: dialRaw(t, n.addr), id: topicIn(t, metadataFor(t, n, "ranges"), "ranges").TopicID}
	}
	// The bytes each answer carries, as the client receives them.
	exchange := func(req *kmsg.FetchRequest, corr int32) [2][]byte {
		var out [2][]byte
		for i := range nodes {
			r := *req
			r.Topics = nil
			for _, rt := range req.Topics {
				rt.TopicID = nodes[i].id
				r.Topics = append(r.Topics, rt)
			}
			nodes[i].c.send(&r, corr)
			out[i] = nodes[i].c.recvFrame()
		}
		// Even out the topic ID.
		out[1] = bytes.ReplaceAll(out[1], nodes[1].id[:], nodes[0].id[:])
		return out
	}
	// sessionAt is where the session ID sits in a frame of version v:
	// after the correlation id, the header's tags (flexible versions),
	// the throttle time and the error code.
	sessionAt := func(v int16) int {
		if v >= 12 {
			return 4 + 1 + 4 + 2
		}
		return 4 + 4 + 2
	}
	check := func(what string, v int16, got [2][]byte, partitions int) {
		t.Helper()
		if !bytes.Equal(got[0], got[1]) {
			at := 0
			for at < min(len(got[0]), len(got[1])) && got[0][at] == got[1][at] {
				at++
			}
			t.Fatalf("v%d %s: the copying node's answer (%d bytes) differs from the sendfile node's (%d bytes) from byte %d", v, what, len(got[0]), len(got[1]), at)
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(v)
		body := got[0][4:]
		if v >= 12 {
			body = body[1:]
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("v%d %s: %v", v, what, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != partitions {
			t.Fatalf("v%d %s: %+v, want one topic with %d partitions", v, what, resp.Topics, partitions)
		}
		for _, rp := range resp.Topics[0].Partitions {
			if want := bytes.Join(parts[rp.Partition], nil); rp.ErrorCode != 0 || len(rp.RecordBatches) != len(want) {
				t.Fatalf("v%d %s: partition %d: error %d, %d bytes of records, want %d", v, what, rp.Partition, rp.ErrorCode, len(rp.RecordBatches), len(want))
			}
		}
	}
	corr := int32(0)
	for v := int16(4); v <= 18; v++ {
		corr++
		check("sessionless", v, exchange(fetchAll(v, "ranges", [16]byte{}, len(parts), 0, -1), corr), len(parts))
		if v < 7 {
			continue
		}
		corr++
		full := exchange(fetchAll(v, "ranges", [16]byte{}, len(parts), 0, 0), corr)
		at := sessionAt(v)
		var ids [2]int32
		for i := range full {
			ids[i] = int32(binary.BigEndian.Uint32(full[i][at:]))
			if ids[i] == 0 {
				t.Fatalf("v%d: node %d created no session", v, i)
			}
			binary.BigEndian.PutUint32(full[i][at:], 0)
		}
		check("session, full", v, full, len(parts))
		// The same incremental fetch on each node's session: every
		// partition with records is in the answer again, the empty one
		// is not (nothing changed).
		corr++
		var incr [2][]byte
		for i := range nodes {
			nodes[i].c.send(fetchAll(v, "ranges", nodes[i].id, len(parts), ids[i], 1), corr)
			incr[i] = nodes[i].c.recvFrame()
			binary.BigEndian.PutUint32(incr[i][at:], 0)
		}
		incr[1] = bytes.ReplaceAll(incr[1], nodes[1].id[:], nodes[0].id[:])
		check("session, incremental", v, incr, len(parts)-1)
	}
}

// A small range queued behind a send that is parked on a full socket is
// copied from its own file when its turn comes, though its topic was
// deleted meanwhile and other files took the freed descriptor numbers;
// once sent, the deleted file closes.
func TestQueuedCopiedRangeReadsItsOwnFileAfterTopicDeletion(t *testing.T) {
	n := startTestNode(t, nil)
	in := newIntruder(t, n)
	createTopic(t, n, "smallvictim", 1, nil)
	c, head := startParkedFetch(t, n, "victim")
	noGC(t)
	// A long-poll fetch behind the parked one, on the same connection:
	// it waits in the purgatory until the produce below completes it,
	// which hands its slot the range before the produce is answered.
	wait := fetchFromStart("smallvictim", 10_000, 1, 1<<20)
	c.send(wait, 8)
	waitFor(t, "the fetch to wait in the purgatory", func() bool { return n.b.replicas.DelayedFetches() == 1 })
	small := smallBatch(t, "smallvictim|", 4<<10)
	if code := produceRaw(t, n, "smallvictim", 0, bytes.Clone(small)); code != 0 {
		t.Fatalf("produce: %d", code)
	}
	deleteTopic(t, n, "smallvictim")
	in.produce(t, 24) // new segment files take the freed descriptor numbers
	if open := openFilesUnder(t, "smallvictim-0"); len(open) == 0 {
		t.Error("the queued response's segment file is not held open")
	}
	finishParkedFetch(t, c, head, "victim")
	c.br = bufio.NewReader(c.nc) // finishParkedFetch read exactly its response
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(11)
	if corr := c.recv(resp); corr != 8 {
		t.Fatalf("correlation id %d, want 8", corr)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || !bytes.Equal(p.RecordBatches[61:], small[61:]) {
		t.Fatalf("the queued fetch: error %d, %d bytes of records; want the deleted topic's batch (%d bytes)", p.ErrorCode, len(p.RecordBatches), len(small))
	}
	waitFor(t, "the deleted segment's descriptors to close", func() bool { return len(openFilesUnder(t, "smallvictim-0")) == 0 })
}
