package nullbroker

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const testPerBatch = 16

// testPayloads are 1 KiB values that differ from one another.
func testPayloads(n int) [][]byte {
	ps := make([][]byte, n)
	for i := range ps {
		p := []byte(fmt.Sprintf(`{"i":%d,"word":"w%d","pad":"`, i, i*7919%1000))
		for len(p) < 1024 {
			p = append(p, "abcdefgh"[len(p)%8])
		}
		ps[i] = p
	}
	return ps
}

func startServer(t *testing.T) (*Server, [][]byte) {
	t.Helper()
	payloads := testPayloads(100)
	s, err := Listen(Config{Addr: "127.0.0.1:0", Payloads: payloads, RecordsPerBatch: testPerBatch})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, payloads
}

func newClient(t *testing.T, s *Server, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.Addr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func createTopic(t *testing.T, ctx context.Context, cl *kgo.Client, name string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
	if resp.Topics[0].NumPartitions != partitions || resp.Topics[0].TopicID != topicID(name) {
		t.Fatalf("create response %+v", resp.Topics[0])
	}
}

// wantValue is the value the ring holds at offset.
func wantValue(payloads [][]byte, offset int64) []byte {
	batches := max(1, len(payloads)/testPerBatch)
	k, j := offset/testPerBatch, offset%testPerBatch
	return payloads[(int(k%int64(batches))*testPerBatch+int(j))%len(payloads)]
}

// TestProduceAndConsumeWithKgo: a franz-go producer gets per-partition
// offsets counting from 0 with acks=all (idempotent) and acks=1, and a
// franz-go consumer (which checks every batch's CRC) reads increasing
// offsets with the ring's values, without a group and with one.
func TestProduceAndConsumeWithKgo(t *testing.T) {
	s, payloads := startServer(t)
	ctx := testCtx(t)
	const partitions, n = 4, 2000
	for _, acks := range []string{"all", "1"} {
		t.Run("produce acks="+acks, func(t *testing.T) {
			topicName := "produce-acks-" + acks
			opts := []kgo.Opt{kgo.DefaultProduceTopic(topicName), kgo.ProducerBatchCompression(kgo.Lz4Compression()),
				kgo.ProducerLinger(time.Millisecond)}
			if acks == "1" {
				opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
			}
			cl := newClient(t, s, opts...)
			createTopic(t, ctx, cl, topicName, partitions)
			var mu sync.Mutex
			offsets := map[int32][]int64{}
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				cl.Produce(ctx, &kgo.Record{Value: payloads[i%len(payloads)]}, func(r *kgo.Record, err error) {
					defer wg.Done()
					if err != nil {
						t.Errorf("produce: %v", err)
						return
					}
					mu.Lock()
					offsets[r.Partition] = append(offsets[r.Partition], r.Offset)
					mu.Unlock()
				})
			}
			wg.Wait()
			total := 0
			for p, os := range offsets {
				sort.Slice(os, func(i, j int) bool { return os[i] < os[j] })
				for i, o := range os {
					if o != int64(i) {
						t.Fatalf("partition %d: offsets %v…, want 0, 1, 2, …", p, os[:min(len(os), i+3)])
					}
				}
				total += len(os)
			}
			if total != n {
				t.Fatalf("%d records acknowledged, want %d", total, n)
			}
		})
	}
	for _, group := range []string{"", "null-test-group"} {
		t.Run(fmt.Sprintf("consume group=%q", group), func(t *testing.T) {
			opts := []kgo.Opt{kgo.ConsumeTopics("produce-acks-all"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchMaxPartitionBytes(4 << 10)}
			if group != "" {
				opts = append(opts, kgo.ConsumerGroup(group))
			}
			cl := newClient(t, s, opts...)
			next := map[int32]int64{}
			got := 0
			for got < n {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("consumed %d of %d: %v", got, n, ctx.Err())
				}
				fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
				fs.EachRecord(func(r *kgo.Record) {
					if r.Offset != next[r.Partition] {
						t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
					}
					if string(r.Value) != string(wantValue(payloads, r.Offset)) {
						t.Fatalf("partition %d offset %d: wrong value %.40q", r.Partition, r.Offset, r.Value)
					}
					next[r.Partition]++
					got++
				})
			}
			if len(next) != partitions {
				t.Fatalf("records from %d partitions, want %d", len(next), partitions)
			}
		})
	}
}

// rawConn speaks the protocol without a client library in between.
type rawConn struct {
	t   *testing.T
	nc  net.Conn
	br  *bufio.Reader
	fmt *kmsg.RequestFormatter
}

