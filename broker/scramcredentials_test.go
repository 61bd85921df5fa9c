package broker

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func adminAt(t *testing.T, addr string, opts ...kgo.Opt) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func TestScramCredentialsAdminAndLogin(t *testing.T) {
	n, addr := startSASLNode(t, 0, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := adminAt(t, n.addr)
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "alice-secret"},
		{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-secret"},
	})
	if err != nil || altered.Error() != nil {
		t.Fatalf("alter: %v %v", err, altered.Error())
	}
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || described.Error() != nil {
		t.Fatalf("describe: %v %v", err, described.Error())
	}
	if a := described["alice"]; len(a.CredInfos) != 1 || a.CredInfos[0].Mechanism != kadm.ScramSha256 || a.CredInfos[0].Iterations != 8192 {
		t.Fatalf("alice described as %+v", a)
	}
	if len(described) != 2 {
		t.Fatalf("described %d users", len(described))
	}

	// An independent client logs in with the credentials.
	login := func(mech sasl.ScramMechanism, user, pass string) error {
		a := scram.Auth{User: user, Pass: pass}
		m := a.AsSha256Mechanism()
		if mech.Name == sasl.ScramSHA512 {
			m = a.AsSha512Mechanism()
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(m))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.Ping(ctx)
	}
	sha256, _ := sasl.ScramByName(sasl.ScramSHA256)
	sha512, _ := sasl.ScramByName(sasl.ScramSHA512)
	if err := login(sha256, "alice", "alice-secret"); err != nil {
		t.Fatalf("alice with SCRAM-SHA-256: %v", err)
	}
	// The listener enables SCRAM-SHA-256 only.
	if err := login(sha512, "carol", "carol-secret"); err == nil {
		t.Fatal("SCRAM-SHA-512 on a listener without it")
	}
	err = login(sha256, "alice", "wrong")
	if err == nil || !strings.Contains(err.Error(), "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256") {
		t.Fatalf("wrong password: %v", err)
	}
	if err := login(sha256, "carol", "carol-secret"); err == nil {
		t.Fatal("carol has no SCRAM-SHA-256 credential, yet logged in")
	}

	// Gregor's own client (inter-broker connections) too, and the
	// principal is the user.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := sasl.Authenticate(ctx, nc, sasl.ScramClient{Name: sasl.ScramSHA256, User: "alice", Password: "alice-secret"}, "test"); err != nil {
		t.Fatalf("Gregor's SCRAM client: %v", err)
	}
	if p := serverConnFor(t, n, nc).Principal(); p.Name != "alice" {
		t.Fatalf("principal %v", p)
	}

	// Deleting the credential stops new logins.
	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || altered.Error() != nil {
		t.Fatalf("delete: %v %v", err, altered.Error())
	}
	if err := login(sha256, "alice", "alice-secret"); err == nil {
		t.Fatal("logged in with a deleted credential")
	}
}

func TestDescribeUserScramCredentialsErrors(t *testing.T) {
	n := startTestNode(t, nil)
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range []string{"ghost", "twice", "twice"} {
		ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		ru.Name = u
		req.Users = append(req.Users, ru)
	}
	resp := kmsg.NewPtrDescribeUserSCRAMCredentialsResponse()
	c.roundTrip(req, resp, 1)
	if len(resp.Results) != 2 {
		t.Fatalf("results %+v", resp.Results)
	}
	for _, r := range resp.Results {
		want := map[string]int16{"ghost": kerr.ResourceNotFound.Code, "twice": kerr.DuplicateResource.Code}[r.User]
		if r.ErrorCode != want || r.ErrorMessage == nil {
			t.Fatalf("%s: %+v", r.User, r)
		}
	}
	if *resp.Results[0].ErrorMessage != "Attempt to describe a user credential that does not exist: ghost" {
		t.Fatalf("message %q", *resp.Results[0].ErrorMessage)
	}
}
