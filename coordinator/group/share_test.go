package group

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeShareState is a share coordinator that succeeds (or fails, when fail
// is set) and records what it was asked.
type fakeShareState struct {
	mu      sync.Mutex
	fail    error
	inits   []string // "group epoch topic partitions"
	deletes []string
	topics  *fakeTopics
}

func (f *fakeShareState) describe(group string, epoch int32, parts map[[16]byte][]int32) string {
	s := group
	if epoch >= 0 {
		s += fmt.Sprintf(" %d", epoch)
	}
	for _, id := range sortedTopicIDsOf(parts) {
		info, _ := f.topics.TopicByID(id)
		s += fmt.Sprintf(" %s%v", info.Name, parts[id])
	}
	return s
}

func (f *fakeShareState) Initialize(_ context.Context, group string, epoch int32, parts map[[16]byte][]int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inits = append(f.inits, f.describe(group, epoch, parts))
	return f.fail
}

func (f *fakeShareState) InitializeAt(_ context.Context, group string, epoch int32, offsets map[[16]byte]map[int32]int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := fmt.Sprintf("%s %d", group, epoch)
	for _, id := range sortedTopicIDsOf(offsets) {
		info, _ := f.topics.TopicByID(id)
		s += fmt.Sprintf(" %s%v", info.Name, offsets[id])
	}
	f.inits = append(f.inits, s)
	return f.fail
}

func (f *fakeShareState) Delete(_ context.Context, group string, parts map[[16]byte][]int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, f.describe(group, -1, parts))
	return f.fail
}

func newShareHarness(t *testing.T) (*harness, *fakeShareState) {
	t.Helper()
	st := &fakeShareState{}
	h := newHarness(t, func(c *Config) { c.ShareState = st })
	st.topics = h.topics
	return h, st
}

type shareMemberSim struct {
	group, id string
	epoch     int32
	topics    []string
	assigned  map[[16]byte][]int32
}

func (h *harness) shareHB(m *shareMemberSim, full bool) *kmsg.ShareGroupHeartbeatResponse {
	h.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.MemberEpoch = m.group, m.id, m.epoch
	if full || m.epoch == 0 {
		req.SubscribedTopicNames = m.topics
	}
	resp := h.c.ShareGroupHeartbeat(context.Background(), client, req)
	if resp.ErrorCode != 0 {
		return resp
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.assigned = map[[16]byte][]int32{}
		for _, tp := range resp.Assignment.TopicPartitions {
			m.assigned[tp.TopicID] = slices.Clone(tp.Partitions)
		}
	}
	return resp
}

// waitShareInitialized waits until the group's share state of topic is
// recorded as initialized for n partitions.
func (h *harness) waitShareInitialized(group, topic string, n int) {
	h.t.Helper()
	info, _ := h.topics.TopicByName(topic)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		s, code := h.c.lockGroup(group)
		if code == 0 {
			g := s.share[group]
			done := g != nil && g.initialized[info.ID] != nil && len(g.initialized[info.ID].partitions) == n
			s.mu.Unlock()
			if done {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.t.Fatalf("share state of %s in %s was not initialized", topic, group)
}

func count(a map[[16]byte][]int32) int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func TestShareGroupJoinInitializeAndAssign(t *testing.T) {
	h, st := newShareHarness(t)
	a := &shareMemberSim{group: "q", id: "member-a", topics: []string{"foo"}}
	resp := h.shareHB(a, false)
	if resp.ErrorCode != 0 || resp.MemberEpoch != 2 || resp.Assignment == nil || len(resp.Assignment.TopicPartitions) != 0 {
		t.Fatalf("first heartbeat: %+v (want epoch 2 and an empty assignment: nothing is initialized yet)", resp)
	}
	if resp.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("heartbeat interval %d, want 5000", resp.HeartbeatIntervalMillis)
	}
	h.waitShareInitialized("q", "foo", 6)
	if want := []string{"q 2 foo[0 1 2 3 4 5]"}; !slices.Equal(st.inits, want) {
		t.Fatalf("initialized %v, want %v", st.inits, want)
	}
	// Initialized partitions not in the target bump the epoch; the new
	// target waits for the assignment interval.
	h.clock.Advance(time.Second)
	resp = h.shareHB(a, false)
	if resp.MemberEpoch != 3 || count(a.assigned) != 6 {
		t.Fatalf("after initialization: epoch %d, %d partitions (want 3 and 6)", resp.MemberEpoch, count(a.assigned))
	}
	// A second member: three partitions each once both have heartbeated
	// past the interval.
	b := &shareMemberSim{group: "q", id: "member-b", topics: []string{"foo"}}
	h.clock.Advance(time.Second)
	h.shareHB(b, false)
	h.shareHB(a, false)
	if count(a.assigned) != 3 || count(b.assigned) != 3 || a.epoch != b.epoch {
		t.Fatalf("a %v (epoch %d), b %v (epoch %d): want 3 and 3 at one epoch", a.assigned, a.epoch, b.assigned, b.epoch)
	}
	// Nothing is initialized twice.
	if len(st.inits) != 1 {
		t.Fatalf("initialized %v", st.inits)
	}
	// The state survives a restart: replayed, it describes the same.
	before := h.c.ShareGroupDescribe(context.Background(), &kmsg.ShareGroupDescribeRequest{Version: 1, GroupIDs: []string{"q"}})
	h.c = h.reload()
	after := h.c.ShareGroupDescribe(context.Background(), &kmsg.ShareGroupDescribeRequest{Version: 1, GroupIDs: []string{"q"}})
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("described differently after a reload:\n%+v\n%+v", before, after)
	}
	g := after.Groups[0]
	if g.GroupState != "Stable" || g.Assignor != "simple" || len(g.Members) != 2 || g.Members[0].ClientHost != client.Host {
		t.Fatalf("described %+v", g)
	}
}

