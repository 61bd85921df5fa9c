package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/broker"
	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/broker/config"
	"github.com/gregorbroker/gregor/broker/listeners"
	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/broker/quota"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/storage"
)

// settings is everything the wiring needs, derived from the broker config.
// rackAwareReplicaSelector is Kafka's one replica selector (KIP-392).
const rackAwareReplicaSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

type settings struct {
	cfg *config.Broker
	// rackAwareReads: replica.selector.class is Kafka's
	// RackAwareReplicaSelector.
	rackAwareReads         bool
	nodeID                 int32
	isController           bool
	isBroker               bool
	controllerListenerName string
	logDirs                []string
	metadataDir            string
	voters                 []metadata.Voter
	brokerOpts             broker.Options
	configs                *config.Provider
	schema                 metadata.ConfigSchema
	supportedFeatures      map[string][2]int16
	bootstrapFeatures      map[string]int16
	flushSchedulerInterval time.Duration
	checkpointInterval     time.Duration
	retentionCheckInterval time.Duration          // log.retention.check.interval.ms
	cleaner                storage.CleanerOptions // log.cleaner.*
	producerIDExpiration   int64                  // producer.id.expiration.ms
	producerIDExpiryCheck  time.Duration          // producer.id.expiration.check.interval.ms
	logger                 *slog.Logger
	// listeners are the listeners' TLS and SASL set-ups and the dialers
	// of this node's connections to other nodes' controller and
	// inter-broker listeners.
	listeners *listeners.Set
	// forcedClusterID is the --cluster-id of gregor storage format.
	forcedClusterID string
	// authorizer is the StandardAuthorizer's configuration, nil without
	// authorizer.class.name.
	authorizer *authz.Options
	// bootstrapScram are the --add-scram credentials of gregor storage
	// format.
	bootstrapScram []*metadata.UserScramCredentialRecord
}

// supportedFeatures are the feature ranges this build implements. A
// feature's maximum rises only when its semantics are implemented: clients
// switch behaviour on finalized levels (transaction.version 2 turns on
// KIP-890, group.version 1 the KIP-848 protocol).
func supportedFeatures() map[string][2]int16 {
	return map[string][2]int16{
		"metadata.version":                 {7, metadata.LatestMetadataVersion},
		"kraft.version":                    {0, metadata.LatestKRaftVersion},
		"transaction.version":              {0, 2},
		"group.version":                    {0, 1},
		"eligible.leader.replicas.version": {0, 1},
		"share.version":                    {0, 0},
		"streams.version":                  {0, 0},
	}
}

// defaultBootstrapFeatures are the feature levels a fresh node finalizes
// besides metadata.version and kraft.version, as Kafka 4.3's format does:
// group.version 1 turns on the KIP-848 consumer protocol, transaction.version
// 2 Transactions V2 (KIP-890 part 2), eligible.leader.replicas.version 1
// eligible leader replicas (KIP-966).
func defaultBootstrapFeatures() map[string]int16 {
	return map[string]int16{"group.version": 1, "transaction.version": 2, metadata.EligibleLeaderReplicasFeature: 1}
}

