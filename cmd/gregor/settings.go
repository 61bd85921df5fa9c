package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/broker"
	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/broker/config"
	"github.com/gregorbroker/gregor/broker/listeners"
	"github.com/gregorbroker/gregor/broker/quota"
	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/internal/loglevel"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/storage"
)

// settings is everything the wiring needs, derived from the broker config.
type settings struct {
	cfg *config.Broker
	// rackAwareReads: replica.selector.class is Kafka's
	// RackAwareReplicaSelector.
	rackAwareReads bool
	// remoteStorage is tiered storage's store, nil without
	// remote.log.storage.system.enable.
	remoteStorage          *config.RemoteStorage
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
	// zeroConfig: gregor runs with its embedded defaults alone, no file
	// and no override (the dev mode, debug.go).
	zeroConfig bool
}

// loggerNames are the components that log through a child logger of
// their own (logger.With("component", name)): the loggers, besides root,
// that kafka-configs --entity-type broker-loggers describes and sets.
// TestLoggerNamesAreEveryComponent keeps the list whole.
var loggerNames = []string{
	"broker",                  // the broker: handlers, registration, the network server
	"config",                  // the config provider (dynamic configs)
	"controller",              // the metadata quorum's controller and etcd raft
	"forwarding",              // requests forwarded to the active controller
	"group-coordinator",       // consumer groups
	"http",                    // the operators' HTTP listener
	"metadata-follower",       // a broker-only node's copy of the metadata log
	"oauth-jwks",              // OAUTHBEARER JWKS key sets
	"raft-transport",          // messages between the controllers
	"replica",                 // partitions as replicas, follower fetchers
	"request",                 // every request at DEBUG (Kafka's kafka.request.logger)
	"share-coordinator",       // share group state (KIP-932)
	"storage",                 // the log manager and partition logs
	"tiered",                  // tiered storage: the remote log manager
	"transaction-coordinator", // transactions
}

// loadSettings reads the properties file (or the embedded defaults when
// there is none), applies the overrides and validates the result.
func loadSettings(file string, overrides []string, stderr io.Writer) (*settings, error) {
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
	// The registry decides what is logged; the handler below it keeps
	// all it is given.
	levels := loglevel.New(slog.LevelInfo, loggerNames...)
	handlerOpts := &slog.HandlerOptions{Level: loglevel.LevelTrace}
	var handler slog.Handler
	if cfg.LogJSON() {
		handler = slog.NewJSONHandler(stderr, handlerOpts)
	} else {
		handler = slog.NewTextHandler(stderr, handlerOpts)
	}
	logger := slog.New(levels.Handler(handler))
	for _, w := range warnings {
		logger.Warn(w)
	}

	s := &settings{
		cfg:                    cfg,
		zeroConfig:             file == "" && len(overrides) == 0,
		nodeID:                 cfg.NodeID,
		isController:           cfg.IsController,
		isBroker:               cfg.IsBroker,
		logDirs:                cfg.LogDirs,
		metadataDir:            cfg.MetadataLogDir,
		supportedFeatures:      metadata.SupportedFeatures(),
		bootstrapFeatures:      metadata.DefaultBootstrapFeatures(),
		flushSchedulerInterval: time.Duration(cfg.LogFlushSchedulerIntervalMs) * time.Millisecond,
		checkpointInterval:     time.Duration(cfg.LogFlushOffsetCheckpointIntervalMs) * time.Millisecond,
		retentionCheckInterval: time.Duration(cfg.LogRetentionCheckIntervalMs) * time.Millisecond,

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

	if s.rackAwareReads, err = cfg.RackAwareReads(); err != nil {
		return nil, err
	}
	if s.remoteStorage, err = cfg.RemoteStorage(); err != nil {
		return nil, err
	}
	if s.authorizer, err = authz.OptionsFromConfig(cfg); err != nil {
		return nil, err
	}
	if s.cleaner, err = storage.ParseCleanerOptions(effectiveValue(config.Layers{Static: cfg})); err != nil {
		return nil, err
	}
	if s.listeners, err = listeners.New(cfg, logger); err != nil {
		return nil, err
	}
	var advertised []metadata.Endpoint
	for _, l := range cfg.AdvertisedListeners {
		advertised = append(advertised, l.Endpoint())
	}
	var controllerEndpoints []metadata.Endpoint
	for _, l := range cfg.AdvertisedControllerListeners {
		controllerEndpoints = append(controllerEndpoints, l.Endpoint())
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
		NodeID:                        cfg.NodeID,
		Server:                        s.listeners.ServerOptions(),
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
		TelemetryMaxBytes:             cfg.Int("telemetry.max.bytes"),
		TelemetryMaxClients:           cfg.TelemetryMaxClients(),
		Quotas:                        quota.OptionsFromConfig(cfg),
		LogLevels:                     levels,
	}
	s.brokerOpts.Server.RequestLogger = logger.With("component", "request")
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
	for key, why := range controller.IneffectiveQuorumKeys() {
		if _, set := cfg.Raw[key]; set {
			logger.Warn(key+" has no effect in Gregor: "+why, "key", key)
		}
	}
	s.brokerOpts.Transactions = &txns
	if err := cfg.ValidateShareGroupKeys(); err != nil {
		return nil, err
	}
	shares := cfg.ShareCoordinatorConfig(logger.With("component", "share-coordinator"))
	if err := shares.Validate(); err != nil {
		return nil, err
	}
	s.brokerOpts.ShareCoordinator = &shares
	s.brokerOpts.MaxShareSessions = cfg.Int("group.share.max.share.sessions")
	s.brokerOpts.Authorizer = s.authorizer
	s.brokerOpts.TransactionVerification = cfg.TransactionPartitionVerificationEnable
	return s, nil
}

// effectiveValue gives each key's effective value in the layers (empty for
// null).
func effectiveValue(l config.Layers) func(key string) string {
	return func(key string) string {
		v, _ := l.EffectiveValue(key)
		return v
	}
}
