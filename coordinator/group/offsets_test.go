package group

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func commitReq(group string, gen int32, member string, topic string, offsets map[int32]int64, meta string) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 9
	r.Group, r.Generation, r.MemberID = group, gen, member
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, o, 7, strPtr(meta)
		t.Partitions = append(t.Partitions, rp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

func (h *harness) fetch(c *Coordinator, group, topic string, partitions ...int32) kmsg.OffsetFetchResponseGroup {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 9
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rg.MemberEpoch = -1
	if topic != "" {
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: partitions}}
	}
	req.Groups = append(req.Groups, rg)
	return c.OffsetFetch(context.Background(), req).Groups[0]
}

func TestOffsetCommitFetchAndReload(t *testing.T) {
	h := newHarness(t, nil)
	const g = "simple"
	resp := h.c.OffsetCommit(context.Background(), commitReq(g, -1, "", "foo", map[int32]int64{0: 10, 1: 20}, "meta-data"))
	for _, p := range resp.Topics[0].Partitions {
		wantCode(t, "commit", p.ErrorCode, nil)
	}
	for _, c := range []*Coordinator{h.c, h.reload()} {
		f := h.fetch(c, g, "foo", 0, 1, 2)
		wantCode(t, "fetch", f.ErrorCode, nil)
		ps := f.Topics[0].Partitions
		if ps[0].Offset != 10 || ps[1].Offset != 20 || ps[2].Offset != -1 || *ps[0].Metadata != "meta-data" || ps[0].LeaderEpoch != 7 || ps[2].LeaderEpoch != -1 {
			t.Fatalf("fetched %+v", ps)
		}
		all := h.fetch(c, g, "")
		if len(all.Topics) != 1 || len(all.Topics[0].Partitions) != 2 {
			t.Fatalf("fetch all: %+v", all)
		}
		lg := c.ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 5})
		if len(lg.Groups) != 1 || lg.Groups[0].GroupState != "Empty" || lg.Groups[0].GroupType != "classic" || lg.Groups[0].ProtocolType != "" {
			t.Fatalf("list groups: %+v", lg.Groups)
		}
	}
	// Unknown groups answer -1 with no error.
	f := h.fetch(h.c, "nobody", "foo", 0)
	if f.ErrorCode != 0 || f.Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("unknown group fetch: %+v", f)
	}
	// The records are in Kafka's formats: key version 1, value version 3.
	recs := h.logFor(g).records(t)
	var key kmsg.OffsetCommitKey
	if err := key.ReadFrom(recs[0].key); err != nil || key.Version != 1 || key.Group != g || key.Topic != "foo" {
		t.Fatalf("key %+v %v", key, err)
	}
	var val kmsg.OffsetCommitValue
	if err := val.ReadFrom(recs[0].value); err != nil || val.Version != 3 || val.Metadata != "meta-data" {
		t.Fatalf("value %+v %v", val, err)
	}
}

