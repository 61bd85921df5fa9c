package broker

import (
	"context"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/broker/quota"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// setClientQuota sets quota keys on client id "test" (rawConn's) and
// waits until the broker enforces them.
func setClientQuota(t *testing.T, n *testNode, values map[string]float64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrAlterClientQuotasRequest()
	e := kmsg.NewAlterClientQuotasRequestEntry()
	name := "test"
	e.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "client-id", Name: &name}}
	for k, v := range values {
		e.Ops = append(e.Ops, kmsg.AlterClientQuotasRequestEntryOp{Key: k, Value: v})
	}
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{e}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Entries[0].ErrorCode != 0 {
		t.Fatalf("altering quotas: %v %+v", err, resp)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !n.b.quotas.Active() {
		if time.Now().After(deadline) {
			t.Fatal("the broker never took the quota")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestThrottledProduceMutesConnection: a produce above the client's
// producer_byte_rate is answered at once with throttle_time_ms, and the
// connection handles nothing more until that time has passed; another
// connection is not held up.
func TestThrottledProduceMutesConnection(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "throttled", 1, nil)
	setClientQuota(t, n, map[string]float64{"producer_byte_rate": 1000})
	bb := protocol.NewBatchBuilder(protocol.CodecNone)
	for i := 0; i < 20; i++ {
		bb.Add(nil, make([]byte, 1000), nil, time.Now().UnixMilli())
	}
	batch, err := bb.Build()
	if err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = 1
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "throttled", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch}}}}
	sent := time.Now()
	c.send(req, 1)
	// The metadata request is read at once but must wait for the
	// throttle.
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9)
	c.send(meta, 2)
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(9)
	c.recv(resp)
	answered := time.Since(sent)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce error %d", code)
	}
	// ~20 KB against 1000 B/s over a 10 s window: about 10 s.
	throttle := time.Duration(resp.ThrottleMillis) * time.Millisecond
	if throttle < 5*time.Second || throttle > 15*time.Second {
		t.Fatalf("throttle_time_ms %d, want about 10 s", resp.ThrottleMillis)
	}
	if answered > 2*time.Second {
		t.Fatalf("the throttled produce was answered after %v, not at once", answered)
	}
	// Meanwhile another connection is served at once.
	other := dialRaw(t, n.addr)
	other.send(meta, 7)
	start := time.Now()
	oresp := kmsg.NewPtrMetadataResponse()
	oresp.SetVersion(9)
	other.recv(oresp)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("another connection waited %v", d)
	}
	c.nc.SetDeadline(time.Now().Add(throttle + 10*time.Second))
	mresp := kmsg.NewPtrMetadataResponse()
	mresp.SetVersion(9)
	if corr := c.recv(mresp); corr != 2 {
		t.Fatalf("correlation %d", corr)
	}
	if waited := time.Since(sent); waited < throttle-100*time.Millisecond {
		t.Fatalf("the next request was answered after %v, before the %v throttle ended", waited, throttle)
	}
}

