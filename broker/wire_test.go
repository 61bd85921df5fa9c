package broker

// Wire-level regression tests, including the traps of DESIGN.md §10.

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func apiRange(resp *kmsg.ApiVersionsResponse, key kmsg.Key) (int16, int16, bool) {
	for _, k := range resp.ApiKeys {
		if k.ApiKey == int16(key) {
			return k.MinVersion, k.MaxVersion, true
		}
	}
	return 0, 0, false
}

// apiVersionsAt is the ApiVersions v3 answer of the listener at addr.
func apiVersionsAt(t *testing.T, addr string) *kmsg.ApiVersionsResponse {
	t.Helper()
	c := dialRaw(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "gregor-test", "1.0"
	c.send(req, 1)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	c.recv(resp)
	return resp
}

func TestApiVersionsDerivedFromRegistry(t *testing.T) {
	n := startTestNode(t, nil)
	resp := apiVersionsAt(t, n.addr)
	if resp.ErrorCode != 0 {
		t.Fatalf("error %d", resp.ErrorCode)
	}
	// Produce is advertised from v0 (older librdkafka turns compression
	// off otherwise), Fetch from v4 as in Kafka 4.
	if min, max, ok := apiRange(resp, kmsg.Produce); !ok || min != 0 || max != 13 {
		t.Fatalf("Produce advertised %d-%d %v", min, max, ok)
	}
	if min, max, ok := apiRange(resp, kmsg.Fetch); !ok || min != 4 || max != 18 {
		t.Fatalf("Fetch advertised %d-%d %v", min, max, ok)
	}
	// Controller-only APIs are not on the client listener.
	if _, _, ok := apiRange(resp, kmsg.BrokerRegistration); ok {
		t.Fatal("BrokerRegistration advertised on the client listener")
	}
	client := map[int16]*network.Handler{}
	for _, h := range n.b.handlers() {
		if h.OnClient {
			client[int16(h.Key)] = h
		}
	}
	for _, k := range resp.ApiKeys {
		if h := client[k.ApiKey]; h == nil || h.Max != k.MaxVersion {
			t.Fatalf("advertised %d v%d without a handler", k.ApiKey, k.MaxVersion)
		}
	}
	if len(resp.FinalizedFeatures) == 0 {
		t.Fatal("no finalized features for kafka-features")
	}
}

func TestApiVersionsUnknownVersionGetsV0Answer(t *testing.T) {
	n := startTestNode(t, nil)
	c := dialRaw(t, n.addr)
	// ApiVersions v99 with a v1 header.
	var b []byte
	b = binary.BigEndian.AppendUint16(b, 18)
	b = binary.BigEndian.AppendUint16(b, 99)
	b = binary.BigEndian.AppendUint32(b, 7)
	b = binary.BigEndian.AppendUint16(b, 0xffff)
	b = append(b, 0, 1, 2)
	c.writeFrame(b)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if corr := c.recv(resp); corr != 7 {
		t.Fatalf("correlation %d", corr)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
		t.Fatalf("want UNSUPPORTED_VERSION with our keys, got %d and %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

func TestProduceV2AnsweredUnsupported(t *testing.T) {
	n := startTestNode(t, nil)
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(2)
	req.Acks = 1
	req.TimeoutMillis = 1000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: []byte{}}}}}
	c.send(req, 3)
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(2)
	c.recv(resp)
	if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.UnsupportedVersion.Code {
		t.Fatalf("want UNSUPPORTED_VERSION, got %d", got)
	}
}

// An unknown API key or version closes only that connection (kfake crashes
// on it; DESIGN.md §10).
func TestUnknownAPIClosesOnlyThatConnection(t *testing.T) {
	n := startTestNode(t, nil)
	bad := dialRaw(t, n.addr)
	good := dialRaw(t, n.addr)
	var b []byte
	b = binary.BigEndian.AppendUint16(b, 999)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint16(b, 0)
	bad.writeFrame(b)
	bad.expectClosed()

	bad2 := dialRaw(t, n.addr)
	raw := []byte{0, 3, 0, 77, 0, 0, 0, 1, 0, 0} // Metadata v77
	bad2.writeFrame(raw)
	bad2.expectClosed()

	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	good.send(req, 5)
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(12)
	if corr := good.recv(resp); corr != 5 {
		t.Fatalf("correlation %d", corr)
	}
}

