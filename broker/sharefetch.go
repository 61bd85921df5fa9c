package broker

// ShareFetch (key 78) v1-2 and ShareAcknowledge (key 79) v1-2: share
// group members (KIP-932) acquiring records of the partitions this broker
// leads, and acknowledging them, through share sessions.
//
// Behaviour, as Kafka 4.3's KafkaApis and SharePartitionManager:
//   - Both answer UNSUPPORTED_VERSION unless share.version >= 1 is
//     finalized; need READ on the group (GROUP_AUTHORIZATION_FAILED) and a
//     member id of 1 to 36 characters (INVALID_REQUEST); each partition
//     needs READ on its topic (TOPIC_AUTHORIZATION_FAILED). The member is
//     not checked against the group's members, as in Kafka.
//   - Share sessions, one per (group, member) on this broker, at most
//     group.share.max.share.sessions: epoch 0 opens one with the request's
//     partitions (acknowledgements then are INVALID_REQUEST; a full cache
//     SHARE_SESSION_LIMIT_REACHED), -1 closes it, releasing the member's
//     records, any other epoch must be the session's next
//     (INVALID_SHARE_SESSION_EPOCH; SHARE_SESSION_NOT_FOUND without one) and
//     adds and forgets partitions. ShareAcknowledge advances the same epoch
//     and refuses 0.
//   - A share partition (group, partition) is taken up on its leader at
//     the first fetch: its state read from the share coordinator at the
//     partition's leader epoch (fencing a previous leader), its start from
//     share.auto.offset.reset when the state has none.
//   - Records are acquired whole log batch by whole log batch up to
//     MaxRecords (shared by the request's partitions), locked for
//     share.record.lock.duration.ms (AcquisitionLockTimeoutMs), and the
//     Records field carries the log batches that hold them; a fetch with
//     nothing to acquire waits up to MaxWaitMs for new records
//     (MinBytes of them) in the fetch purgatory.
//   - Acknowledgements (piggy-backed or ShareAcknowledge): every type of
//     v1, RENEW with v2's IsRenewAck (and share.renew.acknowledge.enable),
//     validated as Kafka validates them (INVALID_REQUEST), applied to a
//     partition all or nothing (INVALID_RECORD_STATE for records the
//     member does not hold), and written to the share coordinator before
//     they are answered; lock expiries and releases are written too.
//
// Deliberate deviations and gaps (this slice):
//   - share.isolation.level=read_committed reads up to the last stable
//     offset; an aborted transaction's records are archived as they are
//     acquired and never delivered, as Kafka does; the transaction markers
//     are left to the client to acknowledge as gaps.
//   - Records are read into memory, not sent with sendfile.
//   - A partition's state change is applied before its write to the share
//     coordinator; a failed write is answered with its error but not rolled
//     back in memory (the persisted state is behind until the next write;
//     a new leader redelivers from it: at least once, never lost).
//   - A member's records are released when its session closes, its
//     connection drops or their locks expire; a broker forgets a group's
//     share partitions when the group's last session on it closes.
//   - A waiting fetch is woken by new records, and by records of its
//     partitions that become acquirable again (locks expired, records
//     released, acknowledgements freeing room under the in-flight limit),
//     the longest waiting first, as Kafka completes its delayed share
//     fetches then.
//   - ShareAcquireMode (v2): batch_optimized (0) acquires whole log
//     batches, max records a soft limit; record_limit (1) exactly max
//     records, splitting a batch. Another value is refused with
//     INVALID_REQUEST (Kafka fails such a fetch with an internal error).
//
// Locks: shareManager.mu guards the maps of partitions and sessions and is
// never held while a sharePart.mu is; sharePart.mu is held across the
// partition's write to the share coordinator, so that its writes are
// applied in order (LOCKS.md).

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	sharepart "github.com/gregorbroker/gregor/broker/share"
	"github.com/gregorbroker/gregor/coordinator/share"
	"github.com/gregorbroker/gregor/metrics"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/replica"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareManager keeps the share partitions and sessions of this broker.
type shareManager struct {
	b *Broker

	mu       sync.Mutex
	parts    map[share.Key]*sharePart
	sessions map[shareSessionKey]*shareSession
	// conns are the sessions each connection opened: they are closed,
	// and their members' records released, when it goes (Kafka's
	// ConnectionDisconnectListener).
	conns map[*network.Conn]map[shareSessionKey]bool
	// acks count the records acknowledged, by AcknowledgeTypes value
	// (ShareGroupMetrics' RecordAcknowledgementsPerSec).
	acks [sharepart.AckRenew + 1]metrics.Counter
}

type shareSessionKey struct{ group, member string }

type shareSession struct {
	conn  *network.Conn
	epoch int32 // the next epoch expected
	parts map[sharePartitionID]bool
	order []sharePartitionID
}

type sharePartitionID struct {
	topic     [16]byte
	partition int32
}

// sharePart is one share partition on this broker, its leader.
type sharePart struct {
	key share.Key
	tp  replica.TopicPartition

	mu          sync.Mutex
	p           *sharepart.Partition // nil until taken up
	leaderEpoch int32
	stateEpoch  int32
	// waiters are the parked fetches of the partition's members, oldest
	// first. When records may have become acquirable again (locks
	// expired, records released, acknowledgements that free room under
	// the in-flight limit) the oldest is signalled; a woken fetch that
	// acquires records signals the next: Kafka tries its delayed share
	// fetches in the order they were parked, so the member that waited
	// longest is offered the records first.
	waiters []chan struct{}
	// lockTimeouts counts the expiry passes that released records of the
	// partition (SharePartitionMetrics' AcquisitionLockTimeoutPerSec).
	lockTimeouts uint64
}

