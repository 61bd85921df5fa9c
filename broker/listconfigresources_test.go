package broker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListConfigResources lists groups with configs (the way kafka-configs
// finds a group without members), brokers and topics, in Kafka's type
// order; a type the version does not know fails the request.
func TestListConfigResources(t *testing.T) {
	n := startGroupTestNode(t, 1)
	createTopic(t, n, "listed", 1, nil)
	c := n.dial(t)
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	alter.Version = 1
	for _, g := range []string{"with-config-b", "with-config-a"} {
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g
		r.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.isolation.level", Value: kmsg.StringPtr("read_committed")}}
		alter.Resources = append(alter.Resources, r)
	}
	for _, r := range c.roundTrip(alter).(*kmsg.IncrementalAlterConfigsResponse).Resources {
		if r.ErrorCode != 0 {
			t.Fatalf("alter %s: %v", r.ResourceName, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	list := func(version int16, types ...int8) *kmsg.ListConfigResourcesResponse {
		req := kmsg.NewPtrListConfigResourcesRequest()
		req.Version, req.ResourceTypes = version, types
		return c.roundTrip(req).(*kmsg.ListConfigResourcesResponse)
	}
	render := func(resp *kmsg.ListConfigResourcesResponse) []string {
		var out []string
		for _, r := range resp.ConfigResources {
			out = append(out, fmt.Sprintf("%d:%s", r.Type, r.Name))
		}
		return out
	}
	if got := render(list(1)); !slices.Equal(got, []string{"32:with-config-a", "32:with-config-b", "8:1", "4:1", "2:listed"}) {
		t.Errorf("every type: %v", got)
	}
	if got := render(list(1, 4, 32)); !slices.Equal(got, []string{"32:with-config-a", "32:with-config-b", "4:1"}) {
		t.Errorf("groups and brokers: %v", got)
	}
	if resp := list(0); resp.ErrorCode != 0 || len(resp.ConfigResources) != 0 {
		t.Errorf("v0 lists client metrics only: %+v", resp)
	}
	if resp := list(1, 99); resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Errorf("unknown type: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}
