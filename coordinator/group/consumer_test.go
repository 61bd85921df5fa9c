package group

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kipMember simulates a KIP-848 client: it adopts each assignment it is
// sent at once (revoking what it lost) and reports what it owns.
type kipMember struct {
	group    string
	id       string
	epoch    int32
	owned    map[[16]byte][]int32
	instance *string
	topics   []string
	regex    *string
	assignor *string
}

func (m *kipMember) request(full bool) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch, r.InstanceID = m.group, m.id, m.epoch, m.instance
	r.RebalanceTimeoutMillis = -1
	if full || m.epoch == 0 {
		r.RebalanceTimeoutMillis = 30000
		r.SubscribedTopicNames = m.topics
		r.SubscribedTopicRegex = m.regex
		r.ServerAssignor = m.assignor
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, tp := range toTopicPartitions(m.owned) {
			r.Topics = append(r.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp.TopicID, Partitions: tp.Partitions})
		}
		if m.epoch == 0 {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
	}
	return r
}

func (h *harness) hb(m *kipMember, full bool) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	resp := h.c.ConsumerGroupHeartbeat(context.Background(), client, m.request(full))
	if resp.ErrorCode != 0 {
		return resp
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = map[[16]byte][]int32{}
		for _, t := range resp.Assignment.Topics {
			m.owned[t.TopicID] = slices.Clone(t.Partitions)
		}
	}
	return resp
}

func newKip(group, id string, topics ...string) *kipMember {
	return &kipMember{group: group, id: id, topics: topics}
}

func countOwned(ms ...*kipMember) int {
	n := 0
	for _, m := range ms {
		for _, ps := range m.owned {
			n += len(ps)
		}
	}
	return n
}

// noDoubleOwnership fails if two members believe they own a partition.
func noDoubleOwnership(t *testing.T, ms ...*kipMember) {
	t.Helper()
	seen := map[topicPartition]string{}
	for _, m := range ms {
		for tid, ps := range m.owned {
			for _, p := range ps {
				tp := topicPartition{tid, p}
				if o, ok := seen[tp]; ok {
					t.Fatalf("partition %v owned by %s and %s", tp, o, m.id)
				}
				seen[tp] = m.id
			}
		}
	}
}

func (h *harness) describeConsumer(group string) kmsg.ConsumerGroupDescribeResponseGroup {
	return h.c.ConsumerGroupDescribe(context.Background(), &kmsg.ConsumerGroupDescribeRequest{Version: 1, Groups: []string{group}}).Groups[0]
}

