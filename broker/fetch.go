package broker

// Fetch (key 1), versions 4-18.
//
// The handler resolves the fetch session (fetchsession.go) and the topics
// (by ID from v13), and the replica manager reads whole batches as file
// ranges, sent with sendfile (fetch_encode.go). A fetch that starts inside
// a batch returns that batch; the first partition with data returns at
// least one batch even when it is larger than the fetch's limits (KIP-74).
// Consumers read up to the high watermark (read_uncommitted) or the last
// stable offset (read_committed). Long polling: when less than MinBytes is
// available and nothing failed, the fetch waits in the replica manager's
// purgatory until an append or a leadership change completes it or
// MaxWaitMillis passes; no goroutine waits for it.
//
// Deliberate deviations until later issues: follower fetches (replication)
// and preferred read replicas (KIP-392) are not served; every partition
// here has this node as its only in-sync replica.

import (
	"context"
	"time"

	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchItem is one partition to read in this request.
type fetchItem struct {
	key          sessionKey
	fetchOffset  int64
	maxBytes     int32
	currentEpoch int32
}

// fetchPlan is a decoded fetch: what to read and how to answer.
type fetchPlan struct {
	version       int16
	items         []fetchItem
	session       *fetchSession // nil for a sessionless fetch
	full          bool          // respond with every item (not incremental)
	readCommitted bool
	maxBytes      int32
	minBytes      int32
	maxWait       time.Duration
	listener      string
}

func (b *Broker) handleFetch(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.FetchRequest)
	plan, errCode := b.planFetch(req, r.version())
	if errCode != 0 {
		r.respondChunks(encodeFetchResponse(&fetchResponseBody{errorCode: errCode}, r.version()))
		return
	}
	plan.listener = r.conn.listener.Name
	c := &fetchCall{b: b, r: r, plan: plan, img: b.meta.Image()}
	entries := make([]replica.FetchEntry, len(plan.items))
	for i, it := range plan.items {
		e := &entries[i]
		e.TopicPartition.Partition = it.key.partition
		e.FetchOffset, e.MaxBytes, e.CurrentLeaderEpoch = it.fetchOffset, it.maxBytes, it.currentEpoch
		name := it.key.topic
		if plan.version >= 13 {
			t := c.img.TopicsByID[controller.UUID(it.key.topicID)]
			if t == nil {
				e.Result.Err = kerr.UnknownTopicID
				continue
			}
			name = t.Name
		}
		e.TopicPartition.Topic = name
	}
	isolation := replica.ReadUncommitted
	if plan.readCommitted {
		isolation = replica.ReadCommitted
	}
	b.replicas.Fetch(replica.FetchParams{
		ReplicaID: replica.ConsumerReplicaID,
		MaxWait:   plan.maxWait,
		MinBytes:  plan.minBytes,
		MaxBytes:  plan.maxBytes,
		Isolation: isolation,
	}, entries, c)
}

// fetchCall is one fetch on its way through the replica manager, which
// answers it at once or once it has waited (woken by an append, a
// leadership change or its MaxWait).
type fetchCall struct {
	b    *Broker
	r    *request
	plan *fetchPlan
	img  *controller.Image
}

func (c *fetchCall) FetchCompleted(entries []replica.FetchEntry) {
	c.b.respondFetch(c.r, c.plan, c.img, entries)
}

