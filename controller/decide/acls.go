package decide

// CreateACLs and DeleteACLs, as Kafka's AclControlManager decides them (the
// ACL records and the image's ACLSet are metadata's, metadata/acls.go):
// each ACL is an AccessControlEntryRecord with a UUID of its own, removed
// by a RemoveAccessControlEntryRecord naming that id. Both make Kafka's
// checks (AclApis on the controller, then AclControlManager's
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
	"context"
	"strings"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// bindingInvalid reports whether Kafka fails to build the AclBinding of a
// creation at all (ResourcePattern and AccessControlEntry refuse the ANY
// and MATCH codes): the whole request then fails with
// UNKNOWN_SERVER_ERROR.
func bindingInvalid(acl metadata.ACL) bool {
	return acl.ResourceType == kmsg.ACLResourceTypeAny ||
		acl.PatternType == kmsg.ACLResourcePatternTypeAny || acl.PatternType == kmsg.ACLResourcePatternTypeMatch ||
		acl.Operation == kmsg.ACLOperationAny || acl.PermissionType == kmsg.ACLPermissionTypeAny
}

// validateNewACL is AclApis' check followed by AclControlManager's.
func validateNewACL(acl metadata.ACL) *Error {
	if acl.ResourceType == kmsg.ACLResourceTypeCluster && acl.ResourceName != metadata.ClusterResourceName {
		return NewError(kerr.InvalidRequest, "The only valid name for the CLUSTER resource is %s", metadata.ClusterResourceName)
	}
	if acl.ResourceName == "" {
		return NewError(kerr.InvalidRequest, "Invalid empty resource name")
	}
	switch acl.ResourceType {
	case kmsg.ACLResourceTypeUnknown, kmsg.ACLResourceTypeAny:
		return NewError(kerr.InvalidRequest, "Invalid resourceType %s", metadata.ResourceTypeName(acl.ResourceType))
	}
	switch acl.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
	default:
		return NewError(kerr.InvalidRequest, "Invalid patternType %s", metadata.PatternTypeName(acl.PatternType))
	}
	switch acl.Operation {
	case kmsg.ACLOperationUnknown, kmsg.ACLOperationAny:
		return NewError(kerr.InvalidRequest, "Invalid operation %s", metadata.OperationName(acl.Operation))
	}
	switch acl.PermissionType {
	case kmsg.ACLPermissionTypeDeny, kmsg.ACLPermissionTypeAllow:
	default:
		return NewError(kerr.InvalidRequest, "Invalid permissionType %s", metadata.PermissionTypeName(acl.PermissionType))
	}
	if !strings.Contains(acl.Principal, ":") {
		return NewError(kerr.InvalidRequest, "Could not parse principal from `%s` (no colon is present separating the principal type from the principal name)", acl.Principal)
	}
	return nil
}

// validateFilter is AclControlManager's check of a deletion filter.
func validateFilter(f metadata.ACLFilter) *Error {
	if f.ResourceType == kmsg.ACLResourceTypeUnknown || f.PatternType == kmsg.ACLResourcePatternTypeUnknown {
		return NewError(kerr.InvalidRequest, "Unknown patternFilter.")
	}
	if f.Operation == kmsg.ACLOperationUnknown || f.PermissionType == kmsg.ACLPermissionTypeUnknown {
		return NewError(kerr.InvalidRequest, "Unknown entryFilter.")
	}
	return nil
}

// newACLID is a fresh id no ACL of img has.
func newACLID(img *metadata.Image, taken map[protocol.UUID]bool) protocol.UUID {
	for {
		id := protocol.RandomUUID()
		if _, ok := img.ACLs.Get(id); !ok && !taken[id] {
			return id
		}
	}
}

