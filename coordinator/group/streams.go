package group

// Streams groups (KIP-1071, Kafka 4.3's group.protocol=streams):
// StreamsGroupHeartbeat with a topology the coordinator validates and
// configures (streamstopology.go), the sticky task assignor and the
// per-member reconciliation of tasks (streamsassign.go), and
// StreamsGroupDescribe. As for consumer groups, every change is a record
// applied through the replay functions the loader uses (emit).
//
// Kafka 4.3 refuses static membership, warm-up tasks, task offsets and
// source-topic regular expressions (INVALID_REQUEST, "... not supported
// yet"), and so does this file. Deliberate deviations:
//   - The metadata hash is FNV-1a over the required topics' names, ids and
//     partition counts, not Kafka's xxh3 over the same and the replicas'
//     racks: a rack change does not bump the epoch, and a log written by
//     one and read by the other bumps the epoch once.
//   - A new group is created in the shard's map at once, not on a
//     throw-away object; the soft state (configured topology, shutdown
//     request, endpoint epoch) of its first heartbeat therefore survives.
//   - Ties in the assignor are broken by member and process id order, not
//     by Java's HashMap and PriorityQueue order.

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Streams member states (Kafka's streams MemberState byte values, which
// differ from the consumer group's).
const (
	streamsStable     int8 = 1
	streamsUnrevoked  int8 = 2
	streamsUnreleased int8 = 3
	streamsUnknown    int8 = 127
)

// StreamsGroupHeartbeatResponse status codes.
const (
	statusStaleTopology                int8 = 0
	statusMissingSourceTopics          int8 = 1
	statusIncorrectlyPartitionedTopics int8 = 2
	statusMissingInternalTopics        int8 = 3
	statusShutdownApplication          int8 = 4
	statusAssignmentDelayed            int8 = 5
)

// streamsTask is one task: a subtopology and a partition of its input.
type streamsTask struct {
	sub string
	p   int32
}

type streamsMember struct {
	id        string
	meta      streamsMemberMetadataValue
	epoch     int32
	prevEpoch int32
	state     int8
	assigned  tasksTuple
	pending   tasksTuple
	// epochs is the member epoch at which each active task, assigned or
	// pending revocation, was assigned (offset commits older than it are
	// fenced).
	epochs map[streamsTask]int32

	// Volatile timers, ms (0 = none); rebalanceEpoch is the member epoch
	// the revocation deadline was armed at.
	sessionDeadline   int64
	rebalanceDeadline int64
	rebalanceEpoch    int32
}

type streamsGroup struct {
	id                     string
	epoch                  int32
	metadataHash           int64
	validatedTopologyEpoch int32
	lastAssignmentConfigs  []keyValue
	assignmentEpoch        int32
	assignmentTimestamp    int64
	members                map[string]*streamsMember
	target                 map[string]tasksTuple
	topology               *streamsTopologyValue

	// Soft state, not persisted: the topology configured against the
	// metadata image at the last check (nil: not yet), the member that
	// asked the application to shut down, the epoch of the endpoint
	// information members were last sent, and the deadline of the initial
	// rebalance delay (0: none).
	configured        *configuredTopology
	shutdownRequester string
	endpointEpoch     int32
	initialDeadline   int64
}

func newStreamsGroup(id string) *streamsGroup {
	return &streamsGroup{
		id: id, epoch: 1, assignmentEpoch: 1, members: map[string]*streamsMember{},
		target: map[string]tasksTuple{},
	}
}

// stateName is the group state Kafka reports (StreamsGroupState).
func (g *streamsGroup) stateName() string {
	switch {
	case len(g.members) == 0:
		return "Empty"
	case g.topology == nil || g.topology.Epoch != g.validatedTopologyEpoch:
		return "NotReady"
	case g.epoch > g.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range g.members {
		if m.state != streamsStable || m.epoch != g.assignmentEpoch {
			return "Reconciling"
		}
	}
	return "Stable"
}

func (g *streamsGroup) member(id string) *streamsMember {
	m := g.members[id]
	if m == nil {
		m = &streamsMember{id: id, state: streamsStable, epochs: map[streamsTask]int32{}}
		g.members[id] = m
	}
	return m
}

// --- replay -----------------------------------------------------------------

func (s *shard) streamsGroupFor(id string) *streamsGroup {
	g := s.streams[id]
	if g == nil {
		g = newStreamsGroup(id)
		s.streams[id] = g
		delete(s.classic, id) // a simple (offsets only) group is replaced
	}
	return g
}

func (s *shard) replayStreams(k parsedKey, value []byte) error {
	if k.typ == recStreamsPartitionMetadata {
		return nil
	}
	g := s.streams[k.group]
	if g == nil && value == nil {
		return nil
	}
	switch k.typ {
	case recStreamsGroupMetadata:
		if value == nil {
			delete(s.streams, k.group)
			return nil
		}
		var v streamsGroupMetadataValue
		if err := v.decode(value); err != nil {
			return fmt.Errorf("decoding StreamsGroupMetadataValue of %q: %w", k.group, err)
		}
		g = s.streamsGroupFor(k.group)
		g.epoch, g.metadataHash, g.validatedTopologyEpoch = v.Epoch, v.MetadataHash, v.ValidatedTopologyEpoch
		g.lastAssignmentConfigs = v.LastAssignmentConfigs
	case recStreamsMemberMetadata:
		if value == nil {
			delete(g.members, k.member)
			return nil
		}
		var v streamsMemberMetadataValue
		if err := v.decode(value); err != nil {
			return fmt.Errorf("decoding StreamsGroupMemberMetadataValue of %q: %w", k.group, err)
		}
		s.streamsGroupFor(k.group).member(k.member).meta = v
	case recStreamsTargetMetadata:
		if value == nil {
			g.assignmentEpoch, g.assignmentTimestamp = -1, 0
			return nil
		}
		var v shareTargetMetadataValue // the same layout
		if err := v.decode(value); err != nil {
			return fmt.Errorf("decoding StreamsGroupTargetAssignmentMetadataValue of %q: %w", k.group, err)
		}
		g = s.streamsGroupFor(k.group)
		g.assignmentEpoch, g.assignmentTimestamp = v.AssignmentEpoch, v.AssignmentTimestamp
	case recStreamsTargetMember:
		if value == nil {
			delete(g.target, k.member)
			return nil
		}
		t, err := decodeStreamsTargetMemberValue(value)
		if err != nil {
			return fmt.Errorf("decoding StreamsGroupTargetAssignmentMemberValue of %q: %w", k.group, err)
		}
		s.streamsGroupFor(k.group).target[k.member] = t
	case recStreamsCurrentMember:
		if value == nil {
			if m := g.members[k.member]; m != nil {
				m.epoch, m.prevEpoch = -1, -1
				m.assigned, m.pending = tasksTuple{}, tasksTuple{}
				m.epochs = map[streamsTask]int32{}
			}
			return nil
		}
		var v streamsCurrentAssignmentValue
		if err := v.decode(value); err != nil {
			return fmt.Errorf("decoding StreamsGroupCurrentMemberAssignmentValue of %q: %w", k.group, err)
		}
		m := s.streamsGroupFor(k.group).member(k.member)
		m.epoch, m.prevEpoch, m.state = v.MemberEpoch, v.PreviousMemberEpoch, v.State
		m.assigned, m.pending = v.Assigned, v.PendingRevocation
		m.epochs = map[streamsTask]int32{}
		setEpochs(m.epochs, v.Assigned.Active, v.ActiveEpochs, v.MemberEpoch)
		setEpochs(m.epochs, v.PendingRevocation.Active, v.PendingActiveEpochs, v.MemberEpoch)
	case recStreamsTopology:
		if value == nil {
			g.topology, g.configured = nil, nil
			return nil
		}
		var v streamsTopologyValue
		if err := v.decode(value); err != nil {
			return fmt.Errorf("decoding StreamsGroupTopologyValue of %q: %w", k.group, err)
		}
		g = s.streamsGroupFor(k.group)
		g.topology, g.configured = &v, nil
	}
	return nil
}

// setEpochs records the assignment epoch of each task of s: from epochs
// when it has one per partition, else fallback (Kafka's replay rule).
func setEpochs(into map[streamsTask]int32, s taskSet, epochs map[string][]int32, fallback int32) {
	for sub, ps := range s {
		e := epochs[sub]
		for i, p := range ps {
			if len(e) == len(ps) {
				into[streamsTask{sub, p}] = e[i]
			} else {
				into[streamsTask{sub, p}] = fallback
			}
		}
	}
}

// --- records ------------------------------------------------------------------

func streamsGroupRecord(g *streamsGroup, epoch int32, hash int64, validated int32, cfg []keyValue) record {
	v := streamsGroupMetadataValue{Epoch: epoch, MetadataHash: hash, ValidatedTopologyEpoch: validated, LastAssignmentConfigs: cfg}
	return record{key: consumerGroupKey(recStreamsGroupMetadata, g.id), value: v.encode()}
}

func streamsMemberRecord(group, member string, v *streamsMemberMetadataValue) record {
	return record{key: consumerMemberKey(recStreamsMemberMetadata, group, member), value: v.encode()}
}

func streamsTopologyRecord(group string, t *streamsTopologyValue) record {
	return record{key: consumerGroupKey(recStreamsTopology, group), value: t.encode()}
}

func streamsTargetMemberRecord(group, member string, t tasksTuple) record {
	return record{key: consumerMemberKey(recStreamsTargetMember, group, member), value: encodeStreamsTargetMemberValue(t)}
}

func streamsTargetMetadataRecord(group string, epoch int32, at int64) record {
	v := shareTargetMetadataValue{AssignmentEpoch: epoch, AssignmentTimestamp: at}
	return record{key: consumerGroupKey(recStreamsTargetMetadata, group), value: v.encode()}
}

func streamsCurrentRecord(group string, m *streamsMember) record {
	v := streamsCurrentAssignmentValue{
		MemberEpoch: m.epoch, PreviousMemberEpoch: m.prevEpoch, State: m.state,
		Assigned: m.assigned, PendingRevocation: m.pending,
		ActiveEpochs: epochsOf(m.assigned.Active, m.epochs), PendingActiveEpochs: epochsOf(m.pending.Active, m.epochs),
	}
	return record{key: consumerMemberKey(recStreamsCurrentMember, group, m.id), value: v.encode()}
}

func epochsOf(s taskSet, epochs map[streamsTask]int32) map[string][]int32 {
	out := map[string][]int32{}
	for sub, ps := range s {
		e := make([]int32, len(ps))
		for i, p := range ps {
			e[i] = epochs[streamsTask{sub, p}]
		}
		out[sub] = e
	}
	return out
}

// removeStreamsMemberRecords are the tombstones that remove a member, in
// Kafka's order.
func removeStreamsMemberRecords(group, member string) []record {
	return []record{
		{key: consumerMemberKey(recStreamsCurrentMember, group, member)},
		{key: consumerMemberKey(recStreamsTargetMember, group, member)},
		{key: consumerMemberKey(recStreamsMemberMetadata, group, member)},
	}
}

// deleteStreamsGroupRecords are the tombstones that delete g, in Kafka's
// order. They are not applied; callers apply them after the write.
func deleteStreamsGroupRecords(g *streamsGroup) []record {
	var recs []record
	ids := sortedKeys(g.members)
	for _, id := range ids {
		recs = append(recs, record{key: consumerMemberKey(recStreamsCurrentMember, g.id, id)})
	}
	for _, id := range sortedKeys(g.target) {
		recs = append(recs, record{key: consumerMemberKey(recStreamsTargetMember, g.id, id)})
	}
	recs = append(recs, record{key: consumerGroupKey(recStreamsTargetMetadata, g.id)})
	for _, id := range ids {
		recs = append(recs, record{key: consumerMemberKey(recStreamsMemberMetadata, g.id, id)})
	}
	recs = append(recs, record{key: consumerGroupKey(recStreamsGroupMetadata, g.id)})
	recs = append(recs, record{key: consumerGroupKey(recStreamsTopology, g.id)})
	return recs
}

// fenceStreamsMember removes a member and bumps the group epoch; the next
// heartbeat of another member computes the new target assignment.
func (s *shard) fenceStreamsMember(g *streamsGroup, memberID string, recs *[]record) {
	for _, r := range removeStreamsMemberRecords(g.id, memberID) {
		s.emit(recs, r)
	}
	s.emit(recs, streamsGroupRecord(g, g.epoch+1, g.metadataHash, g.validatedTopologyEpoch, g.lastAssignmentConfigs))
	if len(g.members) == 0 {
		g.shutdownRequester = ""
	}
}

// --- heartbeat ----------------------------------------------------------------

// StreamsHeartbeatResult is what a streams heartbeat produced: the answer,
// and the internal topics the broker is to create for the group (Kafka's
// KafkaApis creates them, asynchronously, after authorizing CREATE).
type StreamsHeartbeatResult struct {
	Response *kmsg.StreamsGroupHeartbeatResponse
	Create   []kmsg.CreateTopicsRequestTopic
}

func streamsHeartbeatError(req *kmsg.StreamsGroupHeartbeatRequest, code int16, msg string) StreamsHeartbeatResult {
	resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
	resp.ErrorCode = code
	if msg != "" && code != kerr.UnknownServerError.Code {
		if e, ok := kerr.ErrorForCode(code).(*kerr.Error); !ok || e.Description != msg {
			resp.ErrorMessage = strPtr(msg)
		}
	}
	resp.Status = []kmsg.StreamsGroupHeartbeatResponseStatus{}
	return StreamsHeartbeatResult{Response: resp}
}

// validateStreamsHeartbeat is Kafka's GroupCoordinatorService checks, in
// its order.
func validateStreamsHeartbeat(req *kmsg.StreamsGroupHeartbeatRequest) (int16, string) {
	invalid := kerr.InvalidRequest.Code
	switch {
	case req.InstanceID != nil:
		return invalid, "Static membership is not yet supported."
	case req.TaskOffsets != nil:
		return invalid, "TaskOffsets are not supported yet."
	case req.TaskEndOffsets != nil:
		return invalid, "TaskEndOffsets are not supported yet."
	case len(req.WarmupTasks) > 0:
		return invalid, "WarmupTasks are not supported yet."
	}
	if req.Topology != nil {
		for _, st := range req.Topology.Subtopologies {
			if len(st.SourceTopicRegex) > 0 { // not nullable on the wire: kmsg decodes an empty array as nil
				return invalid, "Regular expressions for source topics are not supported yet."
			}
		}
	}
	switch {
	case strings.TrimSpace(req.MemberID) == "":
		return invalid, "MemberId can't be empty."
	case strings.TrimSpace(req.Group) == "":
		return invalid, "GroupId can't be empty."
	case req.RackID != nil && strings.TrimSpace(*req.RackID) == "":
		return invalid, "RackId can't be empty."
	}
	switch {
	case req.MemberEpoch == 0:
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return invalid, "RebalanceTimeoutMs must be provided in first request."
		case req.ActiveTasks == nil || len(req.ActiveTasks) > 0:
			return invalid, "ActiveTasks must be empty when (re-)joining."
		case req.StandbyTasks == nil || len(req.StandbyTasks) > 0:
			return invalid, "StandbyTasks must be empty when (re-)joining."
		case req.WarmupTasks == nil || len(req.WarmupTasks) > 0:
			return invalid, "WarmupTasks must be empty when (re-)joining."
		case req.Topology == nil:
			return invalid, "Topology must be non-null when (re-)joining."
		}
		for _, st := range req.Topology.Subtopologies {
			for _, t := range st.StateChangelogTopics {
				if t.NumPartitions != 0 {
					return kerr.StreamsInvalidTopology.Code, fmt.Sprintf("Changelog topic %s must have an undefined partition count, but it is set to %d.", t.Topic, t.NumPartitions)
				}
			}
		}
	case req.MemberEpoch == leaveGroupStaticEpoch:
		return invalid, "InstanceId can't be null."
	case req.MemberEpoch < leaveGroupStaticEpoch:
		return invalid, fmt.Sprintf("MemberEpoch is %d, but must be greater than or equal to -2.", req.MemberEpoch)
	}
	if (req.ActiveTasks != nil || req.StandbyTasks != nil || req.WarmupTasks != nil) &&
		(req.ActiveTasks == nil || req.StandbyTasks == nil || req.WarmupTasks == nil) {
		return invalid, "If one task-type is non-null, all must be non-null."
	}
	if req.MemberEpoch != 0 && req.Topology != nil {
		return invalid, "Topology can only be provided when (re-)joining."
	}
	return 0, ""
}

// StreamsGroupHeartbeat handles KIP-1071's heartbeat: join, leave,
// topology initialization and reconciliation.
func (c *Coordinator) StreamsGroupHeartbeat(ctx context.Context, client Client, req *kmsg.StreamsGroupHeartbeatRequest) StreamsHeartbeatResult {
	if code, msg := validateStreamsHeartbeat(req); code != 0 {
		return streamsHeartbeatError(req, code, msg)
	}
	s, code := c.lockGroup(req.Group)
	if code != 0 {
		return streamsHeartbeatError(req, code, "")
	}
	defer s.mu.Unlock()
	var recs []record
	existed := s.streams[req.Group] != nil
	res, code, msg := s.streamsHeartbeat(client, req, &recs)
	if code != 0 {
		if len(recs) > 0 {
			s.rebuild(ctx)
		} else if g := s.streams[req.Group]; !existed && g != nil && len(g.members) == 0 {
			delete(s.streams, req.Group)
		}
		return streamsHeartbeatError(req, code, msg)
	}
	if err := s.write(ctx, recs); err != nil {
		return streamsHeartbeatError(req, appendErrorCode(err), "")
	}
	return res
}

func (s *shard) otherGroupTypeThanStreams(id string) bool {
	if s.consumer[id] != nil || s.share[id] != nil {
		return true
	}
	cg := s.classic[id]
	return cg != nil && (cg.state != classicEmpty || len(cg.pending) > 0)
}

func (s *shard) streamsHeartbeat(client Client, req *kmsg.StreamsGroupHeartbeatRequest, recs *[]record) (StreamsHeartbeatResult, int16, string) {
	cfg := &s.c.cfg
	now := s.c.nowMs()
	joining := req.MemberEpoch == 0
	notStreams := fmt.Sprintf("Group %s is not a streams group.", req.Group)

	// 1. The group.
	g := s.streams[req.Group]
	if g == nil {
		if s.otherGroupTypeThanStreams(req.Group) {
			return StreamsHeartbeatResult{}, kerr.GroupIDNotFound.Code, notStreams
		}
		switch {
		case req.MemberEpoch < 0:
			return StreamsHeartbeatResult{}, kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s not found.", req.Group)
		case !joining:
			return StreamsHeartbeatResult{}, kerr.GroupIDNotFound.Code, fmt.Sprintf("Streams group %s not found.", req.Group)
		}
		if s.classic[req.Group] != nil {
			// An empty classic group is replaced; its offsets stay.
			s.emit(recs, record{key: groupMetadataKey(req.Group)})
		}
		g = s.streamsGroupFor(req.Group)
	}
	if req.MemberEpoch == leaveGroupEpoch {
		return s.streamsLeave(g, req, recs)
	}
	if joining && int32(len(g.members)) >= cfg.StreamsMaxSize {
		return StreamsHeartbeatResult{}, kerr.GroupMaxSizeReached.Code, fmt.Sprintf("The streams group has reached its maximum capacity of %d members.", cfg.StreamsMaxSize)
	}
	wasEmpty := len(g.members) == 0

	// 2. The member.
	m := g.members[req.MemberID]
	if m == nil && !joining {
		return StreamsHeartbeatResult{}, kerr.UnknownMemberID.Code, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.id)
	}
	if m != nil && !joining {
		if code, msg := checkStreamsMemberEpoch(m, req); code != 0 {
			return StreamsHeartbeatResult{}, code, msg
		}
	}
	var before streamsMember
	if m != nil {
		before = *m
	}

	// 3. Member metadata; any change bumps the group epoch.
	newMeta := streamsMemberMetadataValue{RebalanceTimeoutMs: -1, TopologyEpoch: -1}
	if m != nil {
		newMeta = m.meta
	}
	if req.RackID != nil {
		newMeta.RackID = cloneStr(req.RackID)
	}
	if req.RebalanceTimeoutMillis != -1 {
		newMeta.RebalanceTimeoutMs = req.RebalanceTimeoutMillis
	}
	if req.Topology != nil {
		newMeta.TopologyEpoch = req.Topology.Epoch
	}
	newMeta.ClientID, newMeta.ClientHost = client.ID, client.Host
	if req.ProcessID != nil {
		newMeta.ProcessID = *req.ProcessID
	}
	if req.ClientTags != nil {
		tags := make([]keyValue, 0, len(req.ClientTags))
		seen := map[string]bool{}
		for _, t := range req.ClientTags {
			if seen[t.Key] {
				return StreamsHeartbeatResult{}, kerr.UnknownServerError.Code, ""
			}
			seen[t.Key] = true
			tags = append(tags, keyValue{t.Key, t.Value})
		}
		slices.SortFunc(tags, func(a, b keyValue) int { return strings.Compare(a.Key, b.Key) })
		newMeta.ClientTags = tags
	}
	if req.UserEndpoint != nil {
		newMeta.UserEndpoint = &streamsEndpoint{Host: req.UserEndpoint.Host, Port: req.UserEndpoint.Port}
	}
	bump := false
	if m == nil || !sameStreamsMeta(&m.meta, &newMeta) {
		s.emit(recs, streamsMemberRecord(g.id, req.MemberID, &newMeta))
		bump = true
	}
	m = g.members[req.MemberID]
	if before.id == "" {
		before = streamsMember{epochs: map[streamsTask]int32{}}
	}

	// 4. The topology.
	var statuses []kmsg.StreamsGroupHeartbeatResponseStatus
	hadTopology := g.topology != nil
	if req.Topology != nil {
		t := topologyFromRequest(req.Topology)
		switch {
		case g.topology == nil:
			s.emit(recs, streamsTopologyRecord(g.id, t))
		case g.topology.Epoch > t.Epoch:
		case !sameTopology(g.topology, t):
			return StreamsHeartbeatResult{}, kerr.InvalidRequest.Code, "Topology updates are not supported yet."
		}
	}
	if hadTopology && m.meta.TopologyEpoch < g.topology.Epoch {
		statuses = append(statuses, streamsStatus(statusStaleTopology, fmt.Sprintf("The member's topology epoch %d is behind the group's topology epoch %d.", m.meta.TopologyEpoch, g.topology.Epoch)))
	}

	// 5. The metadata hash and the topology configured against it.
	hash := s.streamsMetadataHash(g.topology)
	if hash != g.metadataHash {
		bump = true
	}
	if !hadTopology || hash != g.metadataHash || g.configured == nil {
		ct, err := s.configureTopology(g.topology)
		if err != nil {
			if _, ok := err.(errInvalidTopology); ok {
				return StreamsHeartbeatResult{}, kerr.StreamsInvalidTopology.Code, err.Error()
			}
			return StreamsHeartbeatResult{}, kerr.UnknownServerError.Code, ""
		}
		g.configured = ct
	}

	// 6. The validated topology epoch, and the member's tasks against it.
	validated := int32(-1)
	if g.configured.ready() {
		validated = g.topology.Epoch
		for _, tasks := range [][]kmsg.TaskIDs{req.ActiveTasks, req.StandbyTasks, req.WarmupTasks} {
			for _, t := range tasks {
				st := g.configured.subtopologies[t.SubtopologyID]
				if st == nil {
					return StreamsHeartbeatResult{}, kerr.InvalidRequest.Code, fmt.Sprintf("Subtopology %s does not exist in the topology.", t.SubtopologyID)
				}
				for _, p := range t.Partitions {
					if p < 0 || p >= st.numTasks {
						return StreamsHeartbeatResult{}, kerr.InvalidRequest.Code, fmt.Sprintf("Task %d for subtopology %s is invalid. Number of tasks for this subtopology: %d", p, t.SubtopologyID, st.numTasks)
					}
				}
			}
		}
	}
	if validated != g.validatedTopologyEpoch {
		bump = true
	}

	// 7. The assignment configs; a change rebalances.
	settings := s.c.cfg.streamsSettings(g.id)
	assignCfg := []keyValue{{"num.standby.replicas", strconv.Itoa(int(settings.numStandby))}}
	if !bump && !slices.Equal(assignCfg, g.lastAssignmentConfigs) {
		bump = true
	}

	// 8. The bump.
	if bump {
		s.emit(recs, streamsGroupRecord(g, g.epoch+1, hash, validated, assignCfg))
	}

	// 9. The initial rebalance delay of a group that was empty.
	if wasEmpty && settings.initialDelayMs > 0 && g.initialDeadline == 0 {
		g.initialDeadline = now + int64(settings.initialDelayMs)
	}

	// 10. The target assignment.
	targetEpoch, target := g.assignmentEpoch, g.target[m.id]
	switch {
	case g.initialDeadline != 0:
		statuses = append(statuses, streamsStatus(statusAssignmentDelayed, "Assignment delayed due to the configured initial rebalance delay."))
		target = tasksTuple{}
	case g.assignmentEpoch >= g.epoch:
	case g.assignmentTimestamp != 0 && settings.assignmentIntervalMs != 0 && now < g.assignmentTimestamp+int64(settings.assignmentIntervalMs):
		statuses = append(statuses, streamsStatus(statusAssignmentDelayed, "Assignment delayed due to the configured assignment interval."))
	default:
		s.computeStreamsTarget(g, recs, now)
		targetEpoch, target = g.assignmentEpoch, g.target[m.id]
	}

	// 11. Reconciliation.
	owned, ownedKnown := tasksFromRequest(req)
	if m.state != streamsStable || m.epoch != targetEpoch {
		next, err := s.reconcileStreams(g, m, targetEpoch, target, owned, ownedKnown)
		if err != nil {
			return StreamsHeartbeatResult{}, kerr.FencedMemberEpoch.Code, err.Error()
		}
		if next != nil {
			s.emit(recs, streamsCurrentRecord(g.id, next))
			m = g.members[m.id]
			if m.state == streamsUnrevoked {
				m.rebalanceDeadline, m.rebalanceEpoch = now+int64(max(m.meta.RebalanceTimeoutMs, 0)), m.epoch
			} else {
				m.rebalanceDeadline = 0
			}
		}
	}

	// 12. The session, and a shutdown request.
	m.sessionDeadline = now + int64(settings.sessionTimeoutMs)
	if req.ShutdownApplication && g.shutdownRequester == "" {
		g.shutdownRequester = m.id
	}

	// 13. The answer.
	resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
	resp.MemberID = m.id
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = settings.heartbeatIntervalMs
	if joining || !m.assigned.equal(before.assigned) || !sameActiveEpochs(m, &before) {
		resp.ActiveTasks = taskIDsOf(m.assigned.Active)
		resp.StandbyTasks = taskIDsOf(m.assigned.Standby)
		resp.WarmupTasks = taskIDsOf(m.assigned.Warmup)
		if m.meta.UserEndpoint != nil {
			g.endpointEpoch++
		}
	}
	if g.endpointEpoch != req.EndpointInformationEpoch {
		resp.PartitionsByUserEndpoint = s.partitionsByEndpoint(g, m)
	}
	resp.EndpointInformationEpoch = g.endpointEpoch
	var create []kmsg.CreateTopicsRequestTopic
	if st := g.configured.status; st != nil {
		statuses = append(statuses, *st)
		if st.StatusCode == statusMissingInternalTopics {
			create = g.configured.toCreate
		}
	}
	if g.shutdownRequester != "" {
		statuses = append(statuses, streamsStatus(statusShutdownApplication, fmt.Sprintf("Streams group member %s encountered a fatal error and requested a shutdown for the entire application.", g.shutdownRequester)))
	}
	resp.Status = append([]kmsg.StreamsGroupHeartbeatResponseStatus{}, statuses...)
	return StreamsHeartbeatResult{Response: resp, Create: create}, 0, ""
}

