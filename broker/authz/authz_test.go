package authz

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// aclImage is an image holding acls.
func aclImage(t testing.TB, acls []metadata.ACL) *metadata.Image {
	t.Helper()
	recs := make([]metadata.Record, len(acls))
	for i, a := range acls {
		recs[i] = &metadata.AccessControlEntryRecord{ID: protocol.RandomUUID(), ACL: a}
	}
	img, err := metadata.ImageFromRecords("test", recs)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// modelAuthorize is StandardAuthorizer's decision written the slow and
// obvious way, from Kafka's documentation of it: every ACL is looked at.
func modelAuthorize(acls []metadata.ACL, superUsers map[string]bool, allowIfNoACL bool, p Principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if superUsers[p.String()] {
		return true
	}
	applies, allowed, denied := false, false, false
	for _, a := range acls {
		if a.ResourceType != rt {
			continue
		}
		covers := a.PatternType == kmsg.ACLResourcePatternTypeLiteral && (a.ResourceName == name || a.ResourceName == "*") ||
			a.PatternType == kmsg.ACLResourcePatternTypePrefixed && strings.HasPrefix(name, a.ResourceName)
		if !covers {
			continue
		}
		applies = true
		if a.Principal != p.String() && a.Principal != "User:*" {
			continue
		}
		if a.Host != "*" && a.Host != host {
			continue
		}
		allow := a.PermissionType == kmsg.ACLPermissionTypeAllow
		opMatches := a.Operation == kmsg.ACLOperationAll || a.Operation == op
		if allow && !opMatches {
			switch op {
			case kmsg.ACLOperationDescribe:
				opMatches = a.Operation == kmsg.ACLOperationRead || a.Operation == kmsg.ACLOperationWrite ||
					a.Operation == kmsg.ACLOperationDelete || a.Operation == kmsg.ACLOperationAlter
			case kmsg.ACLOperationDescribeConfigs:
				opMatches = a.Operation == kmsg.ACLOperationAlterConfigs
			}
		}
		if !opMatches {
			continue
		}
		if allow {
			allowed = true
		} else {
			denied = true
		}
	}
	switch {
	case denied:
		return false
	case allowed:
		return true
	case applies:
		return false
	}
	return allowIfNoACL
}

var (
	modelNames      = []string{"a", "ab", "abc", "abd", "b", "ba", "*", "*a"}
	modelPrincipals = []string{"User:alice", "User:bob", "User:*", "Group:alice", "User:alice:x"}
	modelHosts      = []string{"*", "10.0.0.1", "10.0.0.2", "0:0:0:0:0:0:0:1"}
	modelTypes      = []kmsg.ACLResourceType{kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster, kmsg.ACLResourceTypeTransactionalId}
)

func randomACL(rng *rand.Rand) metadata.ACL {
	a := metadata.ACL{
		ResourceType:   modelTypes[rng.IntN(len(modelTypes))],
		ResourceName:   modelNames[rng.IntN(len(modelNames))],
		PatternType:    kmsg.ACLResourcePatternTypeLiteral,
		Principal:      modelPrincipals[rng.IntN(len(modelPrincipals))],
		Host:           modelHosts[rng.IntN(len(modelHosts))],
		Operation:      kmsg.ACLOperation(2 + rng.IntN(14)), // ALL .. TWO_PHASE_COMMIT
		PermissionType: kmsg.ACLPermissionTypeAllow,
	}
	if rng.IntN(2) == 0 {
		a.PatternType = kmsg.ACLResourcePatternTypePrefixed
	}
	if rng.IntN(3) == 0 {
		a.PermissionType = kmsg.ACLPermissionTypeDeny
	}
	return a
}

// TestAuthorizerMatchesModel: over random ACL sets, the indexed authorizer
// decides every action as the brute-force model does.
func TestAuthorizerMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	queryPrincipals := []Principal{{"User", "alice"}, {"User", "bob"}, {"Group", "alice"}, {"User", "carol"}, {"User", "alice:x"}, {"User", "*"}}
	queryNames := []string{"a", "ab", "abc", "abcd", "abd", "b", "ba", "bab", "c", "*", "*a", "*ab", ""}
	queryHosts := []string{"10.0.0.1", "10.0.0.2", "0:0:0:0:0:0:0:1"}
	checked := map[bool]int{}
	for round := range 300 {
		acls := make([]metadata.ACL, rng.IntN(25))
		for i := range acls {
			acls[i] = randomACL(rng)
		}
		opts := Options{AllowEveryoneIfNoACLFound: rng.IntN(2) == 0}
		if rng.IntN(4) == 0 {
			opts.SuperUsers = []string{"User:bob"}
		}
		a := New(opts)
		a.Load(aclImage(t, acls))
		supers := map[string]bool{}
		for _, s := range opts.SuperUsers {
			supers[s] = true
		}
		for range 200 {
			p := queryPrincipals[rng.IntN(len(queryPrincipals))]
			host := queryHosts[rng.IntN(len(queryHosts))]
			op := kmsg.ACLOperation(3 + rng.IntN(13)) // READ .. TWO_PHASE_COMMIT
			rt := modelTypes[rng.IntN(len(modelTypes))]
			name := queryNames[rng.IntN(len(queryNames))]
			got, err := a.Authorize(p, host, op, rt, name)
			if err != nil {
				t.Fatal(err)
			}
			want := modelAuthorize(acls, supers, opts.AllowEveryoneIfNoACLFound, p, host, op, rt, name)
			if got != want {
				t.Fatalf("round %d: %s %s %s on %s %q: got %v, model %v\nACLs:\n%s", round, p, host, metadata.OperationName(op),
					metadata.ResourceTypeName(rt), name, got, want, dumpACLs(acls))
			}
			checked[got]++
		}
	}
	if checked[true] < 1000 || checked[false] < 1000 {
		t.Fatalf("the random cases are lopsided: %v", checked)
	}
}

