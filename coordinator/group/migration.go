package group

// Online migration between the protocols (KIP-848), as Kafka 4.3 does it
// under group.consumer.migration.policy:
//
//   - Upgrade: a ConsumerGroupHeartbeat joining a live classic group whose
//     protocol type is "consumer" converts it into a consumer group. Every
//     classic member becomes a member of the consumer group at the classic
//     generation, keeping its assignment, and goes on speaking the classic
//     protocol (a "classic member").
//   - Classic members of a consumer group: JoinGroup updates the member's
//     subscription and reconciles it like a heartbeat would (the answer
//     carries the member epoch as the generation and no leader, so every
//     classic member is a follower), SyncGroup returns the member's current
//     assignment, Heartbeat answers REBALANCE_IN_PROGRESS when the member
//     must rejoin to move towards its target, LeaveGroup removes it.
//   - Downgrade: when the last member speaking the consumer protocol leaves
//     (or is fenced) and classic members remain, the group turns back into
//     a classic group at the group epoch and starts a rebalance.
//
// Deliberate gap: Kafka also downgrades when a static classic member
// replaces the group's last consumer-protocol member; here that member is
// replaced within the consumer group instead.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerProtocolType is the protocol type of consumer groups.
const consumerProtocolType = "consumer"

func (m *consumerMember) usesClassicProtocol() bool { return m.meta.Classic != nil }

// sessionTimeoutOf is the session timeout of a member of group: its own
// for a classic member, the group's (or the broker's) otherwise.
func (s *shard) sessionTimeoutOf(groupID string, m *consumerMember) int64 {
	if m.meta.Classic != nil {
		return int64(m.meta.Classic.SessionTimeoutMs)
	}
	return int64(s.c.cfg.consumerSessionTimeoutMs(groupID))
}

func (g *consumerGroup) numClassicMembers() int {
	n := 0
	for _, m := range g.members {
		if m.usesClassicProtocol() {
			n++
		}
	}
	return n
}

// supportsClassicProtocols is Kafka's check that a classic member can join
// the consumer group: the consumer protocol type, and a protocol every
// classic member already in the group supports.
func (g *consumerGroup) supportsClassicProtocols(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType != consumerProtocolType || len(protocols) == 0 {
		return false
	}
	classic := g.numClassicMembers()
	for _, p := range protocols {
		n := 0
		for _, m := range g.members {
			if m.usesClassicProtocol() && slices.ContainsFunc(m.meta.Classic.Protocols, func(cp classicProtocol) bool { return cp.name == p.Name }) {
				n++
			}
		}
		if n == classic {
			return true
		}
	}
	return false
}

// topicIDsOf converts a classic (topic name) partition list to topic ids;
// unknown topics are dropped, as Kafka does.
func (s *shard) topicIDsOf(topics map[string][]int32) map[[16]byte][]int32 {
	out := map[[16]byte][]int32{}
	for name, ps := range topics {
		if info, ok := s.c.topics.TopicByName(name); ok && len(ps) > 0 {
			out[info.ID] = append(out[info.ID], ps...)
		}
	}
	return sortAssignment(out)
}

// classicAssignmentBytes serialises partitions as a ConsumerProtocol
// assignment at the version of the member's subscription (capped at the
// newest assignment version, 3).
func (s *shard) classicAssignmentBytes(partitions map[[16]byte][]int32, subscription []byte) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	if len(subscription) >= 2 {
		a.Version = min(int16(subscription[0])<<8|int16(subscription[1]), 3)
	}
	if a.Version < 0 {
		a.Version = 0
	}
	for _, t := range sortedTopicIDsOf(partitions) {
		info, ok := s.c.topics.TopicByID(t)
		if !ok || len(partitions[t]) == 0 {
			continue
		}
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic = info.Name
		at.Partitions = slices.Clone(partitions[t])
		a.Topics = append(a.Topics, at)
	}
	sort.Slice(a.Topics, func(i, j int) bool { return a.Topics[i].Topic < a.Topics[j].Topic })
	return a.AppendTo(nil)
}

func decodeSubscription(b []byte) (kmsg.ConsumerMemberMetadata, error) {
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(b); err != nil {
		return sub, fmt.Errorf("decoding the consumer protocol subscription: %w", err)
	}
	return sub, nil
}

// --- upgrade -----------------------------------------------------------------