// watchLocked parks wake at the end of the partition's waiters, unless
// it is among them already (sp.mu held).
func (sp *sharePart) watchLocked(wake chan struct{}) {
	if !slices.Contains(sp.waiters, wake) {
		sp.waiters = append(sp.waiters, wake)
	}
}

func (sp *sharePart) unwatch(wake chan struct{}) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for i, w := range sp.waiters {
		if w == wake {
			sp.waiters = append(sp.waiters[:i], sp.waiters[i+1:]...)
			return
		}
	}
}

// wakeLocked signals the oldest parked fetch of the partition, without
// blocking, and takes it off the list (sp.mu held): what it waits for
// (records past the log end) is no longer all it could be handed.
func (sp *sharePart) wakeLocked() {
	if len(sp.waiters) == 0 {
		return
	}
	w := sp.waiters[0]
	sp.waiters = sp.waiters[1:]
	select {
	case w <- struct{}{}:
	default:
	}
}

func newShareManager(b *Broker) *shareManager {
	return &shareManager{b: b, parts: map[share.Key]*sharePart{}, sessions: map[shareSessionKey]*shareSession{},
		conns: map[*network.Conn]map[shareSessionKey]bool{}}
}

// shareEnabled is Kafka's gate for the share group APIs.
func (b *Broker) shareEnabled() bool {
	img := b.meta.Image()
	return img != nil && img.Features["share.version"] >= 1
}

// shareSettings are a group's share.* settings as a leader applies them.
type shareSettings struct {
	limits      sharepart.Limits
	autoReset   string
	isolation   string
	renewOK     bool
	lockTimeout int32
}

func (b *Broker) shareSettings(group string) shareSettings {
	st := shareSettings{autoReset: "latest", isolation: "read_uncommitted", renewOK: true}
	st.limits = sharepart.Limits{DeliveryLimit: 5, MaxInFlight: 2000, LockMs: 30000}
	if b.opts.Configs != nil {
		g := b.opts.Configs.EffectiveGroupConfig(b.meta.Image(), group)
		st.limits = sharepart.Limits{DeliveryLimit: int16(g.ShareDeliveryCountLimit), MaxInFlight: int64(g.SharePartitionMaxRecordLocks), LockMs: int64(g.ShareRecordLockDurationMs)}
		st.autoReset, st.isolation, st.renewOK = g.ShareAutoOffsetReset, g.ShareIsolationLevel, g.ShareRenewAcknowledgeEnable
	}
	st.lockTimeout = int32(st.limits.LockMs)
	return st
}

// part returns the share partition of key, creating it (not yet taken up).
func (m *shareManager) part(key share.Key, topic string) *sharePart {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp := m.parts[key]
	if sp == nil {
		sp = &sharePart{key: key, tp: replica.TopicPartition{Topic: topic, Partition: key.Partition}}
		m.parts[key] = sp
	}
	return sp
}

// takeUp loads sp's state when this broker leads its partition at a new
// epoch (or never loaded it). The caller holds sp.mu.
func (m *shareManager) takeUp(ctx context.Context, sp *sharePart, st shareSettings) (int16, string) {
	b := m.b
	latest := b.replicas.ListOffset(sp.tp, -1, -1, replica.ReadUncommitted, -1)
	if latest.Err != nil {
		return latest.Err.Code, ""
	}
	if sp.p != nil && sp.leaderEpoch == latest.LeaderEpoch {
		return 0, ""
	}
	state, err := (&sharePersister{b: b}).Read(ctx, sp.key, latest.LeaderEpoch)
	if err != nil {
		sp.p = nil
		return persisterErrorCode(err), fmt.Sprintf("reading the share state: %v", err)
	}
	start := state.StartOffset
	if start < 0 {
		start, err = m.resetOffset(sp.tp, st.autoReset, latest.Offset)
		if err != nil {
			return kerr.InvalidConfig.Code, err.Error()
		}
	}
	batches := make([]sharepart.StateBatch, 0, len(state.StateBatches))
	for _, sb := range state.StateBatches {
		batches = append(batches, sharepart.StateBatch{First: sb.FirstOffset, Last: sb.LastOffset, State: sharepart.State(sb.DeliveryState), Deliveries: sb.DeliveryCount})
	}
	p, err := sharepart.Restore(start, batches)
	if err != nil {
		return kerr.UnknownServerError.Code, err.Error()
	}
	if ls := b.replicas.ListOffset(sp.tp, -1, -2, replica.ReadUncommitted, -1); ls.Err == nil {
		p.MoveStart(ls.Offset)
	}
	sp.p, sp.leaderEpoch, sp.stateEpoch = p, latest.LeaderEpoch, state.StateEpoch
	return 0, ""
}

