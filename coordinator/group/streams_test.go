package group

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// wordCountTopology is WordCountDemo's topology as the Java client sends
// it: subtopology 0 reads the input and writes the repartition topic,
// subtopology 1 reads it and keeps its counts in a changelog.
func wordCountTopology(input string) *kmsg.StreamsGroupHeartbeatRequestTopology {
	t := kmsg.NewStreamsGroupHeartbeatRequestTopology()
	s0 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s0.SubtopologyID, s0.SourceTopics, s0.SourceTopicRegex = "0", []string{input}, []string{}
	s0.RepartitionSinkTopics = []string{"app-repartition"}
	s1 := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	s1.SubtopologyID, s1.SourceTopicRegex = "1", []string{}
	rep := kmsg.NewTopicInfo()
	rep.Topic, rep.Configs = "app-repartition", []kmsg.TopicInfoConfig{{Key: "cleanup.policy", Value: "delete"}}
	cl := kmsg.NewTopicInfo()
	cl.Topic, cl.Configs = "app-changelog", []kmsg.TopicInfoConfig{{Key: "cleanup.policy", Value: "compact"}}
	s1.RepartitionSourceTopics = []kmsg.TopicInfo{rep}
	s1.StateChangelogTopics = []kmsg.TopicInfo{cl}
	t.Subtopologies = []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{s0, s1}
	return &t
}

func streamsJoin(group, member, process string, topology *kmsg.StreamsGroupHeartbeatRequestTopology) *kmsg.StreamsGroupHeartbeatRequest {
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = group, member, 0
	req.RebalanceTimeoutMillis, req.ProcessID, req.Topology = 300000, &process, topology
	req.EndpointInformationEpoch = -1
	req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	req.ClientTags = []kmsg.StreamsGroupHeartbeatRequestClientTag{}
	return req
}

// streamsBeat is a regular heartbeat reporting owned (nil: not reported).
func streamsBeat(group, member string, epoch int32, owned *tasksTuple) *kmsg.StreamsGroupHeartbeatRequest {
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.EndpointInformationEpoch = group, member, epoch, -1
	if owned != nil {
		req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = taskIDsOf(owned.Active), taskIDsOf(owned.Standby), taskIDsOf(owned.Warmup)
	}
	return req
}

func tasksOf(resp *kmsg.StreamsGroupHeartbeatResponse) *tasksTuple {
	if resp.ActiveTasks == nil {
		return nil
	}
	conv := func(ts []kmsg.TaskIDs) taskSet {
		out := taskSet{}
		for _, t := range ts {
			out[t.SubtopologyID] = slices.Clone(t.Partitions)
		}
		return out
	}
	return &tasksTuple{Active: conv(resp.ActiveTasks), Standby: conv(resp.StandbyTasks), Warmup: conv(resp.WarmupTasks)}
}

func statusCodes(resp *kmsg.StreamsGroupHeartbeatResponse) []int8 {
	var out []int8
	for _, s := range resp.Status {
		out = append(out, s.StatusCode)
	}
	return out
}

func (h *harness) streams(req *kmsg.StreamsGroupHeartbeatRequest) (*kmsg.StreamsGroupHeartbeatResponse, []kmsg.CreateTopicsRequestTopic) {
	h.t.Helper()
	res := h.c.StreamsGroupHeartbeat(context.Background(), Client{ID: "c", Host: "/127.0.0.1"}, req)
	return res.Response, res.Create
}

