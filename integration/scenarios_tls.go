package integration

// Scenarios of TLS listeners. Each starts its own single node
// (Env.StartNode) of the target's flavor with the listeners it needs, so
// that the same scenario runs against Apache Kafka 4.3.1 and Gregor. The
// stock tools connect with PEM stores from a fresh test PKI; where the
// tools cannot say what is checked (which certificate a listener
// presents, a connection left open across a reload, bytes that are not
// TLS) the scenario speaks TLS or TCP itself.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func tlsScenarios() []Scenario {
	return []Scenario{
		{Name: "tls/ssl-listener", Doc: "a node with an SSL listener (PEM keystore file): kafka-broker-api-versions and kafka-topics over TLS with a PEM truststore; a client without the CA fails in the handshake", Timeout: 4 * time.Minute, OwnNodes: true, Run: tlsSSLListener},
		{Name: "tls/console-mtls", Doc: "console producer and consumer over mTLS (ssl.client.auth=required, PEM keystore and truststore): every record comes back", Timeout: 5 * time.Minute, OwnNodes: true, Run: tlsConsoleMTLS},
		{Name: "tls/jks-pkcs12-stores", Doc: "a listener with a PKCS12 keystore and a JKS truststore requiring client certificates; the stock tools with a JKS keystore and a PKCS12 truststore create a topic, produce and consume", Timeout: 5 * time.Minute, OwnNodes: true, Run: tlsBinaryStores},
		{Name: "tls/mtls-no-certificate", Doc: "on a required-mTLS listener a client without a certificate fails in the handshake while a client with one keeps producing on its open connection", Timeout: 4 * time.Minute, OwnNodes: true, Run: tlsNoCertificate},
		{Name: "tls/handshake-garbage", Doc: "garbage, a plaintext Kafka request and a truncated ClientHello on an SSL listener: each connection is closed, the broker keeps serving TLS clients", Timeout: 4 * time.Minute, OwnNodes: true, Run: tlsHandshakeGarbage},
		{Name: "tls/keystore-reload", Doc: "kafka-configs --alter listener.name.ssl.ssl.keystore.location: new connections get the new certificate, an open one carries on; a keystore with another subject or a missing file is refused", Timeout: 5 * time.Minute, OwnNodes: true, Run: tlsKeystoreReload},
		{Name: "tls/keystore-reload-inline", Doc: "kafka-configs --add-config-file with inline PEM listener.name.ssl.ssl.keystore.key/certificate.chain replaces an inline keystore; new connections get the new certificate", Timeout: 5 * time.Minute, OwnNodes: true, Run: tlsKeystoreReloadInline},
	}
}

// tlsNode starts a node with the given listeners, with properties built
// from a fresh PKI and its server certificate.
func tlsNode(ctx context.Context, e *Env, listeners []NodeListener, props func(p *PKI, server *KeyPair) map[string]string) (*SingleNode, *PKI, *KeyPair, error) {
	pki, server, err := NewPKIWithServer(filepath.Join(e.Dir, "pki"))
	if err != nil {
		return nil, nil, nil, err
	}
	n, err := e.StartNode(ctx, NodeSpec{Listeners: listeners, Properties: props(pki, server)})
	if err != nil {
		return nil, nil, nil, err
	}
	return n, pki, server, nil
}

// sslNode is a node with an SSL listener called SSL that asks for no
// client certificate.
func sslNode(ctx context.Context, e *Env) (*SingleNode, *PKI, *KeyPair, error) {
	return tlsNode(ctx, e, []NodeListener{{Name: "SSL", Protocol: "SSL"}}, func(p *PKI, server *KeyPair) map[string]string {
		return p.ListenerSSL("SSL", server)
	})
}

// mtlsNode is a node whose listener SSL requires client certificates.
func mtlsNode(ctx context.Context, e *Env) (*SingleNode, *PKI, *KeyPair, error) {
	return tlsNode(ctx, e, []NodeListener{{Name: "SSL", Protocol: "SSL"}}, func(p *PKI, server *KeyPair) map[string]string {
		props := p.ListenerSSL("SSL", server)
		props["listener.name.ssl.ssl.client.auth"] = "required"
		return props
	})
}