// TestThrottledFetchIsEmpty: a consumer fetch whose response would take
// the client above consumer_byte_rate gets an empty answer with the
// throttle time, and its bytes are not counted; its max bytes are capped
// to what the quota lets through in one window.
func TestThrottledFetchIsEmpty(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "fetchq", 1, nil)
	for i := 0; i < 3; i++ {
		bb := protocol.NewBatchBuilder(protocol.CodecNone)
		bb.Add(nil, make([]byte, 6000), nil, time.Now().UnixMilli())
		batch, err := bb.Build()
		if err != nil {
			t.Fatal(err)
		}
		if code := produceRaw(t, n, "fetchq", 0, batch); code != 0 {
			t.Fatalf("produce error %d", code)
		}
	}
	// 1000 B/s: at most 10000 bytes in one go.
	setClientQuota(t, n, map[string]float64{"consumer_byte_rate": 1000})
	c := dialRaw(t, n.addr)
	fetch := func(corr int32) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID = -1
		req.MaxBytes = 1 << 20
		req.SessionEpoch = -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "fetchq"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = []kmsg.FetchRequestTopicPartition{fp}
		req.Topics = []kmsg.FetchRequestTopic{ft}
		c.send(req, corr)
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(12)
		c.recv(resp)
		return resp
	}
	first := fetch(1)
	if first.ErrorCode != 0 || len(first.Topics) != 1 {
		t.Fatalf("first fetch %+v", first)
	}
	records := len(first.Topics[0].Partitions[0].RecordBatches)
	// The cap lets one 6 KB batch through (KIP-74 sends the first
	// whole), not all three.
	if records == 0 || records > 13000 {
		t.Fatalf("first fetch returned %d bytes of records", records)
	}
	// 6 KB over a 10 s window is within 1000 B/s; a second one is not.
	second := fetch(2)
	if second.ThrottleMillis != 0 && len(second.Topics) != 0 {
		t.Fatalf("throttled fetch carried data: %+v", second.Topics)
	}
	if second.ThrottleMillis == 0 {
		third := fetch(3)
		if third.ThrottleMillis == 0 {
			t.Fatal("three fetches of 6 KB within a 1000 B/s quota were never throttled")
		}
		if len(third.Topics) != 0 || third.ErrorCode != 0 {
			t.Fatalf("throttled fetch %+v", third)
		}
	}
}

// TestControllerMutationQuota: CreateTopics v6+ beyond the client's
// controller_mutation_rate is refused topic by topic with
// THROTTLING_QUOTA_EXCEEDED and the throttle time; v5 is let through and
// only throttled.
func TestControllerMutationQuota(t *testing.T) {
	n := startTestNode(t, nil)
	// 1 partition/s over 11 one-second samples: a burst of 11.
	setClientQuota(t, n, map[string]float64{"controller_mutation_rate": 1})
	c := dialRaw(t, n.addr)
	create := func(version int16, corr int32, names ...string) *kmsg.CreateTopicsResponse {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(version)
		req.TimeoutMillis = 5000
		for _, name := range names {
			ct := kmsg.NewCreateTopicsRequestTopic()
			ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, 6, 1
			req.Topics = append(req.Topics, ct)
		}
		c.send(req, corr)
		resp := kmsg.NewPtrCreateTopicsResponse()
		resp.SetVersion(version)
		c.recv(resp)
		return resp
	}
	// 6 + 6 partitions: the second topic takes the bucket below zero (the
	// check comes before the permits are taken), the third is refused.
	resp := create(7, 1, "m1", "m2", "m3")
	codes := map[string]int16{}
	for _, tr := range resp.Topics {
		codes[tr.Topic] = tr.ErrorCode
	}
	if codes["m1"] != 0 || codes["m2"] != 0 || codes["m3"] != 89 {
		t.Fatalf("error codes %v, want m3 THROTTLING_QUOTA_EXCEEDED (89)", codes)
	}
	for _, tr := range resp.Topics {
		if tr.Topic == "m3" && (tr.ErrorMessage == nil || *tr.ErrorMessage != "The throttling quota has been exceeded.") {
			t.Fatalf("message %v", tr.ErrorMessage)
		}
	}
	// 12 - 11 = 1 permit short: about a second.
	if resp.ThrottleMillis < 500 || resp.ThrottleMillis > 1500 {
		t.Fatalf("throttle_time_ms %d, want about 1000", resp.ThrottleMillis)
	}
	// v5 is permissive: created, and throttled longer.
	c.nc.SetDeadline(time.Now().Add(30 * time.Second))
	resp = create(5, 2, "m4")
	if resp.Topics[0].ErrorCode != 0 || resp.ThrottleMillis <= 0 {
		t.Fatalf("v5: %+v", resp)
	}
}

// TestRequestPercentageQuota: handler time counts against
// request_percentage; the throttle is at most one window.
func TestRequestPercentageQuota(t *testing.T) {
	n := startTestNode(t, nil)
	setClientQuota(t, n, map[string]float64{"request_percentage": 0.0001})
	c := dialRaw(t, n.addr)
	c.nc.SetDeadline(time.Now().Add(30 * time.Second))
	var throttled int32
	for corr := int32(1); corr <= 20 && throttled == 0; corr++ {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(9)
		c.send(req, corr)
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(9)
		c.recv(resp)
		throttled = resp.ThrottleMillis
	}
	if throttled <= 0 || throttled > 1000 {
		t.Fatalf("throttle_time_ms %d, want within (0, 1000]", throttled)
	}
}

