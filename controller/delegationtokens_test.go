package controller

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/raft/v3"

	"github.com/gregorbroker/gregor/internal/await"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/gregorbroker/gregor/vfs"
)

const testTokenSecret = "token-secret"

func tokenConfig(clock *fakeClock) func(*Config) {
	return func(cfg *Config) {
		cfg.Now = clock.Now
		cfg.DelegationTokens = metadata.DelegationTokenConfig{
			SecretKey:           testTokenSecret,
			MaxLifetime:         7 * 24 * time.Hour,
			ExpiryTime:          24 * time.Hour,
			ExpiryCheckInterval: time.Hour,
		}
	}
}

func createToken(t *testing.T, c *Controller, as string, renewers ...string) *kmsg.CreateDelegationTokenResponse {
	t.Helper()
	req := kmsg.NewPtrCreateDelegationTokenRequest()
	req.Version = 3
	req.MaxLifetimeMillis = -1
	for _, r := range renewers {
		rr := kmsg.NewCreateDelegationTokenRequestRenewer()
		rr.PrincipalType, rr.PrincipalName = metadata.SplitPrincipal(r)
		req.Renewers = append(req.Renewers, rr)
	}
	return c.CreateDelegationToken(metadata.WithRequestPrincipal(ctxT(t), as), req)
}

func renewToken(t *testing.T, c *Controller, as string, mac []byte, period int64) *kmsg.RenewDelegationTokenResponse {
	t.Helper()
	req := kmsg.NewPtrRenewDelegationTokenRequest()
	req.HMAC, req.RenewTimeMillis = mac, period
	return c.RenewDelegationToken(metadata.WithRequestPrincipal(ctxT(t), as), req)
}

func expireToken(t *testing.T, c *Controller, as string, mac []byte, period int64) *kmsg.ExpireDelegationTokenResponse {
	t.Helper()
	req := kmsg.NewPtrExpireDelegationTokenRequest()
	req.HMAC, req.ExpiryPeriodMillis = mac, period
	return c.ExpireDelegationToken(metadata.WithRequestPrincipal(ctxT(t), as), req)
}

func TestDelegationTokenLifecycle(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
	c := startTest(t, vfs.NewMemFS(), tokenConfig(clock))
	now := clock.Now().UnixMilli()
	created := createToken(t, c, "User:alice", "User:bob")
	if created.ErrorCode != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(created.ErrorCode))
	}
	day, week := int64(24*time.Hour/time.Millisecond), int64(7*24*time.Hour/time.Millisecond)
	if created.PrincipalType != "User" || created.PrincipalName != "alice" || created.TokenRequesterPrincipalName != "alice" ||
		created.IssueTimestamp != now || created.ExpiryTimestamp != now+day || created.MaxTimestamp != now+week {
		t.Fatalf("create answered %+v", created)
	}
	if _, err := protocol.ParseUUID(created.TokenID); err != nil {
		t.Fatalf("token id %q is not a Kafka UUID: %v", created.TokenID, err)
	}
	mac := created.HMAC
	if !reflect.DeepEqual(mac, sasl.TokenHMAC(testTokenSecret, created.TokenID)) {
		t.Fatal("the HMAC is not HmacSHA512 of the id with the secret")
	}
	tok := c.Image().DelegationTokens[created.TokenID]
	want := &metadata.DelegationToken{ID: created.TokenID, Owner: "User:alice", Requester: "User:alice", Renewers: []string{"User:bob"},
		IssueMs: now, MaxMs: now + week, ExpiryMs: now + day}
	if !reflect.DeepEqual(tok, want) {
		t.Fatalf("image holds %+v, want %+v", tok, want)
	}

	// Renewing: the owner or a renewer, for at most expiry.time.ms.
	clock.Add(time.Hour)
	now = clock.Now().UnixMilli()
	if r := renewToken(t, c, "User:carol", mac, -1); r.ErrorCode != kerr.DelegationTokenOwnerMismatch.Code {
		t.Fatalf("renew by a stranger: %d", r.ErrorCode)
	}
	if r := renewToken(t, c, "User:bob", mac, 1000); r.ErrorCode != 0 || r.ExpiryTimestamp != now+1000 {
		t.Fatalf("renew by the renewer: %+v", r)
	}
	if r := renewToken(t, c, "User:alice", mac, 10*week); r.ErrorCode != 0 || r.ExpiryTimestamp != now+day {
		t.Fatalf("renew for longer than expiry.time.ms: %+v", r)
	}
	if got := c.Image().DelegationTokens[created.TokenID].ExpiryMs; got != now+day {
		t.Fatalf("renewed expiry %d", got)
	}
	if r := renewToken(t, c, "User:alice", []byte("not a token"), -1); r.ErrorCode != kerr.DelegationTokenNotFound.Code {
		t.Fatalf("renew of an unknown hmac: %d", r.ErrorCode)
	}
	// The expiry never passes the maximum.
	clock.Add(time.Duration(week-2*day) * time.Millisecond)
	now = clock.Now().UnixMilli()
	if r := renewToken(t, c, "User:alice", mac, -1); r.ErrorCode != kerr.DelegationTokenExpired.Code {
		t.Fatalf("renew after expiry: %d", r.ErrorCode)
	}

	// A fresh token expired with a period, then renewed again, then at once.
	created = createToken(t, c, "User:alice")
	mac2 := created.HMAC
	if r := expireToken(t, c, "User:bob", mac2, 10); r.ErrorCode != kerr.DelegationTokenOwnerMismatch.Code {
		t.Fatalf("expire by a stranger: %d", r.ErrorCode)
	}
	if r := expireToken(t, c, "User:alice", mac2, 500); r.ErrorCode != 0 || r.ExpiryTimestamp != now+500 {
		t.Fatalf("expire with a period: %+v", r)
	}
	clock.Add(time.Second)
	if r := expireToken(t, c, "User:alice", mac2, 500); r.ErrorCode != kerr.DelegationTokenExpired.Code {
		t.Fatalf("expire of an expired token: %d", r.ErrorCode)
	}
	now = clock.Now().UnixMilli()
	if r := expireToken(t, c, "User:alice", mac2, -1); r.ErrorCode != 0 || r.ExpiryTimestamp != now {
		t.Fatalf("expire now: %+v", r)
	}
	if _, ok := c.Image().DelegationTokens[created.TokenID]; ok {
		t.Fatal("a token expired at once is still in the image")
	}
	if r := expireToken(t, c, "User:alice", mac2, -1); r.ErrorCode != kerr.DelegationTokenNotFound.Code {
		t.Fatalf("expire of a removed token: %d", r.ErrorCode)
	}
}

