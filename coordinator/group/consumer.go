package group

// The KIP-848 consumer group protocol: ConsumerGroupHeartbeat with group,
// assignment and member epochs, a server-side assignor computing the
// target assignment, and per-member incremental reconciliation (a
// partition moves only once its previous owner has revoked it; there is no
// group-wide barrier). Every change is a record: state changes are applied
// through the same replay functions the loader uses (emit), so the live
// state is by construction what a replay of the log rebuilds.

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"sort"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Member assignment states (Kafka's MemberState byte values).
const (
	memberStable               int8 = 0
	memberUnrevokedPartitions  int8 = 1
	memberUnreleasedPartitions int8 = 2
)

// Special member epochs.
const (
	leaveGroupEpoch       int32 = -1
	leaveGroupStaticEpoch int32 = -2
)

type consumerMember struct {
	id                string
	meta              memberMetadataValue
	epoch             int32
	prevEpoch         int32
	state             int8
	assigned          map[[16]byte][]int32
	pendingRevocation map[[16]byte][]int32

	// Volatile timers, ms (0 = none). joinDeadline and syncDeadline are
	// for classic members (migration.go): the rejoin asked for by a
	// REBALANCE_IN_PROGRESS, and the SyncGroup due after a JoinGroup.
	sessionDeadline   int64
	rebalanceDeadline int64
	joinDeadline      int64
	syncDeadline      int64
}

type consumerGroup struct {
	id              string
	epoch           int32
	assignmentEpoch int32
	members         map[string]*consumerMember
	static          map[string]string // instance id -> member id
	target          map[string]map[[16]byte][]int32
	regexes         map[string]*regexValue
	owners          map[topicPartition]string // member holding each partition (assigned or pending revocation)

	// metadataHash summarises the subscribed topics' ids and partition
	// counts at the last epoch bump; a change bumps the epoch. Volatile:
	// recomputed on load.
	metadataHash uint64
}

func newConsumerGroup(id string) *consumerGroup {
	return &consumerGroup{
		id: id, members: map[string]*consumerMember{}, static: map[string]string{},
		target: map[string]map[[16]byte][]int32{}, regexes: map[string]*regexValue{},
		owners: map[topicPartition]string{},
	}
}

// stateName is the group state Kafka reports.
func (g *consumerGroup) stateName() string {
	switch {
	case len(g.members) == 0:
		return "Empty"
	case g.epoch > g.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range g.members {
		if m.epoch != g.assignmentEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// --- replay -----------------------------------------------------------------

func (s *shard) replayConsumer(k parsedKey, value []byte) error {
	g := s.consumer[k.group]
	if g == nil {
		if value == nil {
			return nil
		}
		g = newConsumerGroup(k.group)
		s.consumer[k.group] = g
		delete(s.classic, k.group)
	}
	switch k.typ {
	case recConsumerGroupMetadata:
		if value == nil {
			delete(s.consumer, k.group)
			return nil
		}
		e, err := decodeEpochValue(value)
		if err != nil {
			return fmt.Errorf("decoding ConsumerGroupMetadataValue of %q: %w", k.group, err)
		}
		g.epoch = e
	case recConsumerTargetMetadata:
		if value == nil {
			g.assignmentEpoch = 0
			return nil
		}
		e, err := decodeEpochValue(value)
		if err != nil {
			return fmt.Errorf("decoding ConsumerGroupTargetAssignmentMetadataValue of %q: %w", k.group, err)
		}
		g.assignmentEpoch = e
	case recConsumerMemberMetadata:
		if value == nil {
			if m := g.members[k.member]; m != nil {
				g.releaseOwnership(m)
				if m.meta.InstanceID != nil && g.static[*m.meta.InstanceID] == m.id {
					delete(g.static, *m.meta.InstanceID)
				}
				delete(g.members, k.member)
			}
			return nil
		}
		var v memberMetadataValue
		if err := v.decode(value); err != nil {
			return fmt.Errorf("decoding member %q of %q: %w", k.member, k.group, err)
		}
		m := g.member(k.member)
		if m.meta.InstanceID != nil && g.static[*m.meta.InstanceID] == m.id {
			delete(g.static, *m.meta.InstanceID)
		}
		m.meta = v
		if v.InstanceID != nil {
			g.static[*v.InstanceID] = m.id
		}
	case recConsumerTargetMember:
		if value == nil {
			delete(g.target, k.member)
			return nil
		}
		tps, err := decodeTargetMemberValue(value)
		if err != nil {
			return fmt.Errorf("decoding target of member %q of %q: %w", k.member, k.group, err)
		}
		g.target[k.member] = fromTopicPartitions(tps)
	case recConsumerCurrentMember:
		m := g.members[k.member]
		if value == nil {
			if m != nil {
				g.releaseOwnership(m)
				m.epoch, m.prevEpoch, m.state = 0, 0, memberStable
				m.assigned, m.pendingRevocation = nil, nil
			}
			return nil
		}
		var v currentAssignmentValue
		if err := v.decode(value); err != nil {
			return fmt.Errorf("decoding assignment of member %q of %q: %w", k.member, k.group, err)
		}
		m = g.member(k.member)
		g.releaseOwnership(m)
		m.epoch, m.prevEpoch, m.state = v.MemberEpoch, v.PreviousMemberEpoch, v.State
		m.assigned = fromTopicPartitions(v.Assigned)
		m.pendingRevocation = fromTopicPartitions(v.PendingRevocation)
		g.takeOwnership(m)
	case recConsumerRegex:
		if value == nil {
			delete(g.regexes, k.regex)
			return nil
		}
		var v regexValue
		if err := v.decode(value); err != nil {
			return fmt.Errorf("decoding regex %q of %q: %w", k.regex, k.group, err)
		}
		g.regexes[k.regex] = &v
	}
	return nil
}

// member returns the member, creating an empty one (replay of its first
// record).
func (g *consumerGroup) member(id string) *consumerMember {
	m := g.members[id]
	if m == nil {
		m = &consumerMember{id: id, meta: memberMetadataValue{RebalanceTimeoutMs: -1}}
		g.members[id] = m
	}
	return m
}

func (g *consumerGroup) releaseOwnership(m *consumerMember) {
	for _, a := range []map[[16]byte][]int32{m.assigned, m.pendingRevocation} {
		for t, ps := range a {
			for _, p := range ps {
				if g.owners[topicPartition{t, p}] == m.id {
					delete(g.owners, topicPartition{t, p})
				}
			}
		}
	}
}

func (g *consumerGroup) takeOwnership(m *consumerMember) {
	for _, a := range []map[[16]byte][]int32{m.assigned, m.pendingRevocation} {
		for t, ps := range a {
			for _, p := range ps {
				g.owners[topicPartition{t, p}] = m.id
			}
		}
	}
}

func fromTopicPartitions(tps []topicPartitions) map[[16]byte][]int32 {
	out := make(map[[16]byte][]int32, len(tps))
	for _, tp := range tps {
		if len(tp.Partitions) == 0 {
			continue
		}
		ps := slices.Clone(tp.Partitions)
		slices.Sort(ps)
		out[tp.TopicID] = ps
	}
	return out
}

func toTopicPartitions(m map[[16]byte][]int32) []topicPartitions {
	out := make([]topicPartitions, 0, len(m))
	for _, t := range sortedTopicIDsOf(m) {
		if len(m[t]) == 0 {
			continue
		}
		out = append(out, topicPartitions{TopicID: t, Partitions: m[t]})
	}
	return out
}

func sameAssignment(a, b map[[16]byte][]int32) bool {
	na, nb := 0, 0
	for t, ps := range a {
		if len(ps) == 0 {
			continue
		}
		na++
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	for _, ps := range b {
		if len(ps) > 0 {
			nb++
		}
	}
	return na == nb
}

// --- records ------------------------------------------------------------------

// emit applies r to the shard through replay and queues it for the write.
func (s *shard) emit(recs *[]record, r record) {
	if err := s.replay(r); err != nil {
		// Records built here always decode; a failure is a bug.
		panic(fmt.Sprintf("group coordinator: applying own record: %v", err))
	}
	*recs = append(*recs, r)
}

func epochRecord(group string, epoch int32) record {
	return record{key: consumerGroupKey(recConsumerGroupMetadata, group), value: encodeGroupEpochValue(epoch)}
}

func memberMetadataRecord(group, member string, v *memberMetadataValue) record {
	return record{key: consumerMemberKey(recConsumerMemberMetadata, group, member), value: v.encode()}
}

func targetMemberRecord(group, member string, a map[[16]byte][]int32) record {
	return record{key: consumerMemberKey(recConsumerTargetMember, group, member), value: encodeTargetMemberValue(toTopicPartitions(a))}
}

func targetMetadataRecord(group string, epoch int32) record {
	return record{key: consumerGroupKey(recConsumerTargetMetadata, group), value: encodeTargetMetadataValue(epoch)}
}

func currentAssignmentRecord(group string, m *consumerMember) record {
	v := currentAssignmentValue{
		MemberEpoch: m.epoch, PreviousMemberEpoch: m.prevEpoch, State: m.state,
		Assigned: toTopicPartitions(m.assigned), PendingRevocation: toTopicPartitions(m.pendingRevocation),
	}
	return record{key: consumerMemberKey(recConsumerCurrentMember, group, m.id), value: v.encode()}
}

// removeMemberRecords are the tombstones that remove a member, in Kafka's
// order.
func removeMemberRecords(group, member string) []record {
	return []record{
		{key: consumerMemberKey(recConsumerCurrentMember, group, member)},
		{key: consumerMemberKey(recConsumerTargetMember, group, member)},
		{key: consumerMemberKey(recConsumerMemberMetadata, group, member)},
	}
}

// deleteConsumerGroupRecords are the tombstones that delete g. They are
// not applied; callers apply them (or drop the group) after the write.
func (s *shard) deleteConsumerGroupRecords(g *consumerGroup) []record {
	var recs []record
	for _, id := range sortedKeys(g.members) {
		recs = append(recs, removeMemberRecords(g.id, id)...)
	}
	for _, id := range sortedKeys(g.target) {
		if g.members[id] == nil {
			recs = append(recs, record{key: consumerMemberKey(recConsumerTargetMember, g.id, id)})
		}
	}
	recs = append(recs, record{key: consumerGroupKey(recConsumerTargetMetadata, g.id)})
	for _, re := range sortedKeys(g.regexes) {
		recs = append(recs, record{key: consumerRegexKey(g.id, re)})
	}
	recs = append(recs, record{key: consumerGroupKey(recConsumerGroupMetadata, g.id)})
	return recs
}

// --- heartbeat ----------------------------------------------------------------

func heartbeatError(req *kmsg.ConsumerGroupHeartbeatRequest, code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode = code
	if msg != "" {
		resp.ErrorMessage = strPtr(msg)
	}
	resp.MemberEpoch = -1
	return resp
}

func validateHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, cfg *Config) (int16, string) {
	inval := kerr.InvalidRequest.Code
	switch {
	case req.Group == "":
		return inval, "GroupId can't be empty."
	case req.InstanceID != nil && *req.InstanceID == "":
		return inval, "InstanceId can't be empty."
	case req.RackID != nil && *req.RackID == "":
		return inval, "RackId can't be empty."
	}
	switch e := req.MemberEpoch; {
	case e == 0:
		if req.MemberID == "" && req.Version >= 1 {
			return inval, "MemberId can't be empty."
		}
		if req.RebalanceTimeoutMillis == -1 {
			return inval, "RebalanceTimeoutMs must be provided in first request."
		}
		if req.Topics == nil || len(req.Topics) > 0 {
			return inval, "TopicPartitions must be empty when (re-)joining."
		}
		if req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil {
			return inval, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
		}
	case e > 0 || e == leaveGroupEpoch:
		if req.MemberID == "" {
			return inval, "MemberId can't be empty."
		}
	case e == leaveGroupStaticEpoch:
		if req.MemberID == "" {
			return inval, "MemberId can't be empty."
		}
		if req.InstanceID == nil {
			return inval, "InstanceId can't be null."
		}
	default:
		return inval, fmt.Sprintf("MemberEpoch %d is invalid.", e)
	}
	if req.ServerAssignor != nil && !slices.ContainsFunc(cfg.ConsumerAssignors, func(a string) bool {
		return normalizeAssignor(a) == normalizeAssignor(*req.ServerAssignor) && normalizeAssignor(a) != ""
	}) {
		return kerr.UnsupportedAssignor.Code, fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: %v.", *req.ServerAssignor, cfg.ConsumerAssignors)
	}
	if req.SubscribedTopicRegex != nil {
		// An empty regex clears a pattern subscription.
		if _, err := regexp.Compile(*req.SubscribedTopicRegex); err != nil {
			return kerr.InvalidRegularExpression.Code, fmt.Sprintf("SubscribedTopicRegex `%s` is not a valid regular expression: %v.", *req.SubscribedTopicRegex, err)
		}
	}
	return 0, ""
}

// ConsumerGroupHeartbeat handles the KIP-848 heartbeat: join, leave,
// subscription changes and reconciliation.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, client Client, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	if code, msg := validateHeartbeat(req, &c.cfg); code != 0 {
		return heartbeatError(req, code, msg)
	}
	s, code := c.lockGroup(req.Group)
	if code != 0 {
		return heartbeatError(req, code, "")
	}
	defer s.mu.Unlock()
	var recs []record
	resp, code, msg := s.consumerHeartbeat(client, req, &recs)
	if code != 0 {
		// Nothing emitted on an error path survives: the records were
		// applied in memory only, so rebuild from the log if any were.
		if len(recs) > 0 {
			s.rebuild(ctx)
		}
		return heartbeatError(req, code, msg)
	}
	if err := s.write(ctx, recs); err != nil {
		return heartbeatError(req, appendErrorCode(err), "")
	}
	return resp
}

func (s *shard) consumerHeartbeat(client Client, req *kmsg.ConsumerGroupHeartbeatRequest, recs *[]record) (*kmsg.ConsumerGroupHeartbeatResponse, int16, string) {
	cfg := &s.c.cfg
	now := s.c.nowMs()
	joining := req.MemberEpoch == 0

	g := s.consumer[req.Group]
	if g == nil && (s.share[req.Group] != nil || s.streams[req.Group] != nil) {
		return nil, kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a consumer group.", req.Group)
	}
	if g == nil {
		if cg := s.classic[req.Group]; cg != nil {
			if !joining {
				return nil, kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a consumer group.", req.Group)
			}
			if cg.state != classicEmpty || len(cg.pending) > 0 {
				// A live classic group: the online upgrade, when the
				// migration policy and the group allow it.
				if why := s.upgradeRefusal(cg); why != "" {
					s.c.log.Info("cannot upgrade classic group to a consumer group", "group", req.Group, "reason", why)
					return nil, kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a consumer group", req.Group)
				}
				upgraded, err := s.upgradeClassicGroup(cg, recs, now)
				if err != nil {
					s.c.log.Warn("cannot upgrade classic group to a consumer group", "group", req.Group, "err", err)
					return nil, kerr.GroupIDNotFound.Code, fmt.Sprintf("Cannot upgrade the classic group %s to consumer group because the embedded consumer protocol is malformed.", req.Group)
				}
				g = upgraded
			} else {
				// An empty classic group is replaced; its offsets stay.
				s.emit(recs, record{key: groupMetadataKey(req.Group)})
			}
		} else if !joining {
			return nil, kerr.GroupIDNotFound.Code, fmt.Sprintf("Consumer group %s not found.", req.Group)
		}
		if g == nil {
			g = newConsumerGroup(req.Group)
			s.consumer[req.Group] = g
			delete(s.classic, req.Group)
		}
	}
	if int32(len(g.members)) >= cfg.ConsumerMaxSize && (req.MemberID == "" || g.members[req.MemberID] == nil) {
		if len(g.members) == 0 && len(*recs) == 0 {
			delete(s.consumer, req.Group)
		}
		return nil, kerr.GroupMaxSizeReached.Code, fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", cfg.ConsumerMaxSize)
	}
	memberID := req.MemberID
	if memberID == "" {
		memberID = protocol.RandomUUID().String()
	}

	if req.MemberEpoch == leaveGroupEpoch || req.MemberEpoch == leaveGroupStaticEpoch {
		return s.consumerLeave(g, req, recs)
	}

	// Find or create the member.
	var m *consumerMember
	switch {
	case req.InstanceID == nil:
		m = g.members[memberID]
		if m == nil {
			if !joining {
				return nil, kerr.UnknownMemberID.Code, fmt.Sprintf("Member %s is not a member of group %s.", memberID, g.id)
			}
		} else if code, msg := checkMemberEpoch(m, req); code != 0 {
			return nil, code, msg
		}
	default:
		existingID, known := g.static[*req.InstanceID]
		existing := g.members[existingID]
		switch {
		case joining && known && existingID != memberID:
			if existing.epoch != leaveGroupStaticEpoch {
				return nil, kerr.UnreleasedInstanceID.Code, fmt.Sprintf("Static member %s with instance id %s cannot join the group because the instance id is owned by member %s.", memberID, *req.InstanceID, existingID)
			}
			// The new incarnation takes over the previous one's
			// assignment: no epoch bump, no partition moves.
			m = s.replaceConsumerMember(g, existing, memberID, recs)
		case joining:
			m = existing // nil for a new static member
			if m == nil && g.members[memberID] != nil {
				m = g.members[memberID]
			}
		case !known:
			return nil, kerr.UnknownMemberID.Code, fmt.Sprintf("Instance id %s is unknown.", *req.InstanceID)
		case existingID != memberID:
			return nil, kerr.FencedInstanceID.Code, fmt.Sprintf("Static member %s with instance id %s is fenced by member %s.", memberID, *req.InstanceID, existingID)
		default:
			m = existing
			if code, msg := checkMemberEpoch(m, req); code != 0 {
				return nil, code, msg
			}
		}
	}
	var before consumerMember
	if m != nil {
		before = *m
		if joining && m.epoch != 0 {
			// A member rejoining with epoch 0 owns nothing any more.
			fresh := *m
			fresh.epoch, fresh.prevEpoch, fresh.state = 0, 0, memberStable
			fresh.assigned, fresh.pendingRevocation = nil, nil
			s.emit(recs, currentAssignmentRecord(g.id, &fresh))
			m = g.members[memberID]
			before = *m
		}
	}

	// 1. Member metadata; a subscription change bumps the group epoch.
	newMeta := memberMetadataValue{RebalanceTimeoutMs: -1}
	if m != nil {
		newMeta = m.meta
	}
	if req.InstanceID != nil {
		newMeta.InstanceID = cloneStr(req.InstanceID)
	}
	if req.RackID != nil {
		newMeta.RackID = cloneStr(req.RackID)
	}
	if req.RebalanceTimeoutMillis != -1 {
		newMeta.RebalanceTimeoutMs = req.RebalanceTimeoutMillis
	}
	if req.ServerAssignor != nil {
		newMeta.ServerAssignor = strPtr(normalizeAssignor(*req.ServerAssignor))
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		sort.Strings(names)
		names = slices.Compact(names)
		newMeta.SubscribedTopicNames = names
	}
	if req.SubscribedTopicRegex != nil {
		if *req.SubscribedTopicRegex == "" {
			newMeta.SubscribedTopicRegex = nil
		} else {
			newMeta.SubscribedTopicRegex = cloneStr(req.SubscribedTopicRegex)
		}
	}
	newMeta.ClientID, newMeta.ClientHost = client.ID, client.Host
	// A member speaking the consumer protocol has no classic metadata
	// (a static member may take over from a classic incarnation).
	newMeta.Classic = nil
	m = s.updateConsumerMember(g, m, memberID, &newMeta, req.Topics, recs, now, client.DescribeTopic)
	m.sessionDeadline = now + int64(cfg.consumerSessionTimeoutMs(g.id))

	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.MemberID = strPtr(memberID)
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = cfg.consumerHeartbeatIntervalMs(g.id)
	full := joining || (req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil)
	if full || !sameAssignment(before.assigned, m.assigned) {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		for _, tp := range toTopicPartitions(m.assigned) {
			a.Topics = append(a.Topics, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: tp.TopicID, Partitions: tp.Partitions})
		}
		resp.Assignment = &a
	}
	return resp, 0, ""
}

// updateConsumerMember records a member's new metadata and moves the group
// on (m is nil for a new member): 1. a subscription change bumps the
// group epoch; 2. so does a change in the subscribed topics (regexes are
// re-resolved); 3. a new epoch gets a new target assignment; 4. the member
// reconciles one step towards its target, given the partitions it reports
// owning (nil: not reported).
func (s *shard) updateConsumerMember(g *consumerGroup, m *consumerMember, memberID string, newMeta *memberMetadataValue, owned []kmsg.ConsumerGroupHeartbeatRequestTopic, recs *[]record, now int64, describable func(string) bool) *consumerMember {
	bump := m == nil
	if m == nil || !sameMemberMetadata(&m.meta, newMeta) {
		if m != nil && (!slices.Equal(m.meta.SubscribedTopicNames, newMeta.SubscribedTopicNames) ||
			!eqStrPtr(m.meta.SubscribedTopicRegex, newMeta.SubscribedTopicRegex)) {
			bump = true
		}
		s.emit(recs, memberMetadataRecord(g.id, memberID, newMeta))
	}
	m = g.members[memberID]

	s.refreshRegexes(g, recs, now, describable)
	hash := s.subscriptionHash(g)
	if hash != g.metadataHash {
		bump = true
		g.metadataHash = hash
	}
	if bump {
		s.emit(recs, epochRecord(g.id, g.epoch+1))
		s.c.events.consumerRebalances.Add(1)
	}

	if g.epoch > g.assignmentEpoch {
		s.computeTarget(g, recs)
	}

	s.reconcile(g, m, owned, recs, now)
	return g.members[memberID]
}

func eqStrPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func sameMemberMetadata(a, b *memberMetadataValue) bool {
	return eqStrPtr(a.InstanceID, b.InstanceID) && eqStrPtr(a.RackID, b.RackID) &&
		a.ClientID == b.ClientID && a.ClientHost == b.ClientHost &&
		slices.Equal(a.SubscribedTopicNames, b.SubscribedTopicNames) &&
		eqStrPtr(a.SubscribedTopicRegex, b.SubscribedTopicRegex) &&
		a.RebalanceTimeoutMs == b.RebalanceTimeoutMs && eqStrPtr(a.ServerAssignor, b.ServerAssignor) &&
		a.Classic.equal(b.Classic)
}

// checkMemberEpoch fences a member whose epoch is ahead of the
// coordinator's, or behind it unless it is the previous epoch whose bump
// the member may not have seen.
func checkMemberEpoch(m *consumerMember, req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	if req.MemberEpoch == 0 {
		return 0, ""
	}
	if req.MemberEpoch > m.epoch {
		return kerr.FencedMemberEpoch.Code, fmt.Sprintf("The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.epoch)
	}
	if req.MemberEpoch < m.epoch && (req.MemberEpoch != m.prevEpoch || !ownedSubset(req.Topics, m.assigned)) {
		return kerr.FencedMemberEpoch.Code, fmt.Sprintf("The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.epoch)
	}
	return 0, ""
}

func ownedSubset(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, assigned map[[16]byte][]int32) bool {
	for _, t := range owned {
		for _, p := range t.Partitions {
			if !slices.Contains(assigned[t.TopicID], p) {
				return false
			}
		}
	}
	return true
}

func (s *shard) replaceConsumerMember(g *consumerGroup, old *consumerMember, newID string, recs *[]record) *consumerMember {
	meta := old.meta
	target := g.target[old.id]
	assigned, pending := old.assigned, old.pendingRevocation
	state := old.state
	for _, r := range removeMemberRecords(g.id, old.id) {
		s.emit(recs, r)
	}
	s.emit(recs, memberMetadataRecord(g.id, newID, &meta))
	s.emit(recs, targetMemberRecord(g.id, newID, target))
	fresh := &consumerMember{id: newID, epoch: 0, prevEpoch: 0, state: state, assigned: assigned, pendingRevocation: pending}
	s.emit(recs, currentAssignmentRecord(g.id, fresh))
	return g.members[newID]
}

func (s *shard) consumerLeave(g *consumerGroup, req *kmsg.ConsumerGroupHeartbeatRequest, recs *[]record) (*kmsg.ConsumerGroupHeartbeatResponse, int16, string) {
	var m *consumerMember
	if req.InstanceID == nil {
		m = g.members[req.MemberID]
		if m == nil {
			return nil, kerr.UnknownMemberID.Code, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.id)
		}
	} else {
		id, ok := g.static[*req.InstanceID]
		if !ok {
			return nil, kerr.UnknownMemberID.Code, fmt.Sprintf("Instance id %s is unknown.", *req.InstanceID)
		}
		if id != req.MemberID {
			return nil, kerr.FencedInstanceID.Code, fmt.Sprintf("Static member %s with instance id %s is fenced by member %s.", req.MemberID, *req.InstanceID, id)
		}
		m = g.members[id]
	}
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.MemberID = strPtr(m.id)
	resp.MemberEpoch = req.MemberEpoch
	if req.MemberEpoch == leaveGroupStaticEpoch {
		// The static member keeps its assignment for a session timeout,
		// waiting for its next incarnation.
		left := *m
		left.epoch = leaveGroupStaticEpoch
		left.pendingRevocation = nil
		s.emit(recs, currentAssignmentRecord(g.id, &left))
		g.members[m.id].rebalanceDeadline = 0
		return resp, 0, ""
	}
	s.removeConsumerMember(g, m.id, recs, s.c.nowMs())
	return resp, 0, ""
}

// fenceMember removes a member and bumps the group epoch.
func (s *shard) fenceMember(g *consumerGroup, memberID string, recs *[]record) {
	for _, r := range removeMemberRecords(g.id, memberID) {
		s.emit(recs, r)
	}
	g.metadataHash = s.subscriptionHash(g)
	s.emit(recs, epochRecord(g.id, g.epoch+1))
	s.c.events.consumerRebalances.Add(1)
}

// --- subscriptions --------------------------------------------------------------

// subscribedTopicNames is the union of every member's topic names and
// resolved regexes.
func (g *consumerGroup) subscribedTopicNames() map[string]bool {
	out := map[string]bool{}
	for _, m := range g.members {
		for _, t := range m.meta.SubscribedTopicNames {
			out[t] = true
		}
		if m.meta.SubscribedTopicRegex != nil {
			if r := g.regexes[*m.meta.SubscribedTopicRegex]; r != nil {
				for _, t := range r.Topics {
					out[t] = true
				}
			}
		}
	}
	return out
}

// memberTopics is the set of existing topics a member subscribes to.
func (s *shard) memberTopics(g *consumerGroup, m *consumerMember) map[[16]byte]int32 {
	out := map[[16]byte]int32{}
	add := func(name string) {
		if info, ok := s.c.topics.TopicByName(name); ok {
			out[info.ID] = info.Partitions
		}
	}
	for _, t := range m.meta.SubscribedTopicNames {
		add(t)
	}
	if m.meta.SubscribedTopicRegex != nil {
		if r := g.regexes[*m.meta.SubscribedTopicRegex]; r != nil {
			for _, t := range r.Topics {
				add(t)
			}
		}
	}
	return out
}

// refreshRegexes resolves every regex in use against the current topics
// (those describable allows, when set) and records changes; unused
// regexes are dropped.
func (s *shard) refreshRegexes(g *consumerGroup, recs *[]record, now int64, describable func(string) bool) {
	inUse := map[string]bool{}
	for _, m := range g.members {
		if m.meta.SubscribedTopicRegex != nil {
			inUse[*m.meta.SubscribedTopicRegex] = true
		}
	}
	for _, re := range sortedKeys(g.regexes) {
		if !inUse[re] {
			s.emit(recs, record{key: consumerRegexKey(g.id, re)})
		}
	}
	if len(inUse) == 0 {
		return
	}
	names := s.c.topics.TopicNames()
	for _, re := range sortedKeys(inUse) {
		compiled, err := regexp.Compile("^(?:" + re + ")$")
		if err != nil {
			continue
		}
		var matched []string
		for _, n := range names {
			if compiled.MatchString(n) && (describable == nil || describable(n)) {
				matched = append(matched, n)
			}
		}
		sort.Strings(matched)
		if old := g.regexes[re]; old != nil && slices.Equal(old.Topics, matched) {
			continue
		}
		v := regexValue{Topics: matched, Version: 0, Timestamp: now}
		if v.Topics == nil {
			v.Topics = []string{}
		}
		s.emit(recs, record{key: consumerRegexKey(g.id, re), value: v.encode()})
	}
}

// subscriptionHash summarises the ids and partition counts of every topic
// the group subscribes to.
func (s *shard) subscriptionHash(g *consumerGroup) uint64 {
	names := sortedKeys(g.subscribedTopicNames())
	h := fnv.New64a()
	for _, n := range names {
		info, ok := s.c.topics.TopicByName(n)
		if !ok {
			continue
		}
		h.Write([]byte(n))
		h.Write(info.ID[:])
		var b [4]byte
		b[0], b[1], b[2], b[3] = byte(info.Partitions>>24), byte(info.Partitions>>16), byte(info.Partitions>>8), byte(info.Partitions)
		h.Write(b[:])
	}
	return h.Sum64()
}

// groupAssignor is the assignor most members asked for, else the first
// configured one.
func (s *shard) groupAssignor(g *consumerGroup) string {
	votes := map[string]int{}
	for _, m := range g.members {
		if m.meta.ServerAssignor != nil {
			votes[normalizeAssignor(*m.meta.ServerAssignor)]++
		}
	}
	best := normalizeAssignor(s.c.cfg.ConsumerAssignors[0])
	for _, a := range s.c.cfg.ConsumerAssignors {
		a = normalizeAssignor(a)
		if votes[a] > votes[best] {
			best = a
		}
	}
	return best
}

// computeTarget runs the assignor for the group epoch and records the
// members' new targets.
func (s *shard) computeTarget(g *consumerGroup, recs *[]record) {
	partitions := map[[16]byte]int32{}
	var members []assignMember
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		topics := s.memberTopics(g, m)
		am := assignMember{id: id, previous: g.target[id]}
		if m.meta.InstanceID != nil {
			am.instanceID = *m.meta.InstanceID
		}
		for t, n := range topics {
			partitions[t] = n
			am.topics = append(am.topics, t)
		}
		slices.SortFunc(am.topics, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
		members = append(members, am)
	}
	result := runAssignor(s.groupAssignor(g), members, partitions)
	for _, id := range sortedKeys(g.members) {
		if !sameAssignment(g.target[id], result[id]) || g.target[id] == nil {
			s.emit(recs, targetMemberRecord(g.id, id, result[id]))
		}
	}
	s.emit(recs, targetMetadataRecord(g.id, g.epoch))
}

// reconcile moves the member one step towards its target: partitions to
// revoke first (the member keeps its epoch until it reports them gone),
// then the new epoch with every target partition that no other member
// still holds; the rest follow once their previous owners release them.
func (s *shard) reconcile(g *consumerGroup, m *consumerMember, owned []kmsg.ConsumerGroupHeartbeatRequestTopic, recs *[]record, now int64) {
	target := g.target[m.id]
	targetEpoch := g.assignmentEpoch
	switch {
	case m.epoch == leaveGroupStaticEpoch:
		return
	case m.state == memberStable && m.epoch == targetEpoch:
		return
	case m.state == memberUnrevokedPartitions && (owned == nil || ownsAny(owned, m.pendingRevocation)):
		return
	}
	next := *m
	keep := map[[16]byte][]int32{}
	revoke := map[[16]byte][]int32{}
	for t, ps := range m.assigned {
		for _, p := range ps {
			if slices.Contains(target[t], p) {
				keep[t] = append(keep[t], p)
			} else {
				revoke[t] = append(revoke[t], p)
			}
		}
	}
	if len(revoke) > 0 && (owned == nil || ownsAny(owned, revoke)) {
		next.state = memberUnrevokedPartitions
		next.assigned = sortAssignment(keep)
		next.pendingRevocation = sortAssignment(revoke)
		next.rebalanceDeadline = 0
		if m.meta.RebalanceTimeoutMs > 0 {
			next.rebalanceDeadline = now + int64(m.meta.RebalanceTimeoutMs)
		}
	} else {
		unreleased := false
		for t, ps := range target {
			for _, p := range ps {
				if slices.Contains(keep[t], p) {
					continue
				}
				if owner := g.owners[topicPartition{t, p}]; owner == "" || owner == m.id {
					keep[t] = append(keep[t], p)
				} else {
					unreleased = true
				}
			}
		}
		if m.epoch != targetEpoch {
			next.prevEpoch = m.epoch
		}
		next.epoch = targetEpoch
		next.assigned = sortAssignment(keep)
		next.pendingRevocation = nil
		next.state = memberStable
		if unreleased {
			next.state = memberUnreleasedPartitions
		}
		next.rebalanceDeadline = 0
	}
	if next.epoch == m.epoch && next.prevEpoch == m.prevEpoch && next.state == m.state &&
		sameAssignment(next.assigned, m.assigned) && sameAssignment(next.pendingRevocation, m.pendingRevocation) {
		return
	}
	deadline := next.rebalanceDeadline
	s.emit(recs, currentAssignmentRecord(g.id, &next))
	g.members[m.id].rebalanceDeadline = deadline
}

func ownsAny(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, a map[[16]byte][]int32) bool {
	for _, t := range owned {
		for _, p := range t.Partitions {
			if slices.Contains(a[t.TopicID], p) {
				return true
			}
		}
	}
	return false
}

func sortAssignment(a map[[16]byte][]int32) map[[16]byte][]int32 {
	for t, ps := range a {
		if len(ps) == 0 {
			delete(a, t)
			continue
		}
		slices.Sort(ps)
		a[t] = slices.Compact(ps)
	}
	return a
}

// startSession arms a member's session timer (on load and on heartbeat).
func (g *consumerGroup) startSession(s *shard, m *consumerMember, now int64) {
	m.sessionDeadline = now + s.sessionTimeoutOf(g.id, m)
	if m.state == memberUnrevokedPartitions && m.meta.RebalanceTimeoutMs > 0 {
		m.rebalanceDeadline = now + int64(m.meta.RebalanceTimeoutMs)
	}
}

// consumerTimers fences members whose session or revocation deadline
// passed.
func (s *shard) consumerTimers(ctx context.Context, g *consumerGroup, now int64) {
	var expired []string
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		due := func(deadline int64) bool { return deadline != 0 && now >= deadline }
		if due(m.sessionDeadline) || (m.state == memberUnrevokedPartitions && due(m.rebalanceDeadline)) ||
			due(m.joinDeadline) || due(m.syncDeadline) {
			expired = append(expired, id)
		}
	}
	if len(expired) == 0 {
		return
	}
	var recs []record
	for _, id := range expired {
		s.c.log.Info("fencing consumer group member", "group", g.id, "member", id)
		if s.downgradeAllowed(g, id) {
			// The last member speaking the consumer protocol is gone:
			// the classic members carry on as a classic group.
			s.downgradeConsumerGroup(g, id, &recs, now)
			break
		}
		for _, r := range removeMemberRecords(g.id, id) {
			s.emit(&recs, r)
		}
	}
	if s.consumer[g.id] == g {
		g.metadataHash = s.subscriptionHash(g)
		s.emit(&recs, epochRecord(g.id, g.epoch+1))
		s.c.events.consumerRebalances.Add(1)
	}
	if err := s.write(ctx, recs); err != nil {
		s.c.log.Warn("fencing members failed", "group", g.id, "err", err)
	}
}

// --- describe -----------------------------------------------------------------

// ConsumerGroupDescribe describes KIP-848 groups; classic groups answer
// GROUP_ID_NOT_FOUND so that Admin falls back to DescribeGroups.
func (c *Coordinator) ConsumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		resp.Groups = append(resp.Groups, c.describeConsumerGroup(id, req.IncludeAuthorizedOperations))
	}
	return resp
}

