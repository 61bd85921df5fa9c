package integration

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/broker/config"
)

func TestPKIIssuesVerifiableCertificates(t *testing.T) {
	p, err := NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	server, err := p.Server("broker")
	if err != nil {
		t.Fatal(err)
	}
	client, err := p.Client("alice", "CN=alice,OU=eng+UID=a1,O=Gregor\\, Inc.,C=GB")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	caPEM, err := os.ReadFile(p.CAFile)
	if err != nil || !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("the CA file is not a PEM truststore: %v", err)
	}
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		if _, err := server.Cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("server certificate for %s: %v", host, err)
		}
	}
	if _, err := client.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if _, err := client.Cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verifies for server authentication")
	}
	// The keystore file holds the key and the chain: what tls reads too.
	ks, err := os.ReadFile(client.KeystoreFile)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(ks, ks)
	if err != nil {
		t.Fatalf("the PEM keystore: %v", err)
	}
	if len(pair.Certificate) != 2 {
		t.Errorf("the keystore's chain has %d certificates, want the leaf and the CA", len(pair.Certificate))
	}
	// The subject is encoded last attribute first, the multi-valued RDN
	// kept together, and the escaped comma inside the value.
	var seq pkix.RDNSequence
	if _, err := asn1.Unmarshal(client.Cert.RawSubject, &seq); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rdn := range seq {
		var parts []string
		for _, atv := range rdn {
			parts = append(parts, atv.Type.String()+"="+atv.Value.(string))
		}
		got = append(got, strings.Join(parts, "+"))
	}
	want := []string{"2.5.4.6=GB", "2.5.4.10=Gregor, Inc.", "2.5.4.11=eng+0.9.2342.19200300.100.1.1=a1", "2.5.4.3=alice"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("subject RDNs %v, want %v", got, want)
	}
}

func TestPKIRefusesBadSubjects(t *testing.T) {
	p, err := NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, dn := range []string{"", "CN", "XX=1", "CN=a\\"} {
		if _, err := p.Client("bad", dn); err == nil {
			t.Errorf("subject %q accepted", dn)
		}
	}
}

// Properties written by the harness read back as the same strings, with
// Gregor's reader (java.util.Properties semantics).
func TestWritePropertiesRoundTrips(t *testing.T) {
	p, err := NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	kp, err := p.Server("broker")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ssl.keystore.key":               kp.KeyPEM,
		"ssl.keystore.certificate.chain": kp.ChainPEM,
		"sasl.jaas.config":               `org.apache.kafka.common.security.plain.PlainLoginModule required username="a b" password="p=q:r#!\\";`,
		"leading":                        "  spaced value\ttab\r\n",
		"odd key=with:chars #!":          "é 世界 😀",
		"empty":                          "",
	}
	path := filepath.Join(t.TempDir(), "x.properties")
	if err := WriteClientProperties(path, want); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range raw {
		if b > 0x7e {
			t.Fatalf("the file is not ASCII: %q", raw)
		}
	}
	got, err := config.ParseProperties(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("read %d keys, wrote %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q: read %q, wrote %q", k, got[k], v)
		}
	}
}

func TestSingleNodeProperties(t *testing.T) {
	n := &SingleNode{LogDir: "/d", Addrs: map[string]string{"PLAINTEXT": "127.0.0.1:1", "CONTROLLER": "127.0.0.1:2", "SSL": "127.0.0.1:3"}}
	kvs := n.serverProperties([]string{"PLAINTEXT", "CONTROLLER", "SSL"},
		map[string]string{"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT", "SSL": "SSL"},
		map[string]string{"inter.broker.listener.name": "SSL", "super.users": "User:admin"})
	got := map[string]string{}
	var order []string
	for _, kv := range kvs {
		if _, dup := got[kv[0]]; dup {
			t.Errorf("%s written twice", kv[0])
		}
		got[kv[0]] = kv[1]
		order = append(order, kv[0])
	}
	for k, v := range map[string]string{
		"listeners":                           "PLAINTEXT://127.0.0.1:1,CONTROLLER://127.0.0.1:2,SSL://127.0.0.1:3",
		"listener.security.protocol.map":      "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL",
		"inter.broker.listener.name":          "SSL",
		"super.users":                         "User:admin",
		"controller.quorum.bootstrap.servers": "127.0.0.1:2",
	} {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
	if order[len(order)-1] != "super.users" {
		t.Errorf("the caller's own keys are not last: %v", order)
	}
}