func TestStreamsGroupLifecycle(t *testing.T) {
	h := newHarness(t, nil)
	const g = "wc"

	// The first member: the internal topics are missing and the initial
	// rebalance delay runs.
	resp, create := h.streams(streamsJoin(g, "a", "p1", wordCountTopology("foo")))
	if resp.ErrorCode != 0 || resp.MemberEpoch != 1 { // the target of the initial delay: nothing, at assignment epoch 1
		t.Fatalf("join: %+v", resp)
	}
	if got := statusCodes(resp); !slices.Equal(got, []int8{statusAssignmentDelayed, statusMissingInternalTopics}) {
		t.Fatalf("join statuses %v (%v)", got, resp.Status)
	}
	var created []string
	for _, c := range create {
		created = append(created, fmt.Sprintf("%s/%d/%d/%s=%s", c.Topic, c.NumPartitions, c.ReplicationFactor, c.Configs[0].Name, *c.Configs[0].Value))
	}
	if want := []string{"app-changelog/6/-1/cleanup.policy=compact", "app-repartition/6/-1/cleanup.policy=delete"}; !slices.Equal(created, want) {
		t.Fatalf("topics to create %v, want %v", created, want)
	}
	h.topics.add("app-repartition", 6)
	h.topics.add("app-changelog", 6)
	h.advance(3 * time.Second)
	// The delay's end computed an (empty) assignment for the topology not
	// ready then; the next one waits for the assignment interval.
	resp, _ = h.streams(streamsBeat(g, "a", resp.MemberEpoch, &tasksTuple{}))
	if got := statusCodes(resp); !slices.Equal(got, []int8{statusAssignmentDelayed}) || resp.Status[0].StatusDetail != "Assignment delayed due to the configured assignment interval." {
		t.Fatalf("statuses %v right after the delay", resp.Status)
	}
	h.advance(time.Second)
	resp, create = h.streams(streamsBeat(g, "a", resp.MemberEpoch, &tasksTuple{}))
	if resp.ErrorCode != 0 || len(create) != 0 || len(resp.Status) != 0 {
		t.Fatalf("after the topics exist: %+v create %v", resp, create)
	}
	all := taskSet{"0": {0, 1, 2, 3, 4, 5}, "1": {0, 1, 2, 3, 4, 5}}
	a := tasksOf(resp)
	if a == nil || !a.Active.equal(all) {
		t.Fatalf("a's tasks %+v, want every task", a)
	}
	epochA := resp.MemberEpoch

	// A second member: a gives up half its tasks before b gets them.
	h.advance(time.Second)
	respB, _ := h.streams(streamsJoin(g, "b", "p2", wordCountTopology("foo")))
	if respB.ErrorCode != 0 || tasksOf(respB) == nil || tasksOf(respB).Active.equal(all) {
		t.Fatalf("b join: %+v", respB)
	}
	if n := len(tasksOf(respB).Active["0"]) + len(tasksOf(respB).Active["1"]); n != 0 {
		t.Fatalf("b got %d tasks while a still owns them all", n)
	}
	resp, _ = h.streams(streamsBeat(g, "a", epochA, a))
	if resp.ErrorCode != 0 || resp.MemberEpoch != epochA {
		t.Fatalf("a asked to revoke: %+v", resp)
	}
	kept := tasksOf(resp)
	if kept == nil || len(kept.Active["0"])+len(kept.Active["1"]) != 6 {
		t.Fatalf("a keeps %+v, want 6 tasks", kept)
	}
	if st := h.describeStreams(g).State; st != "Reconciling" {
		t.Fatalf("state %s while a revokes", st)
	}
	// a reports the revocation done.
	resp, _ = h.streams(streamsBeat(g, "a", epochA, kept))
	if resp.ErrorCode != 0 || resp.MemberEpoch <= epochA {
		t.Fatalf("a after revoking: %+v", resp)
	}
	respB, _ = h.streams(streamsBeat(g, "b", respB.MemberEpoch, &tasksTuple{}))
	b := tasksOf(respB)
	if b == nil || len(b.Active["0"])+len(b.Active["1"]) != 6 || overlaps(b.Active, kept.Active) {
		t.Fatalf("b's tasks %+v overlap a's %+v or are not half", b, kept)
	}
	h.streams(streamsBeat(g, "b", respB.MemberEpoch, b))
	d := h.describeStreams(g)
	if d.State != "Stable" || len(d.Members) != 2 || d.Epoch != d.AssignmentEpoch {
		t.Fatalf("describe: state %s epoch %d/%d members %d", d.State, d.Epoch, d.AssignmentEpoch, len(d.Members))
	}

	// A restart rebuilds the same group from the log.
	// (The configured topology is not persisted, as in Kafka: until the
	// next heartbeat the topology is described as the members sent it.)
	if n := d.Topology.Subtopologies[1].StateChangelogTopics[0].NumPartitions; n != 6 {
		t.Fatalf("described changelog partitions %d, want 6", n)
	}
	h.c = h.reload()
	d2 := h.describeStreams(g)
	d.Topology, d2.Topology = nil, nil
	if !reflect.DeepEqual(d, d2) {
		t.Fatalf("after reload:\n%+v\nwant\n%+v", d2, d)
	}

	// Offsets: a member at its epoch may commit, one with a newer epoch
	// may not.
	commit := func(member string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 9, g, member, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "foo"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = b.Active["0"][0]
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return h.c.OffsetCommit(context.Background(), req).Topics[0].Partitions[0].ErrorCode
	}
	if code := commit("b", respB.MemberEpoch); code != 0 {
		t.Fatalf("commit at the member's epoch: %v", kerr.ErrorForCode(code))
	}
	if code := commit("b", respB.MemberEpoch+1); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("commit with a newer epoch: %v", kerr.ErrorForCode(code))
	}

	// b leaves: a gets everything back.
	resp, _ = h.streams(streamsBeat(g, "b", -1, nil))
	if resp.ErrorCode != 0 || resp.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", resp)
	}
	h.advance(2 * time.Second)
	resp, _ = h.streams(streamsBeat(g, "a", d.Epoch, kept))
	if got := tasksOf(resp); got == nil || !got.Active.equal(all) {
		t.Fatalf("a after b left: %+v", got)
	}

	// Other protocols may not use the group; a non-empty one may not be
	// deleted.
	cresp := h.c.ConsumerGroupHeartbeat(context.Background(), Client{}, &kmsg.ConsumerGroupHeartbeatRequest{Group: g, MemberID: "x", RebalanceTimeoutMillis: 1000, SubscribedTopicNames: []string{"foo"}, Topics: []kmsg.ConsumerGroupHeartbeatRequestTopic{}})
	if cresp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer heartbeat to a streams group: %v", kerr.ErrorForCode(cresp.ErrorCode))
	}
	del := h.c.DeleteGroups(context.Background(), &kmsg.DeleteGroupsRequest{Groups: []string{g}})
	if del.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete of a live group: %v", kerr.ErrorForCode(del.Groups[0].ErrorCode))
	}
	list := h.c.ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"streams"}})
	if len(list.Groups) != 1 || list.Groups[0].GroupType != "streams" || list.Groups[0].ProtocolType != "streams" {
		t.Fatalf("list: %+v", list.Groups)
	}

	// The session of the last member lapses; the empty group is deleted.
	h.advance(46 * time.Second)
	if st := h.describeStreams(g).State; st != "Empty" {
		t.Fatalf("state %s after the session lapsed", st)
	}
	del = h.c.DeleteGroups(context.Background(), &kmsg.DeleteGroupsRequest{Groups: []string{g}})
	if del.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(del.Groups[0].ErrorCode))
	}
	if d := h.describeStreams(g); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe after delete: %+v", d)
	}
	if d := h.reload().describeStreamsGroup(g, false); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe after delete and reload: %+v", d)
	}
}

