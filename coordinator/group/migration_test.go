package group

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicAssignment is a ConsumerProtocol assignment of foo's partitions.
func classicAssignment(partitions ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = 1
	if len(partitions) > 0 {
		a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "foo", Partitions: partitions}}
	}
	return a.AppendTo(nil)
}

func decodeAssignment(t *testing.T, b []byte) []int32 {
	t.Helper()
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		t.Fatalf("decoding assignment %x: %v", b, err)
	}
	var out []int32
	for _, at := range a.Topics {
		out = append(out, at.Partitions...)
	}
	slices.Sort(out)
	return out
}

// classicRejoin is an eager classic member's rejoin with a known id.
func (h *harness) classicRejoin(group, member string) *kmsg.JoinGroupResponse {
	h.t.Helper()
	return recv(h.t, async(func() *kmsg.JoinGroupResponse {
		return h.c.JoinGroup(context.Background(), client, joinReq(group, member))
	}))
}

func (h *harness) classicSync(group, member string, gen int32) *kmsg.SyncGroupResponse {
	h.t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = group, member, gen
	req.ProtocolType, req.Protocol = strPtr("consumer"), strPtr("range")
	return h.c.SyncGroup(context.Background(), req)
}

// exclusive fails if two members of the consumer group hold a partition.
func exclusive(t *testing.T, d kmsg.ConsumerGroupDescribeResponseGroup) {
	t.Helper()
	seen := map[int32]string{}
	for _, m := range d.Members {
		for _, tp := range m.Assignment.TopicPartitions {
			for _, p := range tp.Partitions {
				if other, dup := seen[p]; dup {
					t.Fatalf("partition %d held by %s and %s", p, other, m.MemberID)
				}
				seen[p] = m.MemberID
			}
		}
	}
}

func memberOf(d kmsg.ConsumerGroupDescribeResponseGroup, id string) *kmsg.ConsumerGroupDescribeResponseGroupMember {
	for i := range d.Members {
		if d.Members[i].MemberID == id {
			return &d.Members[i]
		}
	}
	return nil
}

// stableClassicGroup makes a Stable classic group of two eager members
// owning foo 0-2 and 3-5; it returns their ids and the generation.
func stableClassicGroup(t *testing.T, h *harness, g string) (a, b string, gen int32) {
	t.Helper()
	a, aJoin := h.joinNew(joinReq(g, ""))
	if r := recv(t, aJoin); r.ErrorCode != 0 {
		t.Fatalf("a joins: %+v", r)
	}
	recv(t, h.sync(g, a, 1, map[string][]byte{a: classicAssignment(0, 1, 2, 3, 4, 5)}))
	// b's join starts a rebalance that a joins when its heartbeat says so.
	b, bJoin := h.joinNew(joinReq(g, ""))
	h.waitMembers(g, 2)
	wantCode(t, "a's heartbeat", h.heartbeat(g, a, 1), kerr.RebalanceInProgress)
	ja := recv(t, async(func() *kmsg.JoinGroupResponse { return h.c.JoinGroup(context.Background(), client, joinReq(g, a)) }))
	jb := recv(t, bJoin)
	if ja.ErrorCode != 0 || jb.ErrorCode != 0 || ja.Generation != 2 {
		t.Fatalf("joins: %+v %+v", ja, jb)
	}
	leader, follower := a, b
	if ja.LeaderID != a {
		leader, follower = b, a
	}
	fs := h.sync(g, follower, 2, nil)
	ls := recv(t, h.sync(g, leader, 2, map[string][]byte{a: classicAssignment(0, 1, 2), b: classicAssignment(3, 4, 5)}))
	if ls.ErrorCode != 0 || recv(t, fs).ErrorCode != 0 {
		t.Fatalf("syncs failed")
	}
	return a, b, 2
}