// resetOffset is share.auto.offset.reset's start: latest (the high
// watermark), earliest (the log start) or by_duration:<ISO-8601>.
func (m *shareManager) resetOffset(tp replica.TopicPartition, reset string, latest int64) (int64, error) {
	switch {
	case reset == "" || reset == "latest":
		return latest, nil
	case reset == "earliest":
		lo := m.b.replicas.ListOffset(tp, -1, -2, replica.ReadUncommitted, -1)
		if lo.Err != nil {
			return 0, lo.Err
		}
		return lo.Offset, nil
	case strings.HasPrefix(reset, "by_duration:"):
		d, err := parseISODuration(strings.TrimPrefix(reset, "by_duration:"))
		if err != nil {
			return 0, fmt.Errorf("share.auto.offset.reset %q: %w", reset, err)
		}
		lo := m.b.replicas.ListOffset(tp, -1, m.b.now().Add(-d).UnixMilli(), replica.ReadUncommitted, -1)
		if lo.Err != nil {
			return 0, lo.Err
		}
		if lo.Offset < 0 {
			return latest, nil
		}
		return lo.Offset, nil
	}
	return 0, fmt.Errorf("share.auto.offset.reset %q is not earliest, latest or by_duration:<duration>", reset)
}

// persisterErrorCode maps a share coordinator's answer to the partition
// error Kafka's SharePartition gives (fencing means another leader).
func persisterErrorCode(err error) int16 {
	ke, ok := err.(*kerr.Error)
	if !ok {
		return kerr.CoordinatorNotAvailable.Code
	}
	switch ke {
	case kerr.FencedLeaderEpoch, kerr.FencedStateEpoch:
		return kerr.NotLeaderForPartition.Code
	case kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.GroupIDNotFound, kerr.UnknownTopicOrPartition:
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// persist writes sp's changes to the share coordinator. The caller holds
// sp.mu.
func (m *shareManager) persist(ctx context.Context, sp *sharePart) error {
	changes := sp.p.TakeChanges()
	if len(changes) == 0 {
		return nil
	}
	part := kmsg.WriteShareGroupStateRequestTopicPartition{StateEpoch: sp.stateEpoch, LeaderEpoch: sp.leaderEpoch,
		StartOffset: sp.p.Start(), DeliveryCompleteCount: int32(sp.p.DeliveryComplete())}
	for _, c := range changes {
		part.StateBatches = append(part.StateBatches, kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{
			FirstOffset: c.First, LastOffset: c.Last, DeliveryState: int8(c.State), DeliveryCount: c.Deliveries})
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := (&sharePersister{b: m.b}).Write(wctx, sp.key, part)
	if err != nil {
		m.b.log.Warn("writing share state failed", "key", sp.key.CoordinatorKey(), "err", err)
		if err == kerr.FencedStateEpoch || err == kerr.FencedLeaderEpoch {
			// Another leader, or an AlterShareGroupOffsets, owns the
			// state now: take it up again at the next fetch.
			sp.p = nil
		}
	}
	return err
}

// expireLocks releases the records whose locks expired and writes the
// changes. It looks at every share partition at least every 100ms and,
// in between, at the earliest lock deadline it saw: a lock (at least the
// 1 s group.share.min.record.lock.duration.ms allows) is seen by a pass
// well before it expires, so records come back when their lock ends, not
// up to a tick later.
func (m *shareManager) expireLocks(ctx context.Context) {
	const every = 100 * time.Millisecond
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.mu.Lock()
		parts := make([]*sharePart, 0, len(m.parts))
		for _, sp := range m.parts {
			parts = append(parts, sp)
		}
		m.mu.Unlock()
		now := m.b.now().UnixMilli()
		next := now + every.Milliseconds()
		for _, sp := range parts {
			sp.mu.Lock()
			if sp.p != nil && sp.p.NextDeadline() > 0 && sp.p.NextDeadline() <= now {
				st := m.b.shareSettings(sp.key.Group)
				if sp.p.Expire(now, st.limits) {
					sp.lockTimeouts++
					sp.wakeLocked()
					_ = m.persist(ctx, sp)
				}
			}
			if sp.p != nil && sp.p.NextDeadline() > 0 {
				next = min(next, sp.p.NextDeadline())
			}
			sp.mu.Unlock()
		}
		t.Reset(max(time.Duration(next-m.b.now().UnixMilli())*time.Millisecond, time.Millisecond))
	}
}

// --- sessions -------------------------------------------------------------------

// openSession applies a ShareFetch's session epoch: the session, or the
// top-level error. A session opened on r's connection closes with it.
func (m *shareManager) openSession(r *network.Request, group, member string, epoch int32, topics []kmsg.ShareFetchRequestTopic, forgotten []kmsg.ShareFetchRequestForgottenTopicsData, maxSessions int32) (*shareSession, int16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := shareSessionKey{group, member}
	s := m.sessions[k]
	switch {
	case epoch == 0:
		if s == nil && int32(len(m.sessions)) >= maxSessions {
			return nil, kerr.ShareSessionLimitReached.Code
		}
		if s != nil && m.conns[s.conn] != nil {
			delete(m.conns[s.conn], k)
		}
		s = &shareSession{conn: r.Conn(), epoch: 1, parts: map[sharePartitionID]bool{}}
		m.sessions[k] = s
		if m.conns[s.conn] == nil {
			m.conns[s.conn] = map[shareSessionKey]bool{}
			done, conn := r.Done(), s.conn
			go func() {
				<-done
				m.connectionClosed(conn)
			}()
		}
		m.conns[s.conn][k] = true
	case s == nil:
		return nil, kerr.ShareSessionNotFound.Code
	case epoch == -1:
		return s, 0
	case epoch != s.epoch:
		return nil, kerr.InvalidShareSessionEpoch.Code
	default:
		s.epoch = nextShareEpoch(s.epoch)
	}
	for _, t := range topics {
		for _, p := range t.Partitions {
			id := sharePartitionID{t.TopicID, p.Partition}
			if !s.parts[id] {
				s.parts[id] = true
				s.order = append(s.order, id)
			}
		}
	}
	for _, f := range forgotten {
		for _, p := range f.Partitions {
			delete(s.parts, sharePartitionID{f.TopicID, p})
		}
	}
	kept := s.order[:0]
	for _, id := range s.order {
		if s.parts[id] {
			kept = append(kept, id)
		}
	}
	s.order = kept
	return s, 0
}

func nextShareEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// ackSession applies a ShareAcknowledge's session epoch.
func (m *shareManager) ackSession(group, member string, epoch int32) (*shareSession, int16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[shareSessionKey{group, member}]
	switch {
	case epoch == 0:
		return nil, kerr.InvalidShareSessionEpoch.Code
	case s == nil:
		return nil, kerr.ShareSessionNotFound.Code
	case epoch == -1:
		return s, 0
	case epoch != s.epoch:
		return nil, kerr.InvalidShareSessionEpoch.Code
	}
	s.epoch = nextShareEpoch(s.epoch)
	return s, 0
}

// connectionClosed closes the sessions conn opened (that it still holds).
func (m *shareManager) connectionClosed(conn *network.Conn) {
	m.mu.Lock()
	keys := m.conns[conn]
	delete(m.conns, conn)
	var closing []shareSessionKey
	for k := range keys {
		if s := m.sessions[k]; s != nil && s.conn == conn {
			closing = append(closing, k)
		}
	}
	m.mu.Unlock()
	for _, k := range closing {
		m.mu.Lock()
		s := m.sessions[k]
		m.mu.Unlock()
		if s != nil && s.conn == conn {
			m.closeSession(context.Background(), k.group, k.member, s)
		}
	}
}

// closeSession removes the session and releases the member's records in
// its partitions. When the group has no session left on this broker, its
// share partitions are forgotten (Kafka's onGroupEmpty): the next fetch
// takes them up again from the share coordinator, seeing what an
// AlterShareGroupOffsets or DeleteShareGroupOffsets did meanwhile.
func (m *shareManager) closeSession(ctx context.Context, group, member string, s *shareSession) {
	k := shareSessionKey{group, member}
	m.mu.Lock()
	if m.sessions[k] == s {
		delete(m.sessions, k)
	}
	if m.conns[s.conn] != nil {
		delete(m.conns[s.conn], k)
	}
	var parts []*sharePart
	for _, id := range s.order {
		if sp := m.parts[share.Key{Group: group, TopicID: id.topic, Partition: id.partition}]; sp != nil {
			parts = append(parts, sp)
		}
	}
	m.mu.Unlock()
	st := m.b.shareSettings(group)
	for _, sp := range parts {
		sp.mu.Lock()
		if sp.p != nil && sp.p.ReleaseMember(member, st.limits) {
			sp.wakeLocked()
			_ = m.persist(ctx, sp)
		}
		sp.mu.Unlock()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for sk := range m.sessions {
		if sk.group == group {
			return
		}
	}
	for key := range m.parts {
		if key.Group == group {
			delete(m.parts, key)
		}
	}
}

// --- acknowledgements -----------------------------------------------------------

// shareAck is one partition's acknowledgement batches, as either request
// carries them.
type shareAck struct {
	id      sharePartitionID
	batches []sharepart.AckBatch
}

// validateAcks is Kafka's validateAcknowledgementBatches: the error code
// for a partition's batches, or 0.
func validateAcks(batches []sharepart.AckBatch, version int16, renew bool) int16 {
	prevLast := int64(-1)
	maxType := sharepart.AckReject
	if version >= 2 {
		maxType = sharepart.AckRenew
	}
	for _, a := range batches {
		switch {
		case a.First > a.Last, a.First < prevLast, len(a.Types) == 0,
			len(a.Types) > 1 && int64(len(a.Types)) != a.Last-a.First+1:
			return kerr.InvalidRequest.Code
		}
		for _, t := range a.Types {
			if t < 0 || t > maxType || t == sharepart.AckRenew && !renew {
				return kerr.InvalidRequest.Code
			}
		}
		prevLast = a.Last
	}
	return 0
}

// acknowledge applies one partition's acknowledgements and writes them.
func (m *shareManager) acknowledge(ctx context.Context, r *network.Request, group, member string, a shareAck, version int16, renew bool) (int16, string) {
	if code := validateAcks(a.batches, version, renew); code != 0 {
		return code, ""
	}
	b := m.b
	t := b.meta.Image().TopicByID(protocol.UUID(a.id.topic))
	if t == nil {
		return kerr.UnknownTopicID.Code, ""
	}
	if !b.can(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Name) {
		return kerr.TopicAuthorizationFailed.Code, ""
	}
	if len(a.batches) == 0 {
		return 0, ""
	}
	m.mu.Lock()
	sp := m.parts[share.Key{Group: group, TopicID: a.id.topic, Partition: a.id.partition}]
	m.mu.Unlock()
	if sp == nil {
		return kerr.UnknownTopicOrPartition.Code, ""
	}
	st := b.shareSettings(group)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.p == nil {
		return kerr.UnknownTopicOrPartition.Code, ""
	}
	for _, batch := range a.batches {
		if !st.renewOK && containsRenew(batch.Types) {
			return kerr.InvalidRecordState.Code, "RENEW acknowledgements are disabled for the group (share.renew.acknowledge.enable=false)."
		}
	}
	if code, msg := sp.p.Acknowledge(member, a.batches, b.now().UnixMilli(), st.limits); code != 0 {
		return code, msg
	}
	m.countAcknowledged(a.batches)
	sp.wakeLocked()
	if err := m.persist(ctx, sp); err != nil {
		return persisterErrorCode(err), err.Error()
	}
	return 0, ""
}

func containsRenew(ts []sharepart.AckType) bool {
	for _, t := range ts {
		if t == sharepart.AckRenew {
			return true
		}
	}
	return false
}

func ackTypes(in []int8) []sharepart.AckType {
	out := make([]sharepart.AckType, len(in))
	for i, t := range in {
		out[i] = sharepart.AckType(t)
	}
	return out
}

// validShareMember is KafkaApis.isMemberIdValid.
func validShareMember(id *string) bool { return id != nil && *id != "" && len(*id) <= 36 }

// shareRefusal is the top-level error of a share group request, in
// Kafka's order of checks, or 0: share groups off, no group, the group not
// readable, a bad member id.
func (b *Broker) shareRefusal(r *network.Request, group, member *string) int16 {
	switch {
	case !b.shareEnabled():
		return kerr.UnsupportedVersion.Code
	case group == nil:
		return kerr.InvalidRequest.Code
	case !b.can(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, *group):
		return kerr.GroupAuthorizationFailed.Code
	case !validShareMember(member):
		return kerr.InvalidRequest.Code
	}
	return 0
}

// --- ShareFetch -----------------------------------------------------------------

func (b *Broker) handleShareFetch(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	fail := func(code int16) {
		resp.ErrorCode = code
		r.Respond(resp)
	}
	if code := b.shareRefusal(r, req.GroupID, req.MemberID); code != 0 {
		fail(code)
		return
	}
	if req.IsRenewAck && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0) {
		fail(kerr.InvalidRequest.Code)
		return
	}
	if req.ShareSessionEpoch == 0 {
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if len(p.AcknowledgementBatches) > 0 {
					fail(kerr.InvalidRequest.Code)
					return
				}
			}
		}
	}
	r.GoAsync(func() { r.Respond(b.shareParts.fetch(ctx, r, req)) })
}

