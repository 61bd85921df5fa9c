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
// Each check elects at most decide.MaxElectionsPerPeriodicChange partitions; when
// it reaches that many it runs again on the next tick. Both checks and
// their schedules are loop-owned and forgotten when this node stops being
// the active controller.

import (
	"time"

	"github.com/gregorbroker/gregor/controller/decide"
	"github.com/gregorbroker/gregor/metadata"
	raft "go.etcd.io/raft/v3"
)

// periodicCheck schedules one periodic election (loop).
type periodicCheck struct {
	scheduled bool
	due       time.Time
	// again: the last run stopped at the election limit.
	again bool
	// lookedAt and needed cache the last look at an image (nil: none
	// yet).
	lookedAt *metadata.Image
	needed   bool
}

// poll reports whether the check should run now; needed says whether the
// image has anything for it (asked only when the image changed). needed's
// first argument is the image looked at last when it had nothing (so
// that only what changed since is looked at), or nil.
func (p *periodicCheck) poll(now time.Time, img *metadata.Image, interval time.Duration, needed func(since, img *metadata.Image) bool) bool {
	if !p.scheduled {
		if p.lookedAt != img || p.again {
			var since *metadata.Image
			if p.lookedAt != nil && !p.needed && !p.again {
				since = p.lookedAt
			}
			p.needed, p.lookedAt = needed(since, img), img
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
	if c.hasRoom() && c.uncleanCheck.poll(now, c.latest(), c.cfg.UncleanLeaderElectionCheckInterval, decide.HasLeaderlessPartition) {
		c.proposeElections("unclean", &c.uncleanCheck, c.env.UncleanElectionRecords(c.latest()))
	}
	if c.cfg.DisableAutoLeaderRebalance {
		return
	}
	if c.hasRoom() && c.rebalanceCheck.poll(now, c.latest(), c.cfg.LeaderImbalanceCheckInterval, decide.HasImbalancedPartition) {
		c.proposeElections("preferred", &c.rebalanceCheck, c.env.PreferredElectionRecords(c.latest()))
	}
}

func (c *Controller) proposeElections(kind string, check *periodicCheck, recs []metadata.Record) {
	check.again = len(recs) >= decide.MaxElectionsPerPeriodicChange
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

// checkUncleanElectionsIfEnabled has the periodic unclean election check
// run on the loop's next tick when enabled, so that turning unclean
// elections on elects at once rather than after
// unclean.leader.election.interval.ms. The decision cannot do it: the
// check's schedule is loop state, not the decision's to touch. The request
// goroutine hands it to the loop through c.report, without waiting; the
// records are committed by then, so the check finds them.
func (c *Controller) checkUncleanElectionsIfEnabled(enabled bool) {
	if enabled {
		c.report(func(*raft.RawNode) { c.uncleanCheck.runNow(c.now()) })
	}
}
