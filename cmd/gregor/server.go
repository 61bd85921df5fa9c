package main

// Wiring of a combined broker+controller node: format check, controller,
// log manager, broker, signals.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/broker"
	"github.com/gregorbroker/gregor/broker/config"
	"github.com/gregorbroker/gregor/broker/controllerclient"
	"github.com/gregorbroker/gregor/broker/listeners"
	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metrics"
	"github.com/gregorbroker/gregor/ops"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/replica"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
)

func serve(ctx context.Context, s *settings, stdout, stderr io.Writer) error {
	start := time.Now()
	log := s.logger
	fsys := vfs.OSFS{}
	// The HTTP listener starts first, to answer /healthz and profile the
	// start-up too; the metadata it reports exists once the controller or
	// follower does, and the node is ready once it serves.
	var metaView atomic.Pointer[broker.MetadataView]
	var ready, stopping atomic.Bool
	registry := metrics.NewRegistry()
	registry.RegisterProcess()
	if addr, optional := httpListenerAddr(s, log); addr != "" {
		httpTLS, err := listeners.HTTPTLS(s.cfg, log)
		if err != nil {
			return err
		}
		httpUser, httpPassword := s.cfg.HTTPBasicAuth()
		srv, err := ops.Start(ops.Options{
			Addr:     addr,
			TLS:      httpTLS,
			Username: httpUser,
			Password: httpPassword,
			Registry: registry,
			Image: func() *metadata.Image {
				if m := metaView.Load(); m != nil {
					return (*m).Image()
				}
				return nil
			},
			Ready: func() (bool, string) {
				if stopping.Load() {
					return false, "shutting down"
				}
				if !ready.Load() {
					return false, "starting: catching up with the metadata log and registering"
				}
				if !s.isBroker {
					return true, ""
				}
				return brokerReady(metaView.Load(), s.nodeID)
			},
			Logger: log.With("component", "http"),
		})
		switch {
		case err != nil && optional:
			log.Warn("no HTTP listener for /metrics: the dev mode's address is taken; set "+config.HTTPListenerKey+" to choose one", "addr", addr, "err", err)
		case err != nil:
			return err
		default:
			defer srv.Close()
		}
	}

	clusterID, dirIDs, err := ensureFormatted(fsys, s, log)
	if err != nil {
		return err
	}
	// OAUTHBEARER JWKS validators load their keys first: Kafka does not
	// start without them. Their refreshers stop with ctx.
	for _, v := range s.listeners.JWKSValidators {
		if err := v.Start(ctx); err != nil {
			return fmt.Errorf("starting the OAUTHBEARER JWKS validator: %w", err)
		}
	}

	opts := s.brokerOpts
	opts.Configs = s.configs
	// What this node follows the metadata through: its own controller, or
	// (broker only) the controllers' committed log; set below, before the
	// broker that calls these functions exists.
	var meta broker.MetadataView
	opts.ValidateBrokerConfigs = func(next map[string]string) error {
		return s.listeners.Validate(meta.Image(), next)
	}
	opts.SupportedFeatures = s.supportedFeatures
	opts.Logger = log.With("component", "broker")
	if s.isController {
		ctrl, transport, joining, err := startController(ctx, fsys, s, clusterID, dirIDs[s.metadataDir])
		if err != nil {
			return err
		}
		defer ctrl.Close()
		if transport != nil {
			defer transport.Close()
		}
		ctrl.RegisterMetrics(registry)
		meta = ctrl
		metaView.Store(&meta)
		opts.Metadata, opts.Controller, opts.LocalController = ctrl, ctrl, ctrl
		if transport != nil {
			forwarder := newForwarder(s, ctrl)
			defer forwarder.Close()
			forwarder.Follow(ctrl)
			if joining {
				ctrl.StartAnnouncing(forwarder.Announce)
			}
			opts.Controller = forwarder
		}
	} else {
		forwarder := newForwarder(s, nil)
		defer forwarder.Close()
		follower, err := controller.StartFollower(ctx, controller.FollowerConfig{
			ClusterID: clusterID, NodeID: s.nodeID, Fetch: forwarder.FetchMetadata, Logger: log,
		})
		if err != nil {
			return err
		}
		defer follower.Close()
		forwarder.Follow(follower)
		meta = follower
		metaView.Store(&meta)
		opts.Metadata, opts.Controller = follower, forwarder
	}

	if !s.isBroker {
		// A controller-only node serves its controller listeners alone.
		opts.ControllerOnly = true
		b := broker.New(opts)
		if err := b.Listen(); err != nil {
			return err
		}
		if err := b.Start(ctx); err != nil {
			b.Shutdown()
			return fmt.Errorf("starting the controller listeners: %w", err)
		}
		stopDynamicConfigs := meta.Subscribe(func(prev, next *metadata.Image) {
			if s.listeners.BrokerConfigsChanged(prev, next) {
				s.listeners.Reconfigure(config.LayersFromImage(s.cfg, next))
			}
		})
		defer stopDynamicConfigs()
		b.RegisterMetrics(registry, s.cfg.MetricsPerPartition())
		printStarted(stdout, s, start, clusterID, b)
		ready.Store(true)
		<-ctx.Done()
		log.Info("shutting down")
		stopping.Store(true)
		b.Shutdown()
		return nil
	}

	// Kafka halts the broker when its last log dir goes offline; Gregor
	// stops (exit status 1) with the reason in the log.
	allDirsOffline := make(chan error, 1)
	hooks := startTestHooks(ctx, fsys, log)
	logs, err := storage.OpenManager(storage.ManagerOptions{
		FS:                                hooks.fs,
		Now:                               hooks.now,
		ExpiryNow:                         stepGuard(hooks.now, log.With("component", "storage")),
		Dirs:                              s.logDirs,
		Logger:                            log.With("component", "storage"),
		FlushSchedulerInterval:            s.flushSchedulerInterval,
		CheckpointInterval:                s.checkpointInterval,
		RetentionCheckInterval:            s.retentionCheckInterval,
		Cleaner:                           s.cleaner,
		ProducerIDExpirationMs:            s.producerIDExpiration,
		ProducerIDExpirationCheckInterval: s.producerIDExpiryCheck,
		AllDirsOffline:                    func(err error) { allDirsOffline <- err },
	})
	if err != nil {
		return fmt.Errorf("opening the log dirs: %w", err)
	}
	defer func() {
		if err := logs.Close(); err != nil {
			log.Error("closing the logs", "err", err)
		}
	}()

	tieredOpts, err := s.tieredOptions(hooks, log)
	if err != nil {
		return err
	}
	opts.Replicas = replica.NewManager(replica.Options{
		Tiered:  tieredOpts,
		NodeID:  s.nodeID,
		Logs:    logs,
		Configs: s.configs,
		Logger:  log.With("component", "replica"),
		Fetch: replica.FetcherConfig{
			Fetchers:         int(s.cfg.Int("num.replica.fetchers")),
			MaxBytes:         s.cfg.Int("replica.fetch.max.bytes"),
			ResponseMaxBytes: s.cfg.Int("replica.fetch.response.max.bytes"),
			MinBytes:         s.cfg.Int("replica.fetch.min.bytes"),
			MaxWait:          time.Duration(s.cfg.Int("replica.fetch.wait.max.ms")) * time.Millisecond,
			Backoff:          time.Duration(s.cfg.Int("replica.fetch.backoff.ms")) * time.Millisecond,
		},
		ReplicaLagTimeMax: time.Duration(s.cfg.Long("replica.lag.time.max.ms")) * time.Millisecond,
		RackAwareReads:    s.rackAwareReads,
		QuotaWindow: replica.QuotaWindow{
			Samples: int(s.cfg.Int("replication.quota.window.num")),
			Size:    time.Duration(s.cfg.Int("replication.quota.window.size.seconds")) * time.Second,
		},
	})
	opts.Replicas.RegisterMetrics(registry, s.cfg.MetricsPerPartition())
	for _, d := range s.logDirs {
		opts.LogDirIDs = append(opts.LogDirIDs, dirIDs[d])
	}
	// A broker of a cluster lets the controller move its leaderships
	// away before it stops; a single combined node has nowhere to move
	// them.
	_, remote := opts.Controller.(*controllerclient.Client)
	opts.ControlledShutdown = remote
	b := broker.New(opts)
	if err := b.Listen(); err != nil {
		return err
	}
	if err := b.Start(ctx); err != nil {
		b.Shutdown()
		return fmt.Errorf("starting the broker: %w", err)
	}
	stopDynamicConfigs := meta.Subscribe(func(prev, next *metadata.Image) {
		layers := config.LayersFromImage(s.cfg, next)
		if s.listeners.BrokerConfigsChanged(prev, next) {
			s.listeners.Reconfigure(layers)
		}
		if cleaner, err := storage.ParseCleanerOptions(effectiveValue(layers)); err != nil {
			log.Warn("the log cleaner keeps its options: a dynamic log.cleaner key is not a number", "err", err)
		} else {
			logs.SetCleanerOptions(cleaner)
		}
		verify, _ := layers.EffectiveValue("transaction.partition.verification.enable")
		b.SetTransactionVerification(verify == "true")
		opts.Replicas.SetReplicationThrottles(effectiveLong(layers, "leader.replication.throttled.rate"), effectiveLong(layers, "follower.replication.throttled.rate"))
		if t := opts.Replicas.Tiered(); t != nil {
			t.SetCopyQuota(effectiveLong(layers, "remote.log.manager.copy.max.bytes.per.second"))
			t.SetFetchQuota(effectiveLong(layers, "remote.log.manager.fetch.max.bytes.per.second"))
		}
	})
	defer stopDynamicConfigs()
	bgCtx, stopBackground := context.WithCancel(context.Background())
	bgDone := make(chan struct{})
	go func() {
		defer close(bgDone)
		logs.Run(bgCtx)
	}()
	b.RegisterMetrics(registry, s.cfg.MetricsPerPartition())
	printStarted(stdout, s, start, clusterID, b)
	ready.Store(true)

	var failed error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-allDirsOffline:
		log.Error("every log dir is offline after I/O errors: shutting down, as Kafka halts the broker", "err", err)
		failed = fmt.Errorf("every log dir is offline: %w", err)
	}
	stopping.Store(true)
	b.Shutdown()
	stopBackground()
	<-bgDone
	return failed
}