func streamsStatus(code int8, detail string) kmsg.StreamsGroupHeartbeatResponseStatus {
	st := kmsg.NewStreamsGroupHeartbeatResponseStatus()
	st.StatusCode, st.StatusDetail = code, detail
	return st
}

// checkStreamsMemberEpoch is Kafka's throwIfStreamsGroupMemberEpochIsInvalid:
// a member one epoch behind may still heartbeat when it reports only tasks
// it was assigned (its last answer was lost).
func checkStreamsMemberEpoch(m *streamsMember, req *kmsg.StreamsGroupHeartbeatRequest) (int16, string) {
	const text = "The streams group member has a %s member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin."
	switch {
	case req.MemberEpoch > m.epoch:
		return kerr.FencedMemberEpoch.Code, fmt.Sprintf(text, "greater", req.MemberEpoch, m.epoch)
	case req.MemberEpoch < m.epoch:
		ok := req.MemberEpoch == m.prevEpoch && req.ActiveTasks != nil && req.StandbyTasks != nil && req.WarmupTasks != nil &&
			subsetOf(req.ActiveTasks, m.assigned.Active) && subsetOf(req.StandbyTasks, m.assigned.Standby) && subsetOf(req.WarmupTasks, m.assigned.Warmup)
		if !ok {
			return kerr.FencedMemberEpoch.Code, fmt.Sprintf(text, "smaller", req.MemberEpoch, m.epoch)
		}
	}
	return 0, ""
}

