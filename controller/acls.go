package controller

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
func validateNewACL(acl metadata.ACL) *apiError {
	if acl.ResourceType == kmsg.ACLResourceTypeCluster && acl.ResourceName != metadata.ClusterResourceName {
		return newAPIError(kerr.InvalidRequest, "The only valid name for the CLUSTER resource is %s", metadata.ClusterResourceName)
	}
	if acl.ResourceName == "" {
		return newAPIError(kerr.InvalidRequest, "Invalid empty resource name")
	}
	switch acl.ResourceType {
	case kmsg.ACLResourceTypeUnknown, kmsg.ACLResourceTypeAny:
		return newAPIError(kerr.InvalidRequest, "Invalid resourceType %s", metadata.ResourceTypeName(acl.ResourceType))
	}
	switch acl.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
	default:
		return newAPIError(kerr.InvalidRequest, "Invalid patternType %s", metadata.PatternTypeName(acl.PatternType))
	}
	switch acl.Operation {
	case kmsg.ACLOperationUnknown, kmsg.ACLOperationAny:
		return newAPIError(kerr.InvalidRequest, "Invalid operation %s", metadata.OperationName(acl.Operation))
	}
	switch acl.PermissionType {
	case kmsg.ACLPermissionTypeDeny, kmsg.ACLPermissionTypeAllow:
	default:
		return newAPIError(kerr.InvalidRequest, "Invalid permissionType %s", metadata.PermissionTypeName(acl.PermissionType))
	}
	if !strings.Contains(acl.Principal, ":") {
		return newAPIError(kerr.InvalidRequest, "Could not parse principal from `%s` (no colon is present separating the principal type from the principal name)", acl.Principal)
	}
	return nil
}

// validateFilter is AclControlManager's check of a deletion filter.
func validateFilter(f metadata.ACLFilter) *apiError {
	if f.ResourceType == kmsg.ACLResourceTypeUnknown || f.PatternType == kmsg.ACLResourcePatternTypeUnknown {
		return newAPIError(kerr.InvalidRequest, "Unknown patternFilter.")
	}
	if f.Operation == kmsg.ACLOperationUnknown || f.PermissionType == kmsg.ACLPermissionTypeUnknown {
		return newAPIError(kerr.InvalidRequest, "Unknown entryFilter.")
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

// CreateACLs adds ACLs. Each creation gets its own result, in request
// order.
func (c *Controller) CreateACLs(ctx context.Context, req *kmsg.CreateACLsRequest) *kmsg.CreateACLsResponse {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	acls := make([]metadata.ACL, len(req.Creations))
	wholeRequestFails := false
	for i, cr := range req.Creations {
		acls[i] = metadata.CreationACL(cr)
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
			tooMany, ok, err := submitTyped(c, ctx, func(img *metadata.Image, _ int64) ([]metadata.Record, bool) {
				var recs []metadata.Record
				taken := map[protocol.UUID]bool{}
				adding := map[metadata.ACL]bool{}
				for _, i := range valid {
					acl := acls[i]
					if img.ACLs.Contains(acl) || adding[acl] {
						continue
					}
					adding[acl] = true
					id := newACLID(img, taken)
					taken[id] = true
					recs = append(recs, &metadata.AccessControlEntryRecord{ID: id, ACL: acl})
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
	filters := make([]metadata.ACLFilter, len(req.Filters))
	for i, f := range req.Filters {
		filters[i] = metadata.DeleteFilter(f)
	}
	type outcome struct {
		err     *apiError
		matched []metadata.ACL
	}
	type decision struct {
		outcomes []outcome
		tooMany  bool
	}
	d, ok, err := submitTyped(c, ctx, func(img *metadata.Image, _ int64) ([]metadata.Record, decision) {
		var d decision
		removing := map[protocol.UUID]bool{}
		var recs []metadata.Record
		ids := img.ACLs.SortedIDs()
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
					recs = append(recs, &metadata.RemoveAccessControlEntryRecord{ID: id})
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

func init() {
	decides((*Controller).CreateACLs)
	decides((*Controller).DeleteACLs)
}
