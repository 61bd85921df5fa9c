package controller

// Partition changes in the manner of Kafka's PartitionChangeBuilder: one
// place decides a partition's next ISR, eligible leader replicas (ELR,
// KIP-966), last known leader and leader, for broker fencing, controlled
// shutdown, unfencing, unclean restarts, unregistration, ElectLeaders,
// the periodic unclean and preferred elections, and ISR changes a leader
// asks for (AlterPartition).
//
// ELR (eligible.leader.replicas.version >= 1): when the ISR shrinks below
// the topic's min.insync.replicas, the members that leave it go to the
// ELR. They are replicas known to hold everything committed, so when the
// ISR is empty the leader can come from the ELR without losing data; the
// elected member becomes the ISR. The ELR is cleared when the ISR grows
// back to min.insync.replicas, on an unclean election, and whenever
// min.insync.replicas changes (configs.go). A broker that restarts
// without a clean shutdown leaves the ELR (its log may have lost an
// unflushed tail). LastKnownELR holds the last leader once the ISR has
// become empty (Kafka uses the field that way: its
// useLastKnownLeaderInBalancedRecovery is always on); when both the ISR and
// the ELR are empty, that replica is elected (an unclean election) as soon
// as it can lead.
//
// Elections: the current leader stays if it can still lead; otherwise the
// first replica, in replica order, that is in the ISR (or, with an empty
// ISR, in the ELR) and can lead; then the last known leader; then, for an
// unclean election (unclean.leader.election.enable for the topic, or an
// unclean ElectLeaders), the first replica that can lead, which becomes the
// whole ISR. A preferred election tries the first replica before the
// current leader. "Can lead" is: a registered broker that is neither fenced
// nor in controlled shutdown.

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// election is Kafka's PartitionChangeBuilder.Election.
type election int

const (
	// electOnline keeps the partition online from the ISR, then the ELR.
	electOnline election = iota
	// electPreferred elects the first replica if it may lead.
	electPreferred
	// electUnclean is electOnline, then any replica that can lead.
	electUnclean
)

const (
	// EligibleLeaderReplicasFeature is the KIP-966 feature; level 1 turns
	// eligible leader replicas on.
	EligibleLeaderReplicasFeature = "eligible.leader.replicas.version"

	minInSyncReplicasConfig       = "min.insync.replicas"
	uncleanLeaderElectionConfig   = "unclean.leader.election.enable"
	defaultMinInSyncReplicas      = "1"
	defaultUncleanLeaderElection  = "false"
	maxElectionsPerPeriodicChange = 1000
)

// elrEnabled reports whether eligible leader replicas are on.
func elrEnabled(img *Image) bool { return img.Features[EligibleLeaderReplicasFeature] >= 1 }

// partitionChange is the decision for one partition. build turns it into
// the record that makes it, if anything changes.
type partitionChange struct {
	topic     *Topic
	partition int32
	// canLead reports whether a replica may become (or stay) leader.
	canLead  func(id int32) bool
	election election
	elr      bool
	// minISR is the topic's effective min.insync.replicas.
	minISR int
	// targetISR is the ISR the change asks for; nil keeps the current one.
	targetISR []int32
	// uncleanShutdown is a broker that restarted without a clean shutdown
	// and must leave the ELR too (-1 for none).
	uncleanShutdown int32
}

// newPartitionChange starts a change of t's partition with the topic's
// min.insync.replicas and unclean.leader.election.enable and the cluster's
// ELR level; canLead decides who may lead.
func (c *Controller) newPartitionChange(img *Image, t *Topic, partition int32, canLead func(int32) bool) *partitionChange {
	pc := &partitionChange{
		topic:           t,
		partition:       partition,
		canLead:         canLead,
		election:        electOnline,
		elr:             elrEnabled(img),
		minISR:          c.effectiveMinISR(img, t),
		uncleanShutdown: -1,
	}
	if c.uncleanElectionEnabled(img, t.Name) {
		pc.election = electUnclean
	}
	return pc
}

// isrChangeRecord is the record for an ISR change a partition's leader
// asked for (AlterPartition): the new ISR, the ELR maintained as above (see
// elrAfterISRChange), and a new leader only if the current one can no
// longer lead. It returns nil when nothing changes. The caller has
// validated the request (leader and partition epochs, the new ISR's
// members); canLead is isActiveBroker unless the caller knows better.
func (c *Controller) isrChangeRecord(img *Image, t *Topic, partition int32, newISR []int32) *PartitionChangeRecord {
	pc := c.newPartitionChange(img, t, partition, func(id int32) bool { return isActiveBroker(img, id) })
	pc.targetISR = slices.Clone(newISR)
	if pc.targetISR == nil {
		pc.targetISR = []int32{}
	}
	return pc.build()
}