// planFetch resolves the fetch session and lists the partitions to read.
func (b *Broker) planFetch(req *kmsg.FetchRequest, v int16) (*fetchPlan, int16) {
	plan := &fetchPlan{
		version:       v,
		readCommitted: req.IsolationLevel == 1,
		maxBytes:      req.MaxBytes,
		minBytes:      req.MinBytes,
		maxWait:       time.Duration(req.MaxWaitMillis) * time.Millisecond,
	}
	useIDs := v >= 13
	keyOf := func(topic string, id [16]byte, partition int32) sessionKey {
		if useIDs {
			return sessionKey{topicID: id, partition: partition}
		}
		return sessionKey{topic: topic, partition: partition}
	}
	var reqItems []fetchItem
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			reqItems = append(reqItems, fetchItem{
				key:          keyOf(t.Topic, t.TopicID, p.Partition),
				fetchOffset:  p.FetchOffset,
				maxBytes:     p.PartitionMaxBytes,
				currentEpoch: p.CurrentLeaderEpoch,
			})
		}
	}

	switch {
	case v < 7 || (req.SessionID == 0 && req.SessionEpoch == sessionEpochFinal):
		// Sessionless full fetch.
		plan.items, plan.full = reqItems, true
		return plan, 0
	case req.SessionEpoch == sessionEpochFinal:
		// Close the session and do a sessionless full fetch.
		b.sessions.remove(req.SessionID)
		plan.items, plan.full = reqItems, true
		return plan, 0
	case req.SessionEpoch == sessionEpochInitial:
		if req.SessionID != 0 {
			b.sessions.remove(req.SessionID)
		}
		plan.items, plan.full = reqItems, true
		if len(reqItems) == 0 {
			return plan, 0
		}
		s := b.sessions.create(useIDs)
		if s == nil {
			return plan, 0 // no room: sessionless
		}
		b.sessions.mu.Lock()
		for _, it := range reqItems {
			s.upsert(sessionPartition{key: it.key, fetchOffset: it.fetchOffset, maxBytes: it.maxBytes, currentEpoch: it.currentEpoch})
		}
		b.sessions.mu.Unlock()
		plan.session = s
		return plan, 0
	case req.SessionID == 0:
		return nil, kerr.InvalidFetchSessionEpoch.Code
	}

	s := b.sessions.get(req.SessionID)
	if s == nil {
		return nil, kerr.FetchSessionIDNotFound.Code
	}
	b.sessions.mu.Lock()
	defer b.sessions.mu.Unlock()
	if s.epoch != req.SessionEpoch {
		return nil, kerr.InvalidFetchSessionEpoch.Code
	}
	if s.usesTopicIDs != useIDs {
		return nil, kerr.FetchSessionTopicIDError.Code
	}
	for _, it := range reqItems {
		s.upsert(sessionPartition{key: it.key, fetchOffset: it.fetchOffset, maxBytes: it.maxBytes, currentEpoch: it.currentEpoch})
	}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			s.forget(keyOf(ft.Topic, ft.TopicID, p))
		}
	}
	s.epoch = nextSessionEpoch(s.epoch)
	for _, k := range s.order {
		sp := s.parts[k]
		plan.items = append(plan.items, fetchItem{key: k, fetchOffset: sp.fetchOffset, maxBytes: sp.maxBytes, currentEpoch: sp.currentEpoch})
	}
	plan.session = s
	return plan, 0
}

func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// respondFetch builds the response: every item for a full fetch, only the
// partitions with news for an incremental one, and updates the session.
func (b *Broker) respondFetch(r *request, plan *fetchPlan, img *controller.Image, entries []replica.FetchEntry) {
	body := &fetchResponseBody{}
	results := make([]fetchPartitionResult, len(entries))
	for i := range entries {
		results[i] = fetchResult(plan, &entries[i])
	}
	var include []bool
	if plan.session != nil {
		body.sessionID = plan.session.id
		b.sessions.mu.Lock()
		include = make([]bool, len(plan.items))
		moved := map[sessionKey]bool{}
		for i, it := range plan.items {
			pr := &results[i]
			sp := plan.session.parts[it.key]
			if sp == nil { // forgotten meanwhile by a concurrent request
				continue
			}
			changed := plan.full || pr.records.Size > 0 || pr.errorCode != 0 ||
				pr.highWatermark != sp.sentHighWatermark || pr.lastStableOffset != sp.sentLastStable ||
				pr.logStartOffset != sp.sentLogStart || pr.currentLeaderID != -1
			if changed {
				include[i] = true
				sp.sentHighWatermark, sp.sentLastStable, sp.sentLogStart = pr.highWatermark, pr.lastStableOffset, pr.logStartOffset
			}
			if pr.records.Size > 0 {
				moved[it.key] = true
			}
		}
		if !plan.full {
			plan.session.moveToEnd(moved)
		}
		b.sessions.mu.Unlock()
	}
	leaders := map[int32]bool{}
	for i, it := range plan.items {
		if include != nil && !include[i] {
			continue
		}
		pr := results[i]
		if pr.currentLeaderID >= 0 {
			leaders[pr.currentLeaderID] = true
		}
		n := len(body.topics)
		if n == 0 || body.topics[n-1].id != it.key.topicID || body.topics[n-1].name != it.key.topic {
			t := fetchTopicResult{name: it.key.topic, id: it.key.topicID}
			body.topics = append(body.topics, t)
			n++
		}
		body.topics[n-1].partitions = append(body.topics[n-1].partitions, pr)
	}
	if plan.version >= 16 && len(leaders) > 0 {
		for _, e := range b.nodeEndpoints(img, plan.listener, leaders) {
			body.nodeEndpoints = append(body.nodeEndpoints, nodeEndpoint{nodeID: e.NodeID, host: e.Host, port: e.Port, rack: e.Rack})
		}
	}
	r.respondChunks(encodeFetchResponse(body, plan.version))
}

// fetchResult is one partition of the response.
func fetchResult(plan *fetchPlan, e *replica.FetchEntry) fetchPartitionResult {
	pr := newFetchPartitionResult(e.TopicPartition.Partition)
	res := &e.Result
	if res.Err != nil {
		pr.errorCode = res.Err.Code
		pr.currentLeaderID, pr.currentLeaderEpoch = res.CurrentLeader.ID, res.CurrentLeader.Epoch
		return pr
	}
	pr.highWatermark, pr.lastStableOffset, pr.logStartOffset = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
	pr.abortedTxnsNonNull = plan.readCommitted
	pr.records = res.Records
	return pr
}