// upgradeRefusal says why a live classic group cannot become a consumer
// group, or "" when it can.
func (s *shard) upgradeRefusal(cg *classicGroup) string {
	cfg := &s.c.cfg
	switch {
	case !cfg.migrationUpgradeAllowed():
		return "the online upgrade is disabled"
	case cg.protocolType != consumerProtocolType:
		return "the group does not use the consumer embedded protocol"
	case int32(len(cg.members)) > cfg.ConsumerMaxSize:
		return "the group size exceeds the consumer group maximum size"
	}
	return ""
}

// upgradeClassicGroup converts a live classic group into a consumer group
// at the classic generation (Kafka's ConsumerGroup.fromClassicGroup). The
// classic group's parked requests learn of the new rebalance.
func (s *shard) upgradeClassicGroup(cg *classicGroup, recs *[]record, now int64) (*consumerGroup, error) {
	type converted struct {
		id   string
		meta memberMetadataValue
		part map[[16]byte][]int32
	}
	var members []converted
	for _, id := range cg.order {
		cm := cg.members[id]
		subBytes := cm.metadataFor(cg.protocol)
		if subBytes == nil && len(cm.protocols) > 0 {
			subBytes = cm.protocols[0].metadata
		}
		sub, err := decodeSubscription(subBytes)
		if err != nil {
			return nil, err
		}
		var assigned map[[16]byte][]int32
		if len(cm.assignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(cm.assignment); err != nil {
				return nil, fmt.Errorf("decoding the assignment of member %s: %w", id, err)
			}
			byName := map[string][]int32{}
			for _, t := range a.Topics {
				byName[t.Topic] = append(byName[t.Topic], t.Partitions...)
			}
			assigned = s.topicIDsOf(byName)
		}
		topics := slices.Clone(sub.Topics)
		sort.Strings(topics)
		meta := memberMetadataValue{
			InstanceID: cloneStr(cm.instanceID), RackID: cloneStr(sub.Rack),
			ClientID: cm.clientID, ClientHost: cm.clientHost,
			SubscribedTopicNames: slices.Compact(topics), RebalanceTimeoutMs: cm.rebalanceTimeout,
			Classic: &classicMemberMetadata{SessionTimeoutMs: cm.sessionTimeout},
		}
		for _, p := range cm.protocols {
			meta.Classic.Protocols = append(meta.Classic.Protocols, classicProtocol{name: p.name, metadata: slices.Clone(p.metadata)})
		}
		members = append(members, converted{id: id, meta: meta, part: assigned})
	}

	cg.failWaiters(kerr.RebalanceInProgress.Code)
	s.emit(recs, record{key: groupMetadataKey(cg.id)})
	epoch := cg.generation
	for _, m := range members {
		s.emit(recs, memberMetadataRecord(cg.id, m.id, &m.meta))
	}
	s.emit(recs, epochRecord(cg.id, epoch))
	s.c.events.consumerRebalances.Add(1)
	for _, m := range members {
		s.emit(recs, targetMemberRecord(cg.id, m.id, m.part))
	}
	s.emit(recs, targetMetadataRecord(cg.id, epoch))
	for _, m := range members {
		cur := consumerMember{id: m.id, epoch: epoch, prevEpoch: epoch, state: memberStable, assigned: m.part}
		s.emit(recs, currentAssignmentRecord(cg.id, &cur))
	}
	g := s.consumer[cg.id]
	if g == nil {
		// A group without members is only its epoch records.
		g = newConsumerGroup(cg.id)
		s.consumer[cg.id] = g
	}
	for _, m := range g.members {
		m.sessionDeadline = now + s.sessionTimeoutOf(g.id, m)
	}
	g.metadataHash = s.subscriptionHash(g)
	s.c.log.Info("upgraded classic group to a consumer group", "group", cg.id, "generation", epoch, "members", len(members))
	return g, nil
}

// --- downgrade ---------------------------------------------------------------

// downgradeAllowed is Kafka's check when leavingID leaves: it must be the
// last member speaking the consumer protocol, and classic members remain.
func (s *shard) downgradeAllowed(g *consumerGroup, leavingID string) bool {
	leaving := g.members[leavingID]
	if leaving == nil || leaving.usesClassicProtocol() || len(g.members) <= 1 {
		return false
	}
	if g.numClassicMembers() != len(g.members)-1 {
		return false
	}
	p := strings.ToLower(s.c.cfg.ConsumerMigrationPolicy)
	if p != MigrationDowngrade && p != MigrationBidirectional {
		return false
	}
	return int32(len(g.members)-1) <= s.c.cfg.MaxSize
}

