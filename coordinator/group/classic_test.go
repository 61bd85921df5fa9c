package group

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func subscription(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 1
	m.Topics = topics
	return m.AppendTo(nil)
}

func joinReq(group, member string, protocols ...string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 9
	r.Group = group
	r.MemberID = member
	r.SessionTimeoutMillis = 10000
	r.RebalanceTimeoutMillis = 30000
	r.ProtocolType = "consumer"
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	for _, p := range protocols {
		r.Protocols = append(r.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: subscription("foo")})
	}
	return r
}

func async[T any](f func() T) chan T {
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	return ch
}

func recv[T any](t testing.TB, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for a response")
	}
	var zero T
	return zero
}

func notYet[T any](t *testing.T, ch chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("answered too early: %+v", v)
	case <-time.After(30 * time.Millisecond):
	}
}

func wantCode(t testing.TB, what string, got int16, want *kerr.Error) {
	t.Helper()
	w := int16(0)
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

var client = Client{ID: "test-client", Host: "/127.0.0.1"}

// joinNew runs the KIP-394 two-step join and returns the parked second
// join.
func (h *harness) joinNew(req *kmsg.JoinGroupRequest) (string, chan *kmsg.JoinGroupResponse) {
	h.t.Helper()
	r := h.c.JoinGroup(context.Background(), client, req)
	wantCode(h.t, "first join", r.ErrorCode, kerr.MemberIDRequired)
	if r.MemberID == "" {
		h.t.Fatal("MEMBER_ID_REQUIRED without a member id")
	}
	req2 := *req
	req2.MemberID = r.MemberID
	return r.MemberID, async(func() *kmsg.JoinGroupResponse { return h.c.JoinGroup(context.Background(), client, &req2) })
}

func (h *harness) sync(group, member string, gen int32, assignments map[string][]byte) chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = group, member, gen
	req.ProtocolType = strPtr("consumer")
	for id, a := range assignments {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a})
	}
	return async(func() *kmsg.SyncGroupResponse { return h.c.SyncGroup(context.Background(), req) })
}

func (h *harness) heartbeat(group, member string, gen int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = group, member, gen
	return h.c.Heartbeat(context.Background(), req).ErrorCode
}

func (h *harness) classicState(group string) string {
	resp := h.c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{group}})
	return resp.Groups[0].State
}

func TestClassicEagerRebalance(t *testing.T) {
	h := newHarness(t, nil)
	const g = "eager"
	a, aJoin := h.joinNew(joinReq(g, ""))
	ja := recv(t, aJoin)
	wantCode(t, "join a", ja.ErrorCode, nil)
	if ja.Generation != 1 || ja.LeaderID != a || len(ja.Members) != 1 || *ja.Protocol != "range" {
		t.Fatalf("join a: %+v", ja)
	}
	if st := h.classicState(g); st != "CompletingRebalance" {
		t.Fatalf("state %s", st)
	}
	sa := recv(t, h.sync(g, a, 1, map[string][]byte{a: []byte("A1")}))
	wantCode(t, "sync a", sa.ErrorCode, nil)
	if string(sa.MemberAssignment) != "A1" {
		t.Fatalf("assignment %q", sa.MemberAssignment)
	}
	if st := h.classicState(g); st != "Stable" {
		t.Fatalf("state %s", st)
	}

	b, bJoin := h.joinNew(joinReq(g, ""))
	h.waitMembers(g, 2)
	notYet(t, bJoin)
	if st := h.classicState(g); st != "PreparingRebalance" {
		t.Fatalf("state %s", st)
	}
	wantCode(t, "heartbeat a during rebalance", h.heartbeat(g, a, 1), kerr.RebalanceInProgress)
	aJoin2 := async(func() *kmsg.JoinGroupResponse { return h.c.JoinGroup(context.Background(), client, joinReq(g, a)) })
	ja2, jb := recv(t, aJoin2), recv(t, bJoin)
	wantCode(t, "rejoin a", ja2.ErrorCode, nil)
	wantCode(t, "join b", jb.ErrorCode, nil)
	if ja2.Generation != 2 || jb.Generation != 2 || ja2.LeaderID != a || len(ja2.Members) != 2 || len(jb.Members) != 0 {
		t.Fatalf("generation 2: a=%+v b=%+v", ja2, jb)
	}
	// The follower's sync waits for the leader's.
	sbCh := h.sync(g, b, 2, nil)
	notYet(t, sbCh)
	wantCode(t, "heartbeat b while completing", h.heartbeat(g, b, 2), nil)
	sa2 := recv(t, h.sync(g, a, 2, map[string][]byte{a: []byte("A2")}))
	sb := recv(t, sbCh)
	wantCode(t, "sync a", sa2.ErrorCode, nil)
	wantCode(t, "sync b", sb.ErrorCode, nil)
	if string(sa2.MemberAssignment) != "A2" || sb.MemberAssignment == nil || len(sb.MemberAssignment) != 0 {
		t.Fatalf("assignments a=%q b=%v (must be empty, not null)", sa2.MemberAssignment, sb.MemberAssignment)
	}
	wantCode(t, "stale generation", h.heartbeat(g, a, 1), kerr.IllegalGeneration)
	wantCode(t, "unknown member", h.heartbeat(g, "nobody", 2), kerr.UnknownMemberID)

	// b leaves; a's heartbeat learns of the rebalance.
	lr := h.c.LeaveGroup(context.Background(), &kmsg.LeaveGroupRequest{Version: 5, Group: g, Members: []kmsg.LeaveGroupRequestMember{{MemberID: b}, {MemberID: "ghost"}}})
	wantCode(t, "leave b", lr.Members[0].ErrorCode, nil)
	wantCode(t, "leave ghost", lr.Members[1].ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "heartbeat after leave", h.heartbeat(g, a, 2), kerr.RebalanceInProgress)
	ja3 := recv(t, async(func() *kmsg.JoinGroupResponse { return h.c.JoinGroup(context.Background(), client, joinReq(g, a)) }))
	if ja3.Generation != 3 || len(ja3.Members) != 1 {
		t.Fatalf("generation 3: %+v", ja3)
	}
}

