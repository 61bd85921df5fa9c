package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// serverConnFor finds the broker's side of a client connection.
func serverConnFor(t *testing.T, n *testNode, client net.Conn) *network.Conn {
	t.Helper()
	want := client.LocalAddr().String()
	var found *network.Conn
	waitUntil(t, 5*time.Second, "the broker to register the connection", func() bool {
		for _, c := range n.b.server.Conns() {
			if c.Socket().RemoteAddr().String() == want {
				found = c
				return true
			}
		}
		return false
	})
	return found
}

// serverHasConn reports whether the broker still serves c.
func serverHasConn(n *testNode, c *network.Conn) bool { return n.b.server.Serving(c) }

func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// describeWithDocs asks for the configs of topics with documentation and
// synonyms: a few KiB of answer per topic.
func describeWithDocs(topics ...string) *kmsg.DescribeConfigsRequest {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	for _, topic := range topics {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceTypeTopic
		r.ResourceName = topic
		req.Resources = append(req.Resources, r)
	}
	return req
}

func newDescribeConfigsResponse() *kmsg.DescribeConfigsResponse {
	resp := kmsg.NewPtrDescribeConfigsResponse()
	resp.SetVersion(4)
	return resp
}

// pipeline writes requests frames of req (correlation ids 0..requests-1)
// from a goroutine of its own, since the broker may stop reading them; the
// error channel reports once all are written or the write failed.
func pipeline(nc net.Conn, req kmsg.Request, requests int) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i := 0; i < requests; i++ {
			body := requestBody(req, int32(i))
			frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
			if _, err := nc.Write(append(frame, body...)); err != nil {
				done <- fmt.Errorf("writing request %d: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	return done
}

// shrinkSocketBuffers keeps the kernel from buffering megabytes between a
// client that does not read and the broker, so that the broker's own
// bound is what stops it. Both buffers stay above two loopback segments
// (64 KiB each): below that the transfer crawls from timer to timer.
func shrinkSocketBuffers(client, server net.Conn) {
	client.(*net.TCPConn).SetReadBuffer(256 << 10)
	server.(*net.TCPConn).SetWriteBuffer(128 << 10)
}

// A client that pipelines many large requests and never reads holds at
// most its budget (plus the one request or answer that crossed it) in the
// broker, stays connected, is answered in order once it reads, and does
// not hold up anyone else. Before the budget the broker kept reading up
// to maxInFlight requests and held every answer: 128 times the answer.
func TestStalledPipelineHoldsOnlyItsBudget(t *testing.T) {
	const budget = 64 << 10
	n := startTestNodeWithServer(t, nil, 1, func(o *network.ServerOptions) { o.ConnectionBudget = budget })
	var topics []string
	for i := 0; i < 4; i++ {
		topics = append(topics, fmt.Sprintf("stall-%d", i))
		createTopic(t, n, topics[i], 1, nil)
	}
	req := describeWithDocs(topics[:2]...)

	probe := dialRaw(t, n.addr)
	probe.send(req, 1)
	probe.recv(newDescribeConfigsResponse())
	probeConn := serverConnFor(t, n, probe.nc)
	// The probe's held peak is its one request, then its one answer.
	answer := probeConn.PeakHeld()
	if answer <= 0 || answer*4 > budget {
		t.Fatalf("one answer holds %d bytes; the test wants several per %d-byte budget", answer, budget)
	}

	const stalledConns, requests = 3, 400
	type stalled struct {
		client *rawConn
		server *network.Conn
		sent   <-chan error
	}
	var all []stalled
	for i := 0; i < stalledConns; i++ {
		c := dialRaw(t, n.addr)
		sc := serverConnFor(t, n, c.nc)
		shrinkSocketBuffers(c.nc, sc.Socket())
		all = append(all, stalled{client: c, server: sc, sent: pipeline(c.nc, req, requests)})
	}
	for _, s := range all {
		// The writer is stuck on the socket and the reader has stopped.
		waitUntil(t, 20*time.Second, "the stalled connection to fill its budget", s.server.AtBudget)
	}

	// Everyone else is served meanwhile.
	other := dialRaw(t, n.addr)
	other.send(describeWithDocs(topics[2:]...), 7)
	resp := newDescribeConfigsResponse()
	if corr := other.recv(resp); corr != 7 || len(resp.Resources) != 2 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("other connection: corr %d, %+v", corr, resp.Resources)
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	other.send(meta, 8)
	metaResp := kmsg.NewPtrMetadataResponse()
	metaResp.SetVersion(12)
	if corr := other.recv(metaResp); corr != 8 || len(metaResp.Brokers) != 1 {
		t.Fatalf("other connection metadata: corr %d, brokers %+v", corr, metaResp.Brokers)
	}

	for i, s := range all {
		// The reader reads only under budget, then adds one request,
		// which its answer replaces.
		if peak, limit := s.server.PeakHeld(), int64(budget)+answer; peak > limit {
			t.Errorf("stalled connection %d held %d bytes at its peak; budget %d, one answer %d", i, peak, budget, answer)
		}
		if !serverHasConn(n, s.server) || s.server.Closed() {
			t.Errorf("stalled connection %d was closed", i)
		}
	}
	if t.Failed() {
		return
	}

	for i, s := range all {
		s.client.nc.SetDeadline(time.Now().Add(30 * time.Second))
		for want := int32(0); want < requests; want++ {
			resp := newDescribeConfigsResponse()
			if corr := s.client.recv(resp); corr != want || len(resp.Resources) != 2 {
				t.Fatalf("stalled connection %d: response %d has corr %d and %d resources", i, want, corr, len(resp.Resources))
			}
		}
		if err := <-s.sent; err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 5*time.Second, "the drained connection to hold nothing", func() bool { return s.server.Held() == 0 })
	}
}

// A single answer larger than the whole budget still goes out, and reading
// resumes after it.
func TestAnswerLargerThanBudgetGoesOut(t *testing.T) {
	n := startTestNodeWithServer(t, nil, 1, func(o *network.ServerOptions) { o.ConnectionBudget = 1 })
	createTopic(t, n, "big-answer", 1, nil)
	c := dialRaw(t, n.addr)
	for corr := int32(0); corr < 5; corr++ {
		c.send(describeWithDocs("big-answer", "big-answer", "big-answer"), corr)
	}
	for want := int32(0); want < 5; want++ {
		if corr := c.recv(newDescribeConfigsResponse()); corr != want {
			t.Fatalf("response %d has corr %d", want, corr)
		}
	}
}

func TestIdleConnectionClosed(t *testing.T) {
	n := startTestNode(t, map[string]string{"connections.max.idle.ms": "200"})
	c := dialRaw(t, n.addr)
	req := apiVersionsV3()
	c.send(req, 1)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	c.recv(resp)
	c.expectClosed()

	// A connection that never sends anything is idle from the start.
	silent := dialRaw(t, n.addr)
	silent.expectClosed()
}

func TestIdleNeverWhenDisabled(t *testing.T) {
	n := startTestNode(t, map[string]string{"connections.max.idle.ms": "-1"})
	c := dialRaw(t, n.addr)
	sc := serverConnFor(t, n, c.nc)
	if sc.IdleTimerArmed() {
		t.Fatal("connections.max.idle.ms=-1 armed an idle timer")
	}
}

// Gregor does not reap a connection while the broker owes it an answer it
// is still working on: a parked long-poll fetch, a JoinGroup waiting for
// the rebalance. (Kafka measures idleness from the last socket event, so
// it closes such a connection when the wait outlasts
// connections.max.idle.ms; see conn.go.)
func TestParkedRequestsAreNotIdle(t *testing.T) {
	const idle = 200 * time.Millisecond
	n := startTestNode(t, map[string]string{
		"connections.max.idle.ms":          fmt.Sprint(idle.Milliseconds()),
		"offsets.topic.num.partitions":     "1",
		"group.initial.rebalance.delay.ms": "1000",
	})
	createTopic(t, n, "parked", 1, nil)

	c := n.dial(t)
	start := time.Now()
	fresp := c.roundTrip(longPollFetch("parked", 1000)).(*kmsg.FetchResponse)
	if code := fresp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("fetch: error %d", code)
	}
	if waited := time.Since(start); waited < 2*idle {
		t.Fatalf("the fetch was answered after %v; it should have waited for data, longer than the idle limit", waited)
	}

	waitGroupCoordinator(t, n, c, "parked-group")
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(3) // before KIP-394: no member id round trip
	join.Group = "parked-group"
	join.SessionTimeoutMillis = 10000
	join.RebalanceTimeoutMillis = 10000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0}}}
	start = time.Now()
	if jresp := c.roundTrip(join).(*kmsg.JoinGroupResponse); jresp.ErrorCode != 0 {
		t.Fatalf("join: error %d", jresp.ErrorCode)
	}
	if waited := time.Since(start); waited < 2*idle {
		t.Fatalf("the join was answered after %v; it should have waited for the initial rebalance delay", waited)
	}

	// Once answered, the connection is idle again and closed.
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection was not closed once idle: %v", err)
	}
}