func (h *harness) describeStreams(g string) kmsg.StreamsGroupDescribeResponseGroup {
	h.t.Helper()
	return h.c.StreamsGroupDescribe(context.Background(), &kmsg.StreamsGroupDescribeRequest{Groups: []string{g}}).Groups[0]
}

func TestStreamsHeartbeatRefusals(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct {
		name string
		req  func() *kmsg.StreamsGroupHeartbeatRequest
		code int16
		msg  string
	}{
		{"static member", func() *kmsg.StreamsGroupHeartbeatRequest {
			r := streamsJoin("g", "m", "p", wordCountTopology("foo"))
			r.InstanceID = kmsg.StringPtr("i")
			return r
		}, kerr.InvalidRequest.Code, "Static membership is not yet supported."},
		{"no topology", func() *kmsg.StreamsGroupHeartbeatRequest { return streamsJoin("g", "m", "p", nil) },
			kerr.InvalidRequest.Code, "Topology must be non-null when (re-)joining."},
		{"no member id", func() *kmsg.StreamsGroupHeartbeatRequest { return streamsJoin("g", " ", "p", wordCountTopology("foo")) },
			kerr.InvalidRequest.Code, "MemberId can't be empty."},
		{"unknown group", func() *kmsg.StreamsGroupHeartbeatRequest { return streamsBeat("nope", "m", 3, nil) },
			kerr.GroupIDNotFound.Code, "Streams group nope not found."},
		{"changelog with partitions", func() *kmsg.StreamsGroupHeartbeatRequest {
			tp := wordCountTopology("foo")
			tp.Subtopologies[1].StateChangelogTopics[0].NumPartitions = 3
			return streamsJoin("g", "m", "p", tp)
		}, kerr.StreamsInvalidTopology.Code, "Changelog topic app-changelog must have an undefined partition count, but it is set to 3."},
	} {
		resp, _ := h.streams(tc.req())
		if resp.ErrorCode != tc.code || resp.ErrorMessage == nil || *resp.ErrorMessage != tc.msg {
			t.Errorf("%s: %v %v, want %v %q", tc.name, kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage, kerr.ErrorForCode(tc.code), tc.msg)
		}
	}
	// A missing source topic is a status, not an error; nothing is assigned.
	resp, _ := h.streams(streamsJoin("g2", "m", "p", wordCountTopology("absent")))
	if resp.ErrorCode != 0 || !slices.Contains(statusCodes(resp), statusMissingSourceTopics) {
		t.Fatalf("missing source: %+v", resp)
	}
	if d := h.describeStreams("g2"); d.State != "NotReady" {
		t.Fatalf("state %s with a missing source topic", d.State)
	}
}

