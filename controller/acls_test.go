package controller

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/vfs"
)

func creation(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, pt
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, host, op, perm
	return c
}

func createACLs(t *testing.T, c *Controller, cs ...kmsg.CreateACLsRequestCreation) []kmsg.CreateACLsResponseResult {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Version = 3
	req.Creations = cs
	resp := c.CreateACLs(ctxT(t), req)
	if len(resp.Results) != len(cs) {
		t.Fatalf("%d results for %d creations", len(resp.Results), len(cs))
	}
	return resp.Results
}

func msg(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func TestCreateACLsValidation(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	const (
		topic = kmsg.ACLResourceTypeTopic
		lit   = kmsg.ACLResourcePatternTypeLiteral
		read  = kmsg.ACLOperationRead
		allow = kmsg.ACLPermissionTypeAllow
	)
	invalid := kerr.InvalidRequest
	for _, tc := range []struct {
		name string
		c    kmsg.CreateACLsRequestCreation
		code int16
		msg  string
	}{
		{"ok", creation(topic, "t", lit, "User:a", "*", read, allow), 0, ""},
		{"cluster name", creation(kmsg.ACLResourceTypeCluster, "c", lit, "User:a", "*", kmsg.ACLOperationAlter, allow), invalid.Code,
			"The only valid name for the CLUSTER resource is kafka-cluster"},
		{"empty name", creation(topic, "", lit, "User:a", "*", read, allow), invalid.Code, "Invalid empty resource name"},
		{"unknown resource type", creation(99, "t", lit, "User:a", "*", read, allow), invalid.Code, "Invalid resourceType UNKNOWN"},
		{"unknown pattern type", creation(topic, "t", 9, "User:a", "*", read, allow), invalid.Code, "Invalid patternType UNKNOWN"},
		{"unknown operation", creation(topic, "t", lit, "User:a", "*", 42, allow), invalid.Code, "Invalid operation UNKNOWN"},
		{"unknown permission", creation(topic, "t", lit, "User:a", "*", read, 7), invalid.Code, "Invalid permissionType UNKNOWN"},
		{"principal without colon", creation(topic, "t", lit, "alice", "*", read, allow), invalid.Code,
			"Could not parse principal from `alice` (no colon is present separating the principal type from the principal name)"},
		{"any host string", creation(topic, "t", lit, "User:a", "not an address", read, allow), 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := createACLs(t, c, tc.c)[0]
			if r.ErrorCode != tc.code || msg(r.ErrorMessage) != tc.msg {
				t.Fatalf("got %d %q, want %d %q", r.ErrorCode, msg(r.ErrorMessage), tc.code, tc.msg)
			}
		})
	}
	// An ANY or MATCH code anywhere fails the whole request (Kafka cannot
	// build the binding), with no message.
	for _, bad := range []kmsg.CreateACLsRequestCreation{
		creation(kmsg.ACLResourceTypeAny, "t", lit, "User:a", "*", read, allow),
		creation(topic, "t", kmsg.ACLResourcePatternTypeMatch, "User:a", "*", read, allow),
		creation(topic, "t", kmsg.ACLResourcePatternTypeAny, "User:a", "*", read, allow),
		creation(topic, "t", lit, "User:a", "*", kmsg.ACLOperationAny, allow),
		creation(topic, "t", lit, "User:a", "*", read, kmsg.ACLPermissionTypeAny),
	} {
		before := c.Image().ACLs.Len()
		rs := createACLs(t, c, creation(topic, "fine", lit, "User:z", "*", read, allow), bad)
		for _, r := range rs {
			if r.ErrorCode != kerr.UnknownServerError.Code || r.ErrorMessage != nil {
				t.Fatalf("%+v: result %d %q", bad, r.ErrorCode, msg(r.ErrorMessage))
			}
		}
		if c.Image().ACLs.Len() != before {
			t.Fatal("a failed request created ACLs")
		}
	}
}