func dialRaw(t *testing.T, s *Server) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))}
}

func (c *rawConn) send(corr int32, req kmsg.Request) {
	c.t.Helper()
	if _, err := c.nc.Write(c.fmt.AppendRequest(nil, req, corr)); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads one response into resp and returns its correlation id.
func (c *rawConn) recv(resp kmsg.Response) int32 {
	c.t.Helper()
	frame, err := protocol.ReadFrame(c.br, 1<<30, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	corr := int32(binary.BigEndian.Uint32(frame))
	body := frame[4:]
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decoding %T: %v", resp, err)
	}
	return corr
}

func (c *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	c.send(1, req)
	resp := req.ResponseKind()
	c.recv(resp)
	return resp
}

func TestApiVersionsAdvertisesExactlyTheHandlers(t *testing.T) {
	s, _ := startServer(t)
	c := dialRaw(t, s)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
	resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("error %d", resp.ErrorCode)
	}
	want := map[kmsg.Key][2]int16{
		kmsg.ApiVersions: {0, 4}, kmsg.Metadata: {0, 13}, kmsg.Produce: {3, 13}, kmsg.Fetch: {4, 18},
		kmsg.ListOffsets: {1, 11}, kmsg.InitProducerID: {0, 5}, kmsg.CreateTopics: {2, 7},
		kmsg.FindCoordinator: {0, 6}, kmsg.JoinGroup: {0, 9}, kmsg.SyncGroup: {0, 5}, kmsg.Heartbeat: {0, 4},
		kmsg.LeaveGroup: {0, 5}, kmsg.OffsetCommit: {2, 10}, kmsg.OffsetFetch: {0, 10},
	}
	if len(resp.ApiKeys) != len(want) {
		t.Errorf("%d APIs advertised, want %d: %+v", len(resp.ApiKeys), len(want), resp.ApiKeys)
	}
	for _, k := range resp.ApiKeys {
		w, ok := want[kmsg.Key(k.ApiKey)]
		if !ok || k.MinVersion != w[0] || k.MaxVersion != w[1] {
			t.Errorf("%s v%d-%d advertised, want %v", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, w)
		}
		if s.handlers[k.ApiKey] == nil {
			t.Errorf("%s advertised without a handler", kmsg.NameForKey(k.ApiKey))
		}
	}

	// A version above ours gets a v0 answer listing ours (KIP-511):
	// ApiVersions v99, correlation id 3, null client id, one body byte.
	hdr := []byte{0, 18, 0, 99, 0, 0, 0, 3, 0xff, 0xff}
	if _, err := c.nc.Write(binary.BigEndian.AppendUint32(nil, uint32(len(hdr)+1))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.nc.Write(append(hdr, 0)); err != nil {
		t.Fatal(err)
	}
	frame, err := protocol.ReadFrame(c.br, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	v0 := kmsg.NewPtrApiVersionsResponse()
	v0.Version = 0
	if err := v0.ReadFrom(frame[4:]); err != nil || binary.BigEndian.Uint32(frame) != 3 {
		t.Fatalf("v99 answer: %v", err)
	}
	if v0.ErrorCode != kerr.UnsupportedVersion.Code || len(v0.ApiKeys) != len(want) {
		t.Fatalf("v99 answer %+v", v0)
	}
}

func TestMetadata(t *testing.T) {
	s, _ := startServer(t)
	c := dialRaw(t, s)
	name := "meta"
	metadata := func(version int16, auto bool, topics ...kmsg.MetadataRequestTopic) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.AllowAutoTopicCreation, req.Topics = version, auto, topics
		return c.roundTrip(req).(*kmsg.MetadataResponse)
	}
	byName := kmsg.NewMetadataRequestTopic()
	byName.Topic = &name

	resp := metadata(12, false, byName)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic without auto-creation: %+v", resp.Topics)
	}
	host, port, _ := net.SplitHostPort(s.Addr())
	if len(resp.Brokers) != 1 || resp.Brokers[0].Host != host || fmt.Sprint(resp.Brokers[0].Port) != port ||
		resp.Brokers[0].NodeID != resp.ControllerID || resp.ClusterID == nil {
		t.Fatalf("brokers %+v controller %d", resp.Brokers, resp.ControllerID)
	}

	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, 3, 1
	create.Topics = append(create.Topics, ct)
	create.Version = 7
	if cr := c.roundTrip(create).(*kmsg.CreateTopicsResponse); cr.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %+v", cr.Topics[0])
	}
	if cr := c.roundTrip(create).(*kmsg.CreateTopicsResponse); cr.Topics[0].ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("second create: %+v", cr.Topics[0])
	}

	first := metadata(12, false, byName).Topics[0]
	if first.ErrorCode != 0 || len(first.Partitions) != 3 || first.TopicID == ([16]byte{}) {
		t.Fatalf("topic %+v", first)
	}
	for i, p := range first.Partitions {
		if p.Partition != int32(i) || p.Leader != nodeID || p.LeaderEpoch != 0 || len(p.ISR) != 1 || p.ErrorCode != 0 {
			t.Fatalf("partition %+v", p)
		}
	}
	byID := kmsg.NewMetadataRequestTopic()
	byID.TopicID = first.TopicID
	again := metadata(12, false, byID).Topics[0]
	if again.TopicID != first.TopicID || again.Topic == nil || *again.Topic != name {
		t.Fatalf("lookup by id: %+v", again)
	}
	if all := metadata(12, false); len(all.Topics) != 1 {
		t.Fatalf("all topics: %+v", all.Topics)
	}

	auto := "auto"
	byName.Topic = &auto
	if got := metadata(12, true, byName).Topics[0]; got.ErrorCode != 0 || len(got.Partitions) != 1 {
		t.Fatalf("auto-created: %+v", got)
	}
	if got := metadata(0, false); len(got.Topics) != 2 {
		t.Fatalf("v0 empty list is all topics: %+v", got.Topics)
	}
}