func TestClassicSyncErrors(t *testing.T) {
	h := newHarness(t, nil)
	const g = "sync-errors"
	a, aJoin := h.joinNew(joinReq(g, ""))
	recv(t, aJoin)
	req := func(member string, gen int32, ptype, proto *string) int16 {
		r := kmsg.NewPtrSyncGroupRequest()
		r.Version = 5
		r.Group, r.MemberID, r.Generation, r.ProtocolType, r.Protocol = g, member, gen, ptype, proto
		ch := async(func() *kmsg.SyncGroupResponse { return h.c.SyncGroup(context.Background(), r) })
		return recv(t, ch).ErrorCode
	}
	wantCode(t, "unknown member", req("x", 1, nil, nil), kerr.UnknownMemberID)
	wantCode(t, "bad generation", req(a, 7, nil, nil), kerr.IllegalGeneration)
	wantCode(t, "bad protocol type", req(a, 1, strPtr("connect"), nil), kerr.InconsistentGroupProtocol)
	wantCode(t, "bad protocol name", req(a, 1, nil, strPtr("roundrobin")), kerr.InconsistentGroupProtocol)
	wantCode(t, "no group", recv(t, async(func() *kmsg.SyncGroupResponse {
		return h.c.SyncGroup(context.Background(), &kmsg.SyncGroupRequest{Version: 5, Group: "none", MemberID: "m"})
	})).ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "leader sync", req(a, 1, strPtr("consumer"), strPtr("range")), nil)
}

func TestClassicJoinErrors(t *testing.T) {
	h := newHarness(t, nil)
	const g = "join-errors"
	a, aJoin := h.joinNew(joinReq(g, ""))
	recv(t, aJoin)
	recv(t, h.sync(g, a, 1, nil))

	tooShort := joinReq(g, "")
	tooShort.SessionTimeoutMillis = 10
	other := joinReq(g, "")
	other.ProtocolType = "connect"
	noCommon := joinReq(g, "", "roundrobin")
	empty := joinReq("", "")
	tests := []struct {
		name string
		req  *kmsg.JoinGroupRequest
		want *kerr.Error
	}{
		{"session timeout below minimum", tooShort, kerr.InvalidSessionTimeout},
		{"unknown member id", joinReq(g, "who"), kerr.UnknownMemberID},
		{"protocol type mismatch", other, kerr.InconsistentGroupProtocol},
		{"no common protocol", noCommon, kerr.InconsistentGroupProtocol},
		{"empty group id", empty, kerr.InvalidGroupID},
		{"unknown member of unknown group", joinReq("nope", "who"), kerr.UnknownMemberID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.c.JoinGroup(context.Background(), client, tc.req)
			wantCode(t, tc.name, r.ErrorCode, tc.want)
			if r.Generation != -1 || r.Members == nil {
				t.Fatalf("error response must have generation -1 and no members: %+v", r)
			}
		})
	}
}

