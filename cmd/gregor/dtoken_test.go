package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestDelegationTokenSettings: the secret reaches the broker and the
// controller, with the lifetimes and sweep interval; the pre-4.0 alias is
// read with a warning; no secret leaves tokens off.
func TestDelegationTokenSettings(t *testing.T) {
	var log bytes.Buffer
	s, err := loadSettings("", []string{
		"delegation.token.master.key=old-secret",
		"delegation.token.max.lifetime.ms=3600000",
		"delegation.token.expiry.time.ms=60000",
		"delegation.token.expiry.check.interval.ms=1000",
	}, &log)
	if err != nil {
		t.Fatal(err)
	}
	got := s.delegationTokens()
	if s.brokerOpts.DelegationTokenSecret != "old-secret" || got.SecretKey != "old-secret" ||
		got.MaxLifetime != time.Hour || got.ExpiryTime != time.Minute || got.ExpiryCheckInterval != time.Second {
		t.Fatalf("broker secret %q, controller %+v", s.brokerOpts.DelegationTokenSecret, got)
	}
	if !strings.Contains(log.String(), "delegation.token.master.key is deprecated") {
		t.Fatalf("no deprecation warning: %s", log.String())
	}
	s, err = loadSettings("", nil, &log)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.delegationTokens(); s.brokerOpts.DelegationTokenSecret != "" || got.SecretKey != "" ||
		got.MaxLifetime != 7*24*time.Hour || got.ExpiryTime != 24*time.Hour || got.ExpiryCheckInterval != time.Hour {
		t.Fatalf("defaults: broker secret %q, controller %+v", s.brokerOpts.DelegationTokenSecret, got)
	}
}
