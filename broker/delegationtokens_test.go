package broker

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const testTokenSecret = "token-secret"

// startTokenNode starts a node whose SASL_PLAINTEXT listener serves
// SCRAM-SHA-256 and SCRAM-SHA-512, with alice and bob as SCRAM users and
// delegation tokens enabled unless secret is empty.
func startTokenNode(t *testing.T, secret string, maxReauth time.Duration) (*testNode, string) {
	t.Helper()
	return startTokenNodeWith(t, secret, maxReauth, nil)
}

// startTokenNodeWith is startTokenNode with an authorizer (nil: none).
func startTokenNodeWith(t *testing.T, secret string, maxReauth time.Duration, opts *authz.Options) (*testNode, string) {
	t.Helper()
	overrides := map[string]string{}
	if secret != "" {
		overrides[testTokenSecretKey] = secret
	}
	n := startTestNodeWithOptions(t, overrides, map[string]int16{"group.version": 1}, func(o *network.ServerOptions) {
		o.Listeners = append(o.Listeners, network.ListenerSpec{
			Name: "SASL_PLAINTEXT", Host: "127.0.0.1", SecurityProtocol: "SASL_PLAINTEXT",
			SASL: &network.SASLConfig{
				Mechanisms: []string{sasl.ScramSHA256, sasl.ScramSHA512},
				MaxReauth:  map[string]time.Duration{sasl.ScramSHA256: maxReauth},
			},
		})
	}, nil, func(o *Options) {
		if opts != nil {
			o.LocalController = o.Metadata.(*controller.Controller)
			o.Authorizer = opts
		}
	})
	scramUser(t, n, sasl.ScramSHA256, "alice", "alice-secret")
	scramUser(t, n, sasl.ScramSHA256, "bob", "bob-secret")
	return n, n.b.Addrs()["SASL_PLAINTEXT"]
}

const testTokenSecretKey = "delegation.token.secret.key"

// scramAdmin is an admin client logged in with SCRAM-SHA-256.
func scramAdmin(t *testing.T, addr string, auth scram.Auth) *kadm.Client {
	t.Helper()
	return adminAt(t, addr, kgo.SASL(auth.AsSha256Mechanism()))
}

