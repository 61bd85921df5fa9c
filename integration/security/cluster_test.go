// Package security tests Gregor clusters whose own connections are
// secured: brokers replicating, forwarding and fetching metadata, and
// controllers voting, over TLS listeners with client certificates.
package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sslOverrides are every node's TLS settings: one server certificate (for
// every loopback address a node can run on), the CA as truststore, client
// certificates required on every SSL listener (so each node dials with
// its keystore as its client certificate).
func sslOverrides(t *testing.T) ([]string, *integration.PKI, *integration.KeyPair) {
	t.Helper()
	pki, server, err := integration.NewPKIWithServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return []string{
		"ssl.keystore.type=PEM", "ssl.keystore.location=" + server.KeystoreFile,
		"ssl.truststore.type=PEM", "ssl.truststore.location=" + pki.CAFile,
		"ssl.client.auth=required",
		"broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500",
	}, pki, server
}

// Three combined nodes whose inter-broker listener (INTERNAL) and
// controller listener are SSL with mTLS: the quorum forms (raft over TLS),
// a topic of replication factor 3 created through any node reaches the
// controller, its followers replicate (fetches over TLS), acks=all
// produce is acknowledged and everything produced is consumed.
func TestCombinedClusterOverSSL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three gregor processes")
	}
	overrides, pki, server := sslOverrides(t)
	overrides = append(overrides,
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:SSL",
		"inter.broker.listener.name=INTERNAL")
	nodes := node.StartQuorumWith(t, 3, func(n *node.Node) []string {
		return []string{
			"listeners=PLAINTEXT://" + n.Addr() + ",INTERNAL://" + n.ExtraAddr() + ",CONTROLLER://" + n.CtrlAddr(),
			"advertised.listeners=PLAINTEXT://" + n.Addr() + ",INTERNAL://" + n.ExtraAddr(),
		}
	}, overrides...)
	produceConsumeRF3(t, node.Addrs(nodes))
	for _, n := range nodes {
		requireTLS(t, pki, server, n.ExtraAddr(), "INTERNAL")
		requireTLS(t, pki, server, n.CtrlAddr(), "CONTROLLER")
	}
}

// Kafka's split layout with SSL everywhere between nodes: brokers fetch
// the metadata log from the controllers, register and heartbeat over the
// SSL controller listener, and replicate over the SSL INTERNAL listener.
func TestSplitClusterOverSSL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six gregor processes")
	}
	overrides, pki, server := sslOverrides(t)
	overrides = append(overrides, "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:SSL")
	pair, err := tls.X509KeyPair([]byte(server.ChainPEM), []byte(server.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(pki.CA)
	ctrls, brokers := node.StartSplitWith(t, 3, 3, func(n *node.Node) []string {
		if n.Roles != "broker" {
			n.ControllerTLS = &tls.Config{RootCAs: roots, ServerName: n.IP, Certificates: []tls.Certificate{pair}}
			return nil
		}
		return []string{
			"listeners=PLAINTEXT://" + n.Addr() + ",INTERNAL://" + n.ExtraAddr(),
			"advertised.listeners=PLAINTEXT://" + n.Addr() + ",INTERNAL://" + n.ExtraAddr(),
			"inter.broker.listener.name=INTERNAL",
		}
	}, overrides...)
	produceConsumeRF3(t, node.Addrs(brokers))
	for _, n := range ctrls {
		requireTLS(t, pki, server, n.CtrlAddr(), "CONTROLLER")
	}
	for _, n := range brokers {
		requireTLS(t, pki, server, n.ExtraAddr(), "INTERNAL")
	}
}

func produceConsumeRF3(t *testing.T, addrs []string) {
	t.Helper()
	produceConsumeRF3Topic(t, addrs, "over-ssl")
}

// produceConsumeRF3Topic creates topic (3 partitions, 3 replicas,
// min.insync.replicas 3) through the brokers at addrs, produces to it
// with acks=all and consumes everything back.
func produceConsumeRF3Topic(t *testing.T, addrs []string, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := node.NewClient(t, addrs, kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(cl)
	var created bool
	node.WaitFor(t, time.Minute, "topic creation through a broker", func() bool {
		resp, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("3")}, topic)
		if err == nil && resp.Err == nil {
			created = true
		}
		return created
	})
	node.WaitFor(t, time.Minute, "a full ISR on every partition", func() bool {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil || td[topic].Err != nil {
			return false
		}
		for _, p := range td[topic].Partitions {
			if len(p.ISR) != 3 || p.Leader < 0 {
				return false
			}
		}
		return len(td[topic].Partitions) == 3
	})
	const n = 300
	var want []string
	for i := range n {
		v := fmt.Sprintf("v%03d", i)
		want = append(want, v)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 7)), Value: []byte(v)}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Every produce above waited for acks=all with min.insync.replicas 3:
	// all three replicas have every record.
	consumer := node.NewClient(t, addrs, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < n {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming: %v (after %d records)", err, len(got))
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("consumed %d records, want the %d produced", len(got), n)
	}
}

// requireTLS checks that a listener speaks only TLS with a client
// certificate: a plaintext request gets the connection closed, a TLS
// client without a certificate is refused, and one with the node's
// certificate gets an ApiVersions answer.
func requireTLS(t *testing.T, pki *integration.PKI, kp *integration.KeyPair, addr, name string) {
	t.Helper()
	apiVersions := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0, 0}
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("%s at %s: %v", name, addr, err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	nc.Write(apiVersions)
	resp, _ := io.ReadAll(nc)
	nc.Close()
	if len(resp) >= 8 && resp[0] == 0 && resp[4] == 0 && resp[7] == 1 {
		t.Errorf("%s at %s answered a plaintext ApiVersions", name, addr)
	}
	roots := x509.NewCertPool()
	roots.AddCert(pki.CA)
	host, _, _ := net.SplitHostPort(addr)
	exchange := func(certs []tls.Certificate) error {
		tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: host, Certificates: certs})
		if err != nil {
			return err
		}
		defer tc.Close()
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := tc.Write(apiVersions); err != nil {
			return err
		}
		_, err = io.ReadFull(tc, make([]byte, 8))
		return err
	}
	if err := exchange(nil); err == nil {
		t.Errorf("%s at %s served a TLS client without a certificate", name, addr)
	}
	pair, err := tls.X509KeyPair([]byte(kp.ChainPEM), []byte(kp.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	if err := exchange([]tls.Certificate{pair}); err != nil {
		t.Errorf("%s at %s: a TLS client with the node's certificate: %v", name, addr, err)
	}
}
