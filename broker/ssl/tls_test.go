package ssl

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// handshake runs one connection between srv and cli over loopback, the
// client dialling host; it returns the server's view and the client's
// error.
func handshake(t *testing.T, srv *Server, cli *Client, host string) (tls.ConnectionState, error, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		state tls.ConnectionState
		err   error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer nc.Close()
		tc := tls.Server(nc, srv.Config())
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		err = tc.Handshake()
		if err == nil {
			// TLS 1.3 clients learn of a refused certificate on their
			// first read.
			tc.Write([]byte{1})
		}
		done <- result{tc.ConnectionState(), err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := &Dialer{TLS: cli}
	nc, cerr := d.Dial(ctx, net.JoinHostPort(host, portOf(ln)))
	if cerr == nil {
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		_, cerr = nc.Read(make([]byte, 1))
		nc.Close()
	}
	r := <-done
	return r.state, r.err, cerr
}

func portOf(ln net.Listener) string {
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p
}

type fixture struct {
	ca                 *testCA
	server, alice, bob *testPair
	dir                string
}

func newFixture(t *testing.T) *fixture {
	ca := newTestCA(t, "ca")
	return &fixture{
		ca:     ca,
		server: ca.server(t, "broker"),
		alice:  ca.issue(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Org"}}, false, nil),
		bob:    ca.issue(t, pkix.Name{CommonName: "bob"}, true, nil),
		dir:    t.TempDir(),
	}
}

func (f *fixture) serverProps(extra map[string]string) map[string]string {
	props := map[string]string{
		"ssl.keystore.type": "PEM", "ssl.keystore.key": f.server.keyPEM, "ssl.keystore.certificate.chain": f.server.chainPEM,
		"ssl.truststore.type": "PEM", "ssl.truststore.certificates": f.ca.pem,
	}
	for k, v := range extra {
		props[k] = v
	}
	return props
}

func (f *fixture) client(t *testing.T, p *testPair, extra map[string]string) *Client {
	t.Helper()
	props := map[string]string{"ssl.truststore.type": "PEM", "ssl.truststore.certificates": f.ca.pem}
	if p != nil {
		props["ssl.keystore.type"] = "PEM"
		props["ssl.keystore.key"] = p.keyPEM
		props["ssl.keystore.certificate.chain"] = p.chainPEM
	}
	for k, v := range extra {
		props[k] = v
	}
	c, _, err := NewClient(FromMap("", props))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *fixture) newServer(t *testing.T, extra map[string]string) *Server {
	t.Helper()
	srv, _, err := NewServer(settings(f.serverProps(extra)), false)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func TestClientAuthAndPrincipals(t *testing.T) {
	f := newFixture(t)
	rules := map[string]string{"ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U, DEFAULT"}
	for _, c := range []struct {
		auth   string
		client *testPair
		want   string // the principal name, or "" when the handshake must fail
	}{
		{"required", f.alice, "ALICE"},
		{"required", f.bob, "CN=bob"},
		{"required", nil, ""},
		{"requested", nil, AnonymousName},
		{"requested", f.alice, "ALICE"},
		{"none", f.alice, AnonymousName},
		{"bogus", f.alice, AnonymousName}, // Kafka warns and falls back to none
	} {
		props := map[string]string{"ssl.client.auth": c.auth}
		for k, v := range rules {
			props[k] = v
		}
		srv := f.newServer(t, props)
		state, serr, cerr := handshake(t, srv, f.client(t, c.client, nil), "127.0.0.1")
		if c.want == "" {
			if serr == nil || cerr == nil {
				t.Errorf("auth %s without a certificate: server %v, client %v; want both to fail", c.auth, serr, cerr)
			}
			continue
		}
		if serr != nil || cerr != nil {
			t.Errorf("auth %s: server %v, client %v", c.auth, serr, cerr)
			continue
		}
		name, err := srv.Principal(state)
		if err != nil || name != c.want {
			t.Errorf("auth %s, client %v: principal %q, %v; want %q", c.auth, c.client != nil, name, err, c.want)
		}
	}
	// A certificate from another CA is refused when required.
	stranger := newTestCA(t, "other").issue(t, pkix.Name{CommonName: "mallory"}, false, nil)
	srv := f.newServer(t, map[string]string{"ssl.client.auth": "required"})
	if _, serr, _ := handshake(t, srv, f.client(t, stranger, nil), "127.0.0.1"); serr == nil {
		t.Error("a certificate of an untrusted CA was accepted")
	}
	// No rule applies: the principal cannot be built.
	srv = f.newServer(t, map[string]string{"ssl.client.auth": "required", "ssl.principal.mapping.rules": "RULE:^CN=nobody$/x/"})
	state, serr, cerr := handshake(t, srv, f.client(t, f.alice, nil), "127.0.0.1")
	if serr != nil || cerr != nil {
		t.Fatal(serr, cerr)
	}
	if _, err := srv.Principal(state); !errors.Is(err, ErrNoMatchingRule) {
		t.Errorf("no rule applies: %v", err)
	}
}

func TestEndpointIdentification(t *testing.T) {
	f := newFixture(t)
	srv := f.newServer(t, nil)
	for _, c := range []struct {
		host, alg string
		ok        bool
	}{
		{"127.0.0.1", "https", true},
		{"localhost", "https", true},
		{"127.0.0.2", "https", false}, // not among the certificate's names
		{"127.0.0.2", "", true},       // names not checked, chain still is
	} {
		if c.host == "127.0.0.2" {
			if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
				t.Skip("no 127.0.0.2 on this machine")
			} else {
				ln.Close()
			}
		}
		cerr := handshakeOn(t, srv, f.client(t, nil, map[string]string{"ssl.endpoint.identification.algorithm": c.alg}), c.host)
		if (cerr == nil) != c.ok {
			t.Errorf("host %s, algorithm %q: client error %v", c.host, c.alg, cerr)
		}
	}
	// The chain is verified even without host names.
	stranger := newTestCA(t, "other")
	cli, _, err := NewClient(FromMap("", map[string]string{"ssl.truststore.type": "PEM", "ssl.truststore.certificates": stranger.pem, "ssl.endpoint.identification.algorithm": ""}))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, cerr := handshake(t, srv, cli, "127.0.0.1"); cerr == nil {
		t.Error("a server certificate of an untrusted CA was accepted")
	}
}

// handshakeOn is a handshake with the server listening on host,
// returning the client's error.
func handshakeOn(t *testing.T, srv *Server, cli *Client, host string) error {
	_, err := dialServed(cli, serveOne(t, srv, host))
	return err
}

// serveOne accepts one connection on host, runs srv's handshake on it and
// writes a byte (a TLS 1.3 client learns of a refused certificate when it
// reads); it returns the address.
func serveOne(t *testing.T, srv *Server, host string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			tc := tls.Server(nc, srv.Config())
			if tc.Handshake() == nil {
				tc.Write([]byte{1})
			}
			tc.Close()
		}
	}()
	return ln.Addr().String()
}