// downgradeConsumerGroup turns g, without leavingID, back into a classic
// group (Kafka's ClassicGroup.fromConsumerGroup): Stable at the group
// epoch with every member's target assignment, then a rebalance so that
// the members rejoin.
func (s *shard) downgradeConsumerGroup(g *consumerGroup, leavingID string, recs *[]record, now int64) {
	type keep struct {
		m      *consumerMember
		target map[[16]byte][]int32
	}
	var kept []keep
	for _, id := range sortedKeys(g.members) {
		if id != leavingID {
			kept = append(kept, keep{m: g.members[id], target: g.target[id]})
		}
	}
	epoch := g.epoch
	for _, r := range s.deleteConsumerGroupRecords(g) {
		s.emit(recs, r)
	}

	cg := newClassicGroup(g.id, now)
	cg.generation = epoch
	cg.state = classicStable
	for _, k := range kept {
		cm := &classicMember{
			id: k.m.id, instanceID: cloneStr(k.m.meta.InstanceID),
			clientID: k.m.meta.ClientID, clientHost: k.m.meta.ClientHost,
			rebalanceTimeout: k.m.meta.RebalanceTimeoutMs, sessionTimeout: k.m.meta.Classic.SessionTimeoutMs,
			protocolType: consumerProtocolType,
		}
		for _, p := range k.m.meta.Classic.Protocols {
			cm.protocols = append(cm.protocols, classicProtocol{name: p.name, metadata: slices.Clone(p.metadata)})
		}
		cg.addMember(cm)
	}
	cg.protocol = cg.selectProtocol()
	for _, k := range kept {
		cm := cg.members[k.m.id]
		cm.assignment = s.classicAssignmentBytes(k.target, cm.metadataFor(cg.protocol))
	}
	s.emit(recs, cg.metadataRecord())

	// The replayed group has only the selected protocol of each member;
	// the live one keeps them all until the members rejoin.
	live := s.classic[g.id]
	for _, k := range kept {
		if m := live.members[k.m.id]; m != nil {
			m.protocols = cg.members[k.m.id].protocols
			live.renewSession(m, now)
		}
	}
	s.c.log.Info("downgraded consumer group to a classic group", "group", g.id, "generation", epoch, "members", len(kept))
	s.prepareRebalance(live, now, fmt.Sprintf("Downgrade group %s from consumer to classic.", g.id))
}

// removeConsumerMember removes memberID, or converts the group to a
// classic one when memberID was its last consumer-protocol member.
// It reports whether the group was downgraded.
func (s *shard) removeConsumerMember(g *consumerGroup, memberID string, recs *[]record, now int64) bool {
	if s.downgradeAllowed(g, memberID) {
		s.downgradeConsumerGroup(g, memberID, recs, now)
		return true
	}
	s.fenceMember(g, memberID, recs)
	return false
}

// --- classic members of a consumer group -------------------------------------