func TestCreateDelegationTokenChecks(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
	c := startTest(t, vfs.NewMemFS(), tokenConfig(clock))
	if r := createToken(t, c, "User:alice", "Group:g"); r.ErrorCode != kerr.InvalidPrincipalType.Code || r.PrincipalName != "alice" || len(c.Image().DelegationTokens) != 0 {
		t.Fatalf("a group renewer: %+v", r)
	}
	// KIP-373: the owner named in the request, the requester kept apart;
	// a max lifetime below the broker's wins.
	req := kmsg.NewPtrCreateDelegationTokenRequest()
	req.Version = 3
	req.OwnerPrincipalType, req.OwnerPrincipalName = kmsg.StringPtr("User"), kmsg.StringPtr("bob")
	req.MaxLifetimeMillis = 60_000
	r := c.CreateDelegationToken(metadata.WithRequestPrincipal(ctxT(t), "User:admin"), req)
	now := clock.Now().UnixMilli()
	if r.ErrorCode != 0 || r.PrincipalName != "bob" || r.TokenRequesterPrincipalName != "admin" || r.MaxTimestamp != now+60_000 || r.ExpiryTimestamp != now+60_000 {
		t.Fatalf("create for another owner: %+v", r)
	}
	tok := c.Image().DelegationTokens[r.TokenID]
	if tok.Owner != "User:bob" || tok.Requester != "User:admin" {
		t.Fatalf("token %+v", tok)
	}
	// The requester is shown the token (ownerOrRenewer) but may not
	// renew or expire it (allowedToRenew).
	if !tok.OwnerOrRenewer("User:admin") || tok.MayRenew("User:admin") || !tok.MayRenew("User:bob") {
		t.Fatal("owner, requester and renewer rights")
	}
	if rr := renewToken(t, c, "User:admin", r.HMAC, -1); rr.ErrorCode != kerr.DelegationTokenOwnerMismatch.Code {
		t.Fatalf("renew by the requester: %d", rr.ErrorCode)
	}
	if rr := expireToken(t, c, "User:admin", r.HMAC, -1); rr.ErrorCode != kerr.DelegationTokenOwnerMismatch.Code {
		t.Fatalf("expire by the requester: %d", rr.ErrorCode)
	}
	// Without a principal in the context the request is anonymous's.
	r = c.CreateDelegationToken(ctxT(t), kmsg.NewPtrCreateDelegationTokenRequest())
	if r.ErrorCode != 0 || r.PrincipalName != "ANONYMOUS" {
		t.Fatalf("create without a principal: %+v", r)
	}
}

