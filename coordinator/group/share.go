package group

// Share groups (KIP-932), membership half: ShareGroupHeartbeat (join,
// heartbeat, leave), session expiry, the target assignment of the simple
// assignor, and ShareGroupDescribe, as Kafka 4.3's group coordinator has
// them. The records and record order are Kafka's (sharerecords.go).
//
// Kafka 4.3's rules followed here: a new group starts at epoch 1 (its
// first member gets epoch 2); a member's epoch check accepts its current
// or previous epoch and 0 (a rejoin); the group epoch moves when a
// member's subscription changes, when the subscribed topics change, when
// a member leaves, and when partitions whose share state was initialized
// meanwhile are not all in the target; a new target is computed at most
// once per group.share.assignment.interval.ms (share.assignment.interval.ms
// of the group), on a heartbeat; members take their target at once (a
// share partition can be held by many members, so nothing is revoked
// first); only partitions whose share state is initialized are handed
// out. The share state of newly subscribed partitions is initialized by
// the share coordinator through Config.ShareState after the heartbeat's
// records are written, and recorded (ShareGroupStatePartitionMetadata)
// before and after.

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareState is the share coordinator as the group coordinator uses it
// (Kafka's persister): it initializes the share state of partitions a
// share group starts to consume, and deletes it with the group.
type ShareState interface {
	// Initialize sets up the state of each partition (StartOffset -1:
	// the partition's leader starts it from share.auto.offset.reset), at
	// stateEpoch.
	Initialize(ctx context.Context, group string, stateEpoch int32, partitions map[[16]byte][]int32) error
	// InitializeAt sets up the state of each partition at the given start
	// offset (AlterShareGroupOffsets).
	InitializeAt(ctx context.Context, group string, stateEpoch int32, offsets map[[16]byte]map[int32]int64) error
	// Delete removes the state of the partitions.
	Delete(ctx context.Context, group string, partitions map[[16]byte][]int32) error
}

// The epoch a new share group starts at (Kafka 4.3: 1, so that its first
// member gets 2).
const shareInitialEpoch int32 = 1

type shareMember struct {
	id        string
	meta      shareMemberMetadataValue
	epoch     int32
	prevEpoch int32
	state     int8
	assigned  map[[16]byte][]int32

	sessionDeadline int64 // volatile, ms
}

// shareTopicState is one topic of the share group's state-partition
// metadata.
type shareTopicState struct {
	name       string
	partitions []int32 // sorted
	since      int64   // volatile: when it was asked to initialize, ms
}

type shareGroup struct {
	id                  string
	epoch               int32
	metadataHash        int64
	assignmentEpoch     int32
	assignmentTimestamp int64
	members             map[string]*shareMember
	target              map[string]map[[16]byte][]int32

	initializing map[[16]byte]*shareTopicState
	initialized  map[[16]byte]*shareTopicState
	deleting     map[[16]byte]string
}

func newShareGroup(id string) *shareGroup {
	return &shareGroup{
		id: id, epoch: shareInitialEpoch, assignmentEpoch: shareInitialEpoch,
		members: map[string]*shareMember{}, target: map[string]map[[16]byte][]int32{},
		initializing: map[[16]byte]*shareTopicState{}, initialized: map[[16]byte]*shareTopicState{},
		deleting: map[[16]byte]string{},
	}
}