func subsetOf(tasks []kmsg.TaskIDs, s taskSet) bool {
	for _, t := range tasks {
		for _, p := range t.Partitions {
			if !s.has(t.SubtopologyID, p) {
				return false
			}
		}
	}
	return true
}

func sameStreamsMeta(a, b *streamsMemberMetadataValue) bool {
	return eqStrPtr(a.InstanceID, b.InstanceID) && eqStrPtr(a.RackID, b.RackID) &&
		a.ClientID == b.ClientID && a.ClientHost == b.ClientHost && a.RebalanceTimeoutMs == b.RebalanceTimeoutMs &&
		a.TopologyEpoch == b.TopologyEpoch && a.ProcessID == b.ProcessID &&
		((a.UserEndpoint == nil) == (b.UserEndpoint == nil) && (a.UserEndpoint == nil || *a.UserEndpoint == *b.UserEndpoint)) &&
		slices.Equal(a.ClientTags, b.ClientTags)
}

func sameActiveEpochs(a, b *streamsMember) bool {
	for sub, ps := range a.assigned.Active {
		for _, p := range ps {
			if a.epochs[streamsTask{sub, p}] != b.epochs[streamsTask{sub, p}] {
				return false
			}
		}
	}
	return true
}

// tasksFromRequest is what the member reports owning; known is false when
// it did not say (the lists are null).
func tasksFromRequest(req *kmsg.StreamsGroupHeartbeatRequest) (tasksTuple, bool) {
	if req.ActiveTasks == nil || req.StandbyTasks == nil || req.WarmupTasks == nil {
		return tasksTuple{}, false
	}
	conv := func(ts []kmsg.TaskIDs) taskSet {
		out := taskSet{}
		for _, t := range ts {
			ps := append(slices.Clone(out[t.SubtopologyID]), t.Partitions...)
			slices.Sort(ps)
			out[t.SubtopologyID] = slices.Compact(ps)
		}
		return out
	}
	return tasksTuple{Active: conv(req.ActiveTasks), Standby: conv(req.StandbyTasks), Warmup: conv(req.WarmupTasks)}, true
}

