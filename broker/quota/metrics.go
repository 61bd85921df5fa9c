package quota

// The quota metrics: Kafka's per-pair MBeans
// kafka.server:type=<Produce|Fetch|Request|ControllerMutation>,user=<u>,client-id=<c>
// (the empty one of user and client id left out of the name, as Kafka's
// JmxReporter leaves it out), read at scrape time from the sensors.
//
// Kafka registers a pair's metrics with its sensors: for every client
// that sends a request of a type while any quota of that type exists,
// whether a quota applies to it or not. Gregor reports only the pairs a
// quota applies to and those it throttled, so that a quota on one user
// does not make every other client id a series; a pair that goes an hour
// unused is forgotten, as Kafka expires its sensors.

import (
	"time"

	"github.com/gregorbroker/gregor/metrics"
)

// typeNames are the types as Kafka's MBeans name them (QuotaType).
var typeNames = [numTypes]string{
	Produce:            "Produce",
	Fetch:              "Fetch",
	Request:            "Request",
	ControllerMutation: "ControllerMutation",
}

func (t Type) String() string {
	if t < numTypes {
		return typeNames[t]
	}
	return "connection"
}

// throttled records a throttle of ms applied to the pair, Kafka's
// throttle-time sensor (its Avg over the last 30 to 60 seconds).
func (s *sensor) throttled(ms int32, now time.Time) {
	s.throttles.Record(float64(ms), now)
	s.wasThrottled.Store(true)
}

// Throttled records that a request of the client was throttled for ms
// by its quota of type t: the quota whose throttle was the longest and
// was applied (ClientQuotaManager.throttle).
func (q *Manager) Throttled(t Type, user, clientID string, ms int32) {
	if ms <= 0 {
		return
	}
	now := q.now()
	if s, _, _, ok := q.lookup(t, user, clientID, now); ok {
		s.throttled(ms, now)
	}
}

// ThrottledByLonger records a request's throttle against whichever of its
// two quotas throttled it longer, its bandwidth quota of type bandwidth or
// its request quota, as Kafka's produce and fetch handlers count it.
func (q *Manager) ThrottledByLonger(bandwidth Type, user, clientID string, bandwidthMs, requestMs int32) {
	if bandwidthMs > requestMs {
		q.Throttled(bandwidth, user, clientID, bandwidthMs)
	} else {
		q.Throttled(Request, user, clientID, requestMs)
	}
}

// usage is one pair's measures at a scrape.
type usage struct {
	typ          Type
	user, client string
	// rate is byte-rate (Produce, Fetch) or request-time (Request);
	// tokens the bucket's (ControllerMutation).
	rate, tokens, throttleTime float64
}

// usages lists the measures of the pairs a quota applies to or that were
// throttled.
func (q *Manager) usages() []usage {
	l := q.levels.Load()
	now := q.now()
	q.mu.Lock()
	type entry struct {
		key sensorKey
		s   *sensor
	}
	all := make([]entry, 0, len(q.sensors))
	for k, s := range q.sensors {
		if k.typ < numTypes {
			all = append(all, entry{k, s})
		}
	}
	q.mu.Unlock()
	var out []usage
	for _, e := range all {
		limit, limited := 0.0, false
		if l != nil && l.byType[e.key.typ] != nil {
			limit, limited = l.limit(e.key.typ, e.key.user, e.key.client)
		}
		if !limited && !e.s.wasThrottled.Load() {
			continue
		}
		u := usage{typ: e.key.typ, user: e.key.user, client: e.key.client, throttleTime: e.s.throttles.Avg(now)}
		ms := now.UnixMilli()
		e.s.mu.Lock()
		if e.key.typ == ControllerMutation {
			if limited {
				e.s.refillLocked(limit, ms)
			}
			u.tokens = e.s.tokens
		} else {
			u.rate = e.s.rateLocked(ms)
		}
		e.s.mu.Unlock()
		out = append(out, u)
	}
	return out
}

// RegisterMetrics registers the quota metrics, computed at each scrape.
func (q *Manager) RegisterMetrics(r *metrics.Registry) {
	var last []usage
	r.OnScrape(func() { last = q.usages() })
	each := func(d *metrics.Desc, value func(*usage) float64, types ...Type) {
		r.Collect(d, func(emit *metrics.Emit) {
			for i := range last {
				u := &last[i]
				for _, t := range types {
					if u.typ == t {
						emit.Add(value(u), t.String(), u.user, u.client)
					}
				}
			}
		})
	}
	each(metrics.QuotaByteRate, func(u *usage) float64 { return u.rate }, Produce, Fetch)
	each(metrics.QuotaRequestTime, func(u *usage) float64 { return u.rate }, Request)
	each(metrics.QuotaTokens, func(u *usage) float64 { return u.tokens }, ControllerMutation)
	each(metrics.QuotaThrottleTime, func(u *usage) float64 { return u.throttleTime }, Produce, Fetch, Request, ControllerMutation)
}
