package network

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/metrics"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionCounts counts one API's requests by version; versions past the
// last slot (none exist) share it.
type versionCounts [32]atomic.Uint64

func (v *versionCounts) add(version int16) {
	v[min(max(int(version), 0), len(v)-1)].Add(1)
}

// countRequest counts a decoded request at its version: one atomic add on
// a table fixed when the server is built. A Fetch also counts as
// FetchConsumer or FetchFollower, as Kafka's RequestChannel counts it.
func (s *Server) countRequest(req kmsg.Request, version int16) {
	if c := s.requests[req.Key()]; c != nil {
		c.add(version)
	}
	if f, ok := req.(*kmsg.FetchRequest); ok {
		if fetchFromFollower(f) {
			s.fetchFollower.add(version)
		} else {
			s.fetchConsumer.add(version)
		}
	}
}

// fetchFromFollower reports whether a Fetch is a follower's: the replica
// id of the request (v0-14) or of its replica state (v15+) is a broker's.
func fetchFromFollower(f *kmsg.FetchRequest) bool {
	return f.ReplicaID >= 0 || f.ReplicaState.ID >= 0
}

// RegisterMetrics registers the server's request counts (Kafka's
// kafka.network:type=RequestMetrics,name=RequestsPerSec) by Kafka's API
// name and version; a version no request came in at is left out, as Kafka
// registers a version's meter with its first request.
func (s *Server) RegisterMetrics(r *metrics.Registry) {
	versions := make([]string, len(versionCounts{}))
	for i := range versions {
		versions[i] = strconv.Itoa(i)
	}
	emitCounts := func(emit *metrics.Emit, name string, counts *versionCounts) {
		for v := range counts {
			if n := counts[v].Load(); n > 0 {
				emit.Add(float64(n), name, versions[v])
			}
		}
	}
	s.registerTimes(r)
	r.Gauge(metrics.RequestHandlerAvgIdlePercent, func() float64 {
		return s.idle.idleFraction(time.Now(), handlerCapacity())
	})
	s.registerListenerMetrics(r)
	r.Collect(metrics.Requests, func(emit *metrics.Emit) {
		for key, counts := range s.requests {
			emitCounts(emit, protocol.KafkaName(key), counts)
		}
		emitCounts(emit, "FetchConsumer", &s.fetchConsumer)
		emitCounts(emit, "FetchFollower", &s.fetchFollower)
	})
}

// requestTimes are one API's request histograms (Kafka's RequestMetrics).
type requestTimes struct {
	queue, local, remote, responseQueue, send, total metrics.Histogram
}

// lazyTimes allocate an API's histograms with its first request: most
// APIs a node serves are never asked of it.
type lazyTimes struct{ p atomic.Pointer[requestTimes] }

func (l *lazyTimes) get() *requestTimes {
	if t := l.p.Load(); t != nil {
		return t
	}
	l.p.CompareAndSwap(nil, &requestTimes{})
	return l.p.Load()
}

// timeRequest marks the request of s as timed, under its API's histograms
// (and a Fetch's under FetchConsumer's or FetchFollower's too), as its
// handler is called.
func (s *Server) timeRequest(sl *slot, req kmsg.Request) {
	sl.times = s.times[req.Key()]
	if f, ok := req.(*kmsg.FetchRequest); ok {
		if fetchFromFollower(f) {
			sl.fetchTimes = &s.fetchFollowerTimes
		} else {
			sl.fetchTimes = &s.fetchConsumerTimes
		}
	}
	sl.dispatched = time.Since(sl.start)
}

// observeTimes records a timed request's times once its response is
// written (writeStart to end, both since the request was received), as
// Kafka's RequestChannel splits them: received to dispatched, the
// handler's own work (to its return, or to the answer when that came
// first), the wait to the answer, the wait for the writer, the write.
func observeTimes(sl *slot, writeStart, end time.Duration) {
	if sl.times == nil {
		return
	}
	finished := sl.finished
	local := time.Duration(sl.localEnd.Load())
	if local == 0 || local > finished {
		local = finished
	}
	now := sl.start.Add(end)
	for _, l := range []*lazyTimes{sl.times, sl.fetchTimes} {
		if l == nil {
			continue
		}
		t := l.get()
		t.queue.Observe(sl.dispatched, now)
		t.local.Observe(local-sl.dispatched, now)
		t.remote.Observe(finished-local, now)
		t.responseQueue.Observe(writeStart-finished, now)
		t.send.Observe(end-writeStart, now)
		t.total.Observe(end, now)
	}
}