// brokerReady says whether a started broker takes traffic: the metadata
// it follows lists it registered, unfenced and not shutting down. A
// broker the controller fenced (its session lapsed) leads nothing until
// it is unfenced again, and a load balancer or Kubernetes should send
// clients elsewhere meanwhile.
func brokerReady(view *broker.MetadataView, nodeID int32) (bool, string) {
	if view == nil {
		return false, "not following the metadata log yet"
	}
	img := (*view).Image()
	if img == nil {
		return false, "not following the metadata log yet"
	}
	reg := img.Brokers[nodeID]
	switch {
	case reg == nil:
		return false, "not registered with the controller"
	case reg.InControlledShutdown:
		return false, "in controlled shutdown"
	case reg.Fenced:
		return false, "fenced by the controller (its heartbeats did not arrive in broker.session.timeout.ms)"
	}
	return true, ""
}

func printStarted(stdout io.Writer, s *settings, start time.Time, clusterID string, b *broker.Broker) {
	addrs := b.Addrs()
	names := make([]string, 0, len(addrs))
	for name, a := range addrs {
		names = append(names, name+"://"+a)
	}
	sort.Strings(names)
	fmt.Fprintf(stdout, "Gregor %s started in %s: node %d (%s) of cluster %s, listening on %s, data in %s\n",
		version, time.Since(start).Round(time.Millisecond), s.nodeID, s.cfg.Raw["process.roles"], clusterID, strings.Join(names, ", "), strings.Join(allDirs(s), ","))
}

