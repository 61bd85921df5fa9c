package decide

// The records of the controller's periodic elections (the controller
// schedules them, periodicelections.go there): an unclean election for
// each leaderless partition whose topic allows one, a preferred election
// for each partition not led by its first replica, each at most
// MaxElectionsPerPeriodicChange at a time.

import (
	"github.com/gregorbroker/gregor/metadata"
)

// HasLeaderlessPartition reports whether some partition of img has no
// leader: the periodic unclean check has something to do.
func HasLeaderlessPartition(img *metadata.Image) bool {
	return anyPartition(img, func(p metadata.Partition) bool { return p.Leader == -1 })
}

// HasImbalancedPartition reports whether some partition of img is not led
// by its first replica: the periodic preferred check has something to do.
func HasImbalancedPartition(img *metadata.Image) bool {
	return anyPartition(img, func(p metadata.Partition) bool { return !hasPreferredLeader(p) })
}

// anyPartition reports whether some partition of img satisfies pred. It
// needs no order, so it neither sorts the topic names (forEachPartition
// does, for records in a deterministic order) nor goes on past the first:
// the periodic checks run it on the raft loop whenever the image moved.
func anyPartition(img *metadata.Image, pred func(metadata.Partition) bool) bool {
	for _, t := range img.Topics {
		for _, p := range t.Partitions {
			if pred(p) {
				return true
			}
		}
	}
	return false
}

func hasPreferredLeader(p metadata.Partition) bool {
	return len(p.Replicas) > 0 && p.Leader == p.Replicas[0]
}

// UncleanElectionRecords elects leaders for the leaderless partitions of
// topics that allow unclean elections.
func (e *Env) UncleanElectionRecords(img *metadata.Image) []metadata.Record {
	var recs []metadata.Record
	forEachPartition(img, func(t *metadata.Topic, i int, p metadata.Partition) {
		if p.Leader != -1 || len(recs) >= MaxElectionsPerPeriodicChange || !e.uncleanElectionEnabled(img, t.Name) {
			return
		}
		rec, err := e.electLeader(img, t.Name, int32(i), electionUnclean)
		if err != nil {
			e.Logger.Warn("cannot elect a leader for an offline partition", "topic", t.Name, "partition", i, "err", err.err.Message)
			return
		}
		e.Logger.Warn("electing a leader for an offline partition whose topic allows unclean elections", "topic", t.Name, "partition", i)
		recs = append(recs, rec)
	})
	return recs
}

// PreferredElectionRecords moves leadership to the first replica where it
// can lead.
func (e *Env) PreferredElectionRecords(img *metadata.Image) []metadata.Record {
	var recs []metadata.Record
	forEachPartition(img, func(t *metadata.Topic, i int, p metadata.Partition) {
		if hasPreferredLeader(p) || len(recs) >= MaxElectionsPerPeriodicChange {
			return
		}
		if rec, err := e.electLeader(img, t.Name, int32(i), electionPreferred); err == nil {
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
