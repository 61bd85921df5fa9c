package controller

import (
	"sync"
	"time"

	"github.com/gregorbroker/gregor/metrics"
	"go.etcd.io/raft/v3"
)

// raftStats are the windowed stats of Kafka's raft-metrics, recorded by
// the loop as it proposes, applies and waits.
type raftStats struct {
	// commitLatency is, per entry this leader proposed, the milliseconds
	// until it was applied committed.
	commitLatency metrics.Window
	// appendRecords counts records proposed as the leader, fetchRecords
	// records applied as a follower (what it took from the leader).
	appendRecords, fetchRecords metrics.Window
	// idle and polled are the loop's time waiting for work and its whole
	// time, per turn, in milliseconds: poll-idle-ratio-avg is their ratio.
	idle, polled metrics.Window
	mu           sync.Mutex
	lastWaitEnd  time.Time // mu; the loop only, but kept with its windows
}

// noteWait records one turn of the loop: it waited from start to end, and
// worked from the end of the previous wait to start.
func (s *raftStats) noteWait(start, end time.Time) {
	s.mu.Lock()
	prev := s.lastWaitEnd
	s.lastWaitEnd = end
	s.mu.Unlock()
	if prev.IsZero() {
		return
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	s.idle.Record(ms(end.Sub(start)), end)
	s.polled.Record(ms(end.Sub(prev)), end)
}

// raftStateName is Kafka's name of a raft state (KafkaRaftMetrics'
// current-state): a pre-candidate is KIP-996's prospective; a follower
// that knows no leader is unattached; a node that follows without a vote
// (a raft learner) is an observer.
func raftStateName(st raft.StateType, lead uint64, voter bool) string {
	switch {
	case st == raft.StateLeader:
		return "leader"
	case st == raft.StateCandidate:
		return "candidate"
	case st == raft.StatePreCandidate:
		return "prospective"
	case !voter:
		return "observer"
	case lead == raft.None:
		return "unattached"
	}
	return "follower"
}

// registerRaftMetrics registers Kafka's raft-metrics: the gauges read the
// quorum status the loop last published, the rates and latencies its
// windows.
func (c *Controller) registerRaftMetrics(r *metrics.Registry) {
	status := func() *quorumStatus {
		if qs := c.quorum.Load(); qs != nil {
			return qs
		}
		return &quorumStatus{leaderID: -1, vote: -1, state: "unattached", highWatermark: -1, lastIndex: -1}
	}
	r.Collect(metrics.RaftCurrentState, func(emit *metrics.Emit) { emit.Add(1, status().state) })
	r.Gauge(metrics.RaftCurrentLeader, func() float64 { return float64(status().leaderID) })
	r.Gauge(metrics.RaftCurrentVote, func() float64 { return float64(status().vote) })
	r.Gauge(metrics.RaftCurrentEpoch, func() float64 { return float64(status().term) })
	r.Gauge(metrics.RaftHighWatermark, func() float64 { return float64(status().highWatermark) })
	r.Gauge(metrics.RaftLogEndOffset, func() float64 { return float64(status().lastIndex) })
	r.Gauge(metrics.RaftNumberOfVoters, func() float64 { return float64(len(status().voters)) })
	r.Gauge(metrics.RaftNumberOfObservers, func() float64 { return float64(len(status().learners)) })
	s := &c.raftStats
	r.Gauge(metrics.RaftCommitLatencyAvg, func() float64 { return s.commitLatency.Avg(c.now()) })
	r.Gauge(metrics.RaftCommitLatencyMax, func() float64 { return s.commitLatency.Max(c.now()) })
	r.Gauge(metrics.RaftAppendRecordsRate, func() float64 { return s.appendRecords.Rate(c.now()) })
	r.Gauge(metrics.RaftFetchRecordsRate, func() float64 { return s.fetchRecords.Rate(c.now()) })
	r.Gauge(metrics.RaftPollIdleRatioAvg, func() float64 {
		now := c.now()
		polled := s.polled.Rate(now)
		if polled == 0 {
			return 0
		}
		return s.idle.Rate(now) / polled
	})
}
