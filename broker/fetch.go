package broker

// Fetch (key 1), versions 4-18.
//
// Reads whole batches from the partition logs and sends them with sendfile
// (fetch_encode.go). A fetch that starts inside a batch returns that batch;
// the first partition with data returns at least one batch even when it is
// larger than the fetch's limits (KIP-74). Consumers read up to the high
// watermark (read_uncommitted) or the last stable offset (read_committed).
// Long polling: when less than MinBytes is available and nothing failed,
// the request parks until an append wakes it or MaxWaitMillis passes.
// Incremental fetch sessions are in fetchsession.go. Topic IDs from v13.
//
// Deliberate deviations until later issues: follower fetches (replication)
// and preferred read replicas (KIP-392) are not served; every partition
// here has this node as its only in-sync replica.

import (
	"context"
	"time"

	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/storage"
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

	res := b.readFetch(plan)
	if res.done(plan) {
		b.respondFetch(r, plan, res)
		return
	}
	res.release()
	// Park until enough data arrives or the wait ends. The wait runs off
	// the reader goroutine so the connection keeps reading.
	r.goAsync(func() {
		wake := make(chan struct{}, 1)
		var parts []*partition
		for _, it := range plan.items {
			if p := b.fetchPartitionFor(it.key); p != nil {
				p.addWaiter(wake)
				parts = append(parts, p)
			}
		}
		defer func() {
			for _, p := range parts {
				p.removeWaiter(wake)
			}
		}()
		timer := time.NewTimer(plan.maxWait)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
				b.respondFetch(r, plan, b.readFetch(plan))
				return
			case <-wake:
				res := b.readFetch(plan)
				if res.done(plan) {
					b.respondFetch(r, plan, res)
					return
				}
				res.release() // not enough yet: read again on the next wake
			}
		}
	})
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

// fetchRead is the outcome of reading every planned partition once.
type fetchRead struct {
	results  []fetchPartitionResult
	bytes    int64
	anyError bool
}

// release gives back the file ranges of a read that is not sent.
func (res *fetchRead) release() {
	for i := range res.results {
		res.results[i].records.Release()
	}
}

func (res *fetchRead) done(plan *fetchPlan) bool {
	return plan.maxWait <= 0 || len(plan.items) == 0 || res.anyError || res.bytes >= int64(plan.minBytes)
}

// fetchPartitionFor returns the hosted partition for a session key.
func (b *Broker) fetchPartitionFor(key sessionKey) *partition {
	name := key.topic
	if name == "" {
		t := b.ctrl.Image().TopicsByID[controller.UUID(key.topicID)]
		if t == nil {
			return nil
		}
		name = t.Name
	}
	return b.replicas.get(storage.TopicPartition{Topic: name, Partition: key.partition})
}

// readFetch reads every planned partition, honouring the response's byte
// budget and giving the first partition with data the KIP-74 guarantee.
func (b *Broker) readFetch(plan *fetchPlan) *fetchRead {
	img := b.ctrl.Image()
	res := &fetchRead{results: make([]fetchPartitionResult, len(plan.items))}
	budget := int64(plan.maxBytes)
	minOne := true
	for i, it := range plan.items {
		pr := b.readPartition(img, plan, it, &budget, &minOne)
		if pr.errorCode != 0 {
			res.anyError = true
		}
		res.bytes += pr.records.Size
		res.results[i] = pr
	}
	return res
}

func (b *Broker) readPartition(img *controller.Image, plan *fetchPlan, it fetchItem, budget *int64, minOne *bool) fetchPartitionResult {
	pr := newFetchPartitionResult(it.key.partition)
	var topic *controller.Topic
	if plan.version >= 13 {
		topic = img.TopicsByID[controller.UUID(it.key.topicID)]
		if topic == nil {
			pr.errorCode = kerr.UnknownTopicID.Code
			return pr
		}
	} else if topic = img.Topics[it.key.topic]; topic == nil {
		pr.errorCode = kerr.UnknownTopicOrPartition.Code
		return pr
	}
	if it.key.partition < 0 || int(it.key.partition) >= len(topic.Partitions) {
		pr.errorCode = kerr.UnknownTopicOrPartition.Code
		return pr
	}
	meta := topic.Partitions[it.key.partition]
	part := b.replicas.get(storage.TopicPartition{Topic: topic.Name, Partition: it.key.partition})
	leader, epoch := int32(-1), int32(-1)
	if part != nil {
		leader, epoch = part.leadership()
	}
	if part == nil || leader != b.opts.NodeID {
		pr.errorCode = kerr.NotLeaderForPartition.Code
		pr.currentLeaderID, pr.currentLeaderEpoch = meta.Leader, meta.LeaderEpoch
		return pr
	}
	if it.currentEpoch >= 0 {
		if it.currentEpoch > epoch {
			pr.errorCode = kerr.UnknownLeaderEpoch.Code
			return pr
		}
		if it.currentEpoch < epoch {
			pr.errorCode = kerr.FencedLeaderEpoch.Code
			pr.currentLeaderID, pr.currentLeaderEpoch = leader, epoch
			return pr
		}
	}
	l := part.log
	hw := l.HighWatermark()
	pr.highWatermark = hw
	pr.lastStableOffset = hw
	pr.logStartOffset = l.LogStartOffset()
	if plan.readCommitted {
		pr.abortedTxnsNonNull = true
	}
	limit := int64(it.maxBytes)
	if *budget < limit {
		limit = *budget
	}
	if limit < 0 {
		limit = 0
	}
	fr, err := l.Read(it.fetchOffset, int32(limit), hw, *minOne)
	if err != nil {
		pr.errorCode = codeOf(err)
		if pr.errorCode == kerr.UnknownServerError.Code {
			pr.errorCode = kerr.KafkaStorageError.Code
		}
		return pr
	}
	if fr.Size > 0 {
		pr.records = fr
		*budget -= fr.Size
		*minOne = false
	}
	return pr
}

// respondFetch builds the response: every item for a full fetch, only the
// partitions with news for an incremental one, and updates the session.
func (b *Broker) respondFetch(r *request, plan *fetchPlan, res *fetchRead) {
	body := &fetchResponseBody{}
	img := b.ctrl.Image()
	var include []bool
	if plan.session != nil {
		body.sessionID = plan.session.id
		b.sessions.mu.Lock()
		include = make([]bool, len(plan.items))
		moved := map[sessionKey]bool{}
		for i, it := range plan.items {
			pr := &res.results[i]
			sp := plan.session.parts[it.key]
			if sp == nil { // forgotten meanwhile by a concurrent request
				pr.records.Release()
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
			res.results[i].records.Release() // holds nothing today: unchanged partitions have no records
			continue
		}
		pr := res.results[i]
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