// stateName is the state Kafka reports: a share group is Empty or Stable.
func (g *shareGroup) stateName() string {
	if len(g.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

// --- replay -------------------------------------------------------------------

func (s *shard) replayShare(k parsedKey, value []byte) error {
	g := s.share[k.group]
	if g == nil {
		if value == nil {
			return nil
		}
		g = newShareGroup(k.group)
		s.share[k.group] = g
	}
	switch k.typ {
	case recShareGroupMetadata:
		if value == nil {
			delete(s.share, k.group)
			return nil
		}
		var v shareGroupMetadataValue
		if err := v.decode(value); err != nil {
			return fmt.Errorf("decoding ShareGroupMetadataValue of %q: %w", k.group, err)
		}
		g.epoch, g.metadataHash = v.Epoch, v.MetadataHash
	case recShareTargetMetadata:
		if value == nil {
			g.assignmentEpoch, g.assignmentTimestamp = -1, 0
			return nil
		}
		var v shareTargetMetadataValue
		if err := v.decode(value); err != nil {
			return fmt.Errorf("decoding ShareGroupTargetAssignmentMetadataValue of %q: %w", k.group, err)
		}
		g.assignmentEpoch, g.assignmentTimestamp = v.AssignmentEpoch, v.AssignmentTimestamp
	case recShareMemberMetadata:
		if value == nil {
			delete(g.members, k.member)
			return nil
		}
		var v shareMemberMetadataValue
		if err := v.decode(value); err != nil {
			return fmt.Errorf("decoding share member %q of %q: %w", k.member, k.group, err)
		}
		g.member(k.member).meta = v
	case recShareTargetMember:
		if value == nil {
			delete(g.target, k.member)
			return nil
		}
		tps, err := decodeTargetMemberValue(value)
		if err != nil {
			return fmt.Errorf("decoding share target of member %q of %q: %w", k.member, k.group, err)
		}
		g.target[k.member] = fromTopicPartitions(tps)
	case recShareCurrentMember:
		if value == nil {
			if m := g.members[k.member]; m != nil {
				m.epoch, m.prevEpoch, m.assigned = -1, -1, nil
			}
			return nil
		}
		var v shareCurrentAssignmentValue
		if err := v.decode(value); err != nil {
			return fmt.Errorf("decoding share assignment of member %q of %q: %w", k.member, k.group, err)
		}
		m := g.member(k.member)
		m.epoch, m.prevEpoch, m.state = v.MemberEpoch, v.PreviousMemberEpoch, v.State
		m.assigned = fromTopicPartitions(v.Assigned)
	case recShareStatePartitions:
		g.initializing, g.initialized, g.deleting = map[[16]byte]*shareTopicState{}, map[[16]byte]*shareTopicState{}, map[[16]byte]string{}
		if value == nil {
			return nil
		}
		var v shareStatePartitionsValue
		if err := v.decode(value); err != nil {
			return fmt.Errorf("decoding ShareGroupStatePartitionMetadataValue of %q: %w", k.group, err)
		}
		now := s.c.nowMs()
		for _, t := range v.Initializing {
			g.initializing[t.TopicID] = &shareTopicState{name: t.TopicName, partitions: sortedCopy(t.Partitions), since: now}
		}
		for _, t := range v.Initialized {
			g.initialized[t.TopicID] = &shareTopicState{name: t.TopicName, partitions: sortedCopy(t.Partitions), since: now}
		}
		for _, t := range v.Deleting {
			g.deleting[t.TopicID] = t.TopicName
		}
	}
	return nil
}

func sortedCopy(ps []int32) []int32 {
	out := slices.Clone(ps)
	slices.Sort(out)
	return slices.Compact(out)
}

func (g *shareGroup) member(id string) *shareMember {
	m := g.members[id]
	if m == nil {
		m = &shareMember{id: id, prevEpoch: -1}
		g.members[id] = m
	}
	return m
}

// --- records ------------------------------------------------------------------

func shareEpochRecord(g *shareGroup, epoch int32, hash int64) record {
	v := shareGroupMetadataValue{Epoch: epoch, MetadataHash: hash}
	return record{key: consumerGroupKey(recShareGroupMetadata, g.id), value: v.encode()}
}

func shareMemberRecord(group, member string, v *shareMemberMetadataValue) record {
	return record{key: consumerMemberKey(recShareMemberMetadata, group, member), value: v.encode()}
}

func shareTargetMemberRecord(group, member string, a map[[16]byte][]int32) record {
	return record{key: consumerMemberKey(recShareTargetMember, group, member), value: encodeTargetMemberValue(toTopicPartitions(a))}
}

func shareTargetMetadataRecord(group string, epoch int32, at int64) record {
	v := shareTargetMetadataValue{AssignmentEpoch: epoch, AssignmentTimestamp: at}
	return record{key: consumerGroupKey(recShareTargetMetadata, group), value: v.encode()}
}

func shareCurrentRecord(group string, m *shareMember) record {
	v := shareCurrentAssignmentValue{MemberEpoch: m.epoch, PreviousMemberEpoch: m.prevEpoch, State: m.state, Assigned: toTopicPartitions(m.assigned)}
	return record{key: consumerMemberKey(recShareCurrentMember, group, m.id), value: v.encode()}
}

func shareStatePartitionsRecord(g *shareGroup, initializing, initialized map[[16]byte]*shareTopicState, deleting map[[16]byte]string) record {
	var v shareStatePartitionsValue
	for _, t := range sortedTopicIDsOf(initializing) {
		v.Initializing = append(v.Initializing, shareTopicPartitionsInfo{TopicID: t, TopicName: initializing[t].name, Partitions: initializing[t].partitions})
	}
	for _, t := range sortedTopicIDsOf(initialized) {
		v.Initialized = append(v.Initialized, shareTopicPartitionsInfo{TopicID: t, TopicName: initialized[t].name, Partitions: initialized[t].partitions})
	}
	for _, t := range sortedTopicIDsOf(deleting) {
		v.Deleting = append(v.Deleting, shareTopicPartitionsInfo{TopicID: t, TopicName: deleting[t]})
	}
	return record{key: consumerGroupKey(recShareStatePartitions, g.id), value: v.encode()}
}

// fenceShareMemberRecords are the records that remove member m from g, in
// Kafka's order, and the group epoch bump that follows.
func (s *shard) fenceShareMember(g *shareGroup, m *shareMember, recs *[]record) {
	s.emit(recs, record{key: consumerMemberKey(recShareCurrentMember, g.id, m.id)})
	s.emit(recs, record{key: consumerMemberKey(recShareTargetMember, g.id, m.id)})
	s.emit(recs, record{key: consumerMemberKey(recShareMemberMetadata, g.id, m.id)})
	s.emit(recs, shareEpochRecord(g, g.epoch+1, s.shareMetadataHash(g)))
	s.c.events.shareRebalances.Add(1)
}

// deleteShareGroupRecords are the tombstones that delete g, in Kafka's
// order. They are not applied.
func deleteShareGroupRecords(g *shareGroup) []record {
	var recs []record
	ids := sortedKeys(g.members)
	for _, id := range ids {
		recs = append(recs, record{key: consumerMemberKey(recShareCurrentMember, g.id, id)})
	}
	for _, id := range sortedKeys(g.target) {
		recs = append(recs, record{key: consumerMemberKey(recShareTargetMember, g.id, id)})
	}
	recs = append(recs, record{key: consumerGroupKey(recShareTargetMetadata, g.id)})
	for _, id := range ids {
		recs = append(recs, record{key: consumerMemberKey(recShareMemberMetadata, g.id, id)})
	}
	recs = append(recs, record{key: consumerGroupKey(recShareStatePartitions, g.id)})
	recs = append(recs, record{key: consumerGroupKey(recShareGroupMetadata, g.id)})
	return recs
}

// --- heartbeat ----------------------------------------------------------------

func shareHeartbeatError(req *kmsg.ShareGroupHeartbeatRequest, code int16, msg string) *kmsg.ShareGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	resp.ErrorCode = code
	if msg != "" {
		resp.ErrorMessage = strPtr(msg)
	}
	return resp
}

// validateShareHeartbeat is Kafka's coordinator-side check of the request
// (the broker has checked the member id's presence and length).
func validateShareHeartbeat(req *kmsg.ShareGroupHeartbeatRequest) string {
	blank := func(s string) bool { return strings.TrimSpace(s) == "" }
	switch {
	case blank(req.MemberID):
		return "MemberId can't be empty."
	case blank(req.GroupID):
		return "GroupId can't be empty."
	case req.RackID != nil && blank(*req.RackID):
		return "RackId can't be empty."
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return "SubscribedTopicNames must be set in first request."
	case req.MemberEpoch < leaveGroupEpoch:
		return "MemberEpoch is invalid."
	}
	return ""
}

// ShareGroupHeartbeat handles a share group member's heartbeat: join,
// subscription changes, assignment, leave.
func (c *Coordinator) ShareGroupHeartbeat(ctx context.Context, client Client, req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	if msg := validateShareHeartbeat(req); msg != "" {
		return shareHeartbeatError(req, kerr.InvalidRequest.Code, msg)
	}
	s, code := c.lockGroup(req.GroupID)
	if code != 0 {
		return shareHeartbeatError(req, code, "")
	}
	defer s.mu.Unlock()
	var recs []record
	var init map[[16]byte][]int32
	var resp *kmsg.ShareGroupHeartbeatResponse
	var msg string
	if req.MemberEpoch == leaveGroupEpoch {
		resp, code, msg = s.shareLeave(req, &recs)
	} else {
		resp, init, code, msg = s.shareHeartbeat(client, req, &recs)
	}
	if code != 0 {
		if len(recs) > 0 {
			s.rebuild(ctx)
		}
		return shareHeartbeatError(req, code, msg)
	}
	if err := s.write(ctx, recs); err != nil {
		return shareHeartbeatError(req, appendErrorCode(err), "")
	}
	if len(init) > 0 {
		s.startShareInit(req.GroupID, init)
	}
	return resp
}

func (s *shard) otherGroupType(id string) bool {
	return s.classic[id] != nil || s.consumer[id] != nil || s.streams[id] != nil
}

func (s *shard) shareHeartbeat(client Client, req *kmsg.ShareGroupHeartbeatRequest, recs *[]record) (*kmsg.ShareGroupHeartbeatResponse, map[[16]byte][]int32, int16, string) {
	cfg := &s.c.cfg
	now := s.c.nowMs()
	joining := req.MemberEpoch == 0
	g := s.share[req.GroupID]
	if g == nil {
		switch {
		case s.otherGroupType(req.GroupID):
			return nil, nil, kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a share group.", req.GroupID)
		case !joining:
			return nil, nil, kerr.GroupIDNotFound.Code, fmt.Sprintf("Share group %s not found.", req.GroupID)
		}
		g = newShareGroup(req.GroupID)
	}
	m := g.members[req.MemberID]
	if m == nil && int32(len(g.members)) >= cfg.ShareMaxSize {
		return nil, nil, kerr.GroupMaxSizeReached.Code, fmt.Sprintf("The share group has reached its maximum capacity of %d members.", cfg.ShareMaxSize)
	}
	switch {
	case m == nil && !joining:
		return nil, nil, kerr.UnknownMemberID.Code, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, req.GroupID)
	case m != nil && !joining && req.MemberEpoch > m.epoch:
		return nil, nil, kerr.FencedMemberEpoch.Code, fmt.Sprintf("The share group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.epoch)
	case m != nil && !joining && req.MemberEpoch < m.epoch && req.MemberEpoch != m.prevEpoch:
		return nil, nil, kerr.FencedMemberEpoch.Code, fmt.Sprintf("The share group member has a smaller member epoch (%d) than the one known by the group coordinator (%d), and it does not match the previous member epoch (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.epoch, m.prevEpoch)
	}
	if s.share[g.id] == nil {
		// A new group enters the shard with its first records.
		s.share[g.id] = g
	}

	// 1. Member metadata; a subscription change bumps the group epoch.
	var before shareMember
	meta := shareMemberMetadataValue{}
	if m != nil {
		before = *m
		meta = m.meta
	}
	if req.RackID != nil {
		meta.RackID = cloneStr(req.RackID)
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		sort.Strings(names)
		meta.SubscribedTopicNames = slices.Compact(names)
	}
	meta.ClientID, meta.ClientHost = client.ID, client.Host
	bump := m == nil || !slices.Equal(before.meta.SubscribedTopicNames, meta.SubscribedTopicNames)
	if m == nil || !sameShareMeta(&before.meta, &meta) {
		s.emit(recs, shareMemberRecord(g.id, req.MemberID, &meta))
	}
	m = g.members[req.MemberID]

	// 2. Partitions initialized since the last target and not in it.
	if !bump && g.assignmentEpoch >= g.epoch && s.initializedNotAssigned(g) {
		bump = true
	}
	// 3. The subscribed topics changed.
	hash := s.shareMetadataHash(g)
	if bump || hash != g.metadataHash {
		s.emit(recs, shareEpochRecord(g, g.epoch+1, hash))
		s.c.events.shareRebalances.Add(1)
	}
	// 4. A new target, at most once per assignment interval.
	if g.assignmentEpoch < g.epoch && (g.assignmentTimestamp == 0 || now >= g.assignmentTimestamp+int64(cfg.shareAssignmentIntervalMs(g.id))) {
		s.computeShareTarget(g, recs, now)
	}
	// 5. The member takes its target at once.
	s.reconcileShare(g, m, recs)
	m = g.members[req.MemberID]
	m.sessionDeadline = now + int64(cfg.shareSessionTimeoutMs(g.id))

	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	resp.MemberID = strPtr(m.id)
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = cfg.shareHeartbeatIntervalMs(g.id)
	if joining || req.SubscribedTopicNames != nil || !sameAssignment(before.assigned, m.assigned) {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
		for _, tp := range toTopicPartitions(m.assigned) {
			a.TopicPartitions = append(a.TopicPartitions, kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{TopicID: tp.TopicID, Partitions: tp.Partitions})
		}
		resp.Assignment = &a
	}
	// 6. Partitions of the subscription whose share state is neither
	// initialized nor being initialized (or was asked for too long ago).
	return resp, s.shareToInitialize(g, recs, now), 0, ""
}

func sameShareMeta(a, b *shareMemberMetadataValue) bool {
	return eqStrPtr(a.RackID, b.RackID) && a.ClientID == b.ClientID && a.ClientHost == b.ClientHost &&
		slices.Equal(a.SubscribedTopicNames, b.SubscribedTopicNames)
}

// shareSubscribedTopics is the ids of the existing topics the members
// subscribe to, with their names and partition counts.
func (s *shard) shareSubscribedTopics(g *shareGroup) map[[16]byte]TopicInfo {
	out := map[[16]byte]TopicInfo{}
	for _, m := range g.members {
		for _, name := range m.meta.SubscribedTopicNames {
			if info, ok := s.c.topics.TopicByName(name); ok {
				out[info.ID] = info
			}
		}
	}
	return out
}

// shareMetadataHash summarises the subscribed topics (ids, names,
// partition counts). Kafka hashes the same with xxh3; the value is only
// compared with itself.
func (s *shard) shareMetadataHash(g *shareGroup) int64 {
	topics := s.shareSubscribedTopics(g)
	if len(topics) == 0 {
		return 0
	}
	h := fnv.New64a()
	for _, id := range sortedTopicIDsOf(topics) {
		info := topics[id]
		h.Write(id[:])
		h.Write([]byte(info.Name))
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(info.Partitions))
		h.Write(n[:])
	}
	return int64(h.Sum64())
}

// initializedNotAssigned reports whether a subscribed topic has initialized
// partitions that the target does not hand out.
func (s *shard) initializedNotAssigned(g *shareGroup) bool {
	if len(g.members) == 0 || len(g.initialized) == 0 {
		return false
	}
	for id := range s.shareSubscribedTopics(g) {
		st := g.initialized[id]
		if st == nil {
			continue
		}
		have := map[int32]bool{}
		for _, a := range g.target {
			for _, p := range a[id] {
				have[p] = true
			}
		}
		if len(have) != len(st.partitions) {
			return true
		}
		for _, p := range st.partitions {
			if !have[p] {
				return true
			}
		}
	}
	return false
}

// computeShareTarget runs the assignor over every member and records the
// targets that changed, then the new assignment epoch.
func (s *shard) computeShareTarget(g *shareGroup, recs *[]record, now int64) {
	topics := s.shareSubscribedTopics(g)
	assignable := map[[16]byte][]int32{}
	for id, info := range topics {
		if st := g.initialized[id]; st != nil {
			for _, p := range st.partitions {
				if p < info.Partitions {
					assignable[id] = append(assignable[id], p)
				}
			}
		}
	}
	members := make([]shareAssignMember, 0, len(g.members))
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		am := shareAssignMember{id: id, previous: g.target[id]}
		for _, name := range m.meta.SubscribedTopicNames {
			if info, ok := s.c.topics.TopicByName(name); ok {
				am.topics = append(am.topics, info.ID)
			}
		}
		slices.SortFunc(am.topics, compareTopicID)
		members = append(members, am)
	}
	out := assignShare(members, assignable)
	for _, id := range sortedKeys(out) {
		old, had := g.target[id]
		if !had || !sameAssignment(old, out[id]) {
			s.emit(recs, shareTargetMemberRecord(g.id, id, out[id]))
		}
	}
	s.emit(recs, shareTargetMetadataRecord(g.id, g.epoch, now))
}

