package decide

// The records of the controller's periodic elections (the controller
// schedules them, periodicelections.go there): an unclean election for
// each leaderless partition whose topic allows one, a preferred election
// for each partition not led by its first replica, each at most
// MaxElectionsPerPeriodicChange at a time.

import (
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metadata/persist"
)

// HasLeaderlessPartition reports whether some partition of img has no
// leader: the periodic unclean check has something to do. since, if not
// nil, is an image known to have none: only what differs from it is
// looked at.
func HasLeaderlessPartition(since, img *metadata.Image) bool {
	return anyPartition(since, img, func(p *metadata.Partition) bool { return p.Leader == -1 })
}

// HasImbalancedPartition reports whether some partition of img is not led
// by its first replica: the periodic preferred check has something to do.
// since is as for HasLeaderlessPartition.
func HasImbalancedPartition(since, img *metadata.Image) bool {
	return anyPartition(since, img, func(p *metadata.Partition) bool { return !hasPreferredLeader(*p) })
}

// anyPartition reports whether some partition of img satisfies pred. It
// needs no order, so it neither sorts the topic names (forEachPartition
// does, for records in a deterministic order) nor goes on past the first.
// The periodic checks run it on the raft loop whenever the image moved,
// so with since (an image in which no partition satisfies pred) it looks
// only at the topics and partitions that differ from since's, comparing
// the persistent maps and vectors subtree by subtree: a change to one
// partition costs O(log n), not a pass over every partition.
func anyPartition(since, img *metadata.Image, pred func(*metadata.Partition) bool) bool {
	if since == nil {
		for _, t := range img.Topics.All() {
			for _, p := range t.Partitions.All() {
				if pred(p) {
					return true
				}
			}
		}
		return false
	}
	found := false
	persist.Diff(since.Topics, img.Topics, func(a, b *metadata.Topic) bool { return a == b },
		func(_ string, old *metadata.Topic, inSince bool, t *metadata.Topic, inImg bool) {
			if found || !inImg {
				return
			}
			if !inSince || old.ID != t.ID {
				for _, p := range t.Partitions.All() {
					if pred(p) {
						found = true
						return
					}
				}
				return
			}
			// "Equal" here is "nothing to find": DiffVectors reports
			// the partitions of img changed since that satisfy pred, and
			// those added since (which pred must judge).
			persist.DiffVectors(old.Partitions, t.Partitions, func(_, p *metadata.Partition) bool { return !pred(p) },
				func(_ int, _, p *metadata.Partition) {
					if p != nil && pred(p) {
						found = true
					}
				})
		})
	return found
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