// A client that stops reading its answers is idle (nothing moves on the
// socket), as in Kafka, and is closed.
func TestStalledReaderClosedWhenIdle(t *testing.T) {
	n := startTestNodeWithServer(t, map[string]string{"connections.max.idle.ms": "200"}, 1,
		func(o *network.ServerOptions) { o.ConnectionBudget = 64 << 10 })
	createTopic(t, n, "stalled-idle", 1, nil)
	c := dialRaw(t, n.addr)
	sc := serverConnFor(t, n, c.nc)
	shrinkSocketBuffers(c.nc, sc.Socket())
	sent := pipeline(c.nc, describeWithDocs("stalled-idle", "stalled-idle"), 400)
	waitUntil(t, 20*time.Second, "the stalled connection to be closed", func() bool { return !serverHasConn(n, sc) })
	c.nc.Close()
	<-sent
}

func TestMaxConnectionsPerIP(t *testing.T) {
	n := startTestNode(t, map[string]string{"max.connections.per.ip": "2"})
	first, second := dialRaw(t, n.addr), dialRaw(t, n.addr)
	apiVersionsRoundTrip(t, first)
	apiVersionsRoundTrip(t, second)
	third := dialRaw(t, n.addr)
	third.expectClosed()

	// A slot frees when a connection ends.
	first.nc.Close()
	waitUntil(t, 5*time.Second, "a new connection to be served", func() bool {
		c := dialRaw(t, n.addr)
		defer c.nc.Close()
		return apiVersionsTry(c) == nil
	})
}

