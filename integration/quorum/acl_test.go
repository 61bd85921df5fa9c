package quorum

import (
	"context"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestACLsAcrossASplitCluster: with StandardAuthorizer on every node of a
// cluster with controllers apart, ACLs created through one broker
// (forwarded to the active controller in an Envelope) are listed and
// enforced by every broker, survive a failover of the active controller,
// and deleting them through another broker lifts them everywhere.
func TestACLsAcrossASplitCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a cluster of gregor processes")
	}
	ctrls, brokers := node.StartSplit(t, 3, 2,
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"allow.everyone.if.no.acl.found=true",
		"broker.heartbeat.interval.ms=500")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitUnfenced(ctx, t, brokers)
	adm := kadm.NewClient(node.NewClient(t, node.Addrs(brokers)))
	if res, err := adm.CreateTopic(ctx, 2, 2, nil, "guarded"); err != nil || res.Err != nil {
		t.Fatalf("creating the topic: %v %v", err, res.Err)
	}
	first := node.NewClient(t, []string{brokers[0].Addr()})
	create := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "guarded", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:ANONYMOUS", "*", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeDeny
	create.Creations = append(create.Creations, c)
	if resp, err := create.RequestWith(ctx, first); err != nil || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("creating the ACL through broker 1: %v %+v", err, resp)
	}
	metadataCode := func(n *node.Node) int16 {
		cl := node.NewClient(t, []string{n.Addr()})
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("guarded")
		req.Topics = append(req.Topics, rt)
		resp, err := cl.Broker(int(n.ID)).Request(ctx, req)
		if err != nil {
			return -100
		}
		return resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode
	}
	listed := func(n *node.Node) int {
		cl := node.NewClient(t, []string{n.Addr()})
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		resp, err := cl.Broker(int(n.ID)).Request(ctx, req)
		if err != nil || resp.(*kmsg.DescribeACLsResponse).ErrorCode != 0 {
			return -1
		}
		return len(resp.(*kmsg.DescribeACLsResponse).Resources)
	}
	for _, b := range brokers {
		node.WaitFor(t, 10*time.Second, "the ACL enforced and listed by every broker", func() bool {
			return metadataCode(b) == kerr.TopicAuthorizationFailed.Code && listed(b) == 1
		})
	}
	old, err := activeController(ctx, t, brokers[0])
	if err != nil || old < 101 {
		t.Fatalf("active controller: %d %v", old, err)
	}
	ctrls[old-101].Kill()
	node.WaitFor(t, 15*time.Second, "a new active controller", func() bool {
		id, err := activeController(ctx, t, brokers[1])
		return err == nil && id != old && id > 0
	})
	second := node.NewClient(t, []string{brokers[1].Addr()})
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	var matched int
	node.WaitFor(t, 15*time.Second, "the ACL deleted through broker 2 after the failover", func() bool {
		resp, err := del.RequestWith(ctx, second)
		if err != nil || resp.Results[0].ErrorCode != 0 {
			return false
		}
		matched = len(resp.Results[0].MatchingACLs)
		return true
	})
	if matched != 1 {
		t.Fatalf("the delete matched %d ACLs: the ACL did not survive the failover", matched)
	}
	for _, b := range brokers {
		node.WaitFor(t, 10*time.Second, "the ACL lifted on every broker", func() bool {
			return metadataCode(b) == 0 && listed(b) == 0
		})
	}
}
