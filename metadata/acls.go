package metadata

// ACLs as the metadata log stores them (Kafka's AclControlManager keeps
// them the same way): each ACL is an AccessControlEntryRecord with a UUID of
// its own, removed by a RemoveAccessControlEntryRecord naming that id; the
// image holds them as an ACLSet. Reading the ACLs and filters of
// CreateAcls, DeleteAcls and DescribeAcls as Kafka's enums read them, and
// Kafka's filter, are here too: the controller's CreateACLs and DeleteACLs
// decide with them, the broker's authorizer and DescribeAcls read them.

import (
	"bytes"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata record types of ACLs (Kafka's metadata record API keys).
const (
	RecordAccessControlEntry       RecordType = 18
	RecordRemoveAccessControlEntry RecordType = 19
)

// ClusterResourceName is the one name of the CLUSTER resource.
const ClusterResourceName = "kafka-cluster"

// ACL is one access control entry bound to a resource pattern (Kafka's
// StandardAcl). The principal is Kafka's "Type:Name" string, the host an
// address as InetAddress.getHostAddress writes it or "*".
type ACL struct {
	ResourceType   kmsg.ACLResourceType
	ResourceName   string
	PatternType    kmsg.ACLResourcePatternType
	Principal      string
	Host           string
	Operation      kmsg.ACLOperation
	PermissionType kmsg.ACLPermissionType
}

// AccessControlEntryRecord adds an ACL with its id.
type AccessControlEntryRecord struct {
	ID protocol.UUID
	ACL
}

// RemoveAccessControlEntryRecord removes the ACL with the id.
type RemoveAccessControlEntryRecord struct {
	ID protocol.UUID
}

func (*AccessControlEntryRecord) Type() RecordType       { return RecordAccessControlEntry }
func (*RemoveAccessControlEntryRecord) Type() RecordType { return RecordRemoveAccessControlEntry }
func (*AccessControlEntryRecord) Version() int16         { return 0 }
func (*RemoveAccessControlEntryRecord) Version() int16   { return 0 }

func (x *AccessControlEntryRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, x.ID)
	dst = kbin.AppendInt8(dst, int8(x.ResourceType))
	dst = kbin.AppendString(dst, x.ResourceName)
	dst = kbin.AppendInt8(dst, int8(x.PatternType))
	dst = kbin.AppendString(dst, x.Principal)
	dst = kbin.AppendString(dst, x.Host)
	dst = kbin.AppendInt8(dst, int8(x.Operation))
	return kbin.AppendInt8(dst, int8(x.PermissionType))
}

func (x *AccessControlEntryRecord) readBody(r *kbin.Reader, _ int16) {
	x.ID = r.Uuid()
	x.ResourceType = kmsg.ACLResourceType(r.Int8())
	x.ResourceName = r.String()
	x.PatternType = kmsg.ACLResourcePatternType(r.Int8())
	x.Principal = r.String()
	x.Host = r.String()
	x.Operation = kmsg.ACLOperation(r.Int8())
	x.PermissionType = kmsg.ACLPermissionType(r.Int8())
}

func (x *RemoveAccessControlEntryRecord) appendBody(dst []byte) []byte {
	return kbin.AppendUuid(dst, x.ID)
}

func (x *RemoveAccessControlEntryRecord) readBody(r *kbin.Reader, _ int16) { x.ID = r.Uuid() }

// ACLSet is the image's ACLs. It is never changed once published: applying
// a batch that touches ACLs makes a new set, so a new pointer tells that
// the ACLs changed (the broker rebuilds its authorizer's index then).
type ACLSet struct {
	byID map[protocol.UUID]ACL
	// count is how many ids hold each ACL (one, unless a log written
	// outside a controller's checks holds duplicates).
	count map[ACL]int
}

// Len is the number of ACLs.
func (s *ACLSet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.byID)
}

// All yields every ACL with its id, in no particular order.
func (s *ACLSet) All() iter.Seq2[protocol.UUID, ACL] {
	return func(yield func(protocol.UUID, ACL) bool) {
		if s == nil {
			return
		}
		for id, acl := range s.byID {
			if !yield(id, acl) {
				return
			}
		}
	}
}

// Contains reports whether an equal ACL exists.
func (s *ACLSet) Contains(acl ACL) bool { return s != nil && s.count[acl] > 0 }

// Get is the ACL with the id.
func (s *ACLSet) Get(id protocol.UUID) (ACL, bool) {
	if s == nil {
		return ACL{}, false
	}
	acl, ok := s.byID[id]
	return acl, ok
}

func (s *ACLSet) clone() *ACLSet {
	if s == nil {
		return &ACLSet{byID: map[protocol.UUID]ACL{}, count: map[ACL]int{}}
	}
	return &ACLSet{byID: maps.Clone(s.byID), count: maps.Clone(s.count)}
}

func (s *ACLSet) put(id protocol.UUID, acl ACL) {
	if old, ok := s.byID[id]; ok {
		s.drop(old)
	}
	s.byID[id] = acl
	s.count[acl]++
}

func (s *ACLSet) drop(acl ACL) {
	if s.count[acl] <= 1 {
		delete(s.count, acl)
	} else {
		s.count[acl]--
	}
}

// SortedIDs is every id in byte order (snapshots are deterministic, and
// so are the controller's deletions).
func (s *ACLSet) SortedIDs() []protocol.UUID {
	if s == nil {
		return nil
	}
	return slices.SortedFunc(maps.Keys(s.byID), func(a, b protocol.UUID) int { return bytes.Compare(a[:], b[:]) })
}

