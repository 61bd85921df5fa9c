package decide

// Partition changes in the manner of Kafka's PartitionChangeBuilder: one
// place decides a partition's next replicas, reassignment state, ISR,
// eligible leader replicas (ELR, KIP-966), last known leader, leader and
// leader recovery state, for every path that changes a partition: ISR
// changes a leader asks for (AlterPartition), reassignments and their
// cancellation, broker fencing, controlled shutdown, unfencing, unclean
// restarts, unregistration, ElectLeaders, the periodic unclean and
// preferred elections, and min.insync.replicas changes (which clear ELRs). A change sets the targets it knows (ISR, replicas,
// adding and removing replicas, recovery state, election kind, who may
// lead); build derives the one PartitionChangeRecord that gets there, in
// Kafka's order:
//
//  1. Reassignment completion: once every replica that stays is in the
//     target ISR (and the ISR keeps at least one of them), the removing
//     replicas leave the replicas and the ISR, and the adding and removing
//     lists are cleared. An ISR shrink that takes a removing replica out
//     (AlterPartition, fencing, controlled shutdown) can complete it.
//  2. ELR (eligible.leader.replicas.version >= 1): when the target ISR is
//     below the topic's min.insync.replicas, the members that leave it go
//     to the ELR. They are replicas known to hold everything committed, so
//     when the ISR is empty the leader can come from the ELR without losing
//     data; the elected member becomes the ISR. The ELR is cleared when the
//     ISR reaches min.insync.replicas again, on an unclean election, and
//     whenever min.insync.replicas changes (clearELRRecords). A broker that
//     restarts without a clean shutdown leaves the ELR (its log may have
//     lost an unflushed tail). Only current replicas are kept in it.
//  3. Election: the current leader stays if it is in the target ISR (or,
//     with an empty ISR, the ELR) and can lead; otherwise the first such
//     replica in replica order; then the last known leader; then, for an
//     unclean election (unclean.leader.election.enable for the topic, or
//     an unclean ElectLeaders), the first replica that can lead. A
//     preferred election tries the first replica before the current
//     leader. "Can lead" is, unless the caller says otherwise: a registered
//     broker that is neither fenced nor in controlled shutdown. An election
//     of the last known leader or outside the ISR and ELR is unclean: the
//     leader becomes the whole ISR, the ELR is cleared, and the leader is
//     RECOVERING (KIP-704) until it reports otherwise.
//  4. Leader epoch: a change of leader moves it; so do replicas that leave
//     (the record names the current leader, which replay counts as a new
//     leader epoch, as Kafka's merge does), and, below metadata.version
//     3.6-IV0, an ISR shrink (KAFKA-15021).
//  5. Last known leader (LastKnownELR, as Kafka's
//     useLastKnownLeaderInBalancedRecovery, always on, keeps it): set to
//     the leader when the ISR first becomes empty, cleared once the
//     partition has a leader again. Without ELR the ISR is never written
//     empty: its last member stays, and the partition waits for it.

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

// election is Kafka's PartitionChangeBuilder.Election.
type election int

const (
	// electOnline keeps the partition online from the ISR, then the ELR,
	// then the last known leader.
	electOnline election = iota
	// electPreferred elects the first replica if it may lead.
	electPreferred
	// electUnclean is electOnline, then any replica that can lead.
	electUnclean
)

const (
	minInSyncReplicasConfig      = "min.insync.replicas"
	uncleanLeaderElectionConfig  = "unclean.leader.election.enable"
	defaultMinInSyncReplicas     = "1"
	defaultUncleanLeaderElection = "false"
)

// MaxElectionsPerPeriodicChange is the most partitions one periodic
// election elects (UncleanElectionRecords, PreferredElectionRecords).
const MaxElectionsPerPeriodicChange = 1000

// mvNoLeaderEpochBumpOnShrink is metadata.version 3.6-IV0: below it
// Kafka's brokers needed a new leader epoch on every ISR shrink
// (KAFKA-15021), so the controller bumps it.
const mvNoLeaderEpochBumpOnShrink int16 = 12

// elrEnabled reports whether eligible leader replicas are on.
func elrEnabled(img *metadata.Image) bool {
	return img.Features[metadata.EligibleLeaderReplicasFeature] >= 1
}

// partitionChange is the decision for one partition: the current state and
// the targets a caller sets before build.
type partitionChange struct {
	img       *metadata.Image
	topic     *metadata.Topic
	partition int32
	cur       metadata.Partition

	// canLead reports whether a replica may become (or stay) leader.
	canLead  func(id int32) bool
	election election
	elr      bool
	// minISR is the topic's effective min.insync.replicas.
	minISR int
	// uncleanShutdown is a broker that restarted without a clean shutdown
	// and must leave the ELR too (-1 for none).
	uncleanShutdown int32
	// forgetELR drops the current ELR and last known leader before
	// deciding: they were judged by a min.insync.replicas that no longer
	// holds (clearELRRecords).
	forgetELR bool

	isr      []int32
	replicas []int32
	adding   []int32
	removing []int32
	recovery metadata.LeaderRecoveryState
}