func TestStickyAssignorStandbys(t *testing.T) {
	subs := []assignorSubtopology{{id: "0", numTasks: 4, stateful: true}}
	members := []assignorMember{{id: "a", process: "p1"}, {id: "b", process: "p2"}, {id: "c", process: "p3"}}
	first := stickyAssign(members, subs, 1)
	count := map[streamsTask]int{}
	for _, m := range members {
		a := first[m.id]
		for _, p := range a.Active["0"] {
			if a.Standby.has("0", p) {
				t.Fatalf("%s holds task 0_%d as active and standby", m.id, p)
			}
			count[streamsTask{"0", p}] += 10
		}
		for _, p := range a.Standby["0"] {
			count[streamsTask{"0", p}]++
		}
		if n := len(a.Active["0"]); n < 1 || n > 2 {
			t.Fatalf("%s has %d active tasks of 4 over 3 members", m.id, n)
		}
	}
	for p := int32(0); p < 4; p++ {
		if count[streamsTask{"0", p}] != 11 {
			t.Fatalf("task 0_%d: %d (want one active, one standby)", p, count[streamsTask{"0", p}])
		}
	}
	// Given its own output as the previous target, the assignor keeps it.
	for i := range members {
		members[i].prev = first[members[i].id]
	}
	if again := stickyAssign(members, subs, 1); !reflect.DeepEqual(again, first) {
		t.Fatalf("not sticky:\n%v\n%v", again, first)
	}
}

