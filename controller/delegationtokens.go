package controller

// Delegation tokens (KIP-48, KIP-373): DelegationTokenRecord and
// RemoveDelegationTokenRecord (Kafka's metadata record types 10 and 26,
// same fields), their place in the image, and CreateDelegationToken (key
// 38), RenewDelegationToken (39) and ExpireDelegationToken (40) as Kafka's
// DelegationTokenControlManager decides them, with the sweep of expired
// tokens the active controller runs every
// delegation.token.expiry.check.interval.ms.
//
// A token's record holds its id, owner, requester, renewers (principals in
// Kafka's "Type:Name" form) and its issue, maximum and expiry timestamps,
// never its HMAC: the HMAC is HmacSHA512 of the id keyed with
// delegation.token.secret.key (sasl.TokenHMAC), which every node that
// knows the secret computes again. Renew and Expire name a token by its
// HMAC, so the controller finds it by computing the HMAC of each token.
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
// (WithRequestPrincipal); a request without one acts as User:ANONYMOUS.
// The broker makes the checks Kafka's KafkaApis and ControllerApis make
// first (tokens never requested over a token-authenticated, PLAINTEXT or
// anonymous SSL connection, CREATE_TOKENS for another owner).
//
// Deviation: the sweep removes at most sweepLimit tokens per entry and
// runs again on the next tick while more are due, as Kafka's does with its
// own limit.

import (
	"cmp"
	"context"
	"crypto/hmac"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	RecordDelegationToken       RecordType = 10
	RecordRemoveDelegationToken RecordType = 26
)

// delegationTokenSupportedMetadataVersion is metadata.version 3.6-IV2,
// the first with delegation token records
// (MetadataVersion.isDelegationTokenSupported).
const delegationTokenSupportedMetadataVersion int16 = 14

// sweepLimit is the most tokens one sweep removes (Kafka's
// MAX_RECORDS_PER_EXPIRATION).
const sweepLimit = 1000

// UserPrincipalType is the principal type of users, the only type a
// token's renewers may have.
const UserPrincipalType = "User"

// DelegationTokenConfig is the delegation token set-up of a controller.
type DelegationTokenConfig struct {
	// SecretKey is delegation.token.secret.key; empty disables tokens.
	SecretKey string
	// MaxLifetime is delegation.token.max.lifetime.ms: no token lives
	// longer, renewed or not.
	MaxLifetime time.Duration
	// ExpiryTime is delegation.token.expiry.time.ms: how long a token
	// lives before it must be renewed, and the longest renewal.
	ExpiryTime time.Duration
	// ExpiryCheckInterval is delegation.token.expiry.check.interval.ms:
	// how often the active controller removes expired tokens.
	ExpiryCheckInterval time.Duration
}

// DelegationToken is a token as the image holds it (Kafka's
// TokenInformation). Principals are in Kafka's "Type:Name" form.
type DelegationToken struct {
	ID        string
	Owner     string
	Requester string
	Renewers  []string
	// IssueMs, MaxMs and ExpiryMs are Unix milliseconds.
	IssueMs  int64
	MaxMs    int64
	ExpiryMs int64
}

// Expired reports whether the token is past its expiry or maximum at
// nowMs, as Kafka tests it (strictly after).
func (t *DelegationToken) Expired(nowMs int64) bool {
	return t.MaxMs < nowMs || t.ExpiryMs < nowMs
}

// OwnerOrRenewer reports whether principal owns, requested or may renew
// the token (TokenInformation.ownerOrRenewer): whom Describe shows it to,
// and whose tokens an owner filter matches.
func (t *DelegationToken) OwnerOrRenewer(principal string) bool {
	return t.Owner == principal || t.Requester == principal || slices.Contains(t.Renewers, principal)
}

// MayRenew reports whether principal may renew or expire the token: its
// owner or a renewer, not its requester
// (DelegationTokenControlManager.allowedToRenew).
func (t *DelegationToken) MayRenew(principal string) bool {
	return t.Owner == principal || slices.Contains(t.Renewers, principal)
}

// SplitPrincipal splits Kafka's "Type:Name" form at its first colon.
func SplitPrincipal(p string) (typ, name string) {
	typ, name, _ = strings.Cut(p, ":")
	return typ, name
}

// DelegationTokenRecord creates a token or replaces it (a renewal or an
// expiry changes ExpirationTimestamp).
type DelegationTokenRecord struct {
	Owner               string
	Requester           string
	Renewers            []string
	IssueTimestamp      int64
	MaxTimestamp        int64
	ExpirationTimestamp int64
	TokenID             string
}

// RemoveDelegationTokenRecord deletes a token.
type RemoveDelegationTokenRecord struct {
	TokenID string
}

