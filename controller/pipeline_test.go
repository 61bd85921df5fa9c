package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/gregorbroker/gregor/controller/decide"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// imageLog records every image a controller publishes, by offset.
type imageLog struct {
	mu     sync.Mutex
	images map[int64]*metadata.Image
}

func recordImages(t *testing.T, c *Controller) *imageLog {
	l := &imageLog{images: map[int64]*metadata.Image{}}
	cancel := c.Subscribe(func(_, next *metadata.Image) {
		l.mu.Lock()
		l.images[next.Offset] = next
		l.mu.Unlock()
	})
	t.Cleanup(cancel)
	return l
}

// before returns the last image published before offset.
func (l *imageLog) before(offset int64) *metadata.Image {
	l.mu.Lock()
	defer l.mu.Unlock()
	var best *metadata.Image
	for o, img := range l.images {
		if o < offset && (best == nil || o > best.Offset) {
			best = img
		}
	}
	return best
}

func (l *imageLog) at(offset int64) *metadata.Image {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.images[offset]
}

// createdAt is one CreateTopics decided on the loop, with the offset its
// records were given and the image published when it was answered.
type createdAt struct {
	offset   int64
	result   kmsg.CreateTopicsResponseTopic
	err      error
	answered *metadata.Image
}

// createTopicAt creates one topic through the loop (as CreateTopics does)
// and also returns the offset its decision was given.
func createTopicAt(ctx context.Context, c *Controller, name string, partitions int32, decided chan<- struct{}) createdAt {
	type res struct {
		offset int64
		topics []kmsg.CreateTopicsResponseTopic
	}
	r, _, err := submitTyped(c, ctx, func(img *metadata.Image, offset int64) ([]metadata.Record, res) {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Topics = []kmsg.CreateTopicsRequestTopic{topicReq(name, partitions, 1)}
		recs, resp := c.env.CreateTopics(ctx, img, offset, req)
		if decided != nil {
			close(decided)
		}
		return recs, res{offset: offset, topics: resp.Topics}
	})
	out := createdAt{offset: r.offset, err: err, answered: c.Image()}
	if err == nil {
		out.result = r.topics[0]
	}
	return out
}

// checkAnsweredAfterApply: each successful creation was answered only once
// the image of its own entry was published, and that entry is where its
// topic appeared.
func checkAnsweredAfterApply(t *testing.T, images *imageLog, creates []createdAt) {
	t.Helper()
	// Subscribers get images on their own goroutine, maybe later than
	// the answers.
	var last int64
	for _, cr := range creates {
		last = max(last, cr.offset)
	}
	waitFor(t, "the image at the last creation's offset", func() bool { return images.at(last) != nil })
	offsets := map[int64]bool{}
	for _, cr := range creates {
		name := cr.result.Topic
		if offsets[cr.offset] {
			t.Fatalf("two operations were given offset %d", cr.offset)
		}
		offsets[cr.offset] = true
		if cr.answered.Offset < cr.offset || cr.answered.Topic(name) == nil {
			t.Fatalf("%s (offset %d) answered with image %d", name, cr.offset, cr.answered.Offset)
		}
		img := images.at(cr.offset)
		if img == nil || img.Topic(name) == nil || protocol.UUID(cr.result.TopicID) != img.Topic(name).ID {
			t.Fatalf("%s is not in the image published at its offset %d", name, cr.offset)
		}
		if prev := images.before(cr.offset); prev != nil && prev.Topic(name) != nil {
			t.Fatalf("%s is already in the image before its offset %d", name, cr.offset)
		}
	}
}

func TestPipelinedCreateTopicsBurst(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	registerBroker(t, c, 1)
	images := recordImages(t, c)
	const topics, partitions = 50, 100
	creates := make([]createdAt, topics)
	concurrently(topics, func(i int) {
		creates[i] = createTopicAt(ctxT(t), c, fmt.Sprintf("burst-%d", i), partitions, nil)
	})
	ids := map[protocol.UUID]bool{}
	for _, cr := range creates {
		if cr.err != nil || cr.result.ErrorCode != 0 {
			t.Fatalf("create %s: %v %d %v", cr.result.Topic, cr.err, cr.result.ErrorCode, cr.result.ErrorMessage)
		}
		ids[protocol.UUID(cr.result.TopicID)] = true
	}
	if len(ids) != topics {
		t.Fatalf("%d distinct topic ids for %d topics", len(ids), topics)
	}
	img := c.Image()
	for i := range topics {
		tp := img.Topic(fmt.Sprintf("burst-%d", i))
		if tp == nil || tp.Partitions.Len() != partitions || !ids[tp.ID] {
			t.Fatalf("topic burst-%d in the image: %+v", i, tp)
		}
	}
	checkAnsweredAfterApply(t, images, creates)
	if n := c.inflightCount.Load(); n != 0 {
		t.Fatalf("%d proposals still in flight", n)
	}
}

