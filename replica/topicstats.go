package replica

import (
	"sync"

	"github.com/gregorbroker/gregor/metrics"
	"github.com/twmb/franz-go/pkg/kerr"
)

// topicMeters are one topic's counts (Kafka's BrokerTopicMetrics meters).
type topicMeters struct {
	messagesIn, bytesIn, bytesOut, totalProduce, failedProduce, totalFetch, failedFetch metrics.Counter
	totalShareFetch, failedShareFetch, totalShareAck, failedShareAck                    metrics.Counter
}

// topicStats are the topic meters, by topic and for all topics: each event
// is counted on both, as Kafka's BrokerTopicStats marks a topic's meter and
// the all-topics one. A topic's meters go when the topic is no longer in
// the image (Kafka removes a deleted topic's metrics).
type topicStats struct {
	mu     sync.RWMutex // leaf
	topics map[string]*topicMeters
	all    topicMeters
	// replicationBytesOut is the records sent to followers (all topics
	// only, as Kafka keeps it).
	replicationBytesOut metrics.Counter
}

// of is topic's meters: one map lookup under a read lock on the append
// and read paths, a write lock the first time a topic is seen.
func (s *topicStats) of(topic string) *topicMeters {
	s.mu.RLock()
	t := s.topics[topic]
	s.mu.RUnlock()
	if t != nil {
		return t
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t = s.topics[topic]; t == nil {
		if s.topics == nil {
			s.topics = map[string]*topicMeters{}
		}
		t = &topicMeters{}
		s.topics[topic] = t
	}
	return t
}

// expectedProduceError reports whether an append failure is one Kafka
// does not count as a failed produce (ReplicaManager.appendToLocalLog): what
// a client expects and handles by retrying elsewhere or splitting.
func expectedProduceError(ke *kerr.Error) bool {
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotLeaderForPartition, kerr.MessageTooLarge,
		kerr.RecordListTooLarge, kerr.CorruptMessage, kerr.KafkaStorageError:
		return true
	}
	return false
}

// expectedFetchError is the same for a partition read
// (ReplicaManager.readFromLog).
func expectedFetchError(ke *kerr.Error) bool {
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotLeaderForPartition, kerr.UnknownLeaderEpoch,
		kerr.FencedLeaderEpoch, kerr.ReplicaNotAvailable, kerr.KafkaStorageError,
		kerr.OffsetOutOfRange, kerr.InconsistentTopicID:
		return true
	}
	return false
}

// produced counts one partition append of topic: its outcome ke (nil on
// success) and, on success, the records and bytes appended.
func (s *topicStats) produced(topic string, ke *kerr.Error, records, bytes uint64) {
	t := s.of(topic)
	t.totalProduce.Inc()
	s.all.totalProduce.Inc()
	switch {
	case ke == nil:
		t.messagesIn.Add(records)
		s.all.messagesIn.Add(records)
		t.bytesIn.Add(bytes)
		s.all.bytesIn.Add(bytes)
	case !expectedProduceError(ke):
		t.failedProduce.Inc()
		s.all.failedProduce.Inc()
	}
}

// fetched counts one partition read of topic with its outcome.
func (s *topicStats) fetched(topic string, ke *kerr.Error) {
	t := s.of(topic)
	t.totalFetch.Inc()
	s.all.totalFetch.Inc()
	if ke != nil && !expectedFetchError(ke) {
		t.failedFetch.Inc()
		s.all.failedFetch.Inc()
	}
}

// CountShareFetch counts a ShareFetch request that asked for records of
// topic, and whether a partition of it was answered with an error (Kafka
// marks the topic's meters once a request: SharePartitionManager and
// ShareFetch).
func (m *Manager) CountShareFetch(topic string, failed bool) {
	m.stats.count(topic, failed, totalShareFetch, failedShareFetch)
}

// CountShareAcknowledgement counts a request that acknowledged records of
// topic, and whether an acknowledgement of a partition of it was refused.
func (m *Manager) CountShareAcknowledgement(topic string, failed bool) {
	m.stats.count(topic, failed, totalShareAck, failedShareAck)
}

// count marks total, and failed when it failed, for topic and all topics.
func (s *topicStats) count(topic string, failed bool, total, failures func(*topicMeters) *metrics.Counter) {
	t := s.of(topic)
	total(t).Inc()
	total(&s.all).Inc()
	if failed {
		failures(t).Inc()
		failures(&s.all).Inc()
	}
}

// CountBytesOut counts the bytes of records a fetch answer carried for
// topic: a consumer's per topic and for all topics, a follower's as
// replication (Kafka's BrokerTopicStats.updateBytesOut).
func (m *Manager) CountBytesOut(topic string, follower bool, bytes uint64) {
	s := &m.stats
	if follower {
		s.replicationBytesOut.Add(bytes)
		return
	}
	s.of(topic).bytesOut.Add(bytes)
	s.all.bytesOut.Add(bytes)
}

func messagesIn(t *topicMeters) *metrics.Counter       { return &t.messagesIn }
func bytesOut(t *topicMeters) *metrics.Counter         { return &t.bytesOut }
func bytesIn(t *topicMeters) *metrics.Counter          { return &t.bytesIn }
func totalProduce(t *topicMeters) *metrics.Counter     { return &t.totalProduce }
func failedProduce(t *topicMeters) *metrics.Counter    { return &t.failedProduce }
func totalFetch(t *topicMeters) *metrics.Counter       { return &t.totalFetch }
func failedFetch(t *topicMeters) *metrics.Counter      { return &t.failedFetch }
func totalShareFetch(t *topicMeters) *metrics.Counter  { return &t.totalShareFetch }
func failedShareFetch(t *topicMeters) *metrics.Counter { return &t.failedShareFetch }
func totalShareAck(t *topicMeters) *metrics.Counter    { return &t.totalShareAck }
func failedShareAck(t *topicMeters) *metrics.Counter   { return &t.failedShareAck }

// register registers the meters, and forgets at each scrape the topics
// exists refuses.
func (s *topicStats) register(r *metrics.Registry, exists func(topic string) bool) {
	r.OnScrape(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for topic := range s.topics {
			if !exists(topic) {
				delete(s.topics, topic)
			}
		}
	})
	r.RegisterCounter(metrics.ReplicationBytesOut, &s.replicationBytesOut)
	for d, pick := range map[*metrics.Desc]func(*topicMeters) *metrics.Counter{
		metrics.MessagesIn: messagesIn, metrics.BytesIn: bytesIn, metrics.BytesOut: bytesOut,
		metrics.TotalProduceRequests: totalProduce, metrics.FailedProduceRequests: failedProduce,
		metrics.TotalFetchRequests: totalFetch, metrics.FailedFetchRequests: failedFetch,
		metrics.TotalShareFetchRequests: totalShareFetch, metrics.FailedShareFetchRequests: failedShareFetch,
		metrics.TotalShareAcknowledgementRequests: totalShareAck, metrics.FailedShareAcknowledgementRequests: failedShareAck,
	} {
		r.Collect(d, func(emit *metrics.Emit) {
			emit.Add(float64(pick(&s.all).Value()), "")
			s.mu.RLock()
			defer s.mu.RUnlock()
			for topic, t := range s.topics {
				emit.Add(float64(pick(t).Value()), topic)
			}
		})
	}
}