func TestOversizedAndMalformedFramesClose(t *testing.T) {
	n := startTestNode(t, map[string]string{"socket.request.max.bytes": "1000"})
	c := dialRaw(t, n.addr)
	c.nc.Write(binary.BigEndian.AppendUint32(nil, 5000))
	c.expectClosed()

	c2 := dialRaw(t, n.addr)
	// A Metadata v12 header followed by garbage.
	c2.writeFrame([]byte{0, 3, 0, 12, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff})
	c2.expectClosed()
}

// Responses come back in request order even when an earlier request
// (a long-poll fetch) finishes after a later one.
func TestPipelinedResponsesStayInOrder(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "pipe", 1, nil)
	c := dialRaw(t, n.addr)
	fetch := longPollFetch("pipe", 300)
	c.send(fetch, 1)
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(0)
	c.send(av, 2)
	start := time.Now()
	fr := kmsg.NewPtrFetchResponse()
	fr.SetVersion(12)
	if corr := c.recv(fr); corr != 1 {
		t.Fatalf("first response is %d, want 1", corr)
	}
	if time.Since(start) < 200*time.Millisecond {
		t.Fatal("fetch did not wait for MaxWaitMillis")
	}
	ar := kmsg.NewPtrApiVersionsResponse()
	ar.SetVersion(0)
	if corr := c.recv(ar); corr != 2 {
		t.Fatalf("second response is %d, want 2", corr)
	}
}

// Metadata names a live broker as controller (admin calls hang otherwise)
// and reports real topic ids.
func TestMetadataControllerIsLiveAndTopicIDsReal(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "md", 2, nil)
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	topic := "md"
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	c.send(req, 1)
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(12)
	c.recv(resp)
	live := false
	for _, b := range resp.Brokers {
		live = live || b.NodeID == resp.ControllerID
	}
	if !live {
		t.Fatalf("controller id %d is not among brokers %+v", resp.ControllerID, resp.Brokers)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].TopicID == [16]byte{} || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("topic %+v", resp.Topics)
	}
}

func TestAutoCreateHonoursConfig(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		t.Run(fmt.Sprint(enabled), func(t *testing.T) {
			n := startTestNode(t, map[string]string{"auto.create.topics.enable": fmt.Sprint(enabled), "num.partitions": "3"})
			got := topicIn(t, metadataFor(t, n, "auto-me"), "auto-me")
			if got.ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("want UNKNOWN_TOPIC_OR_PARTITION, got %d", got.ErrorCode)
			}
			if !enabled {
				// That no creation follows within a while is the test:
				// there is no state to wait for.
				time.Sleep(100 * time.Millisecond)
				if n.ctrl.Image().Topic("auto-me") != nil {
					t.Fatal("created with auto.create.topics.enable=false")
				}
				return
			}
			if mt := waitMetadataTopic(t, n, "auto-me"); len(mt.Partitions) != 3 {
				t.Fatalf("auto-created topic %+v", mt)
			}
		})
	}
}

// A fetch starting inside a batch returns the whole batch, and the first
// batch comes back even when it exceeds the fetch limits (KIP-74).
func TestFetchInsideBatchAndKIP74(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "kip74", 1, nil)
	bb := protocol.NewBatchBuilder(protocol.CodecNone)
	for i := 0; i < 10; i++ {
		bb.Add([]byte(fmt.Sprint(i)), make([]byte, 100), nil, time.Now().UnixMilli())
	}
	batch, err := bb.Build()
	if err != nil {
		t.Fatal(err)
	}
	if code := produceRaw(t, n, "kip74", 0, batch); code != 0 {
		t.Fatalf("produce error %d", code)
	}
	c := dialRaw(t, n.addr)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(12)
	fetch.ReplicaID = -1
	fetch.MaxBytes = 1
	fetch.SessionEpoch = -1
	fetch.Topics = []kmsg.FetchRequestTopic{{Topic: "kip74", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: 5, PartitionMaxBytes: 1, CurrentLeaderEpoch: -1, LogStartOffset: -1}}}}
	c.send(fetch, 1)
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	c.recv(resp)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 10 {
		t.Fatalf("partition %+v", p)
	}
	h, err := protocol.ParseBatchHeader(p.RecordBatches)
	if err != nil || h.BaseOffset != 0 || h.LastOffset() != 9 || int64(len(p.RecordBatches)) != h.TotalSize() {
		t.Fatalf("want the whole batch 0-9, got %+v (%d bytes) %v", h, len(p.RecordBatches), err)
	}
}