func (*DelegationTokenRecord) Type() RecordType       { return RecordDelegationToken }
func (*RemoveDelegationTokenRecord) Type() RecordType { return RecordRemoveDelegationToken }
func (*DelegationTokenRecord) Version() int16         { return 0 }
func (*RemoveDelegationTokenRecord) Version() int16   { return 0 }

func (x *DelegationTokenRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendString(dst, x.Owner)
	dst = kbin.AppendString(dst, x.Requester)
	dst = kbin.AppendArrayLen(dst, len(x.Renewers))
	for _, r := range x.Renewers {
		dst = kbin.AppendString(dst, r)
	}
	dst = kbin.AppendInt64(dst, x.IssueTimestamp)
	dst = kbin.AppendInt64(dst, x.MaxTimestamp)
	dst = kbin.AppendInt64(dst, x.ExpirationTimestamp)
	return kbin.AppendString(dst, x.TokenID)
}

func (x *DelegationTokenRecord) readBody(r *kbin.Reader, _ int16) {
	x.Owner = r.String()
	x.Requester = r.String()
	// ArrayLen refuses a count beyond the bytes left, so a hostile
	// count allocates no more than the record's size.
	if n := r.ArrayLen(); n > 0 {
		x.Renewers = make([]string, n)
		for i := range x.Renewers {
			x.Renewers[i] = r.String()
		}
	}
	x.IssueTimestamp = r.Int64()
	x.MaxTimestamp = r.Int64()
	x.ExpirationTimestamp = r.Int64()
	x.TokenID = r.String()
}

func (x *RemoveDelegationTokenRecord) appendBody(dst []byte) []byte {
	return kbin.AppendString(dst, x.TokenID)
}

func (x *RemoveDelegationTokenRecord) readBody(r *kbin.Reader, _ int16) {
	x.TokenID = r.String()
}

// applyDelegationToken applies a delegation token record to the image
// being built.
func (b *imageBuilder) applyDelegationToken(rec Record) error {
	if !b.tokensCopied {
		b.next.DelegationTokens = maps.Clone(b.next.DelegationTokens)
		if b.next.DelegationTokens == nil {
			b.next.DelegationTokens = map[string]*DelegationToken{}
		}
		b.tokensCopied = true
	}
	switch r := rec.(type) {
	case *DelegationTokenRecord:
		b.next.DelegationTokens[r.TokenID] = &DelegationToken{
			ID:        r.TokenID,
			Owner:     r.Owner,
			Requester: r.Requester,
			Renewers:  nilIfEmpty(r.Renewers),
			IssueMs:   r.IssueTimestamp,
			MaxMs:     r.MaxTimestamp,
			ExpiryMs:  r.ExpirationTimestamp,
		}
	case *RemoveDelegationTokenRecord:
		// Kafka's DelegationTokenDelta removes what may already be
		// gone (an expiry and the sweep can both remove a token).
		delete(b.next.DelegationTokens, r.TokenID)
	}
	return nil
}

// delegationTokenRecords are the records that rebuild the image's tokens,
// in a deterministic order.
func delegationTokenRecords(img *Image) []Record {
	out := make([]Record, 0, len(img.DelegationTokens))
	for _, id := range slices.Sorted(maps.Keys(img.DelegationTokens)) {
		out = append(out, img.DelegationTokens[id].record())
	}
	return out
}

func (t *DelegationToken) record() *DelegationTokenRecord {
	return &DelegationTokenRecord{
		Owner:               t.Owner,
		Requester:           t.Requester,
		Renewers:            t.Renewers,
		IssueTimestamp:      t.IssueMs,
		MaxTimestamp:        t.MaxMs,
		ExpirationTimestamp: t.ExpiryMs,
		TokenID:             t.ID,
	}
}