// taskIDsOf is a role's tasks as the heartbeat answers them: never null,
// by subtopology id, partitions ascending.
func taskIDsOf(s taskSet) []kmsg.TaskIDs {
	out := []kmsg.TaskIDs{}
	for _, sub := range sortedKeys(s) {
		t := kmsg.NewTaskIDs()
		t.SubtopologyID, t.Partitions = sub, slices.Clone(s[sub])
		out = append(out, t)
	}
	return out
}

func topologyFromRequest(t *kmsg.StreamsGroupHeartbeatRequestTopology) *streamsTopologyValue {
	infos := func(ts []kmsg.TopicInfo) []streamsTopicInfo {
		var out []streamsTopicInfo
		for _, ti := range ts {
			var cfgs []keyValue
			for _, c := range ti.Configs {
				cfgs = append(cfgs, keyValue{c.Key, c.Value})
			}
			out = append(out, streamsTopicInfo{Name: ti.Topic, Partitions: ti.NumPartitions, ReplicationFactor: ti.ReplicationFactor, Configs: cfgs})
		}
		return out
	}
	v := &streamsTopologyValue{Epoch: t.Epoch}
	for _, st := range t.Subtopologies {
		sub := streamsSubtopology{
			ID: st.SubtopologyID, SourceTopics: slices.Clone(st.SourceTopics), SourceTopicRegex: slices.Clone(st.SourceTopicRegex),
			StateChangelogTopics: infos(st.StateChangelogTopics), RepartitionSinkTopics: slices.Clone(st.RepartitionSinkTopics),
			RepartitionSourceTopics: infos(st.RepartitionSourceTopics),
		}
		for _, cg := range st.CopartitionGroups {
			sub.CopartitionGroups = append(sub.CopartitionGroups, streamsCopartitionGroup{
				SourceTopics: slices.Clone(cg.SourceTopics), SourceTopicRegex: slices.Clone(cg.SourceTopicRegex),
				RepartitionSourceTopics: slices.Clone(cg.RepartitionSourceTopics),
			})
		}
		v.Subtopologies = append(v.Subtopologies, sub)
	}
	return v
}