func tlsSSLListener(ctx context.Context, e *Env) error {
	n, pki, _, err := sslNode(ctx, e)
	if err != nil {
		return err
	}
	cfg, err := e.ClientProperties("client-ssl.properties", pki.ClientSSL(nil))
	if err != nil {
		return err
	}
	out, err := e.KafkaOn(ctx, n.Addr("SSL"), "", mainAPIVersions, "--command-config", cfg)
	if err != nil {
		return fmt.Errorf("kafka-broker-api-versions over TLS: %w", err)
	}
	if !strings.Contains(out.Stdout, "(id: 1 rack: null") || !strings.Contains(out.Stdout, "ApiVersions(18)") {
		return fmt.Errorf("kafka-broker-api-versions over TLS listed no broker 1 with ApiVersions: %s", truncate(out.Stdout, 300))
	}
	topic := e.Name("tls")
	if err := createTopicOn(ctx, e, n.Addr("SSL"), cfg, topic, 2); err != nil {
		return err
	}
	out, err = e.KafkaOn(ctx, n.Addr("SSL"), "", mainTopics, "--command-config", cfg, "--list")
	if err != nil {
		return fmt.Errorf("kafka-topics --list over TLS: %w", err)
	}
	if !strings.Contains(" "+strings.Join(strings.Fields(out.Stdout), " ")+" ", " "+topic+" ") {
		return fmt.Errorf("kafka-topics --list over TLS does not list %s: %s", topic, truncate(out.Stdout, 300))
	}
	// The same client without the CA does not trust the broker.
	untrusting, err := e.ClientProperties("client-untrusting.properties", map[string]string{"security.protocol": "SSL"})
	if err != nil {
		return err
	}
	out, err = e.KafkaOn(ctx, n.Addr("SSL"), "", mainTopics, "--command-config", untrusting, "--list")
	if err == nil {
		return fmt.Errorf("kafka-topics over TLS without the CA in its truststore succeeded: %s", truncate(out.Stdout, 300))
	}
	if !strings.Contains(out.Stderr, "SSL handshake failed") {
		return fmt.Errorf("kafka-topics over TLS without the CA in its truststore failed, but not in the handshake: %s", out.Tail())
	}
	return nil
}

// createTopicOn runs kafka-topics --create against bootstrap with the
// client configuration cfg.
func createTopicOn(ctx context.Context, e *Env, bootstrap, cfg, topic string, partitions int) error {
	out, err := e.KafkaOn(ctx, bootstrap, "", mainTopics, "--command-config", cfg, "--create", "--topic", topic,
		"--partitions", strconv.Itoa(partitions), "--replication-factor", "1")
	if err != nil {
		return fmt.Errorf("kafka-topics --create %s: %w", topic, err)
	}
	if !strings.Contains(out.Stdout, "Created topic "+topic+".") {
		return fmt.Errorf("kafka-topics --create printed no confirmation for %s: %s", topic, out.Tail())
	}
	return nil
}

func tlsConsoleMTLS(ctx context.Context, e *Env) error {
	n, pki, _, err := mtlsNode(ctx, e)
	if err != nil {
		return err
	}
	alice, err := pki.Client("alice", "CN=alice,OU=clients,O=Gregor")
	if err != nil {
		return err
	}
	cfg, err := e.ClientProperties("alice.properties", pki.ClientSSL(alice))
	if err != nil {
		return err
	}
	return consoleRoundTrip(ctx, e, n.Addr("SSL"), cfg, "mtls")
}

// consoleRoundTrip creates a topic, produces keyed records with the
// console producer and reads them back with the console consumer in a
// group, every tool connecting to bootstrap with the client
// configuration cfg.
func consoleRoundTrip(ctx context.Context, e *Env, bootstrap, cfg, prefix string) error {
	return consoleRoundTripAs(ctx, e, bootstrap, e.Name(prefix), cfg, cfg, cfg)
}