func TestConsumerGroupJoinAndIncrementalReconciliation(t *testing.T) {
	h := newHarness(t, nil)
	const g = "kip848"
	a, b := newKip(g, "member-a", "foo"), newKip(g, "member-b", "foo")
	r := h.hb(a, true)
	wantCode(t, "a joins", r.ErrorCode, nil)
	if r.MemberEpoch != 1 || countOwned(a) != 6 || r.HeartbeatIntervalMillis != 5000 || *r.MemberID != "member-a" {
		t.Fatalf("a: %+v owned %v", r, a.owned)
	}
	if d := h.describeConsumer(g); d.State != "Stable" || d.Epoch != 1 || d.AssignmentEpoch != 1 || d.AssignorName != "uniform" {
		t.Fatalf("describe: %+v", d)
	}

	r = h.hb(b, true)
	wantCode(t, "b joins", r.ErrorCode, nil)
	if r.MemberEpoch != 2 || countOwned(b) != 0 {
		t.Fatalf("b must wait for a to release: %+v owned %v", r, b.owned)
	}
	noDoubleOwnership(t, a, b)
	if d := h.describeConsumer(g); d.State != "Reconciling" {
		t.Fatalf("state %s", d.State)
	}
	// a learns it must revoke half; its epoch stays until it has.
	r = h.hb(a, false)
	if r.MemberEpoch != 1 || countOwned(a) != 3 {
		t.Fatalf("a revoking: %+v owned %v", r, a.owned)
	}
	// b is still waiting: a has not confirmed the revocation.
	h.hb(b, false)
	if countOwned(b) != 0 {
		t.Fatalf("b got partitions before a revoked them")
	}
	r = h.hb(a, true) // reports what it owns now
	if r.MemberEpoch != 2 {
		t.Fatalf("a after revoking: %+v", r)
	}
	r = h.hb(b, false)
	if countOwned(b) != 3 || r.MemberEpoch != 2 {
		t.Fatalf("b after release: %+v owned %v", r, b.owned)
	}
	noDoubleOwnership(t, a, b)
	if d := h.describeConsumer(g); d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("describe: %+v", d)
	}
	// Nothing changes on a steady heartbeat: no assignment in the answer.
	if r := h.hb(a, false); r.Assignment != nil || r.MemberEpoch != 2 {
		t.Fatalf("steady heartbeat: %+v", r)
	}

	// b leaves; a takes everything at the next epoch.
	leave := b.request(false)
	leave.MemberEpoch = -1
	lr := h.c.ConsumerGroupHeartbeat(context.Background(), client, leave)
	wantCode(t, "leave", lr.ErrorCode, nil)
	if lr.MemberEpoch != -1 {
		t.Fatalf("leave epoch %d", lr.MemberEpoch)
	}
	r = h.hb(a, false)
	if r.MemberEpoch != 3 || countOwned(a) != 6 {
		t.Fatalf("a alone: %+v owned %v", r, a.owned)
	}
	// The state survives a restart.
	c2 := h.reload()
	d := c2.ConsumerGroupDescribe(context.Background(), &kmsg.ConsumerGroupDescribeRequest{Groups: []string{g}}).Groups[0]
	if d.Epoch != 3 || len(d.Members) != 1 || d.Members[0].MemberEpoch != 3 || len(d.Members[0].Assignment.TopicPartitions[0].Partitions) != 6 || d.Members[0].Assignment.TopicPartitions[0].Topic != "foo" {
		t.Fatalf("after reload: %+v", d)
	}
}

func TestConsumerGroupRangeAssignor(t *testing.T) {
	h := newHarness(t, nil)
	const g = "range"
	a, b := newKip(g, "a", "foo", "baz"), newKip(g, "b", "foo", "baz")
	a.assignor, b.assignor = strPtr("range"), strPtr("range")
	h.hb(a, true)
	h.hb(b, true)
	for i := 0; i < 3; i++ {
		h.hb(a, true)
		h.hb(b, true)
	}
	foo, _ := h.topics.TopicByName("foo")
	baz, _ := h.topics.TopicByName("baz")
	if !slices.Equal(a.owned[foo.ID], []int32{0, 1, 2}) || !slices.Equal(b.owned[foo.ID], []int32{3, 4, 5}) ||
		!slices.Equal(a.owned[baz.ID], []int32{0, 1}) || !slices.Equal(b.owned[baz.ID], []int32{2}) {
		t.Fatalf("range: a=%v b=%v", a.owned, b.owned)
	}
	if d := h.describeConsumer(g); d.AssignorName != "range" {
		t.Fatalf("assignor %s", d.AssignorName)
	}
}

func TestConsumerGroupRegexSubscription(t *testing.T) {
	h := newHarness(t, nil)
	const g = "regex"
	m := newKip(g, "m")
	m.regex = strPtr("fo.*")
	h.hb(m, true)
	if countOwned(m) != 6 {
		t.Fatalf("owned %v", m.owned)
	}
	epoch := m.epoch
	fox := h.topics.add("fox", 2)
	r := h.hb(m, false)
	if r.MemberEpoch != epoch+1 || len(m.owned[fox.ID]) != 2 {
		t.Fatalf("new matching topic not assigned: %+v owned %v", r, m.owned)
	}
	// Partitions added to a subscribed topic are assigned too.
	h.topics.add("fox", 4)
	h.hb(m, false)
	if len(m.owned[fox.ID]) != 4 {
		t.Fatalf("new partitions not assigned: %v", m.owned)
	}
	d := h.describeConsumer(g)
	if *d.Members[0].SubscribedTopicRegex != "fo.*" {
		t.Fatalf("describe: %+v", d.Members[0])
	}
	// The resolution is persisted as a ConsumerGroupRegularExpression record.
	found := false
	for _, rec := range h.logFor(g).records(t) {
		if k, _ := parseKey(rec.key); k.typ == recConsumerRegex && rec.value != nil {
			found = true
		}
	}
	if !found {
		t.Fatal("no regex record")
	}
}

