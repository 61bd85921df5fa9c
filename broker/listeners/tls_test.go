package listeners

import (
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/integration"
)

// Start-up with SSL listeners: the listener's own keys win, a keystore
// that does not load stops start-up with a message naming the listener,
// and what Gregor cannot honour is refused.
func TestTLSSettings(t *testing.T) {
	pki, server, err := integration.NewPKIWithServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	base := []string{
		"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"advertised.listeners=PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2",
		"controller.quorum.bootstrap.servers=127.0.0.1:3",
		"log.dirs=" + t.TempDir(),
		// The unprefixed keystore does not exist: the listener's own wins.
		"ssl.keystore.type=PEM", "ssl.keystore.location=/nonexistent.pem",
		"listener.name.ssl.ssl.keystore.type=PEM", "listener.name.ssl.ssl.keystore.location=" + server.KeystoreFile,
	}
	s, err := build(t, base...)
	if err != nil {
		t.Fatalf("an SSL listener with its own keystore: %v", err)
	}
	if srv := s.servers["SSL"]; srv == nil || !srv.Leaf().Equal(server.Cert) {
		t.Fatalf("the SSL listener's server side: %+v", s.servers)
	}
	if s.InterBrokerDial != nil || s.ControllerDial != nil {
		t.Error("PLAINTEXT inter-broker and controller listeners got TLS dialers")
	}
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{[]string{"listener.name.ssl.ssl.keystore.location=/nonexistent.pem"}, "listener SSL: Failed to load PEM SSL keystore /nonexistent.pem"},
		// SASL_SSL is served now; its default mechanism (GSSAPI) is
		// what is refused.
		{[]string{"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SASL_SSL,CONTROLLER:PLAINTEXT"}, "listener SSL: SASL mechanism GSSAPI in sasl.enabled.mechanisms is not supported by Gregor"},
		{[]string{"principal.builder.class=com.example.Builder"}, "principal.builder.class com.example.Builder: Gregor runs no Java classes"},
		{[]string{"listener.name.ssl.ssl.cipher.suites=TLS_NOPE"}, "listener.name.ssl.ssl.cipher.suites: Unsupported CipherSuite: TLS_NOPE"},
		{[]string{"inter.broker.listener.name=SSL", "listener.name.ssl.ssl.endpoint.identification.algorithm=bogus"}, "ssl.endpoint.identification.algorithm bogus"},
	} {
		_, err := build(t, append(append([]string(nil), base...), c.extra...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.extra, err, c.want)
		}
	}
	// An SSL inter-broker listener gets a TLS dialer with its settings.
	s, err = build(t, append(append([]string(nil), base...), "inter.broker.listener.name=SSL",
		"listener.name.ssl.ssl.truststore.type=PEM", "listener.name.ssl.ssl.truststore.location="+pki.CAFile)...)
	if err != nil {
		t.Fatal(err)
	}
	if s.InterBrokerDial == nil || s.interBrokerTLS == nil || s.ControllerDial != nil {
		t.Error("an SSL inter-broker listener got no TLS dialer")
	}
}
