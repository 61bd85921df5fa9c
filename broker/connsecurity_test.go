package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/broker/ssl"
	"github.com/gregorbroker/gregor/integration"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// tlsNode is a test node with, besides PLAINTEXT and CONTROLLER, an SSL
// listener called SSL serving the PKI's server certificate with the given
// ssl.* properties (unprefixed) on top.
type tlsNode struct {
	*testNode
	pki     *integration.PKI
	sslAddr string
}

func startTLSNode(t *testing.T, overrides map[string]string, props map[string]string) *tlsNode {
	t.Helper()
	pki, server, err := integration.NewPKIWithServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{
		"ssl.keystore.type": "PEM", "ssl.keystore.location": server.KeystoreFile,
		"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.CAFile,
	}
	for k, v := range props {
		all[k] = v
	}
	srv, _, err := ssl.NewServer(ssl.FromMap("SSL", all), false)
	if err != nil {
		t.Fatal(err)
	}
	n := startTestNodeWithOptions(t, overrides, map[string]int16{"group.version": 1}, func(o *network.ServerOptions) {
		o.Listeners = append(o.Listeners, network.ListenerSpec{Name: "SSL", Host: "127.0.0.1", SecurityProtocol: "SSL", TLS: srv})
	}, nil, func(o *Options) {
		o.Advertised = append(o.Advertised, metadata.Endpoint{Name: "SSL", Host: "127.0.0.1", SecurityProtocol: 1})
	})
	return &tlsNode{testNode: n, pki: pki, sslAddr: n.b.Addrs()["SSL"]}
}

// clientTLS is a client's tls.Config trusting the PKI, presenting kp
// when not nil.
func (n *tlsNode) clientTLS(t *testing.T, kp *integration.KeyPair) *tls.Config {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(n.pki.CA)
	cfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
	if kp != nil {
		pair, err := tls.X509KeyPair([]byte(kp.ChainPEM), []byte(kp.KeyPEM))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

func (n *tlsNode) client(t *testing.T, kp *integration.KeyPair, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.sslAddr), kgo.DialTLSConfig(n.clientTLS(t, kp))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// principals are the principals of the node's open connections on
// listener.
func (n *tlsNode) principals(listener string) []string {
	var out []string
	for _, c := range n.b.server.Conns() {
		if c.Listener() == listener {
			out = append(out, c.Principal().String())
		}
	}
	return out
}

// Records produced and fetched over TLS come back byte for byte, small
// and large: ranges above CopyRangeMax, which a PLAINTEXT listener sends
// with sendfile, go through the writer's buffer.
func TestTLSProduceFetch(t *testing.T) {
	n := startTLSNode(t, nil, map[string]string{"ssl.client.auth": "required", "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/L,DEFAULT"})
	alice, err := n.pki.Client("alice", "CN=Alice,OU=eng,O=Gregor")
	if err != nil {
		t.Fatal(err)
	}
	cl := n.client(t, alice, kgo.ProducerBatchMaxBytes(4<<20), kgo.FetchMaxPartitionBytes(8<<20), kgo.FetchMaxBytes(16<<20))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": kadm.StringPtr("4194304")}, "tls"); err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for i, size := range []int{10, 1 << 10, 20 << 10, 200 << 10, 1 << 20, 3 << 20} {
		v := bytes.Repeat([]byte{byte('a' + i)}, size)
		want = append(want, v)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tls", Value: v}).FirstErr(); err != nil {
			t.Fatalf("producing %d bytes over TLS: %v", size, err)
		}
	}
	consumer := n.client(t, alice, kgo.ConsumeTopics("tls"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(8<<20), kgo.FetchMaxBytes(16<<20))
	var got [][]byte
	for len(got) < len(want) {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetching over TLS: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Value) })
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d: %d bytes back, %d sent (or different)", i, len(got[i]), len(want[i]))
		}
	}
	if ps := n.principals("SSL"); len(ps) == 0 || !allEqual(ps, "User:alice") {
		t.Errorf("principals on the SSL listener: %v, want User:alice", ps)
	}
}

func allEqual(ss []string, want string) bool {
	for _, s := range ss {
		if s != want {
			return false
		}
	}
	return true
}