func TestConsumerGroupHeartbeatErrors(t *testing.T) {
	h := newHarness(t, nil)
	const g = "cg-errors"
	a := newKip(g, "a", "foo")
	h.hb(a, true)
	h.hb(newKip(g, "b", "foo"), true)
	h.hb(a, true)
	h.hb(a, true)
	if a.epoch != 2 {
		t.Fatalf("a's epoch %d", a.epoch)
	}
	cl := newKip("classic-group", "x", "foo")
	recvJoin := func() {
		// A classic group that does not embed the consumer protocol
		// cannot be upgraded.
		req := joinReq("classic-group", "")
		req.ProtocolType = "connect"
		id, ch := h.joinNew(req)
		recv(t, ch)
		recv(t, h.sync("classic-group", id, 1, nil))
	}
	recvJoin()

	mk := func(f func(r *kmsg.ConsumerGroupHeartbeatRequest)) *kmsg.ConsumerGroupHeartbeatRequest {
		r := newKip(g, "new", "foo").request(true)
		f(r)
		return r
	}
	tests := []struct {
		name string
		req  *kmsg.ConsumerGroupHeartbeatRequest
		want *kerr.Error
	}{
		{"empty group", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "" }), kerr.InvalidRequest},
		{"empty member id on join v1", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }), kerr.InvalidRequest},
		{"no rebalance timeout on join", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }), kerr.InvalidRequest},
		{"no subscription on join", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }), kerr.InvalidRequest},
		{"owned partitions on join", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{Partitions: []int32{0}}}
		}), kerr.InvalidRequest},
		{"empty rack", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RackID = strPtr("") }), kerr.InvalidRequest},
		{"bad epoch", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -5 }), kerr.InvalidRequest},
		{"static leave without instance", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -2 }), kerr.InvalidRequest},
		{"unsupported assignor", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = strPtr("sticky") }), kerr.UnsupportedAssignor},
		{"invalid regex", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = strPtr("(") }), kerr.InvalidRegularExpression},
		{"unknown member", mk(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 1 }), kerr.UnknownMemberID},
		{"epoch ahead", func() *kmsg.ConsumerGroupHeartbeatRequest { r := a.request(false); r.MemberEpoch = 9; return r }(), kerr.FencedMemberEpoch},
		{"epoch behind", func() *kmsg.ConsumerGroupHeartbeatRequest {
			r := a.request(true)
			r.MemberEpoch = a.epoch - 1
			r.Topics = append(r.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: [16]byte{9}, Partitions: []int32{0}})
			return r
		}(), kerr.FencedMemberEpoch},
		{"classic group", cl.request(true), kerr.GroupIDNotFound},
		{"unknown group", func() *kmsg.ConsumerGroupHeartbeatRequest {
			r := newKip("nope", "m", "foo").request(false)
			r.MemberEpoch = 3
			return r
		}(), kerr.GroupIDNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.c.ConsumerGroupHeartbeat(context.Background(), client, tc.req)
			wantCode(t, tc.name, r.ErrorCode, tc.want)
			if r.ErrorMessage == nil && tc.want != kerr.UnknownMemberID {
				t.Errorf("%s: no error message", tc.name)
			}
		})
	}
	if d := h.describeConsumer("classic-group"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupDescribe of a classic group: %+v", d)
	}
	if d := h.describeConsumer(g); d.ErrorCode != 0 || len(d.Members) != 2 || d.Epoch != 2 {
		t.Fatalf("the failed requests changed the group: %+v", d)
	}
}

func TestConsumerGroupMaxSize(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ConsumerMaxSize = 1 })
	h.hb(newKip("full", "a", "foo"), true)
	r := h.hb(newKip("full", "b", "foo"), true)
	wantCode(t, "second member", r.ErrorCode, kerr.GroupMaxSizeReached)
}