func TestShareGroupManyMembersShareFewPartitions(t *testing.T) {
	h, _ := newShareHarness(t)
	var ms []*shareMemberSim
	for i := range 8 {
		m := &shareMemberSim{group: "q", id: fmt.Sprintf("m%d", i), topics: []string{"baz"}}
		h.shareHB(m, false)
		ms = append(ms, m)
	}
	h.waitShareInitialized("q", "baz", 3)
	for range 3 {
		h.clock.Advance(time.Second)
		for _, m := range ms {
			h.shareHB(m, false)
		}
	}
	holders := map[int32]int{}
	total := 0
	for _, m := range ms {
		n := count(m.assigned)
		if n < 1 || n > 2 {
			t.Fatalf("member %s holds %d partitions (want 1 or 2): %v", m.id, n, m.assigned)
		}
		total += n
		for _, ps := range m.assigned {
			for _, p := range ps {
				holders[p]++
			}
		}
	}
	// Eight members, three partitions: each partition to ceil(8/3) = 3.
	if total != 9 || holders[0] != 3 || holders[1] != 3 || holders[2] != 3 {
		t.Fatalf("holders per partition %v (total %d), want 3 each", holders, total)
	}
}

func TestShareGroupHeartbeatErrors(t *testing.T) {
	h, _ := newShareHarness(t)
	call := func(group, member string, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.Version = 1
		req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, member, epoch, topics
		return h.c.ShareGroupHeartbeat(context.Background(), client, req)
	}
	check := func(resp *kmsg.ShareGroupHeartbeatResponse, code int16, msg string) {
		t.Helper()
		got := ""
		if resp.ErrorMessage != nil {
			got = *resp.ErrorMessage
		}
		if resp.ErrorCode != code || got != msg {
			t.Fatalf("got %d %q, want %d %q", resp.ErrorCode, got, code, msg)
		}
	}
	check(call("q", " ", 0, []string{"foo"}), kerr.InvalidRequest.Code, "MemberId can't be empty.")
	check(call("", "m", 0, []string{"foo"}), kerr.InvalidRequest.Code, "GroupId can't be empty.")
	check(call("q", "m", 0, nil), kerr.InvalidRequest.Code, "SubscribedTopicNames must be set in first request.")
	check(call("q", "m", -2, nil), kerr.InvalidRequest.Code, "MemberEpoch is invalid.")
	check(call("q", "m", 3, nil), kerr.GroupIDNotFound.Code, "Share group q not found.")
	check(call("q", "m", -1, nil), kerr.GroupIDNotFound.Code, "Group q not found.")
	check(call("q", "m", 0, []string{"foo"}), 0, "")
	check(call("q", "x", 3, nil), kerr.UnknownMemberID.Code, "Member x is not a member of group q.")
	check(call("q", "m", 7, nil), kerr.FencedMemberEpoch.Code, "The share group member has a greater member epoch (7) than the one known by the group coordinator (2). The member must abandon all its partitions and rejoin.")
	check(call("q", "m", 1, nil), kerr.FencedMemberEpoch.Code, "The share group member has a smaller member epoch (1) than the one known by the group coordinator (2), and it does not match the previous member epoch (0). The member must abandon all its partitions and rejoin.")
	// A consumer group's id is not a share group's, and the other way.
	cm := &kipMember{group: "c", id: "cm", topics: []string{"foo"}}
	if r := h.hb(cm, false); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	check(call("c", "m", 0, []string{"foo"}), kerr.GroupIDNotFound.Code, "Group c is not a share group.")
	if r := h.hb(&kipMember{group: "q", id: "k", topics: []string{"foo"}}, false); r.ErrorCode != kerr.GroupIDNotFound.Code || *r.ErrorMessage != "Group q is not a consumer group." {
		t.Fatalf("consumer heartbeat to a share group: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	// Leaving answers epoch -1.
	resp := call("q", "m", -1, nil)
	if resp.ErrorCode != 0 || resp.MemberEpoch != -1 || *resp.MemberID != "m" {
		t.Fatalf("leave: %+v", resp)
	}
}

func TestShareGroupMaxSizeSessionExpiryAndDelete(t *testing.T) {
	st := &fakeShareState{}
	h := newHarness(t, func(c *Config) { c.ShareState = st; c.ShareMaxSize = 2 })
	st.topics = h.topics
	a := &shareMemberSim{group: "q", id: "a", topics: []string{"bar"}}
	b := &shareMemberSim{group: "q", id: "b", topics: []string{"bar"}}
	c := &shareMemberSim{group: "q", id: "c", topics: []string{"bar"}}
	h.shareHB(a, false)
	h.shareHB(b, false)
	if r := h.shareHB(c, false); r.ErrorCode != kerr.GroupMaxSizeReached.Code || *r.ErrorMessage != "The share group has reached its maximum capacity of 2 members." {
		t.Fatalf("third member: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	h.waitShareInitialized("q", "bar", 4)
	del := func() int16 {
		resp := h.c.DeleteGroups(context.Background(), &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"q"}})
		return resp.Groups[0].ErrorCode
	}
	if code := del(); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("deleting a group with members: %d", code)
	}
	list := func() []kmsg.ListGroupsResponseGroup {
		return h.c.ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"share"}}).Groups
	}
	if gs := list(); len(gs) != 1 || gs[0].GroupState != "Stable" || gs[0].ProtocolType != "share" || gs[0].GroupType != "share" {
		t.Fatalf("listed %+v", gs)
	}
	// a keeps heartbeating; b's session (45 s) lapses.
	for range 10 {
		h.advance(5 * time.Second)
		h.shareHB(a, false)
	}
	if r := h.shareHB(b, false); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member's heartbeat: %d", r.ErrorCode)
	}
	h.shareHB(&shareMemberSim{group: "q", id: "a", epoch: -1}, false)
	if gs := list(); len(gs) != 1 || gs[0].GroupState != "Empty" {
		t.Fatalf("listed %+v", gs)
	}
	if code := del(); code != 0 {
		t.Fatalf("deleting the empty group: %d", code)
	}
	if want := []string{"q bar[0 1 2 3]"}; !slices.Equal(st.deletes, want) {
		t.Fatalf("share state deleted %v, want %v", st.deletes, want)
	}
	if gs := list(); len(gs) != 0 {
		t.Fatalf("listed after delete: %+v", gs)
	}
	// Deleted for good: a reload finds nothing.
	h.c = h.reload()
	if gs := list(); len(gs) != 0 {
		t.Fatalf("listed after reload: %+v", gs)
	}
}