// consoleRoundTripAs is consoleRoundTrip on topic with a client
// configuration for each tool: kafka-topics as creator, the producer as
// producer, the consumer as consumer.
func consoleRoundTripAs(ctx context.Context, e *Env, bootstrap, topic, creator, producer, consumer string) error {
	if err := createTopicOn(ctx, e, bootstrap, creator, topic, 3); err != nil {
		return err
	}
	lines := keyedLines("m", 30)
	out, err := e.KafkaOn(ctx, bootstrap, strings.Join(lines, "\n")+"\n", mainProducer, "--command-config", producer, "--topic", topic,
		"--reader-property", "parse.key=true", "--reader-property", "key.separator=:")
	if err != nil {
		return fmt.Errorf("console producer: %w", err)
	}
	if strings.Contains(out.Stderr, "ERROR") {
		return fmt.Errorf("console producer reported errors: %s", out.Tail())
	}
	out, err = e.KafkaOn(ctx, bootstrap, "", mainConsumer, "--command-config", consumer, "--topic", topic, "--group", topic+"-group",
		"--from-beginning", "--max-messages", strconv.Itoa(len(lines)), "--timeout-ms", "45000",
		"--formatter-property", "print.key=true", "--formatter-property", "key.separator=:")
	if err != nil {
		return fmt.Errorf("console consumer: %w", err)
	}
	if !strings.Contains(out.Stderr, fmt.Sprintf("Processed a total of %d messages", len(lines))) {
		return fmt.Errorf("console consumer did not report %d messages: %s", len(lines), out.Tail())
	}
	var got []string
	for _, l := range strings.Split(out.Stdout, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			got = append(got, l)
		}
	}
	if err := sameSet(got, lines); err != nil {
		return fmt.Errorf("records consumed differ: %w", err)
	}
	return nil
}

// tlsBinaryStores runs a listener from a PKCS12 keystore and a JKS
// truststore, and the stock tools from a JKS keystore and a PKCS12
// truststore, all written by Go libraries: each side reads the other's
// formats.
func tlsBinaryStores(ctx context.Context, e *Env) error {
	pki, server, err := NewPKIWithServer(filepath.Join(e.Dir, "pki"))
	if err != nil {
		return err
	}
	dir := pki.Dir
	if err := server.WritePKCS12(dir+"/broker.p12", "broker-secret"); err != nil {
		return err
	}
	if err := pki.WriteTruststoreJKS(dir+"/trust.jks", "trust-secret"); err != nil {
		return err
	}
	n, err := e.StartNode(ctx, NodeSpec{Listeners: []NodeListener{{Name: "SSL", Protocol: "SSL"}}, Properties: map[string]string{
		"listener.name.ssl.ssl.keystore.type":       "PKCS12",
		"listener.name.ssl.ssl.keystore.location":   dir + "/broker.p12",
		"listener.name.ssl.ssl.keystore.password":   "broker-secret",
		"listener.name.ssl.ssl.truststore.type":     "JKS",
		"listener.name.ssl.ssl.truststore.location": dir + "/trust.jks",
		"listener.name.ssl.ssl.truststore.password": "trust-secret",
		"listener.name.ssl.ssl.client.auth":         "required",
	}})
	if err != nil {
		return err
	}
	alice, err := pki.Client("alice", "CN=alice")
	if err != nil {
		return err
	}
	if err := alice.WriteJKS(dir+"/alice.jks", "alice-store", "alice-key"); err != nil {
		return err
	}
	if err := pki.WriteTruststorePKCS12(dir+"/trust.p12", "trust-secret"); err != nil {
		return err
	}
	cfg, err := e.ClientProperties("alice.properties", map[string]string{
		"security.protocol":       "SSL",
		"ssl.keystore.type":       "JKS",
		"ssl.keystore.location":   dir + "/alice.jks",
		"ssl.keystore.password":   "alice-store",
		"ssl.key.password":        "alice-key",
		"ssl.truststore.type":     "PKCS12",
		"ssl.truststore.location": dir + "/trust.p12",
		"ssl.truststore.password": "trust-secret",
	})
	if err != nil {
		return err
	}
	return consoleRoundTrip(ctx, e, n.Addr("SSL"), cfg, "stores")
}