// A client without a certificate on a required-mTLS listener, a client
// of another CA, garbage instead of a ClientHello, a plaintext Kafka
// request and a connection that never speaks: each is refused, and a good
// client on the same listener keeps working throughout.
func TestTLSHostileClients(t *testing.T) {
	n := startTLSNode(t, map[string]string{"connections.max.idle.ms": "1500"}, map[string]string{"ssl.client.auth": "required"})
	alice, _ := n.pki.Client("alice", "CN=alice")
	good := n.client(t, alice)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(good)
	ping := func(when string) {
		t.Helper()
		if _, err := adm.ListTopics(ctx); err != nil {
			t.Fatalf("the good client %s: %v", when, err)
		}
	}
	ping("before")

	// No certificate.
	cfg := n.clientTLS(t, nil)
	if err := tlsExchange(n.sslAddr, cfg); err == nil {
		t.Error("a client without a certificate was served")
	}
	// A certificate from another authority.
	other, _ := integration.NewPKI(t.TempDir())
	mallory, _ := other.Client("mallory", "CN=mallory")
	cfg = n.clientTLS(t, nil)
	pair, _ := tls.X509KeyPair([]byte(mallory.ChainPEM), []byte(mallory.KeyPEM))
	cfg.Certificates = []tls.Certificate{pair}
	if err := tlsExchange(n.sslAddr, cfg); err == nil {
		t.Error("a client certificate of another authority was accepted")
	}
	ping("after refused certificates")

	// Garbage, and a plaintext Kafka request, instead of a ClientHello:
	// the broker closes the connection.
	for _, junk := range [][]byte{bytes.Repeat([]byte{0x16, 0x03, 0x01, 0xff, 0xff}, 100), apiVersionsFrame(), []byte("GET / HTTP/1.1\r\n\r\n")} {
		nc, err := net.Dial("tcp", n.sslAddr)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(junk)
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(nc); err != nil && !isReset(err) {
			t.Errorf("after %q...: %v, want the broker to close the connection", junk[:4], err)
		}
		nc.Close()
	}
	// A connection that never speaks is closed once the handshake time
	// (here connections.max.idle.ms) runs out.
	nc, err := net.Dial("tcp", n.sslAddr)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(nc); err != nil && !isReset(err) {
		t.Errorf("a silent connection was not closed: %v", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("a silent connection was closed after %s", waited)
	}
	nc.Close()
	ping("after hostile connections")
	if p := n.b.server.Panics(); p != 0 {
		t.Errorf("%d handler panics", p)
	}
}

// tlsExchange handshakes and sends one ApiVersions request, and reports
// whether an answer came back.
func tlsExchange(addr string, cfg *tls.Config) error {
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write(apiVersionsFrame()); err != nil {
		return err
	}
	_, err = io.ReadFull(nc, make([]byte, 8))
	return err
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// apiVersionsFrame is an ApiVersions v0 request.
func apiVersionsFrame() []byte {
	body := []byte{0, 18, 0, 0, 0, 0, 0, 1, 0, 0}
	return append([]byte{0, 0, 0, byte(len(body))}, body...)
}

// Over TLS an idle connection is still closed after
// connections.max.idle.ms, and a busy one is not.
func TestTLSIdle(t *testing.T) {
	n := startTLSNode(t, map[string]string{"connections.max.idle.ms": "800"}, nil)
	cfg := n.clientTLS(t, nil)
	nc, err := tls.Dial("tcp", n.sslAddr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// Busy for three idle periods: a request every 200 ms for 2.4 s. The
	// time passing is the subject (a busy connection outlives the idle
	// timeout), so the pauses are sleeps.
	for range 12 {
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Write(apiVersionsFrame()); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(nc, size[:]); err != nil {
			t.Fatalf("a busy TLS connection was closed: %v", err)
		}
		if _, err := io.CopyN(io.Discard, nc, int64(size[0])<<24|int64(size[1])<<16|int64(size[2])<<8|int64(size[3])); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	start := time.Now()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatal("read a byte nobody sent")
	}
	if idle := time.Since(start); idle < 500*time.Millisecond || idle > 5*time.Second {
		t.Errorf("an idle TLS connection was closed after %s, want about 800ms", idle)
	}
}
