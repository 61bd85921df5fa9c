package config

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Tiered storage (KIP-405) settings. Kafka loads a RemoteStorageManager
// and a RemoteLogMetadataManager by class name; Gregor runs no Java, so it
// maps Kafka's class names to its own backends and refuses any other
// class with the list of what it has.

const (
	// RemoteStorageSystemEnableKey turns tiered storage on for the broker.
	RemoteStorageSystemEnableKey = "remote.log.storage.system.enable"
	// RemoteStorageKey is Gregor's own way to name the store:
	// dir:<path> or s3://<bucket>[/<prefix>].
	RemoteStorageKey = "gregor.remote.storage"
	// LocalTieredStorageClass is Kafka's directory-backed
	// RemoteStorageManager (rsm.config.dir names the directory): Gregor's
	// directory backend.
	LocalTieredStorageClass = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
	// TopicBasedRLMMClass is Kafka's default RemoteLogMetadataManager.
	TopicBasedRLMMClass = "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager"
)

// RemoteStorage is the store tiered storage keeps segments in.
type RemoteStorage struct {
	// Dir is the directory backend's root ("" for another backend).
	Dir string
	// S3Bucket and S3Prefix name an S3-compatible store; the
	// gregor.remote.storage.s3.* keys say where and how to reach it.
	S3Bucket, S3Prefix string
	S3Endpoint         string
	S3Region           string
	S3PathStyle        bool
	S3CAFile           string

	// Metadata is __remote_log_metadata as the rlmm.config. keys set it.
	Metadata RemoteLogMetadata
}

// RemoteLogMetadata is Kafka's TopicBasedRemoteLogMetadataManagerConfig:
// the remote.log.metadata.* keys under the metadata manager's prefix
// (rlmm.config.), with Kafka's defaults.
type RemoteLogMetadata struct {
	Partitions        int32 // remote.log.metadata.topic.num.partitions (50)
	ReplicationFactor int16 // remote.log.metadata.topic.replication.factor (3)
	RetentionMs       int64 // remote.log.metadata.topic.retention.ms (-1)
	ConsumeWait       time.Duration
	// Listener is the listener the manager's client connects to
	// (remote.log.metadata.manager.listener.name; the inter-broker one
	// when unset).
	Listener string
}

// The S3 backend's keys (credentials come from the AWS variables and
// files, never from the broker config, which DescribeConfigs shows).
const (
	S3EndpointKey  = "gregor.remote.storage.s3.endpoint"
	S3RegionKey    = "gregor.remote.storage.s3.region"
	S3PathStyleKey = "gregor.remote.storage.s3.path.style"
	S3CAFileKey    = "gregor.remote.storage.s3.ca.file"
)

// backendsHelp says what Gregor has, for errors.
const backendsHelp = "Gregor's backends are a directory (" + RemoteStorageKey + "=dir:<path>, or remote.log.storage.manager.class.name=" +
	LocalTieredStorageClass + " with rsm.config.dir=<path>) and S3-compatible object storage (" + RemoteStorageKey + "=s3://<bucket>/<prefix>)"

// RemoteStorage is the broker's tiered storage, nil when
// remote.log.storage.system.enable is false.
func (b *Broker) RemoteStorage() (*RemoteStorage, error) {
	if !b.Bool(RemoteStorageSystemEnableKey) {
		return nil, nil
	}
	if rlmm := b.String("remote.log.metadata.manager.class.name"); rlmm != "" && rlmm != TopicBasedRLMMClass {
		return nil, fmt.Errorf("remote.log.metadata.manager.class.name %s: Gregor runs no Java classes; it keeps remote log metadata itself, as %s does", rlmm, TopicBasedRLMMClass)
	}
	md, err := b.remoteLogMetadata()
	if err != nil {
		return nil, err
	}
	rs, err := b.remoteStore()
	if err != nil {
		return nil, err
	}
	rs.Metadata = md
	return rs, nil
}