// tlsClient is a TLS configuration trusting the PKI, presenting kp when
// it is not nil. It has no ServerName: tls.Dial and kgo verify the host
// dialed (the node's loopback address).
func tlsClient(p *PKI, kp *KeyPair) (*tls.Config, error) {
	roots := x509.NewCertPool()
	roots.AddCert(p.CA)
	cfg := &tls.Config{RootCAs: roots}
	if kp != nil {
		pair, err := tls.X509KeyPair([]byte(kp.ChainPEM), []byte(kp.KeyPEM))
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func tlsNoCertificate(ctx context.Context, e *Env) error {
	n, pki, _, err := mtlsNode(ctx, e)
	if err != nil {
		return err
	}
	addr := n.Addr("SSL")
	alice, err := pki.Client("alice", "CN=alice")
	if err != nil {
		return err
	}
	cfg, err := tlsClient(pki, alice)
	if err != nil {
		return err
	}
	topic := e.Name("nocert")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(cfg), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err != nil {
		return err
	}
	defer cl.Close()
	produce := func(what string) error {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte(what)}).FirstErr(); err != nil {
			return fmt.Errorf("the client with a certificate, %s: %w", what, err)
		}
		return nil
	}
	if err := produce("before"); err != nil {
		return err
	}
	// The stock tools without a keystore: the handshake fails.
	noCert, err := e.ClientProperties("no-cert.properties", pki.ClientSSL(nil))
	if err != nil {
		return err
	}
	out, err := e.KafkaOn(ctx, addr, "", mainTopics, "--command-config", noCert, "--list")
	if err == nil {
		return fmt.Errorf("kafka-topics without a client certificate succeeded on a required-mTLS listener: %s", truncate(out.Stdout, 200))
	}
	// With TLS 1.3 the client learns of the refusal after its side of
	// the handshake ("Failed to process post-handshake messages").
	if !strings.Contains(out.Stderr, "SslAuthenticationException") {
		return fmt.Errorf("kafka-topics without a client certificate failed, but not in TLS: %s", out.Tail())
	}
	// A certificate the CA did not sign fares no better.
	stranger, err := NewPKI(e.Dir + "/stranger-pki")
	if err != nil {
		return err
	}
	mallory, err := stranger.Client("mallory", "CN=mallory")
	if err != nil {
		return err
	}
	props := pki.ClientSSL(nil)
	props["ssl.keystore.type"], props["ssl.keystore.location"] = "PEM", mallory.KeystoreFile
	strangerCfg, err := e.ClientProperties("stranger.properties", props)
	if err != nil {
		return err
	}
	if out, err := e.KafkaOn(ctx, addr, "", mainTopics, "--command-config", strangerCfg, "--list"); err == nil {
		return fmt.Errorf("kafka-topics with a certificate of another CA succeeded: %s", truncate(out.Stdout, 200))
	}
	if err := produce("after"); err != nil {
		return err
	}
	return nil
}

// peerCertificate dials addr over TLS and returns the certificate the
// listener presents.
func peerCertificate(addr string, cfg *tls.Config) (*x509.Certificate, error) {
	tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer tc.Close()
	return tc.ConnectionState().PeerCertificates[0], nil
}

// apiVersionsV0 is an ApiVersions v0 request frame.
var apiVersionsV0 = []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0, 0}

// roundTrip sends an ApiVersions request on c and reads the answer.
func roundTrip(c net.Conn) error {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(apiVersionsV0); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	n := int64(size[0])<<24 | int64(size[1])<<16 | int64(size[2])<<8 | int64(size[3])
	if n < 4 || n > 1<<20 {
		return fmt.Errorf("ApiVersions answer of %d bytes", n)
	}
	_, err := io.CopyN(io.Discard, c, n)
	return err
}

