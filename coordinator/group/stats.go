package group

import (
	"sync/atomic"

	"github.com/gregorbroker/gregor/coordinator/runtime"
)

// Stats is what the group coordinator's metrics report (Kafka's
// group-coordinator-metrics and GroupMetadataManager gauges): the groups of
// the partitions this node serves, counted when asked, and the events it
// counted since start. Package metrics is not imported here: the broker
// turns Stats into metrics.
type Stats struct {
	// ClassicGroups and ConsumerGroups count the groups by the state
	// Kafka reports (Empty, PreparingRebalance, CompletingRebalance,
	// Stable, Dead; Empty, Assigning, Reconciling, Stable).
	ClassicGroups, ConsumerGroups map[string]int
	// ShareGroups count the share groups by state (Empty, Stable).
	ShareGroups map[string]int
	// StreamsGroups counts the streams groups by state.
	StreamsGroups map[string]int
	// Offsets is the committed offsets held (Kafka's NumOffsets).
	Offsets int
	// Loading, Active and Failed count the __consumer_offsets partitions
	// this node leads by the state of their shard.
	Loading, Active, Failed int
	Events
}

// Events are the coordinator's counters, each incremented once what it
// counts is durable.
type Events struct {
	// OffsetCommits are the offsets committed (one per partition, by
	// OffsetCommit and TxnOffsetCommit); OffsetExpirations those removed
	// by offsets.retention.minutes; OffsetDeletions those removed by
	// OffsetDelete.
	OffsetCommits, OffsetExpirations, OffsetDeletions uint64
	// ClassicRebalances are the rebalances of classic groups completed
	// (the leader's assignment stored, the group Stable);
	// ConsumerRebalances and ShareRebalances the epoch bumps of consumer
	// and share groups; StreamsRebalances the target assignments of
	// streams groups computed.
	ClassicRebalances, ConsumerRebalances, ShareRebalances, StreamsRebalances uint64
}

// eventCounts are Events as the coordinator increments them.
type eventCounts struct {
	offsetCommits, offsetExpirations, offsetDeletions atomic.Uint64
	classicRebalances, consumerRebalances             atomic.Uint64
	shareRebalances, streamsRebalances                atomic.Uint64
}

// Stats counts the groups and offsets of every shard, each under its own
// lock in turn (never two at once), so the counts of different shards may
// be a moment apart.
func (c *Coordinator) Stats() Stats {
	st := Stats{ClassicGroups: map[string]int{}, ConsumerGroups: map[string]int{}, ShareGroups: map[string]int{}, StreamsGroups: map[string]int{}, Events: Events{
		OffsetCommits:      c.events.offsetCommits.Load(),
		OffsetExpirations:  c.events.offsetExpirations.Load(),
		OffsetDeletions:    c.events.offsetDeletions.Load(),
		ClassicRebalances:  c.events.classicRebalances.Load(),
		ConsumerRebalances: c.events.consumerRebalances.Load(),
		ShareRebalances:    c.events.shareRebalances.Load(),
		StreamsRebalances:  c.events.streamsRebalances.Load(),
	}}
	for _, s := range c.shards.All() {
		s.mu.Lock()
		switch s.status {
		case runtime.ShardLoading:
			st.Loading++
		case runtime.ShardFailed:
			st.Failed++
		case runtime.ShardActive:
			st.Active++
			for _, g := range s.classic {
				st.ClassicGroups[g.state.String()]++
			}
			for _, g := range s.consumer {
				st.ConsumerGroups[g.stateName()]++
			}
			for _, g := range s.share {
				st.ShareGroups[g.stateName()]++
			}
			for _, g := range s.streams {
				st.StreamsGroups[g.stateName()]++
			}
			for _, o := range s.offsets {
				for _, ps := range o.topics {
					st.Offsets += len(ps)
				}
			}
		}
		s.mu.Unlock()
	}
	return st
}

// CommittedOffset is one group's committed offset of one partition.
type CommittedOffset struct {
	Group     string
	Topic     string
	Partition int32
	Offset    int64
}

// CommittedOffsets lists the committed offsets of the groups whose shard
// this node serves, as OffsetFetch answers them (pending transactional
// offsets are not visible yet), for the consumer lag metrics: each group
// has one coordinator, so each group's offsets are reported by one node.
// Shards are read each under its own lock in turn, as Stats reads them.
func (c *Coordinator) CommittedOffsets() []CommittedOffset {
	var out []CommittedOffset
	for _, s := range c.shards.All() {
		s.mu.Lock()
		if s.status == runtime.ShardActive {
			for g, o := range s.offsets {
				for topic, ps := range o.topics {
					for p, e := range ps {
						out = append(out, CommittedOffset{Group: g, Topic: topic, Partition: p, Offset: e.offset})
					}
				}
			}
		}
		s.mu.Unlock()
	}
	return out
}
