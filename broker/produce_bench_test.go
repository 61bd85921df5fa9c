package broker

import (
	"context"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkProduceHandler measures the produce handler path of one
// decoded request (handler, replica layer, log append, response
// encoding), without the connection's framing and decoding. Run with
// -benchmem: allocations per request are what the hot path is judged by.
func BenchmarkProduceHandler(b *testing.B) {
	for _, acks := range []int16{1, -1} {
		name := "acks=1"
		if acks == -1 {
			name = "acks=all"
		}
		b.Run(name, func(b *testing.B) { benchmarkProduce(b, acks) })
	}
}

func benchmarkProduce(b *testing.B, acks int16) {
	produce, errorCode := newProduceBench(b, acks)
	b.ReportAllocs()
	b.ResetTimer()
	var last *request
	for b.Loop() {
		last = produce()
	}
	b.StopTimer()
	if code := errorCode(last); code != 0 {
		b.Fatalf("the last produce failed with error %d", code)
	}
}

// A produce of one batch allocates the request's slot (three, made by the
// test as a connection would) and the response (its kmsg value, topic and
// partition lists, and its frame), nothing per record.
func TestProduceHandlerAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	const slot, response = 3, 4
	for _, acks := range []int16{1, -1} {
		produce, errorCode := newProduceBench(t, acks)
		var last *request
		if allocs := testing.AllocsPerRun(200, func() { last = produce() }); allocs > slot+response {
			t.Fatalf("acks=%d: %v allocations per produce, want at most %d", acks, allocs, slot+response)
		}
		if code := errorCode(last); code != 0 {
			t.Fatalf("acks=%d: the last produce failed with error %d", acks, code)
		}
	}
}

// createBenchTopic creates the topic "bench" through the controller.
func createBenchTopic(tb testing.TB, n *testNode, partitions int32) {
	tb.Helper()
	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 5000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "bench", partitions, 1
	create.Topics = append(create.Topics, ct)
	if resp := n.ctrl.CreateTopics(context.Background(), create); resp == nil || resp.Topics[0].ErrorCode != 0 {
		tb.Fatalf("creating the topic: %+v", resp)
	}
}

// newProduceBench starts a node with a one-partition topic and returns a
// produce of a ten-record batch to it, run through the handler, and how to
// read a response's error code.
func newProduceBench(tb testing.TB, acks int16) (produce func() *request, errorCode func(*request) int16) {
	n := startTestNode(tb, nil)
	ctx := context.Background()
	createBenchTopic(tb, n, 1)

	bb := protocol.NewBatchBuilder(protocol.CodecNone)
	for i := range 10 {
		bb.Add([]byte{byte(i)}, make([]byte, 100), nil, time.Now().UnixMilli())
	}
	pristine, err := bb.Build()
	if err != nil {
		tb.Fatal(err)
	}
	// The append stamps offsets into the records in place, and a client
	// batch must come with base offset 0: every request gets a fresh copy
	// (into the same buffer, so the copy allocates nothing).
	records := make([]byte, len(pristine))
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = acks
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "bench", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: records}}}}
	c := &conn{srv: n.b.server, listener: &listener{ListenerSpec: ListenerSpec{Name: "PLAINTEXT"}}}
	produce = func() *request {
		copy(records, pristine)
		r := &request{conn: c, hdr: protocol.RequestHeader{APIKey: 0, APIVersion: 9, CorrelationID: 1}, kreq: req, slot: &slot{done: make(chan struct{}), owner: &c.held}}
		n.b.handleProduce(ctx, r)
		<-r.slot.done
		return r
	}
	errorCode = func(r *request) int16 {
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(9)
		// size, correlation id, header tags (v9 is flexible)
		if err := resp.ReadFrom(r.slot.frame[9:]); err != nil {
			tb.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	// Wait until the broker leads the new partition.
	deadline := time.Now().Add(10 * time.Second)
	for errorCode(produce()) != 0 {
		if time.Now().After(deadline) {
			tb.Fatal("the partition never became writable")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return produce, errorCode
}