// TokenForHMAC finds the token whose HMAC under secret is mac.
func (img *Image) TokenForHMAC(secret string, mac []byte) (*DelegationToken, bool) {
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

// DelegationTokensSorted are the image's tokens by issue time, then id.
func (img *Image) DelegationTokensSorted() []*DelegationToken {
	if img == nil {
		return nil
	}
	out := slices.Collect(maps.Values(img.DelegationTokens))
	slices.SortFunc(out, func(a, b *DelegationToken) int {
		if c := cmp.Compare(a.IssueMs, b.IssueMs); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}

type requestPrincipalKey struct{}

// WithRequestPrincipal says which principal ("Type:Name") the requests
// made with ctx act for: a token's requester, owner by default, and the
// one allowed to renew or expire it.
func WithRequestPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, requestPrincipalKey{}, principal)
}

// requestPrincipal is the principal ctx names, User:ANONYMOUS if none.
func requestPrincipal(ctx context.Context) string {
	if p, ok := ctx.Value(requestPrincipalKey{}).(string); ok {
		return p
	}
	return "User:ANONYMOUS"
}

// tokensEnabled reports whether this controller has a token secret.
func (c *Controller) tokensEnabled() bool { return c.cfg.DelegationTokens.SecretKey != "" }

// tokenCheck is the refusal every token request shares, or 0.
func (c *Controller) tokenCheck(img *Image) int16 {
	switch {
	case !c.tokensEnabled():
		return kerr.DelegationTokenAuthDisabled.Code
	case img.Features[MetadataVersionFeature] < delegationTokenSupportedMetadataVersion:
		return kerr.UnsupportedVersion.Code
	}
	return 0
}

// tokenToChange is the token a Renew or Expire names by its HMAC, or the
// code refusing the request before the token's state is looked at.
func (c *Controller) tokenToChange(img *Image, mac []byte) (*DelegationToken, int16) {
	if code := c.tokenCheck(img); code != 0 {
		return nil, code
	}
	t, ok := img.TokenForHMAC(c.cfg.DelegationTokens.SecretKey, mac)
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

// CreateDelegationToken creates a token for the request's owner (or the
// requester).
func (c *Controller) CreateDelegationToken(ctx context.Context, req *kmsg.CreateDelegationTokenRequest) *kmsg.CreateDelegationTokenResponse {
	requester := requestPrincipal(ctx)
	resp, ok, err := submitTyped(c, ctx, func(img *Image, _ int64) ([]Record, *kmsg.CreateDelegationTokenResponse) {
		return c.decideCreateToken(img, requester, req, c.now().UnixMilli(), protocol.RandomUUID().String())
	})
	if !ok || err != nil {
		resp = req.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
		owner := tokenOwner(req, requester)
		resp.PrincipalType, resp.PrincipalName = SplitPrincipal(owner)
		resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = SplitPrincipal(requester)
		resp.ErrorCode = commitFailure(ok, err).code()
	}
	return resp
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

// decideCreateToken is DelegationTokenControlManager.createDelegationToken.
func (c *Controller) decideCreateToken(img *Image, requester string, req *kmsg.CreateDelegationTokenRequest, nowMs int64, tokenID string) ([]Record, *kmsg.CreateDelegationTokenResponse) {
	resp := req.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
	owner := tokenOwner(req, requester)
	resp.PrincipalType, resp.PrincipalName = SplitPrincipal(owner)
	resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = SplitPrincipal(requester)
	if code := c.tokenCheck(img); code != 0 {
		resp.ErrorCode = code
		return nil, resp
	}
	maxLifetime := c.cfg.DelegationTokens.MaxLifetime.Milliseconds()
	if req.MaxLifetimeMillis > 0 {
		maxLifetime = min(maxLifetime, req.MaxLifetimeMillis)
	}
	maxMs := addMs(nowMs, maxLifetime)
	expiryMs := min(maxMs, addMs(nowMs, c.cfg.DelegationTokens.ExpiryTime.Milliseconds()))
	var renewers []string
	for _, r := range req.Renewers {
		if r.PrincipalType != UserPrincipalType {
			resp.ErrorCode = kerr.InvalidPrincipalType.Code
			return nil, resp
		}
		renewers = append(renewers, r.PrincipalType+":"+r.PrincipalName)
	}
	rec := &DelegationTokenRecord{
		Owner:               owner,
		Requester:           requester,
		Renewers:            renewers,
		IssueTimestamp:      nowMs,
		MaxTimestamp:        maxMs,
		ExpirationTimestamp: expiryMs,
		TokenID:             tokenID,
	}
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = nowMs, expiryMs, maxMs
	resp.TokenID = tokenID
	resp.HMAC = sasl.TokenHMAC(c.cfg.DelegationTokens.SecretKey, tokenID)
	return []Record{rec}, resp
}

// RenewDelegationToken moves a token's expiry on.
func (c *Controller) RenewDelegationToken(ctx context.Context, req *kmsg.RenewDelegationTokenRequest) *kmsg.RenewDelegationTokenResponse {
	requester := requestPrincipal(ctx)
	resp, ok, err := submitTyped(c, ctx, func(img *Image, _ int64) ([]Record, *kmsg.RenewDelegationTokenResponse) {
		return c.decideRenewToken(img, requester, req, c.now().UnixMilli())
	})
	if !ok || err != nil {
		resp = req.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
		resp.ErrorCode = commitFailure(ok, err).code()
	}
	return resp
}

// decideRenewToken is DelegationTokenControlManager.renewDelegationToken.
func (c *Controller) decideRenewToken(img *Image, requester string, req *kmsg.RenewDelegationTokenRequest, nowMs int64) ([]Record, *kmsg.RenewDelegationTokenResponse) {
	resp := req.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
	t, code := c.tokenToChange(img, req.HMAC)
	switch {
	case code != 0:
		resp.ErrorCode = code
		return nil, resp
	case t.Expired(nowMs):
		resp.ErrorCode = kerr.DelegationTokenExpired.Code
		return nil, resp
	case !t.MayRenew(requester):
		resp.ErrorCode = kerr.DelegationTokenOwnerMismatch.Code
		return nil, resp
	}
	renew := c.cfg.DelegationTokens.ExpiryTime.Milliseconds()
	if req.RenewTimeMillis > 0 {
		renew = min(renew, req.RenewTimeMillis)
	}
	rec := t.record()
	rec.ExpirationTimestamp = min(t.MaxMs, nowMs+renew)
	resp.ExpiryTimestamp = rec.ExpirationTimestamp
	return []Record{rec}, resp
}

// ExpireDelegationToken expires a token now or moves its expiry.
func (c *Controller) ExpireDelegationToken(ctx context.Context, req *kmsg.ExpireDelegationTokenRequest) *kmsg.ExpireDelegationTokenResponse {
	requester := requestPrincipal(ctx)
	resp, ok, err := submitTyped(c, ctx, func(img *Image, _ int64) ([]Record, *kmsg.ExpireDelegationTokenResponse) {
		return c.decideExpireToken(img, requester, req, c.now().UnixMilli())
	})
	if !ok || err != nil {
		resp = req.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
		resp.ErrorCode = commitFailure(ok, err).code()
	}
	return resp
}

// decideExpireToken is DelegationTokenControlManager.expireDelegationToken.
func (c *Controller) decideExpireToken(img *Image, requester string, req *kmsg.ExpireDelegationTokenRequest, nowMs int64) ([]Record, *kmsg.ExpireDelegationTokenResponse) {
	resp := req.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
	t, code := c.tokenToChange(img, req.HMAC)
	switch {
	case code != 0:
		resp.ErrorCode = code
		return nil, resp
	case !t.MayRenew(requester):
		resp.ErrorCode = kerr.DelegationTokenOwnerMismatch.Code
		return nil, resp
	case req.ExpiryPeriodMillis < 0:
		resp.ExpiryTimestamp = nowMs
		return []Record{&RemoveDelegationTokenRecord{TokenID: t.ID}}, resp
	case t.Expired(nowMs):
		resp.ErrorCode = kerr.DelegationTokenExpired.Code
		return nil, resp
	}
	rec := t.record()
	rec.ExpirationTimestamp = min(t.MaxMs, addMs(nowMs, req.ExpiryPeriodMillis))
	resp.ExpiryTimestamp = rec.ExpirationTimestamp
	return []Record{rec}, resp
}

// expiredTokenRecords remove the tokens expired at nowMs, at most limit
// of them (DelegationTokenControlManager.sweepExpiredDelegationTokens).
func expiredTokenRecords(img *Image, nowMs int64, limit int) []Record {
	var out []Record
	for _, t := range img.DelegationTokensSorted() {
		if len(out) >= limit {
			break
		}
		if t.Expired(nowMs) {
			out = append(out, &RemoveDelegationTokenRecord{TokenID: t.ID})
		}
	}
	return out
}

// sweepExpiredTokens removes expired tokens every ExpiryCheckInterval
// (loop, active).
func (c *Controller) sweepExpiredTokens() {
	now := c.now()
	if c.nextTokenSweep.IsZero() {
		c.nextTokenSweep = now.Add(c.tokenSweepInterval())
		return
	}
	if now.Before(c.nextTokenSweep) {
		return
	}
	recs := expiredTokenRecords(c.latest(), now.UnixMilli(), sweepLimit)
	if len(recs) >= sweepLimit {
		c.nextTokenSweep = now // more are due: again on the next tick
	} else {
		c.nextTokenSweep = now.Add(c.tokenSweepInterval())
	}
	if len(recs) == 0 {
		return
	}
	for _, r := range recs {
		id := r.(*RemoveDelegationTokenRecord).TokenID
		t := c.latest().DelegationTokens[id]
		c.logger.Info("Delegation token expired", "token", id, "owner", t.Owner)
	}
	c.propose(recs, c.nextIndex(), func(err error) {
		if err != nil {
			c.logger.Warn("removing expired delegation tokens was not committed", "err", err)
		}
	})
}

func (c *Controller) tokenSweepInterval() time.Duration {
	if d := c.cfg.DelegationTokens.ExpiryCheckInterval; d > 0 {
		return d
	}
	return time.Hour
}
