package metadata

import (
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/gregorbroker/gregor/protocol"
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
	base := EmptyImage("c")
	img, err := ApplyBatch(base, []Record{
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
	img2, err := ApplyBatch(img, []Record{&NoOpRecord{}}, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if img2.ACLs != img.ACLs {
		t.Fatal("a batch without ACL records made a new ACL set")
	}
	// A snapshot rebuilds the same set.
	again, err := ApplyBatch(EmptyImage("c"), ImageRecords(img), 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.ACLs, img.ACLs) || ImageDigest(again) != ImageDigest(img) {
		t.Fatal("snapshot does not rebuild the ACLs")
	}
	img3, err := ApplyBatch(img, []Record{&RemoveAccessControlEntryRecord{ID: protocol.UUID{1}}}, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if img3.ACLs.Contains(a) || !img.ACLs.Contains(a) || img3.ACLs.Len() != 1 {
		t.Fatal("removal")
	}
	if _, err := ApplyBatch(img3, []Record{&RemoveAccessControlEntryRecord{ID: protocol.UUID{1}}}, 4, 1); err == nil {
		t.Fatal("removing an unknown ACL id applied")
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
		{"match: literal", with(func(f *ACLFilter) {
			f.ResourceName, f.PatternType = str("foo"), kmsg.ACLResourcePatternTypeMatch
		}), lit, true},
		{"match: wildcard", with(func(f *ACLFilter) {
			f.ResourceName, f.PatternType = str("foo"), kmsg.ACLResourcePatternTypeMatch
		}), wild, true},
		{"match: prefix", with(func(f *ACLFilter) {
			f.ResourceName, f.PatternType = str("foo"), kmsg.ACLResourcePatternTypeMatch
		}), pre, true},
		{"match: not a prefix", with(func(f *ACLFilter) {
			f.ResourceName, f.PatternType = str("f"), kmsg.ACLResourcePatternTypeMatch
		}), pre, false},
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
