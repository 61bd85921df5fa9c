package security

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Delegation tokens in Kafka's split layout (one controller, two
// brokers, SASL_PLAINTEXT): a token created through one broker is
// forwarded in an Envelope with the requester's principal, committed by
// the controller, described by every broker with the same HMAC (each
// computes it from the shared secret), logs in at every broker as its
// owner, and once expired through the other broker logs in nowhere.
func TestDelegationTokensAcrossSplitCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three gregor processes")
	}
	overrides := append(saslOverrides("SASL_PLAINTEXT", "60000"), "delegation.token.secret.key=cluster-token-secret")
	_, brokers := node.StartSplitWith(t, 1, 2, func(n *node.Node) []string {
		if n.Roles != "broker" {
			n.FormatFlags = addScram()
			return nil
		}
		return []string{
			"listeners=PLAINTEXT://" + n.Addr() + ",INTERNAL://" + n.ExtraAddr(),
			"advertised.listeners=PLAINTEXT://" + n.Addr() + ",INTERNAL://" + n.ExtraAddr(),
			"inter.broker.listener.name=INTERNAL",
		}
	}, overrides...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	internal := func(n *node.Node) string { return n.ExtraAddr() }
	// Both brokers are broker-only: whichever serves a request forwards
	// it to the controller.
	adminAt := func(n *node.Node, auth scram.Auth) *kadm.Client {
		return kadm.NewClient(node.NewClient(t, []string{internal(n)}, kgo.SASL(auth.AsSha512Mechanism())))
	}
	// tokenLogin authenticates with the token at one broker.
	tokenLogin := func(n *node.Node, tok kadm.DelegationToken) error {
		nc, err := net.DialTimeout("tcp", internal(n), 5*time.Second)
		if err != nil {
			return err
		}
		defer nc.Close()
		_, err = sasl.Authenticate(ctx, nc, sasl.ScramClient{Name: sasl.ScramSHA512, User: tok.TokenID, Password: sasl.TokenPassword(tok.HMAC), TokenAuth: true}, "security-test")
		return err
	}
	owner := scram.Auth{User: interBrokerUser, Pass: interBrokerPassword}
	var tok kadm.DelegationToken
	node.WaitFor(t, time.Minute, "a token created through broker 1", func() bool {
		var err error
		tok, err = adminAt(brokers[0], owner).CreateDelegationToken(ctx, kadm.CreateDelegationToken{MaxLifetime: -1})
		return err == nil
	})
	if tok.Owner.Name != interBrokerUser || tok.TokenRequesterPrincipal.Name != interBrokerUser {
		t.Fatalf("token %+v", tok)
	}
	describer := node.NewClient(t, []string{internal(brokers[0])}, kgo.SASL(owner.AsSha512Mechanism()))
	for _, b := range brokers {
		node.WaitFor(t, 30*time.Second, "the token described by broker "+fmt.Sprint(b.ID), func() bool {
			resp, err := kmsg.NewPtrDescribeDelegationTokenRequest().RequestWith(ctx, describer.Broker(int(b.ID)))
			return err == nil && resp.ErrorCode == 0 && len(resp.TokenDetails) == 1 &&
				resp.TokenDetails[0].TokenID == tok.TokenID && string(resp.TokenDetails[0].HMAC) == string(tok.HMAC)
		})
		if err := tokenLogin(b, tok); err != nil {
			t.Fatalf("logging in with the token at broker %d: %v", b.ID, err)
		}
		withToken := adminAt(b, scram.Auth{User: tok.TokenID, Pass: sasl.TokenPassword(tok.HMAC), IsToken: true})
		// ... as a token-authenticated session, which manages no tokens.
		if _, err := withToken.RenewDelegationToken(ctx, tok.HMAC, time.Hour); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
			t.Fatalf("renew over a token session at broker %d: %v", b.ID, err)
		}
	}
	if _, err := adminAt(brokers[1], owner).RenewDelegationToken(ctx, tok.HMAC, time.Hour); err != nil {
		t.Fatalf("renew through broker 2: %v", err)
	}
	if _, err := adminAt(brokers[1], owner).ExpireDelegationToken(ctx, tok.HMAC, -time.Millisecond); err != nil {
		t.Fatalf("expire through broker 2: %v", err)
	}
	for _, b := range brokers {
		node.WaitFor(t, 30*time.Second, "the expired token refused at broker "+fmt.Sprint(b.ID), func() bool {
			return tokenLogin(b, tok) != nil
		})
	}
}