func TestConsumerGroupStaticMembership(t *testing.T) {
	h := newHarness(t, nil)
	const g = "cg-static"
	a, b := newKip(g, "a1", "foo"), newKip(g, "b", "foo")
	a.instance = strPtr("inst-a")
	for i := 0; i < 3; i++ {
		h.hb(a, true)
		h.hb(b, true)
	}
	owned := a.owned
	epoch := h.describeConsumer(g).Epoch

	// A second incarnation while the first is live is refused.
	a2 := newKip(g, "a2", "foo")
	a2.instance = a.instance
	wantCode(t, "unreleased", h.hb(a2, true).ErrorCode, kerr.UnreleasedInstanceID)

	leave := a.request(false)
	leave.MemberEpoch = -2
	lr := h.c.ConsumerGroupHeartbeat(context.Background(), client, leave)
	wantCode(t, "static leave", lr.ErrorCode, nil)
	if lr.MemberEpoch != -2 {
		t.Fatalf("static leave epoch %d", lr.MemberEpoch)
	}
	r := h.hb(a2, true)
	wantCode(t, "new incarnation", r.ErrorCode, nil)
	if d := h.describeConsumer(g); d.Epoch != epoch {
		t.Fatalf("static rejoin bumped the epoch: %d -> %d", epoch, d.Epoch)
	}
	if fmt.Sprint(a2.owned) != fmt.Sprint(owned) {
		t.Fatalf("assignment not kept: %v vs %v", a2.owned, owned)
	}
	// The old incarnation is fenced.
	wantCode(t, "old incarnation", h.hb(a, false).ErrorCode, kerr.FencedInstanceID)
}

func TestConsumerGroupSessionAndRebalanceTimeouts(t *testing.T) {
	h := newHarness(t, nil)
	const g = "cg-timeouts"
	a, b := newKip(g, "a", "foo"), newKip(g, "b", "foo")
	h.hb(a, true)
	h.hb(b, true)
	h.hb(a, true)
	h.hb(b, true)
	// b stops heartbeating: fenced after the session timeout (45s).
	for i := 0; i < 5; i++ {
		h.advance(10 * time.Second)
		h.hb(a, true)
	}
	if d := h.describeConsumer(g); len(d.Members) != 1 {
		t.Fatalf("b not fenced: %+v", d.Members)
	}
	h.hb(a, true)
	if countOwned(a) != 6 {
		t.Fatalf("a did not take over: %v", a.owned)
	}
	wantCode(t, "fenced b", h.hb(b, false).ErrorCode, kerr.UnknownMemberID)

	// c joins; a is told to revoke but never confirms: fenced after its
	// rebalance timeout (30s), though it keeps heartbeating.
	c := newKip(g, "c", "foo")
	h.hb(c, true)
	h.c.ConsumerGroupHeartbeat(context.Background(), client, a.request(false))
	for i := 0; i < 4; i++ {
		h.advance(9 * time.Second)
		req := a.request(false)
		h.c.ConsumerGroupHeartbeat(context.Background(), client, req)
		h.hb(c, false)
	}
	if d := h.describeConsumer(g); len(d.Members) != 1 || d.Members[0].MemberID != "c" {
		t.Fatalf("a should be fenced for not revoking: %+v", d.Members)
	}
	h.hb(c, false)
	if countOwned(c) != 6 {
		t.Fatalf("c owns %v", c.owned)
	}
}

func TestGroupConversionBetweenProtocols(t *testing.T) {
	h := newHarness(t, nil)
	const g = "convert"
	// An empty classic group with offsets becomes a consumer group and
	// keeps its offsets.
	h.c.OffsetCommit(context.Background(), commitReq(g, -1, "", "foo", map[int32]int64{0: 42}, ""))
	m := newKip(g, "m", "foo")
	wantCode(t, "upgrade", h.hb(m, true).ErrorCode, nil)
	lg := h.c.ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"CONSUMER"}})
	if len(lg.Groups) != 1 || lg.Groups[0].GroupType != "consumer" || lg.Groups[0].GroupState != "Stable" {
		t.Fatalf("list: %+v", lg.Groups)
	}
	if f := h.fetch(h.c, g, "foo", 0); f.Topics[0].Partitions[0].Offset != 42 {
		t.Fatalf("offsets lost: %+v", f)
	}
	// Members of a live consumer group must embed the consumer protocol.
	other := joinReq(g, "")
	other.ProtocolType = "connect"
	r := h.c.JoinGroup(context.Background(), client, other)
	wantCode(t, "connect join to live consumer group", r.ErrorCode, kerr.InconsistentGroupProtocol)
	// Once empty, a classic member converts it back.
	leave := m.request(false)
	leave.MemberEpoch = -1
	h.c.ConsumerGroupHeartbeat(context.Background(), client, leave)
	id, ch := h.joinNew(joinReq(g, ""))
	wantCode(t, "downgrade", recv(t, ch).ErrorCode, nil)
	recv(t, h.sync(g, id, 1, nil))
	for _, c := range []*Coordinator{h.c, h.reload()} {
		lg = c.ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 5})
		if len(lg.Groups) != 1 || lg.Groups[0].GroupType != "classic" {
			t.Fatalf("list: %+v", lg.Groups)
		}
		if f := h.fetch(c, g, "foo", 0); f.Topics[0].Partitions[0].Offset != 42 {
			t.Fatalf("offsets lost: %+v", f)
		}
	}
}