// newPartitionChange starts a change of t's partition that keeps every
// target as it is, with the topic's min.insync.replicas and
// unclean.leader.election.enable, the cluster's ELR level, and active
// brokers as the ones that may lead.
func (e *Env) newPartitionChange(img *metadata.Image, t *metadata.Topic, partition int32) *partitionChange {
	p := *t.Partitions.At(int(partition))
	pc := &partitionChange{
		img:             img,
		topic:           t,
		partition:       partition,
		cur:             p,
		canLead:         func(id int32) bool { return isActiveBroker(img, id) },
		election:        electOnline,
		elr:             elrEnabled(img),
		minISR:          e.effectiveMinISR(img, t),
		uncleanShutdown: -1,
		isr:             p.ISR,
		replicas:        p.Replicas,
		adding:          p.AddingReplicas,
		removing:        p.RemovingReplicas,
		recovery:        p.LeaderRecoveryState,
	}
	if e.uncleanElectionEnabled(img, t.Name) {
		pc.election = electUnclean
	}
	return pc
}

// elrAfterISRChange is the ELR of partition p once its ISR becomes newISR
// (with ELR enabled): empty when newISR has at least minISR members;
// otherwise the current ELR plus the members leaving the ISR, less newISR
// and the broker that shut down uncleanly (-1 for none), in ascending
// order. It does not elect: a leader taken from the ELR leaves it when it
// joins the ISR (partitionChange.build).
func elrAfterISRChange(p metadata.Partition, newISR []int32, minISR int, uncleanShutdown int32) []int32 {
	if len(newISR) >= minISR {
		return nil
	}
	var elr []int32
	for _, r := range slices.Concat(p.ELR, p.ISR) {
		if r != uncleanShutdown && !containsInt32(newISR, r) && !containsInt32(elr, r) {
			elr = append(elr, r)
		}
	}
	slices.Sort(elr)
	return elr
}

// build returns the record for the change, or nil if nothing changes.
func (pc *partitionChange) build() *metadata.PartitionChangeRecord {
	cur := pc.cur
	// known is what the decision may rely on; the record is what differs
	// from cur.
	known := cur
	if pc.forgetELR {
		known.ELR, known.LastKnownELR = nil, nil
	}
	rec := &metadata.PartitionChangeRecord{TopicID: pc.topic.ID, PartitionID: pc.partition, Leader: metadata.NoLeaderChange}
	pc.completeReassignment()

	elr := known.ELR
	if pc.elr {
		// A replica that leaves the partition cannot lead it.
		elr = slices.DeleteFunc(elrAfterISRChange(known, pc.isr, pc.minISR, pc.uncleanShutdown),
			func(r int32) bool { return !containsInt32(pc.replicas, r) })
	}

	leader, unclean := pc.electLeader(elr, known.LastKnownELR)
	if leader != cur.Leader {
		if containsInt32(elr, leader) {
			pc.isr = []int32{leader}
			elr = withoutInt32(elr, leader)
		}
		rec.Leader = leader
		if unclean {
			// Whatever the others had beyond the new leader's log is lost.
			rec.ISR = []int32{leader}
			pc.recovery = metadata.LeaderRecovering
		}
	}
	// A replica that leaves must not keep acting on the old leader epoch.
	if rec.Leader == metadata.NoLeaderChange && !containsAll(pc.replicas, cur.Replicas) {
		rec.Leader = cur.Leader
	}
	if rec.ISR != nil || !pc.elr {
		// An unclean election (or ELR turned off) leaves no replica known
		// to be complete.
		elr = nil
	}
	if !slices.Equal(elr, cur.ELR) {
		rec.ELR = nonNilInt32s(elr)
	}
	// Without ELR the ISR never becomes empty: the last member stays.
	if rec.ISR == nil && (len(pc.isr) > 0 || pc.elr) && !slices.Equal(pc.isr, cur.ISR) {
		rec.ISR = nonNilInt32s(pc.isr)
	}
	if rec.Leader == metadata.NoLeaderChange && rec.ISR != nil && !containsAll(rec.ISR, cur.ISR) &&
		pc.img.Features[metadata.MetadataVersionFeature] < mvNoLeaderEpochBumpOnShrink {
		rec.Leader = cur.Leader
	}
	if pc.elr {
		updateLastKnownLeader(rec, known)
	}
	if len(known.LastKnownELR) < len(cur.LastKnownELR) && rec.LastKnownELR == nil {
		rec.LastKnownELR = []int32{}
	}
	if len(pc.replicas) > 0 && !slices.Equal(pc.replicas, cur.Replicas) {
		rec.Replicas = slices.Clone(pc.replicas)
	}
	if !slices.Equal(pc.removing, cur.RemovingReplicas) {
		rec.RemovingReplicas = nonNilInt32s(pc.removing)
	}
	if !slices.Equal(pc.adding, cur.AddingReplicas) {
		rec.AddingReplicas = nonNilInt32s(pc.adding)
	}
	if pc.recovery != cur.LeaderRecoveryState {
		state := pc.recovery
		rec.LeaderRecoveryState = &state
	}
	if rec.Leader == metadata.NoLeaderChange && rec.ISR == nil && rec.ELR == nil && rec.LastKnownELR == nil &&
		rec.Replicas == nil && rec.RemovingReplicas == nil && rec.AddingReplicas == nil &&
		rec.LeaderRecoveryState == nil && rec.Directories == nil {
		return nil
	}
	return rec
}