// sameTopology compares two topologies field by field, lists in order
// (the encoding is canonical, so the bytes say it).
func sameTopology(a, b *streamsTopologyValue) bool {
	return string(a.encode()) == string(b.encode())
}

// streamsMetadataHash summarises the topics a topology needs (sources,
// repartition sources and changelogs) as the image has them now: name, id
// and partition count. 0 when none exists.
func (s *shard) streamsMetadataHash(t *streamsTopologyValue) int64 {
	if t == nil {
		return 0
	}
	names := map[string]bool{}
	for _, st := range t.Subtopologies {
		for _, n := range st.SourceTopics {
			names[n] = true
		}
		for _, ti := range st.RepartitionSourceTopics {
			names[ti.Name] = true
		}
		for _, ti := range st.StateChangelogTopics {
			names[ti.Name] = true
		}
	}
	h := fnv.New64a()
	found := false
	for _, n := range sortedKeys(names) {
		info, ok := s.c.topics.TopicByName(n)
		if !ok {
			continue
		}
		found = true
		h.Write([]byte(n))
		h.Write(info.ID[:])
		h.Write([]byte{byte(info.Partitions >> 24), byte(info.Partitions >> 16), byte(info.Partitions >> 8), byte(info.Partitions), 0})
	}
	if !found {
		return 0
	}
	return int64(h.Sum64())
}