func TestConsumerGroupOffsetCommitEpochs(t *testing.T) {
	h := newHarness(t, nil)
	const g = "cg-commit"
	m := newKip(g, "m", "foo")
	h.hb(m, true)
	wantCode(t, "stale epoch", h.c.OffsetCommit(context.Background(), commitReq(g, m.epoch+1, "m", "foo", map[int32]int64{0: 1}, "")).Topics[0].Partitions[0].ErrorCode, kerr.StaleMemberEpoch)
	wantCode(t, "unknown member", h.c.OffsetCommit(context.Background(), commitReq(g, m.epoch, "x", "foo", map[int32]int64{0: 1}, "")).Topics[0].Partitions[0].ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "commit", h.c.OffsetCommit(context.Background(), commitReq(g, m.epoch, "m", "foo", map[int32]int64{0: 1}, "")).Topics[0].Partitions[0].ErrorCode, nil)
	old := commitReq(g, m.epoch, "m", "foo", map[int32]int64{0: 1}, "")
	old.Version = 8
	wantCode(t, "old version from a consumer-protocol member", h.c.OffsetCommit(context.Background(), old).Topics[0].Partitions[0].ErrorCode, kerr.UnsupportedVersion)

	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 9
	req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: g, MemberID: strPtr("m"), MemberEpoch: m.epoch + 3, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "foo", Partitions: []int32{0}}}}}
	wantCode(t, "fetch with stale epoch", h.c.OffsetFetch(context.Background(), req).Groups[0].ErrorCode, kerr.StaleMemberEpoch)
	req.Groups[0].MemberEpoch = m.epoch
	if f := h.c.OffsetFetch(context.Background(), req).Groups[0]; f.ErrorCode != 0 || f.Topics[0].Partitions[0].Offset != 1 {
		t.Fatalf("fetch: %+v", f)
	}
	// DescribeGroups shows a consumer group in classic form.
	d := h.c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{g}}).Groups[0]
	var a kmsg.ConsumerMemberAssignment
	if d.ProtocolType != "consumer" || d.State != "Stable" || len(d.Members) != 1 || a.ReadFrom(d.Members[0].MemberAssignment) != nil || len(a.Topics[0].Partitions) != 6 {
		t.Fatalf("describe: %+v", d)
	}
}

// A regex subscription matches only the topics the heartbeating member's
// principal may describe (Client.DescribeTopic), as Kafka's
// TopicRegexResolver filters them with the authorizer.
func TestConsumerGroupRegexSkipsTopicsTheMemberMayNotDescribe(t *testing.T) {
	h := newHarness(t, nil)
	hidden := h.topics.add("fox-hidden", 2)
	m := newKip("regex-acl", "m")
	m.regex = strPtr("fo.*")
	req := m.request(true)
	who := client
	who.DescribeTopic = func(topic string) bool { return topic != "fox-hidden" }
	resp := h.c.ConsumerGroupHeartbeat(context.Background(), who, req)
	if resp.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if resp.Assignment == nil {
		t.Fatal("no assignment")
	}
	n := 0
	for _, tp := range resp.Assignment.Topics {
		if tp.TopicID == hidden.ID {
			t.Fatal("a topic the member may not describe was assigned through its regex")
		}
		n += len(tp.Partitions)
	}
	if n != 6 {
		t.Fatalf("assigned %d partitions of the describable matching topics, want 6", n)
	}
}