// completeReassignment finishes a reassignment once every replica that
// stays is in the target ISR (and the ISR keeps at least one of them): the
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

// electLeader picks the leader from the target replicas (the current one,
// another, or -1), given the target ELR and the last known leader, and
// reports whether the election is unclean.
func (pc *partitionChange) electLeader(elr, lastKnown []int32) (int32, bool) {
	cur := pc.cur
	valid := func(r int32) bool {
		return (containsInt32(pc.isr, r) || len(pc.isr) == 0 && containsInt32(elr, r)) && pc.canLead(r)
	}
	candidates := pc.replicas
	if pc.election == electPreferred && len(pc.replicas) > 0 {
		if valid(pc.replicas[0]) {
			return pc.replicas[0], false
		}
		candidates = pc.replicas[1:]
	}
	if cur.Leader >= 0 && valid(cur.Leader) {
		return cur.Leader, false
	}
	if i := slices.IndexFunc(candidates, valid); i >= 0 {
		return candidates[i], false
	}
	// Kafka elects the last known leader here even when it cannot lead
	// (its check only logs); Gregor waits until it can, which it can the
	// moment it is unfenced (unfenceBrokerRecords).
	if pc.elr && len(pc.isr) == 0 && len(elr) == 0 && len(lastKnown) == 1 && pc.canLead(lastKnown[0]) {
		return lastKnown[0], true
	}
	if pc.election == electUnclean {
		if i := slices.IndexFunc(pc.replicas, pc.canLead); i >= 0 {
			return pc.replicas[i], true
		}
	}
	return -1, false
}

// updateLastKnownLeader records p's leader when the ISR first becomes
// empty, and forgets it once the partition has a leader again.
func updateLastKnownLeader(rec *metadata.PartitionChangeRecord, p metadata.Partition) {
	switch {
	case rec.ISR != nil && len(rec.ISR) == 0:
		if p.Leader >= 0 && !(len(p.LastKnownELR) == 1 && p.LastKnownELR[0] == p.Leader) {
			rec.LastKnownELR = []int32{p.Leader}
		}
	case (rec.Leader >= 0 || p.Leader >= 0 && rec.Leader != -1) && len(p.LastKnownELR) > 0:
		rec.LastKnownELR = []int32{}
	}
}

// nonNilInt32s makes an empty list explicit: in a PartitionChangeRecord nil
// means "unchanged".
func nonNilInt32s(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return slices.Clone(s)
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

// topicConfig is the value of a topic config as the controller resolves
// it (Kafka's ConfigurationControlManager.getTopicConfig): the topic's
// override, then the synonym this controller node has dynamically, then
// the cluster-wide dynamic default, then the static configuration
// (Schema.Default), then fallback. The keys it is used for have broker
// synonyms of the same name.
func (e *Env) topicConfig(img *metadata.Image, topic, key, fallback string) string {
	if v, ok := img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: topic}][key]; ok {
		return v
	}
	if v, ok := img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: strconv.Itoa(int(e.NodeID))}][key]; ok {
		return v
	}
	if v, ok := img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceBroker}][key]; ok {
		return v
	}
	if e.Schema != nil {
		if v, ok := e.Schema.Default(metadata.ConfigResourceTopic, key); ok {
			return v
		}
	}
	return fallback
}

// effectiveMinISR is the topic's min.insync.replicas, capped at its
// replication factor (that of partition 0, as Kafka takes it).
func (e *Env) effectiveMinISR(img *metadata.Image, t *metadata.Topic) int {
	n, err := strconv.Atoi(strings.TrimSpace(e.topicConfig(img, t.Name, minInSyncReplicasConfig, defaultMinInSyncReplicas)))
	if err != nil || n < 1 {
		n = 1
	}
	if t.Partitions.Len() > 0 {
		n = min(n, len(t.Partitions.At(0).Replicas))
	}
	return n
}

