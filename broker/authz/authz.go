// Package authz is Kafka's StandardAuthorizer (authorizer.class.name =
// org.apache.kafka.metadata.authorizer.StandardAuthorizer) over the ACLs
// of the metadata image: super.users, allow.everyone.if.no.acl.found, the
// ACL index and its match semantics, and the principals it decides for.
// The broker's handlers ask it through Authorizer.Authorize and
// Authorizer.AuthorizeByResourceType; who a request acts for and which
// check each API makes are the broker's (broker/checks.go). Of Gregor's
// packages it imports metadata only.
//
// Semantics, exactly as StandardAuthorizerData.authorize:
//   - A principal named in super.users (its "Type:Name" string) may do
//     anything, even before the ACLs are loaded.
//   - Until the first image's ACLs are loaded anyone else gets
//     ErrNotReady (Kafka's AuthorizerNotReadyException).
//   - The ACLs that apply to a resource are those of its type whose
//     pattern covers its name: LITERAL with the same name, LITERAL "*"
//     (any name), PREFIXED with a prefix of the name. Of those, an ACL
//     matches when its principal is the request's or User:*, its host is
//     the client's address (as Java's getHostAddress writes it,
//     HostAddress) or "*", and its operation is the one asked, or ALL, or
//     (ALLOW ACLs only) one that implies it: READ, WRITE, DELETE and ALTER
//     imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS.
//   - Any matching DENY denies; else any matching ALLOW allows; else, if
//     any ACL applies to the resource at all, the answer is DENY; else
//     allow.everyone.if.no.acl.found decides (default false).
//
// Readiness (early.start.listeners): Kafka opens the listeners not named
// in early.start.listeners (by default all but the controller listeners)
// only once the authorizer has loaded the ACLs the metadata log held at
// start, and answers non-super-users on the early ones
// AuthorizerNotReadyException (UNKNOWN_SERVER_ERROR on the wire) until
// then. Gregor loads the image the node starts with before any listener
// serves (broker.Broker.Start), and its client listeners open only after
// the broker has registered, so no listener serves before the ACLs are
// loaded; were one to, everyone but the super users would be refused (with
// the API's authorization error, where Kafka answers UNKNOWN_SERVER_ERROR).
// Deviation: a client listener named in early.start.listeners opens with
// the others, after registration.
//
// The ACLs are indexed once per change of the image's ACL set (an
// immutable index swapped in atomically by Load): per resource type,
// literal names in a map, the wildcard ACLs apart, prefixed names in a map
// with the set of their lengths, so that a check is a few map lookups over
// substrings of the name and allocates nothing. With no authorizer
// configured the broker holds a nil *Authorizer and no check runs at all.
//
// Locks: none. Checks read the index with an atomic load.
package authz

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// StandardAuthorizerClass is the one authorizer.class.name Gregor
// implements.
const StandardAuthorizerClass = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// ACL operations Kafka 4.3 has that kmsg does not name.
const aclOperationTwoPhaseCommit kmsg.ACLOperation = 15

// Options configure the authorizer (its keys are read from the broker's
// configuration, as Kafka hands its originals to configure).
type Options struct {
	// SuperUsers are super.users' principals, "Type:Name".
	SuperUsers []string
	// AllowEveryoneIfNoACLFound is allow.everyone.if.no.acl.found.
	AllowEveryoneIfNoACLFound bool
}

// ParseSuperUsers reads super.users as Kafka does: principals separated by
// semicolons, blanks ignored, each "Type:Name".
func ParseSuperUsers(v string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(v, ";") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, ":") {
			return nil, fmt.Errorf("expected a string in format principalType:principalName but got %s", s)
		}
		out = append(out, s)
	}
	return out, nil
}

// ErrNotReady is Kafka's AuthorizerNotReadyException, which it answers as
// UNKNOWN_SERVER_ERROR.
var ErrNotReady = errors.New("the authorizer is not ready")

// Authorizer is one node's StandardAuthorizer.
type Authorizer struct {
	superUsers   map[string]bool
	allowIfNoACL bool
	// index is nil until the first image's ACLs are loaded.
	index atomic.Pointer[aclIndex]
}

// New returns an authorizer that has loaded no ACLs yet.
func New(opts Options) *Authorizer {
	a := &Authorizer{superUsers: map[string]bool{}, allowIfNoACL: opts.AllowEveryoneIfNoACLFound}
	for _, u := range opts.SuperUsers {
		a.superUsers[u] = true
	}
	return a
}

// Load indexes the image's ACLs when they are not those already indexed
// and the image is newer than the one indexed. It may be called from
// several goroutines at once (the image subscription, and checks that
// make sure they decide on the latest image): an older image never
// replaces a newer one's index.
func (a *Authorizer) Load(img *metadata.Image) {
	if img == nil {
		return
	}
	for {
		cur := a.index.Load()
		if cur != nil && (cur.set == img.ACLs || cur.offset >= img.Offset) {
			return
		}
		next := buildACLIndex(img.ACLs)
		next.offset = img.Offset
		if a.index.CompareAndSwap(cur, next) {
			return
		}
	}
}

