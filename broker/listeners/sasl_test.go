package listeners

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/gregorbroker/gregor/sasl"
)

func saslOverrides(extra ...string) []string {
	return append([]string{
		"listeners=SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"advertised.listeners=SASL_PLAINTEXT://127.0.0.1:0",
		"inter.broker.listener.name=SASL_PLAINTEXT",
		"listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"sasl.mechanism.inter.broker.protocol=PLAIN",
	}, extra...)
}

func TestSASLListenerSettings(t *testing.T) {
	s, err := build(t, saslOverrides(
		"sasl.enabled.mechanisms=GSSAPI",
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
		`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`,
		"connections.max.reauth.ms=60000",
		"listener.name.sasl_plaintext.plain.connections.max.reauth.ms=5000",
	)...)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.Specs[0].SASL
	if cfg == nil || len(cfg.Mechanisms) != 1 || cfg.Mechanisms[0] != sasl.Plain {
		t.Fatalf("SASL config %+v", cfg)
	}
	if cfg.PlainUsers["alice"] != "alice-secret" || cfg.PlainUsers["admin"] != "admin-secret" || len(cfg.PlainUsers) != 2 {
		t.Fatalf("users %v", cfg.PlainUsers)
	}
	if cfg.MaxReauth[sasl.Plain] != 5*time.Second {
		t.Fatalf("max reauth %v", cfg.MaxReauth)
	}
	if s.Specs[1].SASL != nil {
		t.Fatal("the PLAINTEXT controller listener got a SASL config")
	}
	// The inter-broker listener is SASL: this node's own connections to
	// it authenticate; the controller listener is PLAINTEXT.
	if s.InterBrokerDial == nil || s.ControllerDial != nil {
		t.Fatalf("dialers: inter-broker %v, controller %v", s.InterBrokerDial != nil, s.ControllerDial != nil)
	}
}

// A broker-only node authenticates to the controllers with
// sasl.mechanism.controller.protocol and the controller listener's JAAS
// entry, though it does not serve that listener.
func TestSASLControllerClientSettings(t *testing.T) {
	s, err := build(t, []string{
		"process.roles=broker", "node.id=4", "controller.quorum.bootstrap.servers=127.0.0.1:19093",
		"listeners=PLAINTEXT://127.0.0.1:0", "controller.listener.names=CONTROLLER",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
		"sasl.mechanism.controller.protocol=SCRAM-SHA-512",
		`listener.name.controller.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`,
	}...)
	if err != nil {
		t.Fatal(err)
	}
	if s.ControllerDial == nil || s.InterBrokerDial != nil {
		t.Fatalf("dialers: controller %v, inter-broker %v", s.ControllerDial != nil, s.InterBrokerDial != nil)
	}
	_, err = build(t, []string{
		"process.roles=broker", "node.id=4", "controller.quorum.bootstrap.servers=127.0.0.1:19093",
		"listeners=PLAINTEXT://127.0.0.1:0", "controller.listener.names=CONTROLLER",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
	}...)
	if err == nil || !strings.Contains(err.Error(), "sasl.mechanism.controller.protocol=GSSAPI") {
		t.Fatalf("the default GSSAPI controller mechanism: %v", err)
	}
}

func TestSASLListenerSettingsRefused(t *testing.T) {
	plainJAAS := `listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";`
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{nil, "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms"},
		{[]string{"sasl.mechanism.inter.broker.protocol=GSSAPI"}, "SASL mechanism GSSAPI in sasl.enabled.mechanisms is not supported by Gregor"},
		{[]string{"sasl.enabled.mechanisms=PLAIN"}, "Could not find a 'KafkaServer' or 'sasl_plaintext.KafkaServer' entry in the JAAS configuration for SASL mechanism PLAIN"},
		{[]string{"sasl.enabled.mechanisms=PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config=x required a=\"b\";"}, "login module x: Gregor runs no Java classes"},
		{[]string{"sasl.enabled.mechanisms=PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config=x required a=1;"}, "Value not specified for key 'a' in JAAS config"},
		{[]string{"sasl.enabled.mechanisms=PLAIN", plainJAAS, "listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class=com.example.Handler"}, "Gregor runs no Java classes"},
		{[]string{"sasl.enabled.mechanisms=PLAIN", plainJAAS, "listener.name.sasl_plaintext.connections.max.reauth.ms=soon"}, "listener.name.sasl_plaintext.connections.max.reauth.ms"},
	} {
		_, err := build(t, saslOverrides(tc.extra...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.extra, err, tc.want)
		}
	}
}

