package broker

// DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31),
// versions 1-3 (what Kafka 4.3 serves; v0 was removed in 4.0).
//
// DescribeAcls is answered from this node's metadata image: DESCRIBE on
// the cluster is needed, the filter is Kafka's AclBindingFilter, and the
// ACLs come back grouped by resource pattern. With no authorizer
// configured it answers SECURITY_DISABLED ("No Authorizer is configured on
// the broker"), as Kafka's AclApis does.
//
// CreateAcls and DeleteAcls change metadata: they go to the active
// controller (forwarded in an Envelope with the client's principal when it
// is remote), which authorizes them (ALTER on the cluster), answers
// SECURITY_DISABLED without an authorizer, and validates them as Kafka's
// controller does (controller/acls.go).
//
// A request with an UNKNOWN (0) resource type, pattern type, operation or
// permission type fails to parse in Kafka, which closes the connection;
// so does Gregor.

import (
	"cmp"
	"context"
	"slices"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var noAuthorizerOnBroker = "No Authorizer is configured on the broker"

func (b *Broker) handleDescribeACLs(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DescribeACLsRequest)
	if req.ResourceType == 0 || req.ResourcePatternType == 0 || req.Operation == 0 || req.PermissionType == 0 {
		r.CloseConnection()
		return
	}
	who := identityOf(r)
	if !b.clusterAllowed(who, kmsg.ACLOperationDescribe) {
		r.Respond(errorResponse(req, clusterDenied(who, kmsg.ACLOperationDescribe)))
		return
	}
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if b.authz == nil {
		resp.ErrorCode = kerr.SecurityDisabled.Code
		resp.ErrorMessage = &noAuthorizerOnBroker
		r.Respond(resp)
		return
	}
	// Kafka's answer keeps its default message, "".
	resp.ErrorMessage = kmsg.StringPtr("")
	filter := metadata.DescribeFilter(req)
	var matched []metadata.ACL
	for _, acl := range b.meta.Image().ACLs.All() {
		if filter.Matches(acl) {
			matched = append(matched, acl)
		}
	}
	sortedACLs(matched)
	for i, acl := range matched {
		if i == 0 || !samePattern(matched[i-1], acl) {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = acl.ResourceType, acl.ResourceName, acl.PatternType
			resp.Resources = append(resp.Resources, res)
		}
		res := &resp.Resources[len(resp.Resources)-1]
		d := kmsg.NewDescribeACLsResponseResourceACL()
		d.Principal, d.Host, d.Operation, d.PermissionType = acl.Principal, acl.Host, acl.Operation, acl.PermissionType
		res.ACLs = append(res.ACLs, d)
	}
	r.Respond(resp)
}

func samePattern(a, b metadata.ACL) bool {
	return a.ResourceType == b.ResourceType && a.ResourceName == b.ResourceName && a.PatternType == b.PatternType
}

func (b *Broker) handleCreateACLs(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.CreateACLsRequest)
	for _, c := range req.Creations {
		if c.ResourceType == 0 || c.ResourcePatternType == 0 || c.Operation == 0 || c.PermissionType == 0 {
			r.CloseConnection()
			return
		}
	}
	b.forwardRequest(ctx, r, nil)
}

func (b *Broker) handleDeleteACLs(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DeleteACLsRequest)
	for _, f := range req.Filters {
		if f.ResourceType == 0 || f.ResourcePatternType == 0 || f.Operation == 0 || f.PermissionType == 0 {
			r.CloseConnection()
			return
		}
	}
	b.forwardRequest(ctx, r, nil)
}

func init() {
	register(api{
		key: kmsg.DescribeACLs, min: 1, max: 3,
		listeners:    allListeners,
		authorizedAs: "DESCRIBE on the cluster",
		errorAnswer: errorAnswerOf(func(_ *kmsg.DescribeACLsRequest, out *kmsg.DescribeACLsResponse, e apiErr) {
			out.ErrorCode, out.ErrorMessage = e.code, e.msg
		}),
		handle: (*Broker).handleDescribeACLs,
	})
	register(api{
		key: kmsg.CreateACLs, min: 1, max: 3,
		listeners:        allListeners,
		authorizedAs:     "ALTER on the cluster",
		clusterOperation: kmsg.ACLOperationAlter,
		needsAuthorizer:  true,
		errorAnswer: errorAnswerOf(func(r *kmsg.CreateACLsRequest, out *kmsg.CreateACLsResponse, e apiErr) {
			for range r.Creations {
				res := kmsg.NewCreateACLsResponseResult()
				res.ErrorCode, res.ErrorMessage = e.code, e.msg
				out.Results = append(out.Results, res)
			}
		}),
		forward: &forwarding{},
		handle:  (*Broker).handleCreateACLs,
	})
	register(api{
		key: kmsg.DeleteACLs, min: 1, max: 3,
		listeners:        allListeners,
		authorizedAs:     "ALTER on the cluster",
		clusterOperation: kmsg.ACLOperationAlter,
		needsAuthorizer:  true,
		errorAnswer: errorAnswerOf(func(r *kmsg.DeleteACLsRequest, out *kmsg.DeleteACLsResponse, e apiErr) {
			for range r.Filters {
				res := kmsg.NewDeleteACLsResponseResult()
				res.ErrorCode, res.ErrorMessage = e.code, e.msg
				out.Results = append(out.Results, res)
			}
		}),
		forward: &forwarding{},
		handle:  (*Broker).handleDeleteACLs,
	})
}

// sortedACLs is the ACLs in a stable order (DescribeAcls answers).
func sortedACLs(acls []metadata.ACL) {
	slices.SortFunc(acls, func(x, y metadata.ACL) int {
		return cmp.Or(cmp.Compare(x.ResourceType, y.ResourceType), cmp.Compare(x.ResourceName, y.ResourceName),
			cmp.Compare(x.PatternType, y.PatternType), cmp.Compare(x.Principal, y.Principal), cmp.Compare(x.Host, y.Host),
			cmp.Compare(x.Operation, y.Operation), cmp.Compare(x.PermissionType, y.PermissionType))
	})
}
