package controller

// The active controller's periodic elections, as Kafka's QuorumController
// schedules them:
//
//   - Unclean elections: when some partition has no leader, a check runs
//     UncleanLeaderElectionCheckInterval later
//     (unclean.leader.election.interval.ms, default 5 minutes) and elects
//     a leader, uncleanly if need be, for every leaderless partition whose
//     topic has unclean.leader.election.enable. Turning that config on (for
//     a topic, a broker or the cluster) runs the check at once.
//   - Preferred leaders (auto.leader.rebalance.enable, default true): when
//     some partition is not led by its first replica, a check runs
//     LeaderImbalanceCheckInterval later (leader.imbalance.check.interval.
//     seconds, default 300) and moves leadership back to the first replica
//     wherever it is in the ISR and active. Like Kafka's KRaft controller,
//     this ignores leader.imbalance.per.broker.percentage: every such
//     partition is moved, whatever the imbalance.
//
// Each check elects at most maxElectionsPerPeriodicChange partitions; when
// it reaches that many it runs again on the next tick. Both checks and
// their schedules are loop-owned and forgotten when this node stops being
// the active controller.

import (
	"time"

	"github.com/gregorbroker/gregor/metadata"
)

// periodicCheck schedules one periodic election (loop).
type periodicCheck struct {
	scheduled bool
	due       time.Time
	// again: the last run stopped at the election limit.
	again bool
	// neededAt and needed cache the last look at the image.
	neededAt int64
	needed   bool
	looked   bool
}

// poll reports whether the check should run now; needed says whether the
// image has anything for it (asked only when the image changed).
func (p *periodicCheck) poll(now time.Time, img *metadata.Image, interval time.Duration, needed func(*metadata.Image) bool) bool {
	if !p.scheduled {
		if !p.looked || p.neededAt != img.Offset || p.again {
			p.needed, p.neededAt, p.looked = needed(img), img.Offset, true
		}
		if !p.needed {
			return false
		}
		p.scheduled = true
		p.due = now.Add(interval)
		if p.again {
			p.due = now
		}
		return false
	}
	if now.Before(p.due) {
		return false
	}
	p.scheduled = false
	return true
}

// runNow makes the check run on the next tick.
func (p *periodicCheck) runNow(now time.Time) {
	p.scheduled = true
	p.due = now
}

// runPeriodicElections runs the checks that are due (loop, serving).
func (c *Controller) runPeriodicElections() {
	now := c.now()
	if c.hasRoom() && c.uncleanCheck.poll(now, c.latest(), c.cfg.UncleanLeaderElectionCheckInterval, hasLeaderlessPartition) {
		c.proposeElections("unclean", &c.uncleanCheck, c.uncleanElectionRecords(c.latest()))
	}
	if c.cfg.DisableAutoLeaderRebalance {
		return
	}
	if c.hasRoom() && c.rebalanceCheck.poll(now, c.latest(), c.cfg.LeaderImbalanceCheckInterval, hasImbalancedPartition) {
		c.proposeElections("preferred", &c.rebalanceCheck, c.preferredElectionRecords(c.latest()))
	}
}

func (c *Controller) proposeElections(kind string, check *periodicCheck, recs []metadata.Record) {
	check.again = len(recs) >= maxElectionsPerPeriodicChange
	if len(recs) == 0 {
		return
	}
	c.logger.Info("periodic leader elections", "kind", kind, "partitions", len(recs), "again", check.again)
	c.propose(recs, c.nextIndex(), func(err error) {
		if err != nil {
			c.logger.Warn("periodic leader elections were not committed", "kind", kind, "err", err)
		}
	})
}

// resetPeriodicElections forgets the schedules (loop).
func (c *Controller) resetPeriodicElections() {
	c.uncleanCheck = periodicCheck{}
	c.rebalanceCheck = periodicCheck{}
}

func hasLeaderlessPartition(img *metadata.Image) bool {
	found := false
	forEachPartition(img, func(_ *metadata.Topic, _ int, p metadata.Partition) { found = found || p.Leader == -1 })
	return found
}

func hasImbalancedPartition(img *metadata.Image) bool {
	found := false
	forEachPartition(img, func(_ *metadata.Topic, _ int, p metadata.Partition) { found = found || !hasPreferredLeader(p) })
	return found
}

func hasPreferredLeader(p metadata.Partition) bool {
	return len(p.Replicas) > 0 && p.Leader == p.Replicas[0]
}

// uncleanElectionRecords elects leaders for the leaderless partitions of
// topics that allow unclean elections.
func (c *Controller) uncleanElectionRecords(img *metadata.Image) []metadata.Record {
	var recs []metadata.Record
	forEachPartition(img, func(t *metadata.Topic, i int, p metadata.Partition) {
		if p.Leader != -1 || len(recs) >= maxElectionsPerPeriodicChange || !c.uncleanElectionEnabled(img, t.Name) {
			return
		}
		rec, e := c.electLeader(img, t.Name, int32(i), electionUnclean)
		if e != nil {
			c.logger.Warn("cannot elect a leader for an offline partition", "topic", t.Name, "partition", i, "err", e.err.Message)
			return
		}
		c.logger.Warn("electing a leader for an offline partition whose topic allows unclean elections", "topic", t.Name, "partition", i)
		recs = append(recs, rec)
	})
	return recs
}

// preferredElectionRecords moves leadership to the first replica where it
// can lead.
func (c *Controller) preferredElectionRecords(img *metadata.Image) []metadata.Record {
	var recs []metadata.Record
	forEachPartition(img, func(t *metadata.Topic, i int, p metadata.Partition) {
		if hasPreferredLeader(p) || len(recs) >= maxElectionsPerPeriodicChange {
			return
		}
		if rec, e := c.electLeader(img, t.Name, int32(i), electionPreferred); e == nil {
			recs = append(recs, rec)
		}
	})
	return recs
}

// isUncleanElectionEnabling reports whether recs turn
// unclean.leader.election.enable on anywhere.
func isUncleanElectionEnabling(recs []metadata.Record) bool {
	for _, r := range recs {
		if cr, ok := r.(*metadata.ConfigRecord); ok && cr.Name == uncleanLeaderElectionConfig && cr.Value != nil && isTrue(*cr.Value) {
			return true
		}
	}
	return false
}