// reconcileShare moves m to its target (those of its partitions it still
// subscribes to) under the target's epoch.
func (s *shard) reconcileShare(g *shareGroup, m *shareMember, recs *[]record) {
	subscribed := map[[16]byte]bool{}
	for _, name := range m.meta.SubscribedTopicNames {
		if info, ok := s.c.topics.TopicByName(name); ok {
			subscribed[info.ID] = true
		}
	}
	want := map[[16]byte][]int32{}
	for t, ps := range g.target[m.id] {
		if subscribed[t] && len(ps) > 0 {
			want[t] = ps
		}
	}
	next := *m
	if m.epoch != g.assignmentEpoch {
		next.prevEpoch, next.epoch = m.epoch, g.assignmentEpoch
	}
	next.state, next.assigned = memberStable, want
	if next.epoch != m.epoch || next.prevEpoch != m.prevEpoch || !sameAssignment(m.assigned, want) || m.state != memberStable {
		s.emit(recs, shareCurrentRecord(g.id, &next))
	}
}

// shareToInitialize records (and returns) the subscribed partitions whose
// share state must be initialized: neither initialized nor asked for within
// the retry interval.
func (s *shard) shareToInitialize(g *shareGroup, recs *[]record, now int64) map[[16]byte][]int32 {
	if s.c.cfg.ShareState == nil {
		return nil
	}
	retry := int64(max(s.c.cfg.ShareInitializeRetryIntervalMs, s.c.cfg.OffsetsCommitTimeoutMs))
	want := map[[16]byte][]int32{}
	for id, info := range s.shareSubscribedTopics(g) {
		for p := int32(0); p < info.Partitions; p++ {
			if st := g.initialized[id]; st != nil && slices.Contains(st.partitions, p) {
				continue
			}
			if st := g.initializing[id]; st != nil && slices.Contains(st.partitions, p) && now-st.since < retry {
				continue
			}
			want[id] = append(want[id], p)
		}
	}
	if len(want) == 0 {
		return nil
	}
	initializing := cloneTopicStates(g.initializing)
	for id, ps := range want {
		st := initializing[id]
		if st == nil {
			info, _ := s.c.topics.TopicByID(id)
			st = &shareTopicState{name: info.Name}
			initializing[id] = st
		}
		st.partitions = sortedCopy(append(st.partitions, ps...))
	}
	deleting := map[[16]byte]string{}
	for id, name := range g.deleting {
		if want[id] == nil {
			deleting[id] = name
		}
	}
	s.emit(recs, shareStatePartitionsRecord(g, initializing, g.initialized, deleting))
	return want
}