// The rolling upgrade Kafka supports: a live classic group is converted
// when a consumer-protocol member joins; the classic members keep their
// partitions, give up what the new target moves (learning of it through
// REBALANCE_IN_PROGRESS and a rejoin) and the consumer member gets its
// share; when it leaves again the group turns back into a classic group.
func TestOnlineUpgradeAndDowngrade(t *testing.T) {
	h := newHarness(t, nil)
	const g = "migrate"
	a, b, gen := stableClassicGroup(t, h, g)
	wantCode(t, "classic commit", h.c.OffsetCommit(context.Background(), commitReq(g, gen, a, "foo", map[int32]int64{0: 7}, "kept")).Topics[0].Partitions[0].ErrorCode, nil)

	c := newKip(g, "c", "foo")
	wantCode(t, "consumer member joins the classic group", h.hb(c, true).ErrorCode, nil)
	d := h.describeConsumer(g)
	if d.ErrorCode != 0 || len(d.Members) != 3 || d.Epoch != gen+1 {
		t.Fatalf("after the upgrade: %+v", d)
	}
	exclusive(t, d)
	for _, id := range []string{a, b} {
		m := memberOf(d, id)
		if m == nil || m.MemberType != 0 || m.MemberEpoch != gen || len(m.Assignment.TopicPartitions[0].Partitions) != 3 {
			t.Fatalf("classic member %s after the upgrade: %+v", id, m)
		}
	}
	if lg := h.c.ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 5}); len(lg.Groups) != 1 || lg.Groups[0].GroupType != "consumer" {
		t.Fatalf("list: %+v", lg.Groups)
	}
	if f := h.fetch(h.c, g, "foo", 0); f.Topics[0].Partitions[0].Offset != 7 {
		t.Fatalf("offsets lost in the upgrade: %+v", f)
	}

	// The classic members learn of the new epoch and rejoin.
	for _, id := range []string{a, b} {
		wantCode(t, "classic heartbeat after the upgrade", h.heartbeat(g, id, gen), kerr.RebalanceInProgress)
		wantCode(t, "commit at the old generation", h.c.OffsetCommit(context.Background(), commitReq(g, gen, id, "foo", map[int32]int64{0: 8}, "")).Topics[0].Partitions[0].ErrorCode, nil)
		j := h.classicRejoin(g, id)
		if j.ErrorCode != 0 || j.Generation != gen+1 || *j.Protocol != "range" || j.LeaderID != "" || len(j.Members) != 0 {
			t.Fatalf("rejoin of %s: %+v", id, j)
		}
		s := h.classicSync(g, id, gen+1)
		if s.ErrorCode != 0 || len(decodeAssignment(t, s.MemberAssignment)) != 2 {
			t.Fatalf("sync of %s: %+v (%v)", id, s, decodeAssignment(t, s.MemberAssignment))
		}
		wantCode(t, "commit at the new generation", h.c.OffsetCommit(context.Background(), commitReq(g, gen+1, id, "foo", map[int32]int64{1: 1}, "")).Topics[0].Partitions[0].ErrorCode, nil)
		wantCode(t, "commit at a wrong generation", h.c.OffsetCommit(context.Background(), commitReq(g, gen, id, "foo", map[int32]int64{1: 1}, "")).Topics[0].Partitions[0].ErrorCode, kerr.IllegalGeneration)
	}
	h.hb(c, false)
	d = h.describeConsumer(g)
	exclusive(t, d)
	if d.State != "Stable" || len(memberOf(d, "c").Assignment.TopicPartitions[0].Partitions) != 2 {
		t.Fatalf("after the rejoins: %+v", d)
	}
	for _, id := range []string{a, b} {
		wantCode(t, "heartbeat of a reconciled classic member", h.heartbeat(g, id, gen+1), nil)
	}

	// The state survives a restart, classic members included.
	d2 := h.reload().ConsumerGroupDescribe(context.Background(), &kmsg.ConsumerGroupDescribeRequest{Version: 1, Groups: []string{g}}).Groups[0]
	if d2.State != "Stable" || len(d2.Members) != 3 || memberOf(d2, a).MemberType != 0 || memberOf(d2, "c").MemberType != 1 {
		t.Fatalf("after reload: %+v", d2)
	}

	// The last consumer-protocol member leaves: a classic group again,
	// rebalancing, with the members' assignments as its last generation.
	leave := c.request(false)
	leave.MemberEpoch = -1
	wantCode(t, "leave", h.c.ConsumerGroupHeartbeat(context.Background(), client, leave).ErrorCode, nil)
	if st := h.classicState(g); st != "PreparingRebalance" {
		t.Fatalf("after the downgrade: state %s", st)
	}
	wantCode(t, "classic heartbeat after the downgrade", h.heartbeat(g, a, gen+1), kerr.RebalanceInProgress)
	ja := async(func() *kmsg.JoinGroupResponse { return h.c.JoinGroup(context.Background(), client, joinReq(g, a)) })
	jb := async(func() *kmsg.JoinGroupResponse { return h.c.JoinGroup(context.Background(), client, joinReq(g, b)) })
	ra, rb := recv(t, ja), recv(t, jb)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 || ra.Generation != gen+2 {
		t.Fatalf("rejoins after the downgrade: %+v %+v", ra, rb)
	}
	for _, cc := range []*Coordinator{h.c, h.reload()} {
		lg := cc.ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 5})
		if len(lg.Groups) != 1 || lg.Groups[0].GroupType != "classic" {
			t.Fatalf("list after the downgrade: %+v", lg.Groups)
		}
	}
	if f := h.fetch(h.c, g, "foo", 0); f.Topics[0].Partitions[0].Offset != 8 {
		t.Fatalf("offsets after the downgrade: %+v", f)
	}
}

