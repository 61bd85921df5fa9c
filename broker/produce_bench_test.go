package broker

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
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
		b.Run(name, func(b *testing.B) {
			produce, errorCode := newProduceBench(b, acks)
			benchmarkProduce(b, produce, errorCode)
		})
	}
}

func benchmarkProduce(b *testing.B, produce func() *network.Request, errorCode func(*network.Request) int16) {
	b.ReportAllocs()
	b.ResetTimer()
	var last *network.Request
	for b.Loop() {
		last = produce()
	}
	b.StopTimer()
	if code := errorCode(last); code != 0 {
		b.Fatalf("the last produce failed with error %d", code)
	}
}

// BenchmarkProduceAuthorizer compares the produce path with no authorizer,
// with StandardAuthorizer and no ACLs (allow.everyone.if.no.acl.found),
// and with 10,000 ACLs of which one allows the write (acks=1).
func BenchmarkProduceAuthorizer(b *testing.B) {
	for _, bc := range []struct {
		name  string
		authz *authz.Options
		acls  int
	}{
		{"off", nil, 0},
		{"on-no-acls", &authz.Options{AllowEveryoneIfNoACLFound: true}, 0},
		{"on-10000-acls", &authz.Options{}, 10000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			produce, errorCode := newProduceBenchAuthz(b, 1, bc.authz, bc.acls)
			benchmarkProduce(b, produce, errorCode)
		})
	}
}

// The authorizer adds no allocation to a produce: with it on (no ACLs, or
// many) a produce allocates what it does with it off.
func TestProduceAuthorizerAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	const slot, response = 3, 4
	for _, tc := range []struct {
		authz *authz.Options
		acls  int
	}{{&authz.Options{AllowEveryoneIfNoACLFound: true}, 0}, {&authz.Options{}, 500}} {
		produce, errorCode := newProduceBenchAuthz(t, 1, tc.authz, tc.acls)
		var last *network.Request
		if allocs := testing.AllocsPerRun(200, func() { last = produce() }); allocs > slot+response {
			t.Fatalf("%d ACLs: %v allocations per produce, want at most %d", tc.acls, allocs, slot+response)
		}
		if code := errorCode(last); code != 0 {
			t.Fatalf("%d ACLs: the last produce failed with error %d", tc.acls, code)
		}
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
		var last *network.Request
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
func newProduceBench(tb testing.TB, acks int16) (produce func() *network.Request, errorCode func(*network.Request) int16) {
	return newProduceBenchAuthz(tb, acks, nil, 0)
}

// newProduceBenchAuthz is newProduceBench on a node with the authorizer
// (nil: none) and acls ACLs on other topics, users and hosts, plus one
// that allows the producer (User:ANONYMOUS) to write "bench" when there
// are any.
func newProduceBenchAuthz(tb testing.TB, acks int16, opts *authz.Options, acls int) (produce func() *network.Request, errorCode func(*network.Request) int16) {
	n := startAuthzNode(tb, opts, nil)
	ctx := context.Background()
	createBenchTopic(tb, n, 1)
	if acls > 0 {
		create := kmsg.NewPtrCreateACLsRequest()
		ops := []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDescribe}
		for i := range acls - 1 {
			pt := kmsg.ACLResourcePatternTypeLiteral
			if i%3 == 0 {
				pt = kmsg.ACLResourcePatternTypePrefixed
			}
			c := aclCreation(kmsg.ACLResourceTypeTopic, fmt.Sprintf("topic-%d", i/4), pt, fmt.Sprintf("User:user-%d", i%50), ops[i%3], kmsg.ACLPermissionTypeAllow)
			c.Host = fmt.Sprintf("10.0.%d.%d", i%7, i%200)
			create.Creations = append(create.Creations, c)
		}
		create.Creations = append(create.Creations, aclCreation(kmsg.ACLResourceTypeTopic, "ben", kmsg.ACLResourcePatternTypePrefixed, "User:ANONYMOUS", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow))
		for _, r := range n.ctrl.CreateACLs(ctx, create).Results {
			if r.ErrorCode != 0 {
				tb.Fatalf("creating ACLs: %d", r.ErrorCode)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for _, count := n.b.authz.Indexed(); count != acls; _, count = n.b.authz.Indexed() {
			if time.Now().After(deadline) {
				tb.Fatal("the authorizer never indexed the ACLs")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

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
	c := n.b.server.DetachedConn("PLAINTEXT", netip.MustParseAddr("127.0.0.1"))
	produce = func() *network.Request {
		copy(records, pristine)
		r := c.Request(protocol.RequestHeader{APIKey: 0, APIVersion: 9, CorrelationID: 1}, req)
		n.b.handleProduce(ctx, r)
		<-r.Answered()
		return r
	}
	errorCode = func(r *network.Request) int16 {
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(9)
		// size, correlation id, header tags (v9 is flexible)
		frame, _ := r.Answer()
		if err := resp.ReadFrom(frame[9:]); err != nil {
			tb.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	// Wait until the broker leads the new partition.
	deadline := time.Now().Add(10 * time.Second)
	for code := errorCode(produce()); code != 0; code = errorCode(produce()) {
		if time.Now().After(deadline) {
			tb.Fatalf("the partition never became writable: produce answers %v", kerr.ErrorForCode(code))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return produce, errorCode
}