func cloneTopicStates(m map[[16]byte]*shareTopicState) map[[16]byte]*shareTopicState {
	out := make(map[[16]byte]*shareTopicState, len(m))
	for id, st := range m {
		c := *st
		c.partitions = slices.Clone(st.partitions)
		out[id] = &c
	}
	return out
}

// startShareInit asks the share coordinator to initialize partitions of
// group, off the shard's lock, and records the outcome: initialized, or
// no longer initializing (a later heartbeat asks again).
func (s *shard) startShareInit(group string, partitions map[[16]byte][]int32) {
	g := s.share[group]
	if g == nil {
		return
	}
	epoch := g.epoch
	go func() {
		ctx := context.Background()
		err := s.c.cfg.ShareState.Initialize(ctx, group, epoch, partitions)
		if err != nil {
			s.c.log.Warn("initializing share group state failed; a later heartbeat retries", "group", group, "err", err)
		}
		s.c.finishShareInit(ctx, s.partition, group, partitions, err == nil)
	}()
}

// finishShareInit moves partitions of group out of initializing: into
// initialized when ok.
func (c *Coordinator) finishShareInit(ctx context.Context, partition int32, group string, partitions map[[16]byte][]int32, ok bool) {
	s, code := c.lockPartition(partition)
	if code != 0 {
		return
	}
	defer s.mu.Unlock()
	g := s.share[group]
	if g == nil {
		return
	}
	initializing, initialized := cloneTopicStates(g.initializing), cloneTopicStates(g.initialized)
	for id, ps := range partitions {
		if st := initializing[id]; st != nil {
			st.partitions = slices.DeleteFunc(st.partitions, func(p int32) bool { return slices.Contains(ps, p) })
			if len(st.partitions) == 0 {
				delete(initializing, id)
			}
		}
		if !ok {
			continue
		}
		st := initialized[id]
		if st == nil {
			info, _ := c.topics.TopicByID(id)
			st = &shareTopicState{name: info.Name}
			initialized[id] = st
		}
		st.partitions = sortedCopy(append(st.partitions, ps...))
	}
	var recs []record
	s.emit(&recs, shareStatePartitionsRecord(g, initializing, initialized, g.deleting))
	if err := s.write(ctx, recs); err != nil {
		c.log.Warn("recording share group state initialization failed", "group", group, "err", err)
	}
}