func TestShareAssignorBalanceAndStickiness(t *testing.T) {
	t1, t2 := [16]byte{1}, [16]byte{2}
	parts := map[[16]byte][]int32{t1: {0, 1, 2, 3, 4}, t2: {0, 1}}
	both := [][16]byte{t1, t2}
	out := assignShare([]shareAssignMember{{id: "a", topics: both}, {id: "b", topics: both}}, parts)
	if na, nb := count(out["a"]), count(out["b"]); na+nb != 7 || na < 3 || nb < 3 {
		t.Fatalf("a %v b %v", out["a"], out["b"])
	}
	// A third member joins: the first two keep what they can.
	next := assignShare([]shareAssignMember{{id: "a", topics: both, previous: out["a"]}, {id: "b", topics: both, previous: out["b"]}, {id: "c", topics: both}}, parts)
	kept := 0
	for _, id := range []string{"a", "b"} {
		for t, ps := range next[id] {
			for _, p := range ps {
				if slices.Contains(out[id][t], p) {
					kept++
				}
			}
		}
	}
	if count(next["c"]) < 2 || kept < 4 {
		t.Fatalf("after c joined: %v (kept %d)", next, kept)
	}
	// Heterogeneous: per topic among its subscribers.
	het := assignShare([]shareAssignMember{{id: "a", topics: [][16]byte{t1}}, {id: "b", topics: [][16]byte{t2}}}, parts)
	if len(het["a"][t1]) != 5 || len(het["b"][t2]) != 2 || len(het["a"][t2]) != 0 {
		t.Fatalf("heterogeneous %v", het)
	}
}

