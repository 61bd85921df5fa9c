package main

import (
	"io"
	"testing"
)

// The delegation token secret reaches the broker as well as the controller
// (broker/config's DelegationTokenConfig).
func TestDelegationTokenSecretReachesTheBroker(t *testing.T) {
	s, err := loadSettings("", []string{"delegation.token.secret.key=secret"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.brokerOpts.DelegationTokenSecret != "secret" || s.cfg.DelegationTokenConfig().SecretKey != "secret" {
		t.Fatalf("broker secret %q, controller %+v", s.brokerOpts.DelegationTokenSecret, s.cfg.DelegationTokenConfig())
	}
}