// shareLeave removes a member that leaves (epoch -1): no epoch check.
func (s *shard) shareLeave(req *kmsg.ShareGroupHeartbeatRequest, recs *[]record) (*kmsg.ShareGroupHeartbeatResponse, int16, string) {
	g := s.share[req.GroupID]
	switch {
	case g == nil && s.otherGroupType(req.GroupID):
		return nil, kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a share group.", req.GroupID)
	case g == nil:
		return nil, kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s not found.", req.GroupID)
	}
	m := g.members[req.MemberID]
	if m == nil {
		return nil, kerr.UnknownMemberID.Code, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, req.GroupID)
	}
	s.fenceShareMember(g, m, recs)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	resp.MemberID = strPtr(req.MemberID)
	resp.MemberEpoch = leaveGroupEpoch
	return resp, 0, ""
}

// shareTimers expires the members whose session lapsed.
func (s *shard) shareTimers(ctx context.Context, g *shareGroup, now int64) {
	var recs []record
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		if m.sessionDeadline > 0 && now >= m.sessionDeadline {
			s.c.log.Info("share group member session expired", "group", g.id, "member", id)
			s.fenceShareMember(g, m, &recs)
		}
	}
	if err := s.write(ctx, recs); err != nil {
		s.c.log.Warn("expiring share group members failed", "group", g.id, "err", err)
	}
}

