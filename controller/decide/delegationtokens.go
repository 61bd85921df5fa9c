package decide

// Delegation tokens (KIP-48, KIP-373): CreateDelegationToken (key 38),
// RenewDelegationToken (39) and ExpireDelegationToken (40) as Kafka's
// DelegationTokenControlManager decides them, with the sweep of expired
// tokens the active controller runs every
// delegation.token.expiry.check.interval.ms. The records and the tokens
// in the image are metadata's (metadata/delegationtokens.go). The three
// requests are decisions (doc.go): the time is the env's clock and a
// new token's id comes from the env's random source. When the records are
// not committed, the answer carries only the commit's error (a Create
// answer still names the owner and the requester, as its refusals do).
//
// A token's record never holds its HMAC: the HMAC is HmacSHA512 of the id
// keyed with delegation.token.secret.key (sasl.TokenHMAC), which every
// node that knows the secret computes again. Renew and Expire name a token
// by its HMAC, so the controller finds it by computing the HMAC of each
// token.
//
// Decisions and codes are Kafka's: DELEGATION_TOKEN_AUTH_DISABLED without
// a secret, UNSUPPORTED_VERSION below metadata.version 3.6-IV2,
// INVALID_PRINCIPAL_TYPE for a renewer that is not a User,
// DELEGATION_TOKEN_NOT_FOUND for an unknown HMAC, DELEGATION_TOKEN_EXPIRED
// for a token past its expiry or maximum, DELEGATION_TOKEN_OWNER_MISMATCH
// when the requester is neither the owner nor a renewer. Expiring with a
// negative period removes the token at once; otherwise its expiry moves to
// the sooner of now plus the period and its maximum. The requester is the
// principal the broker names in the request's context
// (metadata.WithRequestPrincipal); a request without one acts as
// User:ANONYMOUS.
// The broker makes the checks Kafka's KafkaApis and ControllerApis make
// first (tokens never requested over a token-authenticated, PLAINTEXT or
// anonymous SSL connection, CREATE_TOKENS for another owner).

