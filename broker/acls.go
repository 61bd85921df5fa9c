package broker

// DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31),
// versions 1-3.
//
// No authorizer is configured yet (security is a later issue), so these
// answer SECURITY_DISABLED with Kafka's message, exactly as a Kafka broker
// without authorizer.class.name does.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var noAuthorizer = "No Authorizer is configured."

func (b *Broker) handleDescribeACLs(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode = kerr.SecurityDisabled.Code
	resp.ErrorMessage = &noAuthorizer
	r.respond(resp)
}

func (b *Broker) handleCreateACLs(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for range req.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorCode = kerr.SecurityDisabled.Code
		res.ErrorMessage = &noAuthorizer
		resp.Results = append(resp.Results, res)
	}
	r.respond(resp)
}

func (b *Broker) handleDeleteACLs(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		res.ErrorCode = kerr.SecurityDisabled.Code
		res.ErrorMessage = &noAuthorizer
		resp.Results = append(resp.Results, res)
	}
	r.respond(resp)
}