func TestMaxConnectionsPerIPOverride(t *testing.T) {
	n := startTestNode(t, map[string]string{"max.connections.per.ip.overrides": "127.0.0.1:1"})
	first := dialRaw(t, n.addr)
	apiVersionsRoundTrip(t, first)
	second := dialRaw(t, n.addr)
	second.expectClosed()
}

// max.connections makes the listener wait, not refuse: the next
// connection is served once another ends.
func TestMaxConnectionsWaitsForASlot(t *testing.T) {
	for _, overrides := range []map[string]string{
		{"max.connections": "1"},
		{"listener.name.plaintext.max.connections": "1"},
	} {
		t.Run(fmt.Sprint(overrides), func(t *testing.T) {
			n := startTestNode(t, overrides)
			first := dialRaw(t, n.addr)
			apiVersionsRoundTrip(t, first)
			second := dialRaw(t, n.addr)
			second.send(apiVersionsV3(), 2)
			expectNoAnswer(t, second, "past max.connections")
			first.nc.Close()
			second.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.SetVersion(3)
			if corr := second.recv(resp); corr != 2 || resp.ErrorCode != 0 {
				t.Fatalf("second connection: corr %d, error %d", corr, resp.ErrorCode)
			}
		})
	}
}

// max.connection.creation.rate, broker-wide or for one listener (KIP-612),
// makes the acceptor wait: with a rate of 10 a second measured over 2
// one-second samples, 40 connections take two seconds and more (a burst of
// 10-20 at once, the rest held to the rate), each served in the end. It
// used to be accepted as a key and not applied: the 40 took milliseconds.
func TestMaxConnectionCreationRateDelaysAccepting(t *testing.T) {
	for _, key := range []string{"max.connection.creation.rate", "listener.name.plaintext.max.connection.creation.rate"} {
		t.Run(key, func(t *testing.T) {
			n := startTestNode(t, map[string]string{key: "10", "quota.window.num": "2", "quota.window.size.seconds": "1"})
			start := time.Now()
			for range 40 {
				c := dialRaw(t, n.addr)
				apiVersionsRoundTrip(t, c)
				c.nc.Close()
			}
			// Not a timing of the broker's speed: a lower bound the
			// rate sets, which no load can undercut.
			if took := time.Since(start); took < 1500*time.Millisecond {
				t.Fatalf("40 connections in %s at 10 a second", took)
			}
		})
	}
}