// ShareFetch's acquire modes (v2+).
const (
	shareAcquireBatchOptimized int8 = 0
	shareAcquireRecordLimit    int8 = 1
)

func (m *shareManager) fetch(ctx context.Context, r *network.Request, req *kmsg.ShareFetchRequest) kmsg.Response {
	b := m.b
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	if req.ShareAcquireMode != shareAcquireBatchOptimized && req.ShareAcquireMode != shareAcquireRecordLimit {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	group, member := *req.GroupID, *req.MemberID
	maxSessions := int32(2000)
	if b.opts.MaxShareSessions > 0 {
		maxSessions = b.opts.MaxShareSessions
	}
	s, code := m.openSession(r, group, member, req.ShareSessionEpoch, req.Topics, req.ForgottenTopicsData, maxSessions)
	if code != 0 {
		if code == kerr.ShareSessionLimitReached.Code && req.MaxWaitMillis > 0 {
			// Kafka answers a full cache after the fetch's wait.
			select {
			case <-time.After(time.Duration(req.MaxWaitMillis) * time.Millisecond):
			case <-ctx.Done():
			}
		}
		resp.ErrorCode = code
		return resp
	}
	st := b.shareSettings(group)
	resp.AcquisitionLockTimeoutMillis = st.lockTimeout
	out := newShareFetchOut(resp)

	// Acknowledgements first: what they release may be acquired below.
	ackTopics := map[[16]byte]bool{}
	defer b.countRequestTopics(ackTopics, b.replicas.CountShareAcknowledgement)
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if len(p.AcknowledgementBatches) == 0 {
				continue
			}
			a := shareAck{id: sharePartitionID{t.TopicID, p.Partition}}
			for _, ab := range p.AcknowledgementBatches {
				a.batches = append(a.batches, sharepart.AckBatch{First: ab.FirstOffset, Last: ab.LastOffset, Types: ackTypes(ab.AcknowledgeTypes)})
			}
			code, msg := m.acknowledge(ctx, r, group, member, a, req.Version, req.IsRenewAck)
			ackTopics[t.TopicID] = ackTopics[t.TopicID] || code != 0
			rp := out.partition(a.id)
			rp.AcknowledgeErrorCode = code
			if msg != "" {
				rp.AcknowledgeErrorMessage = kmsg.StringPtr(msg)
			}
		}
	}
	if req.ShareSessionEpoch == -1 {
		m.closeSession(ctx, group, member, s)
		return resp
	}
	if req.IsRenewAck || req.MaxRecords == 0 && req.Version >= 1 || req.MaxBytes == 0 {
		return resp
	}
	m.mu.Lock()
	ids := append([]sharePartitionID(nil), s.order...)
	m.mu.Unlock()
	m.acquire(ctx, r, req, group, member, ids, st, out)
	b.countRequestTopics(shareFetchOutcomes(resp, ids), b.replicas.CountShareFetch)
	return resp
}