// dialServed dials addr with cli and returns the client's view.
func dialServed(cli *Client, addr string) (tls.ConnectionState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := (&Dialer{TLS: cli}).Dial(ctx, addr)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer nc.Close()
	return nc.(*tls.Conn).ConnectionState(), nil
}

func TestVersionsAndCipherSuites(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		server, client map[string]string
		version        uint16
		suite          uint16
	}{
		{nil, nil, tls.VersionTLS13, 0},
		{map[string]string{"ssl.enabled.protocols": "TLSv1.2"}, nil, tls.VersionTLS12, 0},
		{nil, map[string]string{"ssl.protocol": "TLSv1.2"}, tls.VersionTLS12, 0},
		{map[string]string{"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}, nil, tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384},
		{map[string]string{"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}, nil, tls.VersionTLS13, 0},
		{map[string]string{"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, map[string]string{"ssl.enabled.protocols": "TLSv1.2,TLSv1.3"}, tls.VersionTLS13, 0},
	} {
		srv := f.newServer(t, c.server)
		state, serr, cerr := handshake(t, srv, f.client(t, nil, c.client), "127.0.0.1")
		if serr != nil || cerr != nil {
			t.Errorf("%v / %v: server %v, client %v", c.server, c.client, serr, cerr)
			continue
		}
		if state.Version != c.version || c.suite != 0 && state.CipherSuite != c.suite {
			t.Errorf("%v / %v: version %x suite %x, want %x %x", c.server, c.client, state.Version, state.CipherSuite, c.version, c.suite)
		}
	}
	// A server with only TLS 1.3 suites refuses a TLS 1.2 client.
	srv := f.newServer(t, map[string]string{"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"})
	if _, _, cerr := handshake(t, srv, f.client(t, nil, map[string]string{"ssl.enabled.protocols": "TLSv1.2"}), "127.0.0.1"); cerr == nil {
		t.Error("TLS 1.2 negotiated with a server that has only TLS 1.3 suites")
	}
	for bad, want := range map[*map[string]string]string{
		{"ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,NOT_A_SUITE"}: "listener.name.l.ssl.cipher.suites: Unsupported CipherSuite: NOT_A_SUITE",
		{"ssl.cipher.suites": "ECDHE-RSA-AES128-GCM-SHA256"}:                       "Unsupported CipherSuite",
		{"ssl.cipher.suites": "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256"}:               "lists no cipher suite Gregor implements",
		{"ssl.enabled.protocols": "TLSv1.2,SSLv3"}:                                 "not SSLv3",
		{"ssl.protocol": "DTLS"}:                                                   "Invalid value DTLS for configuration listener.name.l.ssl.protocol",
		{"ssl.enabled.protocols": "TLSv1.3", "ssl.protocol": "TLSv1.2"}:            "leaves none of",
		{"ssl.engine.factory.class": "com.example.Factory"}:                        "Gregor runs no Java classes",
		{"principal.builder.class": "com.example.Builder"}:                         "Gregor runs no Java classes",
		{"ssl.principal.mapping.rules": "RULE:broken"}:                             "Invalid rule",
	} {
		props := map[string]string{}
		for k, v := range *bad {
			props["listener.name.l."+k] = v
		}
		_, _, err := NewServer(FromMap("L", f.serverProps(props)), false)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want %q", *bad, err, want)
		}
	}
	// Suites Java has and Go lacks are left out with a warning.
	_, warnings, err := NewServer(settings(f.serverProps(map[string]string{"ssl.cipher.suites": "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ssl.provider": "SunJSSE"})), false)
	if err != nil || len(warnings) != 2 {
		t.Errorf("warnings %v, %v", warnings, err)
	}
}

func TestServerWithoutKeystoreRefused(t *testing.T) {
	if _, _, err := NewServer(settings(nil), false); err == nil || !strings.Contains(err.Error(), "needs a keystore") {
		t.Errorf("%v", err)
	}
}

func TestReconfigure(t *testing.T) {
	f := newFixture(t)
	file := writeFile(t, f.dir, "ks.pem", f.server.keyPEM+f.server.chainPEM)
	base := map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": file, "ssl.truststore.type": "PEM", "ssl.truststore.certificates": f.ca.pem}
	srv, _, err := NewServer(settings(base), true)
	if err != nil {
		t.Fatal(err)
	}
	with := func(kv ...string) Settings {
		s := srv.Settings()
		for i := 0; i < len(kv); i += 2 {
			v := kv[i+1]
			s = s.With(kv[i], &v)
		}
		return s
	}
	if changed, err := srv.Reconfigure(srv.Settings()); changed || err != nil {
		t.Errorf("the same settings: changed %v, %v", changed, err)
	}
	// A renewed certificate: same subject and names.
	renewed := f.ca.server(t, "broker")
	renewedFile := writeFile(t, f.dir, "renewed.pem", renewed.keyPEM+renewed.chainPEM)
	if err := srv.Validate(with("ssl.keystore.location", renewedFile)); err != nil {
		t.Fatalf("a renewed certificate: %v", err)
	}
	if !srv.Leaf().Equal(f.server.cert) {
		t.Fatal("Validate changed the certificate")
	}
	if changed, err := srv.Reconfigure(with("ssl.keystore.location", renewedFile)); !changed || err != nil {
		t.Fatalf("reconfigure: %v %v", changed, err)
	}
	cli := f.client(t, nil, nil)
	cs, err := dialServed(cli, serveOne(t, srv, "127.0.0.1"))
	if err != nil || !cs.PeerCertificates[0].Equal(renewed.cert) {
		t.Errorf("a new connection does not see the renewed certificate: %v", err)
	}
	// Another subject, fewer names: refused unless allowed.
	other := f.ca.issue(t, pkix.Name{CommonName: "someone-else"}, false, []string{"localhost"}, net.ParseIP("127.0.0.1"))
	otherFile := writeFile(t, f.dir, "other.pem", other.keyPEM+other.chainPEM)
	if err := srv.Validate(with("ssl.keystore.location", otherFile)); err == nil || !strings.Contains(err.Error(), "Keystore DistinguishedName does not match") {
		t.Errorf("another subject: %v", err)
	}
	if err := srv.Validate(with("ssl.keystore.location", otherFile, "ssl.allow.dn.changes", "true")); err != nil {
		t.Errorf("another subject, allowed: %v", err)
	}
	fewer := f.ca.issue(t, pkix.Name{CommonName: "broker"}, false, []string{"localhost"})
	fewerFile := writeFile(t, f.dir, "fewer.pem", fewer.keyPEM+fewer.chainPEM)
	if err := srv.Validate(with("ssl.keystore.location", fewerFile)); err == nil || !strings.Contains(err.Error(), "Keystore SubjectAltNames do not match") {
		t.Errorf("fewer names: %v", err)
	}
	if err := srv.Validate(with("ssl.keystore.location", fewerFile, "ssl.allow.san.changes", "true")); err != nil {
		t.Errorf("fewer names, allowed: %v", err)
	}
	// A keystore that does not load, and one this node's truststore
	// does not accept (it dials this listener too).
	if err := srv.Validate(with("ssl.keystore.location", f.dir+"/missing.pem")); err == nil {
		t.Error("a missing keystore file validated")
	}
	foreign := newTestCA(t, "foreign").server(t, "broker")
	foreignFile := writeFile(t, f.dir, "foreign.pem", foreign.keyPEM+foreign.chainPEM)
	if err := srv.Validate(with("ssl.keystore.location", foreignFile)); err == nil || !strings.Contains(err.Error(), "truststore does not accept") {
		t.Errorf("a certificate the truststore refuses: %v", err)
	}
	// The same file rewritten in place is reloaded.
	again := f.ca.server(t, "broker")
	if err := os.WriteFile(renewedFile, []byte(again.keyPEM+again.chainPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * time.Second)
	os.Chtimes(renewedFile, later, later)
	if changed, err := srv.Reconfigure(srv.Settings()); !changed || err != nil {
		t.Errorf("a keystore rewritten in place: changed %v, %v", changed, err)
	}
	if !srv.Leaf().Equal(again.cert) {
		t.Error("the rewritten keystore is not in effect")
	}
}

// A client's reconfiguration (the inter-broker listener's keystore
// updated dynamically) applies to the connections it dials next.
func TestClientReconfigure(t *testing.T) {
	f := newFixture(t)
	srv := f.newServer(t, map[string]string{"ssl.client.auth": "required"})
	props := func(p *testPair) map[string]string {
		return map[string]string{"ssl.truststore.type": "PEM", "ssl.truststore.certificates": f.ca.pem,
			"ssl.keystore.type": "PEM", "ssl.keystore.key": p.keyPEM, "ssl.keystore.certificate.chain": p.chainPEM}
	}
	cli, _, err := NewClient(FromMap("", props(f.alice)))
	if err != nil {
		t.Fatal(err)
	}
	principal := func() string {
		t.Helper()
		state, serr, cerr := handshake(t, srv, cli, "127.0.0.1")
		if serr != nil || cerr != nil {
			t.Fatal(serr, cerr)
		}
		name, err := srv.Principal(state)
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	if p := principal(); !strings.HasPrefix(p, "CN=alice") {
		t.Fatalf("before: %s", p)
	}
	if err := cli.Reconfigure(FromMap("", props(f.bob))); err != nil {
		t.Fatal(err)
	}
	if p := principal(); p != "CN=bob" {
		t.Errorf("after reconfiguring the client: %s, want CN=bob", p)
	}
	bad := props(f.bob)
	bad["ssl.keystore.key"] = "junk"
	if err := cli.Reconfigure(FromMap("", bad)); err == nil {
		t.Error("a keystore that does not load was taken")
	}
	if p := principal(); p != "CN=bob" {
		t.Errorf("after a refused reconfiguration: %s, want CN=bob", p)
	}
}