// registerTimes registers the request histograms.
func (s *Server) registerTimes(r *metrics.Registry) {
	type histogram struct {
		quantiles, count *metrics.Desc
		of               func(*requestTimes) *metrics.Histogram
	}
	for _, h := range []histogram{
		{metrics.RequestQueueTimeMs, metrics.RequestQueueTimeMsCount, func(t *requestTimes) *metrics.Histogram { return &t.queue }},
		{metrics.LocalTimeMs, metrics.LocalTimeMsCount, func(t *requestTimes) *metrics.Histogram { return &t.local }},
		{metrics.RemoteTimeMs, metrics.RemoteTimeMsCount, func(t *requestTimes) *metrics.Histogram { return &t.remote }},
		{metrics.ResponseQueueTimeMs, metrics.ResponseQueueTimeMsCount, func(t *requestTimes) *metrics.Histogram { return &t.responseQueue }},
		{metrics.ResponseSendTimeMs, metrics.ResponseSendTimeMsCount, func(t *requestTimes) *metrics.Histogram { return &t.send }},
		{metrics.TotalTimeMs, metrics.TotalTimeMsCount, func(t *requestTimes) *metrics.Histogram { return &t.total }},
	} {
		each := func(fn func(name string, hist *metrics.Histogram)) {
			for key, l := range s.times {
				if t := l.p.Load(); t != nil {
					fn(protocol.KafkaName(key), h.of(t))
				}
			}
			if t := s.fetchConsumerTimes.p.Load(); t != nil {
				fn("FetchConsumer", h.of(t))
			}
			if t := s.fetchFollowerTimes.p.Load(); t != nil {
				fn("FetchFollower", h.of(t))
			}
		}
		r.Collect(h.quantiles, func(emit *metrics.Emit) {
			now := time.Now()
			values := make([]float64, len(metrics.RequestTimeQuantiles))
			each(func(name string, hist *metrics.Histogram) {
				hist.Quantiles(now, metrics.RequestTimeQuantiles, values)
				for i, v := range values {
					emit.Add(v, name, metrics.RequestTimeQuantileLabels[i])
				}
			})
		})
		r.Collect(h.count, func(emit *metrics.Emit) {
			each(func(name string, hist *metrics.Histogram) { emit.Add(float64(hist.Count()), name) })
		})
	}
}

// listenerStats count one listener's connections and SASL
// authentications (Kafka's socket-server-metrics, kept per network
// processor thread; Gregor has none, see registerListenerMetrics).
type listenerStats struct {
	created, closed atomic.Uint64
	// authenticated and authFailed count first authentications, not
	// re-authentications (Kafka counts those apart).
	authenticated, authFailed atomic.Uint64
}

// networkProcessor is the networkProcessor label of every listener's
// socket-server-metrics. Kafka keeps them per network thread
// (num.network.threads, named 0, 1, ...); Gregor serves each connection on
// goroutines of its own, so a listener's counts are all reported as
// processor 0's, which keeps sums over the label right.
const networkProcessor = "0"

// registerListenerMetrics registers each listener's connection and
// authentication counts, labelled with Kafka's listener name.
func (s *Server) registerListenerMetrics(r *metrics.Registry) {
	each := func(d *metrics.Desc, value func(*listenerStats) float64) {
		r.Collect(d, func(emit *metrics.Emit) {
			for _, l := range s.listeners {
				emit.Add(value(&l.stats), l.Name, networkProcessor)
			}
		})
	}
	each(metrics.ConnectionCount, func(st *listenerStats) float64 {
		// closed is read first: a connection closing in between is
		// never counted below zero.
		closed := st.closed.Load()
		return float64(st.created.Load() - closed)
	})
	each(metrics.ConnectionCreationTotal, func(st *listenerStats) float64 { return float64(st.created.Load()) })
	each(metrics.ConnectionCloseTotal, func(st *listenerStats) float64 { return float64(st.closed.Load()) })
	each(metrics.SuccessfulAuthenticationTotal, func(st *listenerStats) float64 { return float64(st.authenticated.Load()) })
	each(metrics.FailedAuthenticationTotal, func(st *listenerStats) float64 { return float64(st.authFailed.Load()) })
}