// Indexed is the ACL set the authorizer decides with and how many of its
// ACLs it indexed; nil and -1 before the first Load.
func (a *Authorizer) Indexed() (*metadata.ACLSet, int) {
	idx := a.index.Load()
	if idx == nil {
		return nil, -1
	}
	return idx.set, idx.count
}

// Authorize decides one action. It fails (ErrNotReady) only when the ACLs
// are not loaded yet and the principal is not a super user.
func (a *Authorizer) Authorize(principal Principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) (bool, error) {
	if len(a.superUsers) > 0 && a.superUsers[principal.String()] {
		return true, nil
	}
	idx := a.index.Load()
	if idx == nil {
		return false, ErrNotReady
	}
	switch idx.decide(principal, host, op, rt, name) {
	case decisionAllow:
		return true, nil
	case decisionDeny:
		return false, nil
	}
	return a.allowIfNoACL, nil
}

type decision int8

const (
	decisionNone decision = iota // no ACL applies to the resource
	decisionAllow
	decisionDeny
)

// aclEntry is an ACL with its principal split once.
type aclEntry struct {
	principalType string
	principalName string
	// anyPrincipal: the principal is User:*.
	anyPrincipal bool
	host         string
	op           kmsg.ACLOperation
	allow        bool
}

// typeIndex holds one resource type's ACLs.
type typeIndex struct {
	literal  map[string][]aclEntry
	wildcard []aclEntry
	prefixed map[string][]aclEntry
	// prefixLens are the lengths of the prefixed names, ascending.
	prefixLens []int
}

// aclIndex is an immutable index of one ACL set.
type aclIndex struct {
	set *metadata.ACLSet
	// offset is that of the image whose ACLs these are.
	offset int64
	byType [8]*typeIndex // by resource type code
	count  int
}

func buildACLIndex(set *metadata.ACLSet) *aclIndex {
	idx := &aclIndex{set: set}
	for _, acl := range set.All() {
		rt := int(acl.ResourceType)
		if rt < 0 || rt >= len(idx.byType) {
			continue
		}
		ti := idx.byType[rt]
		if ti == nil {
			ti = &typeIndex{literal: map[string][]aclEntry{}, prefixed: map[string][]aclEntry{}}
			idx.byType[rt] = ti
		}
		typ, name, _ := strings.Cut(acl.Principal, ":")
		e := aclEntry{
			principalType: typ, principalName: name,
			anyPrincipal: typ == UserType && name == "*",
			host:         acl.Host, op: acl.Operation,
			allow: acl.PermissionType == kmsg.ACLPermissionTypeAllow,
		}
		if acl.PermissionType != kmsg.ACLPermissionTypeAllow && acl.PermissionType != kmsg.ACLPermissionTypeDeny {
			continue // never written by a controller
		}
		switch {
		case acl.PatternType == kmsg.ACLResourcePatternTypeLiteral && acl.ResourceName == "*":
			ti.wildcard = append(ti.wildcard, e)
		case acl.PatternType == kmsg.ACLResourcePatternTypeLiteral:
			ti.literal[acl.ResourceName] = append(ti.literal[acl.ResourceName], e)
		case acl.PatternType == kmsg.ACLResourcePatternTypePrefixed:
			if _, ok := ti.prefixed[acl.ResourceName]; !ok {
				ti.prefixLens = append(ti.prefixLens, len(acl.ResourceName))
			}
			ti.prefixed[acl.ResourceName] = append(ti.prefixed[acl.ResourceName], e)
		default:
			continue
		}
		idx.count++
	}
	for _, ti := range idx.byType {
		if ti != nil {
			slices.Sort(ti.prefixLens)
			ti.prefixLens = slices.Compact(ti.prefixLens)
		}
	}
	return idx
}

// decide applies the ACLs of (rt, name) to the action.
func (idx *aclIndex) decide(p Principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) decision {
	if int(rt) < 0 || int(rt) >= len(idx.byType) {
		return decisionNone
	}
	ti := idx.byType[rt]
	if ti == nil {
		return decisionNone
	}
	applies, allowed := false, false
	check := func(entries []aclEntry) bool {
		if len(entries) == 0 {
			return false
		}
		applies = true
		for i := range entries {
			switch entries[i].match(p, host, op) {
			case decisionDeny:
				return true
			case decisionAllow:
				allowed = true
			}
		}
		return false
	}
	if check(ti.literal[name]) || check(ti.wildcard) {
		return decisionDeny
	}
	for _, l := range ti.prefixLens {
		if l > len(name) {
			break
		}
		if check(ti.prefixed[name[:l]]) {
			return decisionDeny
		}
	}
	switch {
	case allowed:
		return decisionAllow
	case applies:
		return decisionDeny
	}
	return decisionNone
}

