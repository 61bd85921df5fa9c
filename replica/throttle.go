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
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// QuotaWindow is replication.quota.window.num samples of
// replication.quota.window.size.seconds.
type QuotaWindow struct {
	Samples int
	Size    time.Duration
}

// DefaultQuotaWindow is Kafka's: 11 samples of a second.
func DefaultQuotaWindow() QuotaWindow { return QuotaWindow{Samples: 11, Size: time.Second} }

// replicationQuota is one direction's throttle.
type replicationQuota struct {
	limit  atomic.Int64 // bytes per second; math.MaxInt64: none
	window QuotaWindow

	mu      sync.Mutex
	samples []quotaSample
}

type quotaSample struct {
	start time.Time
	bytes int64
}

func newReplicationQuota(w QuotaWindow) *replicationQuota {
	if w.Samples < 1 || w.Size <= 0 {
		w = DefaultQuotaWindow()
	}
	q := &replicationQuota{window: w}
	q.limit.Store(math.MaxInt64)
	return q
}

// record counts bytes sent or fetched for throttled partitions.
func (q *replicationQuota) record(bytes int64, now time.Time) {
	if bytes <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.expireLocked(now)
	if n := len(q.samples); n > 0 && now.Sub(q.samples[n-1].start) < q.window.Size {
		q.samples[n-1].bytes += bytes
		return
	}
	q.samples = append(q.samples, quotaSample{start: now, bytes: bytes})
}

// exceeded reports whether the measured rate is above the limit (Kafka's
// Rate: the bytes over the samples kept, divided by the time they span,
// at least all but one of the samples' length).
func (q *replicationQuota) exceeded(now time.Time) bool {
	limit := q.limit.Load()
	if limit == math.MaxInt64 {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.expireLocked(now)
	if len(q.samples) == 0 {
		return false
	}
	var total int64
	for _, s := range q.samples {
		total += s.bytes
	}
	elapsed := now.Sub(q.samples[0].start)
	elapsed = max(elapsed, time.Duration(q.window.Samples-1)*q.window.Size)
	return float64(total)/elapsed.Seconds() > float64(limit)
}

// expireLocked drops samples older than the window; the caller holds mu.
func (q *replicationQuota) expireLocked(now time.Time) {
	span := time.Duration(q.window.Samples) * q.window.Size
	i := 0
	for i < len(q.samples) && now.Sub(q.samples[i].start) >= span {
		i++
	}
	if i > 0 {
		q.samples = append(q.samples[:0], q.samples[i:]...)
	}
}

// SetReplicationThrottles sets leader.replication.throttled.rate and
// follower.replication.throttled.rate (bytes per second; math.MaxInt64 or
// less than 0: none), as a dynamic broker config change does.
func (m *Manager) SetReplicationThrottles(leaderRate, followerRate int64) {
	for q, r := range map[*replicationQuota]int64{m.leaderQuota: leaderRate, m.followerQuota: followerRate} {
		if r < 0 {
			r = math.MaxInt64
		}
		q.limit.Store(r)
	}
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
