package telemetry

// The series clients pushed, as /metrics shows them: one family per
// metric name (gregor_client_<OTLP name>), each sample labelled with the
// client instance id and the point's attributes. client_instance_id is
// unbounded, so the store keeps the series of at most MaxClients
// instances (the one whose last push is oldest goes first), at most
// maxSeriesPerClient series each, and drops an instance's series once
// max(60 s, 3 × its push interval) passed without a push.
//
// Values: a gauge shows its last value; a monotonic sum is a counter
// whose deltas (the temporality Gregor asks for) add up to a running
// total (a cumulative one shows as sent); a non-monotonic sum is a gauge
// (deltas add up); an explicit-bucket histogram shows as Prometheus'
// _bucket (cumulative, with le), _sum and _count, its deltas added up
// while its bounds stay the same.

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/metrics"
)

// maxSeriesPerClient bounds the series one client instance may fill;
// points of further series are dropped.
const maxSeriesPerClient = 5000

type store struct {
	mu         sync.Mutex
	maxClients int
	clients    map[string]*clientSeries
}

type clientSeries struct {
	lastPush time.Time
	keep     time.Duration
	series   map[string]*point
}

func newStore(maxClients int) *store {
	return &store{maxClients: maxClients, clients: map[string]*clientSeries{}}
}

func seriesKey(p *point) string {
	var b strings.Builder
	b.WriteString(p.name)
	for _, l := range p.labels {
		b.WriteByte(0)
		b.WriteString(l.name)
		b.WriteByte(0)
		b.WriteString(l.value)
	}
	return b.String()
}

// record keeps the points one push of instance id brought.
func (s *store) record(id string, points []point, now time.Time, keep time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	c := s.clients[id]
	if c == nil {
		for len(s.clients) >= s.maxClients {
			s.dropOldest()
		}
		c = &clientSeries{series: map[string]*point{}}
		s.clients[id] = c
	}
	c.lastPush, c.keep = now, keep
	for i := range points {
		p := &points[i]
		key := seriesKey(p)
		old := c.series[key]
		if old == nil {
			if len(c.series) >= maxSeriesPerClient {
				continue
			}
			np := *p
			c.series[key] = &np
			continue
		}
		merge(old, p)
	}
}

// merge applies a new point to the series' last one.
func merge(old, p *point) {
	switch {
	case old.kind != p.kind:
		*old = *p
	case p.kind == gaugePoint && !p.delta, p.kind == counterPoint && !p.delta:
		old.value = p.value
	case p.kind == gaugePoint, p.kind == counterPoint:
		old.value += p.value
	case p.kind == histogramPoint && p.delta && slices.Equal(old.bounds, p.bounds):
		for i := range old.buckets {
			old.buckets[i] += p.buckets[i]
		}
		old.sum += p.sum
		old.count += p.count
	default:
		*old = *p
	}
}

func (s *store) expire(now time.Time) {
	for id, c := range s.clients {
		if !now.Before(c.lastPush.Add(c.keep)) {
			delete(s.clients, id)
		}
	}
}

func (s *store) dropOldest() {
	var oldestID string
	var oldest *clientSeries
	for id, c := range s.clients {
		if oldest == nil || c.lastPush.Before(oldest.lastPush) {
			oldestID, oldest = id, c
		}
	}
	delete(s.clients, oldestID)
}

// family is one exported family's samples at a scrape.
type family struct {
	kind    pointKind
	labels  map[string]bool
	samples []sampleOf
}

type sampleOf struct {
	instance string
	p        point
}

// collect hands every family to add, as the metrics registry's dynamic
// source. The points are copied under the lock, written after it.
func (s *store) collect(now time.Time, add func(d *metrics.Desc, collect func(*metrics.Emit))) {
	fams := map[string]*family{}
	s.mu.Lock()
	s.expire(now)
	for _, id := range slices.Sorted(maps.Keys(s.clients)) {
		for _, p := range s.clients[id].series {
			f := fams[p.name]
			if f == nil {
				f = &family{kind: p.kind, labels: map[string]bool{}}
				fams[p.name] = f
			}
			if f.kind != p.kind {
				continue // another client sent the name as another type
			}
			for _, l := range p.labels {
				f.labels[l.name] = true
			}
			cp := *p
			cp.buckets = slices.Clone(p.buckets)
			f.samples = append(f.samples, sampleOf{instance: id, p: cp})
		}
	}
	s.mu.Unlock()
	for name, f := range fams {
		labels := append([]string{instanceLabel}, slices.Sorted(maps.Keys(f.labels))...)
		values := func(sm sampleOf) []string {
			out := make([]string, len(labels))
			out[0] = sm.instance
			for _, l := range sm.p.labels {
				i, _ := slices.BinarySearch(labels[1:], l.name)
				out[i+1] = l.value
			}
			return out
		}
		switch f.kind {
		case gaugePoint, counterPoint:
			kind := metrics.GaugeKind
			if f.kind == counterPoint {
				kind = metrics.CounterKind
			}
			add(&metrics.Desc{Name: name, Kind: kind, Labels: labels, Help: help}, func(emit *metrics.Emit) {
				for _, sm := range f.samples {
					emit.Add(sm.p.value, values(sm)...)
				}
			})
		case histogramPoint:
			withLe := append(slices.Clone(labels), "le")
			add(&metrics.Desc{Name: name + "_bucket", Kind: metrics.GaugeKind, Labels: withLe, Help: help}, func(emit *metrics.Emit) {
				for _, sm := range f.samples {
					lv := append(values(sm), "")
					var cum uint64
					for i, n := range sm.p.buckets {
						cum += n
						lv[len(lv)-1] = "+Inf"
						if i < len(sm.p.bounds) {
							lv[len(lv)-1] = strconv.FormatFloat(sm.p.bounds[i], 'g', -1, 64)
						}
						emit.Add(float64(cum), lv...)
					}
				}
			})
			add(&metrics.Desc{Name: name + "_sum", Kind: metrics.GaugeKind, Labels: labels, Help: help}, func(emit *metrics.Emit) {
				for _, sm := range f.samples {
					emit.Add(sm.p.sum, values(sm)...)
				}
			})
			add(&metrics.Desc{Name: name + "_count", Kind: metrics.CounterKind, Labels: labels, Help: help}, func(emit *metrics.Emit) {
				for _, sm := range f.samples {
					emit.Add(float64(sm.p.count), values(sm)...)
				}
			})
		}
	}
}

const help = "Pushed by a client (KIP-714 client telemetry)."