// streamsLeave handles epoch -1: the member leaves at once.
func (s *shard) streamsLeave(g *streamsGroup, req *kmsg.StreamsGroupHeartbeatRequest, recs *[]record) (StreamsHeartbeatResult, int16, string) {
	if req.ShutdownApplication && g.shutdownRequester == "" {
		g.shutdownRequester = req.MemberID
	}
	if g.members[req.MemberID] == nil {
		return StreamsHeartbeatResult{}, kerr.UnknownMemberID.Code, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.id)
	}
	s.fenceStreamsMember(g, req.MemberID, recs)
	resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
	resp.MemberID, resp.MemberEpoch = req.MemberID, leaveGroupEpoch
	resp.Status = []kmsg.StreamsGroupHeartbeatResponseStatus{}
	return StreamsHeartbeatResult{Response: resp}, 0, ""
}

// --- endpoints ----------------------------------------------------------------

// partitionsByEndpoint is the interactive-query map every member with an
// endpoint gets: which partitions of the source topics each endpoint
// serves, active and standby; the heartbeating member comes last.
func (s *shard) partitionsByEndpoint(g *streamsGroup, self *streamsMember) []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint {
	out := []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpoint{}
	add := func(m *streamsMember) {
		if m.meta.UserEndpoint == nil {
			return
		}
		e := kmsg.NewStreamsGroupHeartbeatResponsePartitionsByUserEndpoint()
		e.UserEndpoint.Host, e.UserEndpoint.Port = m.meta.UserEndpoint.Host, m.meta.UserEndpoint.Port
		e.ActivePartitions = []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointActivePartition{}
		for _, tp := range s.endpointPartitions(g, m.assigned.Active) {
			e.ActivePartitions = append(e.ActivePartitions, kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointActivePartition{Topic: tp.topic, Partitions: tp.partitions})
		}
		e.StandbyPartitions = []kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointStandbyPartition{}
		for _, tp := range s.endpointPartitions(g, m.assigned.Standby) {
			e.StandbyPartitions = append(e.StandbyPartitions, kmsg.StreamsGroupHeartbeatResponsePartitionsByUserEndpointStandbyPartition{Topic: tp.topic, Partitions: tp.partitions})
		}
		out = append(out, e)
	}
	for _, id := range sortedKeys(g.members) {
		if id != self.id {
			add(g.members[id])
		}
	}
	add(self)
	return out
}