// shareFetchOut builds a ShareFetch response partition by partition.
type shareFetchOut struct {
	resp  *kmsg.ShareFetchResponse
	index map[sharePartitionID][2]int
}

func newShareFetchOut(resp *kmsg.ShareFetchResponse) *shareFetchOut {
	return &shareFetchOut{resp: resp, index: map[sharePartitionID][2]int{}}
}

func (o *shareFetchOut) partition(id sharePartitionID) *kmsg.ShareFetchResponseTopicPartition {
	if at, ok := o.index[id]; ok {
		return &o.resp.Topics[at[0]].Partitions[at[1]]
	}
	ti := -1
	for i := range o.resp.Topics {
		if o.resp.Topics[i].TopicID == id.topic {
			ti = i
		}
	}
	if ti < 0 {
		o.resp.Topics = append(o.resp.Topics, kmsg.ShareFetchResponseTopic{TopicID: id.topic})
		ti = len(o.resp.Topics) - 1
	}
	rp := kmsg.NewShareFetchResponseTopicPartition()
	rp.Partition = id.partition
	rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
	rp.Records = []byte{}
	rp.AcquiredRecords = []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{}
	o.resp.Topics[ti].Partitions = append(o.resp.Topics[ti].Partitions, rp)
	o.index[id] = [2]int{ti, len(o.resp.Topics[ti].Partitions) - 1}
	return &o.resp.Topics[ti].Partitions[len(o.resp.Topics[ti].Partitions)-1]
}

