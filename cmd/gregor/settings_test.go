package main

import (
	"io"
	"slices"
	"testing"
	"time"
)

// The authorizer's options (broker/authz's OptionsFromConfig) reach the
// broker.
func TestAuthorizerSettings(t *testing.T) {
	s, err := loadSettings("", []string{"log.dirs=" + t.TempDir(),
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer", "super.users=User:admin"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if a := s.brokerOpts.Authorizer; a == nil || !slices.Equal(a.SuperUsers, []string{"User:admin"}) {
		t.Fatalf("StandardAuthorizer options %+v", a)
	}
}

// The SASL keys of the network server (not of a listener) reach its
// options, and the inter-broker dialer of a SASL inter-broker listener
// (broker/listeners) reaches the broker's.
func TestSASLServerSettings(t *testing.T) {
	s, err := loadSettings("", []string{
		"listeners=SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"advertised.listeners=SASL_PLAINTEXT://127.0.0.1:0",
		"inter.broker.listener.name=SASL_PLAINTEXT",
		"listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"sasl.mechanism.inter.broker.protocol=PLAIN", "sasl.enabled.mechanisms=PLAIN",
		`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";`,
		"sasl.server.max.receive.size=1000",
		"connection.failed.authentication.delay.ms=250",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := s.brokerOpts.Server
	if o.SASLMaxReceiveSize != 1000 || o.FailedAuthenticationDelay != 250*time.Millisecond {
		t.Fatalf("server options %+v", o)
	}
	if len(o.Listeners) != 2 || o.Listeners[0].SASL == nil || s.brokerOpts.InterBrokerDial == nil {
		t.Fatalf("listeners %+v, inter-broker dialer %v", o.Listeners, s.brokerOpts.InterBrokerDial != nil)
	}
}