// endpointTopic is one topic's partitions an endpoint serves.
type endpointTopic struct {
	topic      string
	partitions []int32
}

func (s *shard) endpointPartitions(g *streamsGroup, tasks taskSet) []endpointTopic {
	var out []endpointTopic
	if g.configured == nil {
		return out
	}
	for _, sub := range sortedKeys(tasks) {
		st := g.configured.subtopologies[sub]
		if st == nil {
			continue
		}
		for _, topic := range st.inputTopics {
			n := st.partitionCounts[topic]
			var ps []int32
			for _, p := range tasks[sub] {
				if p < n {
					ps = append(ps, p)
				}
			}
			if len(ps) == 0 {
				continue
			}
			out = append(out, endpointTopic{topic, ps})
		}
	}
	return out
}

// --- timers -------------------------------------------------------------------

// streamsTimers fences members whose session or revocation deadline passed
// and ends the initial rebalance delay.
func (s *shard) streamsTimers(ctx context.Context, g *streamsGroup, now int64) {
	var recs []record
	for _, id := range sortedKeys(g.members) {
		m := g.members[id]
		due := func(deadline int64) bool { return deadline != 0 && now >= deadline }
		switch {
		case due(m.sessionDeadline):
			s.c.log.Info("fencing streams group member: session expired", "group", g.id, "member", id)
		case m.state == streamsUnrevoked && due(m.rebalanceDeadline) && m.epoch == m.rebalanceEpoch:
			s.c.log.Info("fencing streams group member: tasks not revoked within the rebalance timeout", "group", g.id, "member", id)
		default:
			continue
		}
		s.fenceStreamsMember(g, id, &recs)
	}
	if g.initialDeadline != 0 && now >= g.initialDeadline {
		g.initialDeadline = 0
		settings := s.c.cfg.streamsSettings(g.id)
		intervalOK := g.assignmentTimestamp == 0 || settings.assignmentIntervalMs == 0 || now >= g.assignmentTimestamp+int64(settings.assignmentIntervalMs)
		if len(g.members) > 0 && g.epoch > g.assignmentEpoch && g.configured != nil && intervalOK {
			s.computeStreamsTarget(g, &recs, now)
		}
	}
	if len(recs) == 0 {
		return
	}
	if err := s.write(ctx, recs); err != nil {
		s.c.log.Warn("streams group timers: write failed", "group", g.id, "err", err)
	}
}

// --- describe -----------------------------------------------------------------