func (c *Coordinator) describeConsumerGroup(id string, includeOps bool) kmsg.ConsumerGroupDescribeResponseGroup {
	out := kmsg.NewConsumerGroupDescribeResponseGroup()
	out.Group = id
	out.AuthorizedOperations = -2147483648
	if includeOps {
		out.AuthorizedOperations = groupAuthorizedOps
	}
	s, code := c.lockGroup(id)
	if code != 0 {
		out.ErrorCode = code
		return out
	}
	defer s.mu.Unlock()
	g := s.consumer[id]
	if g == nil {
		out.ErrorCode = kerr.GroupIDNotFound.Code
		if s.classic[id] != nil || s.share[id] != nil || s.streams[id] != nil {
			out.ErrorMessage = strPtr(fmt.Sprintf("Group %s is not a consumer group.", id))
		} else {
			out.ErrorMessage = strPtr(fmt.Sprintf("Group %s not found.", id))
		}
		return out
	}
	out.State = g.stateName()
	out.Epoch = g.epoch
	out.AssignmentEpoch = g.assignmentEpoch
	out.AssignorName = s.groupAssignor(g)
	for _, mid := range sortedKeys(g.members) {
		m := g.members[mid]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID = m.id
		dm.InstanceID = m.meta.InstanceID
		dm.RackID = m.meta.RackID
		dm.MemberEpoch = m.epoch
		dm.ClientID = m.meta.ClientID
		dm.ClientHost = m.meta.ClientHost
		dm.SubscribedTopics = m.meta.SubscribedTopicNames
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		dm.SubscribedTopicRegex = m.meta.SubscribedTopicRegex
		dm.Assignment = c.describeAssignment(m.assigned)
		dm.TargetAssignment = c.describeAssignment(g.target[m.id])
		dm.MemberType = 1 // consumer protocol
		if m.usesClassicProtocol() {
			dm.MemberType = 0
		}
		out.Members = append(out.Members, dm)
	}
	return out
}

// groupAuthorizedOps is every operation Kafka supports on a group (READ 3,
// DELETE 6, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11), as bits:
// what a broker without an authorizer allows. The broker replaces it once
// ACLs exist.
const groupAuthorizedOps = 1<<3 | 1<<6 | 1<<8 | 1<<10 | 1<<11

func (c *Coordinator) describeAssignment(a map[[16]byte][]int32) kmsg.Assignment {
	out := kmsg.NewAssignment()
	out.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, tp := range toTopicPartitions(a) {
		atp := kmsg.NewAssignmentTopicPartition()
		atp.TopicID = tp.TopicID
		if info, ok := c.topics.TopicByID(tp.TopicID); ok {
			atp.Topic = info.Name
		}
		atp.Partitions = tp.Partitions
		out.TopicPartitions = append(out.TopicPartitions, atp)
	}
	return out
}