// uncleanElectionEnabled is the topic's unclean.leader.election.enable.
func (e *Env) uncleanElectionEnabled(img *metadata.Image, topic string) bool {
	return isTrue(e.topicConfig(img, topic, uncleanLeaderElectionConfig, defaultUncleanLeaderElection))
}

// isTrue parses a boolean config value as Kafka does (anything but "true",
// in any case, is false).
func isTrue(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }

// Configs that keep ELR sound (Kafka's ConfigurationControlManager with
// ELR on): min.insync.replicas lives at the cluster level or on topics,
// never on one broker, because the controller must judge every partition
// by the same value; and a change of it clears the ELRs it applies to,
// whose members were judged by the old value.

var (
	errBrokerMinISRWithELR  = NewError(kerr.InvalidConfig, "Broker-level %s cannot be altered while ELR is enabled.", minInSyncReplicasConfig)
	errClusterMinISRWithELR = NewError(kerr.InvalidConfig, "Cluster-level %s cannot be removed while ELR is enabled.", minInSyncReplicasConfig)
)

// checkMinISRChange refuses the min.insync.replicas changes ELR forbids.
func checkMinISRChange(img *metadata.Image, recs []metadata.Record) *Error {
	if !elrEnabled(img) {
		return nil
	}
	for _, r := range recs {
		cr, ok := r.(*metadata.ConfigRecord)
		if !ok || cr.Name != minInSyncReplicasConfig || cr.ResourceType != metadata.ConfigResourceBroker {
			continue
		}
		if cr.ResourceName != "" {
			return errBrokerMinISRWithELR
		}
		if cr.Value == nil {
			return errClusterMinISRWithELR
		}
	}
	return nil
}

// clearELRRecords clears the ELR and last known leader of every partition
// whose min.insync.replicas recs change (a topic's, or with a broker or
// cluster value, every topic's). Kafka writes one ClearElrRecord; Gregor
// writes, through the partition-change builder, a PartitionChangeRecord per
// partition that has anything to clear. It elects only as an online
// election would have already (never uncleanly).
func (e *Env) clearELRRecords(img *metadata.Image, recs []metadata.Record) []metadata.Record {
	if !elrEnabled(img) {
		return nil
	}
	all := false
	topics := map[string]bool{}
	for _, r := range recs {
		cr, ok := r.(*metadata.ConfigRecord)
		if !ok || cr.Name != minInSyncReplicasConfig {
			continue
		}
		switch cr.ResourceType {
		case metadata.ConfigResourceTopic:
			topics[cr.ResourceName] = true
		case metadata.ConfigResourceBroker:
			all = true
		}
	}
	var out []metadata.Record
	forEachPartition(img, func(t *metadata.Topic, i int, p metadata.Partition) {
		if !(all || topics[t.Name]) || len(p.ELR) == 0 && len(p.LastKnownELR) == 0 {
			return
		}
		pc := e.newPartitionChange(img, t, int32(i))
		pc.election, pc.forgetELR = electOnline, true
		if rec := pc.build(); rec != nil {
			out = append(out, rec)
		}
	})
	return out
}

// ELRSafetyRecords are the config records that make turning ELR on safe
// (Kafka's maybeGenerateElrSafetyRecords, also written at bootstrap): a
// cluster-level min.insync.replicas with this node's static value when
// there is none, and the removal of every broker-level one.
func (e *Env) ELRSafetyRecords(img *metadata.Image) []metadata.Record {
	var recs []metadata.Record
	if _, ok := img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceBroker}][minInSyncReplicasConfig]; !ok {
		v := e.staticMinISR()
		recs = append(recs, &metadata.ConfigRecord{ResourceType: metadata.ConfigResourceBroker, Name: minInSyncReplicasConfig, Value: &v})
	}
	for _, res := range slices.SortedFunc(maps.Keys(img.Configs), func(a, b metadata.ConfigResource) int { return cmp.Compare(a.Name, b.Name) }) {
		if res.Type != metadata.ConfigResourceBroker || res.Name == "" {
			continue
		}
		if _, ok := img.Configs[res][minInSyncReplicasConfig]; ok {
			recs = append(recs, &metadata.ConfigRecord{ResourceType: metadata.ConfigResourceBroker, ResourceName: res.Name, Name: minInSyncReplicasConfig})
		}
	}
	return recs
}

// staticMinISR is min.insync.replicas in this node's static configuration.
func (e *Env) staticMinISR() string {
	if e.Schema != nil {
		if v, ok := e.Schema.Default(metadata.ConfigResourceBroker, minInSyncReplicasConfig); ok {
			return v
		}
	}
	return defaultMinInSyncReplicas
}