// acquire reads and acquires records of the session's partitions for
// member. A read that waits for new records is abandoned, and the
// partitions looked at again, when one of them signals that records may
// be acquirable below the log end (sharePart.wakeLocked).
func (m *shareManager) acquire(ctx context.Context, r *network.Request, req *kmsg.ShareFetchRequest, group, member string, ids []sharePartitionID, st shareSettings, out *shareFetchOut) {
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	wake := make(chan struct{}, 1)
	watched := map[*sharePart]bool{}
	defer func() {
		for sp := range watched {
			sp.unwatch(wake)
		}
	}()
	woken := false
	for {
		parts, got := m.read(ctx, r, req, group, member, ids, st, out, time.Until(deadline), wake)
		for _, sp := range parts {
			watched[sp] = true
		}
		switch {
		case got == nil && parts != nil && ctx.Err() == nil:
			woken = true
			continue // look again, with what is left of the wait
		case got != nil:
			taken, failed := m.take(member, req, parts, got, st, out, woken)
			if taken == 0 && !failed && time.Now().Before(deadline) && ctx.Err() == nil {
				// Other members took what came: wait on, in the
				// place this fetch holds among the waiters, as Kafka
				// keeps a delayed share fetch that acquired nothing.
				continue
			}
		}
		return
	}
}

// read selects the partitions that can hand out records, has wake
// signalled by them (the caller takes it off them when the request is
// done), parks a read of them for up to wait, and returns them with what
// was read; or them and nil when wake was signalled first (their
// abandoned read completes in the purgatory later, unread); or nil, nil
// when there was nothing to read or ctx ended.
func (m *shareManager) read(ctx context.Context, r *network.Request, req *kmsg.ShareFetchRequest, group, member string, ids []sharePartitionID, st shareSettings, out *shareFetchOut, wait time.Duration, wake chan struct{}) ([]*sharePart, []replica.FetchEntry) {
	b := m.b
	img := b.meta.Image()
	var entries []replica.FetchEntry
	var parts []*sharePart
	select { // a signal left from an earlier pass
	case <-wake:
	default:
	}
	for _, id := range ids {
		t := img.TopicByID(protocol.UUID(id.topic))
		fail := func(code int16, msg string) {
			rp := out.partition(id)
			rp.ErrorCode = code
			if msg != "" {
				rp.ErrorMessage = kmsg.StringPtr(msg)
			}
		}
		switch {
		case t == nil:
			fail(kerr.UnknownTopicID.Code, "")
			continue
		case !b.can(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Name):
			fail(kerr.TopicAuthorizationFailed.Code, "")
			continue
		case id.partition < 0 || int(id.partition) >= t.Partitions.Len():
			fail(kerr.UnknownTopicOrPartition.Code, "")
			continue
		}
		sp := m.part(share.Key{Group: group, TopicID: id.topic, Partition: id.partition}, t.Name)
		if !b.replicas.Leads(sp.tp) {
			rp := out.partition(id)
			rp.ErrorCode = kerr.NotLeaderForPartition.Code
			pt := *t.Partitions.At(int(id.partition))
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = pt.Leader, pt.LeaderEpoch
			continue
		}
		sp.mu.Lock()
		code, msg := m.takeUp(ctx, sp, st)
		next, can := int64(0), false
		if code == 0 {
			next, can = sp.p.NextFetchOffset(), sp.p.CanAcquire(st.limits)
			if can {
				sp.watchLocked(wake)
			}
		}
		sp.mu.Unlock()
		if code != 0 {
			fail(code, msg)
			continue
		}
		if !can {
			continue
		}
		entries = append(entries, replica.FetchEntry{TopicPartition: sp.tp, FetchOffset: next, MaxBytes: req.MaxBytes, CurrentLeaderEpoch: -1, LogStartOffset: -1})
		parts = append(parts, sp)
	}
	if len(entries) == 0 {
		return nil, nil
	}
	done := make(chan []replica.FetchEntry, 1)
	isolation := replica.ReadUncommitted
	if st.isolation == "read_committed" {
		isolation = replica.ReadCommitted
	}
	b.replicas.Fetch(replica.FetchParams{ReplicaID: -1, ReplicaEpoch: -1, MaxWait: max(wait, 0),
		MinBytes: max(req.MinBytes, 1), MaxBytes: req.MaxBytes, Isolation: isolation}, entries, shareFetchDone(done))
	select {
	case got := <-done: // read at once: taken even if a wake came too
		return parts, got
	default:
	}
	select {
	case got := <-done:
		return parts, got
	case <-wake:
		return parts, nil
	case <-ctx.Done():
		return nil, nil
	}
}

