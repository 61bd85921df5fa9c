// Package metrics holds a node's metrics as Prometheus scrapes them, under
// the names Prometheus' JMX exporter gives Kafka's MBeans with its example
// Kafka rules (kafka-2_0_0.yml): lower-cased kafka_<domain>_<type>_<name>,
// a meter's Count as <name without PerSec>_total, the MBean's other keys
// (topic, partition, request, version) as labels. Dashboards and alerts
// built on a Kafka cluster's exporter read a Gregor node unchanged.
//
// Every metric is declared once in the catalog (catalog.go), which
// docs/metrics.md lists (a test keeps the two equal). A component
// registers what it measures with a Registry: counters it increments on
// the way, and gauges computed at scrape time from the state they name,
// never from a count someone must remember to keep. The registry writes the
// Prometheus text format (0.0.4) or OpenMetrics (1.0.0) on request.
//
// The package imports nothing of Gregor's.
package metrics

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Kind is a metric's Prometheus type.
type Kind int

const (
	// CounterKind only goes up (a meter's Count).
	CounterKind Kind = iota
	// GaugeKind is a value read from state at scrape time.
	GaugeKind
)

func (k Kind) String() string {
	if k == CounterKind {
		return "counter"
	}
	return "gauge"
}

// Desc declares a metric: its Prometheus name, kind and labels, the Kafka
// MBean it stands for, and what it means.
type Desc struct {
	Name   string
	Kind   Kind
	Labels []string
	// MBean is Kafka's object name and attribute, e.g.
	// kafka.server:type=ReplicaManager,name=PartitionCount (Value).
	MBean string
	Help  string
	// Family marks the catalog entry of families known only at scrape
	// time (Registry.Dynamic): Name is the prefix of their names, and no
	// metric of its own is written.
	Family bool
}

// familyName is the name of the family in the exposition: OpenMetrics
// names a counter's family without its _total suffix.
func (d *Desc) familyName(openMetrics bool) string {
	if openMetrics && d.Kind == CounterKind {
		return strings.TrimSuffix(d.Name, "_total")
	}
	return d.Name
}

// typeName is the family's TYPE: OpenMetrics requires a counter's samples
// to end in _total, so a counter named otherwise (a histogram's count, as
// the JMX exporter names it) is of unknown type there.
func (d *Desc) typeName(openMetrics bool) string {
	if openMetrics && d.Kind == CounterKind && !strings.HasSuffix(d.Name, "_total") {
		return "unknown"
	}
	return d.Kind.String()
}

// Emit gathers one metric's samples at a scrape: a collector hands each
// to Add. Its memory is the registry's, reused from scrape to scrape (a
// node with 10,000 partitions writes 40,000 per-partition samples a
// scrape).
type Emit struct {
	desc *Desc
	// labels holds every sample's label values, len(desc.Labels) each, at
	// the sample's at.
	labels  []string
	samples []sample
}

type sample struct {
	at    int
	value float64
}

// Add adds a sample: its value and its label values, in the order of the
// Desc's Labels. The label values are copied, so the variadic slice of a
// call stays on the caller's stack.
func (e *Emit) Add(value float64, labelValues ...string) {
	if len(labelValues) != len(e.desc.Labels) {
		panic(fmt.Sprintf("metrics: %s takes labels %v, given %d", e.desc.Name, e.desc.Labels, len(labelValues)))
	}
	e.samples = append(e.samples, sample{at: len(e.labels), value: value})
	e.labels = append(e.labels, labelValues...)
}

func (e *Emit) reset(d *Desc) {
	e.desc, e.labels, e.samples = d, e.labels[:0], e.samples[:0]
}

func (e *Emit) labelsOf(s sample) []string { return e.labels[s.at : s.at+len(e.desc.Labels)] }

// Registry is the metrics of one node. Register before the first scrape
// or while scrapes run; it is safe for concurrent use.
type Registry struct {
	// scrape serializes scrapes, so that what an OnScrape hook computes
	// serves the collectors of the same scrape.
	scrape sync.Mutex
	// emit and buf are the scrapes' scratch memory (scrape): kept from one
	// scrape to the next, so that a scrape allocates next to nothing; they
	// hold the largest metric's samples (about 50 bytes each) and
	// writeChunk of text.
	emit       Emit
	buf        []byte
	mu         sync.Mutex
	collectors map[string]*registered
	onScrape   []func()
	dynamic    []dynamicSource
}

// dynamicSource writes families whose names are known only at scrape
// time, every one starting with family.Name.
type dynamicSource struct {
	family *Desc
	source func(add func(d *Desc, collect func(*Emit)))
}

type registered struct {
	desc    *Desc
	collect []func(*Emit)
}

// NewRegistry is an empty registry.
func NewRegistry() *Registry {
	return &Registry{collectors: map[string]*registered{}}
}

// Collect registers collect as a source of d's samples, called at every
// scrape with the Emit to add them to (valid during the call only). Several sources may add to one metric (each component its
// partitions); their samples must not share label values.
func (r *Registry) Collect(d *Desc, collect func(*Emit)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.collectors[d.Name]
	if c == nil {
		c = &registered{desc: d}
		r.collectors[d.Name] = c
	} else if c.desc != d {
		panic(fmt.Sprintf("metrics: two declarations of %s", d.Name))
	}
	c.collect = append(c.collect, collect)
}

// OnScrape registers prepare to run at the start of every scrape, before
// any collector: where several gauges are counted in one pass over the same
// state (the partitions), the pass runs once per scrape.
func (r *Registry) OnScrape(prepare func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onScrape = append(r.onScrape, prepare)
}

