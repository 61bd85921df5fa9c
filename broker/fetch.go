package broker

// Fetch (key 1), versions 4-18.
//
// The handler resolves the fetch session (fetchsession.go) and the topics
// (by ID from v13), and the replica manager reads whole batches as file
// ranges, which the connection's writer sends (fetch_encode.go; small
// ranges are copied into the response's write, larger ones go by
// sendfile, broker/network's conn.go). A fetch that starts inside
// a batch returns that batch; the first partition with data returns at
// least one batch even when it is larger than the fetch's limits (KIP-74).
// Consumers read up to the high watermark (read_uncommitted) or the last
// stable offset (read_committed); a read_committed partition lists the
// aborted transactions that overlap the batches it returns (from the
// fetch offset to the end of the last batch), so that the consumer drops
// their records; read_uncommitted sends the list as null. Long polling: when less than MinBytes is
// available and nothing failed, the fetch waits in the replica manager's
// purgatory until an append or a leadership change completes it or
// MaxWaitMillis passes; no goroutine waits for it.
//
// Authorization: a consumer needs READ on each topic it fetches
// (TOPIC_AUTHORIZATION_FAILED for the partitions of the others, whether
// they exist or not), a follower CLUSTER_ACTION on the cluster (all its
// partitions fail without it).
//
// Followers fetch with their broker id (ReplicaID, or ReplicaState from
// v15) and read up to the leader's log end; their last fetched epoch
// (v12+) is checked against the leader's epochs, and a follower whose log
// diverged gets DivergingEpoch instead of records (replica/replication.go).
//
// From v11 consumers may fetch from followers (KIP-392): a follower serves
// them below its own high watermark. With replica.selector.class set to
// Kafka's RackAwareReplicaSelector, a leader points a consumer whose
// client.rack names another replica's rack at that replica
// (PreferredReadReplica, no records); a consumer's last fetched epoch
// (v12+) is checked for divergence as a follower's is.

import (
	"context"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/broker/quota"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
	// replicaID is the follower's broker id for a follower's fetch (-1
	// for a consumer); replicaEpoch its broker epoch (v15+).
	replicaID    int32
	replicaEpoch int64
	// rack is the consumer's client.rack (v11+).
	rack string
}

func (b *Broker) handleFetch(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.FetchRequest)
	c := &fetchCall{b: b, r: r}
	plan := &c.plan
	errCode := b.planFetch(plan, req, r.Version())
	if errCode != 0 {
		r.RespondChunks(encodeFetchResponse(&fetchResponseBody{errorCode: errCode}, r.Version(), protocol.ResponseHeaderSize(r.Header.Flexible)))
		return
	}
	plan.listener = r.Listener()
	if plan.replicaID == replica.ConsumerReplicaID && b.quotas.Enabled(quota.Fetch) {
		// A consumer never asks for more than its quota lets through in
		// one go: more would be throttled whatever it did before.
		if most, ok := b.quotas.MaxValueInWindow(quota.Fetch, r.Principal().Name, r.Header.ClientID); ok && most < float64(plan.maxBytes) {
			plan.maxBytes = int32(most)
			plan.minBytes = min(plan.minBytes, plan.maxBytes)
		}
	}
	c.img = b.meta.Image()
	// A follower needs CLUSTER_ACTION for all it fetches; a consumer READ
	// on each topic (asked once per run of the same topic).
	followerDenied := b.authz != nil && plan.replicaID >= 0 && !b.clusterAllowed(identityOf(r), kmsg.ACLOperationClusterAction)
	var lastTopic string
	lastAllowed := true
	entries := make([]replica.FetchEntry, len(plan.items))
	for i, it := range plan.items {
		e := &entries[i]
		e.TopicPartition.Partition = it.key.partition
		e.FetchOffset, e.MaxBytes, e.CurrentLeaderEpoch, e.LastFetchedEpoch = it.fetchOffset, it.maxBytes, it.currentEpoch, it.lastFetchedEpoch
		e.LogStartOffset = it.logStartOffset
		e.HasLastFetchedEpoch = plan.version >= 12 && it.lastFetchedEpoch >= 0
		if followerDenied {
			e.Result.Err = kerr.TopicAuthorizationFailed
			continue
		}
		name := it.key.topic
		if plan.version >= 13 {
			t := c.img.TopicByID(protocol.UUID(it.key.topicID))
			if t == nil {
				e.Result.Err = kerr.UnknownTopicID
				continue
			}
			name = t.Name
		}
		e.TopicPartition.Topic = name
		if b.authz != nil && plan.replicaID < 0 {
			if i == 0 || name != lastTopic {
				lastTopic, lastAllowed = name, b.can(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, name)
			}
			if !lastAllowed {
				e.Result.Err = kerr.TopicAuthorizationFailed
			}
		}
	}
	isolation := replica.ReadUncommitted
	if plan.readCommitted {
		isolation = replica.ReadCommitted
	}
	b.replicas.Fetch(replica.FetchParams{
		ReplicaID:    plan.replicaID,
		ReplicaEpoch: plan.replicaEpoch,
		MaxWait:      plan.maxWait,
		MinBytes:     plan.minBytes,
		MaxBytes:     plan.maxBytes,
		Isolation:    isolation,
	}, entries, c)
}

