package group

// The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup
// and Kafka's rebalance state machine (Empty, PreparingRebalance,
// CompletingRebalance, Stable, Dead). Membership, generation and
// assignments are persisted as a GroupMetadata record when a generation's
// assignment is stored (and when a group becomes empty); the rebalance in
// progress is volatile, as in Kafka.

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/gregorbroker/gregor/coordinator/runtime"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type classicState int8

const (
	classicEmpty classicState = iota
	classicPreparing
	classicCompleting
	classicStable
	classicDead
)

func (s classicState) String() string {
	switch s {
	case classicEmpty:
		return "Empty"
	case classicPreparing:
		return "PreparingRebalance"
	case classicCompleting:
		return "CompletingRebalance"
	case classicStable:
		return "Stable"
	}
	return "Dead"
}

type classicProtocol struct {
	name     string
	metadata []byte
}

type classicMember struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	sessionTimeout   int32
	rebalanceTimeout int32
	protocolType     string
	protocols        []classicProtocol
	assignment       []byte

	deadline int64 // session expiry, ms

	// joinCh is set while the member's JoinGroup is parked; syncCh while
	// its SyncGroup is. Both are buffered (1) so that answering never
	// blocks under the shard lock.
	joinCh      chan *kmsg.JoinGroupResponse
	joinVersion int16
	syncCh      chan *kmsg.SyncGroupResponse
	syncVersion int16
}

func (m *classicMember) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.name == protocol {
			return p.metadata
		}
	}
	return nil
}

func (m *classicMember) supports(protocol string) bool {
	for _, p := range m.protocols {
		if p.name == protocol {
			return true
		}
	}
	return false
}

func sameProtocols(a []classicProtocol, b []kmsg.JoinGroupRequestProtocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].Name || string(a[i].metadata) != string(b[i].Metadata) {
			return false
		}
	}
	return true
}

type classicGroup struct {
	id             string
	state          classicState
	stateTimestamp int64 // ms at the last state change
	protocolType   string
	protocol       string
	generation     int32
	leader         string
	members        map[string]*classicMember
	order          []string          // member ids in join order (leader fallback)
	static         map[string]string // instance id -> member id
	pending        map[string]int64  // member ids handed out by MEMBER_ID_REQUIRED -> expiry

	joinDeadline   int64 // ms; 0 when no join phase is timed
	initialDelay   bool  // the join phase is group.initial.rebalance.delay.ms
	delayRemaining int64 // ms the initial delay may still be extended by
	newMemberAdded bool
	// memberDue is no later than the earliest member session deadline
	// (ms): the timer scans the members only once it has passed, not on
	// every tick (with thousands of members the scan was a fifth of the
	// node's CPU under steady heartbeats). Every write of a deadline goes
	// through renewSession or addMember, which lower it.
	memberDue        int64
	syncDeadline     int64           // ms; 0 when no sync phase is timed
	pendingSync      map[string]bool // members that have not sent SyncGroup this generation
	awaitingJoinSize int
}

func newClassicGroup(id string, now int64) *classicGroup {
	return &classicGroup{
		id: id, state: classicEmpty, stateTimestamp: now,
		members: map[string]*classicMember{}, static: map[string]string{},
		pending: map[string]int64{}, pendingSync: map[string]bool{},
	}
}

// renewSession gives m a full session from now.
func (g *classicGroup) renewSession(m *classicMember, now int64) {
	m.deadline = now + int64(m.sessionTimeout)
	g.memberDue = min(g.memberDue, m.deadline)
}

func (g *classicGroup) transition(st classicState, now int64) {
	g.state = st
	g.stateTimestamp = now
}

func (g *classicGroup) maxRebalanceTimeout() int32 {
	var max int32
	for _, m := range g.members {
		if m.rebalanceTimeout > max {
			max = m.rebalanceTimeout
		}
	}
	return max
}

func (g *classicGroup) addMember(m *classicMember) {
	if len(g.members) == 0 {
		// The first member of an empty group decides its protocol type.
		g.protocolType = m.protocolType
	}
	g.members[m.id] = m
	g.memberDue = min(g.memberDue, m.deadline)
	g.order = append(g.order, m.id)
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if g.leader == "" {
		g.leader = m.id
	}
}

