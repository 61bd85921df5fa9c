package decide

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/sasl"
)

func TestExpiredTokenRecordsLimit(t *testing.T) {
	img := metadata.EmptyImage("c")
	var recs []metadata.Record
	for i := range 5 {
		recs = append(recs, &metadata.DelegationTokenRecord{Owner: "User:a", Requester: "User:a", TokenID: string(rune('a' + i)),
			IssueTimestamp: int64(i), MaxTimestamp: 100, ExpirationTimestamp: int64(10 * i)})
	}
	img, err := metadata.ApplyBatch(img, recs, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	// At 25 the tokens expiring at 0, 10 and 20 are gone; 2 at most.
	got := ExpiredTokenRecords(img, 25, 2)
	if len(got) != 2 || got[0].(*metadata.RemoveDelegationTokenRecord).TokenID != "a" || got[1].(*metadata.RemoveDelegationTokenRecord).TokenID != "b" {
		t.Fatalf("%+v", got)
	}
	if got := ExpiredTokenRecords(img, 25, 10); len(got) != 3 {
		t.Fatalf("%+v", got)
	}
	// A token is expired only strictly after its expiry, as in Kafka.
	if got := ExpiredTokenRecords(img, 20, 10); len(got) != 2 {
		t.Fatalf("at the expiry instant: %+v", got)
	}
}

// tokenDecisionAs is d run for principal, as the broker names the
// requester in the request's context.
func tokenDecisionAs[In, Out any](principal string, d decision[In, Out]) decision[In, Out] {
	return func(e *Env, ctx context.Context, img *metadata.Image, offset int64, in In) ([]metadata.Record, Out) {
		return d(e, metadata.WithRequestPrincipal(ctx, principal), img, offset, in)
	}
}

// tokenTestEnv is testEnv with tokens enabled and a clock the test moves.
func tokenTestEnv(nowMs *int64) *Env {
	e := testEnv()
	e.Now = func() time.Time { return time.UnixMilli(*nowMs) }
	e.DelegationTokens = metadata.DelegationTokenConfig{SecretKey: testTokenSecret, MaxLifetime: 7 * 24 * time.Hour, ExpiryTime: 24 * time.Hour}
	return e
}

func TestDelegationTokenDecisionsWithoutAQuorum(t *testing.T) {
	nowMs := int64(1_700_000_000_000)
	e := tokenTestEnv(&nowMs)
	day, week := int64(24*time.Hour/time.Millisecond), int64(7*24*time.Hour/time.Millisecond)
	img := imageOf(t, &metadata.FeatureLevelRecord{Name: metadata.MetadataVersionFeature, FeatureLevel: metadata.LatestMetadataVersion})

	create := kmsg.NewPtrCreateDelegationTokenRequest()
	create.Version = 3
	create.MaxLifetimeMillis = -1
	bob := kmsg.NewCreateDelegationTokenRequestRenewer()
	bob.PrincipalType, bob.PrincipalName = "User", "bob"
	create.Renewers = []kmsg.CreateDelegationTokenRequestRenewer{bob}
	before := img
	recs, created, img := decideOn(t, e, img, tokenDecisionAs("User:alice", (*Env).CreateDelegationToken), create)
	want := &metadata.DelegationTokenRecord{Owner: "User:alice", Requester: "User:alice", Renewers: []string{"User:bob"},
		IssueTimestamp: nowMs, MaxTimestamp: nowMs + week, ExpirationTimestamp: nowMs + day, TokenID: created.TokenID}
	if len(recs) != 1 || !reflect.DeepEqual(recs[0], want) {
		t.Fatalf("create's records %+v, want %+v", recs, want)
	}
	if created.ErrorCode != 0 || created.PrincipalName != "alice" || created.TokenRequesterPrincipalName != "alice" ||
		created.IssueTimestamp != nowMs || created.ExpiryTimestamp != nowMs+day || created.MaxTimestamp != nowMs+week ||
		!reflect.DeepEqual(created.HMAC, sasl.TokenHMAC(testTokenSecret, created.TokenID)) {
		t.Fatalf("create answered %+v", created)
	}
	if _, ok := img.DelegationTokens[created.TokenID]; !ok {
		t.Fatal("the created token is not in the image")
	}
	if _, err := protocol.ParseUUID(created.TokenID); err != nil {
		t.Fatalf("token id %q is not a Kafka UUID: %v", created.TokenID, err)
	}
	// The id comes from the env: an equal env decides the same id on the
	// same image, and another one where that id is taken.
	if _, again, _ := decideOn(t, tokenTestEnv(&nowMs), before, tokenDecisionAs("User:alice", (*Env).CreateDelegationToken), create); again.TokenID != created.TokenID {
		t.Fatalf("token ids %q and %q from equal envs", created.TokenID, again.TokenID)
	}
	if _, other, _ := decideOn(t, tokenTestEnv(&nowMs), img, tokenDecisionAs("User:alice", (*Env).CreateDelegationToken), create); other.TokenID == created.TokenID {
		t.Fatalf("token id %q given twice", other.TokenID)
	}
	mac := created.HMAC

	// Refusals change nothing and still name the owner and requester.
	group := *create
	group.Renewers = []kmsg.CreateDelegationTokenRequestRenewer{{PrincipalType: "Group", PrincipalName: "g"}}
	if recs, r, _ := decideOn(t, e, img, tokenDecisionAs("User:alice", (*Env).CreateDelegationToken), &group); len(recs) != 0 ||
		r.ErrorCode != kerr.InvalidPrincipalType.Code || r.PrincipalName != "alice" || r.TokenRequesterPrincipalName != "alice" {
		t.Fatalf("a group renewer: records %v, answer %+v", recs, r)
	}
	disabled := testEnv()
	if recs, r, _ := decideOn(t, disabled, img, (*Env).CreateDelegationToken, create); len(recs) != 0 ||
		r.ErrorCode != kerr.DelegationTokenAuthDisabled.Code || r.PrincipalName != "ANONYMOUS" {
		t.Fatalf("without a secret: records %v, answer %+v", recs, r)
	}
	old := imageOf(t, &metadata.FeatureLevelRecord{Name: metadata.MetadataVersionFeature, FeatureLevel: delegationTokenSupportedMetadataVersion - 1})
	if recs, r, _ := decideOn(t, e, old, (*Env).CreateDelegationToken, create); len(recs) != 0 || r.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("below 3.6-IV2: records %v, answer %+v", recs, r)
	}

	renew := kmsg.NewPtrRenewDelegationTokenRequest()
	renew.HMAC, renew.RenewTimeMillis = mac, 1000
	nowMs += 3_600_000
	if recs, r, _ := decideOn(t, e, img, tokenDecisionAs("User:carol", (*Env).RenewDelegationToken), renew); len(recs) != 0 ||
		r.ErrorCode != kerr.DelegationTokenOwnerMismatch.Code {
		t.Fatalf("renew by a stranger: records %v, answer %+v", recs, r)
	}
	recs, renewed, img := decideOn(t, e, img, tokenDecisionAs("User:bob", (*Env).RenewDelegationToken), renew)
	if len(recs) != 1 || renewed.ErrorCode != 0 || renewed.ExpiryTimestamp != nowMs+1000 || img.DelegationTokens[created.TokenID].ExpiryMs != nowMs+1000 {
		t.Fatalf("renew by the renewer: records %v, answer %+v", recs, renewed)
	}
	unknown := kmsg.NewPtrRenewDelegationTokenRequest()
	unknown.HMAC = []byte("not a token")
	if recs, r, _ := decideOn(t, e, img, tokenDecisionAs("User:alice", (*Env).RenewDelegationToken), unknown); len(recs) != 0 ||
		r.ErrorCode != kerr.DelegationTokenNotFound.Code {
		t.Fatalf("renew of an unknown hmac: records %v, answer %+v", recs, r)
	}

	expire := kmsg.NewPtrExpireDelegationTokenRequest()
	expire.HMAC, expire.ExpiryPeriodMillis = mac, 500
	recs, expired, img := decideOn(t, e, img, tokenDecisionAs("User:alice", (*Env).ExpireDelegationToken), expire)
	if len(recs) != 1 || expired.ErrorCode != 0 || expired.ExpiryTimestamp != nowMs+500 || img.DelegationTokens[created.TokenID].ExpiryMs != nowMs+500 {
		t.Fatalf("expire with a period: records %v, answer %+v", recs, expired)
	}
	nowMs += 1000
	if recs, r, _ := decideOn(t, e, img, tokenDecisionAs("User:bob", (*Env).RenewDelegationToken), renew); len(recs) != 0 ||
		r.ErrorCode != kerr.DelegationTokenExpired.Code {
		t.Fatalf("renew after expiry: records %v, answer %+v", recs, r)
	}
	if recs, r, _ := decideOn(t, e, img, tokenDecisionAs("User:alice", (*Env).ExpireDelegationToken), expire); len(recs) != 0 ||
		r.ErrorCode != kerr.DelegationTokenExpired.Code {
		t.Fatalf("expire of an expired token: records %v, answer %+v", recs, r)
	}
	expire.ExpiryPeriodMillis = -1
	recs, expired, img = decideOn(t, e, img, tokenDecisionAs("User:alice", (*Env).ExpireDelegationToken), expire)
	if len(recs) != 1 || expired.ErrorCode != 0 || expired.ExpiryTimestamp != nowMs || len(img.DelegationTokens) != 0 {
		t.Fatalf("expire Now: records %v, answer %+v, tokens %v", recs, expired, img.DelegationTokens)
	}

	notController := commitError(errNotController)
	if r := CreateDelegationTokenFailed(create, "User:alice", notController); r.ErrorCode != kerr.NotController.Code ||
		r.PrincipalName != "alice" || r.TokenRequesterPrincipalName != "alice" || r.TokenID != "" {
		t.Fatalf("failed create: %+v", r)
	}
	if r := RenewDelegationTokenFailed(renew, notController); r.ErrorCode != kerr.NotController.Code || r.ExpiryTimestamp != 0 {
		t.Fatalf("failed renew: %+v", r)
	}
	if r := ExpireDelegationTokenFailed(expire, notController); r.ErrorCode != kerr.NotController.Code || r.ExpiryTimestamp != 0 {
		t.Fatalf("failed expire: %+v", r)
	}
}