// fetchCall is one fetch on its way through the replica manager, which
// answers it at once or once it has waited (woken by an append, a
// leadership change or its MaxWait).
type fetchCall struct {
	b    *Broker
	r    *network.Request
	plan fetchPlan
	img  *metadata.Image
}

func (c *fetchCall) FetchCompleted(entries []replica.FetchEntry) {
	c.b.respondFetch(c.r, &c.plan, c.img, entries)
}

// planFetch decodes a fetch into plan and resolves its session.
func (b *Broker) planFetch(plan *fetchPlan, req *kmsg.FetchRequest, v int16) int16 {
	*plan = fetchPlan{
		version:       v,
		readCommitted: req.IsolationLevel == 1,
		maxBytes:      req.MaxBytes,
		minBytes:      req.MinBytes,
		maxWait:       time.Duration(req.MaxWaitMillis) * time.Millisecond,
		replicaID:     req.ReplicaID,
		replicaEpoch:  -1,
		rack:          req.Rack,
	}
	if v >= 15 {
		plan.replicaID, plan.replicaEpoch = req.ReplicaState.ID, req.ReplicaState.Epoch
	}
	if plan.replicaID < 0 {
		// Consumers; the debugging replica id (-2) reads as one too.
		plan.replicaID = replica.ConsumerReplicaID
	}
	sr := sessionRequest{version: v, id: req.SessionID, epoch: req.SessionEpoch}
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	if n > 0 {
		sr.items = make([]fetchItem, 0, n)
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			sr.items = append(sr.items, fetchItem{
				key:              newSessionKey(v, t.Topic, t.TopicID, p.Partition),
				fetchOffset:      p.FetchOffset,
				maxBytes:         p.PartitionMaxBytes,
				currentEpoch:     p.CurrentLeaderEpoch,
				lastFetchedEpoch: p.LastFetchedEpoch,
				logStartOffset:   p.LogStartOffset,
			})
		}
	}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			sr.forgotten = append(sr.forgotten, newSessionKey(v, ft.Topic, ft.TopicID, p))
		}
	}
	var errCode int16
	plan.session, plan.items, plan.full, errCode = b.sessions.open(sr)
	return errCode
}

// respondFetch builds the response: every item for a full fetch, only the
// partitions with news for an incremental one, and updates the session.
func (b *Broker) respondFetch(r *network.Request, plan *fetchPlan, img *metadata.Image, entries []replica.FetchEntry) {
	results := make([]fetchPartitionResult, len(entries))
	for i := range entries {
		results[i] = fetchResult(plan, &entries[i])
	}
	if plan.replicaID == replica.ConsumerReplicaID && b.quotas.Active() && !r.QuotaExempt() {
		b.respondFetchQuota(r, plan, img, entries, results)
		return
	}
	var include []bool
	var body fetchResponseBody
	if plan.session != nil {
		body.sessionID = plan.session.id
		include = b.sessions.respond(plan.session, plan.full, plan.items, results, true)
	}
	b.countBytesOut(plan, entries, include)
	// A fetch of one topic keeps its topic list on the stack.
	var oneTopic [1]fetchTopicResult
	var leaders map[int32]bool
	body.topics, leaders = gatherFetchTopics(oneTopic[:0], plan, results, include)
	body.nodeEndpoints = b.fetchNodeEndpoints(plan, img, leaders)
	r.RespondChunks(encodeFetchResponse(&body, plan.version, protocol.ResponseHeaderSize(r.Header.Flexible)))
}