// removeMember drops m, answering its parked requests with code.
func (g *classicGroup) removeMember(id string, code int16) {
	m := g.members[id]
	if m == nil {
		return
	}
	if m.joinCh != nil {
		m.joinCh <- classicJoinError(m.joinVersion, id, code)
		m.joinCh = nil
		g.awaitingJoinSize--
	}
	if m.syncCh != nil {
		m.syncCh <- syncError(m.syncVersion, code)
		m.syncCh = nil
	}
	delete(g.members, id)
	delete(g.pendingSync, id)
	for i, o := range g.order {
		if o == id {
			g.order = append(g.order[:i], g.order[i+1:]...)
			break
		}
	}
	if m.instanceID != nil && g.static[*m.instanceID] == id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == id {
		g.leader = ""
		// Prefer a member already waiting in JoinGroup, as Kafka does.
		for _, o := range g.order {
			if g.members[o].joinCh != nil {
				g.leader = o
				break
			}
		}
		if g.leader == "" && len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
}

func (g *classicGroup) failWaiters(code int16) {
	for _, m := range g.members {
		if m.joinCh != nil {
			m.joinCh <- classicJoinError(m.joinVersion, m.id, code)
			m.joinCh = nil
		}
		if m.syncCh != nil {
			m.syncCh <- syncError(m.syncVersion, code)
			m.syncCh = nil
		}
	}
	g.awaitingJoinSize = 0
}

// supportsProtocols is Kafka's check that a joining member can be part of
// the group.
func (g *classicGroup) supportsProtocols(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(g.members) == 0 {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		all := true
		for _, m := range g.members {
			if !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// selectProtocol picks the protocol all members support that most members
// list first among those candidates.
func (g *classicGroup) selectProtocol() string {
	var candidates []string
	if len(g.order) == 0 {
		return ""
	}
	for _, p := range g.members[g.order[0]].protocols {
		all := true
		for _, m := range g.members {
			if !m.supports(p.name) {
				all = false
				break
			}
		}
		if all {
			candidates = append(candidates, p.name)
		}
	}
	votes := map[string]int{}
	for _, id := range g.order {
		m := g.members[id]
		for _, p := range m.protocols {
			if contains(candidates, p.name) {
				votes[p.name]++
				break
			}
		}
	}
	best := ""
	for _, c := range candidates {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// newMemberID is Kafka's classic member id: the client id and a random
// UUID in java.util.UUID's text form.
func newMemberID(clientID string) string {
	b := protocol.RandomUUID()
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", clientID, b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func classicJoinError(version int16, memberID string, code int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.ErrorCode = code
	r.Generation = -1
	r.MemberID = memberID
	r.Members = []kmsg.JoinGroupResponseMember{}
	return r
}

func syncError(version int16, code int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	r.ErrorCode = code
	r.MemberAssignment = []byte{}
	return r
}

// JoinGroup handles a classic JoinGroup. It parks until the rebalance it
// takes part in completes (or ctx ends).
func (c *Coordinator) JoinGroup(ctx context.Context, client Client, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	if req.Group == "" {
		return classicJoinError(req.Version, req.MemberID, kerr.InvalidGroupID.Code)
	}
	s, code := c.lockGroup(req.Group)
	if code != 0 {
		return classicJoinError(req.Version, req.MemberID, code)
	}
	resp, wait := s.classicJoin(ctx, client, req)
	s.mu.Unlock()
	if resp != nil {
		return resp
	}
	select {
	case r := <-wait:
		return r
	case <-ctx.Done():
		// The member stays in the rebalance, as in Kafka when a client
		// disconnects; it is dropped at the rebalance timeout.
		return classicJoinError(req.Version, req.MemberID, kerr.RequestTimedOut.Code)
	}
}

func (s *shard) classicJoin(ctx context.Context, client Client, req *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	cfg := &s.c.cfg
	now := s.c.nowMs()
	fail := func(code int16) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
		return classicJoinError(req.Version, req.MemberID, code), nil
	}
	if req.SessionTimeoutMillis < cfg.MinSessionTimeoutMs || req.SessionTimeoutMillis > cfg.MaxSessionTimeoutMs {
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	unknownMember := req.MemberID == ""
	if s.share[req.Group] != nil {
		return classicJoinError(req.Version, "", kerr.InconsistentGroupProtocol.Code), nil
	}
	if sg := s.streams[req.Group]; sg != nil {
		if len(sg.members) > 0 {
			return classicJoinError(req.Version, "", kerr.InconsistentGroupProtocol.Code), nil
		}
		// An empty streams group is replaced by a classic one.
		recs := deleteStreamsGroupRecords(sg)
		if err := s.write(ctx, recs); err != nil {
			return fail(appendErrorCode(err))
		}
		for _, r := range recs {
			_ = s.replay(r)
		}
		delete(s.streams, req.Group)
	}
	if cg := s.consumer[req.Group]; cg != nil {
		if len(cg.members) > 0 {
			// A classic member of a consumer group (migration.go).
			return s.classicJoinToConsumer(ctx, cg, client, req), nil
		}
		if !cfg.protocolEnabled("classic") {
			return fail(kerr.InconsistentGroupProtocol.Code)
		}
		// An empty consumer group is converted to a classic one.
		if err := s.write(ctx, s.deleteConsumerGroupRecords(cg)); err != nil {
			return fail(appendErrorCode(err))
		}
		delete(s.consumer, req.Group)
	}
	g := s.classic[req.Group]
	if g == nil {
		if !unknownMember {
			return fail(kerr.UnknownMemberID.Code)
		}
		g = newClassicGroup(req.Group, now)
		s.classic[req.Group] = g
	}
	if !g.acceptJoiningMember(req.MemberID, cfg.MaxSize) {
		return fail(kerr.GroupMaxSizeReached.Code)
	}
	if g.state == classicDead {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		// A group created for this join and refused stays unpersisted.
		if len(g.members) == 0 && g.generation == 0 && s.offsets[g.id] == nil && !s.hasOpenTransactions(g.id) {
			delete(s.classic, g.id)
		}
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	rebalanceTimeout := req.RebalanceTimeoutMillis
	if req.Version == 0 {
		rebalanceTimeout = req.SessionTimeoutMillis
	}
	if unknownMember {
		return s.joinNewMember(ctx, g, client, req, rebalanceTimeout, now)
	}
	return s.joinExistingMember(ctx, g, client, req, rebalanceTimeout, now)
}

func (g *classicGroup) acceptJoiningMember(memberID string, max int32) bool {
	switch g.state {
	case classicEmpty, classicDead:
		return true
	case classicPreparing:
		if m := g.members[memberID]; m != nil && m.joinCh != nil {
			return true
		}
		return int32(g.awaitingJoinSize) < max
	}
	return g.members[memberID] != nil || int32(len(g.members)) < max
}

func (s *shard) joinNewMember(ctx context.Context, g *classicGroup, client Client, req *kmsg.JoinGroupRequest, rebalanceTimeout int32, now int64) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	memberID := newMemberID(client.ID)
	if req.InstanceID != nil {
		if old := g.static[*req.InstanceID]; old != "" {
			return s.replaceStaticMember(ctx, g, client, req, memberID, old, rebalanceTimeout, now)
		}
		return s.addMemberAndRebalance(g, client, req, memberID, rebalanceTimeout, now)
	}
	if req.Version >= 4 {
		// KIP-394: hand out the id and wait for the member to come back
		// with it, so that a client that never does leaves no ghost.
		g.pending[memberID] = now + int64(req.SessionTimeoutMillis)
		return classicJoinError(req.Version, memberID, kerr.MemberIDRequired.Code), nil
	}
	return s.addMemberAndRebalance(g, client, req, memberID, rebalanceTimeout, now)
}

func (s *shard) joinExistingMember(ctx context.Context, g *classicGroup, client Client, req *kmsg.JoinGroupRequest, rebalanceTimeout int32, now int64) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	fail := func(code int16) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
		return classicJoinError(req.Version, req.MemberID, code), nil
	}
	if _, pending := g.pending[req.MemberID]; pending {
		delete(g.pending, req.MemberID)
		return s.addMemberAndRebalance(g, client, req, req.MemberID, rebalanceTimeout, now)
	}
	if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
		return fail(code)
	}
	m := g.members[req.MemberID]
	switch g.state {
	case classicPreparing:
		return nil, s.updateMemberAndRebalance(g, m, req, rebalanceTimeout, now)
	case classicCompleting:
		if sameProtocols(m.protocols, req.Protocols) {
			// A retry of a join whose answer was lost: answer again.
			g.renewSession(m, now)
			return g.joinResponse(req.Version, m, false), nil
		}
		return nil, s.updateMemberAndRebalance(g, m, req, rebalanceTimeout, now)
	case classicStable:
		if g.leader == m.id || !sameProtocols(m.protocols, req.Protocols) {
			return nil, s.updateMemberAndRebalance(g, m, req, rebalanceTimeout, now)
		}
		g.renewSession(m, now)
		return g.joinResponse(req.Version, m, false), nil
	}
	return fail(kerr.UnknownMemberID.Code)
}

// validateMember is Kafka's member check shared by the classic APIs.
func (g *classicGroup) validateMember(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		existing, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if existing != memberID {
			return kerr.FencedInstanceID.Code
		}
		return 0
	}
	if g.members[memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

func joinProtocols(ps []kmsg.JoinGroupRequestProtocol) []classicProtocol {
	out := make([]classicProtocol, len(ps))
	for i, p := range ps {
		out[i] = classicProtocol{name: p.Name, metadata: append([]byte(nil), p.Metadata...)}
	}
	return out
}

func (s *shard) addMemberAndRebalance(g *classicGroup, client Client, req *kmsg.JoinGroupRequest, memberID string, rebalanceTimeout int32, now int64) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	m := &classicMember{
		id: memberID, instanceID: cloneStr(req.InstanceID), clientID: client.ID, clientHost: client.Host,
		sessionTimeout: req.SessionTimeoutMillis, rebalanceTimeout: rebalanceTimeout,
		protocolType: req.ProtocolType, protocols: joinProtocols(req.Protocols),
		assignment: []byte{},
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinCh, m.joinVersion = ch, req.Version
	g.awaitingJoinSize++
	g.renewSession(m, now)
	g.addMember(m)
	if g.state == classicPreparing && g.initialDelay {
		g.newMemberAdded = true
	}
	s.maybePrepareRebalance(g, now, "member "+memberID+" joined")
	return nil, ch
}

func (s *shard) updateMemberAndRebalance(g *classicGroup, m *classicMember, req *kmsg.JoinGroupRequest, rebalanceTimeout int32, now int64) chan *kmsg.JoinGroupResponse {
	m.protocols = joinProtocols(req.Protocols)
	m.protocolType = req.ProtocolType
	m.sessionTimeout = req.SessionTimeoutMillis
	m.rebalanceTimeout = rebalanceTimeout
	g.renewSession(m, now)
	if m.joinCh != nil {
		// A newer join from the same member replaces the parked one.
		m.joinCh <- classicJoinError(m.joinVersion, m.id, kerr.RebalanceInProgress.Code)
		g.awaitingJoinSize--
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinCh, m.joinVersion = ch, req.Version
	g.awaitingJoinSize++
	s.maybePrepareRebalance(g, now, "member "+m.id+" rejoined")
	return ch
}

func (s *shard) replaceStaticMember(ctx context.Context, g *classicGroup, client Client, req *kmsg.JoinGroupRequest, newID, oldID string, rebalanceTimeout int32, now int64) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	old := g.members[oldID]
	// The previous incarnation's parked requests learn they are fenced.
	if old.joinCh != nil {
		old.joinCh <- classicJoinError(old.joinVersion, oldID, kerr.FencedInstanceID.Code)
		old.joinCh = nil
		g.awaitingJoinSize--
	}
	if old.syncCh != nil {
		old.syncCh <- syncError(old.syncVersion, kerr.FencedInstanceID.Code)
		old.syncCh = nil
	}
	saved := *old
	wasLeader := g.leader == oldID

	m := old
	delete(g.members, oldID)
	m.id = newID
	m.clientID, m.clientHost = client.ID, client.Host
	m.sessionTimeout, m.rebalanceTimeout = req.SessionTimeoutMillis, rebalanceTimeout
	m.protocolType = req.ProtocolType
	m.protocols = joinProtocols(req.Protocols)
	g.renewSession(m, now)
	g.members[newID] = m
	for i, o := range g.order {
		if o == oldID {
			g.order[i] = newID
		}
	}
	g.static[*req.InstanceID] = newID
	if wasLeader {
		g.leader = newID
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}

	switch g.state {
	case classicStable:
		// Kafka rebalances only when the rejoin changes the protocol the
		// group would select: a client's subscription bytes (owned
		// partitions, generation) may differ from its previous
		// incarnation's without that mattering.
		if g.selectProtocol() != g.protocol {
			ch := make(chan *kmsg.JoinGroupResponse, 1)
			m.joinCh, m.joinVersion = ch, req.Version
			g.awaitingJoinSize++
			s.maybePrepareRebalance(g, now, "static member "+*req.InstanceID+" rejoined with a change of protocol")
			return nil, ch
		}
		// The selected protocol stays: the new incarnation takes over
		// the assignment without a rebalance (KIP-345); persist the new
		// member id and its protocols.
		if err := s.write(ctx, []record{g.metadataRecord()}); err != nil {
			// write rebuilt the shard from the log, which still has the
			// previous incarnation.
			_ = saved
			return classicJoinError(req.Version, "", appendErrorCode(err)), nil
		}
		resp := g.joinResponse(req.Version, m, wasLeader)
		if wasLeader {
			// KIP-814: the leader gets the members but must not
			// recompute an assignment.
			resp.SkipAssignment = true
		} else {
			resp.Members = []kmsg.JoinGroupResponseMember{}
		}
		return resp, nil
	case classicCompleting:
		ch := make(chan *kmsg.JoinGroupResponse, 1)
		m.joinCh, m.joinVersion = ch, req.Version
		g.awaitingJoinSize++
		s.prepareRebalance(g, now, "static member "+*req.InstanceID+" replaced during CompletingRebalance")
		return nil, ch
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinCh, m.joinVersion = ch, req.Version
	g.awaitingJoinSize++
	s.maybePrepareRebalance(g, now, "static member "+*req.InstanceID+" rejoined")
	return nil, ch
}

func cloneStr(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

// joinResponse is the successful JoinGroup answer for m at the current
// generation; the leader gets every member's metadata.
func (g *classicGroup) joinResponse(version int16, m *classicMember, withMembers bool) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.Generation = g.generation
	r.ProtocolType = strPtr(g.protocolType)
	r.Protocol = strPtr(g.protocol)
	r.LeaderID = g.leader
	r.MemberID = m.id
	r.Members = []kmsg.JoinGroupResponseMember{}
	if m.id == g.leader || withMembers {
		for _, id := range g.order {
			o := g.members[id]
			r.Members = append(r.Members, kmsg.JoinGroupResponseMember{
				MemberID: o.id, InstanceID: o.instanceID, ProtocolMetadata: o.metadataFor(g.protocol),
			})
		}
	}
	return r
}

func (s *shard) maybePrepareRebalance(g *classicGroup, now int64, reason string) {
	switch g.state {
	case classicStable, classicCompleting, classicEmpty:
		s.prepareRebalance(g, now, reason)
	case classicPreparing:
		s.tryCompleteJoin(context.Background(), g, now)
	}
}

func (s *shard) prepareRebalance(g *classicGroup, now int64, reason string) {
	if g.state == classicCompleting {
		// The assignment being collected is void: members parked in
		// SyncGroup must rejoin.
		for _, m := range g.members {
			m.assignment = []byte{}
			if m.syncCh != nil {
				m.syncCh <- syncError(m.syncVersion, kerr.RebalanceInProgress.Code)
				m.syncCh = nil
			}
		}
	}
	g.pendingSync = map[string]bool{}
	g.syncDeadline = 0
	rt := int64(g.maxRebalanceTimeout())
	delay := int64(s.c.cfg.InitialRebalanceDelayMs)
	// The first rebalance of an empty group always waits for the initial
	// delay timer, even at 0 ms, as Kafka's InitialDelayedJoin does: the
	// members that arrive together join one generation instead of the
	// first one completing alone and the rest forcing another round.
	if g.state == classicEmpty {
		first := min(delay, rt)
		g.initialDelay = true
		g.delayRemaining = max(rt-delay, 0)
		g.newMemberAdded = false
		g.joinDeadline = now + first
	} else {
		g.initialDelay = false
		g.joinDeadline = now + rt
	}
	s.c.log.Info("preparing to rebalance group", "group", g.id, "generation", g.generation, "reason", reason)
	g.transition(classicPreparing, now)
	if !g.initialDelay {
		s.tryCompleteJoin(context.Background(), g, now)
		return
	}
	if delay == 0 {
		// A zero delay still gathers the joins that arrive together:
		// complete after a short window rather than on the next timer
		// tick (100 ms).
		time.AfterFunc(s.c.zeroDelayJoinWindow, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.status == runtime.ShardActive && s.classic[g.id] == g && g.state == classicPreparing && g.initialDelay {
				s.completeJoin(context.Background(), g, s.c.nowMs())
			}
		})
	}
}

// defaultZeroDelayJoinWindow is how long the first rebalance of an empty
// group gathers joins when group.initial.rebalance.delay.ms is 0.
const defaultZeroDelayJoinWindow = 10 * time.Millisecond

func (g *classicGroup) allJoined() bool {
	return g.awaitingJoinSize == len(g.members) && len(g.pending) == 0
}

func (s *shard) tryCompleteJoin(ctx context.Context, g *classicGroup, now int64) {
	if g.state == classicPreparing && !g.initialDelay && g.allJoined() {
		s.completeJoin(ctx, g, now)
	}
}

// completeJoin ends the join phase: members that did not rejoin are
// dropped, the generation advances and every parked JoinGroup is answered.
func (s *shard) completeJoin(ctx context.Context, g *classicGroup, now int64) {
	if g.state != classicPreparing {
		return
	}
	for _, id := range append([]string(nil), g.order...) {
		if m := g.members[id]; m.joinCh == nil {
			s.c.log.Info("removing member that did not rejoin", "group", g.id, "member", id)
			g.removeMember(id, kerr.UnknownMemberID.Code)
		}
	}
	g.joinDeadline = 0
	g.initialDelay = false
	g.generation++
	if len(g.members) == 0 {
		g.protocol = ""
		g.leader = ""
		g.transition(classicEmpty, now)
		if err := s.write(ctx, []record{g.metadataRecord()}); err != nil {
			s.c.log.Warn("storing empty group failed", "group", g.id, "err", err)
		}
		return
	}
	g.protocol = g.selectProtocol()
	if g.members[g.leader] == nil {
		g.leader = g.order[0]
	}
	g.transition(classicCompleting, now)
	g.pendingSync = map[string]bool{}
	for _, id := range g.order {
		m := g.members[id]
		m.joinCh <- g.joinResponse(m.joinVersion, m, false)
		m.joinCh = nil
		g.renewSession(m, now)
		g.pendingSync[id] = true
	}
	g.awaitingJoinSize = 0
	g.syncDeadline = now + int64(g.maxRebalanceTimeout())
	s.c.log.Info("group stabilizing", "group", g.id, "generation", g.generation, "protocol", g.protocol, "members", len(g.members))
}

// metadataRecord is the group's GroupMetadata record.
func (g *classicGroup) metadataRecord() record {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupMetadataValueVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		v.Protocol = strPtr(g.protocol)
	}
	if g.leader != "" {
		v.Leader = strPtr(g.leader)
	}
	v.CurrentStateTimestamp = g.stateTimestamp
	for _, id := range g.order {
		m := g.members[id]
		mv := kmsg.NewGroupMetadataValueMember()
		mv.MemberID = m.id
		mv.InstanceID = m.instanceID
		mv.ClientID = m.clientID
		mv.ClientHost = m.clientHost
		mv.RebalanceTimeoutMillis = m.rebalanceTimeout
		mv.SessionTimeoutMillis = m.sessionTimeout
		mv.Subscription = m.metadataFor(g.protocol)
		if mv.Subscription == nil {
			mv.Subscription = []byte{}
		}
		mv.Assignment = m.assignment
		if mv.Assignment == nil {
			mv.Assignment = []byte{}
		}
		v.Members = append(v.Members, mv)
	}
	return record{key: groupMetadataKey(g.id), value: v.AppendTo(nil)}
}

// replayGroupMetadata rebuilds a classic group from its record: Stable
// with its members and assignments, or Empty.
func (s *shard) replayGroupMetadata(groupID string, value []byte) error {
	if value == nil {
		delete(s.classic, groupID)
		return nil
	}
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return fmt.Errorf("decoding GroupMetadataValue of group %q: %w", groupID, err)
	}
	delete(s.consumer, groupID)
	g := newClassicGroup(groupID, v.CurrentStateTimestamp)
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	for _, mv := range v.Members {
		m := &classicMember{
			id: mv.MemberID, instanceID: mv.InstanceID, clientID: mv.ClientID, clientHost: mv.ClientHost,
			sessionTimeout: mv.SessionTimeoutMillis, rebalanceTimeout: mv.RebalanceTimeoutMillis,
			protocolType: v.ProtocolType,
			protocols:    []classicProtocol{{name: g.protocol, metadata: mv.Subscription}},
			assignment:   mv.Assignment,
		}
		if m.rebalanceTimeout < 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		g.addMember(m)
	}
	if v.Leader != nil {
		g.leader = *v.Leader
	}
	if len(g.members) > 0 {
		g.state = classicStable
	}
	if v.CurrentStateTimestamp < 0 {
		g.stateTimestamp = 0
	}
	s.classic[groupID] = g
	return nil
}

// SyncGroup handles a classic SyncGroup: the leader's carries the
// assignment, which is stored before anyone is answered.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	if req.Group == "" {
		return syncError(req.Version, kerr.InvalidGroupID.Code)
	}
	s, code := c.lockGroup(req.Group)
	if code != 0 {
		return syncError(req.Version, code)
	}
	resp, wait := s.classicSync(ctx, req)
	s.mu.Unlock()
	if resp != nil {
		return resp
	}
	select {
	case r := <-wait:
		return r
	case <-ctx.Done():
		return syncError(req.Version, kerr.RequestTimedOut.Code)
	}
}

