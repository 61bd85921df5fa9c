package broker

import (
	"context"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkFetchHandler measures the fetch handler path of one decoded
// request that finds records at once (handler, fetch session, replica
// layer, log read, response encoding), without the connection's framing,
// decoding and sending. Run with -benchmem: allocations per request are
// what the hot path is judged by.
func BenchmarkFetchHandler(b *testing.B) {
	for _, tc := range []struct {
		name    string
		session bool
	}{{"sessionless", false}, {"incremental", true}} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFetchBench(b, tc.session)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				f.fetch(b)
			}
		})
	}
}

// fetchBench is a node with a 4-partition topic holding one small batch in
// each partition, and a fetch of all four from offset 0.
type fetchBench struct {
	n   *testNode
	c   *network.Conn
	req *kmsg.FetchRequest
}

func newFetchBench(tb testing.TB, session bool) *fetchBench {
	n := startTestNode(tb, nil)
	ctx := context.Background()
	createBenchTopic(tb, n, 4)
	bb := protocol.NewBatchBuilder(protocol.CodecNone)
	bb.Add(nil, make([]byte, 1000), nil, time.Now().UnixMilli())
	batch, err := bb.Build()
	if err != nil {
		tb.Fatal(err)
	}
	f := &fetchBench{n: n, c: n.b.server.DetachedConn("PLAINTEXT", netip.MustParseAddr("127.0.0.1"))}
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(9)
	produce.Acks = -1
	produce.TimeoutMillis = 5000
	for p := range int32(4) {
		produce.Topics = []kmsg.ProduceRequestTopic{{Topic: "bench", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: p, Records: append([]byte(nil), batch...)}}}}
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := f.request(0, 9, produce)
			n.b.handleProduce(ctx, r)
			<-r.Answered()
			frame, _ := r.Answer()
			resp := kmsg.NewPtrProduceResponse()
			resp.SetVersion(9)
			if err := resp.ReadFrom(frame[9:]); err != nil {
				tb.Fatal(err)
			}
			if resp.Topics[0].Partitions[0].ErrorCode == 0 {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("the partition never became writable: produce answers %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	id := n.b.meta.Image().Topic("bench").ID
	f.req = kmsg.NewPtrFetchRequest()
	f.req.SetVersion(15)
	f.req.ReplicaID = -1
	f.req.MaxWaitMillis = 500
	f.req.MinBytes = 1
	f.req.MaxBytes = 50 << 20
	f.req.SessionEpoch = -1
	rt := kmsg.FetchRequestTopic{Topic: "bench", TopicID: id}
	for p := range int32(4) {
		rt.Partitions = append(rt.Partitions, kmsg.FetchRequestTopicPartition{Partition: p, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1})
	}
	f.req.Topics = []kmsg.FetchRequestTopic{rt}
	if session {
		// Open the session; from then on every fetch is incremental,
		// names no partition, and finds the same records again.
		f.req.SessionEpoch = 0
		r := f.fetch(tb)
		// After the header, the throttle time and the error code.
		_, chunks := r.Answer()
		f.req.SessionID = int32(binary.BigEndian.Uint32(chunks[0].Bytes[protocol.ResponseHeaderSize(true)+6:]))
		f.req.SessionEpoch = 1
		f.req.Topics = nil
	}
	return f
}

func (f *fetchBench) request(key int16, version int16, kreq kmsg.Request) *network.Request {
	return f.c.Request(protocol.RequestHeader{APIKey: key, APIVersion: version, CorrelationID: 1, Flexible: version >= 12}, kreq)
}

// fetch runs one fetch and checks that it carried records.
func (f *fetchBench) fetch(tb testing.TB) *network.Request {
	r := f.request(1, 15, f.req)
	f.n.b.handleFetch(context.Background(), r)
	<-r.Answered()
	_, chunks := r.Answer()
	var records int64
	for _, ch := range chunks {
		records += ch.File.Size
	}
	network.ReleaseChunks(chunks)
	if records == 0 {
		tb.Fatal("the fetch found no records")
	}
	if f.req.SessionEpoch > 0 {
		f.req.SessionEpoch++
	}
	return r
}

// A fetch that finds records at once allocates a fixed handful of objects
// whatever it reads: the request's slot (three, made by the test as a
// connection would), the fetch's state, entries and results, the
// response's buffer, its file marks and its chunk list, the items of an
// incremental fetch, and one reference per file range.
func TestFetchHandlerAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	const slot, ranges = 3, 4
	for _, tc := range []struct {
		name    string
		session bool
		handler float64
	}{{"sessionless", false, 7}, {"incremental", true, 8}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFetchBench(t, tc.session)
			if allocs := testing.AllocsPerRun(200, func() { f.fetch(t) }); allocs > slot+ranges+tc.handler {
				t.Fatalf("%v allocations per fetch, want at most %v", allocs, slot+ranges+tc.handler)
			}
		})
	}
}

// BenchmarkFetchIdlePartitions measures what a fetch costs the leader per
// partition with nothing to read: an incremental fetch naming no partition
// in a session of 1,000 empty ones, answered at once (MaxWait 0), as a
// follower's or consumer's fetch of idle partitions is twice a second.
// ns/op over 1,000 is the cost of one idle partition in one fetch.
func BenchmarkFetchIdlePartitions(b *testing.B) {
	const partitions = 1000
	n := startTestNode(b, nil)
	createBenchTopic(b, n, partitions)
	f := &fetchBench{n: n, c: n.b.server.DetachedConn("PLAINTEXT", netip.MustParseAddr("127.0.0.1"))}
	deadline := time.Now().Add(30 * time.Second)
	for n.b.meta.Image().Topic("bench") == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	id := n.b.meta.Image().Topic("bench").ID
	f.req = kmsg.NewPtrFetchRequest()
	f.req.SetVersion(15)
	f.req.ReplicaID = -1
	f.req.MaxBytes = 50 << 20
	f.req.MaxWaitMillis = 0 // answered at once, with nothing
	rt := kmsg.FetchRequestTopic{Topic: "bench", TopicID: id}
	for p := range int32(partitions) {
		rt.Partitions = append(rt.Partitions, kmsg.FetchRequestTopicPartition{Partition: p, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1})
	}
	f.req.Topics = []kmsg.FetchRequestTopic{rt}
	idle := func() *network.Request {
		r := f.request(1, 15, f.req)
		n.b.handleFetch(context.Background(), r)
		<-r.Answered()
		return r
	}
	// Open the session, then fetch until an answer names no partition:
	// every partition serves and the session has told the client all
	// there is (an error is news, answered every time).
	f.req.SessionID, f.req.SessionEpoch = 0, 0
	r := idle()
	_, chunks := r.Answer()
	f.req.SessionID = int32(binary.BigEndian.Uint32(chunks[0].Bytes[protocol.ResponseHeaderSize(true)+6:]))
	network.ReleaseChunks(chunks)
	f.req.SessionEpoch = 1
	f.req.Topics = nil
	for {
		r := idle()
		_, chunks := r.Answer()
		size := 0
		for _, ch := range chunks {
			size += len(ch.Bytes)
		}
		network.ReleaseChunks(chunks)
		f.req.SessionEpoch++
		if size < 64 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("incremental answers still carry partitions (%d bytes)", size)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if sessions, held := n.b.sessions.counts(); sessions != 1 || held != partitions {
		b.Fatalf("%d sessions holding %d partitions, want 1 holding %d", sessions, held, partitions)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := idle()
		_, chunks := r.Answer()
		network.ReleaseChunks(chunks)
		f.req.SessionEpoch++
	}
}