// securityProtocolCodes are Kafka's SecurityProtocol ids.
var securityProtocolCodes = map[string]int16{"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

// loadSettings reads the properties file (or the embedded defaults when
// there is none), applies the overrides and validates the result.
func loadSettings(file string, overrides []string, stderr io.Writer) (*settings, error) {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	props := config.EmbeddedDefaults()
	if file != "" {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		if props, err = config.ParseProperties(string(raw)); err != nil {
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
	}
	ovr := map[string]string{}
	for _, o := range overrides {
		k, v, _ := strings.Cut(o, "=")
		ovr[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	cfg, warnings, err := config.Load(props, ovr)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		logger.Warn(w)
	}

	s := &settings{
		cfg:                    cfg,
		nodeID:                 cfg.NodeID,
		isController:           cfg.IsController,
		isBroker:               cfg.IsBroker,
		logDirs:                cfg.LogDirs,
		metadataDir:            cfg.MetadataLogDir,
		supportedFeatures:      supportedFeatures(),
		bootstrapFeatures:      defaultBootstrapFeatures(),
		flushSchedulerInterval: time.Duration(cfg.LogFlushSchedulerIntervalMs) * time.Millisecond,
		checkpointInterval:     time.Duration(cfg.LogFlushOffsetCheckpointIntervalMs) * time.Millisecond,
		retentionCheckInterval: time.Duration(cfg.LogRetentionCheckIntervalMs) * time.Millisecond,
		cleaner:                cleanerOptions(config.Layers{Static: cfg}),

		producerIDExpiration:  int64(cfg.ProducerIDExpirationMs),
		producerIDExpiryCheck: time.Duration(cfg.Int("producer.id.expiration.check.interval.ms")) * time.Millisecond,
		logger:                logger,
		configs:               config.NewProvider(cfg, logger.With("component", "config")),
		schema:                config.NewControllerSchema(cfg),
	}
	if s.metadataDir == "" {
		s.metadataDir = cfg.LogDirs[0]
	}
	if len(cfg.ControllerListenerNames) > 0 {
		s.controllerListenerName = cfg.ControllerListenerNames[0]
	}

	switch sel := cfg.String("replica.selector.class"); sel {
	case "":
	case rackAwareReplicaSelector:
		s.rackAwareReads = true
	default:
		return nil, fmt.Errorf("replica.selector.class %s: Gregor runs no Java classes; it implements %s only", sel, rackAwareReplicaSelector)
	}

	switch class := strings.TrimSpace(cfg.String("authorizer.class.name")); class {
	case "":
	case authz.StandardAuthorizerClass:
		superUsers, err := authz.ParseSuperUsers(cfg.Raw["super.users"])
		if err != nil {
			return nil, fmt.Errorf("super.users: %w", err)
		}
		s.authorizer = &authz.Options{
			SuperUsers:                superUsers,
			AllowEveryoneIfNoACLFound: strings.EqualFold(strings.TrimSpace(cfg.Raw["allow.everyone.if.no.acl.found"]), "true"),
		}
	default:
		return nil, fmt.Errorf("authorizer.class.name %s: Gregor runs no Java classes; it implements %s only (or no authorizer, when empty)", class, authz.StandardAuthorizerClass)
	}

	if s.listeners, err = listeners.New(cfg, logger); err != nil {
		return nil, err
	}
	var advertised []metadata.Endpoint
	for _, l := range cfg.AdvertisedListeners {
		advertised = append(advertised, endpoint(l))
	}
	var controllerEndpoints []metadata.Endpoint
	for _, l := range cfg.AdvertisedControllerListeners {
		controllerEndpoints = append(controllerEndpoints, endpoint(l))
	}

	// The quorum: a static voter set (controller.quorum.voters) or, for a
	// dynamic quorum (controller.quorum.bootstrap.servers), this node as
	// the standalone voter.
	if len(cfg.ControllerQuorumVoters) > 0 {
		for _, v := range cfg.ControllerQuorumVoters {
			s.voters = append(s.voters, metadata.Voter{ID: v.ID, Endpoints: []metadata.Endpoint{{
				Name: s.controllerListenerName, Host: v.Host, Port: v.Port, SecurityProtocol: 0,
			}}})
		}
	} else if cfg.IsController {
		s.voters = []metadata.Voter{{ID: cfg.NodeID, Endpoints: controllerEndpoints}}
	}
	s.brokerOpts = broker.Options{
		NodeID: cfg.NodeID,
		Server: network.ServerOptions{
			Listeners:                 s.listeners.Specs,
			MaxRequestSize:            cfg.SocketRequestMaxBytes,
			MaxIdle:                   maxIdle(cfg.ConnectionsMaxIdleMs),
			QueuedMaxRequestBytes:     cfg.QueuedMaxRequestBytes,
			SendBufferBytes:           cfg.SocketSendBufferBytes,
			ReceiveBufferBytes:        cfg.SocketReceiveBufferBytes,
			SASLMaxReceiveSize:        cfg.Int("sasl.server.max.receive.size"),
			FailedAuthenticationDelay: time.Duration(cfg.Int("connection.failed.authentication.delay.ms")) * time.Millisecond,
			Limits: &network.ConnectionLimits{
				MaxConnections:         cfg.MaxConnections,
				ListenerMaxConnections: cfg.ListenerMaxConnections,
				MaxConnectionsPerIP:    cfg.MaxConnectionsPerIP,
				PerIPOverrides:         cfg.MaxConnectionsPerIPOverrides,
				InterBrokerListener:    cfg.InterBrokerListenerName,
			},
		},
		Advertised:                    advertised,
		InterBrokerListener:           cfg.InterBrokerListenerName,
		InterBrokerDial:               s.listeners.InterBrokerDial,
		AutoCreateTopics:              cfg.AutoCreateTopicsEnable,
		NumPartitions:                 cfg.NumPartitions,
		DefaultReplicationFactor:      int16(cfg.DefaultReplicationFactor),
		DeleteTopicEnable:             cfg.DeleteTopicEnable,
		OffsetsTopicPartitions:        cfg.OffsetsTopicNumPartitions,
		OffsetsTopicReplicationFactor: cfg.OffsetsTopicReplicationFactor,
		HeartbeatInterval:             time.Duration(cfg.BrokerHeartbeatIntervalMs) * time.Millisecond,
		SessionTimeout:                time.Duration(cfg.BrokerSessionTimeoutMs) * time.Millisecond,
		FencedBrokerLinger:            time.Duration(cfg.BrokerSessionTimeoutMs) * time.Millisecond,
		DelegationTokenSecret:         cfg.String(config.TokenSecretKey),
		Quotas: quota.Options{
			Client: quota.Window{
				Samples: int(cfg.Int("quota.window.num")),
				Size:    time.Duration(cfg.Int("quota.window.size.seconds")) * time.Second,
			},
			Controller: quota.Window{
				Samples: int(cfg.Int("controller.quota.window.num")),
				Size:    time.Duration(cfg.Int("controller.quota.window.size.seconds")) * time.Second,
			},
		},
	}
	groups := cfg.GroupCoordinatorConfig(logger.With("component", "group-coordinator"))
	if err := groups.Validate(); err != nil {
		return nil, err
	}
	groups.ExpiryNow = stepGuard(time.Now, logger.With("component", "group-coordinator"))
	s.brokerOpts.Groups = &groups
	txns := cfg.TransactionCoordinatorConfig(logger.With("component", "transaction-coordinator"))
	if err := txns.Validate(); err != nil {
		return nil, err
	}
	// Quorum keys whose KRaft mechanism etcd raft does without: accepted,
	// and said to have no effect when set.
	for key, why := range map[string]string{
		"metadata.max.retention.bytes":              "each snapshot compacts the metadata log up to it and replaces the previous one, so nothing older is retained",
		"metadata.max.retention.ms":                 "each snapshot compacts the metadata log up to it and replaces the previous one, so nothing older is retained",
		"metadata.log.segment.ms":                   "metadata log segments roll by size (metadata.log.segment.bytes) and are dropped at snapshots",
		"metadata.max.idle.interval.ms":             "brokers long-poll the controllers for new entries, so no no-op records are written",
		"controller.quorum.fetch.timeout.ms":        "followers notice a dead leader by controller.quorum.election.timeout.ms (raft's check-quorum and pre-vote)",
		"controller.quorum.election.backoff.max.ms": "raft randomises each election timeout between one and two controller.quorum.election.timeout.ms",
		"controller.quorum.append.linger.ms":        "the controller proposes each decision at once and batches what is already queued",
	} {
		if _, set := cfg.Raw[key]; set {
			logger.Warn(key+" has no effect in Gregor: "+why, "key", key)
		}
	}
	s.brokerOpts.Transactions = &txns
	s.brokerOpts.Authorizer = s.authorizer
	s.brokerOpts.TransactionVerification = cfg.TransactionPartitionVerificationEnable
	return s, nil
}

// maxIdle converts connections.max.idle.ms to the server's option, where
// zero stands for the default: Kafka's 0 closes a connection as soon as it
// is idle at all.
func maxIdle(ms int64) time.Duration {
	switch {
	case ms < 0:
		return -1
	case ms == 0:
		return time.Nanosecond
	}
	return time.Duration(ms) * time.Millisecond
}

// endpoint converts a configured listener to a registered endpoint; an
// empty (wildcard) host is advertised as this machine's host name, as
// Kafka does.
func endpoint(l config.Listener) metadata.Endpoint {
	host := l.Host
	if host == "" {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return metadata.Endpoint{Name: l.Name, Host: host, Port: l.Port, SecurityProtocol: securityProtocolCodes[l.SecurityProtocol]}
}

// cleanerOptions reads the log cleaner's keys from the configuration's
// layers: the static ones at start, and again with the dynamic broker
// configs of every metadata image (Kafka reconfigures its cleaner when
// log.cleaner.* change cluster-wide or for this broker).
func cleanerOptions(l config.Layers) storage.CleanerOptions {
	value := func(key string) string {
		v, _ := l.EffectiveValue(key)
		return v
	}
	num := func(key string) float64 {
		f, err := strconv.ParseFloat(value(key), 64)
		if err != nil {
			// Validated when set; unreachable but for a broken image.
			f, _ = strconv.ParseFloat(l.Static.Raw[key], 64)
		}
		return f
	}
	return storage.CleanerOptions{
		Enable:              value("log.cleaner.enable") == "true",
		Threads:             int(num("log.cleaner.threads")),
		DedupeBufferSize:    int64(num("log.cleaner.dedupe.buffer.size")),
		IOBufferLoadFactor:  num("log.cleaner.io.buffer.load.factor"),
		IOMaxBytesPerSecond: num("log.cleaner.io.max.bytes.per.second"),
		Backoff:             time.Duration(num("log.cleaner.backoff.ms")) * time.Millisecond,
	}
}

// delegationTokens is the controller's delegation token set-up: the
// secret (the broker side gets it in brokerOpts), the lifetimes and the
// expiry sweep's interval.
func (s *settings) delegationTokens() metadata.DelegationTokenConfig {
	ms := func(key string) time.Duration { return time.Duration(s.cfg.Long(key)) * time.Millisecond }
	return metadata.DelegationTokenConfig{
		SecretKey:           s.cfg.String(config.TokenSecretKey),
		MaxLifetime:         ms("delegation.token.max.lifetime.ms"),
		ExpiryTime:          ms("delegation.token.expiry.time.ms"),
		ExpiryCheckInterval: ms("delegation.token.expiry.check.interval.ms"),
	}
}
