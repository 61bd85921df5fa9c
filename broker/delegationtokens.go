package broker

// CreateDelegationToken (key 38) v1-3, RenewDelegationToken (39) v1-2,
// ExpireDelegationToken (40) v1-2 and DescribeDelegationToken (41) v1-3
// (KIP-48, KIP-373), the versions Kafka 4.3 serves, and the SCRAM
// credentials of delegation tokens (sasl/token.go).
//
// As Kafka's KafkaApis: no token request is taken from a connection that
// authenticated with a token, from a PLAINTEXT listener or from an SSL
// connection without a client certificate (User:ANONYMOUS):
// DELEGATION_TOKEN_REQUEST_NOT_ALLOWED. Create checks, before it goes to
// the active controller, that a requester creating a token for another
// owner may CREATE_TOKENS on that USER (DELEGATION_TOKEN_AUTHORIZATION_
// FAILED) and that every renewer is a User (INVALID_PRINCIPAL_TYPE);
// Renew and Expire go to the active controller as they are. The
// requester's identity travels with the request (in process, or in the
// Envelope to another node) and the controller decides
// (controller/delegationtokens.go).
//
// Describe answers from this node's image, with HMACs computed from this
// node's delegation.token.secret.key (DELEGATION_TOKEN_AUTH_DISABLED
// without one): an empty owner list describes nothing, a null one every
// token; a token is shown when one of the owners asked for owns, requested
// or may renew it, and then only to its owner, requester and renewers and
// to principals that may DESCRIBE the DELEGATION_TOKEN or DESCRIBE_TOKENS
// on the owner's USER (Kafka's TokenInformation.ownerOrRenewer counts the
// requester, though only the owner and renewers may renew or expire).
// Tokens past their expiry show until the controller's sweep removes
// them, as in Kafka.
//
// SCRAM: a token id logs in with the base64 HMAC as its password; its
// credential is derived once per node and mechanism (4096 iterations, a
// random salt, as Kafka's DelegationTokenManager) and forgotten when the
// token leaves the image.
//
// Deviation: a controller listener answers DescribeDelegationToken from
// its image as a broker does; Kafka's controllers advertise it and then
// fail it as an unsupported API.
//
// Authorization (with an authorizer; Kafka without one allows all):
// CREATE_TOKENS on the USER of another owner, DESCRIBE on a
// DELEGATION_TOKEN or DESCRIBE_TOKENS on its owner's USER to see a token
// of someone else's. The controller checks the first again, and the
// token-authenticated flag, for what it is forwarded (controllerauth.go).

import (
	"context"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// allowTokenRequests is KafkaApis.allowTokenRequests: tokens are managed
// only over connections authenticated otherwise than with a token.
func allowTokenRequests(r *network.Request) bool {
	switch {
	case r.TokenAuthenticated(), r.SecurityProtocol() == "PLAINTEXT":
		return false
	case r.SecurityProtocol() == "SSL" && r.Principal() == authz.Anonymous:
		// One-way TLS: the client proved nothing.
		return false
	}
	return true
}

// tokenOwner is the owner a create request names, else requester; ok is
// false for a name without a type, which Kafka's KafkaPrincipal refuses
// with an exception the request dies of.
func tokenOwner(req *kmsg.CreateDelegationTokenRequest, requester authz.Principal) (authz.Principal, bool) {
	if req.OwnerPrincipalName == nil || *req.OwnerPrincipalName == "" {
		return requester, true
	}
	if req.OwnerPrincipalType == nil {
		return authz.Principal{}, false
	}
	return authz.Principal{Type: *req.OwnerPrincipalType, Name: *req.OwnerPrincipalName}, true
}

// withRequester names r's principal as the one a forwarded token request
// acts for, for a controller reached without an identity check (the
// controller's front names it again from the identity, an envelope's
// included).
func withRequester(ctx context.Context, r *network.Request) context.Context {
	return metadata.WithRequestPrincipal(ctx, r.Principal().String())
}

func (b *Broker) handleCreateDelegationToken(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.CreateDelegationTokenRequest)
	requester := r.Principal()
	owner, ok := tokenOwner(req, requester)
	switch {
	case !ok:
		r.Respond(createTokenError(req, kerr.UnknownServerError, requester, requester))
		return
	case !allowTokenRequests(r):
		r.Respond(createTokenError(req, kerr.DelegationTokenRequestNotAllowed, owner, requester))
		return
	case owner != requester && !b.can(r, kmsg.ACLOperationCreateTokens, kmsg.ACLResourceTypeUser, owner.String()):
		r.Respond(createTokenError(req, kerr.DelegationTokenAuthorizationFailed, owner, requester))
		return
	}
	for _, rn := range req.Renewers {
		if rn.PrincipalType != authz.UserType {
			r.Respond(createTokenError(req, kerr.InvalidPrincipalType, owner, requester))
			return
		}
	}
	b.forwardRequest(withRequester(ctx, r), r, nil)
}