import (
	"context"
	"crypto/hmac"
	"encoding/binary"
	"math"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// delegationTokenSupportedMetadataVersion is metadata.version 3.6-IV2,
// the first with delegation token records
// (MetadataVersion.isDelegationTokenSupported).
const delegationTokenSupportedMetadataVersion int16 = 14

// tokenForHMAC finds the token of img whose HMAC under secret is mac.
func tokenForHMAC(img *metadata.Image, secret string, mac []byte) (*metadata.DelegationToken, bool) {
	if img == nil || secret == "" {
		return nil, false
	}
	for _, t := range img.DelegationTokens {
		if hmac.Equal(sasl.TokenHMAC(secret, t.ID), mac) {
			return t, true
		}
	}
	return nil, false
}

// tokensEnabled reports whether this controller has a token secret.
func (e *Env) tokensEnabled() bool { return e.DelegationTokens.SecretKey != "" }

// tokenCheck is the refusal every token request shares, or 0.
func (e *Env) tokenCheck(img *metadata.Image) int16 {
	switch {
	case !e.tokensEnabled():
		return kerr.DelegationTokenAuthDisabled.Code
	case img.Features[metadata.MetadataVersionFeature] < delegationTokenSupportedMetadataVersion:
		return kerr.UnsupportedVersion.Code
	}
	return 0
}

// tokenToChange is the token a Renew or Expire names by its HMAC, or the
// code refusing the request before the token's state is looked at.
func (e *Env) tokenToChange(img *metadata.Image, mac []byte) (*metadata.DelegationToken, int16) {
	if code := e.tokenCheck(img); code != 0 {
		return nil, code
	}
	t, ok := tokenForHMAC(img, e.DelegationTokens.SecretKey, mac)
	if !ok {
		return nil, kerr.DelegationTokenNotFound.Code
	}
	return t, 0
}

// addMs is now plus d in milliseconds, saturating as Kafka's sum does.
func addMs(now, d int64) int64 {
	if now > math.MaxInt64-d {
		return math.MaxInt64
	}
	return now + d
}

// tokenOwner is the owner a create request names, else its requester.
func tokenOwner(req *kmsg.CreateDelegationTokenRequest, requester string) string {
	if req.OwnerPrincipalName != nil && *req.OwnerPrincipalName != "" {
		typ := "null" // Java's string of a missing type; the broker refuses it first
		if req.OwnerPrincipalType != nil {
			typ = *req.OwnerPrincipalType
		}
		return typ + ":" + *req.OwnerPrincipalName
	}
	return requester
}

// CreateDelegationToken decides a CreateDelegationToken request
// (DelegationTokenControlManager.createDelegationToken).
func (e *Env) CreateDelegationToken(ctx context.Context, img *metadata.Image, _ int64, req *kmsg.CreateDelegationTokenRequest) ([]metadata.Record, *kmsg.CreateDelegationTokenResponse) {
	requester := metadata.RequestPrincipal(ctx)
	if code := e.tokenCheck(img); code != 0 {
		return nil, createDelegationTokenAnswer(req, requester, code)
	}
	var renewers []string
	for _, r := range req.Renewers {
		if r.PrincipalType != metadata.UserPrincipalType {
			return nil, createDelegationTokenAnswer(req, requester, kerr.InvalidPrincipalType.Code)
		}
		renewers = append(renewers, r.PrincipalType+":"+r.PrincipalName)
	}
	nowMs := e.Now().UnixMilli()
	maxLifetime := e.DelegationTokens.MaxLifetime.Milliseconds()
	if req.MaxLifetimeMillis > 0 {
		maxLifetime = min(maxLifetime, req.MaxLifetimeMillis)
	}
	maxMs := addMs(nowMs, maxLifetime)
	expiryMs := min(maxMs, addMs(nowMs, e.DelegationTokens.ExpiryTime.Milliseconds()))
	tokenID := e.newTokenID(img)
	rec := &metadata.DelegationTokenRecord{
		Owner:               tokenOwner(req, requester),
		Requester:           requester,
		Renewers:            renewers,
		IssueTimestamp:      nowMs,
		MaxTimestamp:        maxMs,
		ExpirationTimestamp: expiryMs,
		TokenID:             tokenID,
	}
	resp := createDelegationTokenAnswer(req, requester, 0)
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = nowMs, expiryMs, maxMs
	resp.TokenID = tokenID
	resp.HMAC = sasl.TokenHMAC(e.DelegationTokens.SecretKey, tokenID)
	return []metadata.Record{rec}, resp
}

// CreateDelegationTokenFailed answers the request with e.
func CreateDelegationTokenFailed(req *kmsg.CreateDelegationTokenRequest, requester string, e *Error) *kmsg.CreateDelegationTokenResponse {
	return createDelegationTokenAnswer(req, requester, e.Code())
}

// createDelegationTokenAnswer is the answer with code naming the request's
// owner and requester, before any token is in it.
func createDelegationTokenAnswer(req *kmsg.CreateDelegationTokenRequest, requester string, code int16) *kmsg.CreateDelegationTokenResponse {
	resp := req.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
	resp.PrincipalType, resp.PrincipalName = metadata.SplitPrincipal(tokenOwner(req, requester))
	resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = metadata.SplitPrincipal(requester)
	resp.ErrorCode = code
	return resp
}

// newTokenID is an id no token of img has, in the form of Kafka's
// Uuid.randomUuid (version 4, never starting with '-', never with a zero
// high half). It is drawn from e.Rand so that a decision is reproducible
// from its env; the id is no secret (it is the token's SCRAM user name),
// the HMAC keyed with the secret is.
func (e *Env) newTokenID(img *metadata.Image) string {
	for {
		var u protocol.UUID
		binary.BigEndian.PutUint64(u[:8], e.Rand.Uint64())
		binary.BigEndian.PutUint64(u[8:], e.Rand.Uint64())
		u[6] = u[6]&0x0f | 0x40
		u[8] = u[8]&0x3f | 0x80
		id := u.String()
		if binary.BigEndian.Uint64(u[:8]) == 0 || id[0] == '-' {
			continue
		}
		if _, taken := img.DelegationTokens[id]; !taken {
			return id
		}
	}
}

// RenewDelegationToken decides a RenewDelegationToken request
// (DelegationTokenControlManager.renewDelegationToken).
func (e *Env) RenewDelegationToken(ctx context.Context, img *metadata.Image, _ int64, req *kmsg.RenewDelegationTokenRequest) ([]metadata.Record, *kmsg.RenewDelegationTokenResponse) {
	resp := req.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
	nowMs := e.Now().UnixMilli()
	t, code := e.tokenToChange(img, req.HMAC)
	switch {
	case code != 0:
		resp.ErrorCode = code
		return nil, resp
	case t.Expired(nowMs):
		resp.ErrorCode = kerr.DelegationTokenExpired.Code
		return nil, resp
	case !t.MayRenew(metadata.RequestPrincipal(ctx)):
		resp.ErrorCode = kerr.DelegationTokenOwnerMismatch.Code
		return nil, resp
	}
	renew := e.DelegationTokens.ExpiryTime.Milliseconds()
	if req.RenewTimeMillis > 0 {
		renew = min(renew, req.RenewTimeMillis)
	}
	rec := t.Record()
	rec.ExpirationTimestamp = min(t.MaxMs, nowMs+renew)
	resp.ExpiryTimestamp = rec.ExpirationTimestamp
	return []metadata.Record{rec}, resp
}

// RenewDelegationTokenFailed answers the request with e.
func RenewDelegationTokenFailed(req *kmsg.RenewDelegationTokenRequest, e *Error) *kmsg.RenewDelegationTokenResponse {
	resp := req.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
	resp.ErrorCode = e.Code()
	return resp
}

// ExpireDelegationToken decides an ExpireDelegationToken request
// (DelegationTokenControlManager.expireDelegationToken).
func (e *Env) ExpireDelegationToken(ctx context.Context, img *metadata.Image, _ int64, req *kmsg.ExpireDelegationTokenRequest) ([]metadata.Record, *kmsg.ExpireDelegationTokenResponse) {
	resp := req.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
	nowMs := e.Now().UnixMilli()
	t, code := e.tokenToChange(img, req.HMAC)
	switch {
	case code != 0:
		resp.ErrorCode = code
		return nil, resp
	case !t.MayRenew(metadata.RequestPrincipal(ctx)):
		resp.ErrorCode = kerr.DelegationTokenOwnerMismatch.Code
		return nil, resp
	case req.ExpiryPeriodMillis < 0:
		resp.ExpiryTimestamp = nowMs
		return []metadata.Record{&metadata.RemoveDelegationTokenRecord{TokenID: t.ID}}, resp
	case t.Expired(nowMs):
		resp.ErrorCode = kerr.DelegationTokenExpired.Code
		return nil, resp
	}
	rec := t.Record()
	rec.ExpirationTimestamp = min(t.MaxMs, addMs(nowMs, req.ExpiryPeriodMillis))
	resp.ExpiryTimestamp = rec.ExpirationTimestamp
	return []metadata.Record{rec}, resp
}

// ExpireDelegationTokenFailed answers the request with e.
func ExpireDelegationTokenFailed(req *kmsg.ExpireDelegationTokenRequest, e *Error) *kmsg.ExpireDelegationTokenResponse {
	resp := req.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
	resp.ErrorCode = e.Code()
	return resp
}

// ExpiredTokenRecords remove the tokens expired at nowMs, at most limit
// of them (DelegationTokenControlManager.sweepExpiredDelegationTokens).
func ExpiredTokenRecords(img *metadata.Image, nowMs int64, limit int) []metadata.Record {
	var out []metadata.Record
	for _, t := range img.DelegationTokensSorted() {
		if len(out) >= limit {
			break
		}
		if t.Expired(nowMs) {
			out = append(out, &metadata.RemoveDelegationTokenRecord{TokenID: t.ID})
		}
	}
	return out
}