// queued.max.request.bytes is shared by all connections: while one
// connection's half-read request holds the whole pool, nobody else's
// request is read; once it is done, they are.
func TestQueuedMaxRequestBytesIsGlobal(t *testing.T) {
	const pool = 64 << 10
	n := startTestNode(t, map[string]string{
		"socket.request.max.bytes": fmt.Sprint(pool),
		"queued.max.request.bytes": fmt.Sprint(pool),
	})
	hog := dialRaw(t, n.addr)
	// Announce a request as large as the pool and send only its start.
	if _, err := hog.nc.Write(binary.BigEndian.AppendUint32(nil, pool)); err != nil {
		t.Fatal(err)
	}
	hogConn := serverConnFor(t, n, hog.nc)
	waitUntil(t, 5*time.Second, "the half-read request to reserve the pool", func() bool {
		available, _ := n.b.server.QueuedBytesAvailable()
		return available <= 0
	})

	other := dialRaw(t, n.addr)
	other.send(apiVersionsV3(), 5)
	expectNoAnswer(t, other, "while queued.max.request.bytes was exhausted")

	// The rest of the hog's frame names no API, so its connection
	// closes, and the pool is whole again.
	rest := make([]byte, pool)
	rest[0], rest[1] = 0x7f, 0x7f
	if _, err := hog.nc.Write(rest); err != nil {
		t.Fatal(err)
	}
	other.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	if corr := other.recv(resp); corr != 5 || resp.ErrorCode != 0 {
		t.Fatalf("after the pool freed: corr %d, error %d", corr, resp.ErrorCode)
	}
	waitUntil(t, 5*time.Second, "the hog's connection to close", func() bool { return !serverHasConn(n, hogConn) })
}

func apiVersionsRoundTrip(t *testing.T, c *rawConn) {
	t.Helper()
	if err := apiVersionsTry(c); err != nil {
		t.Fatal(err)
	}
}

// apiVersionsTry is an ApiVersions round trip that reports failure
// instead of failing the test.
func apiVersionsTry(c *rawConn) error {
	req := apiVersionsV3()
	body := requestBody(req, 1)
	if _, err := c.nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)); err != nil {
		return err
	}
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	frame, err := protocol.ReadFrame(c.br, 1<<20, nil)
	if err != nil {
		return fmt.Errorf("reading the ApiVersions answer: %w", err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	if err := resp.ReadFrom(frame[4:]); err != nil || resp.ErrorCode != 0 {
		return fmt.Errorf("ApiVersions answer: error %d, %v", resp.ErrorCode, err)
	}
	return nil
}

func apiVersionsV3() *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "conn-test", "1"
	return req
}

// expectNoAnswer asserts that the broker neither answers c nor closes it
// for a while: it has not read the request.
func expectNoAnswer(t *testing.T, c *rawConn, when string) {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := c.br.ReadByte(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the broker answered or closed a connection %s: %v", when, err)
	}
}

// longPollFetch fetches partition 0 of topic from offset 0, waiting up to
// maxWait ms for a byte.
func longPollFetch(topic string, maxWait int32) *kmsg.FetchRequest {
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(12)
	fetch.ReplicaID = -1
	fetch.MaxWaitMillis = maxWait
	fetch.MinBytes = 1
	fetch.MaxBytes = 1 << 20
	fetch.SessionEpoch = -1
	fetch.Topics = []kmsg.FetchRequestTopic{{Topic: topic, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1}}}}
	return fetch
}

// An answer written just before an acks=0 produce (which sends nothing)
// goes out at once. The writer used to flush only after a response, so
// an answer followed in the queue by an acks=0 produce sat in its buffer
// until some later request was answered.
func TestAnswerFollowedByAnAcksZeroProduceIsSent(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "fire-and-forget", 1, nil)
	c := dialRaw(t, n.addr)
	versions := kmsg.NewPtrApiVersionsRequest()
	versions.SetVersion(0)
	produce := produceReq("fire-and-forget", batchBytes(t, false), nil)
	produce.Acks = 0
	for i := range 50 {
		// Both frames in one write, so that the produce is queued
		// while the writer has the ApiVersions answer.
		var both []byte
		for _, body := range [][]byte{requestBody(versions, int32(2*i)), requestBody(produce, int32(2*i+1))} {
			both = binary.BigEndian.AppendUint32(both, uint32(len(body)))
			both = append(both, body...)
		}
		if _, err := c.nc.Write(both); err != nil {
			t.Fatal(err)
		}
		c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp := kmsg.NewPtrApiVersionsResponse()
		if corr := c.recv(resp); corr != int32(2*i) || resp.ErrorCode != 0 {
			t.Fatalf("round %d: answer %d, error %d", i, corr, resp.ErrorCode)
		}
	}
}
