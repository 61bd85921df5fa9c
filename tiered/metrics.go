package tiered

import (
	"sync"
	"sync/atomic"

	"github.com/gregorbroker/gregor/metrics"
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

// RegisterMetrics registers the manager's BrokerTopicMetrics: the counters
// per topic, and the copy lag and remote size of the partitions this node
// leads, summed per topic at each scrape.
//
// A nil manager (no tiered storage) registers the same metrics without
// series, so that /metrics lists every metric of the catalog on every
// node.
func (m *Manager) RegisterMetrics(r *metrics.Registry) {
	if m == nil {
		for _, d := range []*metrics.Desc{metrics.RemoteCopyBytes, metrics.RemoteCopyRequests, metrics.FailedRemoteCopyRequests,
			metrics.RemoteFetchBytes, metrics.RemoteFetchRequests, metrics.FailedRemoteFetchRequests, metrics.RemoteDeleteRequests,
			metrics.RemoteCopyLagBytes, metrics.RemoteCopyLagSegments, metrics.RemoteLogSizeBytes, metrics.RemoteLogMetadataCount} {
			r.Collect(d, func(*metrics.Emit) {})
		}
		return
	}
	counters := map[*metrics.Desc]func(*TopicMetrics) int64{
		metrics.RemoteCopyBytes:           func(t *TopicMetrics) int64 { return t.CopyBytes.Load() },
		metrics.RemoteCopyRequests:        func(t *TopicMetrics) int64 { return t.CopyRequests.Load() },
		metrics.FailedRemoteCopyRequests:  func(t *TopicMetrics) int64 { return t.FailedCopyRequests.Load() },
		metrics.RemoteFetchBytes:          func(t *TopicMetrics) int64 { return t.FetchBytes.Load() },
		metrics.RemoteFetchRequests:       func(t *TopicMetrics) int64 { return t.FetchRequests.Load() },
		metrics.FailedRemoteFetchRequests: func(t *TopicMetrics) int64 { return t.FailedFetchRequests.Load() },
		metrics.RemoteDeleteRequests:      func(t *TopicMetrics) int64 { return t.DeleteRequests.Load() },
	}
	for d, value := range counters {
		r.Collect(d, func(emit *metrics.Emit) {
			m.metrics.Each(func(topic string, t *TopicMetrics) { emit.Add(float64(value(t)), topic) })
		})
	}
	type topicState struct {
		lagBytes, remoteBytes int64
		lagSegments, segments int
	}
	var byTopic map[string]*topicState
	r.OnScrape(func() {
		byTopic = map[string]*topicState{}
		m.mu.Lock()
		parts := make([]*partState, 0, len(m.parts))
		for _, st := range m.parts {
			parts = append(parts, st)
		}
		m.mu.Unlock()
		for _, st := range parts {
			st.mu.Lock()
			leading, lagBytes, lagSegments := st.leading, st.lagBytes, st.lagSegments
			st.mu.Unlock()
			if !leading {
				continue
			}
			ts := byTopic[st.tp.Topic]
			if ts == nil {
				ts = &topicState{}
				byTopic[st.tp.Topic] = ts
			}
			ts.lagBytes += lagBytes
			ts.lagSegments += lagSegments
			segs := m.view.committed(partKey{st.topicID, st.tp.Partition})
			ts.segments += len(segs)
			for _, s := range segs {
				ts.remoteBytes += int64(s.SizeInBytes)
			}
		}
	})
	gauges := map[*metrics.Desc]func(*topicState) float64{
		metrics.RemoteCopyLagBytes:     func(t *topicState) float64 { return float64(t.lagBytes) },
		metrics.RemoteCopyLagSegments:  func(t *topicState) float64 { return float64(t.lagSegments) },
		metrics.RemoteLogSizeBytes:     func(t *topicState) float64 { return float64(t.remoteBytes) },
		metrics.RemoteLogMetadataCount: func(t *topicState) float64 { return float64(t.segments) },
	}
	for d, value := range gauges {
		r.Collect(d, func(emit *metrics.Emit) {
			for topic, ts := range byTopic {
				emit.Add(value(ts), topic)
			}
		})
	}
}
