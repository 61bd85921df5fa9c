package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// streamsJoinRequest is a first heartbeat whose one subtopology reads
// sources and keeps its state in changelog.
func streamsJoinRequest(group string, sources []string, changelog string) *kmsg.StreamsGroupHeartbeatRequest {
	req := kmsg.NewPtrStreamsGroupHeartbeatRequest()
	req.Group, req.MemberID, req.RebalanceTimeoutMillis, req.ProcessID = group, "member-1", 30000, kmsg.StringPtr("process-1")
	req.EndpointInformationEpoch = -1
	req.ActiveTasks, req.StandbyTasks, req.WarmupTasks = []kmsg.TaskIDs{}, []kmsg.TaskIDs{}, []kmsg.TaskIDs{}
	st := kmsg.NewStreamsGroupHeartbeatRequestTopologySubtopology()
	st.SubtopologyID, st.SourceTopics, st.SourceTopicRegex = "0", sources, []string{}
	if changelog != "" {
		cl := kmsg.NewTopicInfo()
		cl.Topic, cl.Configs = changelog, []kmsg.TopicInfoConfig{{Key: "cleanup.policy", Value: "compact"}}
		st.StateChangelogTopics = []kmsg.TopicInfo{cl}
	}
	req.Topology = &kmsg.StreamsGroupHeartbeatRequestTopology{Subtopologies: []kmsg.StreamsGroupHeartbeatRequestTopologySubtopology{st}}
	return req
}

// TestStreamsGroupHeartbeatGateAndTopics: without streams.version the
// API answers UNSUPPORTED_VERSION; with it, a topology naming an internal
// or invalid topic is refused as Kafka refuses it, and the changelog the
// coordinator finds missing is created by the broker with the partition
// count (the input's) and configs the topology asked for.
func TestStreamsGroupHeartbeatGateAndTopics(t *testing.T) {
	off := startTestNodeWithFeatures(t, map[string]string{"offsets.topic.num.partitions": "1"}, map[string]int16{"group.version": 1}, nil, nil)
	resp := call[*kmsg.StreamsGroupHeartbeatResponse](t, off.addr, streamsJoinRequest("g", []string{"in"}, ""))
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("streams.version 0: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(resp.ErrorCode))
	}

	n := startTestNodeWithFeatures(t, map[string]string{"offsets.topic.num.partitions": "1", "group.streams.initial.rebalance.delay.ms": "0"},
		map[string]int16{"group.version": 1, "streams.version": 1}, nil, nil)
	for _, tc := range []struct {
		sources []string
		msg     string
	}{
		{[]string{"in", "__consumer_offsets"}, "Use of Kafka internal topics __consumer_offsets in a Kafka Streams topology is prohibited."},
		{[]string{"in", "bad topic"}, "Topic names bad topic are not valid topic names."},
	} {
		resp := call[*kmsg.StreamsGroupHeartbeatResponse](t, n.addr, streamsJoinRequest("g", tc.sources, ""))
		if resp.ErrorCode != kerr.StreamsInvalidTopology.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != tc.msg {
			t.Errorf("sources %v: %v %v, want STREAMS_INVALID_TOPOLOGY %q", tc.sources, kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage, tc.msg)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "in"); err != nil {
		t.Fatal(err)
	}
	req := streamsJoinRequest("g", []string{"in"}, "g-store-changelog")
	var last *kmsg.StreamsGroupHeartbeatResponse
	for {
		last = call[*kmsg.StreamsGroupHeartbeatResponse](t, n.addr, req)
		switch last.ErrorCode {
		case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code:
			// __consumer_offsets is created when a client first looks
			// for a coordinator, as in Kafka, then loaded.
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.CoordinatorKeys = []string{"g"}
			call[*kmsg.FindCoordinatorResponse](t, n.addr, fc)
			if ctx.Err() != nil {
				t.Fatalf("no coordinator after 30 s: %v", kerr.ErrorForCode(last.ErrorCode))
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if last.ErrorCode != 0 {
			t.Fatalf("heartbeat: %v %v", kerr.ErrorForCode(last.ErrorCode), last.ErrorMessage)
		}
		if len(last.ActiveTasks) > 0 && len(last.Status) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no tasks after 30 s; last statuses %+v", last.Status)
		}
		time.Sleep(100 * time.Millisecond)
		req = kmsg.NewPtrStreamsGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.EndpointInformationEpoch = "g", "member-1", last.MemberEpoch, -1
	}
	if got := last.ActiveTasks[0].Partitions; len(got) != 4 {
		t.Fatalf("active tasks %v, want the 4 of the input", got)
	}
	details, err := adm.ListTopics(ctx, "g-store-changelog")
	if err != nil {
		t.Fatal(err)
	}
	if d := details["g-store-changelog"]; d.Err != nil || len(d.Partitions) != 4 {
		t.Fatalf("changelog: %v with %d partitions, want 4", d.Err, len(d.Partitions))
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "g-store-changelog")
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On("g-store-changelog", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range c.Configs {
		if kv.Key == "cleanup.policy" && (kv.Value == nil || *kv.Value != "compact") {
			t.Fatalf("changelog cleanup.policy %v, want compact", kv.Value)
		}
	}
}