// Two creations of one name in a burst: the second is decided against the
// first's pending records, so exactly one wins.
func TestPipelinedDuplicateTopicNames(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	registerBroker(t, c, 1)
	const names, tries = 5, 10
	results := make([]kmsg.CreateTopicsResponseTopic, names*tries)
	concurrently(names*tries, func(i int) {
		results[i] = createTopic(t, c, fmt.Sprintf("dup-%d", i%names), 3, 1)
	})
	winners := map[string]protocol.UUID{}
	for _, r := range results {
		switch r.ErrorCode {
		case 0:
			if _, ok := winners[r.Topic]; ok {
				t.Fatalf("%s created twice", r.Topic)
			}
			winners[r.Topic] = r.TopicID
		case kerr.TopicAlreadyExists.Code:
		default:
			t.Fatalf("create %s: %d %v", r.Topic, r.ErrorCode, r.ErrorMessage)
		}
	}
	if len(winners) != names {
		t.Fatalf("%d names created, want %d", len(winners), names)
	}
	for name, id := range winners {
		if tp := c.Image().Topic(name); tp == nil || tp.ID != id {
			t.Fatalf("%s in the image is not the winner's", name)
		}
	}
}

func TestPipelinedProducerIDBlocksNeverOverlap(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	epoch := registerBroker(t, c, 1)
	first := c.Image().NextProducerID
	const n = 100
	starts := make([]int64, n)
	concurrently(n, func(i int) {
		req := kmsg.NewPtrAllocateProducerIDsRequest()
		req.BrokerID, req.BrokerEpoch = 1, epoch
		r := c.AllocateProducerIDs(ctxT(t), req)
		if r.ErrorCode != 0 || r.ProducerIDLen != decide.ProducerIDBlockSize {
			t.Errorf("allocate: %+v", r)
		}
		starts[i] = r.ProducerIDStart
	})
	slices.Sort(starts)
	for i, s := range starts {
		if want := first + int64(i)*decide.ProducerIDBlockSize; s != want {
			t.Fatalf("block %d starts at %d, want %d (blocks %v)", i, s, want, starts)
		}
	}
	if got, want := c.Image().NextProducerID, first+n*decide.ProducerIDBlockSize; got != want {
		t.Fatalf("next producer id %d, want %d", got, want)
	}
}

func registrationReq(id int32, incarnation protocol.UUID) *kmsg.BrokerRegistrationRequest {
	req := reRegistration(id, -1)
	req.IncarnationID = incarnation
	req.Listeners[0].Port = uint16(9092 + id)
	return req
}

// Brokers registering and heartbeating at once all get distinct epochs
// (the offsets of their own registrations) and end unfenced.
func TestPipelinedRegistrationsAndHeartbeats(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	const brokers = 20
	epochs := make([]int64, brokers)
	concurrently(brokers, func(i int) {
		id := int32(i + 1)
		r := c.RegisterBroker(ctxT(t), registrationReq(id, protocol.RandomUUID()))
		if r.ErrorCode != 0 {
			t.Errorf("register %d: %d", id, r.ErrorCode)
			return
		}
		epochs[i] = r.BrokerEpoch
		// Heartbeats until unfenced, each naming the offset this
		// broker has seen, as a broker does.
		for {
			hb := kmsg.NewPtrBrokerHeartbeatRequest()
			hb.BrokerID, hb.BrokerEpoch = id, r.BrokerEpoch
			hb.CurrentMetadataOffset = c.Image().Offset
			h := c.BrokerHeartbeat(ctxT(t), hb)
			if h.ErrorCode != 0 {
				t.Errorf("heartbeat %d: %d", id, h.ErrorCode)
				return
			}
			if !h.IsFenced {
				return
			}
		}
	})
	if t.Failed() {
		return
	}
	img := c.Image()
	seen := map[int64]bool{}
	for i, e := range epochs {
		b := img.Brokers[int32(i+1)]
		if b == nil || b.Epoch != e || b.Fenced {
			t.Fatalf("broker %d in the image: %+v (epoch %d answered)", i+1, b, e)
		}
		if seen[e] {
			t.Fatalf("epoch %d given twice", e)
		}
		seen[e] = true
	}
}

