package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A GROUP config committed through IncrementalAlterConfigs is described
// and reaches the group's members on their next heartbeat.
func TestGroupConfigsAlterDescribeAndApply(t *testing.T) {
	const groupID = "configured"
	n := startGroupTestNode(t, 1)
	c := n.dial(t)
	waitGroupCoordinator(t, n, c, groupID)

	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.MemberEpoch = 1, groupID, "m-1", 0
	hb.RebalanceTimeoutMillis = 30000
	hb.SubscribedTopicNames = []string{}
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp := c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode != 0 || resp.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("join: %v interval %d", kerr.ErrorForCode(resp.ErrorCode), resp.HeartbeatIntervalMillis)
	}

	alter := func(value string) kmsg.IncrementalAlterConfigsResponseResource {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.Version = 1
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, groupID
		r.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "consumer.heartbeat.interval.ms", Value: kmsg.StringPtr(value)}}
		req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{r}
		return c.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
	}
	if r := alter("20000"); r.ErrorCode != kerr.InvalidConfig.Code || r.ErrorMessage == nil ||
		*r.ErrorMessage != "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms" {
		t.Fatalf("out-of-bounds value: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	if r := alter("6000"); r.ErrorCode != 0 {
		t.Fatalf("alter: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}

	desc := kmsg.NewPtrDescribeConfigsRequest()
	desc.Version = 4
	desc.IncludeSynonyms = true
	desc.Resources = []kmsg.DescribeConfigsRequestResource{
		{ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: groupID, ConfigNames: []string{"consumer.heartbeat.interval.ms"}},
		{ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: ""},
		{ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: "never-seen"},
	}
	dresp := c.roundTrip(desc).(*kmsg.DescribeConfigsResponse)
	got := dresp.Resources[0]
	if got.ErrorCode != 0 || len(got.Configs) != 1 || got.Configs[0].Value == nil || *got.Configs[0].Value != "6000" ||
		got.Configs[0].Source != kmsg.ConfigSourceGroupConfig || len(got.Configs[0].ConfigSynonyms) != 2 {
		t.Fatalf("describe: %+v", got)
	}
	if e := dresp.Resources[1]; e.ErrorCode != kerr.InvalidRequest.Code || e.ErrorMessage == nil || *e.ErrorMessage != "Group name must not be empty" {
		t.Fatalf("describe of the empty group name: %+v", e)
	}
	if e := dresp.Resources[2]; e.ErrorCode != 0 || len(e.Configs) != 17 {
		t.Fatalf("describe of a group that does not exist: %v, %d configs", kerr.ErrorForCode(e.ErrorCode), len(e.Configs))
	}

	// The member's next heartbeat carries the group's interval.
	hb.MemberEpoch = resp.MemberEpoch
	hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames, hb.Topics = -1, nil, nil
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp = c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("heartbeat: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		if resp.HeartbeatIntervalMillis == 6000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("heartbeat interval %d, want the group's 6000", resp.HeartbeatIntervalMillis)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