func TestMaxMessageBytesAndKeylessCompactedRefused(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "small", 1, map[string]string{"max.message.bytes": "200"})
	createTopic(t, n, "compacted", 1, map[string]string{"cleanup.policy": "compact"})
	big := protocol.NewBatchBuilder(protocol.CodecNone)
	big.Add([]byte("k"), make([]byte, 500), nil, time.Now().UnixMilli())
	batch, _ := big.Build()
	if code := produceRaw(t, n, "small", 0, batch); code != kerr.MessageTooLarge.Code {
		t.Fatalf("oversized batch: want MESSAGE_TOO_LARGE, got %d", code)
	}
	keyless := protocol.NewBatchBuilder(protocol.CodecNone)
	keyless.Add(nil, []byte("v"), nil, time.Now().UnixMilli())
	batch, _ = keyless.Build()
	if code := produceRaw(t, n, "compacted", 0, batch); code != kerr.InvalidRecord.Code {
		t.Fatalf("keyless record on compacted topic: want INVALID_RECORD, got %d", code)
	}
}

func TestListOffsetsByTimestampAndMaxTimestamp(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "ts", 1, nil)
	base := time.Now().Add(-time.Hour).UnixMilli()
	for i, ts := range []int64{base, base + 3000, base + 1000} {
		bb := protocol.NewBatchBuilder(protocol.CodecNone)
		bb.Add([]byte(fmt.Sprint(i)), []byte("v"), nil, ts)
		batch, _ := bb.Build()
		if code := produceRaw(t, n, "ts", 0, batch); code != 0 {
			t.Fatalf("produce %d", code)
		}
	}
	for _, tc := range []struct {
		ts         int64
		wantOffset int64
	}{
		{-2, 0}, {-1, 3}, {-3, 1}, {base + 500, 1}, {base + 3000, 1}, {base + 5000, -1},
	} {
		c := dialRaw(t, n.addr)
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(8)
		req.ReplicaID = -1
		req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "ts", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: -1, Timestamp: tc.ts}}}}
		c.send(req, 1)
		resp := kmsg.NewPtrListOffsetsResponse()
		resp.SetVersion(8)
		c.recv(resp)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.Offset != tc.wantOffset {
			t.Fatalf("timestamp %d: got offset %d (error %d), want %d", tc.ts, p.Offset, p.ErrorCode, tc.wantOffset)
		}
		if tc.ts == -3 && p.Timestamp != base+3000 {
			t.Fatalf("max timestamp %d", p.Timestamp)
		}
	}
}

// DescribeConfigs returns every key with its default, source and synonyms.
func TestDescribeConfigsEveryKey(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "cfg", 1, map[string]string{"retention.ms": "1234"})
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	req.IncludeSynonyms = true
	req.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: 2, ResourceName: "cfg"}, {ResourceType: 4, ResourceName: "1"}}
	c.send(req, 1)
	resp := kmsg.NewPtrDescribeConfigsResponse()
	resp.SetVersion(4)
	c.recv(resp)
	topic, brokerCfg := resp.Resources[0], resp.Resources[1]
	if topic.ErrorCode != 0 || len(topic.Configs) < 30 || brokerCfg.ErrorCode != 0 || len(brokerCfg.Configs) < 200 {
		t.Fatalf("topic %d keys (err %d), broker %d keys (err %d)", len(topic.Configs), topic.ErrorCode, len(brokerCfg.Configs), brokerCfg.ErrorCode)
	}
	for _, e := range topic.Configs {
		if e.Name == "retention.ms" && (e.Value == nil || *e.Value != "1234" || e.Source != kmsg.ConfigSourceDynamicTopicConfig) {
			t.Fatalf("retention.ms %+v", e)
		}
		if e.Name == "segment.bytes" && (e.Source != kmsg.ConfigSourceDefaultConfig || len(e.ConfigSynonyms) == 0) {
			t.Fatalf("segment.bytes %+v", e)
		}
	}
}

