package controller

import (
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func sampleACLRecords() []Record {
	return []Record{
		&AccessControlEntryRecord{ID: protocol.UUID{1, 2, 3}, ACL: ACL{
			ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "orders", PatternType: kmsg.ACLResourcePatternTypePrefixed,
			Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeAllow,
		}},
		&RemoveAccessControlEntryRecord{ID: protocol.UUID{1, 2, 3}},
	}
}

// TestACLRecordsFrozen: version 0 of the ACL records is frozen; the
// encoding never changes once written.
func TestACLRecordsFrozen(t *testing.T) {
	in := sampleACLRecords()
	enc := EncodeRecords(in)
	got := hex.EncodeToString(enc)
	want := "01022d1200010203000000000000000000000000000200066f726465727304000a557365723a616c69636500012a030312130001020300000000000000000000000000"
	if got != want {
		t.Fatalf("encoding %s", got)
	}
	out, err := DecodeRecords(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n%#v\n%#v", in, out)
	}
	// A newer version of either is refused, not skipped.
	for _, typ := range []RecordType{RecordAccessControlEntry, RecordRemoveAccessControlEntry} {
		if _, err := DecodeRecords((&futureRecord{typ: typ, version: 1}).encoded()); !errors.Is(err, ErrUnsupportedRecord) {
			t.Fatalf("type %d version 1: err = %v", typ, err)
		}
	}
}

func TestACLReplayAndSnapshot(t *testing.T) {
	a := ACL{ResourceType: kmsg.ACLResourceTypeGroup, ResourceName: "g", PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:bob", Host: "10.0.0.1", Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeDeny}
	b := a
	b.ResourceName = "h"
	base := emptyImage("c")
	img, err := applyBatch(base, []Record{
		&AccessControlEntryRecord{ID: protocol.UUID{1}, ACL: a},
		&AccessControlEntryRecord{ID: protocol.UUID{2}, ACL: b},
	}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if base.ACLs.Len() != 0 {
		t.Fatal("applying a batch changed its base image")
	}
	if img.ACLs.Len() != 2 || !img.ACLs.Contains(a) || !img.ACLs.Contains(b) {
		t.Fatalf("acls %+v", img.ACLs)
	}
	// A batch that touches no ACL keeps the set (the broker rebuilds its
	// index only when the pointer changes).
	img2, err := applyBatch(img, []Record{&NoOpRecord{}}, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if img2.ACLs != img.ACLs {
		t.Fatal("a batch without ACL records made a new ACL set")
	}
	// A snapshot rebuilds the same set.
	again, err := applyBatch(emptyImage("c"), imageRecords(img), 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.ACLs, img.ACLs) || ImageDigest(again) != ImageDigest(img) {
		t.Fatal("snapshot does not rebuild the ACLs")
	}
	img3, err := applyBatch(img, []Record{&RemoveAccessControlEntryRecord{ID: protocol.UUID{1}}}, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if img3.ACLs.Contains(a) || !img.ACLs.Contains(a) || img3.ACLs.Len() != 1 {
		t.Fatal("removal")
	}
	if _, err := applyBatch(img3, []Record{&RemoveAccessControlEntryRecord{ID: protocol.UUID{1}}}, 4, 1); err == nil {
		t.Fatal("removing an unknown ACL id applied")
	}
}

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
	want := ImageDigest(c.Image())
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2 := startTest(t, fsys)
	if c2.Image().ACLs.Len() != 5 || ImageDigest(c2.Image()) != want {
		t.Fatalf("after restart: %d ACLs", c2.Image().ACLs.Len())
	}
}

func TestACLFilterMatches(t *testing.T) {
	str := func(s string) *string { return &s }
	lit := ACL{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "foo", PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:a", Host: "*", Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeAllow}
	wild := lit
	wild.ResourceName = "*"
	pre := lit
	pre.ResourceName, pre.PatternType = "fo", kmsg.ACLResourcePatternTypePrefixed
	anyFilter := ACLFilter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}
	with := func(mod func(*ACLFilter)) ACLFilter { f := anyFilter; mod(&f); return f }
	for _, tc := range []struct {
		name string
		f    ACLFilter
		acl  ACL
		want bool
	}{
		{"any", anyFilter, pre, true},
		{"type", with(func(f *ACLFilter) { f.ResourceType = kmsg.ACLResourceTypeGroup }), lit, false},
		{"any pattern, exact name", with(func(f *ACLFilter) { f.ResourceName = str("foo") }), lit, true},
		{"any pattern compares names only", with(func(f *ACLFilter) { f.ResourceName = str("foo") }), wild, false},
		{"literal pattern", with(func(f *ACLFilter) { f.PatternType = kmsg.ACLResourcePatternTypeLiteral }), pre, false},
		{"match: literal", with(func(f *ACLFilter) { f.ResourceName, f.PatternType = str("foo"), kmsg.ACLResourcePatternTypeMatch }), lit, true},
		{"match: wildcard", with(func(f *ACLFilter) { f.ResourceName, f.PatternType = str("foo"), kmsg.ACLResourcePatternTypeMatch }), wild, true},
		{"match: prefix", with(func(f *ACLFilter) { f.ResourceName, f.PatternType = str("foo"), kmsg.ACLResourcePatternTypeMatch }), pre, true},
		{"match: not a prefix", with(func(f *ACLFilter) { f.ResourceName, f.PatternType = str("f"), kmsg.ACLResourcePatternTypeMatch }), pre, false},
		{"principal", with(func(f *ACLFilter) { f.Principal = str("User:b") }), lit, false},
		{"host", with(func(f *ACLFilter) { f.Host = str("*") }), lit, true},
		{"operation", with(func(f *ACLFilter) { f.Operation = kmsg.ACLOperationWrite }), lit, false},
		{"permission", with(func(f *ACLFilter) { f.PermissionType = kmsg.ACLPermissionTypeAllow }), lit, true},
	} {
		if got := tc.f.Matches(tc.acl); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