// A classic member joining a live consumer group becomes a classic member
// of it, with Kafka's validations on each classic API.
func TestClassicMemberOfAConsumerGroup(t *testing.T) {
	h := newHarness(t, nil)
	const g = "mixed"
	c := newKip(g, "c", "foo")
	h.hb(c, true)
	if countOwned(c) != 6 {
		t.Fatalf("c owns %v", c.owned)
	}

	first := h.c.JoinGroup(context.Background(), client, joinReq(g, ""))
	wantCode(t, "first classic join", first.ErrorCode, kerr.MemberIDRequired)
	x := first.MemberID
	j := h.classicRejoin(g, x)
	if j.ErrorCode != 0 || j.MemberID != x {
		t.Fatalf("classic join: %+v", j)
	}
	// x waits for c to release partitions: nothing yet.
	if s := h.classicSync(g, x, j.Generation); s.ErrorCode != 0 || len(decodeAssignment(t, s.MemberAssignment)) != 0 {
		t.Fatalf("first sync: %+v", s)
	}
	h.hb(c, false) // c learns what to revoke
	h.hb(c, true)  // and reports it done
	wantCode(t, "x's partitions are free", h.heartbeat(g, x, j.Generation), kerr.RebalanceInProgress)
	j = h.classicRejoin(g, x)
	s := h.classicSync(g, x, j.Generation)
	if got := decodeAssignment(t, s.MemberAssignment); len(got) != 3 {
		t.Fatalf("x's assignment %v", got)
	}
	exclusive(t, h.describeConsumer(g))

	tests := []struct {
		name string
		code int16
		want *kerr.Error
	}{
		{"heartbeat of an unknown member", h.heartbeat(g, "nobody", j.Generation), kerr.UnknownMemberID},
		{"heartbeat at a wrong generation", h.heartbeat(g, x, j.Generation+5), kerr.IllegalGeneration},
		{"classic heartbeat of a consumer-protocol member", h.heartbeat(g, "c", c.epoch), kerr.UnknownMemberID},
		{"sync at a wrong generation", h.classicSync(g, x, j.Generation-1).ErrorCode, kerr.IllegalGeneration},
		{"sync with another protocol", func() int16 {
			req := kmsg.NewPtrSyncGroupRequest()
			req.Version, req.Group, req.MemberID, req.Generation = 5, g, x, j.Generation
			req.ProtocolType, req.Protocol = strPtr("consumer"), strPtr("roundrobin")
			return h.c.SyncGroup(context.Background(), req).ErrorCode
		}(), kerr.InconsistentGroupProtocol},
		{"join with an unsupported protocol", h.c.JoinGroup(context.Background(), client, joinReq(g, x, "roundrobin")).ErrorCode, kerr.InconsistentGroupProtocol},
	}
	for _, tc := range tests {
		wantCode(t, tc.name, tc.code, tc.want)
	}

	// LeaveGroup removes the classic member and bumps the epoch.
	epoch := h.describeConsumer(g).Epoch
	lr := h.c.LeaveGroup(context.Background(), &kmsg.LeaveGroupRequest{Version: 5, Group: g, Members: []kmsg.LeaveGroupRequestMember{{MemberID: x}, {MemberID: "c"}}})
	wantCode(t, "leave x", lr.Members[0].ErrorCode, nil)
	wantCode(t, "classic leave of a consumer-protocol member", lr.Members[1].ErrorCode, kerr.UnknownMemberID)
	if d := h.describeConsumer(g); len(d.Members) != 1 || d.Epoch != epoch+1 {
		t.Fatalf("after the leave: %+v", d)
	}
}