// StreamsGroupDescribe describes streams groups.
func (c *Coordinator) StreamsGroupDescribe(ctx context.Context, req *kmsg.StreamsGroupDescribeRequest) *kmsg.StreamsGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.StreamsGroupDescribeResponse)
	for _, id := range req.Groups {
		resp.Groups = append(resp.Groups, c.describeStreamsGroup(id, req.IncludeAuthorizedOperations))
	}
	return resp
}

func (c *Coordinator) describeStreamsGroup(id string, includeOps bool) kmsg.StreamsGroupDescribeResponseGroup {
	out := kmsg.NewStreamsGroupDescribeResponseGroup()
	out.Group = id
	out.AuthorizedOperations = -2147483648
	if id == "" {
		out.ErrorCode = kerr.InvalidGroupID.Code
		return out
	}
	s, code := c.lockGroup(id)
	if code != 0 {
		out.ErrorCode = code
		return out
	}
	defer s.mu.Unlock()
	g := s.streams[id]
	if g == nil {
		out.ErrorCode = kerr.GroupIDNotFound.Code
		if s.classic[id] != nil || s.consumer[id] != nil || s.share[id] != nil {
			out.ErrorMessage = strPtr(fmt.Sprintf("Group %s is not a streams group.", id))
		} else {
			out.ErrorMessage = strPtr(fmt.Sprintf("Group %s not found.", id))
		}
		return out
	}
	if includeOps {
		out.AuthorizedOperations = groupAuthorizedOps
	}
	out.State, out.Epoch, out.AssignmentEpoch = g.stateName(), g.epoch, g.assignmentEpoch
	if g.topology != nil {
		out.Topology = s.describeTopology(g)
	}
	out.Members = []kmsg.StreamsGroupDescribeResponseGroupMember{}
	for _, mid := range sortedKeys(g.members) {
		m := g.members[mid]
		dm := kmsg.NewStreamsGroupDescribeResponseGroupMember()
		dm.MemberID, dm.MemberEpoch = m.id, m.epoch
		dm.InstanceID, dm.RackID = m.meta.InstanceID, m.meta.RackID
		dm.ClientID, dm.ClientHost = m.meta.ClientID, m.meta.ClientHost
		dm.TopologyEpoch, dm.ProcessID = m.meta.TopologyEpoch, m.meta.ProcessID
		if e := m.meta.UserEndpoint; e != nil {
			dm.UserEndpoint = &kmsg.StreamsGroupDescribeResponseGroupMemberUserEndpoint{Host: e.Host, Port: e.Port}
		}
		dm.ClientTags = []kmsg.StreamsGroupDescribeResponseGroupMemberClientTag{}
		for _, t := range m.meta.ClientTags {
			dm.ClientTags = append(dm.ClientTags, kmsg.StreamsGroupDescribeResponseGroupMemberClientTag{Key: t.Key, Value: t.Value})
		}
		dm.TaskOffsets, dm.TaskEndOffsets = []kmsg.TaskOffset{}, []kmsg.TaskOffset{}
		dm.Assignment = describeStreamsAssignment(m.assigned)
		dm.TargetAssignment = describeStreamsAssignment(g.target[m.id])
		out.Members = append(out.Members, dm)
	}
	return out
}

func describeStreamsAssignment(t tasksTuple) kmsg.StreamsAssignment {
	a := kmsg.NewStreamsAssignment()
	a.ActiveTasks, a.StandbyTasks, a.WarmupTasks = taskIDsOf(t.Active), taskIDsOf(t.Standby), taskIDsOf(t.Warmup)
	return a
}

// describeTopology is the configured topology when it is ready (the
// internal topics with the partition counts decided for them), else the
// topology as the members described it, subtopologies by id.
func (s *shard) describeTopology(g *streamsGroup) *kmsg.StreamsGroupDescribeResponseGroupTopology {
	t := kmsg.NewStreamsGroupDescribeResponseGroupTopology()
	t.Epoch = g.topology.Epoch
	t.Subtopologies = []kmsg.StreamsGroupDescribeResponseGroupTopologySubtopology{}
	ready := g.configured != nil && g.configured.ready()
	subs := slices.Clone(g.topology.Subtopologies)
	slices.SortFunc(subs, func(a, b streamsSubtopology) int { return strings.Compare(a.ID, b.ID) })
	for _, st := range subs {
		d := kmsg.NewStreamsGroupDescribeResponseGroupTopologySubtopology()
		d.SubtopologyID = st.ID
		d.SourceTopics = slices.Sorted(slices.Values(st.SourceTopics))
		d.RepartitionSinkTopics = slices.Sorted(slices.Values(st.RepartitionSinkTopics))
		conv := func(ts []streamsTopicInfo) []kmsg.TopicInfo {
			out := []kmsg.TopicInfo{}
			for _, ti := range ts {
				k := kmsg.NewTopicInfo()
				k.Topic, k.NumPartitions, k.ReplicationFactor = ti.Name, ti.Partitions, ti.ReplicationFactor
				if ready {
					if n, ok := g.configured.internalPartitions[ti.Name]; ok {
						k.NumPartitions = n
					}
				}
				for _, c := range ti.Configs {
					k.Configs = append(k.Configs, kmsg.TopicInfoConfig{Key: c.Key, Value: c.Value})
				}
				out = append(out, k)
			}
			slices.SortFunc(out, func(a, b kmsg.TopicInfo) int { return strings.Compare(a.Topic, b.Topic) })
			return out
		}
		d.StateChangelogTopics = conv(st.StateChangelogTopics)
		d.RepartitionSourceTopics = conv(st.RepartitionSourceTopics)
		t.Subtopologies = append(t.Subtopologies, d)
	}
	return &t
}

// StreamsHeartbeatIntervalMs is the heartbeat interval of a streams group
// (its own streams.heartbeat.interval.ms, else the broker's).
func (c *Coordinator) StreamsHeartbeatIntervalMs(groupID string) int32 {
	return c.cfg.streamsSettings(groupID).heartbeatIntervalMs
}
