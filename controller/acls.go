package controller

// ACLs stored in the metadata log (Kafka's AclControlManager): each ACL is an
// AccessControlEntryRecord with a UUID of its own, removed by a
// RemoveAccessControlEntryRecord naming that id. CreateACLs and DeleteACLs
// make Kafka's checks (AclApis on the controller, then AclControlManager's
// validateNewAcl and validateFilter) with its error codes and messages; the
// broker authorizes the request (ALTER on the cluster) and answers
// SECURITY_DISABLED when no authorizer is configured, before either is
// called.
//
// Semantics kept from Kafka: an ACL equal to one that exists, or to an
// earlier one of the same request, succeeds without a record; a deletion
// lists every ACL each filter matches, and an ACL two filters match is
// removed by one record; a creation of more than maxRecordsPerOp ACLs fails
// with UNKNOWN_SERVER_ERROR, a deletion of more with INVALID_REQUEST, both
// as a whole.

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
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

// sortedIDs is every id in byte order (snapshots are deterministic).
func (s *ACLSet) sortedIDs() []protocol.UUID {
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

// creationACL is a CreateAcls entry as Kafka's enums read it.
func creationACL(c kmsg.CreateACLsRequestCreation) ACL {
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

// bindingInvalid reports whether Kafka fails to build the AclBinding of a
// creation at all (ResourcePattern and AccessControlEntry refuse the ANY
// and MATCH codes): the whole request then fails with
// UNKNOWN_SERVER_ERROR.
func bindingInvalid(acl ACL) bool {
	return acl.ResourceType == kmsg.ACLResourceTypeAny ||
		acl.PatternType == kmsg.ACLResourcePatternTypeAny || acl.PatternType == kmsg.ACLResourcePatternTypeMatch ||
		acl.Operation == kmsg.ACLOperationAny || acl.PermissionType == kmsg.ACLPermissionTypeAny
}

// validateNewACL is AclApis' check followed by AclControlManager's.
func validateNewACL(acl ACL) *apiError {
	if acl.ResourceType == kmsg.ACLResourceTypeCluster && acl.ResourceName != ClusterResourceName {
		return newAPIError(kerr.InvalidRequest, "The only valid name for the CLUSTER resource is %s", ClusterResourceName)
	}
	if acl.ResourceName == "" {
		return newAPIError(kerr.InvalidRequest, "Invalid empty resource name")
	}
	switch acl.ResourceType {
	case kmsg.ACLResourceTypeUnknown, kmsg.ACLResourceTypeAny:
		return newAPIError(kerr.InvalidRequest, "Invalid resourceType %s", ResourceTypeName(acl.ResourceType))
	}
	switch acl.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
	default:
		return newAPIError(kerr.InvalidRequest, "Invalid patternType %s", PatternTypeName(acl.PatternType))
	}
	switch acl.Operation {
	case kmsg.ACLOperationUnknown, kmsg.ACLOperationAny:
		return newAPIError(kerr.InvalidRequest, "Invalid operation %s", OperationName(acl.Operation))
	}
	switch acl.PermissionType {
	case kmsg.ACLPermissionTypeDeny, kmsg.ACLPermissionTypeAllow:
	default:
		return newAPIError(kerr.InvalidRequest, "Invalid permissionType %s", PermissionTypeName(acl.PermissionType))
	}
	if !strings.Contains(acl.Principal, ":") {
		return newAPIError(kerr.InvalidRequest, "Could not parse principal from `%s` (no colon is present separating the principal type from the principal name)", acl.Principal)
	}
	return nil
}

// validateFilter is AclControlManager's check of a deletion filter.
func validateFilter(f ACLFilter) *apiError {
	if f.ResourceType == kmsg.ACLResourceTypeUnknown || f.PatternType == kmsg.ACLResourcePatternTypeUnknown {
		return newAPIError(kerr.InvalidRequest, "Unknown patternFilter.")
	}
	if f.Operation == kmsg.ACLOperationUnknown || f.PermissionType == kmsg.ACLPermissionTypeUnknown {
		return newAPIError(kerr.InvalidRequest, "Unknown entryFilter.")
	}
	return nil
}

// newACLID is a fresh id no ACL of img has.
func newACLID(img *Image, taken map[protocol.UUID]bool) protocol.UUID {
	for {
		id := protocol.RandomUUID()
		if _, ok := img.ACLs.Get(id); !ok && !taken[id] {
			return id
		}
	}
}

// CreateACLs adds ACLs. Each creation gets its own result, in request
// order.
func (c *Controller) CreateACLs(ctx context.Context, req *kmsg.CreateACLsRequest) *kmsg.CreateACLsResponse {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	acls := make([]ACL, len(req.Creations))
	wholeRequestFails := false
	for i, cr := range req.Creations {
		acls[i] = creationACL(cr)
		wholeRequestFails = wholeRequestFails || bindingInvalid(acls[i])
	}
	results := make([]*apiError, len(acls))
	fail := func(e *apiError) {
		for i := range results {
			results[i] = e
		}
	}
	if wholeRequestFails {
		fail(&apiError{err: kerr.UnknownServerError})
	} else {
		var valid []int
		for i, acl := range acls {
			if results[i] = validateNewACL(acl); results[i] == nil {
				valid = append(valid, i)
			}
		}
		if len(valid) > 0 {
			tooMany, ok, err := submitTyped(c, ctx, func(img *Image, _ int64) ([]Record, bool) {
				var recs []Record
				taken := map[protocol.UUID]bool{}
				adding := map[ACL]bool{}
				for _, i := range valid {
					acl := acls[i]
					if img.ACLs.Contains(acl) || adding[acl] {
						continue
					}
					adding[acl] = true
					id := newACLID(img, taken)
					taken[id] = true
					recs = append(recs, &AccessControlEntryRecord{ID: id, ACL: acl})
				}
				if len(recs) > maxRecordsPerOp {
					return nil, true
				}
				return recs, false
			})
			switch {
			case !ok || err != nil:
				for _, i := range valid {
					results[i] = commitError(err)
				}
			case tooMany:
				fail(&apiError{err: kerr.UnknownServerError})
			}
		}
	}
	for _, e := range results {
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorCode = e.code()
		res.ErrorMessage = e.kafkaMessage()
		if e == nil {
			// Kafka's AclCreationResult keeps its default message, "".
			res.ErrorMessage = strPtr("")
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}

// DeleteACLs removes the ACLs each filter matches. Each filter gets its
// own result, in request order, listing what it matched.
func (c *Controller) DeleteACLs(ctx context.Context, req *kmsg.DeleteACLsRequest) *kmsg.DeleteACLsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	filters := make([]ACLFilter, len(req.Filters))
	for i, f := range req.Filters {
		filters[i] = DeleteFilter(f)
	}
	type outcome struct {
		err     *apiError
		matched []ACL
	}
	type decision struct {
		outcomes []outcome
		tooMany  bool
	}
	d, ok, err := submitTyped(c, ctx, func(img *Image, _ int64) ([]Record, decision) {
		var d decision
		removing := map[protocol.UUID]bool{}
		var recs []Record
		ids := img.ACLs.sortedIDs()
		for _, f := range filters {
			if e := validateFilter(f); e != nil {
				d.outcomes = append(d.outcomes, outcome{err: e})
				continue
			}
			var o outcome
			for _, id := range ids {
				acl, _ := img.ACLs.Get(id)
				if !f.Matches(acl) {
					continue
				}
				if len(recs) >= maxRecordsPerOp {
					return nil, decision{tooMany: true}
				}
				o.matched = append(o.matched, acl)
				if !removing[id] {
					removing[id] = true
					recs = append(recs, &RemoveAccessControlEntryRecord{ID: id})
				}
			}
			d.outcomes = append(d.outcomes, o)
		}
		return recs, d
	})
	for i := range filters {
		res := kmsg.NewDeleteACLsResponseResult()
		switch {
		case !ok || err != nil:
			e := commitError(err)
			res.ErrorCode, res.ErrorMessage = e.code(), e.kafkaMessage()
		case d.tooMany:
			e := newAPIError(kerr.InvalidRequest, "Cannot remove more than %d acls in a single delete operation.", maxRecordsPerOp)
			res.ErrorCode, res.ErrorMessage = e.code(), e.kafkaMessage()
		default:
			o := d.outcomes[i]
			res.ErrorCode, res.ErrorMessage = o.err.code(), o.err.kafkaMessage()
			for _, acl := range o.matched {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType = acl.ResourceType
				m.ResourceName = acl.ResourceName
				m.ResourcePatternType = acl.PatternType
				m.Principal = acl.Principal
				m.Host = acl.Host
				m.Operation = acl.Operation
				m.PermissionType = acl.PermissionType
				res.MatchingACLs = append(res.MatchingACLs, m)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}

// kafkaMessage is the message ApiError.fromThrowable keeps: none for
// success, for UNKNOWN_SERVER_ERROR, and for a message that is the code's
// default one.
func (e *apiError) kafkaMessage() *string {
	if e == nil || e.err == kerr.UnknownServerError || e.msg == "" || e.msg == e.err.Description {
		return nil
	}
	return strPtr(e.msg)
}

func (a ACL) String() string {
	return fmt.Sprintf("(resourceType=%s, name=%s, patternType=%s, principal=%s, host=%s, operation=%s, permissionType=%s)",
		ResourceTypeName(a.ResourceType), a.ResourceName, PatternTypeName(a.PatternType), a.Principal, a.Host,
		OperationName(a.Operation), PermissionTypeName(a.PermissionType))
}