// elrAfterISRChange is the ELR of partition p once its ISR becomes newISR
// (with ELR enabled): empty when newISR has at least minISR members;
// otherwise the current ELR plus the members leaving the ISR, less newISR
// and the broker that shut down uncleanly (-1 for none), in ascending
// order. It does not elect: a leader taken from the ELR leaves it when it
// joins the ISR (partitionChange.build).
func elrAfterISRChange(p Partition, newISR []int32, minISR int, uncleanShutdown int32) []int32 {
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
func (pc *partitionChange) build() *PartitionChangeRecord {
	p := pc.topic.Partitions[pc.partition]
	isr := p.ISR
	if pc.targetISR != nil {
		isr = pc.targetISR
	}
	elr := p.ELR
	if pc.elr {
		elr = elrAfterISRChange(p, isr, pc.minISR, pc.uncleanShutdown)
	}
	rec := &PartitionChangeRecord{TopicID: pc.topic.ID, PartitionID: pc.partition, Leader: noLeaderChange}

	leader, unclean := pc.electLeader(p, isr, elr)
	if leader != p.Leader {
		if containsInt32(elr, leader) {
			isr = []int32{leader}
			elr = withoutInt32(elr, leader)
		}
		rec.Leader = leader
		if unclean {
			// Whatever the others had beyond the new leader's log is lost.
			rec.ISR = []int32{leader}
		}
	}
	if rec.ISR != nil || !pc.elr {
		// An unclean election (or ELR turned off) leaves no replica known
		// to be complete.
		elr = nil
	}
	if !slices.Equal(elr, p.ELR) {
		rec.ELR = nonNilInt32s(elr)
	}
	// Without ELR the ISR never becomes empty: the last member stays.
	if rec.ISR == nil && (len(isr) > 0 || pc.elr) && !slices.Equal(isr, p.ISR) {
		rec.ISR = nonNilInt32s(isr)
	}
	if pc.elr {
		pc.updateLastKnownLeader(rec, p)
	}
	if rec.Leader == noLeaderChange && rec.ISR == nil && rec.ELR == nil && rec.LastKnownELR == nil && rec.Replicas == nil && rec.Directories == nil {
		return nil
	}
	return rec
}

// electLeader picks the leader (which may be the current one, or -1) and
// reports whether the election is unclean.
func (pc *partitionChange) electLeader(p Partition, isr, elr []int32) (int32, bool) {
	valid := func(r int32) bool {
		return (containsInt32(isr, r) || len(isr) == 0 && containsInt32(elr, r)) && pc.canLead(r)
	}
	candidates := p.Replicas
	if pc.election == electPreferred && len(p.Replicas) > 0 {
		if valid(p.Replicas[0]) {
			return p.Replicas[0], false
		}
		candidates = p.Replicas[1:]
	}
	if p.Leader >= 0 && valid(p.Leader) {
		return p.Leader, false
	}
	for _, r := range candidates {
		if valid(r) {
			return r, false
		}
	}
	// Kafka elects the last known leader here even when it cannot lead
	// (its check only logs); Gregor waits until it can.
	if pc.elr && len(isr) == 0 && len(elr) == 0 && len(p.LastKnownELR) == 1 && pc.canLead(p.LastKnownELR[0]) {
		return p.LastKnownELR[0], true
	}
	if pc.election == electUnclean {
		for _, r := range p.Replicas {
			if pc.canLead(r) {
				return r, true
			}
		}
	}
	return -1, false
}

// updateLastKnownLeader records the leader when the ISR first becomes
// empty, and forgets it once the partition has a leader again.
func (pc *partitionChange) updateLastKnownLeader(rec *PartitionChangeRecord, p Partition) {
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

// topicConfig is the value of a topic config as the controller resolves
// it (Kafka's ConfigurationControlManager.getTopicConfig): the topic's
// override, then the synonym this controller node has dynamically, then
// the cluster-wide dynamic default, then the static configuration
// (Schema.Default), then fallback. The keys it is used for have broker
// synonyms of the same name.
func (c *Controller) topicConfig(img *Image, topic, key, fallback string) string {
	if v, ok := img.Configs[ConfigResource{Type: ConfigResourceTopic, Name: topic}][key]; ok {
		return v
	}
	if v, ok := img.Configs[ConfigResource{Type: ConfigResourceBroker, Name: strconv.Itoa(int(c.cfg.NodeID))}][key]; ok {
		return v
	}
	if v, ok := img.Configs[ConfigResource{Type: ConfigResourceBroker}][key]; ok {
		return v
	}
	if c.cfg.Schema != nil {
		if v, ok := c.cfg.Schema.Default(ConfigResourceTopic, key); ok {
			return v
		}
	}
	return fallback
}

// effectiveMinISR is the topic's min.insync.replicas, capped at its
// replication factor (that of partition 0, as Kafka takes it).
func (c *Controller) effectiveMinISR(img *Image, t *Topic) int {
	n, err := strconv.Atoi(strings.TrimSpace(c.topicConfig(img, t.Name, minInSyncReplicasConfig, defaultMinInSyncReplicas)))
	if err != nil || n < 1 {
		n = 1
	}
	if len(t.Partitions) > 0 {
		n = min(n, len(t.Partitions[0].Replicas))
	}
	return n
}

// uncleanElectionEnabled is the topic's unclean.leader.election.enable.
func (c *Controller) uncleanElectionEnabled(img *Image, topic string) bool {
	return isTrue(c.topicConfig(img, topic, uncleanLeaderElectionConfig, defaultUncleanLeaderElection))
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
	errBrokerMinISRWithELR  = newAPIError(kerr.InvalidConfig, "Broker-level %s cannot be altered while ELR is enabled.", minInSyncReplicasConfig)
	errClusterMinISRWithELR = newAPIError(kerr.InvalidConfig, "Cluster-level %s cannot be removed while ELR is enabled.", minInSyncReplicasConfig)
)

// checkMinISRChange refuses the min.insync.replicas changes ELR forbids.
func checkMinISRChange(img *Image, recs []Record) *apiError {
	if !elrEnabled(img) {
		return nil
	}
	for _, r := range recs {
		cr, ok := r.(*ConfigRecord)
		if !ok || cr.Name != minInSyncReplicasConfig || cr.ResourceType != ConfigResourceBroker {
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
// writes a PartitionChangeRecord per partition that has anything to clear.
func clearELRRecords(img *Image, recs []Record) []Record {
	if !elrEnabled(img) {
		return nil
	}
	all := false
	topics := map[string]bool{}
	for _, r := range recs {
		cr, ok := r.(*ConfigRecord)
		if !ok || cr.Name != minInSyncReplicasConfig {
			continue
		}
		switch cr.ResourceType {
		case ConfigResourceTopic:
			topics[cr.ResourceName] = true
		case ConfigResourceBroker:
			all = true
		}
	}
	var out []Record
	forEachPartition(img, func(t *Topic, i int, p Partition) {
		if (all || topics[t.Name]) && (len(p.ELR) > 0 || len(p.LastKnownELR) > 0) {
			out = append(out, &PartitionChangeRecord{TopicID: t.ID, PartitionID: int32(i), Leader: noLeaderChange, ELR: []int32{}, LastKnownELR: []int32{}})
		}
	})
	return out
}

// elrSafetyRecords are the config records that make turning ELR on safe
// (Kafka's maybeGenerateElrSafetyRecords, also written at bootstrap): a
// cluster-level min.insync.replicas with this node's static value when
// there is none, and the removal of every broker-level one.
func (c *Controller) elrSafetyRecords(img *Image) []Record {
	var recs []Record
	if _, ok := img.Configs[ConfigResource{Type: ConfigResourceBroker}][minInSyncReplicasConfig]; !ok {
		v := c.staticMinISR()
		recs = append(recs, &ConfigRecord{ResourceType: ConfigResourceBroker, Name: minInSyncReplicasConfig, Value: &v})
	}
	for _, res := range slices.SortedFunc(maps.Keys(img.Configs), func(a, b ConfigResource) int { return cmp.Compare(a.Name, b.Name) }) {
		if res.Type != ConfigResourceBroker || res.Name == "" {
			continue
		}
		if _, ok := img.Configs[res][minInSyncReplicasConfig]; ok {
			recs = append(recs, &ConfigRecord{ResourceType: ConfigResourceBroker, ResourceName: res.Name, Name: minInSyncReplicasConfig})
		}
	}
	return recs
}

// staticMinISR is min.insync.replicas in this node's static configuration.
func (c *Controller) staticMinISR() string {
	if c.cfg.Schema != nil {
		if v, ok := c.cfg.Schema.Default(ConfigResourceBroker, minInSyncReplicasConfig); ok {
			return v
		}
	}
	return defaultMinInSyncReplicas
}