func TestOffsetCommitErrors(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.OffsetMetadataMaxBytes = 4 })
	const g = "commit-errors"
	a, aJoin := h.joinNew(joinReq(g, ""))
	recv(t, aJoin)

	one := map[int32]int64{0: 1}
	tests := []struct {
		name string
		req  *kmsg.OffsetCommitRequest
		want *kerr.Error
	}{
		{"completing rebalance", commitReq(g, 1, a, "foo", one, ""), kerr.RebalanceInProgress},
		{"unknown member", commitReq(g, 1, "x", "foo", one, ""), kerr.UnknownMemberID},
		{"bad generation", commitReq(g, 5, a, "foo", one, ""), kerr.IllegalGeneration},
		{"admin commit to live group", commitReq(g, -1, "", "foo", one, ""), kerr.UnknownMemberID},
		{"missing group with generation v9", commitReq("missing", 3, "m", "foo", one, ""), kerr.GroupIDNotFound},
		{"empty group id", commitReq("", -1, "", "foo", one, ""), kerr.InvalidGroupID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := h.c.OffsetCommit(context.Background(), tc.req)
			wantCode(t, tc.name, resp.Topics[0].Partitions[0].ErrorCode, tc.want)
		})
	}
	old := commitReq("missing", 3, "m", "foo", one, "")
	old.Version = 8
	wantCode(t, "missing group v8", h.c.OffsetCommit(context.Background(), old).Topics[0].Partitions[0].ErrorCode, kerr.IllegalGeneration)

	recv(t, h.sync(g, a, 1, nil))
	perPartition := commitReq(g, 1, a, "foo", map[int32]int64{0: 1}, "toolong")
	perPartition.Topics = append(perPartition.Topics,
		kmsg.OffsetCommitRequestTopic{Topic: "nope", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}},
		kmsg.OffsetCommitRequestTopic{Topic: "foo", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 99, Offset: 1}, {Partition: 2, Offset: 5}}},
	)
	resp := h.c.OffsetCommit(context.Background(), perPartition)
	wantCode(t, "metadata too large", resp.Topics[0].Partitions[0].ErrorCode, kerr.OffsetMetadataTooLarge)
	wantCode(t, "unknown topic", resp.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
	wantCode(t, "unknown partition", resp.Topics[2].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
	wantCode(t, "good partition", resp.Topics[2].Partitions[1].ErrorCode, nil)
	if f := h.fetch(h.c, g, "foo", 0, 2); f.Topics[0].Partitions[0].Offset != -1 || f.Topics[0].Partitions[1].Offset != 5 {
		t.Fatalf("only the valid partition is stored: %+v", f.Topics[0].Partitions)
	}
}

func TestOffsetCommitAnsweredAfterAppend(t *testing.T) {
	h := newHarness(t, nil)
	const g = "durable"
	l := h.logFor(g)
	l.setFail(kerr.NotLeaderForPartition)
	resp := h.c.OffsetCommit(context.Background(), commitReq(g, -1, "", "foo", map[int32]int64{0: 10}, ""))
	wantCode(t, "failed append", resp.Topics[0].Partitions[0].ErrorCode, kerr.NotCoordinator)
	l.setFail(kerr.MessageTooLarge)
	resp = h.c.OffsetCommit(context.Background(), commitReq(g, -1, "", "foo", map[int32]int64{0: 10}, ""))
	wantCode(t, "too large", resp.Topics[0].Partitions[0].ErrorCode, kerr.InvalidCommitOffsetSize)
	l.setFail(nil)
	if f := h.fetch(h.c, g, "foo", 0); f.Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("a failed commit must not be visible: %+v", f)
	}
	resp = h.c.OffsetCommit(context.Background(), commitReq(g, -1, "", "foo", map[int32]int64{0: 11}, ""))
	wantCode(t, "commit", resp.Topics[0].Partitions[0].ErrorCode, nil)
	if f := h.fetch(h.c, g, "foo", 0); f.Topics[0].Partitions[0].Offset != 11 {
		t.Fatalf("fetch %+v", f)
	}
}

func TestOffsetsRetention(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.OffsetsRetentionMinutes = 10
		c.OffsetsRetentionCheckIntervalMs = 1000
	})
	const simple, live = "simple-retention", "live-retention"
	h.c.OffsetCommit(context.Background(), commitReq(simple, -1, "", "foo", map[int32]int64{0: 1}, ""))
	long := joinReq(live, "")
	long.SessionTimeoutMillis = 300000
	a, aJoin := h.joinNew(long)
	recv(t, aJoin)
	recv(t, h.sync(live, a, 1, nil))
	h.c.OffsetCommit(context.Background(), commitReq(live, 1, a, "foo", map[int32]int64{0: 1}, ""))
	h.c.OffsetCommit(context.Background(), commitReq(live, 1, a, "bar", map[int32]int64{0: 1}, ""))

	for i := 0; i < 11; i++ {
		h.advance(time.Minute)
		h.heartbeat(live, a, 1)
	}
	if f := h.fetch(h.c, simple, "foo", 0); f.Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("simple group's offset should have expired: %+v", f)
	}
	if lg := h.c.ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 5}); len(lg.Groups) != 1 || lg.Groups[0].Group != live {
		t.Fatalf("the expired simple group should be gone: %+v", lg.Groups)
	}
	// The stable consumer group keeps offsets of topics it subscribes to
	// (foo) and loses the others (bar).
	if f := h.fetch(h.c, live, "foo", 0); f.Topics[0].Partitions[0].Offset != 1 {
		t.Fatalf("subscribed offset expired: %+v", f)
	}
	if f := h.fetch(h.c, live, "bar", 0); f.Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("unsubscribed offset kept: %+v", f)
	}
	// Once the group is empty, retention counts from then.
	h.c.LeaveGroup(context.Background(), &kmsg.LeaveGroupRequest{Version: 5, Group: live, Members: []kmsg.LeaveGroupRequestMember{{MemberID: a}}})
	h.advance(9 * time.Minute)
	if f := h.fetch(h.c, live, "foo", 0); f.Topics[0].Partitions[0].Offset != 1 {
		t.Fatalf("expired too early: %+v", f)
	}
	h.advance(2 * time.Minute)
	if f := h.fetch(h.c, live, "foo", 0); f.Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("not expired: %+v", f)
	}
	if lg := h.c.ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 5}); len(lg.Groups) != 0 {
		t.Fatalf("empty groups without offsets are deleted: %+v", lg.Groups)
	}
	// And the deletion survives a restart.
	if lg := h.reload().ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 5}); len(lg.Groups) != 0 {
		t.Fatalf("after reload: %+v", lg.Groups)
	}
}

