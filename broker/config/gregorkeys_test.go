package config

import (
	"strings"
	"testing"
)

func TestGregorKeys(t *testing.T) {
	b, warnings, err := Load(EmbeddedDefaults(), map[string]string{HTTPListenerKey: "127.0.0.1:9644"})
	if err != nil || b.HTTPListener() != "127.0.0.1:9644" {
		t.Fatalf("listener %q, %v", b.HTTPListener(), err)
	}
	for _, w := range warnings {
		if strings.Contains(w, HTTPListenerKey) {
			t.Fatalf("warned of a key Gregor uses: %s", w)
		}
	}
	if _, _, err := Load(EmbeddedDefaults(), map[string]string{HTTPListenerKey: "9644"}); err == nil ||
		!strings.Contains(err.Error(), "gregor.http.listener=9644: expected host:port") {
		t.Fatalf("a listener without a host: %v", err)
	}
	if _, _, err := Load(EmbeddedDefaults(), map[string]string{"gregor.http.listner": "127.0.0.1:9644"}); err == nil ||
		!strings.Contains(err.Error(), "gregor.http.listner is not one of Gregor's keys (gregor.http.basic.auth.password, gregor.http.basic.auth.username, gregor.http.listener, gregor.log.format, gregor.metrics.client.telemetry.max.clients, gregor.metrics.per.partition, gregor.remote.storage, gregor.remote.storage.s3.ca.file, gregor.remote.storage.s3.endpoint, gregor.remote.storage.s3.path.style, gregor.remote.storage.s3.region, gregor.http.ssl.*)") {
		t.Fatalf("a misspelt Gregor key: %v", err)
	}
	if !b.MetricsPerPartition() {
		t.Fatal("per-partition series are on by default")
	}
	if b, _, err := Load(EmbeddedDefaults(), map[string]string{MetricsPerPartitionKey: "false"}); err != nil || b.MetricsPerPartition() {
		t.Fatalf("gregor.metrics.per.partition=false: %v", err)
	}
	if _, _, err := Load(EmbeddedDefaults(), map[string]string{MetricsPerPartitionKey: "no"}); err == nil {
		t.Fatal("gregor.metrics.per.partition=no accepted")
	}
	if b.TelemetryMaxClients() != 100 {
		t.Fatalf("gregor.metrics.client.telemetry.max.clients defaults to %d", b.TelemetryMaxClients())
	}
	if b, _, err := Load(EmbeddedDefaults(), map[string]string{TelemetryMaxClientsKey: "7"}); err != nil || b.TelemetryMaxClients() != 7 {
		t.Fatalf("gregor.metrics.client.telemetry.max.clients=7: %v", err)
	}
	if _, _, err := Load(EmbeddedDefaults(), map[string]string{TelemetryMaxClientsKey: "0"}); err == nil {
		t.Fatal("gregor.metrics.client.telemetry.max.clients=0 accepted")
	}
	if b, _, err := Load(EmbeddedDefaults(), map[string]string{LogFormatKey: "JSON"}); err != nil || !b.LogJSON() {
		t.Fatalf("gregor.log.format=JSON: %v", err)
	}
	if _, _, err := Load(EmbeddedDefaults(), map[string]string{LogFormatKey: "xml"}); err == nil {
		t.Fatal("gregor.log.format=xml accepted")
	}
	if b, _, err := Load(EmbeddedDefaults(), map[string]string{HTTPBasicAuthUsernameKey: "ops", HTTPBasicAuthPasswordKey: "s3cret"}); err != nil {
		t.Fatal(err)
	} else if u, p := b.HTTPBasicAuth(); u != "ops" || p != "s3cret" {
		t.Fatalf("basic auth %q %q", u, p)
	}
	if _, _, err := Load(EmbeddedDefaults(), map[string]string{HTTPBasicAuthUsernameKey: "ops"}); err == nil ||
		!strings.Contains(err.Error(), "are set together") {
		t.Fatalf("a user without a password: %v", err)
	}
}