// classicJoinToConsumer handles a JoinGroup to a non-empty consumer group
// (Kafka's classicGroupJoinToConsumerGroup). It answers at once: the
// member's generation is its member epoch.
func (s *shard) classicJoinToConsumer(ctx context.Context, g *consumerGroup, client Client, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	cfg := &s.c.cfg
	now := s.c.nowMs()
	memberID := req.MemberID
	unknown := memberID == ""
	if unknown {
		memberID = protocol.RandomUUID().String()
	}
	if g.members[memberID] == nil && int32(len(g.members)) >= cfg.ConsumerMaxSize {
		return classicJoinError(req.Version, memberID, kerr.GroupMaxSizeReached.Code)
	}
	if !g.supportsClassicProtocols(req.ProtocolType, req.Protocols) {
		return classicJoinError(req.Version, req.MemberID, kerr.InconsistentGroupProtocol.Code)
	}
	if unknown && req.InstanceID == nil && req.Version >= 4 {
		// KIP-394: a dynamic member first gets its id.
		return classicJoinError(req.Version, memberID, kerr.MemberIDRequired.Code)
	}
	sub, err := decodeSubscription(req.Protocols[0].Metadata)
	if err != nil {
		s.c.log.Warn("classic member joining a consumer group sent a malformed subscription", "group", g.id, "err", err)
		return classicJoinError(req.Version, req.MemberID, kerr.UnknownServerError.Code)
	}

	var recs []record
	var m *consumerMember
	if req.InstanceID == nil {
		m = g.members[memberID]
	} else {
		existingID, known := g.static[*req.InstanceID]
		switch {
		case unknown && known:
			// The new incarnation takes the previous one's place and
			// assignment.
			m = s.replaceConsumerMember(g, g.members[existingID], memberID, &recs)
		case unknown:
			m = g.members[memberID]
		case !known:
			return classicJoinError(req.Version, req.MemberID, kerr.UnknownMemberID.Code)
		case existingID != memberID:
			return classicJoinError(req.Version, req.MemberID, kerr.FencedInstanceID.Code)
		default:
			m = g.members[memberID]
		}
	}

	newMeta := memberMetadataValue{RebalanceTimeoutMs: -1}
	if m != nil {
		newMeta = m.meta
	}
	if req.InstanceID != nil {
		newMeta.InstanceID = cloneStr(req.InstanceID)
	}
	if sub.Rack != nil {
		newMeta.RackID = cloneStr(sub.Rack)
	}
	rebalanceTimeout := req.RebalanceTimeoutMillis
	if req.Version == 0 {
		rebalanceTimeout = req.SessionTimeoutMillis
	}
	if rebalanceTimeout != -1 {
		newMeta.RebalanceTimeoutMs = rebalanceTimeout
	}
	topics := slices.Clone(sub.Topics)
	sort.Strings(topics)
	newMeta.SubscribedTopicNames = slices.Compact(topics)
	newMeta.ClientID, newMeta.ClientHost = client.ID, client.Host
	newMeta.Classic = &classicMemberMetadata{SessionTimeoutMs: req.SessionTimeoutMillis}
	for _, p := range req.Protocols {
		newMeta.Classic.Protocols = append(newMeta.Classic.Protocols, classicProtocol{name: p.Name, metadata: slices.Clone(p.Metadata)})
	}

	owned := map[string][]int32{}
	for _, op := range sub.OwnedPartitions {
		owned[op.Topic] = append(owned[op.Topic], op.Partitions...)
	}
	ownedTopics := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for t, ps := range s.topicIDsOf(owned) {
		ownedTopics = append(ownedTopics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t, Partitions: ps})
	}
	s.updateConsumerMember(g, m, memberID, &newMeta, ownedTopics, &recs, now, client.DescribeTopic)

	if err := s.write(ctx, recs); err != nil {
		return classicJoinError(req.Version, req.MemberID, appendErrorCode(err))
	}
	m = g.members[memberID]
	m.sessionDeadline = now + int64(req.SessionTimeoutMillis)
	m.joinDeadline = 0
	m.syncDeadline = now + int64(m.meta.RebalanceTimeoutMs)

	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = req.Version
	resp.MemberID = memberID
	resp.Generation = m.epoch
	resp.ProtocolType = strPtr(consumerProtocolType)
	resp.Protocol = strPtr(req.Protocols[0].Name)
	resp.Members = []kmsg.JoinGroupResponseMember{}
	return resp
}

// classicMemberOf finds the classic member a Sync/Heartbeat/Leave names,
// with Kafka's errors.
func (g *consumerGroup) classicMemberOf(memberID string, instanceID *string) (*consumerMember, int16) {
	var m *consumerMember
	if instanceID == nil {
		m = g.members[memberID]
		if m == nil {
			return nil, kerr.UnknownMemberID.Code
		}
	} else {
		id, ok := g.static[*instanceID]
		if !ok {
			return nil, kerr.UnknownMemberID.Code
		}
		if id != memberID {
			return nil, kerr.FencedInstanceID.Code
		}
		m = g.members[id]
	}
	if !m.usesClassicProtocol() {
		return nil, kerr.UnknownMemberID.Code
	}
	return m, 0
}