func TestDelegationTokensOverSASL(t *testing.T) {
	n, addr := startTokenNode(t, testTokenSecret, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice := scramAdmin(t, addr, scram.Auth{User: "alice", Pass: "alice-secret"})
	tok, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Renewers: []kadm.Principal{{Name: "bob"}}, MaxLifetime: -1})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if tok.Owner.Name != "alice" || tok.TokenRequesterPrincipal.Name != "alice" || len(tok.Renewers) != 1 ||
		string(tok.HMAC) != string(sasl.TokenHMAC(testTokenSecret, tok.TokenID)) {
		t.Fatalf("token %+v", tok)
	}
	if got := tok.ExpiryTimestamp.Sub(tok.IssueTimestamp); got != 24*time.Hour {
		t.Fatalf("expiry %v after issue, want delegation.token.expiry.time.ms", got)
	}
	waitUntil(t, 5*time.Second, "the token in the broker's image", func() bool {
		_, ok := n.b.meta.Image().DelegationTokens[tok.TokenID]
		return ok
	})

	// A client logs in with the token (franz-go's own SCRAM client):
	// the session is alice's, token authenticated.
	tokenAuth := scram.Auth{User: tok.TokenID, Pass: sasl.TokenPassword(tok.HMAC), IsToken: true}
	withToken := scramAdmin(t, addr, tokenAuth)
	if _, err := withToken.ListTopics(ctx); err != nil {
		t.Fatalf("logging in with the token: %v", err)
	}
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := sasl.Authenticate(ctx, nc, sasl.ScramClient{Name: sasl.ScramSHA512, User: tok.TokenID, Password: sasl.TokenPassword(tok.HMAC), TokenAuth: true}, "test"); err != nil {
		t.Fatalf("Gregor's client with the token over SCRAM-SHA-512: %v", err)
	}
	if c := serverConnFor(t, n, nc); c.Principal().Name != "alice" || !c.TokenAuthenticated() {
		t.Fatalf("session of %s, token authenticated %v", c.Principal(), c.TokenAuthenticated())
	}
	// No token requests over a token-authenticated connection.
	if _, err := withToken.CreateDelegationToken(ctx, kadm.CreateDelegationToken{MaxLifetime: -1}); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
		t.Fatalf("create over a token connection: %v", err)
	}
	if _, err := withToken.DescribeDelegationTokens(ctx); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
		t.Fatalf("describe over a token connection: %v", err)
	}
	if _, err := withToken.RenewDelegationToken(ctx, tok.HMAC, time.Hour); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
		t.Fatalf("renew over a token connection: %v", err)
	}
	// ... nor over PLAINTEXT.
	plain := adminAt(t, n.addr)
	if _, err := plain.ExpireDelegationToken(ctx, tok.HMAC, -time.Millisecond); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
		t.Fatalf("expire over PLAINTEXT: %v", err)
	}

	// Describe: everyone's (null owners) and by owner or renewer.
	bob := scramAdmin(t, addr, scram.Auth{User: "bob", Pass: "bob-secret"})
	for _, tc := range []struct {
		who    *kadm.Client
		owners []kadm.Principal
		want   int
	}{
		{alice, nil, 1},
		{bob, nil, 1},
		{alice, []kadm.Principal{{Type: "User", Name: "alice"}}, 1},
		{alice, []kadm.Principal{{Type: "User", Name: "bob"}}, 1}, // bob renews it
		{alice, []kadm.Principal{{Type: "User", Name: "carol"}}, 0},
	} {
		got, err := tc.who.DescribeDelegationTokens(ctx, tc.owners...)
		if err != nil || len(got) != tc.want {
			t.Fatalf("describe %v: %d tokens, %v", tc.owners, len(got), err)
		}
		if tc.want == 1 && (got[0].TokenID != tok.TokenID || string(got[0].HMAC) != string(tok.HMAC) || got[0].Renewers[0].Name != "bob" ||
			!got[0].ExpiryTimestamp.Equal(tok.ExpiryTimestamp)) {
			t.Fatalf("described %+v", got[0])
		}
	}
	// An empty (not null) owner list describes nothing, as in Kafka.
	empty := kmsg.NewPtrDescribeDelegationTokenRequest()
	empty.Owners = []kmsg.DescribeDelegationTokenRequestOwner{}
	kcl := scramClient(t, addr, scram.Auth{User: "alice", Pass: "alice-secret"})
	if resp, err := empty.RequestWith(ctx, kcl); err != nil || resp.ErrorCode != 0 || len(resp.TokenDetails) != 0 {
		t.Fatalf("empty owners: %+v %v", resp, err)
	}

	// Renew by the renewer; then expire by the owner: the token is gone
	// and logs in no more.
	if _, err := bob.RenewDelegationToken(ctx, tok.HMAC, time.Hour); err != nil {
		t.Fatalf("renew by bob: %v", err)
	}
	carolless, err := bob.RenewDelegationToken(ctx, []byte("not a token"), time.Hour)
	if !errors.Is(err, kerr.DelegationTokenNotFound) {
		t.Fatalf("renew of an unknown hmac: %v %v", carolless, err)
	}
	if _, err := alice.ExpireDelegationToken(ctx, tok.HMAC, -time.Millisecond); err != nil {
		t.Fatalf("expire: %v", err)
	}
	waitUntil(t, 5*time.Second, "the token gone from the broker's image", func() bool {
		_, ok := n.b.meta.Image().DelegationTokens[tok.TokenID]
		return !ok
	})
	refused := scramAdmin(t, addr, tokenAuth)
	if _, err := refused.ListTopics(ctx); err == nil || !strings.Contains(err.Error(), "Authentication failed") {
		t.Fatalf("logging in with an expired token: %v", err)
	}
}