func tlsHandshakeGarbage(ctx context.Context, e *Env) error {
	n, pki, _, err := sslNode(ctx, e)
	if err != nil {
		return err
	}
	addr := n.Addr("SSL")
	cfg, err := tlsClient(pki, nil)
	if err != nil {
		return err
	}
	good, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return fmt.Errorf("a TLS client: %w", err)
	}
	defer good.Close()
	if err := roundTrip(good); err != nil {
		return fmt.Errorf("a TLS client's request: %w", err)
	}
	hello := []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03} // a ClientHello's start, cut short
	for _, junk := range [][]byte{
		[]byte("\x00\x01\x02garbage\xff\xfe" + strings.Repeat("\xde\xad\xbe\xef", 4096)),
		apiVersionsV0, // plaintext Kafka on a TLS listener
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		append(hello, strings.Repeat("\x00", 64)...),
	} {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return err
		}
		c.Write(junk)
		if junk[0] == 0x16 {
			c.(*net.TCPConn).CloseWrite() // the rest of the hello never comes
		}
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, rerr := io.ReadAll(c)
		c.Close()
		var ne net.Error
		if errors.As(rerr, &ne) && ne.Timeout() {
			return fmt.Errorf("after %q... the broker kept the connection open for 30 s", junk[:min(len(junk), 8)])
		}
		if err := n.Alive(); err != nil {
			return err
		}
	}
	// The TLS client's connection carries on, and new ones are served.
	if err := roundTrip(good); err != nil {
		return fmt.Errorf("the TLS client's open connection after the garbage: %w", err)
	}
	again, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return fmt.Errorf("a new TLS client after the garbage: %w", err)
	}
	defer again.Close()
	return roundTrip(again)
}