func TestShareGroupOffsetsAlterAndDelete(t *testing.T) {
	h, st := newShareHarness(t)
	alter := func(group string, offsets map[int32]int64) *kmsg.AlterShareGroupOffsetsResponse {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = group
		rt := kmsg.AlterShareGroupOffsetsRequestTopic{Topic: "bar"}
		for p, o := range offsets {
			rt.Partitions = append(rt.Partitions, kmsg.AlterShareGroupOffsetsRequestTopicPartition{Partition: p, StartOffset: o})
		}
		req.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{rt}
		return h.c.AlterShareGroupOffsets(context.Background(), req)
	}
	// A group that does not exist is created by the alter; partition 9
	// of the four-partition topic does not exist.
	resp := alter("q", map[int32]int64{1: 42, 9: 0})
	codes := map[int32]int16{}
	for _, p := range resp.Topics[0].Partitions {
		codes[p.Partition] = p.ErrorCode
	}
	if resp.ErrorCode != 0 || codes[1] != 0 || codes[9] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("alter: %d %v", resp.ErrorCode, codes)
	}
	if want := []string{"q 1 barmap[1:42]"}; !slices.Equal(st.inits, want) {
		t.Fatalf("initialized %v, want %v", st.inits, want)
	}
	parts, _ := h.c.InitializedSharePartitions("q")
	bar, _ := h.topics.TopicByName("bar")
	if !slices.Equal(parts[bar.ID], []int32{1}) {
		t.Fatalf("initialized partitions %v", parts)
	}
	// With a member the group is not empty.
	h.shareHB(&shareMemberSim{group: "q", id: "m", topics: []string{"bar"}}, false)
	if resp := alter("q", map[int32]int64{1: 0}); resp.ErrorCode != kerr.NonEmptyGroup.Code || *resp.ErrorMessage != "The group is not empty." {
		t.Fatalf("alter of a group with a member: %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	h.shareHB(&shareMemberSim{group: "q", id: "m", epoch: -1}, false)
	del := func(topics ...string) *kmsg.DeleteShareGroupOffsetsResponse {
		req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		req.GroupID = "q"
		for _, tn := range topics {
			req.Topics = append(req.Topics, kmsg.DeleteShareGroupOffsetsRequestTopic{Topic: tn})
		}
		return h.c.DeleteShareGroupOffsets(context.Background(), req)
	}
	h.waitShareInitialized("q", "bar", 4)
	d := del("bar", "foo")
	got := map[string]int16{}
	for _, rt := range d.Topics {
		got[rt.Topic] = rt.ErrorCode
	}
	if d.ErrorCode != 0 || got["bar"] != 0 || got["foo"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("delete: %d %v", d.ErrorCode, got)
	}
	if want := []string{"q bar[0 1 2 3]"}; !slices.Equal(st.deletes, want) {
		t.Fatalf("deleted %v, want %v", st.deletes, want)
	}
	if parts, _ := h.c.InitializedSharePartitions("q"); len(parts) != 0 {
		t.Fatalf("initialized after delete: %v", parts)
	}
	req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	req.GroupID = "nope"
	if r := h.c.DeleteShareGroupOffsets(context.Background(), req); r.ErrorCode != kerr.GroupIDNotFound.Code || *r.ErrorMessage != "Group nope not found." {
		t.Fatalf("delete of an unknown group: %d %v", r.ErrorCode, r.ErrorMessage)
	}
}