// CreateACLs decides a CreateACLs request.
func (e *Env) CreateACLs(_ context.Context, img *metadata.Image, _ int64, req *kmsg.CreateACLsRequest) ([]metadata.Record, *kmsg.CreateACLsResponse) {
	acls := make([]metadata.ACL, len(req.Creations))
	wholeRequestFails := false
	for i, cr := range req.Creations {
		acls[i] = metadata.CreationACL(cr)
		wholeRequestFails = wholeRequestFails || bindingInvalid(acls[i])
	}
	if wholeRequestFails {
		return nil, CreateACLsFailed(req, &Error{err: kerr.UnknownServerError})
	}
	results := make([]*Error, len(acls))
	var recs []metadata.Record
	taken := map[protocol.UUID]bool{}
	adding := map[metadata.ACL]bool{}
	for i, acl := range acls {
		if results[i] = validateNewACL(acl); results[i] != nil {
			continue
		}
		if img.ACLs.Contains(acl) || adding[acl] {
			continue
		}
		adding[acl] = true
		id := newACLID(img, taken)
		taken[id] = true
		recs = append(recs, &metadata.AccessControlEntryRecord{ID: id, ACL: acl})
	}
	if len(recs) > maxRecordsPerOp {
		return nil, CreateACLsFailed(req, &Error{err: kerr.UnknownServerError})
	}
	return recs, createACLsAnswer(req, results)
}

// CreateACLsFailed answers every creation with e.
func CreateACLsFailed(req *kmsg.CreateACLsRequest, e *Error) *kmsg.CreateACLsResponse {
	results := make([]*Error, len(req.Creations))
	for i := range results {
		results[i] = e
	}
	return createACLsAnswer(req, results)
}

// createACLsAnswer is the response with a result per creation.
func createACLsAnswer(req *kmsg.CreateACLsRequest, results []*Error) *kmsg.CreateACLsResponse {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for _, e := range results {
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorCode = e.Code()
		res.ErrorMessage = e.KafkaMessage()
		if e == nil {
			// Kafka's AclCreationResult keeps its default message, "".
			res.ErrorMessage = strPtr("")
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}

// DeleteACLs decides a DeleteACLs request.
func (e *Env) DeleteACLs(_ context.Context, img *metadata.Image, _ int64, req *kmsg.DeleteACLsRequest) ([]metadata.Record, *kmsg.DeleteACLsResponse) {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	removing := map[protocol.UUID]bool{}
	var recs []metadata.Record
	ids := img.ACLs.SortedIDs()
	for _, rf := range req.Filters {
		f := metadata.DeleteFilter(rf)
		res := kmsg.NewDeleteACLsResponseResult()
		if e := validateFilter(f); e != nil {
			res.ErrorCode, res.ErrorMessage = e.Code(), e.KafkaMessage()
			resp.Results = append(resp.Results, res)
			continue
		}
		for _, id := range ids {
			acl, _ := img.ACLs.Get(id)
			if !f.Matches(acl) {
				continue
			}
			if len(recs) >= maxRecordsPerOp {
				return nil, DeleteACLsFailed(req, NewError(kerr.InvalidRequest, "Cannot remove more than %d acls in a single delete operation.", maxRecordsPerOp))
			}
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType = acl.ResourceType
			m.ResourceName = acl.ResourceName
			m.ResourcePatternType = acl.PatternType
			m.Principal = acl.Principal
			m.Host = acl.Host
			m.Operation = acl.Operation
			m.PermissionType = acl.PermissionType
			res.MatchingACLs = append(res.MatchingACLs, m)
			if !removing[id] {
				removing[id] = true
				recs = append(recs, &metadata.RemoveAccessControlEntryRecord{ID: id})
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return recs, resp
}

// DeleteACLsFailed answers every filter with e.
func DeleteACLsFailed(req *kmsg.DeleteACLsRequest, e *Error) *kmsg.DeleteACLsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		res.ErrorCode, res.ErrorMessage = e.Code(), e.KafkaMessage()
		resp.Results = append(resp.Results, res)
	}
	return resp
}