func scramClient(t *testing.T, addr string, auth scram.Auth) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(auth.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestDelegationTokenOwnerAndChecks: KIP-373's owner, renewers that are
// not users, and the owner alone (or a renewer) may renew and expire.
func TestDelegationTokenOwnerAndChecks(t *testing.T) {
	_, addr := startTokenNode(t, testTokenSecret, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice := scramAdmin(t, addr, scram.Auth{User: "alice", Pass: "alice-secret"})
	bob := scramAdmin(t, addr, scram.Auth{User: "bob", Pass: "bob-secret"})
	if _, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Renewers: []kadm.Principal{{Type: "Group", Name: "g"}}, MaxLifetime: -1}); !errors.Is(err, kerr.InvalidPrincipalType) {
		t.Fatalf("a group renewer: %v", err)
	}
	// Without an authorizer, creating for another owner is allowed.
	tok, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: &kadm.Principal{Name: "carol"}, MaxLifetime: time.Minute})
	if err != nil || tok.Owner.Name != "carol" || tok.TokenRequesterPrincipal.Name != "alice" || tok.MaxTimestamp.Sub(tok.IssueTimestamp) != time.Minute {
		t.Fatalf("create for carol: %+v %v", tok, err)
	}
	if _, err := bob.RenewDelegationToken(ctx, tok.HMAC, time.Hour); !errors.Is(err, kerr.DelegationTokenOwnerMismatch) {
		t.Fatalf("renew by bob: %v", err)
	}
	// alice requested it but carol owns it.
	if _, err := alice.ExpireDelegationToken(ctx, tok.HMAC, time.Hour); !errors.Is(err, kerr.DelegationTokenOwnerMismatch) {
		t.Fatalf("expire by the requester: %v", err)
	}
	// Describe counts the requester as Kafka's ownerOrRenewer does: an
	// owner filter naming alice finds the token she requested for carol.
	for _, owner := range []string{"carol", "alice"} {
		got, err := bob.DescribeDelegationTokens(ctx, kadm.Principal{Type: "User", Name: owner})
		if err != nil || len(got) != 1 || got[0].Owner.Name != "carol" || got[0].TokenRequesterPrincipal.Name != "alice" {
			t.Fatalf("describe %s's: %+v %v", owner, got, err)
		}
	}
	if got, err := bob.DescribeDelegationTokens(ctx, kadm.Principal{Type: "User", Name: "bob"}); err != nil || len(got) != 0 {
		t.Fatalf("describe bob's: %+v %v", got, err)
	}
}

// TestDelegationTokenSessionLifetime: a session authenticated with a token
// ends when the token expires (KIP-368), whichever is shorter of that and
// connections.max.reauth.ms.
func TestDelegationTokenSessionLifetime(t *testing.T) {
	n, addr := startTokenNode(t, testTokenSecret, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice := scramAdmin(t, addr, scram.Auth{User: "alice", Pass: "alice-secret"})
	tok, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{MaxLifetime: -1})
	if err != nil {
		t.Fatal(err)
	}
	expiry, err := alice.ExpireDelegationToken(ctx, tok.HMAC, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the expiry in the broker's image", func() bool {
		t, ok := n.b.meta.Image().DelegationTokens[tok.TokenID]
		return ok && t.ExpiryMs == expiry.UnixMilli()
	})
	c := dialRaw(t, addr)
	c.handshake(1, sasl.ScramSHA256)
	ex, _ := sasl.ScramClient{Name: sasl.ScramSHA256, User: tok.TokenID, Password: sasl.TokenPassword(tok.HMAC), TokenAuth: true}.Start()
	first, _, _ := ex.Step(nil)
	r := c.authenticate(2, string(first))
	if r.ErrorCode != 0 {
		t.Fatalf("client-first: %+v", r)
	}
	final, _, _ := ex.Step(r.SASLAuthBytes)
	start := time.Now()
	r = c.authenticate(2, string(final))
	if r.ErrorCode != 0 {
		t.Fatalf("client-final: %+v", r)
	}
	if left := time.Until(expiry); r.SessionLifetimeMillis <= 0 || r.SessionLifetimeMillis > left.Milliseconds()+50 {
		t.Fatalf("session lifetime %d ms, the token has %v left", r.SessionLifetimeMillis, left)
	}
	// A request after the token's expiry closes the connection. The
	// session ends by the wall clock (the broker has no clock to inject),
	// so the test lets the lifetime pass: a sleep, not a wait.
	time.Sleep(time.Until(start.Add(time.Duration(r.SessionLifetimeMillis)*time.Millisecond)) + 100*time.Millisecond)
	c.send(kmsg.NewPtrMetadataRequest(), 9)
	c.expectClosed()
}

