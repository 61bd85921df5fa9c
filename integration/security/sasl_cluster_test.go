package security

// Gregor clusters whose own connections authenticate with SASL: brokers
// replicating, fetching and forwarding over an inter-broker listener that
// takes SCRAM (its user created before the first start with `gregor
// storage format --add-scram`, as kafka-storage does), and controllers
// voting and brokers registering over a controller listener that takes
// PLAIN (SCRAM cannot authenticate controllers to each other: its
// credentials live in the log they have yet to elect a leader for).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/gregorbroker/gregor/integration/node"
	"github.com/gregorbroker/gregor/sasl"
)

const (
	interBrokerUser     = "broker"
	interBrokerPassword = "broker-secret"
	controllerUser      = "controller"
	controllerPassword  = "controller-secret"
)

// saslOverrides are every node's SASL settings for an INTERNAL listener
// (SCRAM-SHA-512) and the CONTROLLER listener (PLAIN), over protocol
// (SASL_PLAINTEXT or SASL_SSL), with sessions of reauth so that the
// nodes' own connections are renewed while the test runs.
func saslOverrides(protocol, reauth string) []string {
	return []string{
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:" + protocol + ",CONTROLLER:" + protocol,
		"listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512",
		"listener.name.controller.sasl.enabled.mechanisms=PLAIN",
		"sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
		"sasl.mechanism.controller.protocol=PLAIN",
		fmt.Sprintf(`listener.name.internal.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`,
			interBrokerUser, interBrokerPassword),
		fmt.Sprintf(`listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s" user_%s="%s";`,
			controllerUser, controllerPassword, controllerUser, controllerPassword),
		"connections.max.reauth.ms=" + reauth,
		"broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500",
	}
}

// addScram is the format flag that creates the inter-broker user.
func addScram() []string {
	return []string{"--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", interBrokerUser, interBrokerPassword)}
}

// Three combined nodes, INTERNAL and CONTROLLER SASL_PLAINTEXT: the quorum
// forms (raft authenticated with PLAIN), a topic of replication factor 3
// created through any node reaches the controller, its followers replicate
// (fetches authenticated with SCRAM), acks=all with min.insync.replicas 3 is
// acknowledged and everything produced is consumed, across several
// renewals of the nodes' four-second sessions. The listeners refuse a
// client that does not authenticate, or authenticates wrongly.
func TestCombinedClusterOverSASL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three gregor processes")
	}
	overrides := append(saslOverrides("SASL_PLAINTEXT", "4000"), "inter.broker.listener.name=INTERNAL")
	nodes := node.StartQuorumWith(t, 3, func(n *node.Node) []string {
		n.FormatFlags = addScram()
		return []string{
			"listeners=PLAINTEXT://" + n.Addr() + ",INTERNAL://" + n.ExtraAddr() + ",CONTROLLER://" + n.CtrlAddr(),
			"advertised.listeners=PLAINTEXT://" + n.Addr() + ",INTERNAL://" + n.ExtraAddr(),
		}
	}, overrides...)
	start := time.Now()
	produceConsumeRF3Topic(t, node.Addrs(nodes), "over-sasl")
	// Replication carries on across the renewals of the nodes' sessions.
	// The sessions are four seconds long: letting nine pass, so that each
	// is renewed twice, is the test's subject, not a wait for a state.
	if waited := 9*time.Second - time.Since(start); waited > 0 {
		time.Sleep(waited)
	}
	produceConsumeRF3Topic(t, node.Addrs(nodes), "over-sasl-later")
	for _, n := range nodes {
		requireSASL(t, n.ExtraAddr(), "INTERNAL", sasl.ScramClient{Name: sasl.ScramSHA512, User: interBrokerUser, Password: interBrokerPassword})
		requireSASL(t, n.CtrlAddr(), "CONTROLLER", sasl.PlainClient{User: controllerUser, Password: controllerPassword})
	}
}

// requireSASL checks that a SASL_PLAINTEXT listener serves nothing but
// authentication before a client authenticates, refuses a wrong password,
// and takes good credentials.
func requireSASL(t *testing.T, addr, name string, good sasl.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A Metadata request (key 3, v0) before authenticating closes the
	// connection unanswered.
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("%s at %s: %v", name, addr, err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	nc.Write([]byte{0, 0, 0, 14, 0, 3, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0})
	if n, _ := nc.Read(make([]byte, 64)); n > 0 {
		t.Errorf("%s at %s answered a request before authentication", name, addr)
	}
	nc.Close()
	var wrong sasl.Client
	switch c := good.(type) {
	case sasl.ScramClient:
		c.Password = "wrong"
		wrong = c
	case sasl.PlainClient:
		c.Password = "wrong"
		wrong = c
	}
	for _, tc := range []struct {
		c  sasl.Client
		ok bool
	}{{wrong, false}, {good, true}} {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, err = sasl.Authenticate(ctx, nc, tc.c, "security-test")
		nc.Close()
		if tc.ok && err != nil {
			t.Errorf("%s at %s refused good credentials: %v", name, addr, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED")) {
			t.Errorf("%s at %s with a wrong password: %v", name, addr, err)
		}
	}
}

// Kafka's split layout with SASL_SSL between nodes: brokers fetch the
// metadata log from the controllers and register and heartbeat over the
// controller listener (TLS, then PLAIN), replicate over INTERNAL (TLS,
// then SCRAM-SHA-512, the user from --add-scram on the controllers).
func TestSplitClusterOverSASLSSL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six gregor processes")
	}
	pki, err := integration.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	server, err := pki.Server("broker")
	if err != nil {
		t.Fatal(err)
	}
	overrides := append(saslOverrides("SASL_SSL", "4000"),
		"ssl.keystore.type=PEM", "ssl.keystore.location="+server.KeystoreFile,
		"ssl.truststore.type=PEM", "ssl.truststore.location="+pki.CAFile)
	ctrls, brokers := node.StartSplitWith(t, 3, 3, func(n *node.Node) []string {
		if n.Roles != "broker" {
			n.FormatFlags = addScram()
			n.ControllerTLS = controllerTLSConfig(t, pki, n.IP)
			return nil
		}
		return []string{
			"listeners=PLAINTEXT://" + n.Addr() + ",INTERNAL://" + n.ExtraAddr(),
			"advertised.listeners=PLAINTEXT://" + n.Addr() + ",INTERNAL://" + n.ExtraAddr(),
			"inter.broker.listener.name=INTERNAL",
		}
	}, overrides...)
	produceConsumeRF3Topic(t, node.Addrs(brokers), "over-sasl-ssl")
	if len(ctrls) != 3 {
		t.Fatalf("%d controllers", len(ctrls))
	}
}

// controllerTLSConfig is how the readiness check reaches a controller's
// SASL_SSL listener on ip: TLS trusting the test CA (ApiVersions needs no
// authentication).
func controllerTLSConfig(t *testing.T, pki *integration.PKI, ip string) *tls.Config {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(pki.CA)
	return &tls.Config{RootCAs: roots, ServerName: ip}
}