// --- describe -----------------------------------------------------------------

// ShareGroupDescribe describes share groups.
func (c *Coordinator) ShareGroupDescribe(ctx context.Context, req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, id := range req.GroupIDs {
		resp.Groups = append(resp.Groups, c.describeShareGroup(id, req.IncludeAuthorizedOperations))
	}
	return resp
}

func (c *Coordinator) describeShareGroup(id string, includeOps bool) kmsg.ShareGroupDescribeResponseGroup {
	out := kmsg.NewShareGroupDescribeResponseGroup()
	out.GroupID = id
	out.AuthorizedOperations = -2147483648
	if id == "" {
		out.ErrorCode = kerr.InvalidGroupID.Code
		return out
	}
	s, code := c.lockGroup(id)
	if code != 0 {
		out.ErrorCode = code
		if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
			out.ErrorMessage = strPtr(e.Description)
		}
		return out
	}
	defer s.mu.Unlock()
	g := s.share[id]
	if g == nil {
		out.ErrorCode = kerr.GroupIDNotFound.Code
		if s.otherGroupType(id) {
			out.ErrorMessage = strPtr(fmt.Sprintf("Group %s is not a share group.", id))
		} else {
			out.ErrorMessage = strPtr(fmt.Sprintf("Group %s not found.", id))
		}
		return out
	}
	if includeOps {
		out.AuthorizedOperations = groupAuthorizedOps
	}
	out.GroupState = g.stateName()
	out.GroupEpoch = g.epoch
	out.AssignmentEpoch = g.assignmentEpoch
	out.Assignor = c.cfg.shareAssignor()
	out.Members = []kmsg.ShareGroupDescribeResponseGroupMember{}
	for _, mid := range sortedKeys(g.members) {
		m := g.members[mid]
		dm := kmsg.NewShareGroupDescribeResponseGroupMember()
		dm.MemberID, dm.RackID, dm.MemberEpoch = m.id, m.meta.RackID, m.epoch
		dm.ClientID, dm.ClientHost = m.meta.ClientID, m.meta.ClientHost
		dm.SubscribedTopicNames = slices.Clone(m.meta.SubscribedTopicNames)
		if dm.SubscribedTopicNames == nil {
			dm.SubscribedTopicNames = []string{}
		}
		dm.Assignment.TopicPartitions = []kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{}
		for _, tp := range toTopicPartitions(m.assigned) {
			info, ok := c.topics.TopicByID(tp.TopicID)
			if !ok {
				continue
			}
			dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{
				TopicID: tp.TopicID, Topic: info.Name, Partitions: tp.Partitions,
			})
		}
		out.Members = append(out.Members, dm)
	}
	return out
}