func TestDelegationTokensDisabledWithoutSecret(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	if r := createToken(t, c, "User:alice"); r.ErrorCode != kerr.DelegationTokenAuthDisabled.Code || r.PrincipalName != "alice" {
		t.Fatalf("create: %+v", r)
	}
	if r := renewToken(t, c, "User:alice", []byte("x"), -1); r.ErrorCode != kerr.DelegationTokenAuthDisabled.Code {
		t.Fatalf("renew: %d", r.ErrorCode)
	}
	if r := expireToken(t, c, "User:alice", []byte("x"), -1); r.ErrorCode != kerr.DelegationTokenAuthDisabled.Code {
		t.Fatalf("expire: %d", r.ErrorCode)
	}
}

func TestDelegationTokensRefusedBelowMetadataVersion36IV2(t *testing.T) {
	fsys := vfs.NewMemFS()
	if err := Format(fsys, testDir, FormatOptions{ClusterID: "test-cluster", NodeID: 1, DirectoryID: protocol.RandomUUID(),
		Voters:   []metadata.Voter{{ID: 1, Endpoints: []metadata.Endpoint{{Name: "CONTROLLER", Host: "localhost", Port: 9093}}}},
		Features: map[string]int16{metadata.MetadataVersionFeature: 13}}); err != nil {
		t.Fatal(err)
	}
	c := startTest(t, fsys, tokenConfig(&fakeClock{now: time.Now()}))
	if r := createToken(t, c, "User:alice"); r.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("create at metadata.version 13: %d", r.ErrorCode)
	}
}

// TestExpiredTokensSwept: the active controller removes expired tokens
// every expiry.check.interval, and only those.
func TestExpiredTokensSwept(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
	c := startTest(t, vfs.NewMemFS(), tokenConfig(clock), func(cfg *Config) { cfg.DelegationTokens.ExpiryCheckInterval = time.Minute })
	short := createToken(t, c, "User:alice")
	long := createToken(t, c, "User:bob")
	if r := expireToken(t, c, "User:alice", short.HMAC, 1000); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	// The controller schedules its first sweep (on its loop), then the
	// clock passes the expiry.
	await.Until(t, 5*time.Second, "the controller to schedule its first token sweep", func() error {
		next := make(chan time.Time, 1)
		c.report(func(*raft.RawNode) { next <- c.nextTokenSweep })
		if at := <-next; at.IsZero() {
			return errors.New("no sweep scheduled")
		}
		return nil
	})
	clock.Add(2 * time.Second)
	// Ticks pass with the clock past the expiry but not the interval: that
	// none sweeps is what is tested, so this is a sleep, not a wait.
	time.Sleep(300 * time.Millisecond)
	if len(c.Image().DelegationTokens) != 2 {
		t.Fatal("a token was removed before the check interval passed")
	}
	clock.Add(time.Minute)
	waitFor(t, "the expired token swept, one left", func() bool { return len(c.Image().DelegationTokens) == 1 })
	if _, ok := c.Image().DelegationTokens[long.TokenID]; !ok {
		t.Fatal("the sweep removed a live token")
	}
}

// TestDelegationTokensSurviveRestart: tokens are committed records, read
// back from the log (and its snapshot) after a restart.
func TestDelegationTokensSurviveRestart(t *testing.T) {
	fsys := vfs.NewMemFS()
	clock := &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
	snapshotOften := func(cfg *Config) { cfg.SnapshotMaxEntries = 1 }
	c := startTest(t, fsys, tokenConfig(clock), snapshotOften)
	created := createToken(t, c, "User:alice", "User:bob")
	createToken(t, c, "User:carol")
	renewToken(t, c, "User:bob", created.HMAC, 1000)
	want := c.Image().DelegationTokens
	if len(want) != 2 {
		t.Fatalf("tokens %+v", want)
	}
	c.Close()
	c = startTest(t, fsys, tokenConfig(clock))
	waitFor(t, "the expected delegation tokens in the image", func() bool { return reflect.DeepEqual(c.Image().DelegationTokens, want) })
}