// Dynamic registers source as the writer of families whose names are
// known only at scrape time (the metrics clients push, KIP-714): at each
// scrape it hands add each family's Desc and collector. family is their
// catalog entry, its Name the prefix every such family's name must have;
// a family without it, or named like a registered metric, is left out.
func (r *Registry) Dynamic(family *Desc, source func(add func(d *Desc, collect func(*Emit)))) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dynamic = append(r.dynamic, dynamicSource{family: family, source: source})
}

// Gauge registers value as the unlabelled gauge d.
func (r *Registry) Gauge(d *Desc, value func() float64) {
	r.Collect(d, func(emit *Emit) { emit.Add(value()) })
}

// Counter is a monotonic count, incremented on the way.
type Counter struct{ n atomic.Uint64 }

// Add adds n.
func (c *Counter) Add(n uint64) { c.n.Add(n) }

// Inc adds one.
func (c *Counter) Inc() { c.n.Add(1) }

// Value is the count so far.
func (c *Counter) Value() uint64 { return c.n.Load() }

// RegisterCounter registers c as the unlabelled counter d.
func (r *Registry) RegisterCounter(d *Desc, c *Counter) {
	r.Collect(d, func(emit *Emit) { emit.Add(float64(c.Value())) })
}

// Names lists the registered metrics' names, sorted.
func (r *Registry) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for n := range r.collectors {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// writeChunk is how much text Write gathers before it writes: its buffer
// stays near this size, whatever the number of samples.
const writeChunk = 32 << 10

// Write writes every registered metric, sorted by name and within a
// metric by label values, in the Prometheus text format, or in OpenMetrics
// (ending with # EOF) when openMetrics is set.
func (r *Registry) Write(w io.Writer, openMetrics bool) error {
	r.scrape.Lock()
	defer r.scrape.Unlock()
	r.mu.Lock()
	prepare := slices.Clone(r.onScrape)
	r.mu.Unlock()
	for _, p := range prepare {
		p()
	}
	r.mu.Lock()
	regs := make([]*registered, 0, len(r.collectors))
	taken := make(map[string]bool, len(r.collectors))
	for _, c := range r.collectors {
		regs = append(regs, &registered{desc: c.desc, collect: slices.Clone(c.collect)})
		taken[c.desc.Name] = true
	}
	dynamic := slices.Clone(r.dynamic)
	r.mu.Unlock()
	for _, dyn := range dynamic {
		dyn.source(func(d *Desc, collect func(*Emit)) {
			if !strings.HasPrefix(d.Name, dyn.family.Name) || taken[d.Name] {
				return
			}
			taken[d.Name] = true
			regs = append(regs, &registered{desc: d, collect: []func(*Emit){collect}})
		})
	}
	slices.SortFunc(regs, func(a, b *registered) int { return strings.Compare(a.desc.Name, b.desc.Name) })

	e := &r.emit
	buf := r.buf
	defer func() { r.buf = buf[:0] }()
	for _, reg := range regs {
		d := reg.desc
		e.reset(d)
		for _, collect := range reg.collect {
			collect(e)
		}
		slices.SortFunc(e.samples, func(a, b sample) int { return slices.Compare(e.labelsOf(a), e.labelsOf(b)) })
		family := d.familyName(openMetrics)
		buf = append(buf, "# HELP "...)
		buf = append(buf, family...)
		buf = append(buf, ' ')
		buf = appendHelp(buf, d.Help)
		buf = append(buf, "\n# TYPE "...)
		buf = append(buf, family...)
		buf = append(buf, ' ')
		buf = append(buf, d.typeName(openMetrics)...)
		buf = append(buf, '\n')
		for _, s := range e.samples {
			labels := e.labelsOf(s)
			buf = append(buf, d.Name...)
			// An empty label value is no label (Prometheus treats them
			// alike): Kafka's all-topics series of a per-topic metric.
			open := false
			for i, l := range d.Labels {
				if labels[i] == "" {
					continue
				}
				if open {
					buf = append(buf, ',')
				} else {
					buf = append(buf, '{')
					open = true
				}
				buf = append(buf, l...)
				buf = append(buf, '=', '"')
				buf = appendLabelValue(buf, labels[i])
				buf = append(buf, '"')
			}
			if open {
				buf = append(buf, '}')
			}
			buf = append(buf, ' ')
			buf = appendValue(buf, s.value)
			buf = append(buf, '\n')
			if len(buf) >= writeChunk {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
	}
	if openMetrics {
		buf = append(buf, "# EOF\n"...)
	}
	_, err := w.Write(buf)
	return err
}

// appendHelp escapes a HELP text: backslash and newline.
func appendHelp(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			buf = append(buf, `\\`...)
		case '\n':
			buf = append(buf, `\n`...)
		default:
			buf = append(buf, s[i])
		}
	}
	return buf
}

// appendLabelValue escapes a label value: backslash, double quote and
// newline.
func appendLabelValue(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			buf = append(buf, `\\`...)
		case '"':
			buf = append(buf, `\"`...)
		case '\n':
			buf = append(buf, `\n`...)
		default:
			buf = append(buf, s[i])
		}
	}
	return buf
}

func appendValue(buf []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(buf, "+Inf"...)
	case math.IsInf(v, -1):
		return append(buf, "-Inf"...)
	case math.IsNaN(v):
		return append(buf, "NaN"...)
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.AppendInt(buf, int64(v), 10)
	}
	return strconv.AppendFloat(buf, v, 'g', -1, 64)
}