// TestFetchAndListOffsets checks the ring at the wire: the batch holding
// the fetch offset comes first, base offsets follow one another, CRCs are
// valid, byte limits hold, and ListOffsets agrees with the high watermark.
func TestFetchAndListOffsets(t *testing.T) {
	s, _ := startServer(t)
	c := dialRaw(t, s)
	s.topics.create("f", 2)

	list := kmsg.NewPtrListOffsetsRequest()
	list.Version = 7
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "f"
	for _, ts := range []int64{-2, -1} {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = 1, ts
		lt.Partitions = append(lt.Partitions, lp)
	}
	list.Topics = append(list.Topics, lt)
	lr := c.roundTrip(list).(*kmsg.ListOffsetsResponse)
	earliest, latest := lr.Topics[0].Partitions[0], lr.Topics[0].Partitions[1]
	if earliest.ErrorCode != 0 || earliest.Offset != 0 || latest.Offset != s.ring.end || latest.LeaderEpoch != 0 {
		t.Fatalf("list offsets %+v %+v", earliest, latest)
	}

	fetch := func(offset int64, partMax, maxBytes int32) kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxBytes, req.MaxWaitMillis = 16, maxBytes, 100
		ft := kmsg.NewFetchRequestTopic()
		ft.TopicID = topicID("f")
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 1, offset, partMax
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp := c.roundTrip(req).(*kmsg.FetchResponse)
		return resp.Topics[0].Partitions[0]
	}
	batchLen := len(s.ring.batches[0])
	p := fetch(testPerBatch+5, int32(3*batchLen+10), 1<<20)
	if p.ErrorCode != 0 || p.HighWatermark != s.ring.end || p.LogStartOffset != 0 {
		t.Fatalf("fetch %+v", p)
	}
	rest, base := p.RecordBatches, int64(testPerBatch)
	count := 0
	for len(rest) > 0 {
		batch, r, h, err := protocol.NextBatch(rest)
		if err != nil {
			t.Fatal(err)
		}
		if h.BaseOffset != base || int64(h.LastOffsetDelta)+1 != testPerBatch || h.Codec() != protocol.CodecLZ4 {
			t.Fatalf("batch %d: %+v, want base offset %d", count, h, base)
		}
		if !protocol.CheckBatchCRC(batch) {
			t.Fatalf("batch %d: bad CRC", count)
		}
		base += testPerBatch
		rest = r
		count++
	}
	if count != 3 {
		t.Fatalf("%d batches in %d bytes, want 3 (partition max bytes)", count, 3*batchLen+10)
	}
	if one := fetch(0, 10, 1<<20); len(one.RecordBatches) != batchLen {
		t.Fatalf("first batch not returned whole over a small limit: %d bytes", len(one.RecordBatches))
	}
	if out := fetch(s.ring.end+1, 1<<20, 1<<20); out.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("past the end: %+v", out)
	}
}

