package controller

// partitionChange is Kafka's PartitionChangeBuilder without eligible
// leader replicas and directories (doc.go): the target ISR, replicas and
// reassignment state of one partition, from which build derives the one
// PartitionChangeRecord that gets there. On the way it completes a
// reassignment whose target replicas are all in the ISR, elects a leader
// when the current one cannot stay, and makes sure the leader epoch moves
// when replicas leave.

import (
	"slices"
	"strings"

	"github.com/gregorbroker/gregor/protocol"
)

// mvNoLeaderEpochBumpOnShrink is metadata.version 3.6-IV0: below it
// Kafka's brokers needed a new leader epoch on every ISR shrink
// (KAFKA-15021), so the controller bumps it.
const mvNoLeaderEpochBumpOnShrink int16 = 12

const uncleanLeaderElectionKey = "unclean.leader.election.enable"

type partitionChange struct {
	img     *Image
	topicID protocol.UUID
	id      int32
	cur     Partition

	isr      []int32
	replicas []int32
	adding   []int32
	removing []int32
	recovery LeaderRecoveryState
	// unclean lets the election fall back to an active replica outside
	// the ISR (unclean.leader.election.enable).
	unclean bool
}

func newPartitionChange(img *Image, t *Topic, id int32) *partitionChange {
	p := t.Partitions[id]
	return &partitionChange{
		img: img, topicID: t.ID, id: id, cur: p,
		isr: p.ISR, replicas: p.Replicas, adding: p.AddingReplicas, removing: p.RemovingReplicas,
		recovery: p.LeaderRecoveryState,
	}
}

// build returns the record that takes the partition to the target, or nil
// when nothing changes.
func (pc *partitionChange) build() *PartitionChangeRecord {
	rec := &PartitionChangeRecord{PartitionID: pc.id, TopicID: pc.topicID, Leader: noLeaderChange}
	pc.completeReassignment()
	pc.elect(rec)
	// A replica that leaves must not keep acting on the old leader epoch.
	if rec.Leader == noLeaderChange && !containsAll(pc.replicas, pc.cur.Replicas) {
		rec.Leader = pc.cur.Leader
	}
	// Without ELR an empty ISR is never written: the last member stays.
	if rec.ISR == nil && len(pc.isr) > 0 && !slices.Equal(pc.isr, pc.cur.ISR) {
		rec.ISR = slices.Clone(pc.isr)
	}
	if rec.Leader == noLeaderChange && rec.ISR != nil && !containsAll(rec.ISR, pc.cur.ISR) &&
		pc.img.Features[MetadataVersionFeature] < mvNoLeaderEpochBumpOnShrink {
		rec.Leader = pc.cur.Leader
	}
	if len(pc.replicas) > 0 && !slices.Equal(pc.replicas, pc.cur.Replicas) {
		rec.Replicas = slices.Clone(pc.replicas)
	}
	if !slices.Equal(pc.removing, pc.cur.RemovingReplicas) {
		rec.RemovingReplicas = append([]int32{}, pc.removing...)
	}
	if !slices.Equal(pc.adding, pc.cur.AddingReplicas) {
		rec.AddingReplicas = append([]int32{}, pc.adding...)
	}
	if pc.recovery != pc.cur.LeaderRecoveryState {
		state := pc.recovery
		rec.LeaderRecoveryState = &state
	}
	if rec.Leader == noLeaderChange && rec.ISR == nil && rec.Replicas == nil && rec.RemovingReplicas == nil &&
		rec.AddingReplicas == nil && rec.LeaderRecoveryState == nil {
		return nil
	}
	return rec
}

// completeReassignment finishes a reassignment once every replica that
// stays is in the ISR (and the ISR keeps at least one of them): the
// removing replicas leave the replicas and the ISR.
func (pc *partitionChange) completeReassignment() {
	if len(pc.adding) == 0 && len(pc.removing) == 0 {
		return
	}
	isr, replicas := pc.isr, pc.replicas
	if len(pc.removing) > 0 {
		isr = withoutAll(isr, pc.removing)
		replicas = withoutAll(replicas, pc.removing)
		if len(isr) == 0 || len(replicas) == 0 {
			return
		}
	}
	if !containsAll(isr, replicas) {
		return
	}
	pc.isr, pc.replicas, pc.adding, pc.removing = isr, replicas, nil, nil
}

// elect keeps the leader while it is an active member of the target ISR;
// otherwise it picks the first such replica in replica order, or, when
// unclean elections are allowed, the first active replica, which then
// becomes the whole ISR and starts recovering.
func (pc *partitionChange) elect(rec *PartitionChangeRecord) {
	valid := func(r int32) bool { return containsInt32(pc.isr, r) && isActiveBroker(pc.img, r) }
	leader, unclean := int32(-1), false
	if valid(pc.cur.Leader) {
		return
	}
	if i := slices.IndexFunc(pc.replicas, valid); i >= 0 {
		leader = pc.replicas[i]
	} else if pc.unclean {
		if i := slices.IndexFunc(pc.replicas, func(r int32) bool { return isActiveBroker(pc.img, r) }); i >= 0 {
			leader, unclean = pc.replicas[i], true
		}
	}
	if leader == pc.cur.Leader {
		return
	}
	rec.Leader = leader
	if unclean {
		rec.ISR = []int32{leader}
		pc.recovery = LeaderRecovering
	}
}

// uncleanElectionEnabled is the topic's unclean.leader.election.enable:
// its override, else the cluster-wide broker default, else the schema's.
func (c *Controller) uncleanElectionEnabled(img *Image, topic string) bool {
	if v, ok := img.Configs[ConfigResource{Type: ConfigResourceTopic, Name: topic}][uncleanLeaderElectionKey]; ok {
		return strings.EqualFold(v, "true")
	}
	if v, ok := img.Configs[ConfigResource{Type: ConfigResourceBroker}][uncleanLeaderElectionKey]; ok {
		return strings.EqualFold(v, "true")
	}
	if c.cfg.Schema != nil {
		if v, ok := c.cfg.Schema.Default(ConfigResourceTopic, uncleanLeaderElectionKey); ok {
			return strings.EqualFold(v, "true")
		}
	}
	return false
}

// containsAll reports whether every element of sub is in s.
func containsAll(s, sub []int32) bool {
	for _, v := range sub {
		if !slices.Contains(s, v) {
			return false
		}
	}
	return true
}

// withoutAll is s without the elements of drop, in order.
func withoutAll(s, drop []int32) []int32 {
	out := make([]int32, 0, len(s))
	for _, v := range s {
		if !slices.Contains(drop, v) {
			out = append(out, v)
		}
	}
	return out
}