// createTokenError is CreateDelegationTokenResponse.prepareResponse for an
// error: the owner and requester, -1 timestamps, no id or HMAC.
func createTokenError(req *kmsg.CreateDelegationTokenRequest, e *kerr.Error, owner, requester authz.Principal) *kmsg.CreateDelegationTokenResponse {
	resp := req.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
	resp.ErrorCode = e.Code
	resp.PrincipalType, resp.PrincipalName = owner.Type, owner.Name
	resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = requester.Type, requester.Name
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = -1, -1, -1
	resp.HMAC = []byte{}
	return resp
}

// tokenErrorResponse sets the error of a Create, Renew or Expire answer
// that the controller did not give (Kafka's getErrorResponse: -1
// timestamps).
func tokenErrorResponse(resp kmsg.Response, code int16) {
	switch out := resp.(type) {
	case *kmsg.CreateDelegationTokenResponse:
		out.ErrorCode = code
		out.IssueTimestamp, out.ExpiryTimestamp, out.MaxTimestamp = -1, -1, -1
		out.HMAC = []byte{}
	case *kmsg.RenewDelegationTokenResponse:
		out.ErrorCode, out.ExpiryTimestamp = code, -1
	case *kmsg.ExpireDelegationTokenResponse:
		out.ErrorCode, out.ExpiryTimestamp = code, -1
	}
}

// handleTokenChange serves RenewDelegationToken and
// ExpireDelegationToken: the active controller decides both, once the
// connection may manage tokens.
func (b *Broker) handleTokenChange(ctx context.Context, r *network.Request) {
	if !allowTokenRequests(r) {
		resp := r.Body.ResponseKind()
		tokenErrorResponse(resp, kerr.DelegationTokenRequestNotAllowed.Code)
		r.Respond(resp)
		return
	}
	b.forwardRequest(withRequester(ctx, r), r, nil)
}

func (b *Broker) handleDescribeDelegationToken(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DescribeDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.DescribeDelegationTokenResponse)
	switch {
	case !allowTokenRequests(r):
		resp.ErrorCode = kerr.DelegationTokenRequestNotAllowed.Code
	case b.tokens.secret == "":
		resp.ErrorCode = kerr.DelegationTokenAuthDisabled.Code
	case req.Owners != nil && len(req.Owners) == 0:
		// Kafka answers an empty (not null) owner list with nothing.
	default:
		resp.TokenDetails = b.describeTokens(r, req.Owners)
	}
	r.Respond(resp)
}

// describeTokens are the tokens r may see among those of owners (nil: of
// everyone), as DelegationTokenManager.filterToken chooses them.
func (b *Broker) describeTokens(r *network.Request, owners []kmsg.DescribeDelegationTokenRequestOwner) []kmsg.DescribeDelegationTokenResponseTokenDetail {
	requester := r.Principal().String()
	var out []kmsg.DescribeDelegationTokenResponseTokenDetail
	for _, t := range b.meta.Image().DelegationTokensSorted() {
		if owners != nil && !ownedByAny(t, owners) {
			continue
		}
		if !t.OwnerOrRenewer(requester) &&
			!b.can(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeDelegationToken, t.ID) &&
			!b.can(r, kmsg.ACLOperationDescribeTokens, kmsg.ACLResourceTypeUser, t.Owner) {
			continue
		}
		d := kmsg.NewDescribeDelegationTokenResponseTokenDetail()
		d.PrincipalType, d.PrincipalName = metadata.SplitPrincipal(t.Owner)
		d.TokenRequesterPrincipalType, d.TokenRequesterPrincipalName = metadata.SplitPrincipal(t.Requester)
		d.IssueTimestamp, d.ExpiryTimestamp, d.MaxTimestamp = t.IssueMs, t.ExpiryMs, t.MaxMs
		d.TokenID = t.ID
		d.HMAC = sasl.TokenHMAC(b.tokens.secret, t.ID)
		for _, rn := range t.Renewers {
			dr := kmsg.NewDescribeDelegationTokenResponseTokenDetailRenewer()
			dr.PrincipalType, dr.PrincipalName = metadata.SplitPrincipal(rn)
			d.Renewers = append(d.Renewers, dr)
		}
		out = append(out, d)
	}
	return out
}

