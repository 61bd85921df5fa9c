package replica

import "github.com/gregorbroker/gregor/metrics"

// RegisterMetrics registers the replica manager's gauges (Kafka's
// kafka.server:type=ReplicaManager), each counted at scrape time over the
// partitions this node hosts, as Kafka's Partition computes them: a
// partition is under-replicated, under or at its minimum ISR only on its
// leader, and the minimum is min.insync.replicas capped at the replication
// factor.
//
// With perPartition, each hosted partition's log size, start and end
// offsets and segment count are series of their own (Kafka's
// kafka.log:type=Log); without, a node with very many partitions keeps its
// scrapes small.
func (m *Manager) RegisterMetrics(r *metrics.Registry, perPartition bool) {
	type counts struct{ hosted, leading, underReplicated, underMinISR, atMinISR int }
	// The partitions a scrape reads, in slices kept from scrape to
	// scrape (the registry serializes scrapes).
	var countScratch []*Partition
	count := func() counts {
		var c counts
		countScratch = m.appendPartitions(countScratch[:0])
		for _, p := range countScratch {
			p.mu.RLock()
			if p.log != nil && !p.removed {
				c.hosted++
				if p.isLeaderLocked() {
					c.leading++
					isr, minISR := len(p.isr), p.effectiveMinISRLocked()
					if isr < len(p.replicas) {
						c.underReplicated++
					}
					if isr < minISR {
						c.underMinISR++
					} else if isr == minISR {
						c.atMinISR++
					}
				}
			}
			p.mu.RUnlock()
		}
		clear(countScratch) // no partition kept alive past the scrape
		return c
	}
	// One pass over the partitions per scrape (the registry serializes
	// scrapes, so last is the current scrape's).
	var last counts
	r.OnScrape(func() { last = count() })
	r.Gauge(metrics.PartitionCount, func() float64 { return float64(last.hosted) })
	r.Gauge(metrics.LeaderCount, func() float64 { return float64(last.leading) })
	r.Gauge(metrics.UnderReplicatedPartitions, func() float64 { return float64(last.underReplicated) })
	r.Gauge(metrics.UnderMinISRPartitionCount, func() float64 { return float64(last.underMinISR) })
	r.Gauge(metrics.AtMinISRPartitionCount, func() float64 { return float64(last.atMinISR) })
	r.RegisterCounter(metrics.ISRShrinks, &m.isrShrinks)
	r.RegisterCounter(metrics.ISRExpands, &m.isrExpands)
	if perPartition {
		m.registerLogMetrics(r)
	}
	m.tiered.RegisterMetrics(r)
	m.stats.register(r, func(topic string) bool {
		img := m.image.Load()
		return img == nil || img.Topic(topic) != nil
	})
}

// logState is one hosted partition's log, read at a scrape.
type logState struct {
	topic, partition           string
	size, start, end, segments float64
}

// registerLogMetrics registers the per-partition log gauges, read in one
// pass over the hosted partitions per scrape.
func (m *Manager) registerLogMetrics(r *metrics.Registry) {
	var logs []logState
	var scratch []*Partition
	r.OnScrape(func() {
		logs = logs[:0]
		scratch = m.appendPartitions(scratch[:0])
		defer clear(scratch) // no partition kept alive past the scrape
		for _, p := range scratch {
			p.mu.RLock()
			l, removed := p.log, p.removed
			p.mu.RUnlock()
			if l == nil || removed {
				continue
			}
			logs = append(logs, logState{
				topic: p.tp.Topic, partition: p.partitionLabel,
				size: float64(l.Size()), start: float64(l.LogStartOffset()), end: float64(l.LogEndOffset()),
				segments: float64(l.NumSegments()),
			})
		}
	})
	for d, value := range map[*metrics.Desc]func(*logState) float64{
		metrics.LogSize:        func(s *logState) float64 { return s.size },
		metrics.LogStartOffset: func(s *logState) float64 { return s.start },
		metrics.LogEndOffset:   func(s *logState) float64 { return s.end },
		metrics.NumLogSegments: func(s *logState) float64 { return s.segments },
	} {
		r.Collect(d, func(emit *metrics.Emit) {
			for i := range logs {
				emit.Add(value(&logs[i]), logs[i].topic, logs[i].partition)
			}
		})
	}
}
