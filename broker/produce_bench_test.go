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
	n := startTestNode(b, nil)
	ctx := context.Background()
	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 5000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "bench", 1, 1
	create.Topics = append(create.Topics, ct)
	if resp := n.ctrl.CreateTopics(ctx, create); resp == nil || resp.Topics[0].ErrorCode != 0 {
		b.Fatalf("creating the topic: %+v", resp)
	}

	bb := protocol.NewBatchBuilder(protocol.CodecNone)
	for i := range 10 {
		bb.Add([]byte{byte(i)}, make([]byte, 100), nil, time.Now().UnixMilli())
	}
	pristine, err := bb.Build()
	if err != nil {
		b.Fatal(err)
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
	c := &conn{listener: &listener{ListenerSpec: ListenerSpec{Name: "PLAINTEXT"}}}
	produce := func() *request {
		copy(records, pristine)
		r := &request{conn: c, hdr: protocol.RequestHeader{APIKey: 0, APIVersion: 9, CorrelationID: 1}, kreq: req, slot: &slot{done: make(chan struct{}), owner: &c.held}}
		n.b.handleProduce(ctx, r)
		<-r.slot.done
		return r
	}
	errorCode := func(r *request) int16 {
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(9)
		// size, correlation id, header tags (v9 is flexible)
		if err := resp.ReadFrom(r.slot.frame[9:]); err != nil {
			b.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	// Wait until the broker leads the new partition.
	deadline := time.Now().Add(10 * time.Second)
	for errorCode(produce()) != 0 {
		if time.Now().After(deadline) {
			b.Fatal("the partition never became writable")
		}
		time.Sleep(10 * time.Millisecond)
	}
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