func TestClassicSessionTimeoutMovesPartitions(t *testing.T) {
	h := newHarness(t, nil)
	const g = "session"
	a, aJoin := h.joinNew(joinReq(g, ""))
	recv(t, aJoin)
	recv(t, h.sync(g, a, 1, nil))
	b, bJoin := h.joinNew(joinReq(g, ""))
	recv(t, async(func() *kmsg.JoinGroupResponse { return h.c.JoinGroup(context.Background(), client, joinReq(g, a)) }))
	recv(t, bJoin)
	sb := h.sync(g, b, 2, nil)
	recv(t, h.sync(g, a, 2, map[string][]byte{a: []byte("a"), b: []byte("b")}))
	recv(t, sb)

	// a keeps heartbeating, b goes silent.
	for i := 0; i < 3; i++ {
		h.advance(3 * time.Second)
		wantCode(t, "a heartbeat", h.heartbeat(g, a, 2), nil)
	}
	h.advance(2 * time.Second)
	wantCode(t, "a heartbeat after b expired", h.heartbeat(g, a, 2), kerr.RebalanceInProgress)
	wantCode(t, "b is gone", h.heartbeat(g, b, 2), kerr.UnknownMemberID)
	ja := recv(t, async(func() *kmsg.JoinGroupResponse { return h.c.JoinGroup(context.Background(), client, joinReq(g, a)) }))
	if ja.Generation != 3 || len(ja.Members) != 1 {
		t.Fatalf("after expiry: %+v", ja)
	}
}

func TestClassicRebalanceTimeoutDropsSilentMember(t *testing.T) {
	h := newHarness(t, nil)
	const g = "rebalance-timeout"
	a, aJoin := h.joinNew(joinReq(g, ""))
	recv(t, aJoin)
	recv(t, h.sync(g, a, 1, nil))
	_, bJoin := h.joinNew(joinReq(g, ""))
	h.waitMembers(g, 2)
	// a heartbeats (learning of the rebalance) but never rejoins.
	for i := 0; i < 10; i++ {
		h.advance(3 * time.Second)
		h.heartbeat(g, a, 1)
	}
	h.advance(time.Second)
	jb := recv(t, bJoin)
	wantCode(t, "b join after timeout", jb.ErrorCode, nil)
	if jb.LeaderID != jb.MemberID || len(jb.Members) != 1 {
		t.Fatalf("b should lead alone: %+v", jb)
	}
}

func TestClassicInitialRebalanceDelay(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelayMs = 3000 })
	const g = "delayed"
	_, aJoin := h.joinNew(joinReq(g, ""))
	notYet(t, aJoin)
	h.advance(2 * time.Second)
	_, bJoin := h.joinNew(joinReq(g, ""))
	h.waitMembers(g, 2)
	h.advance(1100 * time.Millisecond) // first delay over, but b joined: extended
	notYet(t, aJoin)
	h.advance(3 * time.Second)
	ja, jb := recv(t, aJoin), recv(t, bJoin)
	if ja.Generation != 1 || jb.Generation != 1 {
		t.Fatalf("a=%+v b=%+v", ja, jb)
	}
}

func staticJoin(group, member, instance string) *kmsg.JoinGroupRequest {
	r := joinReq(group, member)
	r.InstanceID = strPtr(instance)
	return r
}

func TestClassicStaticMemberRestart(t *testing.T) {
	h := newHarness(t, nil)
	const g = "static"
	ja := recv(t, async(func() *kmsg.JoinGroupResponse {
		return h.c.JoinGroup(context.Background(), client, staticJoin(g, "", "i-a"))
	}))
	wantCode(t, "static join", ja.ErrorCode, nil)
	a := ja.MemberID
	recv(t, h.sync(g, a, 1, map[string][]byte{a: []byte("mine")}))

	// Restart: same instance, no member id, same protocols: no rebalance.
	ja2 := h.c.JoinGroup(context.Background(), client, staticJoin(g, "", "i-a"))
	wantCode(t, "static rejoin", ja2.ErrorCode, nil)
	if ja2.Generation != 1 || ja2.MemberID == a || !ja2.SkipAssignment {
		t.Fatalf("static rejoin: %+v", ja2)
	}
	if st := h.classicState(g); st != "Stable" {
		t.Fatalf("state %s", st)
	}
	s2 := recv(t, h.sync(g, ja2.MemberID, 1, nil))
	if string(s2.MemberAssignment) != "mine" {
		t.Fatalf("assignment lost: %q", s2.MemberAssignment)
	}
	// The old incarnation is fenced.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = 4, g, a, 1, strPtr("i-a")
	wantCode(t, "old incarnation", h.c.Heartbeat(context.Background(), hb).ErrorCode, kerr.FencedInstanceID)

	// The replacement survives a coordinator restart.
	c2 := h.reload()
	d := c2.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Groups: []string{g}})
	if d.Groups[0].State != "Stable" || d.Groups[0].Members[0].MemberID != ja2.MemberID || string(d.Groups[0].Members[0].MemberAssignment) != "mine" {
		t.Fatalf("after reload: %+v", d.Groups[0])
	}
}