// A classic member that stops heartbeating is fenced after its own
// session timeout; one that does not rejoin when asked, after its
// rebalance timeout.
func TestClassicMemberTimeoutsInAConsumerGroup(t *testing.T) {
	h := newHarness(t, nil)
	const g = "mixed-timeouts"
	c := newKip(g, "c", "foo")
	h.hb(c, true)
	x := h.c.JoinGroup(context.Background(), client, joinReq(g, "")).MemberID
	h.classicRejoin(g, x) // session timeout 10s (joinReq)
	for range 3 {
		h.advance(4 * time.Second)
		h.hb(c, true)
	}
	if d := h.describeConsumer(g); len(d.Members) != 1 {
		t.Fatalf("a silent classic member was not fenced: %+v", d.Members)
	}
}

// The migration policy gates both directions.
func TestMigrationPolicy(t *testing.T) {
	t.Run("disabled", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.ConsumerMigrationPolicy = MigrationDisabled })
		stableClassicGroup(t, h, "g")
		r := h.hb(newKip("g", "c", "foo"), true)
		wantCode(t, "upgrade with the policy disabled", r.ErrorCode, kerr.GroupIDNotFound)
		if st := h.classicState("g"); st != "Stable" {
			t.Fatalf("the refused upgrade changed the group: %s", st)
		}
	})
	t.Run("upgrade only", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.ConsumerMigrationPolicy = MigrationUpgrade })
		stableClassicGroup(t, h, "g")
		c := newKip("g", "c", "foo")
		wantCode(t, "upgrade", h.hb(c, true).ErrorCode, nil)
		leave := c.request(false)
		leave.MemberEpoch = -1
		h.c.ConsumerGroupHeartbeat(context.Background(), client, leave)
		if d := h.describeConsumer("g"); d.ErrorCode != 0 || len(d.Members) != 2 {
			t.Fatalf("downgraded although the policy allows only upgrades: %+v", d)
		}
	})
}

// ClassicMemberMetadata is ConsumerGroupMemberMetadataValue's tagged
// field 0, written as Kafka's generated code writes a nullable tagged
// struct: tag, size, presence marker, fields.
func TestClassicMemberMetadataEncoding(t *testing.T) {
	v := memberMetadataValue{
		ClientID: "cl", ClientHost: "/h", SubscribedTopicNames: []string{"foo"}, RebalanceTimeoutMs: 5000,
		Classic: &classicMemberMetadata{SessionTimeoutMs: 45000, Protocols: []classicProtocol{{name: "range", metadata: []byte{0, 1}}}},
	}
	b := v.encode()
	var want []byte
	want = kbin.AppendInt32(want, 45000)
	want = kbin.AppendCompactArrayLen(want, 1)
	want = kbin.AppendCompactString(want, "range")
	want = kbin.AppendCompactBytes(want, []byte{0, 1})
	want = kbin.AppendUvarint(want, 0)
	want = kbin.AppendUvarint(want, 0)
	tail := append([]byte{1, 0, byte(len(want) + 1), 1}, want...)
	if string(b[len(b)-len(tail):]) != string(tail) {
		t.Fatalf("tagged field bytes %x, want suffix %x", b, tail)
	}
	var back memberMetadataValue
	if err := back.decode(b); err != nil {
		t.Fatal(err)
	}
	if !sameMemberMetadata(&v, &back) {
		t.Fatalf("round trip: %+v vs %+v", back, v)
	}
	plain := v
	plain.Classic = nil
	if err := back.decode(plain.encode()); err != nil || back.Classic != nil {
		t.Fatalf("without classic metadata: %+v %v", back, err)
	}
}
