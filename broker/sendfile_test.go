package broker

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fillBatch builds a batch of 64 KiB records whose values all carry tag,
// about size bytes in all.
func fillBatch(t *testing.T, tag string, size int) []byte {
	t.Helper()
	return batchOf(t, tag, 64<<10, size, time.Now().UnixMilli())
}

// batchOf builds a batch of uncompressed records of about recordSize
// bytes whose values carry tag, about size bytes in all, timestamped ts.
func batchOf(t *testing.T, tag string, recordSize, size int, ts int64) []byte {
	t.Helper()
	b := protocol.NewBatchBuilder(protocol.CodecNone)
	value := bytes.Repeat([]byte(tag), max(1, recordSize/len(tag)))
	for n := 0; n < size; n += len(value) {
		b.Add(nil, value, nil, ts)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dialSmallWindow connects with a tiny receive buffer, so that a response
// the test does not read parks the broker's send quickly.
func dialSmallWindow(t *testing.T, addr string) *rawConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	return &rawConn{t: t, nc: nc}
}

func deleteTopic(t *testing.T, n *testNode, name string) {
	t.Helper()
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(4)
	req.TimeoutMillis = 5000
	req.TopicNames = []string{name}
	c.send(req, 1)
	resp := kmsg.NewPtrDeleteTopicsResponse()
	resp.SetVersion(4)
	c.recv(resp)
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("deleting %s: error %d", name, code)
	}
	waitFor(t, "the deleted topic's log to close", func() bool {
		_, ok := n.logs.Get(storage.TopicPartition{Topic: name, Partition: 0})
		return !ok
	})
}

// noGC turns the garbage collector off for the rest of the test: an
// *os.File that is leaked is closed by its finalizer at the next
// collection, which would hide a missing release from a descriptor count.
func noGC(t *testing.T) {
	old := debug.SetGCPercent(-1)
	t.Cleanup(func() { debug.SetGCPercent(old) })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openFilesUnder lists the process's descriptors whose target contains
// part (the partition's directory name).
func openFilesUnder(t *testing.T, part string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var out []string
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.Contains(target, part) {
			out = append(out, target)
		}
	}
	return out
}

// startParkedFetch produces about 24 MiB (32 batches of 768 KiB) to topic and starts a fetch of all
// of it on a connection that reads only the response's first bytes, so that
// the broker's send parks on a full socket. It returns the connection and
// the bytes read so far.
func startParkedFetch(t *testing.T, n *testNode, topic string) (*rawConn, []byte) {
	t.Helper()
	createTopic(t, n, topic, 1, nil)
	for i := 0; i < parkedBatches; i++ {
		b := fillBatch(t, fmt.Sprintf("%s-%02d|", topic, i), 768<<10)
		if code := produceRaw(t, n, topic, 0, b); code != 0 {
			t.Fatalf("produce: %d", code)
		}
	}
	c := dialSmallWindow(t, n.addr)
	c.send(fetchFromStart(topic, 0, 0, 64<<20), 7)
	// The start of the response: the writer has it, with its file range,
	// in hand.
	head := make([]byte, 64)
	if _, err := io.ReadFull(c.nc, head); err != nil {
		t.Fatal(err)
	}
	return c, head
}

// fetchFromStart is a sessionless Fetch v11 of partition 0 from offset 0.
func fetchFromStart(topic string, maxWaitMs, minBytes, maxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.ReplicaID = -1
	req.MaxWaitMillis = maxWaitMs
	req.MinBytes = minBytes
	req.MaxBytes = maxBytes
	req.SessionEpoch = -1
	req.Topics = []kmsg.FetchRequestTopic{{Topic: topic, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: maxBytes, CurrentLeaderEpoch: -1, LogStartOffset: -1}}}}
	return req
}

// parkedBatches is how many batches of about 1 MiB startParkedFetch
// produces: far more than the socket buffers hold.
const parkedBatches = 32