// startController starts this node's controller, with the transport to
// its peers when the quorum has more than one voter or this controller
// joins a dynamic quorum (formatted with --no-initial-controllers; joining
// is then true, and serve starts its announcements once the client of the
// active controller exists). A single voter keeps running alone, with no
// transport (so it cannot take a learner yet).
func startController(ctx context.Context, fsys vfs.FS, s *settings, clusterID string, dirID protocol.UUID) (ctrl *controller.Controller, transport *controller.NetTransport, joining bool, err error) {
	format, err := controller.ReadFormat(fsys, s.metadataDir)
	if err != nil {
		return nil, nil, false, fmt.Errorf("reading the metadata dir: %w", err)
	}
	joining = len(format.Voters) == 0 && len(s.cfg.ControllerQuorumVoters) == 0 && len(s.cfg.ControllerQuorumBootstrapServers) > 0
	if len(format.Voters) > 1 || joining {
		transport = controller.NewNetTransport(clusterID, s.nodeID, s.controllerListenerName, s.voters, s.listeners.ControllerDial, s.logger)
	}
	cfg := controller.Config{
		FS:                       fsys,
		NodeID:                   s.nodeID,
		ClusterID:                clusterID,
		DirectoryID:              dirID,
		MetadataDir:              s.metadataDir,
		Voters:                   s.voters,
		DefaultPartitions:        s.brokerOpts.NumPartitions,
		DefaultReplicationFactor: s.brokerOpts.DefaultReplicationFactor,
		Schema:                   s.schema,
		SupportedFeatures:        s.supportedFeatures,
		BrokerSessionTimeout:     time.Duration(s.cfg.BrokerSessionTimeoutMs) * time.Millisecond,
		DisableTopicDeletion:     !s.cfg.DeleteTopicEnable,
		Logger:                   s.logger,
		SnapshotMaxBytes:         s.cfg.Long("metadata.log.max.record.bytes.between.snapshots"),
		SegmentBytes:             int64(s.cfg.Int("metadata.log.segment.bytes")),
		ControllerListener:       s.controllerListenerName,
	}
	cfg.MayJoin = joining
	// Kafka's KRaft controller reads no leader.imbalance.per.broker.percentage:
	// every partition not led by its preferred replica is moved.
	cfg.DisableAutoLeaderRebalance = !s.cfg.Bool("auto.leader.rebalance.enable")
	cfg.LeaderImbalanceCheckInterval = time.Duration(s.cfg.Long("leader.imbalance.check.interval.seconds")) * time.Second
	cfg.UncleanLeaderElectionCheckInterval = time.Duration(s.cfg.Long("unclean.leader.election.interval.ms")) * time.Millisecond
	cfg.DelegationTokens = s.cfg.DelegationTokenConfig()
	// Raft counts time in ticks of 100 ms: an election times out after
	// controller.quorum.election.timeout.ms (raft randomises it up to
	// twice that, as KRaft does).
	cfg.ElectionTicks = max(int(s.cfg.Int("controller.quorum.election.timeout.ms"))/100, 2)
	switch ms := s.cfg.Long("metadata.log.max.snapshot.interval.ms"); ms {
	case 0:
		// Kafka's 0 turns time-based snapshots off.
		cfg.SnapshotMaxInterval = time.Duration(math.MaxInt64)
	default:
		cfg.SnapshotMaxInterval = time.Duration(ms) * time.Millisecond
	}
	if transport != nil {
		cfg.Transport = transport
	}
	ctrl, err = controller.Start(ctx, cfg)
	if err != nil {
		if transport != nil {
			transport.Close()
		}
		return nil, nil, false, fmt.Errorf("starting the controller: %w", err)
	}
	return ctrl, transport, joining, nil
}