// TestPipelinedRequestsAnsweredInOrder sends requests without waiting and
// reads the answers: in request order, none for acks=0.
func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	s, _ := startServer(t)
	s.topics.create("p", 1)
	c := dialRaw(t, s)
	batch, err := func() ([]byte, error) {
		b := protocol.NewBatchBuilder(protocol.CodecNone)
		b.Add(nil, []byte("v"), nil, 1)
		b.Add(nil, []byte("w"), nil, 1)
		return b.Build()
	}()
	if err != nil {
		t.Fatal(err)
	}
	produce := func(acks int16) *kmsg.ProduceRequest {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks = 9, acks
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "p"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = batch
		pt.Partitions = append(pt.Partitions, pp)
		req.Topics = append(req.Topics, pt)
		return req
	}
	c.send(10, kmsg.NewPtrMetadataRequest())
	c.send(11, produce(0))
	c.send(12, produce(1))
	c.send(13, kmsg.NewPtrApiVersionsRequest())
	if corr := c.recv(kmsg.NewPtrMetadataResponse()); corr != 10 {
		t.Fatalf("first answer is %d, want 10", corr)
	}
	pr := kmsg.NewPtrProduceResponse()
	pr.Version = 9
	if corr := c.recv(pr); corr != 12 {
		t.Fatalf("second answer is %d, want 12 (acks=0 has none)", corr)
	}
	if got := pr.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.BaseOffset != 2 {
		t.Fatalf("produce after an acks=0 produce of 2 records: %+v", got)
	}
	if corr := c.recv(kmsg.NewPtrApiVersionsResponse()); corr != 13 {
		t.Fatalf("third answer is %d, want 13", corr)
	}
}

// TestFetchEncodingMatchesKmsg holds the hand-written Fetch encoding to
// kmsg's in every served version: kmsg decodes it, and encoding the decoded
// response again gives the same bytes.
func TestFetchEncodingMatchesKmsg(t *testing.T) {
	s, _ := startServer(t)
	s.topics.create("enc", 2)
	batchLen := len(s.ring.batch(0))
	twoBatches := batchLen + len(s.ring.batch(1))
	for v := int16(4); v <= 18; v++ {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxBytes = v, int32(10*batchLen)
		for _, name := range []string{"enc", "missing"} {
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic, ft.TopicID = name, topicID(name)
			for p, offset := range []int64{3, s.ring.end + 5} {
				fp := kmsg.NewFetchRequestTopicPartition()
				fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = int32(p), offset, int32(twoBatches)
				ft.Partitions = append(ft.Partitions, fp)
			}
			req.Topics = append(req.Topics, ft)
		}
		c := &conn{srv: s, corr: 77}
		if resp := c.fetch(req); resp != nil {
			t.Fatalf("v%d: fetch returned a response to encode", v)
		}
		var frame []byte
		for _, b := range c.out.bytes() {
			frame = append(frame, b...)
		}
		if int(binary.BigEndian.Uint32(frame)) != len(frame)-4 || binary.BigEndian.Uint32(frame[4:]) != 77 {
			t.Fatalf("v%d: frame header % x, %d bytes", v, frame[:8], len(frame))
		}
		body := frame[8:]
		if v >= 12 {
			body = body[1:]
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = v
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("v%d: kmsg cannot decode: %v", v, err)
		}
		if again := resp.AppendTo(nil); string(again) != string(body) {
			t.Fatalf("v%d: kmsg encodes the decoded response differently:\n% x\n% x", v, again[:min(len(again), 80)], body[:min(len(body), 80)])
		}
		ok, past, missing := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1], resp.Topics[1].Partitions[0]
		if ok.ErrorCode != 0 || ok.HighWatermark != s.ring.end || len(ok.RecordBatches) != twoBatches {
			t.Fatalf("v%d: partition with data %+v (%d bytes)", v, ok, len(ok.RecordBatches))
		}
		if h, err := protocol.ParseBatchHeader(ok.RecordBatches); err != nil || h.BaseOffset != 0 || !protocol.CheckBatchCRC(ok.RecordBatches[:batchLen]) {
			t.Fatalf("v%d: first batch %+v %v", v, h, err)
		}
		if h, err := protocol.ParseBatchHeader(ok.RecordBatches[batchLen:]); err != nil || h.BaseOffset != testPerBatch {
			t.Fatalf("v%d: second batch %+v %v", v, h, err)
		}
		if past.ErrorCode != kerr.OffsetOutOfRange.Code || len(past.RecordBatches) != 0 {
			t.Fatalf("v%d: past the end %+v", v, past)
		}
		wantMissing := kerr.UnknownTopicOrPartition.Code
		if v >= 13 {
			wantMissing = kerr.UnknownTopicID.Code
		}
		if missing.ErrorCode != wantMissing {
			t.Fatalf("v%d: unknown topic %+v", v, missing)
		}
	}
}