// respondFetchQuota answers a consumer's fetch while quotas exist, as
// Kafka's handleFetchRequest does: the response's size and the handler's
// time count against the client's consumer_byte_rate and
// request_percentage; when either throttles, the answer is empty (no
// partitions, the session left as it was, the bytes not counted) and
// carries the throttle time, and the connection is muted for it.
func (b *Broker) respondFetchQuota(r *network.Request, plan *fetchPlan, img *metadata.Image, entries []replica.FetchEntry, results []fetchPartitionResult) {
	var include []bool
	if plan.session != nil {
		// What the session would send, without changing it yet.
		include = b.sessions.respond(plan.session, plan.full, plan.items, results, false)
	}
	var body fetchResponseBody
	b.fillFetchBody(&body, plan, img, results, include)
	room := protocol.ResponseHeaderSize(r.Header.Flexible)
	chunks := encodeFetchResponse(&body, plan.version, room)
	// Kafka counts the response's size prefix and body
	// (FetchResponse.sizeOf), not the response header.
	size := int64(4 - room)
	for _, ch := range chunks {
		size += int64(len(ch.Bytes)) + ch.File.Size
	}
	user, client := r.Principal().Name, r.Header.ClientID
	requestThrottle := r.RequestThrottle()
	var bandwidthThrottle int32
	if b.quotas.Enabled(quota.Fetch) {
		bandwidthThrottle = b.quotas.Record(quota.Fetch, user, client, float64(size))
	}
	throttle := max(requestThrottle, bandwidthThrottle)
	if throttle > 0 {
		b.quotas.ThrottledByLonger(quota.Fetch, user, client, bandwidthThrottle, requestThrottle)
		if b.quotas.Enabled(quota.Fetch) {
			b.quotas.Unrecord(quota.Fetch, user, client, float64(size))
		}
		network.ReleaseChunks(chunks)
		empty := fetchResponseBody{throttleMillis: throttle}
		if plan.session != nil {
			empty.sessionID = plan.session.id
		}
		r.Mute(throttle)
		r.RespondChunks(encodeFetchResponse(&empty, plan.version, room))
		return
	}
	if plan.session != nil {
		b.sessions.respond(plan.session, plan.full, plan.items, results, true)
	}
	b.countBytesOut(plan, entries, include)
	r.RespondChunks(chunks)
}

// countBytesOut counts the records a fetch answer carries (the partitions
// include marks, or all): a consumer's per topic and for all topics, a
// follower's as replication (Kafka's BrokerTopicStats.updateBytesOut).
func (b *Broker) countBytesOut(plan *fetchPlan, entries []replica.FetchEntry, include []bool) {
	for i := range entries {
		size := entries[i].Result.Records.Size
		if size == 0 || (include != nil && !include[i]) {
			continue
		}
		b.replicas.CountBytesOut(entries[i].TopicPartition.Topic, plan.replicaID >= 0, uint64(size))
	}
}

// fillFetchBody gathers the results to send (all, or those include
// marks) into the response body; the ranges of the others are let go.
// body.topics may start on the caller's stack.
func (b *Broker) fillFetchBody(body *fetchResponseBody, plan *fetchPlan, img *metadata.Image, results []fetchPartitionResult, include []bool) {
	if plan.session != nil {
		body.sessionID = plan.session.id
	}
	var leaders map[int32]bool
	body.topics, leaders = gatherFetchTopics(body.topics, plan, results, include)
	body.nodeEndpoints = b.fetchNodeEndpoints(plan, img, leaders)
}

// fetchNodeEndpoints are the endpoints of the leaders a response points
// to (v16+).
func (b *Broker) fetchNodeEndpoints(plan *fetchPlan, img *metadata.Image, leaders map[int32]bool) []nodeEndpoint {
	if plan.version < 16 || len(leaders) == 0 {
		return nil
	}
	var out []nodeEndpoint
	for _, e := range b.nodeEndpoints(img, plan.listener, leaders) {
		out = append(out, nodeEndpoint{nodeID: e.NodeID, host: e.Host, port: e.Port, rack: e.Rack})
	}
	return out
}

// gatherFetchTopics appends the results sent to topics: they move to the
// front of results, in order, and each topic's partitions are a run of
// them (the body copies nothing). It returns the leaders the results
// point to.
func gatherFetchTopics(topics []fetchTopicResult, plan *fetchPlan, results []fetchPartitionResult, include []bool) ([]fetchTopicResult, map[int32]bool) {
	var leaders map[int32]bool
	kept := 0
	for i, it := range plan.items {
		if include != nil && !include[i] {
			// Not sent (unchanged, or forgotten by a concurrent
			// request meanwhile): its range, if any, is let go.
			results[i].records.Release()
			continue
		}
		results[kept] = results[i]
		if id := results[kept].currentLeaderID; id >= 0 {
			if leaders == nil {
				leaders = map[int32]bool{}
			}
			leaders[id] = true
		}
		n := len(topics)
		if n == 0 || topics[n-1].id != it.key.topicID || topics[n-1].name != it.key.topic {
			topics = append(topics, fetchTopicResult{name: it.key.topic, id: it.key.topicID, partitions: results[kept:kept]})
			n++
		}
		t := &topics[n-1]
		t.partitions = t.partitions[:len(t.partitions)+1]
		kept++
	}
	return topics, leaders
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
	if plan.readCommitted {
		pr.abortedTxns = res.AbortedTransactions
	}
	pr.records = res.Records
	pr.preferredReadReplica = res.PreferredReadReplica
	if res.Diverging.Epoch >= 0 || res.Diverging.EndOffset >= 0 {
		pr.divergingEpoch, pr.divergingEndOffset = res.Diverging.Epoch, res.Diverging.EndOffset
	}
	return pr
}

func init() {
	register(api{
		key: kmsg.Fetch, min: 4, max: 18,
		listeners:    clientListeners,
		authorizedAs: "READ on each topic; CLUSTER_ACTION for a follower",
		handle:       (*Broker).handleFetch,
	})
}