// TestConnectionCreationRate: past an address's connection_creation_rate
// a new connection is held unserved and closed when its throttle ends;
// the ones before it are served.
func TestConnectionCreationRate(t *testing.T) {
	n := startTestNode(t, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrAlterClientQuotasRequest()
	ip := "127.0.0.1"
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{{
		Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "ip", Name: &ip}},
		Ops:    []kmsg.AlterClientQuotasRequestEntryOp{{Key: "connection_creation_rate", Value: 1}},
	}}
	if resp, err := req.RequestWith(context.Background(), cl); err != nil || resp.Entries[0].ErrorCode != 0 {
		t.Fatalf("altering quotas: %v %+v", err, resp)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !n.b.quotas.LimitsConnections() {
		if time.Now().After(deadline) {
			t.Fatal("the broker never took the quota")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// One a second over a 10 s window: ten connections pass, then one
	// is held.
	served := 0
	for i := 0; i < 12; i++ {
		c := dialRaw(t, n.addr)
		c.nc.SetDeadline(time.Now().Add(3 * time.Second))
		meta := kmsg.NewPtrMetadataRequest()
		meta.SetVersion(9)
		c.send(meta, 1)
		frame, err := protocol.ReadFrame(c.br, 1<<30, nil)
		if err == nil && len(frame) > 0 {
			served++
			continue
		}
		if served < 10 {
			t.Fatalf("connection %d was not served: %v", i, err)
		}
		return
	}
	t.Fatalf("all %d connections were served past a rate of 1/s", served)
}

// TestMutationQuotaThroughEnvelope: a request forwarded in an Envelope
// carries its client's id and principal; the active controller counts its
// mutations against that client's quota and answers with the throttle.
func TestMutationQuotaThroughEnvelope(t *testing.T) {
	n := startControllerNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	alice := "alice"
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{{
		Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: &alice}},
		Ops:    []kmsg.AlterClientQuotasRequestEntryOp{{Key: "controller_mutation_rate", Value: 1}},
	}}
	if resp := n.ctrl.AlterClientQuotas(ctx, req); resp.Entries[0].ErrorCode != 0 {
		t.Fatalf("altering quotas: %+v", resp)
	}
	for !n.b.quotas.Enabled(quota.ControllerMutation) {
		if ctx.Err() != nil {
			t.Fatal("the node never took the quota")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cc := remoteControllerClient(t, n)
	create := kmsg.NewPtrCreateTopicsRequest()
	create.SetVersion(7)
	create.TimeoutMillis = 5000
	for _, name := range []string{"e1", "e2", "e3"} {
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, 6, 1
		create.Topics = append(create.Topics, ct)
	}
	answer, err := cc.Handle(withIdentity(ctx, identity{clientID: "some-app", principal: authz.Principal{Type: authz.UserType, Name: alice}}), create)
	if err != nil {
		t.Fatal(err)
	}
	resp := answer.(*kmsg.CreateTopicsResponse)
	codes := map[string]int16{}
	for _, tr := range resp.Topics {
		codes[tr.Topic] = tr.ErrorCode
	}
	if codes["e1"] != 0 || codes["e2"] != 0 || codes["e3"] != 89 || resp.ThrottleMillis < 500 {
		t.Fatalf("codes %v throttle %d, want e3 refused and about 1000 ms", codes, resp.ThrottleMillis)
	}
	// Another principal has no quota.
	create.Topics = create.Topics[2:]
	answer, err = cc.Handle(withIdentity(ctx, identity{clientID: "some-app", principal: authz.Principal{Type: authz.UserType, Name: "bob"}}), create)
	if err != nil {
		t.Fatal(err)
	}
	if resp := answer.(*kmsg.CreateTopicsResponse); resp.Topics[0].ErrorCode != 0 || resp.ThrottleMillis != 0 {
		t.Fatalf("bob: %+v", resp)
	}
}