// finishParkedFetch reads the rest of the response and checks that it
// holds exactly the topic's batches, whole and with valid CRCs.
func finishParkedFetch(t *testing.T, c *rawConn, head []byte, topic string) {
	t.Helper()
	size := int(binary.BigEndian.Uint32(head))
	frame := make([]byte, 4+size)
	copy(frame, head)
	if n, err := io.ReadFull(c.nc, frame[len(head):]); err != nil {
		if bytes.Contains(frame[:len(head)+n], []byte("intruder")) {
			t.Fatalf("the fetch response carries another topic's bytes, then ends after %d of %d bytes: %v", len(head)+n, len(frame), err)
		}
		t.Fatalf("reading the rest of the fetch response (%d of %d bytes): %v", len(head)+n, len(frame), err)
	}
	if corr := binary.BigEndian.Uint32(frame[4:]); corr != 7 {
		t.Fatalf("correlation id %d", corr)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(11)
	if err := resp.ReadFrom(frame[8:]); err != nil {
		t.Fatalf("decoding the fetch response: %v", err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch error %d", p.ErrorCode)
	}
	records := p.RecordBatches
	for i := 0; i < parkedBatches; i++ {
		batch, rest, h, err := protocol.NextBatch(records)
		if err != nil || !protocol.CheckBatchCRC(batch) {
			t.Fatalf("batch %d of the response is not a whole, valid batch: %v", i, err)
		}
		if !bytes.Contains(batch, []byte(fmt.Sprintf("%s-%02d|", topic, i))) || bytes.Contains(batch, []byte("intruder")) {
			t.Fatalf("batch %d (offset %d) holds another file's bytes", i, h.BaseOffset)
		}
		records = rest
	}
	if len(records) != 0 {
		t.Fatalf("%d bytes after the topic's batches", len(records))
	}
}

// intruder is a topic whose segments roll every 8 MiB, produced to over
// one connection opened in advance: after the victim's files close, the
// next files the process opens are the intruder's new segment files, which
// then take the freed descriptor numbers, and they grow past the offset
// the parked send has reached.
type intruder struct {
	n *testNode
	c *rawConn
}

func newIntruder(t *testing.T, n *testNode) *intruder {
	t.Helper()
	createTopic(t, n, "intruder", 1, map[string]string{"segment.bytes": strconv.Itoa(8 << 20)})
	in := &intruder{n: n, c: dialRaw(t, n.addr)}
	in.produce(t, 1)
	return in
}

func (in *intruder) produce(t *testing.T, batches int) {
	t.Helper()
	for i := 0; i < batches; i++ {
		// Each request gets its own deadline: the connection's, set
		// when it was dialled, lapsed on a loaded machine before the 24
		// produces of 768 KiB were through (make test, load 7).
		in.c.nc.SetDeadline(time.Now().Add(20 * time.Second))
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks = -1
		req.TimeoutMillis = 5000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "intruder", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: fillBatch(t, "intruder|", 768<<10)}}}}
		in.c.send(req, int32(i))
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(9)
		in.c.recv(resp)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce to intruder: %d", code)
		}
	}
}

// A fetch whose send is parked on a full socket while its topic is
// deleted, and other files are opened, still sends the deleted topic's
// bytes: its range holds the segment file open, so no other file can get
// its descriptor number. Once the send ends the file is closed.
func TestParkedFetchSendsItsOwnFileAfterTopicDeletion(t *testing.T) {
	n := startTestNode(t, nil)
	in := newIntruder(t, n)
	c, head := startParkedFetch(t, n, "victim")
	noGC(t)
	deleteTopic(t, n, "victim")
	in.produce(t, 24) // rolls once, then grows the new segment to about 8 MiB
	if open := openFilesUnder(t, "victim-0"); len(open) == 0 {
		t.Error("the parked send's segment file is not held open")
	}
	finishParkedFetch(t, c, head, "victim")
	waitFor(t, "the deleted segment's descriptors to close", func() bool { return len(openFilesUnder(t, "victim-0")) == 0 })
}

// When the consumer goes away instead, the parked send fails and the
// deleted files are closed as well.
func TestDroppedConnectionReleasesDeletedSegment(t *testing.T) {
	n := startTestNode(t, nil)
	c, _ := startParkedFetch(t, n, "victim")
	noGC(t)
	deleteTopic(t, n, "victim")
	if open := openFilesUnder(t, "victim-0"); len(open) == 0 {
		t.Fatal("the parked send's segment file is not held open")
	}
	c.nc.Close()
	waitFor(t, "the deleted segment's descriptors to close", func() bool { return len(openFilesUnder(t, "victim-0")) == 0 })
}

// A long-poll fetch reads its partitions each time it wakes and drops the
// reads that are not enough yet; those reads release their files, so a
// deleted topic's segments close once the last response is sent.
func TestDiscardedFetchReadsReleaseTheirFiles(t *testing.T) {
	n := startTestNode(t, nil)
	noGC(t)
	createTopic(t, n, "polled", 1, nil)
	small := fillBatch(t, "polled|", 1<<10)
	if code := produceRaw(t, n, "polled", 0, small); code != 0 {
		t.Fatalf("produce: %d", code)
	}
	c := dialRaw(t, n.addr)
	// MinBytes is never reached: every read until the timeout is dropped.
	c.send(fetchFromStart("polled", 500, 1<<20, 1<<20), 3)
	for i := 0; i < 3; i++ { // wake the parked fetch
		if code := produceRaw(t, n, "polled", 0, small); code != 0 {
			t.Fatalf("produce: %d", code)
		}
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(11)
	c.recv(resp)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	deleteTopic(t, n, "polled")
	waitFor(t, "the deleted segment's descriptors to close", func() bool { return len(openFilesUnder(t, "polled-0")) == 0 })
}
