package replica

import "github.com/gregorbroker/gregor/metrics"

// RegisterMetrics registers the replica manager's gauges (Kafka's
// kafka.server:type=ReplicaManager), each counted at scrape time over the
// partitions this node hosts, as Kafka's Partition computes them: a
// partition is under-replicated, under or at its minimum ISR only on its
// leader, and the minimum is min.insync.replicas capped at the replication
// factor.
func (m *Manager) RegisterMetrics(r *metrics.Registry) {
	type counts struct{ hosted, leading, underReplicated, underMinISR, atMinISR int }
	count := func() counts {
		var c counts
		for _, p := range m.partitions() {
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
	m.stats.register(r, func(topic string) bool {
		img := m.image.Load()
		return img == nil || img.Topics[topic] != nil
	})
}
