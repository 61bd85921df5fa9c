package broker

import (
	"time"

	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/gregorbroker/gregor/metrics"
)

// millis is d in (fractional) milliseconds, the unit of Kafka's time
// metrics.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// classicStates and consumerStates are the states Kafka's gauges report
// groups in, each present even when no group is in it, as Kafka registers
// them all.
var (
	classicStates = []struct {
		state string
		desc  *metrics.Desc
	}{
		{"Empty", metrics.NumGroupsEmpty},
		{"PreparingRebalance", metrics.NumGroupsPreparingRebalance},
		{"CompletingRebalance", metrics.NumGroupsCompletingRebalance},
		{"Stable", metrics.NumGroupsStable},
		{"Dead", metrics.NumGroupsDead},
	}
	consumerStates = []string{"Empty", "Assigning", "Reconciling", "Stable", "Dead"}
)

// registerCoordinatorMetrics registers the group and transaction
// coordinators' metrics (a controller-only node has neither). The group
// gauges are counted once per scrape from the coordinator's shards.
func (b *Broker) registerCoordinatorMetrics(r *metrics.Registry) {
	if g := b.groups; g != nil {
		var st group.Stats
		r.OnScrape(func() { st = g.coord.Stats() })
		sum := func(m map[string]int) int {
			n := 0
			for _, v := range m {
				n += v
			}
			return n
		}
		r.Gauge(metrics.NumGroups, func() float64 {
			return float64(sum(st.ClassicGroups) + sum(st.ConsumerGroups) + sum(st.ShareGroups) + sum(st.StreamsGroups))
		})
		r.Gauge(metrics.NumOffsets, func() float64 { return float64(st.Offsets) })
		for _, c := range classicStates {
			r.Gauge(c.desc, func() float64 { return float64(st.ClassicGroups[c.state]) })
		}
		r.Collect(metrics.GroupCount, func(emit *metrics.Emit) {
			emit.Add(float64(sum(st.ClassicGroups)), "classic")
			emit.Add(float64(sum(st.ConsumerGroups)), "consumer")
			emit.Add(float64(sum(st.ShareGroups)), "share")
			emit.Add(float64(sum(st.StreamsGroups)), "streams")
		})
		r.Collect(metrics.StreamsGroupCount, func(emit *metrics.Emit) {
			for _, s := range []string{"Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead"} {
				emit.Add(float64(st.StreamsGroups[s]), s)
			}
		})
		r.Gauge(metrics.StreamsGroupRebalanceCount, func() float64 { return float64(st.StreamsRebalances) })
		r.Collect(metrics.ShareGroupCount, func(emit *metrics.Emit) {
			for _, s := range []string{"Empty", "Stable", "Dead"} {
				emit.Add(float64(st.ShareGroups[s]), s)
			}
		})
		r.Gauge(metrics.ShareGroupRebalanceCount, func() float64 { return float64(st.ShareRebalances) })
		r.Collect(metrics.ConsumerGroupCount, func(emit *metrics.Emit) {
			for _, s := range consumerStates {
				emit.Add(float64(st.ConsumerGroups[s]), s)
			}
		})
		r.Gauge(metrics.OffsetCommitCount, func() float64 { return float64(st.OffsetCommits) })
		r.Gauge(metrics.OffsetExpirationCount, func() float64 { return float64(st.OffsetExpirations) })
		r.Gauge(metrics.OffsetDeletionCount, func() float64 { return float64(st.OffsetDeletions) })
		r.Gauge(metrics.GroupCompletedRebalanceCount, func() float64 { return float64(st.ClassicRebalances) })
		r.Gauge(metrics.ConsumerGroupRebalanceCount, func() float64 { return float64(st.ConsumerRebalances) })
		r.Collect(metrics.GroupNumPartitions, func(emit *metrics.Emit) {
			emit.Add(float64(st.Loading), "loading")
			emit.Add(float64(st.Active), "active")
			emit.Add(float64(st.Failed), "failed")
		})
		r.Gauge(metrics.GroupPartitionLoadTimeAvg, func() float64 { return g.loadTimes.Avg(b.now()) })
		r.Gauge(metrics.GroupPartitionLoadTimeMax, func() float64 { return g.loadTimes.Max(b.now()) })
	}
	if t := b.txns; t != nil {
		r.Gauge(metrics.TxnPartitionLoadTimeAvg, func() float64 { return t.loadTimes.Avg(b.now()) })
		r.Gauge(metrics.TxnPartitionLoadTimeMax, func() float64 { return t.loadTimes.Max(b.now()) })
	}
}