func ownedByAny(t *metadata.DelegationToken, owners []kmsg.DescribeDelegationTokenRequestOwner) bool {
	for _, o := range owners {
		if t.OwnerOrRenewer(o.PrincipalType + ":" + o.PrincipalName) {
			return true
		}
	}
	return false
}

// tokenCredentials derives the SCRAM credentials of the image's
// delegation tokens and keeps them, so that a login costs no key
// derivation after a token's first.
type tokenCredentials struct {
	secret string
	meta   MetadataView
	// mu guards derived (a leaf: nothing is derived under it).
	mu      sync.Mutex
	derived map[tokenCredentialKey]sasl.ScramCredential
}

type tokenCredentialKey struct {
	id        string
	mechanism string
}

// lookup is the sasl.TokenLookup of the tokens in the current image.
func (tc *tokenCredentials) lookup(mechanism, tokenID string) (sasl.TokenCredential, bool) {
	if tc.secret == "" || tc.meta == nil {
		return sasl.TokenCredential{}, false
	}
	img := tc.meta.Image()
	t, ok := img.DelegationTokens[tokenID]
	m, known := sasl.ScramByName(mechanism)
	if !ok || !known {
		return sasl.TokenCredential{}, false
	}
	key := tokenCredentialKey{id: tokenID, mechanism: mechanism}
	tc.mu.Lock()
	cred, ok := tc.derived[key]
	tc.mu.Unlock()
	if !ok {
		cred = m.TokenScramCredential(sasl.TokenHMAC(tc.secret, tokenID))
		tc.mu.Lock()
		if len(tc.derived) >= 2*len(img.DelegationTokens)+16 {
			// Forget the credentials of tokens that are gone.
			for k := range tc.derived {
				if _, live := img.DelegationTokens[k.id]; !live {
					delete(tc.derived, k)
				}
			}
		}
		tc.derived[key] = cred
		tc.mu.Unlock()
	}
	_, owner := metadata.SplitPrincipal(t.Owner)
	return sasl.TokenCredential{Owner: owner, Credential: cred, Expiry: time.UnixMilli(t.ExpiryMs)}, true
}

func init() {
	register(api{
		key: kmsg.CreateDelegationToken, min: 1, max: 3,
		listeners:        allListeners,
		authorizedAs:     "CREATE_TOKENS on the owner's USER when it is not the requester",
		controllerRefuse: refusedBy(controllerFront.createTokenRefusal),
		errorAnswer: errorAnswerOf(func(_ *kmsg.CreateDelegationTokenRequest, out *kmsg.CreateDelegationTokenResponse, e apiErr) {
			tokenErrorResponse(out, e.code)
		}),
		forward: &forwarding{},
		handle:  (*Broker).handleCreateDelegationToken,
	})
	register(api{
		key: kmsg.RenewDelegationToken, min: 1, max: 2,
		listeners:        allListeners,
		authorizedAs:     "nothing (the owner or a renewer, checked by the controller)",
		controllerRefuse: controllerFront.tokenChangeRefusal,
		errorAnswer: errorAnswerOf(func(_ *kmsg.RenewDelegationTokenRequest, out *kmsg.RenewDelegationTokenResponse, e apiErr) {
			tokenErrorResponse(out, e.code)
		}),
		forward: &forwarding{},
		handle:  (*Broker).handleTokenChange,
	})
	register(api{
		key: kmsg.ExpireDelegationToken, min: 1, max: 2,
		listeners:        allListeners,
		authorizedAs:     "nothing (the owner or a renewer, checked by the controller)",
		controllerRefuse: controllerFront.tokenChangeRefusal,
		errorAnswer: errorAnswerOf(func(_ *kmsg.ExpireDelegationTokenRequest, out *kmsg.ExpireDelegationTokenResponse, e apiErr) {
			tokenErrorResponse(out, e.code)
		}),
		forward: &forwarding{},
		handle:  (*Broker).handleTokenChange,
	})
	register(api{
		key: kmsg.DescribeDelegationToken, min: 1, max: 3,
		listeners:    allListeners,
		authorizedAs: "DESCRIBE on each token or DESCRIBE_TOKENS on its owner's USER, unless owned or renewable",
		errorAnswer: errorAnswerOf(func(_ *kmsg.DescribeDelegationTokenRequest, out *kmsg.DescribeDelegationTokenResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		handle: (*Broker).handleDescribeDelegationToken,
	})
}
