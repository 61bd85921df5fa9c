package tiered

import (
	"sync"
	"sync/atomic"
)

// TopicMetrics are one topic's tiered storage counters, as Kafka's
// BrokerTopicMetrics has them (RemoteCopyBytesPerSec and the others).
type TopicMetrics struct {
	CopyBytes, CopyRequests, FailedCopyRequests    atomic.Int64
	FetchBytes, FetchRequests, FailedFetchRequests atomic.Int64
	DeleteRequests                                 atomic.Int64
}

// Metrics are the manager's counters per topic; mu guards the map (a
// leaf).
type Metrics struct {
	mu     sync.Mutex
	topics map[string]*TopicMetrics
}

func (m *Metrics) topic(name string) *TopicMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.topics == nil {
		m.topics = map[string]*TopicMetrics{}
	}
	t := m.topics[name]
	if t == nil {
		t = &TopicMetrics{}
		m.topics[name] = t
	}
	return t
}

func (m *Metrics) copied(topic string, n int64) {
	t := m.topic(topic)
	t.CopyBytes.Add(n)
	t.CopyRequests.Add(1)
}

func (m *Metrics) copyFailed(topic string) {
	t := m.topic(topic)
	t.CopyRequests.Add(1)
	t.FailedCopyRequests.Add(1)
}

func (m *Metrics) fetched(topic string, n int64) {
	t := m.topic(topic)
	t.FetchBytes.Add(n)
	t.FetchRequests.Add(1)
}

func (m *Metrics) fetchFailed(topic string) {
	t := m.topic(topic)
	t.FetchRequests.Add(1)
	t.FailedFetchRequests.Add(1)
}

func (m *Metrics) deleted(topic string) { m.topic(topic).DeleteRequests.Add(1) }

// Each calls fn for every topic with counters.
func (m *Metrics) Each(fn func(topic string, t *TopicMetrics)) {
	m.mu.Lock()
	names := make(map[string]*TopicMetrics, len(m.topics))
	for k, v := range m.topics {
		names[k] = v
	}
	m.mu.Unlock()
	for k, v := range names {
		fn(k, v)
	}
}

// Metrics returns the manager's counters.
func (m *Manager) Metrics() *Metrics { return &m.metrics }
