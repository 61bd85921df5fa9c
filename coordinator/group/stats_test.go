package group

import (
	"context"
	"maps"
	"testing"
)

func TestStatsCountGroupsOffsetsAndEvents(t *testing.T) {
	h := newHarness(t, nil)
	if st := h.c.Stats(); st.Active != 3 || st.Loading != 0 || len(st.ClassicGroups) != 0 || st.Offsets != 0 {
		t.Fatalf("fresh coordinator: %+v", st)
	}

	// A classic group joins and completes its rebalance.
	member, joined := h.joinNew(joinReq("classic-g", ""))
	jr := recv(t, joined)
	wantCode(t, "join", jr.ErrorCode, nil)
	sr := recv(t, h.sync("classic-g", member, jr.Generation, map[string][]byte{member: {}}))
	wantCode(t, "sync", sr.ErrorCode, nil)
	// It commits two offsets, and a simple group one.
	for _, p := range h.c.OffsetCommit(context.Background(), commitReq("classic-g", jr.Generation, member, "foo", map[int32]int64{0: 5, 1: 7}, "")).Topics[0].Partitions {
		wantCode(t, "commit", p.ErrorCode, nil)
	}
	for _, p := range h.c.OffsetCommit(context.Background(), commitReq("simple-g", -1, "", "bar", map[int32]int64{0: 1}, "")).Topics[0].Partitions {
		wantCode(t, "commit", p.ErrorCode, nil)
	}
	// A consumer group's first member bumps its epoch.
	m := newKip("consumer-g", "member-1", "foo")
	if resp := h.hb(m, true); resp.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v", resp.ErrorCode)
	}

	st := h.c.Stats()
	if st.ClassicGroups["Stable"] != 1 || st.ClassicGroups["Empty"] != 1 || len(st.ClassicGroups) != 2 {
		t.Errorf("classic groups %v, want one Stable and one Empty", st.ClassicGroups)
	}
	if n := st.ConsumerGroups["Stable"] + st.ConsumerGroups["Reconciling"] + st.ConsumerGroups["Assigning"]; n != 1 || len(st.ConsumerGroups) != 1 {
		t.Errorf("consumer groups %v, want one", st.ConsumerGroups)
	}
	if st.Offsets != 3 || st.OffsetCommits != 3 {
		t.Errorf("offsets %d, commits %d, want 3 and 3", st.Offsets, st.OffsetCommits)
	}
	got := map[CommittedOffset]bool{}
	for _, o := range h.c.CommittedOffsets() {
		got[o] = true
	}
	want := map[CommittedOffset]bool{
		{Group: "classic-g", Topic: "foo", Partition: 0, Offset: 5}: true,
		{Group: "classic-g", Topic: "foo", Partition: 1, Offset: 7}: true,
		{Group: "simple-g", Topic: "bar", Partition: 0, Offset: 1}:  true,
	}
	if !maps.Equal(got, want) {
		t.Errorf("committed offsets %v, want %v", got, want)
	}
	if st.ClassicRebalances != 1 || st.ConsumerRebalances != 1 {
		t.Errorf("rebalances: classic %d, consumer %d, want 1 and 1", st.ClassicRebalances, st.ConsumerRebalances)
	}
	// A reload replays the groups and offsets, not the events: they
	// count what this coordinator did since it started.
	if st := h.reload().Stats(); st.Offsets != 3 || st.OffsetCommits != 0 || st.ClassicRebalances != 0 {
		t.Errorf("after a reload: %+v", st)
	}
}