// awaitCertificate polls new connections to addr until the listener
// presents the certificate with the given serial.
func awaitCertificate(ctx context.Context, addr string, cfg *tls.Config, serial *big.Int) error {
	var last *big.Int
	err := until(ctx, 60*time.Second, 250*time.Millisecond, func() (bool, error) {
		c, err := peerCertificate(addr, cfg)
		if err != nil {
			return false, err
		}
		last = c.SerialNumber
		return c.SerialNumber.Cmp(serial) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("new connections never presented certificate %x (last %x): %w", serial, last, err)
	}
	return nil
}

// alterBroker runs kafka-configs --alter on broker 1 with the given
// arguments.
func alterBroker(ctx context.Context, e *Env, n *SingleNode, args ...string) (Output, error) {
	return e.KafkaOn(ctx, n.Bootstrap(), "", mainConfigs, append([]string{"--entity-type", "brokers", "--entity-name", "1", "--alter"}, args...)...)
}

func tlsKeystoreReload(ctx context.Context, e *Env) error {
	n, pki, first, err := sslNode(ctx, e)
	if err != nil {
		return err
	}
	addr := n.Addr("SSL")
	cfg, err := tlsClient(pki, nil)
	if err != nil {
		return err
	}
	if err := awaitCertificate(ctx, addr, cfg, first.Cert.SerialNumber); err != nil {
		return err
	}
	open, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer open.Close()
	// A renewed certificate: same subject, same names, new key.
	renewed, err := pki.Issue("broker-renewed", CertSpec{Subject: "CN=broker,O=Gregor", DNSNames: first.Cert.DNSNames, IPs: first.Cert.IPAddresses, Server: true, Client: true})
	if err != nil {
		return err
	}
	out, err := alterBroker(ctx, e, n, "--add-config", "listener.name.ssl.ssl.keystore.location="+renewed.KeystoreFile)
	if err != nil {
		return fmt.Errorf("kafka-configs --alter of the keystore: %w", err)
	}
	if !strings.Contains(out.Stdout, "Completed updating config for broker 1.") {
		return fmt.Errorf("kafka-configs --alter of the keystore printed no confirmation: %s", out.Tail())
	}
	if err := awaitCertificate(ctx, addr, cfg, renewed.Cert.SerialNumber); err != nil {
		return err
	}
	if err := roundTrip(open); err != nil {
		return fmt.Errorf("a connection opened before the reload: %w", err)
	}
	if open.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(first.Cert.SerialNumber) != 0 {
		return errors.New("the open connection's certificate changed")
	}
	clientCfg, err := e.ClientProperties("client.properties", pki.ClientSSL(nil))
	if err != nil {
		return err
	}
	if _, err := e.KafkaOn(ctx, addr, "", mainTopics, "--command-config", clientCfg, "--list"); err != nil {
		return fmt.Errorf("kafka-topics over TLS after the reload: %w", err)
	}
	// Refused: another subject (ssl.allow.dn.changes is false), a file
	// that does not exist.
	other, err := pki.Issue("other", CertSpec{Subject: "CN=someone-else,O=Gregor", DNSNames: first.Cert.DNSNames, IPs: first.Cert.IPAddresses, Server: true, Client: true})
	if err != nil {
		return err
	}
	for _, bad := range []struct{ file, want string }{
		{other.KeystoreFile, "DistinguishedName"},
		{e.Dir + "/no-such-keystore.pem", "no-such-keystore.pem"},
	} {
		out, err := alterBroker(ctx, e, n, "--add-config", "listener.name.ssl.ssl.keystore.location="+bad.file)
		if err == nil {
			return fmt.Errorf("kafka-configs accepted keystore %s: %s", bad.file, out.Tail())
		}
		if !strings.Contains(out.Stdout+out.Stderr, "InvalidRequestException") || !strings.Contains(out.Stdout+out.Stderr, bad.want) {
			return fmt.Errorf("kafka-configs refused keystore %s without INVALID_REQUEST naming %q: %s", bad.file, bad.want, out.Tail())
		}
	}
	// Still the renewed certificate.
	return awaitCertificate(ctx, addr, cfg, renewed.Cert.SerialNumber)
}

func tlsKeystoreReloadInline(ctx context.Context, e *Env) error {
	n, pki, first, err := tlsNode(ctx, e, []NodeListener{{Name: "SSL", Protocol: "SSL"}}, func(p *PKI, server *KeyPair) map[string]string {
		return map[string]string{
			"listener.name.ssl.ssl.keystore.type":              "PEM",
			"listener.name.ssl.ssl.keystore.key":               server.KeyPEM,
			"listener.name.ssl.ssl.keystore.certificate.chain": server.ChainPEM,
			"listener.name.ssl.ssl.truststore.type":            "PEM",
			"listener.name.ssl.ssl.truststore.certificates":    p.CAPEM,
		}
	})
	if err != nil {
		return err
	}
	addr := n.Addr("SSL")
	cfg, err := tlsClient(pki, nil)
	if err != nil {
		return err
	}
	if err := awaitCertificate(ctx, addr, cfg, first.Cert.SerialNumber); err != nil {
		return err
	}
	renewed, err := pki.Issue("broker-renewed", CertSpec{Subject: "CN=broker,O=Gregor", DNSNames: first.Cert.DNSNames, IPs: first.Cert.IPAddresses, Server: true, Client: true})
	if err != nil {
		return err
	}
	file, err := e.ClientProperties("new-keystore.properties", map[string]string{
		"listener.name.ssl.ssl.keystore.key":               renewed.KeyPEM,
		"listener.name.ssl.ssl.keystore.certificate.chain": renewed.ChainPEM,
	})
	if err != nil {
		return err
	}
	out, err := alterBroker(ctx, e, n, "--add-config-file", file)
	if err != nil {
		return fmt.Errorf("kafka-configs --add-config-file with inline PEM: %w", err)
	}
	if !strings.Contains(out.Stdout, "Completed updating config for broker 1.") {
		return fmt.Errorf("kafka-configs --add-config-file printed no confirmation: %s", out.Tail())
	}
	return awaitCertificate(ctx, addr, cfg, renewed.Cert.SerialNumber)
}
