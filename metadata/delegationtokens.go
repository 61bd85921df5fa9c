package metadata

// Delegation tokens (KIP-48, KIP-373): DelegationTokenRecord and
// RemoveDelegationTokenRecord (Kafka's metadata record types 10 and 26,
// same fields) and their place in the image. A token's record holds its
// id, owner, requester, renewers (principals in Kafka's "Type:Name" form)
// and its issue, maximum and expiry timestamps, never its HMAC: the HMAC is
// HmacSHA512 of the id keyed with delegation.token.secret.key
// (sasl.TokenHMAC), which every node that knows the secret computes again.
// What CreateDelegationToken, RenewDelegationToken and
// ExpireDelegationToken decide, and the sweep of expired tokens, are the
// controller's (controller/delegationtokens.go); the principal a request
// acts for travels to it in the request's context (WithRequestPrincipal).

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
)

const (
	RecordDelegationToken       RecordType = 10
	RecordRemoveDelegationToken RecordType = 26
)

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
		out = append(out, img.DelegationTokens[id].Record())
	}
	return out
}

// Record is the record that writes the token as it is (a renewal or an
// expiry changes its ExpirationTimestamp).
func (t *DelegationToken) Record() *DelegationTokenRecord {
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

// RequestPrincipal is the principal ctx names, User:ANONYMOUS if none.
func RequestPrincipal(ctx context.Context) string {
	if p, ok := ctx.Value(requestPrincipalKey{}).(string); ok {
		return p
	}
	return "User:ANONYMOUS"
}