func TestStreamsRecordsRoundTrip(t *testing.T) {
	meta := streamsGroupMetadataValue{Epoch: 7, MetadataHash: -3, ValidatedTopologyEpoch: 0, LastAssignmentConfigs: []keyValue{{"num.standby.replicas", "1"}}}
	var meta2 streamsGroupMetadataValue
	if err := meta2.decode(meta.encode()); err != nil || !reflect.DeepEqual(meta, meta2) {
		t.Fatalf("group metadata: %v %+v", err, meta2)
	}
	mm := streamsMemberMetadataValue{RackID: kmsg.StringPtr("r"), ClientID: "c", ClientHost: "/h", RebalanceTimeoutMs: 5, TopologyEpoch: 0,
		ProcessID: "p", UserEndpoint: &streamsEndpoint{"host", 8080}, ClientTags: []keyValue{{"k", "v"}}}
	var mm2 streamsMemberMetadataValue
	if err := mm2.decode(mm.encode()); err != nil || !reflect.DeepEqual(mm, mm2) {
		t.Fatalf("member metadata: %v %+v", err, mm2)
	}
	cur := streamsCurrentAssignmentValue{MemberEpoch: 4, PreviousMemberEpoch: 3, State: streamsUnrevoked,
		Assigned: tasksTuple{Active: taskSet{"0": {1, 2}}, Standby: taskSet{"1": {0}}, Warmup: taskSet{}}, ActiveEpochs: map[string][]int32{"0": {3, 4}},
		PendingRevocation: tasksTuple{Active: taskSet{"0": {5}}}, PendingActiveEpochs: map[string][]int32{"0": {2}}}
	var cur2 streamsCurrentAssignmentValue
	if err := cur2.decode(cur.encode()); err != nil || cur2.MemberEpoch != 4 || !cur2.Assigned.Active.equal(cur.Assigned.Active) ||
		!reflect.DeepEqual(cur2.ActiveEpochs, cur.ActiveEpochs) || !reflect.DeepEqual(cur2.PendingActiveEpochs, cur.PendingActiveEpochs) ||
		!cur2.Assigned.Standby.equal(cur.Assigned.Standby) || !cur2.PendingRevocation.Active.equal(cur.PendingRevocation.Active) {
		t.Fatalf("current assignment: %v %+v", err, cur2)
	}
	topo := topologyFromRequest(wordCountTopology("foo"))
	topo.Subtopologies[1].CopartitionGroups = []streamsCopartitionGroup{{RepartitionSourceTopics: []int16{0}}}
	var topo2 streamsTopologyValue
	if err := topo2.decode(topo.encode()); err != nil || !sameTopology(topo, &topo2) {
		t.Fatalf("topology: %v %+v", err, topo2)
	}
	// No cut of a record decodes without an error or panics.
	for _, b := range [][]byte{meta.encode(), mm.encode(), cur.encode(), topo.encode()} {
		for i := 0; i < len(b); i++ {
			var a streamsGroupMetadataValue
			var m streamsMemberMetadataValue
			var c streamsCurrentAssignmentValue
			var tv streamsTopologyValue
			_, _, _, _ = a.decode(b[:i]), m.decode(b[:i]), c.decode(b[:i]), tv.decode(b[:i])
		}
	}
}

// FuzzDecodeStreamsRecords feeds arbitrary bytes to every streams record
// decoder: an error is fine, a panic is not.
func FuzzDecodeStreamsRecords(f *testing.F) {
	cur := streamsCurrentAssignmentValue{Assigned: tasksTuple{Active: taskSet{"0": {1}}}, ActiveEpochs: map[string][]int32{"0": {1}}}
	mm := streamsMemberMetadataValue{UserEndpoint: &streamsEndpoint{"h", 1}, ClientTags: []keyValue{{"k", "v"}}}
	meta := streamsGroupMetadataValue{ValidatedTopologyEpoch: 1, LastAssignmentConfigs: []keyValue{{"a", "b"}}}
	for _, seed := range [][]byte{cur.encode(), mm.encode(), meta.encode(), topologyFromRequest(wordCountTopology("foo")).encode(),
		encodeStreamsTargetMemberValue(tasksTuple{Active: taskSet{"1": {2}}})} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var a streamsGroupMetadataValue
		var m streamsMemberMetadataValue
		var c streamsCurrentAssignmentValue
		var tv streamsTopologyValue
		_, _, _, _ = a.decode(b), m.decode(b), c.decode(b), tv.decode(b)
		_, _ = decodeStreamsTargetMemberValue(b)
		if err := tv.decode(b); err == nil {
			var again streamsTopologyValue
			if err := again.decode(tv.encode()); err != nil {
				t.Fatalf("a decoded topology does not decode once re-encoded: %v", err)
			}
		}
	})
}

func TestStreamsConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		tweak func(*Config)
		want  string
	}{
		{func(c *Config) { c.StreamsSessionTimeoutMs = 30000 }, "group.streams.session.timeout.ms must be greater than or equal to group.streams.min.session.timeout.ms"},
		{func(c *Config) { c.StreamsMaxHeartbeatIntervalMs = 1000 }, "group.streams.max.heartbeat.interval.ms must be greater than or equal to group.streams.min.heartbeat.interval.ms"},
		{func(c *Config) { c.StreamsNumStandbyReplicas = 3 }, "group.streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"},
		{func(c *Config) {
			c.StreamsMinSessionTimeoutMs, c.StreamsSessionTimeoutMs = 5000, 5000
		}, "group.streams.heartbeat.interval.ms must be less than group.streams.session.timeout.ms"},
	} {
		cfg := DefaultConfig()
		tc.tweak(&cfg)
		if err := cfg.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
	if cfg := DefaultConfig(); cfg.Validate() != nil {
		t.Fatalf("the defaults are refused: %v", cfg.Validate())
	}
}