// newForwarder is this node's client of the active controller.
func newForwarder(s *settings, local broker.LocalController) *controllerclient.Client {
	bootstrap := map[int32]string{}
	var addrs []string
	for _, v := range s.voters {
		if addr, ok := metadata.VoterEndpoint(s.voters, v.ID, s.controllerListenerName); ok {
			bootstrap[v.ID] = addr
			addrs = append(addrs, addr)
		}
	}
	if len(s.cfg.ControllerQuorumVoters) == 0 {
		addrs = s.cfg.ControllerQuorumBootstrapServers
	}
	return controllerclient.New(controllerclient.Options{
		NodeID: s.nodeID, Local: local, MaxVersion: broker.ControllerMaxVersion, Listener: s.controllerListenerName,
		Bootstrap: bootstrap, BootstrapAddrs: addrs, Dial: s.listeners.ControllerDial, Logger: s.logger.With("component", "forwarding"),
	})
}

// ensureFormatted checks meta.properties in every log dir (and the
// metadata dir) and formats a fresh node on first start. It refuses dirs
// that belong to another cluster or node. It returns the cluster id and
// the directory id of each dir.
func ensureFormatted(fsys vfs.FS, s *settings, log *slog.Logger) (string, map[string]protocol.UUID, error) {
	dirs := allDirs(s)
	metas := map[string]storage.MetaProperties{}
	clusterID := ""
	for _, d := range dirs {
		mp, err := storage.ReadMetaProperties(fsys, d)
		if err != nil {
			if isNotExist(err) {
				continue
			}
			return "", nil, fmt.Errorf("reading %s/meta.properties: %w", d, err)
		}
		if clusterID != "" && mp.ClusterID != clusterID {
			return "", nil, fmt.Errorf("invalid cluster.id in %s/meta.properties: expected %s, but read %s; this directory belongs to another cluster", d, clusterID, mp.ClusterID)
		}
		if mp.NodeID != s.nodeID {
			return "", nil, fmt.Errorf("stored node id %d in %s/meta.properties doesn't match node.id %d", mp.NodeID, d, s.nodeID)
		}
		clusterID = mp.ClusterID
		metas[d] = mp
	}
	fresh := clusterID == ""
	if fresh && s.forcedClusterID == "" && !(s.isBroker && s.isController && len(s.voters) == 1) {
		// Only a single combined node formats itself: one node cannot
		// choose the cluster id for all of a cluster's.
		return "", nil, fmt.Errorf("no readable meta.properties in %s: the nodes of a cluster start formatted with one cluster id: run `gregor storage random-uuid` once, then `gregor storage format --config <server.properties> --cluster-id <id>` on every node (brokers with --no-initial-controllers)", strings.Join(dirs, ","))
	}
	switch {
	case fresh && s.forcedClusterID != "":
		clusterID = s.forcedClusterID
	case fresh:
		clusterID = protocol.RandomUUID().String()
	case s.forcedClusterID != "" && s.forcedClusterID != clusterID:
		return "", nil, fmt.Errorf("the log dirs belong to cluster %s, not %s", clusterID, s.forcedClusterID)
	}
	ids := map[string]protocol.UUID{}
	for _, d := range dirs {
		if mp, ok := metas[d]; ok {
			id, err := protocol.ParseUUID(mp.DirectoryID)
			if err != nil {
				return "", nil, fmt.Errorf("reading %s/meta.properties: bad directory.id: %w", d, err)
			}
			ids[d] = id
			continue
		}
		if err := fsys.MkdirAll(d, 0o755); err != nil {
			return "", nil, fmt.Errorf("creating log dir %s: %w", d, err)
		}
		id := protocol.RandomUUID()
		if d == s.metadataDir {
			// kafka-storage format --initial-controllers names this
			// node's metadata directory id.
			for _, v := range s.voters {
				if v.ID == s.nodeID && v.DirectoryID != (protocol.UUID{}) {
					id = v.DirectoryID
				}
			}
		}
		mp := storage.MetaProperties{Version: 1, ClusterID: clusterID, NodeID: s.nodeID, DirectoryID: id.String()}
		if err := storage.WriteMetaProperties(fsys, d, mp); err != nil {
			return "", nil, fmt.Errorf("formatting %s: %w", d, err)
		}
		ids[d] = id
		if !fresh {
			log.Warn("formatted a new log dir for the existing cluster", "dir", d, "cluster", clusterID)
		}
	}
	if !s.isController {
		// A broker-only node keeps no metadata log of its own.
		return clusterID, ids, nil
	}
	if _, err := controller.ReadFormat(fsys, s.metadataDir); err != nil {
		if !errors.Is(err, controller.ErrNotFormatted) {
			return "", nil, err
		}
		// This node's voter entry carries the metadata dir's directory id
		// (KIP-853), as kafka-storage format --standalone records it.
		for i := range s.voters {
			if s.voters[i].ID == s.nodeID && s.voters[i].DirectoryID == (protocol.UUID{}) {
				s.voters[i].DirectoryID = ids[s.metadataDir]
			}
		}
		if err := controller.Format(fsys, s.metadataDir, controller.FormatOptions{
			ClusterID:   clusterID,
			NodeID:      s.nodeID,
			DirectoryID: ids[s.metadataDir],
			Voters:      s.voters,
			Features:    s.bootstrapFeatures,

			ScramCredentials: s.bootstrapScram,
		}); err != nil {
			return "", nil, err
		}
		if fresh {
			log.Info("formatted a new node", "cluster", clusterID, "dirs", dirs)
		}
	}
	return clusterID, ids, nil
}

func allDirs(s *settings) []string {
	dirs := append([]string(nil), s.logDirs...)
	for _, d := range dirs {
		if d == s.metadataDir {
			return dirs
		}
	}
	return append(dirs, s.metadataDir)
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// effectiveLong is a long broker config's effective value (-1 when it
// cannot be read: no limit).
func effectiveLong(layers config.Layers, key string) int64 {
	v, _ := layers.EffectiveValue(key)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return -1
	}
	return n
}