// mustRejoin says whether a classic member should rejoin to move towards
// its target: a newer group epoch, partitions to revoke, or partitions it
// waits for that are now free.
func (g *consumerGroup) mustRejoin(m *consumerMember) bool {
	switch {
	case m.epoch < g.epoch:
		return true
	case m.state == memberUnrevokedPartitions:
		return true
	case m.state == memberUnreleasedPartitions:
		for t, ps := range g.target[m.id] {
			for _, p := range ps {
				if slices.Contains(m.assigned[t], p) {
					continue
				}
				if owner := g.owners[topicPartition{t, p}]; owner != "" && owner != m.id {
					return false // still waiting on another member
				}
			}
		}
		return true
	}
	return false
}

func (s *shard) classicSyncToConsumer(g *consumerGroup, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	m, code := g.classicMemberOf(req.MemberID, req.InstanceID)
	if code != 0 {
		return syncError(req.Version, code)
	}
	if req.Generation != m.epoch {
		return syncError(req.Version, kerr.IllegalGeneration.Code)
	}
	protocol := m.meta.Classic.Protocols[0].name
	if (req.ProtocolType != nil && *req.ProtocolType != consumerProtocolType) || (req.Protocol != nil && *req.Protocol != protocol) {
		return syncError(req.Version, kerr.InconsistentGroupProtocol.Code)
	}
	now := s.c.nowMs()
	if g.epoch > m.epoch && m.state != memberUnrevokedPartitions {
		if m.joinDeadline == 0 {
			m.joinDeadline = now + int64(m.meta.RebalanceTimeoutMs)
		}
		return syncError(req.Version, kerr.RebalanceInProgress.Code)
	}
	m.syncDeadline = 0
	m.sessionDeadline = now + s.sessionTimeoutOf(g.id, m)
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = req.Version
	resp.ProtocolType = req.ProtocolType
	resp.Protocol = req.Protocol
	resp.MemberAssignment = s.classicAssignmentBytes(m.assigned, m.meta.Classic.Protocols[0].metadata)
	return resp
}

func (s *shard) classicHeartbeatToConsumer(g *consumerGroup, req *kmsg.HeartbeatRequest) int16 {
	m, code := g.classicMemberOf(req.MemberID, req.InstanceID)
	if code != 0 {
		return code
	}
	if req.Generation != m.epoch {
		return kerr.IllegalGeneration.Code
	}
	now := s.c.nowMs()
	m.sessionDeadline = now + s.sessionTimeoutOf(g.id, m)
	if g.mustRejoin(m) {
		if m.joinDeadline == 0 {
			m.joinDeadline = now + int64(m.meta.RebalanceTimeoutMs)
		}
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// classicLeaveToConsumer removes classic members named by a LeaveGroup;
// the group epoch is bumped once if any left.
func (s *shard) classicLeaveToConsumer(ctx context.Context, g *consumerGroup, req *kmsg.LeaveGroupRequest, members []kmsg.LeaveGroupRequestMember) *kmsg.LeaveGroupResponse {
	resp := kmsg.NewPtrLeaveGroupResponse()
	resp.Version = req.Version
	var recs []record
	for _, lm := range members {
		out := kmsg.NewLeaveGroupResponseMember()
		out.MemberID, out.InstanceID = lm.MemberID, lm.InstanceID
		var m *consumerMember
		if lm.InstanceID == nil {
			m = g.members[lm.MemberID]
		} else if id, ok := g.static[*lm.InstanceID]; ok {
			m = g.members[id]
			if lm.MemberID != "" && lm.MemberID != id {
				out.ErrorCode = kerr.FencedInstanceID.Code
				resp.Members = append(resp.Members, out)
				continue
			}
		}
		switch {
		case m == nil || !m.usesClassicProtocol():
			out.ErrorCode = kerr.UnknownMemberID.Code
		default:
			out.MemberID = m.id
			for _, r := range removeMemberRecords(g.id, m.id) {
				s.emit(&recs, r)
			}
		}
		resp.Members = append(resp.Members, out)
	}
	if len(recs) > 0 {
		g.metadataHash = s.subscriptionHash(g)
		s.emit(&recs, epochRecord(g.id, g.epoch+1))
		s.c.events.consumerRebalances.Add(1)
		if err := s.write(ctx, recs); err != nil {
			code := appendErrorCode(err)
			for i := range resp.Members {
				if resp.Members[i].ErrorCode == 0 {
					resp.Members[i].ErrorCode = code
				}
			}
		}
	}
	if req.Version < 3 {
		resp.ErrorCode = resp.Members[0].ErrorCode
		resp.Members = nil
	}
	return resp
}
