package broker

// DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key
// 51), version 0 (KIP-554).
//
// Describe answers from this node's metadata image, as Kafka's brokers
// answer from their metadata cache: every user when the list is null or
// empty, else the users named, RESOURCE_NOT_FOUND for a user without
// credentials and DUPLICATE_RESOURCE for a user named twice, with Kafka's
// messages. Alter goes to the active controller (controller/scram.go) and
// is answered once its records are committed. Credentials never leave the
// controller's records except as the salt, keys and iterations a SCRAM
// exchange needs: Describe tells only mechanisms and iterations.

import (
	"cmp"
	"context"
	"maps"
	"slices"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleAlterUserScramCredentials(ctx context.Context, r *network.Request) {
	b.forwardRequest(ctx, r, nil)
}

func (b *Broker) handleDescribeUserScramCredentials(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	if !b.clusterAllowed(identityOf(r), kmsg.ACLOperationDescribe) {
		// KafkaApis answers with the error's default message, so none.
		r.Respond(errorResponse(req, errCode(kerr.ClusterAuthorizationFailed)))
		return
	}
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	resp.Results = describeScramCredentials(b.meta.Image(), req)
	r.Respond(resp)
}

// describeScramCredentials is Kafka's ScramImage.describe.
func describeScramCredentials(img *metadata.Image, req *kmsg.DescribeUserSCRAMCredentialsRequest) []kmsg.DescribeUserSCRAMCredentialsResponseResult {
	byUser := map[string][]metadata.ScramKey{}
	if img != nil {
		for k := range img.ScramCredentials {
			byUser[k.User] = append(byUser[k.User], k)
		}
	}
	// named maps each user to whether it was named more than once.
	named := map[string]bool{}
	var order []string
	if len(req.Users) == 0 {
		order = slices.Sorted(maps.Keys(byUser))
		for _, u := range order {
			named[u] = false
		}
	} else {
		for _, u := range req.Users {
			if _, again := named[u.Name]; again {
				named[u.Name] = true
				continue
			}
			named[u.Name] = false
			order = append(order, u.Name)
		}
	}
	var out []kmsg.DescribeUserSCRAMCredentialsResponseResult
	for _, user := range order {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = user
		keys := byUser[user]
		switch {
		case named[user]:
			res.ErrorCode = kerr.DuplicateResource.Code
			res.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + user)
		case len(keys) == 0:
			res.ErrorCode = kerr.ResourceNotFound.Code
			res.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + user)
		default:
			slices.SortFunc(keys, func(a, b metadata.ScramKey) int { return cmp.Compare(a.Mechanism, b.Mechanism) })
			for _, k := range keys {
				info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				info.Mechanism = k.Mechanism
				info.Iterations = img.ScramCredentials[k].Iterations
				res.CredentialInfos = append(res.CredentialInfos, info)
			}
		}
		out = append(out, res)
	}
	return out
}

// scramLookup finds SCRAM credentials in the current metadata image.
func (b *Broker) scramLookup(mechanism, user string) (sasl.ScramCredential, bool) {
	return scramCredential(b.meta.Image(), mechanism, user)
}

// scramCredential is a user's credential in img for the SCRAM mechanism
// called mechanism, copied into sasl's type (the image keeps its own, so
// that the metadata model does not depend on sasl).
func scramCredential(img *metadata.Image, mechanism, user string) (sasl.ScramCredential, bool) {
	m, ok := sasl.ScramByName(mechanism)
	if !ok || img == nil {
		return sasl.ScramCredential{}, false
	}
	c, ok := img.ScramCredentials[metadata.ScramKey{User: user, Mechanism: m.Type}]
	if !ok {
		return sasl.ScramCredential{}, false
	}
	return sasl.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}, true
}

// scramAlterationUsers are the users an AlterUserScramCredentials names, in
// order.
func scramAlterationUsers(req *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	var users []string
	for _, d := range req.Deletions {
		users = append(users, d.Name)
	}
	for _, u := range req.Upsertions {
		users = append(users, u.Name)
	}
	return users
}

func init() {
	register(api{
		key: kmsg.DescribeUserSCRAMCredentials, min: 0, max: 0,
		listeners:    allListeners,
		authorizedAs: "DESCRIBE on the cluster",
		errorAnswer: errorAnswerOf(func(r *kmsg.DescribeUserSCRAMCredentialsRequest, out *kmsg.DescribeUserSCRAMCredentialsResponse, e apiErr) {
			// Results carry no user name, one per user asked about.
			out.ErrorCode, out.ErrorMessage = e.code, e.msg
			for range r.Users {
				res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
				res.ErrorCode, res.ErrorMessage = e.code, e.msg
				out.Results = append(out.Results, res)
			}
		}),
		handle: (*Broker).handleDescribeUserScramCredentials,
	})
	register(api{
		key: kmsg.AlterUserSCRAMCredentials, min: 0, max: 0,
		listeners:        allListeners,
		authorizedAs:     "ALTER on the cluster",
		clusterOperation: kmsg.ACLOperationAlter,
		errorAnswer: errorAnswerOf(func(r *kmsg.AlterUserSCRAMCredentialsRequest, out *kmsg.AlterUserSCRAMCredentialsResponse, e apiErr) {
			// One result per user named, deletions and upsertions together,
			// sorted.
			users := scramAlterationUsers(r)
			slices.Sort(users)
			for _, name := range slices.Compact(users) {
				res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				res.User, res.ErrorCode, res.ErrorMessage = name, e.code, e.msg
				out.Results = append(out.Results, res)
			}
		}),
		forward: &forwarding{},
		handle:  (*Broker).handleAlterUserScramCredentials,
	})
}