func TestCreateACLsDeduplicates(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	a := creation(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral, "User:a", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
	for _, r := range createACLs(t, c, a, a) {
		if r.ErrorCode != 0 {
			t.Fatalf("%+v", r)
		}
	}
	if n := c.Image().ACLs.Len(); n != 1 {
		t.Fatalf("%d ACLs after creating one twice in a request", n)
	}
	offset := c.Image().Offset
	if r := createACLs(t, c, a)[0]; r.ErrorCode != 0 {
		t.Fatalf("%+v", r)
	}
	if n := c.Image().ACLs.Len(); n != 1 {
		t.Fatalf("%d ACLs after creating an existing one", n)
	}
	if c.Image().Offset != offset {
		t.Fatal("creating an existing ACL wrote records")
	}
}

func TestDeleteACLs(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	const lit, pre = kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	const topic, group = kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup
	const allow, deny = kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny
	createACLs(t, c,
		creation(topic, "orders", lit, "User:a", "*", kmsg.ACLOperationRead, allow),
		creation(topic, "ord", pre, "User:a", "*", kmsg.ACLOperationWrite, allow),
		creation(topic, "*", lit, "User:b", "*", kmsg.ACLOperationRead, deny),
		creation(group, "g", lit, "User:a", "*", kmsg.ACLOperationRead, allow),
	)
	filter := func(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal *string) kmsg.DeleteACLsRequestFilter {
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal = rt, name, pt, principal
		f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		return f
	}
	name := func(s string) *string { return &s }
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Version = 3
	req.Filters = []kmsg.DeleteACLsRequestFilter{
		// MATCH finds the literal, the prefixed and the wildcard ACLs
		// that apply to the name.
		filter(topic, name("orders"), kmsg.ACLResourcePatternTypeMatch, nil),
		// The same ACL matched again is listed again, removed once.
		filter(topic, name("orders"), lit, name("User:a")),
		filter(99, nil, lit, nil),
	}
	resp := c.DeleteACLs(ctxT(t), req)
	if len(resp.Results) != 3 {
		t.Fatalf("%d results", len(resp.Results))
	}
	if r := resp.Results[0]; r.ErrorCode != 0 || len(r.MatchingACLs) != 3 {
		t.Fatalf("MATCH filter: %+v", r)
	}
	if r := resp.Results[1]; r.ErrorCode != 0 || len(r.MatchingACLs) != 1 || r.MatchingACLs[0].ResourceName != "orders" {
		t.Fatalf("literal filter: %+v", r)
	}
	if r := resp.Results[2]; r.ErrorCode != kerr.InvalidRequest.Code || msg(r.ErrorMessage) != "Unknown patternFilter." {
		t.Fatalf("unknown resource type: %+v", r)
	}
	left := c.Image().ACLs
	if left.Len() != 1 {
		t.Fatalf("%d ACLs left", left.Len())
	}
	for _, acl := range left.All() {
		if acl.ResourceType != group {
			t.Fatalf("left %v", acl)
		}
	}
	req.Filters = []kmsg.DeleteACLsRequestFilter{func() kmsg.DeleteACLsRequestFilter {
		f := filter(topic, nil, lit, nil)
		f.Operation = 77
		return f
	}()}
	if r := c.DeleteACLs(ctxT(t), req).Results[0]; r.ErrorCode != kerr.InvalidRequest.Code || msg(r.ErrorMessage) != "Unknown entryFilter." {
		t.Fatalf("unknown operation: %+v", r)
	}
}

func TestACLsSurviveRestart(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys, func(cfg *Config) { cfg.SnapshotMaxEntries = 3 })
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		createACLs(t, c, creation(kmsg.ACLResourceTypeTopic, n, kmsg.ACLResourcePatternTypeLiteral, "User:"+n, "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow))
	}
	want := metadata.ImageDigest(c.Image())
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2 := startTest(t, fsys)
	if c2.Image().ACLs.Len() != 5 || metadata.ImageDigest(c2.Image()) != want {
		t.Fatalf("after restart: %d ACLs", c2.Image().ACLs.Len())
	}
}
