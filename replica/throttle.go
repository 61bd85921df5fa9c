package replica

// Replication throttles (KIP-73, Kafka's ReplicationQuotaManager): the
// bytes a leader sends to followers, and a follower fetches, for the
// partitions a topic names in leader.replication.throttled.replicas and
// follower.replication.throttled.replicas (kafka-reassign-partitions
// --throttle sets them and the rates) are measured over
// replication.quota.window.num samples of
// replication.quota.window.size.seconds; while the rate is above
// leader.replication.throttled.rate (follower.replication.throttled.rate)
// the leader sends such a partition nothing, and the follower leaves it
// out of its fetches. Only replicas outside the ISR are held back, as in
// Kafka, so a throttle never shrinks the ISR.
//
// Locks: a quota's mu is a leaf.

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gregorbroker/gregor/metrics"
)

// QuotaWindow is replication.quota.window.num samples of
// replication.quota.window.size.seconds.
type QuotaWindow = metrics.RateWindow

// DefaultQuotaWindow is Kafka's: 11 samples of a second.
func DefaultQuotaWindow() QuotaWindow { return metrics.DefaultRateWindow() }

// replicationQuota is one direction's throttle.
type replicationQuota = metrics.ByteRate

func newReplicationQuota(w QuotaWindow) *replicationQuota { return metrics.NewByteRate(w) }

// SetReplicationThrottles sets leader.replication.throttled.rate and
// follower.replication.throttled.rate (bytes per second; math.MaxInt64 or
// less than 0: none), as a dynamic broker config change does.
func (m *Manager) SetReplicationThrottles(leaderRate, followerRate int64) {
	m.leaderQuota.SetLimit(leaderRate)
	m.followerQuota.SetLimit(followerRate)
}

// throttledReplica reports whether a throttled-replicas list (the topic
// config's "partition:broker,..." or "*") names this partition on broker.
func throttledReplica(list []string, partition, broker int32) bool {
	for _, e := range list {
		e = strings.TrimSpace(e)
		if e == "*" {
			return true
		}
		p, b, ok := strings.Cut(e, ":")
		if !ok {
			continue
		}
		pi, err1 := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		bi, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
		if err1 == nil && err2 == nil && int32(pi) == partition && int32(bi) == broker {
			return true
		}
	}
	return false
}

// leaderThrottledLocked reports whether p's replication to follower id is
// throttled on this leader: the topic names this leader's replica of p,
// the follower is not in the ISR (Kafka's shouldLeaderThrottle). The
// caller holds p.mu.
func (p *Partition) leaderThrottledLocked(id int32) bool {
	return throttledReplica(p.config.LeaderReplicationThrottledReplicas, p.tp.Partition, p.self) && !slices.Contains(p.isr, id)
}

// followerThrottled reports whether this follower's fetches of p are
// throttled: the topic names this replica and it is not in the ISR.
func (p *Partition) followerThrottled() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return throttledReplica(p.config.FollowerReplicationThrottledReplicas, p.tp.Partition, p.self) && !slices.Contains(p.isr, p.self)
}
