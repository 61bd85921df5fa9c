package broker

import (
	"context"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/controller"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startAuthzNode starts a combined node whose broker fronts its own
// controller (as cmd/gregor wires it), with the authorizer configured
// (nil: none).
func startAuthzNode(t testing.TB, opts *authz.Options, overrides map[string]string) *testNode {
	t.Helper()
	return startTestNodeWithOptions(t, overrides, map[string]int16{"group.version": 1}, nil, nil, func(o *Options) {
		o.LocalController = o.Metadata.(*controller.Controller)
		o.Authorizer = opts
	})
}

// admin is a client of n for hand-built requests.
func admin(t testing.TB, n *testNode) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func aclCreation(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, pt
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, perm
	return c
}

// createACLsOn creates ACLs through n and fails the test on any error.
func createACLsOn(t testing.TB, cl *kgo.Client, cs ...kmsg.CreateACLsRequestCreation) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = cs
	resp, err := req.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Fatalf("creating ACLs: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
	}
}

func describeAll(t testing.TB, cl *kgo.Client) *kmsg.DescribeACLsResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestACLAPIsWithoutAuthorizer(t *testing.T) {
	n := startAuthzNode(t, nil, nil)
	cl := admin(t, n)
	if resp := describeAll(t, cl); resp.ErrorCode != kerr.SecurityDisabled.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != "No Authorizer is configured on the broker" {
		t.Fatalf("describe: %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	create := kmsg.NewPtrCreateACLsRequest()
	create.Creations = []kmsg.CreateACLsRequestCreation{aclCreation(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral, "User:a", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)}
	cr, err := create.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if r := cr.Results[0]; r.ErrorCode != kerr.SecurityDisabled.Code || r.ErrorMessage == nil || *r.ErrorMessage != "No Authorizer is configured." {
		t.Fatalf("create: %+v", r)
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = []kmsg.DeleteACLsRequestFilter{f}
	dr, err := del.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if r := dr.Results[0]; r.ErrorCode != kerr.SecurityDisabled.Code || r.ErrorMessage == nil || *r.ErrorMessage != "No Authorizer is configured." {
		t.Fatalf("delete: %+v", r)
	}
}

func TestACLAPIsRoundTrip(t *testing.T) {
	n := startAuthzNode(t, &authz.Options{AllowEveryoneIfNoACLFound: true}, nil)
	cl := admin(t, n)
	lit, pre := kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	createACLsOn(t, cl,
		aclCreation(kmsg.ACLResourceTypeTopic, "orders", lit, "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "orders", lit, "User:bob", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny),
		aclCreation(kmsg.ACLResourceTypeTopic, "ord", pre, "User:alice", kmsg.ACLOperationDescribe, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeGroup, "g", lit, "User:*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
	)
	all := describeAll(t, cl)
	if all.ErrorCode != 0 || len(all.Resources) != 3 {
		t.Fatalf("describe all: %+v", all)
	}
	// MATCH on a topic name finds its literal and prefixed ACLs.
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("orders"), kmsg.ACLResourcePatternTypeMatch
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	req.Principal = kmsg.StringPtr("User:alice")
	resp, err := req.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, r := range resp.Resources {
		got += len(r.ACLs)
	}
	if got != 2 {
		t.Fatalf("match for User:alice on orders: %+v", resp.Resources)
	}
	// Validation errors come back per creation.
	bad := kmsg.NewPtrCreateACLsRequest()
	bad.Creations = []kmsg.CreateACLsRequestCreation{
		aclCreation(kmsg.ACLResourceTypeCluster, "other", lit, "User:a", kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "t", lit, "nocolon", kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow),
	}
	br, err := bad.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if br.Results[0].ErrorCode != kerr.InvalidRequest.Code || *br.Results[0].ErrorMessage != "The only valid name for the CLUSTER resource is kafka-cluster" {
		t.Fatalf("cluster name: %+v", br.Results[0])
	}
	if br.Results[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("principal: %+v", br.Results[1])
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = []kmsg.DeleteACLsRequestFilter{f}
	dr, err := del.RequestWith(ctxFor(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if r := dr.Results[0]; r.ErrorCode != 0 || len(r.MatchingACLs) != 3 {
		t.Fatalf("delete topics' ACLs: %+v", r)
	}
	if left := describeAll(t, cl); len(left.Resources) != 1 || left.Resources[0].ResourceType != kmsg.ACLResourceTypeGroup {
		t.Fatalf("after delete: %+v", left.Resources)
	}
}

// TestACLRequestsWithUnknownCodesCloseTheConnection: Kafka fails to parse
// a request naming the UNKNOWN (0) code of an enum and closes the
// connection.
func TestACLRequestsWithUnknownCodesCloseTheConnection(t *testing.T) {
	n := startAuthzNode(t, &authz.Options{AllowEveryoneIfNoACLFound: true}, nil)
	describe := kmsg.NewPtrDescribeACLsRequest()
	describe.Version = 3
	describe.ResourceType, describe.ResourcePatternType = kmsg.ACLResourceTypeTopic, 0
	describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	create := kmsg.NewPtrCreateACLsRequest()
	create.Version = 3
	create.Creations = []kmsg.CreateACLsRequestCreation{aclCreation(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral, "User:a", 0, kmsg.ACLPermissionTypeAllow)}
	del := kmsg.NewPtrDeleteACLsRequest()
	del.Version = 3
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = 0, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = []kmsg.DeleteACLsRequestFilter{f}
	for _, req := range []kmsg.Request{describe, create, del} {
		c := dialRaw(t, n.addr)
		c.send(req, 1)
		c.expectClosed()
	}
}