// deleteShareState asks the share coordinator to delete the share state of
// every partition g initialized (or was initializing) before g goes: the
// error code to answer DeleteGroups with when it cannot. It runs under the
// shard's lock, as Kafka's delete waits for the persister before the
// group's tombstones.
func (s *shard) deleteShareState(ctx context.Context, g *shareGroup) int16 {
	if s.c.cfg.ShareState == nil {
		return 0
	}
	parts := map[[16]byte][]int32{}
	for _, states := range []map[[16]byte]*shareTopicState{g.initialized, g.initializing} {
		for id, st := range states {
			parts[id] = sortedCopy(append(parts[id], st.partitions...))
		}
	}
	for id := range g.deleting {
		if info, ok := s.c.topics.TopicByID(id); ok {
			for p := int32(0); p < info.Partitions; p++ {
				parts[id] = append(parts[id], p)
			}
			parts[id] = sortedCopy(parts[id])
		}
	}
	if len(parts) == 0 {
		return 0
	}
	if err := s.c.cfg.ShareState.Delete(ctx, g.id, parts); err != nil {
		s.c.log.Warn("deleting share group state failed", "group", g.id, "err", err)
		var ke *kerr.Error
		if asKerr(err, &ke) {
			return ke.Code
		}
		return kerr.UnknownServerError.Code
	}
	return 0
}