// take acquires for member what read got of parts, writes the acquired
// records into out, and returns how many it acquired and whether a
// partition's read failed (its error is in out). A fetch woken by a
// partition that acquires records from it passes the signal on to the
// partition's next waiter (there may be more than it took).
func (m *shareManager) take(member string, req *kmsg.ShareFetchRequest, parts []*sharePart, got []replica.FetchEntry, st shareSettings, out *shareFetchOut, woken bool) (taken int64, failed bool) {
	b := m.b
	left := int64(req.MaxRecords)
	if req.Version == 0 || left <= 0 {
		left = 500
	}
	now := b.now().UnixMilli()
	for i := range got {
		e := &got[i]
		sp := parts[i]
		id := sharePartitionID{sp.key.TopicID, sp.key.Partition}
		data, err := copyFetched(e.Result.Records)
		if e.Result.Err != nil || err != nil {
			rp := out.partition(id)
			if e.Result.Err != nil {
				rp.ErrorCode = e.Result.Err.Code
			} else {
				rp.ErrorCode = kerr.KafkaStorageError.Code
			}
			failed = true
			continue
		}
		if len(data) == 0 || left <= 0 {
			continue
		}
		batches := batchBounds(data)
		sp.mu.Lock()
		var acquired []sharepart.AcquiredRecords
		if sp.p != nil {
			if req.Version >= 2 && req.ShareAcquireMode == shareAcquireRecordLimit {
				acquired = sp.p.AcquireExactly(member, batches, left, now, st.limits)
			} else {
				acquired = sp.p.Acquire(member, batches, left, now, st.limits)
			}
			// read_committed: an aborted transaction's records are
			// archived as they are acquired, never delivered.
			for _, ab := range abortedBatches(data, e.Result.AbortedTransactions) {
				acquired = sp.p.ArchiveAcquired(member, ab.First, ab.Last, acquired)
			}
			if woken && len(acquired) > 0 {
				sp.wakeLocked()
			}
		}
		sp.mu.Unlock()
		if len(acquired) == 0 {
			continue
		}
		rp := out.partition(id)
		for _, a := range acquired {
			rp.AcquiredRecords = append(rp.AcquiredRecords, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{FirstOffset: a.First, LastOffset: a.Last, DeliveryCount: a.Deliveries})
			left -= a.Last - a.First + 1
			taken += a.Last - a.First + 1
		}
		rp.Records = sliceBatches(data, acquired[0].First, acquired[len(acquired)-1].Last)
	}
	return taken, failed
}

// shareFetchDone hands a fetch's entries to a channel.
type shareFetchDone chan []replica.FetchEntry

func (d shareFetchDone) FetchCompleted(entries []replica.FetchEntry) { d <- entries }

// copyFetched reads a fetched range into memory and releases it.
func copyFetched(fr vfs.FileRange) ([]byte, error) {
	defer fr.Release()
	if fr.Size == 0 {
		return nil, nil
	}
	buf := make([]byte, fr.Size)
	n, err := fr.File.ReadAt(buf, fr.Pos)
	if n < len(buf) {
		return nil, fmt.Errorf("reading %d fetched bytes: %w", fr.Size, err)
	}
	return buf, nil
}

// batchBounds lists the offsets of each whole batch in data.
func batchBounds(data []byte) []sharepart.Batch {
	var out []sharepart.Batch
	for {
		_, rest, h, err := protocol.NextBatch(data)
		if err != nil {
			return out
		}
		out = append(out, sharepart.Batch{First: h.BaseOffset, Last: h.LastOffset()})
		data = rest
	}
}