func (s *shard) classicSync(ctx context.Context, req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, chan *kmsg.SyncGroupResponse) {
	fail := func(code int16) (*kmsg.SyncGroupResponse, chan *kmsg.SyncGroupResponse) {
		return syncError(req.Version, code), nil
	}
	if cg := s.consumer[req.Group]; cg != nil {
		if len(cg.members) == 0 {
			return fail(kerr.UnknownMemberID.Code)
		}
		return s.classicSyncToConsumer(cg, req), nil
	}
	g := s.classic[req.Group]
	if g == nil {
		return fail(kerr.UnknownMemberID.Code)
	}
	if g.state == classicDead {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
		return fail(code)
	}
	if req.Generation != g.generation {
		return fail(kerr.IllegalGeneration.Code)
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) ||
		(req.Protocol != nil && *req.Protocol != g.protocol) {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	now := s.c.nowMs()
	m := g.members[req.MemberID]
	switch g.state {
	case classicEmpty:
		return fail(kerr.UnknownMemberID.Code)
	case classicPreparing:
		return fail(kerr.RebalanceInProgress.Code)
	case classicStable:
		delete(g.pendingSync, m.id)
		if len(g.pendingSync) == 0 {
			g.syncDeadline = 0
		}
		g.renewSession(m, now)
		return g.syncResponse(req.Version, m), nil
	}
	// CompletingRebalance.
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	if m.syncCh != nil {
		m.syncCh <- syncError(m.syncVersion, kerr.RebalanceInProgress.Code)
	}
	m.syncCh, m.syncVersion = ch, req.Version
	delete(g.pendingSync, m.id)
	g.renewSession(m, now)
	if m.id != g.leader {
		return nil, ch
	}
	assigned := map[string][]byte{}
	for _, a := range req.GroupAssignment {
		if g.members[a.MemberID] != nil {
			assigned[a.MemberID] = a.MemberAssignment
		}
	}
	for id, o := range g.members {
		o.assignment = assigned[id]
		if o.assignment == nil {
			o.assignment = []byte{}
		} else {
			o.assignment = append([]byte(nil), o.assignment...)
		}
	}
	generation := g.generation
	if err := s.write(ctx, []record{g.metadataRecord()}); err != nil {
		// write rebuilt the shard and failed every parked request with
		// NOT_COORDINATOR; the members rediscover the coordinator.
		s.c.log.Warn("storing group assignment failed", "group", req.Group, "generation", generation, "err", err)
		return nil, ch
	}
	g.transition(classicStable, now)
	s.c.events.classicRebalances.Add(1)
	for _, o := range g.members {
		if o.syncCh != nil {
			o.syncCh <- g.syncResponse(o.syncVersion, o)
			o.syncCh = nil
		}
	}
	if len(g.pendingSync) == 0 {
		g.syncDeadline = 0
	}
	s.c.log.Info("group stable", "group", g.id, "generation", g.generation, "members", len(g.members))
	return nil, ch
}

func (g *classicGroup) syncResponse(version int16, m *classicMember) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	r.ProtocolType = strPtr(g.protocolType)
	r.Protocol = strPtr(g.protocol)
	r.MemberAssignment = m.assignment
	if r.MemberAssignment == nil {
		r.MemberAssignment = []byte{}
	}
	return r
}