func TestOAuthListenerSettings(t *testing.T) {
	oauthJAAS := `listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorRequiredScope="kafka";`
	base := []string{"sasl.enabled.mechanisms=OAUTHBEARER", "sasl.mechanism.inter.broker.protocol=OAUTHBEARER", oauthJAAS}
	s, err := build(t, saslOverrides(base...)...)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Specs[0].SASL.OAuth.(*sasl.UnsecuredValidator); !ok || len(v.RequiredScope) != 1 {
		t.Fatalf("default validator %#v", s.Specs[0].SASL.OAuth)
	}
	jwks := t.TempDir() + "/jwks.json"
	os.WriteFile(jwks, []byte(`{"keys":[]}`), 0o644)
	secured := append(base,
		"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
		"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url=file://"+jwks,
		"sasl.oauthbearer.expected.audience=kafka,other",
		"listener.name.sasl_plaintext.sasl.oauthbearer.expected.issuer=https://issuer")
	_, err = build(t, saslOverrides(secured...)...)
	if err == nil || !strings.Contains(err.Error(), "file://"+jwks+" is not allowed. Update system property 'org.apache.kafka.sasl.oauthbearer.allowed.urls' to allow file://"+jwks) {
		t.Fatalf("a JWKS URL outside the allow-list: %v", err)
	}
	t.Setenv("KAFKA_OPTS", "-Xmx1g -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=https://x,file://"+jwks)
	s, err = build(t, saslOverrides(secured...)...)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.JWKSValidators) != 1 {
		t.Fatalf("%d JWKS validators to start", len(s.JWKSValidators))
	}
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=com.example.Validator"}, "Gregor runs no Java classes; for OAUTHBEARER"},
		{[]string{"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"}, "sasl.oauthbearer.jwks.endpoint.url value must be non-null"},
		{[]string{`listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorAllowableClockSkewMs="-5";`}, "Allowable clock skew millis must not be negative"},
	} {
		_, err := build(t, saslOverrides(append(base, tc.extra...)...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.extra, err, tc.want)
		}
	}
}

// A SASL_SSL listener gets both its TLS server side and its SASL set-up;
// a SASL_SSL inter-broker listener is dialled with TLS, then SASL.
func TestSASLSSLListenerSettings(t *testing.T) {
	_, server, err := integration.NewPKIWithServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := build(t, []string{
		"listeners=PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"advertised.listeners=PLAINTEXT://127.0.0.1:1,SECURE://127.0.0.1:2",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name=SECURE",
		"controller.quorum.bootstrap.servers=127.0.0.1:3",
		"log.dirs=" + t.TempDir(),
		"ssl.keystore.type=PEM", "ssl.keystore.location=" + server.KeystoreFile,
		"ssl.truststore.type=PEM", "ssl.truststore.location=" + server.ChainFile,
		"sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=PLAIN",
		`listener.name.secure.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="b" password="p" user_b="p";`,
	}...)
	if err != nil {
		t.Fatal(err)
	}
	spec := s.Specs[1]
	if spec.Name != "SECURE" || spec.TLS == nil || spec.SASL == nil || spec.SASL.PlainUsers["b"] != "p" {
		t.Fatalf("the SASL_SSL listener: %+v", spec)
	}
	if s.interBrokerTLS == nil || s.InterBrokerDial == nil {
		t.Fatal("the SASL_SSL inter-broker listener has no TLS client or dialer")
	}
}