// CreatePartitions answers per topic: growth, an unknown topic and a
// duplicated name each get their own result (Kafka answers a duplicated
// name once, with INVALID_REQUEST).
func TestCreatePartitionsAnswersPerTopic(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "cp", 2, nil)
	createTopic(t, n, "dup", 2, nil)
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.SetVersion(3)
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "cp", Count: 4}, {Topic: "missing", Count: 4}, {Topic: "dup", Count: 3}, {Topic: "dup", Count: 5}}
	c.send(req, 1)
	resp := kmsg.NewPtrCreatePartitionsResponse()
	resp.SetVersion(3)
	c.recv(resp)
	got := map[string]int16{}
	for _, r := range resp.Topics {
		got[r.Topic] = r.ErrorCode
	}
	want := map[string]int16{"cp": 0, "missing": kerr.UnknownTopicOrPartition.Code, "dup": kerr.InvalidRequest.Code}
	if len(resp.Topics) != 3 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v (%d results), want %v", got, len(resp.Topics), want)
	}
	if parts := n.ctrl.Image().Topic("cp").Partitions.Len(); parts != 4 {
		t.Fatalf("cp has %d partitions", parts)
	}
}

// createTopic creates a topic through the controller API.
func createTopic(t *testing.T, n *testNode, name string, partitions int32, configs map[string]string) {
	t.Helper()
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = 5000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, partitions, 1
	for k, v := range configs {
		v := v
		ct.Configs = append(ct.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: &v})
	}
	req.Topics = []kmsg.CreateTopicsRequestTopic{ct}
	c.send(req, 1)
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.SetVersion(7)
	c.recv(resp)
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("creating %s: error %d %v", name, code, resp.Topics[0].ErrorMessage)
	}
	// Wait until the broker hosts the partitions.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var closed []int32
		for p := int32(0); p < partitions; p++ {
			if !n.b.replicas.Hosts(replica.TopicPartition{Topic: name, Partition: p}) {
				closed = append(closed, p)
			}
		}
		if len(closed) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("partitions of %s never opened: %v of %d still not hosted", name, closed, partitions)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// produceRaw sends one batch with Produce v9, acks=-1, and returns the
// partition's error code.
func produceRaw(t *testing.T, n *testNode, topic string, partition int32, batch []byte) int16 {
	t.Helper()
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	req.TimeoutMillis = 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: partition, Records: batch}}}}
	c.send(req, 1)
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(9)
	c.recv(resp)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// DescribeTopicPartitions pages with its cursor: every partition of every
// topic exactly once, in topic-name order, at most the limit per answer.
func TestDescribeTopicPartitionsCursor(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "dtp-a", 3, nil)
	createTopic(t, n, "dtp-b", 2, nil)
	var seen []string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for page := 0; page < 10; page++ {
		c := dialRaw(t, n.addr)
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "dtp-b"}, {Topic: "dtp-a"}, {Topic: "dtp-missing"}}
		req.ResponsePartitionLimit = 2
		req.Cursor = cursor
		c.send(req, 1)
		resp := kmsg.NewPtrDescribeTopicPartitionsResponse()
		c.recv(resp)
		count := 0
		for _, topic := range resp.Topics {
			if *topic.Topic == "dtp-missing" {
				if topic.ErrorCode != kerr.UnknownTopicOrPartition.Code {
					t.Fatalf("missing topic answered %d", topic.ErrorCode)
				}
				continue
			}
			for _, p := range topic.Partitions {
				seen = append(seen, fmt.Sprintf("%s-%d", *topic.Topic, p.Partition))
				count++
			}
		}
		if count > 2 {
			t.Fatalf("page %d holds %d partitions, limit 2", page, count)
		}
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	want := "[dtp-a-0 dtp-a-1 dtp-a-2 dtp-b-0 dtp-b-1]"
	if fmt.Sprint(seen) != want {
		t.Fatalf("paged partitions %v, want %s", seen, want)
	}
}
