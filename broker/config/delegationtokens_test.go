package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The secret, the lifetimes and the sweep interval reach the controller's
// set-up; the pre-4.0 alias is read with a warning; no secret leaves
// tokens off.
func TestDelegationTokenConfig(t *testing.T) {
	b, warnings, err := Load(EmbeddedDefaults(), map[string]string{
		"delegation.token.master.key":               "old-secret",
		"delegation.token.max.lifetime.ms":          "3600000",
		"delegation.token.expiry.time.ms":           "60000",
		"delegation.token.expiry.check.interval.ms": "1000",
	})
	if err != nil {
		t.Fatal(err)
	}
	got := b.DelegationTokenConfig()
	if got.SecretKey != "old-secret" || got.MaxLifetime != time.Hour || got.ExpiryTime != time.Minute || got.ExpiryCheckInterval != time.Second {
		t.Fatalf("%+v", got)
	}
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, "delegation.token.master.key is deprecated") }) {
		t.Fatalf("no deprecation warning: %q", warnings)
	}
	b, _, err = Load(EmbeddedDefaults(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.DelegationTokenConfig(); got.SecretKey != "" || got.MaxLifetime != 7*24*time.Hour || got.ExpiryTime != 24*time.Hour || got.ExpiryCheckInterval != time.Hour {
		t.Fatalf("defaults: %+v", got)
	}
}