func TestDelegationTokensDisabled(t *testing.T) {
	_, addr := startTokenNode(t, "", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice := scramAdmin(t, addr, scram.Auth{User: "alice", Pass: "alice-secret"})
	if _, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{MaxLifetime: -1}); !errors.Is(err, kerr.DelegationTokenAuthDisabled) {
		t.Fatalf("create: %v", err)
	}
	if _, err := alice.DescribeDelegationTokens(ctx); !errors.Is(err, kerr.DelegationTokenAuthDisabled) {
		t.Fatalf("describe: %v", err)
	}
	if _, err := alice.RenewDelegationToken(ctx, []byte("x"), time.Hour); !errors.Is(err, kerr.DelegationTokenAuthDisabled) {
		t.Fatalf("renew: %v", err)
	}
	// A tokenauth login finds no token.
	refused := scramAdmin(t, addr, scram.Auth{User: "alice", Pass: "alice-secret", IsToken: true})
	if _, err := refused.ListTopics(ctx); err == nil {
		t.Fatal("a tokenauth login succeeded without tokens")
	}
}

// TestDelegationTokenThroughEnvelope: a token request another broker
// forwards in an Envelope acts for the client's principal.
func TestDelegationTokenThroughEnvelope(t *testing.T) {
	n := startTestNodeWithOptions(t, map[string]string{testTokenSecretKey: testTokenSecret}, map[string]int16{"group.version": 1}, nil, nil, func(o *Options) {
		o.LocalController = o.Metadata.(*controller.Controller)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cc := remoteControllerClient(t, n)
	as := func(name string) context.Context {
		return withIdentity(ctx, identity{clientID: "app", principal: authz.Principal{Type: authz.UserType, Name: name}})
	}
	create := kmsg.NewPtrCreateDelegationTokenRequest()
	create.SetVersion(3)
	create.MaxLifetimeMillis = -1
	answer, err := cc.Handle(as("alice"), create)
	if err != nil {
		t.Fatal(err)
	}
	created := answer.(*kmsg.CreateDelegationTokenResponse)
	if created.ErrorCode != 0 || created.PrincipalName != "alice" || created.TokenRequesterPrincipalName != "alice" {
		t.Fatalf("create through an envelope: %+v", created)
	}
	renew := kmsg.NewPtrRenewDelegationTokenRequest()
	renew.SetVersion(2)
	renew.HMAC, renew.RenewTimeMillis = created.HMAC, 1000
	for who, want := range map[string]int16{"bob": kerr.DelegationTokenOwnerMismatch.Code, "alice": 0} {
		answer, err := cc.Handle(as(who), renew)
		if err != nil || answer.(*kmsg.RenewDelegationTokenResponse).ErrorCode != want {
			t.Fatalf("renew as %s: %+v %v", who, answer, err)
		}
	}
	// A principal that authenticated with a token (the envelope's flag)
	// is refused by the controller, whatever the forwarding broker did.
	tokenSession := withIdentity(ctx, identity{clientID: "app", principal: authz.Principal{Type: authz.UserType, Name: "alice"}, tokenAuthenticated: true})
	for _, req := range []kmsg.Request{create, renew} {
		answer, err := cc.Handle(tokenSession, req)
		if err != nil {
			t.Fatal(err)
		}
		var code int16
		switch a := answer.(type) {
		case *kmsg.CreateDelegationTokenResponse:
			code = a.ErrorCode
		case *kmsg.RenewDelegationTokenResponse:
			code = a.ErrorCode
		}
		if code != kerr.DelegationTokenRequestNotAllowed.Code {
			t.Fatalf("%s from a token session: %+v", kmsg.NameForKey(req.Key()), answer)
		}
	}
}

// TestTokenCredentialsForgetRemovedTokens: the derived credentials of
// tokens gone from the image are dropped, and a removed token finds no
// credential.
func TestTokenCredentialsForgetRemovedTokens(t *testing.T) {
	img := &metadata.Image{DelegationTokens: map[string]*metadata.DelegationToken{}}
	view := &staticView{img: img}
	tc := &tokenCredentials{secret: "s", meta: view, derived: map[tokenCredentialKey]sasl.ScramCredential{}}
	for i := range 40 {
		id := string(rune('A' + i))
		next := &metadata.Image{DelegationTokens: map[string]*metadata.DelegationToken{id: {ID: id, Owner: "User:o", ExpiryMs: 1}}}
		view.img = next
		got, ok := tc.lookup(sasl.ScramSHA256, id)
		if !ok || got.Owner != "o" || got.Credential.Iterations != 4096 {
			t.Fatalf("token %s: %+v %v", id, got, ok)
		}
		if again, _ := tc.lookup(sasl.ScramSHA256, id); string(again.Credential.Salt) != string(got.Credential.Salt) {
			t.Fatal("a second login derived the credential again")
		}
	}
	if len(tc.derived) > 17 {
		t.Fatalf("%d credentials kept for one live token", len(tc.derived))
	}
	if _, ok := tc.lookup(sasl.ScramSHA256, "A"); ok {
		t.Fatal("a removed token found a credential")
	}
	if _, ok := tc.lookup("PLAIN", string(rune('A'+39))); ok {
		t.Fatal("a token found a credential for PLAIN")
	}
}

type staticView struct{ img *metadata.Image }

func (v *staticView) Image() *metadata.Image { return v.img }
func (v *staticView) Subscribe(func(prev, next *metadata.Image)) func() {
	return func() {}
}

// TestDelegationTokenAuthorization: with an authorizer, creating a token
// for another owner needs CREATE_TOKENS on that USER, and a token of
// someone else's is described only with DESCRIBE on the DELEGATION_TOKEN
// or DESCRIBE_TOKENS on its owner's USER (KIP-48, KIP-373).
func TestDelegationTokenAuthorization(t *testing.T) {
	n, addr := startTokenNodeWith(t, testTokenSecret, 0, &authz.Options{SuperUsers: []string{"User:admin"}})
	scramUser(t, n, sasl.ScramSHA256, "admin", "admin-secret")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adminCl := scramClient(t, addr, scram.Auth{User: "admin", Pass: "admin-secret"})
	lit := kmsg.ACLResourcePatternTypeLiteral
	allow := kmsg.ACLPermissionTypeAllow
	createACLsOn(t, adminCl,
		aclCreation(kmsg.ACLResourceTypeUser, "User:carol", lit, "User:alice", kmsg.ACLOperationCreateTokens, allow),
		aclCreation(kmsg.ACLResourceTypeUser, "User:alice", lit, "User:bob", kmsg.ACLOperationDescribeTokens, allow))
	alice := scramAdmin(t, addr, scram.Auth{User: "alice", Pass: "alice-secret"})
	bob := scramAdmin(t, addr, scram.Auth{User: "bob", Pass: "bob-secret"})
	// Her own token needs no ACL; carol's needs CREATE_TOKENS on her.
	own, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{MaxLifetime: -1})
	if err != nil {
		t.Fatalf("alice's own token: %v", err)
	}
	carols, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: &kadm.Principal{Name: "carol"}, MaxLifetime: -1})
	if err != nil || carols.Owner.Name != "carol" {
		t.Fatalf("carol's token by alice: %+v %v", carols, err)
	}
	if _, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: &kadm.Principal{Name: "dave"}, MaxLifetime: -1}); !errors.Is(err, kerr.DelegationTokenAuthorizationFailed) {
		t.Fatalf("dave's token by alice: %v", err)
	}
	if _, err := bob.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: &kadm.Principal{Name: "carol"}, MaxLifetime: -1}); !errors.Is(err, kerr.DelegationTokenAuthorizationFailed) {
		t.Fatalf("carol's token by bob: %v", err)
	}
	ids := func(cl *kadm.Client) []string {
		t.Helper()
		got, err := cl.DescribeDelegationTokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tk := range got {
			out = append(out, tk.TokenID)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(s ...string) []string { slices.Sort(s); return s }
	// alice owns one and requested the other.
	if got := ids(alice); !slices.Equal(got, sorted(own.TokenID, carols.TokenID)) {
		t.Fatalf("alice sees %v", got)
	}
	// bob may DESCRIBE_TOKENS of alice's (those she owns).
	if got := ids(bob); !slices.Equal(got, []string{own.TokenID}) {
		t.Fatalf("bob sees %v", got)
	}
	if got := ids(kadm.NewClient(adminCl)); !slices.Equal(got, sorted(own.TokenID, carols.TokenID)) {
		t.Fatalf("the super user sees %v", got)
	}
	// DESCRIBE on carol's token lets bob see it too.
	createACLsOn(t, adminCl, aclCreation(kmsg.ACLResourceTypeDelegationToken, carols.TokenID, lit, "User:bob", kmsg.ACLOperationDescribe, allow))
	waitUntil(t, 5*time.Second, "bob seeing carol's token", func() bool {
		return slices.Equal(ids(bob), sorted(own.TokenID, carols.TokenID))
	})
}