// Heartbeat handles a classic Heartbeat.
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.Version = req.Version
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	s, code := c.lockGroup(req.Group)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	defer s.mu.Unlock()
	if cg := s.consumer[req.Group]; cg != nil {
		resp.ErrorCode = s.classicHeartbeatToConsumer(cg, req)
		return resp
	}
	g := s.classic[req.Group]
	switch {
	case g == nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case g.state == classicDead:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		if code := g.validateMember(req.MemberID, req.InstanceID); code != 0 {
			resp.ErrorCode = code
			return resp
		}
		if req.Generation != g.generation {
			resp.ErrorCode = kerr.IllegalGeneration.Code
			return resp
		}
		m := g.members[req.MemberID]
		switch g.state {
		case classicEmpty:
			resp.ErrorCode = kerr.UnknownMemberID.Code
		case classicPreparing:
			g.renewSession(m, c.nowMs())
			resp.ErrorCode = kerr.RebalanceInProgress.Code
		default:
			g.renewSession(m, c.nowMs())
		}
	}
	return resp
}

// LeaveGroup handles a classic LeaveGroup (batched from v3).
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := kmsg.NewPtrLeaveGroupResponse()
	resp.Version = req.Version
	members := req.Members
	if req.Version < 3 {
		members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	s, code := c.lockGroup(req.Group)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	defer s.mu.Unlock()
	if cg := s.consumer[req.Group]; cg != nil {
		return s.classicLeaveToConsumer(ctx, cg, req, members)
	}
	g := s.classic[req.Group]
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	if g.state == classicDead {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	now := c.nowMs()
	removed := false
	for _, lm := range members {
		out := kmsg.NewLeaveGroupResponseMember()
		out.MemberID, out.InstanceID = lm.MemberID, lm.InstanceID
		switch {
		case lm.InstanceID != nil:
			id, ok := g.static[*lm.InstanceID]
			switch {
			case !ok:
				out.ErrorCode = kerr.UnknownMemberID.Code
			case lm.MemberID != "" && lm.MemberID != id:
				out.ErrorCode = kerr.FencedInstanceID.Code
			default:
				g.removeMember(id, kerr.UnknownMemberID.Code)
				removed = true
			}
		default:
			if _, ok := g.pending[lm.MemberID]; ok {
				delete(g.pending, lm.MemberID)
				removed = true
			} else if g.members[lm.MemberID] == nil {
				out.ErrorCode = kerr.UnknownMemberID.Code
			} else {
				g.removeMember(lm.MemberID, kerr.UnknownMemberID.Code)
				removed = true
			}
		}
		resp.Members = append(resp.Members, out)
	}
	if req.Version < 3 {
		resp.ErrorCode = resp.Members[0].ErrorCode
		resp.Members = nil
	}
	if removed {
		s.afterMemberRemoval(ctx, g, now, "members left the group")
	}
	return resp
}

func (s *shard) afterMemberRemoval(ctx context.Context, g *classicGroup, now int64, reason string) {
	switch g.state {
	case classicStable, classicCompleting:
		s.prepareRebalance(g, now, reason)
	case classicPreparing:
		s.tryCompleteJoin(ctx, g, now)
	}
}

// classicTimers fires g's due timers.
func (s *shard) classicTimers(ctx context.Context, g *classicGroup, now int64) {
	for id, exp := range g.pending {
		if now >= exp {
			delete(g.pending, id)
			s.c.log.Info("pending member expired", "group", g.id, "member", id)
			if g.state == classicPreparing {
				s.tryCompleteJoin(ctx, g, now)
			}
		}
	}
	var expired []string
	if now >= g.memberDue {
		due := int64(math.MaxInt64)
		for _, id := range g.order {
			m := g.members[id]
			if now < m.deadline {
				due = min(due, m.deadline)
				continue
			}
			if m.joinCh != nil || m.syncCh != nil {
				// A member parked in JoinGroup or SyncGroup cannot heartbeat.
				m.deadline = now + int64(m.sessionTimeout)
				due = min(due, m.deadline)
				continue
			}
			expired = append(expired, id)
		}
		g.memberDue = due
	}
	for _, id := range expired {
		s.c.log.Info("member session expired", "group", g.id, "member", id)
		g.removeMember(id, kerr.UnknownMemberID.Code)
	}
	if len(expired) > 0 {
		s.afterMemberRemoval(ctx, g, now, "member session expired")
		if s.classic[g.id] != g {
			return
		}
	}
	if g.state == classicPreparing && g.joinDeadline != 0 && now >= g.joinDeadline {
		if g.initialDelay && g.newMemberAdded && g.delayRemaining > 0 {
			step := min(int64(s.c.cfg.InitialRebalanceDelayMs), g.delayRemaining)
			g.delayRemaining = max(g.delayRemaining-int64(s.c.cfg.InitialRebalanceDelayMs), 0)
			g.newMemberAdded = false
			g.joinDeadline = now + step
		} else {
			s.completeJoin(ctx, g, now)
			if s.classic[g.id] != g {
				return
			}
		}
	}
	if (g.state == classicCompleting || g.state == classicStable) && g.syncDeadline != 0 && now >= g.syncDeadline {
		g.syncDeadline = 0
		if len(g.pendingSync) > 0 {
			for id := range g.pendingSync {
				s.c.log.Info("removing member that did not sync", "group", g.id, "member", id)
				g.removeMember(id, kerr.UnknownMemberID.Code)
			}
			s.prepareRebalance(g, now, "members did not send SyncGroup in time")
		}
	}
}