// remoteLogMetadata reads the metadata manager's keys.
func (b *Broker) remoteLogMetadata() (RemoteLogMetadata, error) {
	prefix := b.String("remote.log.metadata.manager.impl.prefix")
	md := RemoteLogMetadata{Listener: b.InterBrokerListenerName}
	if l := strings.TrimSpace(b.String("remote.log.metadata.manager.listener.name")); l != "" {
		md.Listener = strings.ToUpper(l)
	}
	if _, ok := b.ListenerSecurityProtocolMap[md.Listener]; !ok {
		return md, fmt.Errorf("remote.log.metadata.manager.listener.name %s is not a listener of listener.security.protocol.map", md.Listener)
	}
	// Each key with Kafka's type (its bit size) and default; ParseInt
	// refuses what the type cannot hold, as Kafka's ConfigDef does.
	num := func(key, typ string, bits int, def, least int64) (int64, error) {
		v := strings.TrimSpace(b.Raw[prefix+key])
		if v == "" {
			return def, nil
		}
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return 0, fmt.Errorf("Invalid value %s for configuration %s%s: Not a number of type %s", v, prefix, key, typ)
		}
		if n < least {
			return 0, fmt.Errorf("Invalid value %d for configuration %s%s: Value must be at least %d", n, prefix, key, least)
		}
		return n, nil
	}
	parts, err := num("remote.log.metadata.topic.num.partitions", "INT", 32, 50, 1)
	if err != nil {
		return md, err
	}
	rf, err := num("remote.log.metadata.topic.replication.factor", "SHORT", 16, 3, 1)
	if err != nil {
		return md, err
	}
	retention, err := num("remote.log.metadata.topic.retention.ms", "LONG", 64, -1, math.MinInt64)
	if err != nil {
		return md, err
	}
	wait, err := num("remote.log.metadata.consume.wait.ms", "LONG", 64, 2*60*1000, 0)
	if err != nil {
		return md, err
	}
	md.Partitions, md.ReplicationFactor, md.RetentionMs = int32(parts), int16(rf), retention
	md.ConsumeWait = time.Duration(wait) * time.Millisecond
	return md, nil
}

// remoteStore reads which store the segments go to.
func (b *Broker) remoteStore() (*RemoteStorage, error) {
	if v := strings.TrimSpace(b.Raw[RemoteStorageKey]); v != "" {
		rs, err := parseRemoteStorage(v)
		if err != nil || rs.S3Bucket == "" {
			return rs, err
		}
		rs.S3Endpoint = strings.TrimSpace(b.Raw[S3EndpointKey])
		rs.S3Region = strings.TrimSpace(b.Raw[S3RegionKey])
		rs.S3PathStyle = strings.EqualFold(strings.TrimSpace(b.Raw[S3PathStyleKey]), "true")
		rs.S3CAFile = strings.TrimSpace(b.Raw[S3CAFileKey])
		return rs, nil
	}
	switch class := b.String("remote.log.storage.manager.class.name"); class {
	case LocalTieredStorageClass:
		prefix := b.String("remote.log.storage.manager.impl.prefix")
		dir := strings.TrimSpace(b.Raw[prefix+"dir"])
		if dir == "" {
			return nil, fmt.Errorf("remote.log.storage.manager.class.name is %s but %sdir is not set: it names the directory segments are kept in", class, prefix)
		}
		// LocalTieredStorage keeps its segments under this directory of
		// its dir: the same layout, so that tools and people find them
		// where Kafka puts them.
		return &RemoteStorage{Dir: filepath.Join(dir, "kafka-tiered-storage")}, nil
	case "":
		return nil, fmt.Errorf("%s is true but no remote storage is configured: %s", RemoteStorageSystemEnableKey, backendsHelp)
	default:
		return nil, fmt.Errorf("remote.log.storage.manager.class.name %s: Gregor runs no Java classes; %s", class, backendsHelp)
	}
}

func parseRemoteStorage(v string) (*RemoteStorage, error) {
	switch {
	case strings.HasPrefix(v, "dir:"):
		dir := strings.TrimPrefix(v, "dir:")
		if dir == "" {
			return nil, fmt.Errorf("%s=%s: the directory is missing", RemoteStorageKey, v)
		}
		return &RemoteStorage{Dir: dir}, nil
	case strings.HasPrefix(v, "s3://"):
		bucket, prefix, _ := strings.Cut(strings.TrimPrefix(v, "s3://"), "/")
		if bucket == "" {
			return nil, fmt.Errorf("%s=%s: the bucket is missing", RemoteStorageKey, v)
		}
		return &RemoteStorage{S3Bucket: bucket, S3Prefix: strings.Trim(prefix, "/")}, nil
	}
	return nil, fmt.Errorf("%s=%s: expected dir:<path> or s3://<bucket>/<prefix>", RemoteStorageKey, v)
}

// isRemotePluginKey reports whether name is under the prefix of the remote
// storage manager's or metadata manager's own keys (rsm.config.,
// rlmm.config. unless set otherwise).
func isRemotePluginKey(raw map[string]string, name string) bool {
	for key, def := range map[string]string{"remote.log.storage.manager.impl.prefix": "rsm.config.", "remote.log.metadata.manager.impl.prefix": "rlmm.config."} {
		prefix := def
		if v := strings.TrimSpace(raw[key]); v != "" {
			prefix = v
		}
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}