// match is StandardAuthorizerData.findResult: whether the entry matches
// the principal, host and operation, and how.
func (e *aclEntry) match(p Principal, host string, op kmsg.ACLOperation) decision {
	if !e.anyPrincipal && (e.principalName != p.Name || e.principalType != p.Type) {
		return decisionNone
	}
	if e.host != "*" && e.host != host {
		return decisionNone
	}
	if e.op != kmsg.ACLOperationAll && e.op != op {
		if !e.allow || !implies(e.op, op) {
			return decisionNone
		}
	}
	if e.allow {
		return decisionAllow
	}
	return decisionDeny
}

// implies reports whether an ALLOW of granted grants op too.
func implies(granted, op kmsg.ACLOperation) bool {
	switch op {
	case kmsg.ACLOperationDescribe:
		switch granted {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return granted == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// SupportedOperations are the operations of a resource type that the
// authorized-operations fields report (AclEntry.supportedOperations).
func SupportedOperations(rt kmsg.ACLResourceType) []kmsg.ACLOperation {
	switch rt {
	case kmsg.ACLResourceTypeTopic:
		return []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe,
			kmsg.ACLOperationDelete, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs}
	case kmsg.ACLResourceTypeGroup:
		return []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete,
			kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs}
	case kmsg.ACLResourceTypeCluster:
		return []kmsg.ACLOperation{kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction, kmsg.ACLOperationDescribeConfigs,
			kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe}
	case kmsg.ACLResourceTypeTransactionalId:
		return []kmsg.ACLOperation{kmsg.ACLOperationDescribe, kmsg.ACLOperationWrite, aclOperationTwoPhaseCommit}
	case kmsg.ACLResourceTypeDelegationToken:
		return []kmsg.ACLOperation{kmsg.ACLOperationDescribe}
	case kmsg.ACLResourceTypeUser:
		return []kmsg.ACLOperation{kmsg.ACLOperationCreateTokens, kmsg.ACLOperationDescribeTokens}
	}
	return nil
}

// AuthorizeByResourceType is Kafka's Authorizer.authorizeByResourceType
// (its default method, which StandardAuthorizer keeps): whether the
// principal may do op on at least one resource of the type. A principal
// allowed on the made-up name "hardcode" (a super user, or no ACL applying
// with allow.everyone.if.no.acl.found) is; else some ALLOW ACL of its own
// for the exact operation (or ALL) must not be dominated by a DENY of the
// same name or of a prefix of it.
func (a *Authorizer) AuthorizeByResourceType(p Principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) (bool, error) {
	if ok, err := a.Authorize(p, host, op, rt, "hardcode"); ok || err != nil {
		return ok, err
	}
	idx := a.index.Load()
	denyLiteral, denyPrefix := map[string]bool{}, map[string]bool{}
	var allowLiteral, allowPrefix []string
	anyAllow := false
	for _, acl := range idx.set.All() {
		if acl.ResourceType != rt {
			continue
		}
		if acl.Host != host && acl.Host != "*" {
			continue
		}
		typ, name, _ := strings.Cut(acl.Principal, ":")
		if (typ != p.Type || name != p.Name) && acl.Principal != "User:*" {
			continue
		}
		if acl.Operation != op && acl.Operation != kmsg.ACLOperationAll {
			continue
		}
		literal := acl.PatternType == kmsg.ACLResourcePatternTypeLiteral
		prefixed := acl.PatternType == kmsg.ACLResourcePatternTypePrefixed
		switch acl.PermissionType {
		case kmsg.ACLPermissionTypeDeny:
			switch {
			case literal && acl.ResourceName == "*":
				return false, nil
			case literal:
				denyLiteral[acl.ResourceName] = true
			case prefixed:
				denyPrefix[acl.ResourceName] = true
			}
		case kmsg.ACLPermissionTypeAllow:
			switch {
			case literal && acl.ResourceName == "*":
				anyAllow = true
			case literal:
				allowLiteral = append(allowLiteral, acl.ResourceName)
			case prefixed:
				allowPrefix = append(allowPrefix, acl.ResourceName)
			}
		}
	}
	if anyAllow {
		return true, nil
	}
	dominated := func(name string) bool {
		for i := 1; i <= len(name); i++ {
			if denyPrefix[name[:i]] {
				return true
			}
		}
		return false
	}
	for _, name := range allowLiteral {
		if !denyLiteral[name] && !dominated(name) {
			return true, nil
		}
	}
	for _, name := range allowPrefix {
		if !dominated(name) {
			return true, nil
		}
	}
	return false, nil
}