// ACLFilter selects ACLs (Kafka's AclBindingFilter). Nil strings match
// anything; the ANY codes match any value; the MATCH pattern type matches
// the literal, wildcard and prefixed patterns that apply to the name.
type ACLFilter struct {
	ResourceType   kmsg.ACLResourceType
	ResourceName   *string
	PatternType    kmsg.ACLResourcePatternType
	Principal      *string
	Host           *string
	Operation      kmsg.ACLOperation
	PermissionType kmsg.ACLPermissionType
}

// Matches reports whether the filter selects acl (AclBindingFilter.matches).
func (f ACLFilter) Matches(acl ACL) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != acl.ResourceType {
		return false
	}
	if f.PatternType != kmsg.ACLResourcePatternTypeAny && f.PatternType != kmsg.ACLResourcePatternTypeMatch && f.PatternType != acl.PatternType {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		switch {
		case f.PatternType == kmsg.ACLResourcePatternTypeAny || f.PatternType == acl.PatternType:
			if name != acl.ResourceName {
				return false
			}
		case acl.PatternType == kmsg.ACLResourcePatternTypeLiteral:
			if name != acl.ResourceName && acl.ResourceName != "*" {
				return false
			}
		case acl.PatternType == kmsg.ACLResourcePatternTypePrefixed:
			if !strings.HasPrefix(name, acl.ResourceName) {
				return false
			}
		default:
			return false
		}
	}
	if f.Principal != nil && *f.Principal != acl.Principal {
		return false
	}
	if f.Host != nil && *f.Host != acl.Host {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && f.Operation != acl.Operation {
		return false
	}
	return f.PermissionType == kmsg.ACLPermissionTypeAny || f.PermissionType == acl.PermissionType
}

// Names of Kafka's enums, as its messages print them; codes it does not
// know read as UNKNOWN (the enums' fromCode).
var (
	resourceTypeNames   = []string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}
	patternTypeNames    = []string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"}
	operationNames      = []string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS", "TWO_PHASE_COMMIT"}
	permissionTypeNames = []string{"UNKNOWN", "ANY", "DENY", "ALLOW"}
)

func enumName(names []string, code int8) string {
	if code < 0 || int(code) >= len(names) {
		return "UNKNOWN"
	}
	return names[code]
}

// ResourceTypeName is Kafka's name of a resource type code.
func ResourceTypeName(t kmsg.ACLResourceType) string { return enumName(resourceTypeNames, int8(t)) }

// PatternTypeName is Kafka's name of a pattern type code.
func PatternTypeName(t kmsg.ACLResourcePatternType) string {
	return enumName(patternTypeNames, int8(t))
}

// OperationName is Kafka's name of an operation code.
func OperationName(op kmsg.ACLOperation) string { return enumName(operationNames, int8(op)) }

// PermissionTypeName is Kafka's name of a permission type code.
func PermissionTypeName(t kmsg.ACLPermissionType) string {
	return enumName(permissionTypeNames, int8(t))
}

// known maps a code Kafka's enum does not define to UNKNOWN (0), as
// fromCode does.
func known(names []string, code int8) int8 {
	if code < 0 || int(code) >= len(names) {
		return 0
	}
	return code
}

// CreationACL is a CreateAcls entry as Kafka's enums read it.
func CreationACL(c kmsg.CreateACLsRequestCreation) ACL {
	f := readFilter(c.ResourceType, &c.ResourceName, c.ResourcePatternType, &c.Principal, &c.Host, c.Operation, c.PermissionType)
	return ACL{ResourceType: f.ResourceType, ResourceName: c.ResourceName, PatternType: f.PatternType, Principal: c.Principal,
		Host: c.Host, Operation: f.Operation, PermissionType: f.PermissionType}
}

// DeleteFilter is a DeleteAcls filter as Kafka's enums read it.
func DeleteFilter(f kmsg.DeleteACLsRequestFilter) ACLFilter {
	return readFilter(f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType)
}

// DescribeFilter is a DescribeAcls request's filter as Kafka's enums read
// it.
func DescribeFilter(r *kmsg.DescribeACLsRequest) ACLFilter {
	return readFilter(r.ResourceType, r.ResourceName, r.ResourcePatternType, r.Principal, r.Host, r.Operation, r.PermissionType)
}

// readFilter maps the codes Kafka's enums do not define to UNKNOWN, as
// their fromCode does.
func readFilter(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) ACLFilter {
	return ACLFilter{
		ResourceType:   kmsg.ACLResourceType(known(resourceTypeNames, int8(rt))),
		ResourceName:   name,
		PatternType:    kmsg.ACLResourcePatternType(known(patternTypeNames, int8(pt))),
		Principal:      principal,
		Host:           host,
		Operation:      kmsg.ACLOperation(known(operationNames, int8(op))),
		PermissionType: kmsg.ACLPermissionType(known(permissionTypeNames, int8(perm))),
	}
}

func (a ACL) String() string {
	return fmt.Sprintf("(resourceType=%s, name=%s, patternType=%s, principal=%s, host=%s, operation=%s, permissionType=%s)",
		ResourceTypeName(a.ResourceType), a.ResourceName, PatternTypeName(a.PatternType), a.Principal, a.Host,
		OperationName(a.Operation), PermissionTypeName(a.PermissionType))
}