// A restarted static member whose subscription bytes differ (franz-go
// puts its generation and owned partitions there) takes over without a
// rebalance, as in Kafka: only a change of the selected protocol counts.
func TestClassicStaticRestartNewMetadataSameProtocol(t *testing.T) {
	h := newHarness(t, nil)
	const g = "static-meta"
	ja := recv(t, async(func() *kmsg.JoinGroupResponse {
		return h.c.JoinGroup(context.Background(), client, staticJoin(g, "", "i-a"))
	}))
	a := ja.MemberID
	recv(t, h.sync(g, a, 1, map[string][]byte{a: []byte("mine")}))

	rejoin := staticJoin(g, "", "i-a")
	rejoin.Protocols[0].Metadata = subscription("foo", "bar")
	ja2 := h.c.JoinGroup(context.Background(), client, rejoin)
	wantCode(t, "static rejoin", ja2.ErrorCode, nil)
	if ja2.Generation != 1 || h.classicState(g) != "Stable" {
		t.Fatalf("rejoin with new metadata rebalanced: %+v, state %s", ja2, h.classicState(g))
	}

	// A rejoin the group's protocol cannot survive does rebalance.
	other := joinReq(g, "", "roundrobin", "range")
	other.InstanceID = strPtr("i-a")
	ja3 := recv(t, async(func() *kmsg.JoinGroupResponse { return h.c.JoinGroup(context.Background(), client, other) }))
	if ja3.ErrorCode != 0 || ja3.Generation != 2 || *ja3.Protocol != "roundrobin" {
		t.Fatalf("a change of the selected protocol did not rebalance: %+v", ja3)
	}
}

func TestClassicCooperativeRejoinKeepsGeneration(t *testing.T) {
	// A cooperative client rejoins right after a rebalance with the same
	// protocols; a non-leader in Stable gets the current generation back.
	h := newHarness(t, nil)
	const g = "coop"
	a, aJoin := h.joinNew(joinReq(g, "", "cooperative-sticky"))
	recv(t, aJoin)
	recv(t, h.sync(g, a, 1, nil))
	b, bJoin := h.joinNew(joinReq(g, "", "cooperative-sticky"))
	recv(t, async(func() *kmsg.JoinGroupResponse {
		return h.c.JoinGroup(context.Background(), client, joinReq(g, a, "cooperative-sticky"))
	}))
	recv(t, bJoin)
	sb := h.sync(g, b, 2, nil)
	recv(t, h.sync(g, a, 2, nil))
	recv(t, sb)
	jb := h.c.JoinGroup(context.Background(), client, joinReq(g, b, "cooperative-sticky"))
	wantCode(t, "follower rejoin", jb.ErrorCode, nil)
	if jb.Generation != 2 {
		t.Fatalf("generation %d", jb.Generation)
	}
	if st := h.classicState(g); st != "Stable" {
		t.Fatalf("state %s", st)
	}
}

func TestLeaveGroupStaticByInstance(t *testing.T) {
	h := newHarness(t, nil)
	const g = "leave-static"
	ja := recv(t, async(func() *kmsg.JoinGroupResponse {
		return h.c.JoinGroup(context.Background(), client, staticJoin(g, "", "i-1"))
	}))
	recv(t, h.sync(g, ja.MemberID, 1, nil))
	lr := h.c.LeaveGroup(context.Background(), &kmsg.LeaveGroupRequest{Version: 5, Group: g, Members: []kmsg.LeaveGroupRequestMember{
		{MemberID: "wrong", InstanceID: strPtr("i-1")},
		{InstanceID: strPtr("i-unknown")},
		{InstanceID: strPtr("i-1")},
	}})
	wantCode(t, "fenced", lr.Members[0].ErrorCode, kerr.FencedInstanceID)
	wantCode(t, "unknown", lr.Members[1].ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "admin removal", lr.Members[2].ErrorCode, nil)
	if st := h.classicState(g); st != "Empty" {
		t.Fatalf("state %s", st)
	}
	old := h.c.LeaveGroup(context.Background(), &kmsg.LeaveGroupRequest{Version: 1, Group: g, MemberID: "x"})
	wantCode(t, "v1 leave", old.ErrorCode, kerr.UnknownMemberID)
}