// abortedBatches are the offsets of the batches of data that belong to the
// aborted transactions (a read_committed fetch's list): a producer's
// transactional batches from the transaction's first offset up to its abort
// marker, which is itself left to the client (a gap it acknowledges).
func abortedBatches(data []byte, aborted []replica.AbortedTransaction) []sharepart.Batch {
	if len(aborted) == 0 {
		return nil
	}
	// As a consumer does: each aborted transaction opens its producer's
	// abort once the read reaches its first offset, and the producer's
	// marker closes it.
	pending := slices.Clone(aborted)
	slices.SortFunc(pending, func(a, b replica.AbortedTransaction) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	open := map[int64]bool{}
	var out []sharepart.Batch
	for {
		_, rest, h, err := protocol.NextBatch(data)
		if err != nil {
			return out
		}
		for len(pending) > 0 && pending[0].FirstOffset <= h.LastOffset() {
			open[pending[0].ProducerID] = true
			pending = pending[1:]
		}
		switch {
		case h.IsControl():
			delete(open, h.ProducerID)
		case h.IsTransactional() && open[h.ProducerID]:
			out = append(out, sharepart.Batch{First: h.BaseOffset, Last: h.LastOffset()})
		}
		data = rest
	}
}

// sliceBatches keeps the whole batches of data that hold offsets in
// [first, last].
func sliceBatches(data []byte, first, last int64) []byte {
	start, end := -1, 0
	for pos := 0; ; {
		batch, _, h, err := protocol.NextBatch(data[pos:])
		if err != nil {
			break
		}
		if h.LastOffset() >= first && h.BaseOffset <= last {
			if start < 0 {
				start = pos
			}
			end = pos + len(batch)
		}
		pos += len(batch)
	}
	if start < 0 {
		return []byte{}
	}
	return data[start:end]
}

// --- ShareAcknowledge -----------------------------------------------------------

func (b *Broker) handleShareAcknowledge(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	if code := b.shareRefusal(r, req.GroupID, req.MemberID); code != 0 {
		resp.ErrorCode = code
		r.Respond(resp)
		return
	}
	r.GoAsync(func() { r.Respond(b.shareParts.acknowledgeRequest(ctx, r, req)) })
}

func (m *shareManager) acknowledgeRequest(ctx context.Context, r *network.Request, req *kmsg.ShareAcknowledgeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	group, member := *req.GroupID, *req.MemberID
	s, code := m.ackSession(group, member, req.ShareSessionEpoch)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	resp.AcquisitionLockTimeoutMillis = m.b.shareSettings(group).lockTimeout
	ackTopics := map[[16]byte]bool{}
	defer m.b.countRequestTopics(ackTopics, m.b.replicas.CountShareAcknowledgement)
	for _, t := range req.Topics {
		rt := kmsg.ShareAcknowledgeResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			a := shareAck{id: sharePartitionID{t.TopicID, p.Partition}}
			for _, ab := range p.AcknowledgementBatches {
				a.batches = append(a.batches, sharepart.AckBatch{First: ab.FirstOffset, Last: ab.LastOffset, Types: ackTypes(ab.AcknowledgeTypes)})
			}
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			code, msg := m.acknowledge(ctx, r, group, member, a, req.Version, req.IsRenewAck)
			ackTopics[t.TopicID] = ackTopics[t.TopicID] || code != 0
			rp.ErrorCode = code
			if msg != "" {
				rp.ErrorMessage = kmsg.StringPtr(msg)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.ShareSessionEpoch == -1 {
		m.closeSession(ctx, group, member, s)
	}
	return resp
}

func init() {
	register(api{
		key: kmsg.ShareFetch, min: 1, max: 2,
		listeners:    clientListeners,
		authorizedAs: "READ on the group, READ on each topic",
		errorAnswer: errorAnswerOf(func(_ *kmsg.ShareFetchRequest, out *kmsg.ShareFetchResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		handle: (*Broker).handleShareFetch,
	})
	register(api{
		key: kmsg.ShareAcknowledge, min: 1, max: 2,
		listeners:    clientListeners,
		authorizedAs: "READ on the group, READ on each topic",
		errorAnswer: errorAnswerOf(func(_ *kmsg.ShareAcknowledgeRequest, out *kmsg.ShareAcknowledgeResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		handle: (*Broker).handleShareAcknowledge,
	})
}

// parseISODuration parses the ISO-8601 durations Java's Duration.parse
// accepts (PnDTnHnMn.nS, each part optional, a leading sign not allowed
// here: share.auto.offset.reset refuses negative durations).
func parseISODuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not an ISO-8601 duration (PnDTnHnMn.nS)", s)
	if len(s) < 3 || (s[0] != 'P' && s[0] != 'p') {
		return 0, bad
	}
	s = s[1:]
	var d time.Duration
	inTime := false
	for len(s) > 0 {
		if s[0] == 'T' || s[0] == 't' {
			inTime = true
			s = s[1:]
			continue
		}
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		if i == 0 || i == len(s) {
			return 0, bad
		}
		var v float64
		if _, err := fmt.Sscanf(s[:i], "%g", &v); err != nil {
			return 0, bad
		}
		unit := s[i]
		s = s[i+1:]
		switch {
		case !inTime && (unit == 'D' || unit == 'd'):
			d += time.Duration(v * float64(24*time.Hour))
		case inTime && (unit == 'H' || unit == 'h'):
			d += time.Duration(v * float64(time.Hour))
		case inTime && (unit == 'M' || unit == 'm'):
			d += time.Duration(v * float64(time.Minute))
		case inTime && (unit == 'S' || unit == 's'):
			d += time.Duration(v * float64(time.Second))
		default:
			return 0, bad
		}
	}
	return d, nil
}