// Incarnations of one broker id registering at once: the first one decided
// has live contact for the later ones (sessions follow the pending image),
// so exactly one is registered.
func TestPipelinedRegistrationsOfOneBroker(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	const n = 10
	incarnations := make([]protocol.UUID, n)
	codes := make([]int16, n)
	epochs := make([]int64, n)
	for i := range n {
		incarnations[i] = protocol.RandomUUID()
	}
	concurrently(n, func(i int) {
		r := c.RegisterBroker(ctxT(t), registrationReq(7, incarnations[i]))
		codes[i], epochs[i] = r.ErrorCode, r.BrokerEpoch
	})
	winner := -1
	for i, code := range codes {
		switch code {
		case 0:
			if winner >= 0 {
				t.Fatalf("incarnations %d and %d both registered", winner, i)
			}
			winner = i
		case kerr.DuplicateBrokerRegistration.Code:
		default:
			t.Fatalf("registration %d: error %d", i, code)
		}
	}
	if winner < 0 {
		t.Fatal("no incarnation registered")
	}
	b := c.Image().Brokers[7]
	if b == nil || b.IncarnationID != incarnations[winner] || b.Epoch != epochs[winner] {
		t.Fatalf("registered broker %+v, winner epoch %d", b, epochs[winner])
	}
}

// A clean restart's registration (naming the old epoch) racing the old
// incarnation's heartbeats: a heartbeat decided before the registration
// succeeds, one decided after it is stale; once the registration is
// answered the old epoch is refused and the new one works.
func TestPipelinedHeartbeatsAcrossReRegistration(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	old := registerBroker(t, c, 1)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hb := kmsg.NewPtrBrokerHeartbeatRequest()
			hb.BrokerID, hb.BrokerEpoch = 1, old
			hb.CurrentMetadataOffset = c.Image().Offset
			if r := c.BrokerHeartbeat(ctxT(t), hb); r.ErrorCode != 0 && r.ErrorCode != kerr.StaleBrokerEpoch.Code {
				t.Errorf("heartbeat with the old epoch: %d", r.ErrorCode)
			}
		}()
	}
	r := c.RegisterBroker(ctxT(t), reRegistration(1, old))
	wg.Wait()
	if r.ErrorCode != 0 || r.BrokerEpoch <= old {
		t.Fatalf("re-registration: %+v", r)
	}
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID, hb.BrokerEpoch = 1, old
	if h := c.BrokerHeartbeat(ctxT(t), hb); h.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("old epoch after re-registration: %d", h.ErrorCode)
	}
	hb.BrokerEpoch = r.BrokerEpoch
	hb.CurrentMetadataOffset = c.Image().Offset
	if h := c.BrokerHeartbeat(ctxT(t), hb); h.ErrorCode != 0 || h.IsFenced {
		t.Fatalf("new epoch: %+v", h)
	}
}

