package config

import (
	"strings"
	"testing"
	"time"
)

// The metadata manager's keys under rlmm.config. have Kafka's defaults
// (50 partitions, 3 replicas, retention -1, a 2-minute wait) and Kafka's
// messages for values their types cannot hold.
func TestRemoteLogMetadataKeys(t *testing.T) {
	base := map[string]string{"remote.log.storage.system.enable": "true", RemoteStorageKey: "dir:/tmp/remote"}
	load := func(extra map[string]string) (*RemoteStorage, error) {
		overrides := map[string]string{}
		for k, v := range base {
			overrides[k] = v
		}
		for k, v := range extra {
			overrides[k] = v
		}
		b, _, err := Load(EmbeddedDefaults(), overrides)
		if err != nil {
			t.Fatal(err)
		}
		return b.RemoteStorage()
	}
	rs, err := load(map[string]string{"rlmm.config.remote.log.metadata.topic.replication.factor": "3"})
	if err != nil {
		t.Fatal(err)
	}
	if md := rs.Metadata; md.Partitions != 50 || md.ReplicationFactor != 3 || md.RetentionMs != -1 || md.ConsumeWait != 2*time.Minute || md.Listener != "PLAINTEXT" {
		t.Fatalf("defaults %+v", md)
	}
	for key, want := range map[string]string{
		"rlmm.config.remote.log.metadata.topic.num.partitions":     "Value must be at least 1",
		"rlmm.config.remote.log.metadata.topic.replication.factor": "Value must be at least 1",
		"rlmm.config.remote.log.metadata.consume.wait.ms":          "Not a number of type LONG",
	} {
		v := "0"
		if strings.Contains(want, "LONG") {
			v = "soon"
		}
		if _, err := load(map[string]string{key: v}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=%s: %v, want %q", key, v, err, want)
		}
	}
	if _, err := load(map[string]string{"rlmm.config.remote.log.metadata.topic.replication.factor": "40000"}); err == nil || !strings.Contains(err.Error(), "Not a number of type SHORT") {
		t.Errorf("a replication factor past a short: %v", err)
	}
}