// Offsets expire by ExpiryNow: a clock stepped eight days ahead (Now)
// does not expire an empty group's offsets while the expiry clock (the
// step guard's) has not moved.
func TestOffsetsExpireByTheExpiryClock(t *testing.T) {
	var expiry *fakeClock
	h := newHarness(t, func(c *Config) {
		c.OffsetsRetentionMinutes = 10
		c.OffsetsRetentionCheckIntervalMs = 1000
		expiry = &fakeClock{now: c.Now()}
		c.ExpiryNow = expiry.Now
	})
	const g = "stepped-clock"
	h.c.OffsetCommit(context.Background(), commitReq(g, -1, "", "foo", map[int32]int64{0: 7}, ""))
	h.advance(8 * 24 * time.Hour)
	if f := h.fetch(h.c, g, "foo", 0); f.Topics[0].Partitions[0].Offset != 7 {
		t.Fatalf("with the wall clock stepped 8 days and the expiry clock not, the offset expired: %+v", f)
	}
	expiry.Advance(11 * time.Minute)
	h.advance(time.Second)
	if f := h.fetch(h.c, g, "foo", 0); f.Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("with the expiry clock past retention, the offset stayed: %+v", f)
	}
}

func TestOffsetDeleteAndDeleteGroups(t *testing.T) {
	h := newHarness(t, nil)
	const g = "deleting"
	a, aJoin := h.joinNew(joinReq(g, ""))
	recv(t, aJoin)
	recv(t, h.sync(g, a, 1, nil))
	h.c.OffsetCommit(context.Background(), commitReq(g, 1, a, "foo", map[int32]int64{0: 1}, ""))
	h.c.OffsetCommit(context.Background(), commitReq(g, 1, a, "bar", map[int32]int64{0: 1}, ""))

	od := h.c.OffsetDelete(context.Background(), &kmsg.OffsetDeleteRequest{Group: g, Topics: []kmsg.OffsetDeleteRequestTopic{
		{Topic: "foo", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		{Topic: "bar", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
	}})
	wantCode(t, "offset delete", od.ErrorCode, nil)
	wantCode(t, "subscribed topic", od.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)
	wantCode(t, "unsubscribed topic", od.Topics[1].Partitions[0].ErrorCode, nil)
	if f := h.fetch(h.c, g, "bar", 0); f.Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("bar not deleted: %+v", f)
	}
	wantCode(t, "offset delete unknown group", h.c.OffsetDelete(context.Background(), &kmsg.OffsetDeleteRequest{Group: "none"}).ErrorCode, kerr.GroupIDNotFound)

	dg := h.c.DeleteGroups(context.Background(), &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{g, "none"}})
	wantCode(t, "delete live group", dg.Groups[0].ErrorCode, kerr.NonEmptyGroup)
	wantCode(t, "delete unknown group", dg.Groups[1].ErrorCode, kerr.GroupIDNotFound)
	h.c.LeaveGroup(context.Background(), &kmsg.LeaveGroupRequest{Version: 5, Group: g, Members: []kmsg.LeaveGroupRequestMember{{MemberID: a}}})
	dg = h.c.DeleteGroups(context.Background(), &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{g}})
	wantCode(t, "delete empty group", dg.Groups[0].ErrorCode, nil)
	for _, c := range []*Coordinator{h.c, h.reload()} {
		if f := h.fetch(c, g, "foo", 0); f.Topics[0].Partitions[0].Offset != -1 {
			t.Fatalf("offsets survive deletion: %+v", f)
		}
		d := c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{g}})
		if d.Groups[0].State != "Dead" {
			t.Fatalf("deleted group described as %s", d.Groups[0].State)
		}
	}
}

func TestOffsetFetchOldVersions(t *testing.T) {
	h := newHarness(t, nil)
	const g = "old-fetch"
	h.c.OffsetCommit(context.Background(), commitReq(g, -1, "", "foo", map[int32]int64{3: 33}, "m"))
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 5
	req.Group = g
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "foo", Partitions: []int32{3}}}
	resp := h.c.OffsetFetch(context.Background(), req)
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].Offset != 33 || *resp.Topics[0].Partitions[0].Metadata != "m" {
		t.Fatalf("v5 fetch: %+v", resp)
	}
	h.c.Unload(h.c.PartitionFor(g))
	resp = h.c.OffsetFetch(context.Background(), req)
	wantCode(t, "unloaded partition", resp.ErrorCode, kerr.NotCoordinator)
}