// The leader refuses records that do not apply to the image they were
// decided against instead of writing them, and keeps serving.
func TestLeaderRefusesRecordsThatDoNotApply(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	registerBroker(t, c, 1)
	before := c.Image()
	_, err := c.submit(ctxT(t), func(img *metadata.Image, _ int64) ([]metadata.Record, any) {
		return []metadata.Record{&metadata.PartitionRecord{TopicID: protocol.RandomUUID(), PartitionID: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}, nil
	})
	if err == nil || errorCode(err) != kerr.UnknownServerError.Code {
		t.Fatalf("records for an unknown topic: err %v", err)
	}
	if c.Image() != before || c.Err() != nil {
		t.Fatalf("refused records changed the controller: offset %d, err %v", c.Image().Offset, c.Err())
	}
	if r := createTopic(t, c, "after", 1, 1); r.ErrorCode != 0 {
		t.Fatalf("create after a refusal: %d", r.ErrorCode)
	}
}

// holdLeaderAppends keeps the leader's MsgApp to the followers back (its
// heartbeats still go, so it stays leader), so nothing new commits.
func holdLeaderAppends(net *memNet, leader *Controller) {
	net.holdBack(func(from uint64, m *pb.Message) bool {
		return from == leader.raftID && m.GetType() == pb.MsgApp
	})
}

// More than one proposal is in flight at once: while the followers get no
// appends nothing commits, and the leader keeps deciding and proposing;
// none is answered before its entry commits, and all are once it does.
func TestProposalsPipelineBeforeCommit(t *testing.T) {
	net, nodes := startThreeNodes(t)
	l := waitForLeader(t, net, nodes)
	registerBroker(t, l, 10)
	images := recordImages(t, l)
	holdLeaderAppends(net, l)
	const n = 20
	answers := make(chan createdAt, n)
	for i := range n {
		go func() { answers <- createTopicAt(ctxT(t), l, fmt.Sprintf("piped-%d", i), 2, nil) }()
	}
	waitFor(t, "every creation in flight", func() bool { return l.inflightCount.Load() == n })
	select {
	case a := <-answers:
		t.Fatalf("%s answered before anything committed: %v %d", a.result.Topic, a.err, a.result.ErrorCode)
	default:
	}
	for _, c := range nodes {
		for i := range n {
			if c.Image().Topic(fmt.Sprintf("piped-%d", i)) != nil {
				t.Fatalf("node %d shows an uncommitted topic", c.cfg.NodeID)
			}
		}
	}
	net.release(true)
	var creates []createdAt
	for range n {
		a := <-answers
		if a.err != nil || a.result.ErrorCode != 0 {
			t.Fatalf("create %s: %v %d", a.result.Topic, a.err, a.result.ErrorCode)
		}
		creates = append(creates, a)
	}
	checkAnsweredAfterApply(t, images, creates)
	want := l.Image()
	for _, c := range nodes {
		waitFor(t, "the node's image at the leader's offset", func() bool { return c.Image().Offset >= want.Offset })
		for _, cr := range creates {
			if tp := c.Image().Topic(cr.result.Topic); tp == nil || tp.ID != protocol.UUID(cr.result.TopicID) {
				t.Fatalf("node %d: topic %s missing or different", c.cfg.NodeID, cr.result.Topic)
			}
		}
	}
}

// A leader that loses its quorum with entries in flight fails every one of
// them with NOT_CONTROLLER, including an answer without records decided
// against them; the new leader writes other entries at the same indexes,
// and the old leader, back, has exactly the new leader's image.
func TestLeaderLossFailsEveryPendingWrite(t *testing.T) {
	net, nodes := startThreeNodes(t)
	l := waitForLeader(t, net, nodes)
	registerBroker(t, l, 10)
	holdLeaderAppends(net, l)
	const n = 5
	answers := make(chan createdAt, n+1)
	for i := range n {
		go func() { answers <- createTopicAt(ctxT(t), l, fmt.Sprintf("lost-%d", i), 1, nil) }()
	}
	waitFor(t, "every creation in flight", func() bool { return l.inflightCount.Load() == n })
	// A second creation of a pending topic writes nothing: its
	// TOPIC_ALREADY_EXISTS rests on the pending entry.
	decided := make(chan struct{})
	go func() { answers <- createTopicAt(ctxT(t), l, "lost-0", 1, decided) }()
	<-decided
	firstPending := l.Image().Offset + 1
	net.setDown(l.raftID, true)
	net.release(false)
	for range n + 1 {
		a := <-answers
		if errorCode(a.err) != kerr.NotController.Code {
			t.Fatalf("pending write answered %v (code %d)", a.err, a.result.ErrorCode)
		}
	}
	if got := l.inflightCount.Load(); got != 0 {
		t.Fatalf("%d proposals left in flight", got)
	}
	var others []*Controller
	for _, c := range nodes {
		if c != l {
			others = append(others, c)
		}
	}
	nl := waitForLeader(t, net, others)
	for i := range n + 2 {
		if r := createTopic(t, nl, fmt.Sprintf("new-%d", i), 1, 1); r.ErrorCode != 0 {
			t.Fatalf("create on the new leader: %d", r.ErrorCode)
		}
	}
	if nl.Image().Offset < firstPending+n {
		t.Fatalf("new leader at offset %d did not reach the old pending indexes %d..%d", nl.Image().Offset, firstPending, firstPending+n-1)
	}
	net.setDown(l.raftID, false)
	want := nl.Image()
	waitFor(t, "the old leader's image at the new leader's offset", func() bool { return l.Image().Offset >= want.Offset })
	if l.Image().Offset == want.Offset && imageBytes(l.Image()) != imageBytes(want) {
		t.Fatal("old leader's image differs from the new leader's")
	}
	for _, c := range nodes {
		img := c.Image()
		for i := range n {
			if img.Topic(fmt.Sprintf("lost-%d", i)) != nil {
				t.Fatalf("node %d has topic lost-%d whose creation failed", c.cfg.NodeID, i)
			}
		}
		for i := range n + 2 {
			if c.Image().Offset >= want.Offset && img.Topic(fmt.Sprintf("new-%d", i)) == nil {
				t.Fatalf("node %d lacks new-%d", c.cfg.NodeID, i)
			}
		}
	}
}

// concurrently runs fn(0..n-1) on n goroutines and waits for them all.
func concurrently(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i)
		}()
	}
	wg.Wait()
}