func TestClassicGroupMaxSize(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxSize = 1 })
	const g = "full"
	a, aJoin := h.joinNew(joinReq(g, ""))
	recv(t, aJoin)
	recv(t, h.sync(g, a, 1, nil))
	// Kafka checks the size before the member: even an unknown member id
	// is told the group is full.
	for _, member := range []string{"", "who"} {
		r := h.c.JoinGroup(context.Background(), client, joinReq(g, member))
		wantCode(t, "join full group as "+member, r.ErrorCode, kerr.GroupMaxSizeReached)
	}
	// The existing member may rejoin.
	ja := recv(t, async(func() *kmsg.JoinGroupResponse { return h.c.JoinGroup(context.Background(), client, joinReq(g, a)) }))
	wantCode(t, "member rejoins", ja.ErrorCode, nil)
}

// waitMembers waits until group has n members (parked joins are async).
func (h *harness) waitMembers(group string, n int) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var d *kmsg.DescribeGroupsResponse
	for time.Now().Before(deadline) {
		d = h.c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Groups: []string{group}})
		if len(d.Groups[0].Members) == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	h.t.Fatalf("group %s never reached %d members: %s with %d", group, n, d.Groups[0].State, len(d.Groups[0].Members))
}

// With group.initial.rebalance.delay.ms=0 the members that join an empty
// group together still land in one generation (Kafka's InitialDelayedJoin
// runs even at 0 ms): the first join must not complete alone.
func TestClassicZeroInitialDelayGathersConcurrentJoins(t *testing.T) {
	h := newHarness(t, nil)
	h.c.zeroDelayJoinWindow = time.Second
	const g = "together"
	const n = 5
	joins := make([]chan *kmsg.JoinGroupResponse, n)
	for i := range joins {
		_, joins[i] = h.joinNew(joinReq(g, ""))
	}
	for i, ch := range joins {
		r := recv(t, ch)
		wantCode(t, "join", r.ErrorCode, nil)
		if r.Generation != 1 {
			t.Fatalf("member %d joined generation %d: the first join completed before the others arrived", i, r.Generation)
		}
	}
}

// A member whose session is shorter than the others' expires on time: the
// timer scans the members only once the earliest deadline it knows of has
// passed, and a newcomer's deadline lowers it.
func TestClassicShortSessionExpiresAmongLongOnes(t *testing.T) {
	h := newHarness(t, nil)
	const g = "short-session"
	withSession := func(member string, ms int32) *kmsg.JoinGroupRequest {
		r := joinReq(g, member)
		r.SessionTimeoutMillis = ms
		return r
	}
	a, aJoin := h.joinNew(withSession("", 60_000))
	recv(t, aJoin)
	recv(t, h.sync(g, a, 1, nil))
	h.advance(3 * time.Second) // a scan: the next deadline is a's, a minute on
	wantCode(t, "a heartbeat", h.heartbeat(g, a, 1), nil)
	b, bJoin := h.joinNew(withSession("", 10_000))
	recv(t, async(func() *kmsg.JoinGroupResponse {
		return h.c.JoinGroup(context.Background(), client, withSession(a, 60_000))
	}))
	recv(t, bJoin)
	sb := h.sync(g, b, 2, nil)
	recv(t, h.sync(g, a, 2, map[string][]byte{a: []byte("a"), b: []byte("b")}))
	recv(t, sb)
	// b goes silent; a heartbeats.
	for range 3 {
		h.advance(3 * time.Second)
		wantCode(t, "a heartbeat", h.heartbeat(g, a, 2), nil)
	}
	h.advance(2 * time.Second)
	wantCode(t, "a heartbeat after b's 10 s session", h.heartbeat(g, a, 2), kerr.RebalanceInProgress)
	wantCode(t, "b is gone", h.heartbeat(g, b, 2), kerr.UnknownMemberID)
}