func dumpACLs(acls []metadata.ACL) string {
	var sb strings.Builder
	for _, a := range acls {
		fmt.Fprintln(&sb, a)
	}
	return sb.String()
}

// modelByResourceType is Kafka's Authorizer.authorizeByResourceType,
// written over the model.
func modelByResourceType(acls []metadata.ACL, supers map[string]bool, allowIfNoACL bool, p Principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if modelAuthorize(acls, supers, allowIfNoACL, p, host, op, rt, "hardcode") {
		return true
	}
	var allows []metadata.ACL
	var denies []metadata.ACL
	for _, a := range acls {
		if a.ResourceType != rt || (a.Host != host && a.Host != "*") || (a.Principal != p.String() && a.Principal != "User:*") ||
			(a.Operation != op && a.Operation != kmsg.ACLOperationAll) {
			continue
		}
		if a.PermissionType == kmsg.ACLPermissionTypeDeny {
			if a.PatternType == kmsg.ACLResourcePatternTypeLiteral && a.ResourceName == "*" {
				return false
			}
			denies = append(denies, a)
		} else {
			allows = append(allows, a)
		}
	}
	for _, a := range allows {
		if a.PatternType == kmsg.ACLResourcePatternTypeLiteral && a.ResourceName == "*" {
			return true
		}
	}
	for _, a := range allows {
		dominated := false
		for _, d := range denies {
			if d.PatternType == kmsg.ACLResourcePatternTypeLiteral && a.PatternType == kmsg.ACLResourcePatternTypeLiteral && d.ResourceName == a.ResourceName {
				dominated = true
			}
			if d.PatternType == kmsg.ACLResourcePatternTypePrefixed && strings.HasPrefix(a.ResourceName, d.ResourceName) {
				dominated = true
			}
		}
		if !dominated {
			return true
		}
	}
	return false
}

func TestAuthorizeByResourceTypeMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 500 {
		acls := make([]metadata.ACL, rng.IntN(12))
		for i := range acls {
			acls[i] = randomACL(rng)
		}
		allow := rng.IntN(2) == 0
		a := New(Options{AllowEveryoneIfNoACLFound: allow})
		a.Load(aclImage(t, acls))
		for _, p := range []Principal{{"User", "alice"}, {"User", "bob"}} {
			for _, rt := range modelTypes {
				for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationWrite, kmsg.ACLOperationRead, kmsg.ACLOperationDescribe} {
					got, _ := a.AuthorizeByResourceType(p, "10.0.0.1", op, rt)
					if want := modelByResourceType(acls, nil, allow, p, "10.0.0.1", op, rt); got != want {
						t.Fatalf("round %d: %s %s on any %s: got %v, model %v\n%s", round, p, metadata.OperationName(op),
							metadata.ResourceTypeName(rt), got, want, dumpACLs(acls))
					}
				}
			}
		}
	}
}

func TestAuthorizerSemantics(t *testing.T) {
	alice := Principal{Type: "User", Name: "alice"}
	acl := func(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) metadata.ACL {
		return metadata.ACL{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, PermissionType: perm}
	}
	const (
		topic = kmsg.ACLResourceTypeTopic
		lit   = kmsg.ACLResourcePatternTypeLiteral
		pre   = kmsg.ACLResourcePatternTypePrefixed
		allow = kmsg.ACLPermissionTypeAllow
		deny  = kmsg.ACLPermissionTypeDeny
	)
	for _, tc := range []struct {
		name     string
		acls     []metadata.ACL
		opts     Options
		op       kmsg.ACLOperation
		resource string
		want     bool
	}{
		{"no ACLs, default deny", nil, Options{}, kmsg.ACLOperationRead, "t", false},
		{"no ACLs, allow everyone", nil, Options{AllowEveryoneIfNoACLFound: true}, kmsg.ACLOperationRead, "t", true},
		{"ACLs on the resource for others deny even with allow everyone",
			[]metadata.ACL{acl(topic, "t", lit, "User:bob", "*", kmsg.ACLOperationRead, allow)}, Options{AllowEveryoneIfNoACLFound: true}, kmsg.ACLOperationRead, "t", false},
		{"ACLs on another resource leave the default",
			[]metadata.ACL{acl(topic, "u", lit, "User:bob", "*", kmsg.ACLOperationRead, allow)}, Options{AllowEveryoneIfNoACLFound: true}, kmsg.ACLOperationRead, "t", true},
		{"deny wins over allow",
			[]metadata.ACL{acl(topic, "t", lit, "User:alice", "*", kmsg.ACLOperationRead, allow), acl(topic, "t", pre, "User:*", "*", kmsg.ACLOperationRead, deny)}, Options{}, kmsg.ACLOperationRead, "t", false},
		{"read implies describe", []metadata.ACL{acl(topic, "t", lit, "User:alice", "*", kmsg.ACLOperationRead, allow)}, Options{}, kmsg.ACLOperationDescribe, "t", true},
		{"deny read does not deny describe",
			[]metadata.ACL{acl(topic, "t", lit, "User:alice", "*", kmsg.ACLOperationRead, deny), acl(topic, "t", lit, "User:alice", "*", kmsg.ACLOperationDescribe, allow)}, Options{}, kmsg.ACLOperationDescribe, "t", true},
		{"alter configs implies describe configs", []metadata.ACL{acl(topic, "t", lit, "User:alice", "*", kmsg.ACLOperationAlterConfigs, allow)}, Options{}, kmsg.ACLOperationDescribeConfigs, "t", true},
		{"describe does not imply read", []metadata.ACL{acl(topic, "t", lit, "User:alice", "*", kmsg.ACLOperationDescribe, allow)}, Options{}, kmsg.ACLOperationRead, "t", false},
		{"all", []metadata.ACL{acl(topic, "*", lit, "User:alice", "*", kmsg.ACLOperationAll, allow)}, Options{}, kmsg.ACLOperationDelete, "anything", true},
		{"host", []metadata.ACL{acl(topic, "t", lit, "User:alice", "10.9.9.9", kmsg.ACLOperationRead, allow)}, Options{}, kmsg.ACLOperationRead, "t", false},
		{"super user", []metadata.ACL{acl(topic, "t", lit, "User:alice", "*", kmsg.ACLOperationRead, deny)}, Options{SuperUsers: []string{"User:alice"}}, kmsg.ACLOperationRead, "t", true},
	} {
		a := New(tc.opts)
		a.Load(aclImage(t, tc.acls))
		got, err := a.Authorize(alice, "10.0.0.1", tc.op, topic, tc.resource)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
}

// Before the first image is loaded only super users are authorized; the
// others get ErrNotReady (Kafka's AuthorizerNotReadyException).
func TestAuthorizerNotReady(t *testing.T) {
	a := New(Options{SuperUsers: []string{"User:admin"}, AllowEveryoneIfNoACLFound: true})
	if ok, err := a.Authorize(Principal{"User", "admin"}, "h", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "t"); !ok || err != nil {
		t.Fatalf("super user before ready: %v %v", ok, err)
	}
	if ok, err := a.Authorize(Anonymous, "h", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "t"); ok || err != ErrNotReady {
		t.Fatalf("anyone else before ready: %v %v", ok, err)
	}
	a.Load(aclImage(t, nil))
	if ok, err := a.Authorize(Anonymous, "h", kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, "t"); !ok || err != nil {
		t.Fatalf("after loading: %v %v", ok, err)
	}
}

func TestParseSuperUsers(t *testing.T) {
	got, err := ParseSuperUsers(" User:alice ;User:bob;; CN=x,O=y:z ;")
	if err != nil || strings.Join(got, "|") != "User:alice|User:bob|CN=x,O=y:z" {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := ParseSuperUsers("alice"); err == nil || err.Error() != "expected a string in format principalType:principalName but got alice" {
		t.Fatalf("err = %v", err)
	}
}

func TestJavaHostAddress(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1":              "127.0.0.1",
		"::1":                    "0:0:0:0:0:0:0:1",
		"::ffff:10.1.2.3":        "10.1.2.3",
		"2001:db8::ff00:42:8329": "2001:db8:0:0:0:ff00:42:8329",
		"fe80::1%eth0":           "fe80:0:0:0:0:0:0:1%eth0",
	} {
		if got := HostAddress(netip.MustParseAddr(in)); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}

// FuzzParseSuperUsers: super.users parses to trimmed Type:Name principals
// or is refused, never anything else.
func FuzzParseSuperUsers(f *testing.F) {
	f.Add("User:alice;User:bob")
	f.Add(" ;;User: ; x")
	f.Fuzz(func(t *testing.T, v string) {
		users, err := ParseSuperUsers(v)
		if err != nil {
			return
		}
		for _, u := range users {
			if u == "" || u != strings.TrimSpace(u) || !strings.Contains(u, ":") || strings.Contains(u, ";") {
				t.Fatalf("parsed %q from %q", u, v)
			}
		}
	})
}

// Load may be called from several goroutines with images of different
// ages: the index only ever moves to a newer image's ACLs.
func TestLoadNeverGoesBackToAnOlderImage(t *testing.T) {
	a := New(Options{})
	older := aclImage(t, nil)
	older.Offset = 10
	newer := aclImage(t, []metadata.ACL{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "t", PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeAllow}})
	newer.Offset = 20
	a.Load(newer)
	a.Load(older)
	if set, n := a.Indexed(); set != newer.ACLs || n != 1 {
		t.Fatalf("after an older image: indexed %d ACLs of %p, want the newer image's %p", n, set, newer.ACLs)
	}
}
