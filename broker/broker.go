// Package broker serves the Kafka protocol: the handlers, one file per
// API, each declaring its descriptor (api.go), over the replica manager
// (replica/), the coordinators (coordinator/) and the metadata view, with
// the per-API authorization checks and the request identity (checks.go),
// forwarding to the active controller, registration and heartbeats (this
// file) and the controller's own server side (controllerapis.go,
// controllerauth.go). Below it, broker/network serves the listeners and
// connections and dispatches to the handlers; broker/authz decides ACLs;
// broker/quota measures the client quotas; broker/controllerclient reaches
// the active controller and other nodes. Lock order and goroutines:
// LOCKS.md at the repository root.
package broker

import (
	"github.com/gregorbroker/gregor/metrics"

	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/broker/controllerclient"
	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/broker/quota"
	"github.com/gregorbroker/gregor/broker/telemetry"
	cfgdef "github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/gregorbroker/gregor/coordinator/share"
	"github.com/gregorbroker/gregor/coordinator/txn"
	"github.com/gregorbroker/gregor/internal/loglevel"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/replica"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Configs answers every question about effective configuration: the
// static file, dynamic broker configs and topic and group overrides (the
// latter from the metadata image). broker/config implements it.
type Configs interface {
	// DescribeTopic and DescribeBroker answer DescribeConfigs for one
	// resource; keys nil means every key.
	DescribeTopic(img *metadata.Image, topic string, keys []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig
	DescribeBroker(img *metadata.Image, brokerID int32, keys []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig
	DescribeGroup(img *metadata.Image, group string, keys []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig
	// DescribeClientMetrics answers DescribeConfigs for a client-metrics
	// subscription (KIP-714).
	DescribeClientMetrics(img *metadata.Image, name string, keys []string, synonyms, docs bool) []kmsg.DescribeConfigsResponseResourceConfig
	// GroupConfig is a group's effective configuration; false when the
	// group has no dynamic configs.
	GroupConfig(img *metadata.Image, group string) (cfgdef.Group, bool)
	// EffectiveGroupConfig is a group's configuration whether or not it
	// has dynamic configs (the broker's group.* settings beneath).
	EffectiveGroupConfig(img *metadata.Image, group string) cfgdef.Group
	// CreateTopicConfigs is the Configs list of a CreateTopics v5+ answer.
	CreateTopicConfigs(img *metadata.Image, topic string, overrides map[string]string) []kmsg.CreateTopicsResponseTopicConfig
}

// MetadataView is the committed metadata as this node has applied it: the
// current image (immutable; read it once per request) and its changes, in
// order, first with the current image (prev nil).
type MetadataView interface {
	Image() *metadata.Image
	Subscribe(fn func(prev, next *metadata.Image)) (cancel func())
}

// LocalController is this process's own controller, as the broker serves
// it on the controller listeners (controllerapis.go) and reaches it in
// process while it is the active one.
type LocalController interface {
	ActiveController
	// Active reports whether it is the active controller now.
	Active() bool
	NodeID() int32
	Image() *metadata.Image
	// Receive takes raft messages from another controller.
	Receive(ctx context.Context, req *protocol.RaftMessagesRequest) error
	// FetchCommitted answers a MetadataFetch: the committed records from
	// an offset, waiting for new ones.
	FetchCommitted(ctx context.Context, req *protocol.MetadataFetchRequest) *protocol.MetadataFetchResponse
	// ProbeBroker asks it to check whether a broker that stopped
	// heartbeating is still listening (liveness).
	ProbeBroker(id int32, epoch int64)
}

// ActiveController is the active controller as the broker reaches it: the
// controllerclient.Client, which answers from the local controller
// while it is the active one and forwards to the remote active one
// otherwise (unit tests may pass a local controller itself). Handle
// returns the controller's answer, once any change it makes is committed,
// or an error when there is none.
type ActiveController interface {
	Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// Options configure a broker.
type Options struct {
	NodeID int32
	Rack   *string
	Server network.ServerOptions
	// Advertised are the client endpoints published in Metadata.
	Advertised []metadata.Endpoint
	// ClientListener names the listener whose endpoints clients get
	// (the listener a request arrived on decides in Kafka; all client
	// listeners are advertised in the registration).
	InterBrokerListener string
	// InterBrokerDial opens connections to other brokers' inter-broker
	// listeners (with TLS when that listener is SSL); nil dials plain TCP.
	InterBrokerDial controllerclient.DialFunc

	AutoCreateTopics              bool
	NumPartitions                 int32
	DefaultReplicationFactor      int16
	DeleteTopicEnable             bool
	OffsetsTopicPartitions        int32
	OffsetsTopicReplicationFactor int16
	MaxIncrementalFetchSessions   int
	// HeartbeatInterval is broker.heartbeat.interval.ms.
	HeartbeatInterval time.Duration
	// SessionTimeout is broker.session.timeout.ms: the controller fences
	// a broker whose heartbeats stop for that long, so the broker's
	// leader lease (leaderLeaseFor) runs for less. Zero means Kafka's
	// default, 9 s.
	SessionTimeout time.Duration
	// FencedBrokerLinger is how long Metadata keeps listing a broker
	// after this node saw it fenced (departedbrokers.go): cmd/gregor sets
	// broker.session.timeout.ms, the time for which Kafka lists a dead
	// broker. Zero means Kafka's default (9 s), negative turns it off.
	FencedBrokerLinger time.Duration
	// Groups configures the group coordinator; nil means Kafka's defaults
	// with the offsets topic settings above.
	Groups *group.Config
	// Transactions configures the transaction coordinator; nil means
	// Kafka's defaults.
	Transactions *txn.Config
	// ShareCoordinator configures the share coordinator
	// (share.coordinator.*); nil means Kafka's defaults.
	ShareCoordinator *share.Config
	// MaxShareSessions is group.share.max.share.sessions (0: Kafka's
	// 2000).
	MaxShareSessions int32
	// TransactionVerification is transaction.partition.verification.enable
	// at start; SetTransactionVerification follows its dynamic changes.
	TransactionVerification bool
	// LogDirIDs are the directory ids of the log dirs (registration v2+).
	LogDirIDs []protocol.UUID
	// SupportedFeatures is reported in ApiVersions and registration.
	SupportedFeatures map[string][2]int16

	// Metadata is the image this node follows; Controller takes the
	// requests that change it.
	Metadata   MetadataView
	Controller ActiveController
	// LocalController is the controller this process runs (combined and
	// controller nodes), nil on a broker-only node. Its listener serves
	// what controllers and brokers send it (controllerapis.go), and
	// requests arriving on a controller listener are answered by it.
	LocalController LocalController
	// ControllerOnly is a node with process.roles=controller: it serves
	// its controller listeners and nothing else (no registration, no
	// partitions, no coordinators).
	ControllerOnly bool
	// ControlledShutdown makes Shutdown ask the active controller to move
	// leadership away first (KIP-631's controlled shutdown), as brokers of
	// a cluster do.
	ControlledShutdown bool
	// Replicas hosts this node's partitions; the broker starts and stops
	// it with itself.
	Replicas *replica.Manager
	Configs  Configs
	// Authorizer is the StandardAuthorizer's configuration; nil when
	// authorizer.class.name is empty (no authorization, ACL APIs answer
	// SECURITY_DISABLED).
	Authorizer *authz.Options
	// ValidateBrokerConfigs, when set, checks the dynamic configs this
	// broker would have after an alter request, before it is forwarded
	// (dynamicbroker.go): what only this node can vouch for, such as a
	// new keystore for one of its SSL listeners.
	ValidateBrokerConfigs func(next map[string]string) error
	// Quotas are the client quotas' windows (broker/quota); zero means
	// Kafka's defaults.
	Quotas quota.Options
	// DelegationTokenSecret is delegation.token.secret.key: this node
	// computes the tokens' HMACs with it (delegationtokens.go); empty
	// disables tokens here.
	DelegationTokenSecret string
	// LogLevels are the node's logger levels, which BROKER_LOGGER
	// resources describe and alter (loggers.go); nil: a registry of the
	// broker's own, at INFO, that changes nothing of Logger's.
	LogLevels *loglevel.Registry
	// TelemetryMaxBytes is telemetry.max.bytes (KIP-714): the largest
	// metrics payload a client may push; zero means Kafka's 1 MiB.
	TelemetryMaxBytes int32
	// TelemetryMaxClients is gregor.metrics.client.telemetry.max.clients:
	// the client instances whose pushed metrics /metrics shows at most;
	// zero means 100.
	TelemetryMaxClients int
	Logger              *slog.Logger
	Now                 func() time.Time
}

// Broker is one broker node: its server, partitions and handlers.
type Broker struct {
	// sortedTopics is the latest image's topic names in order (metadata.go).
	sortedTopics sortedTopicNames
	opts         Options
	log          *slog.Logger
	meta         MetadataView
	ctrl         ActiveController
	server       *network.Server
	replicas     *replica.Manager
	sessions     *fetchSessionCache
	producerIDs  producerIDBlocks
	now          func() time.Time
	// peers reaches other brokers (interbroker.go).
	peers *brokerPeers
	// lagEnds are the end offsets of partitions led elsewhere that the
	// consumer lag metrics read (lagmetrics.go).
	lagEnds *remoteEnds
	// groups is the group coordinator, created by Start.
	groups *groupCoordinator
	// txns is the transaction coordinator, created by Start.
	txns *txnCoordinator
	// shares is the share coordinator, created by Start.
	shares *shareCoordinator
	// shareParts are the share partitions and sessions this broker
	// serves as their partitions' leader (sharefetch.go).
	shareParts *shareManager
	// txnVerification is transaction.partition.verification.enable (a
	// cluster-wide dynamic config in Kafka).
	txnVerification atomic.Bool
	// authz is the authorizer, nil when none is configured.
	authz *authz.Authorizer
	// asController answers requests as this node's controller, after
	// the checks Kafka's ControllerApis make (controllerauth.go); nil
	// without a local controller.
	asController ActiveController
	// stopACLs ends the authorizer's subscription to the image.
	stopACLs func()
	// quotas are the client quotas (broker/quota); stopQuotas ends their
	// following of the metadata image.
	quotas     *quota.Manager
	stopQuotas func()
	// tokens are the delegation tokens' SCRAM credentials
	// (delegationtokens.go).
	tokens *tokenCredentials
	// departed are the brokers Metadata still lists for a while after
	// they were fenced (departedbrokers.go); stopDeparted ends their
	// following of the image.
	departed     *departedBrokers
	stopDeparted func()
	// telemetry is KIP-714's client telemetry (telemetry.go);
	// stopTelemetry ends its following of the subscriptions in the image.
	telemetry     *telemetry.Manager
	stopTelemetry func()

	// brokerEpoch is this broker's registration epoch.
	brokerEpoch int64
	// wantShutdown is set once Shutdown asks for a controlled shutdown:
	// every heartbeat from then on says so.
	wantShutdown atomic.Bool
	// stopping is set when Shutdown begins: FindCoordinator then no longer
	// names this broker.
	stopping atomic.Bool
	// autoCreating holds the topics whose auto-creation (Metadata) is in
	// flight, so that a burst of requests asks the controller once.
	autoCreateMu sync.Mutex
	autoCreating map[string]bool
	// streamsCreateErrors are the failed creations of streams groups'
	// internal topics (streamsgroups.go), guarded by autoCreateMu.
	streamsCreateErrors streamsCreateErrors

	stopOnce sync.Once
	// runCtx is Start's context, cancelled by Shutdown; background work
	// (heartbeats, auto-creations) runs under it, tracked by bg.
	runCtx context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup
}

// New builds a broker; Start brings it up.
func New(opts Options) *Broker {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LogLevels == nil {
		opts.LogLevels = loglevel.New(slog.LevelInfo)
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 2 * time.Second
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 9 * time.Second
	}
	if opts.MaxIncrementalFetchSessions == 0 {
		opts.MaxIncrementalFetchSessions = 1000
	}
	b := &Broker{
		opts:         opts,
		log:          opts.Logger,
		meta:         opts.Metadata,
		ctrl:         opts.Controller,
		replicas:     opts.Replicas,
		now:          opts.Now,
		autoCreating: map[string]bool{},
		departed:     newDepartedBrokers(opts.FencedBrokerLinger, opts.Now),
		telemetry: telemetry.New(telemetry.Options{
			MaxBytes: opts.TelemetryMaxBytes, MaxClients: opts.TelemetryMaxClients,
			Now: opts.Now, Logger: opts.Logger,
		}),
	}
	if opts.Authorizer != nil {
		b.authz = authz.New(*opts.Authorizer)
	}
	if opts.LocalController != nil {
		b.asController = controllerFront{b: b, ctrl: opts.LocalController}
		// The broker's own way to the active controller goes through the
		// same checks when that controller is this process's.
		if c, ok := opts.Controller.(*controllerclient.Client); ok {
			if c.Local() == opts.LocalController {
				c.SetLocal(b.asController)
			}
		} else if opts.Controller == opts.LocalController {
			b.ctrl = b.asController
		}
	}
	b.sessions = newFetchSessionCache(opts.MaxIncrementalFetchSessions, opts.Now)
	b.peers = newBrokerPeers(b)
	b.lagEnds = newRemoteEnds(b.listEndOffsets, opts.Now, b.log)
	if opts.Replicas != nil && opts.Controller != nil {
		opts.Replicas.SetPeers(b.peers)
	}
	b.txnVerification.Store(opts.TransactionVerification)
	b.quotas = quota.New(opts.Quotas, opts.Now)
	opts.Server.Logger = opts.Logger
	b.tokens = &tokenCredentials{secret: opts.DelegationTokenSecret, meta: opts.Metadata, derived: map[tokenCredentialKey]sasl.ScramCredential{}}
	if opts.Metadata != nil {
		opts.Server.ScramCredentials = b.scramLookup
		opts.Server.DelegationTokens = b.tokens.lookup
	}
	opts.Server.Quotas = b.quotas
	b.server = network.NewServer(opts.Server, b.handlers())
	return b
}

// Listen binds the listeners (so that the real ports are known before the
// broker registers them).
func (b *Broker) Listen() error { return b.server.Listen() }

// Addrs reports the bound listener addresses by listener name.
func (b *Broker) Addrs() map[string]string {
	out := map[string]string{}
	for name, a := range b.server.Addrs() {
		out[name] = a.String()
	}
	return out
}

// Start registers with the controller, follows the metadata image and
// starts serving.
func (b *Broker) Start(ctx context.Context) error {
	// ctx bounds the start-up (the registration may wait for a
	// controller); what runs afterwards (listeners, connections,
	// coordinators, heartbeats) runs until Shutdown, which hands the
	// leaderships over first. A SIGTERM that cancels ctx must not close
	// the connections before the controlled shutdown: clients and
	// followers would find the partitions gone before their leaders moved,
	// and a combined node's controller listener closed under its quorum.
	startCtx := ctx
	ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	b.runCtx = ctx
	if b.authz != nil {
		// The ACLs of the image this node starts with are loaded before
		// any listener serves: Kafka's early start listeners (the
		// controller listeners) open at once, the others once the
		// authorizer is ready, which here is from the start.
		b.authz.Load(b.meta.Image())
		b.stopACLs = b.meta.Subscribe(func(_, next *metadata.Image) { b.authz.Load(next) })
	}
	if b.opts.LocalController != nil {
		b.server.ServeControllerListeners(ctx)
	}
	if b.opts.ControllerOnly {
		b.followQuotas()
		return nil
	}
	// No partition is led before the controller has answered a
	// heartbeat unfenced (the leader lease, replica/lease.go).
	b.replicas.SetLeaderLease(time.Time{})
	if err := b.register(startCtx); err != nil {
		return err
	}
	// Metadata lists a broker fenced from here on for a while
	// (departedbrokers.go); clients are served after this.
	b.stopDeparted = b.meta.Subscribe(func(_, next *metadata.Image) { b.departed.observe(next) })
	b.followTelemetrySubscriptions()
	// Quotas apply from the registration on (clients are served after
	// it; a combined node's controller listener meanwhile answers only
	// the cluster's own start-up).
	b.followQuotas()
	// The lease is kept from the registration on: opening the logs (a
	// recovery after a crash rescans every segment written since the
	// last checkpoint) can outlast broker.session.timeout.ms, and a
	// broker must not be fenced for being busy starting, as Kafka's
	// lifecycle manager heartbeats while its logs load.
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		b.heartbeatLoop(ctx)
	}()
	if err := b.replicas.Start(startCtx, b.meta); err != nil {
		return err
	}
	b.groups = b.startGroups(ctx)
	b.txns = b.startTxns(ctx)
	b.shares = b.startShares(ctx)
	b.shareParts = newShareManager(b)
	b.bg.Add(1)
	go func() {
		defer b.bg.Done()
		b.shareParts.expireLocks(ctx)
	}()
	b.server.Serve(ctx)
	return nil
}

// Shutdown answers in-flight requests, stops the server and background
// work. The caller closes the log manager and controller afterwards.
func (b *Broker) Shutdown() {
	b.stopOnce.Do(func() {
		b.stopping.Store(true)
		if b.opts.ControlledShutdown && b.brokerEpoch > 0 {
			b.controlledShutdown()
		}
		if b.groups != nil {
			// Parked group requests are answered before the server
			// drains its connections.
			b.groups.runtime.Stop()
		}
		if b.txns != nil {
			// Marker rounds stop; the next start finishes them.
			b.txns.runtime.Stop()
		}
		if b.shares != nil {
			b.shares.runtime.Stop()
		}
		b.server.Shutdown()
		if b.stopQuotas != nil {
			b.stopQuotas()
		}
		// No auto-creation starts after this (bg.Add must not race Wait).
		b.autoCreateMu.Lock()
		b.autoCreating = nil
		b.autoCreateMu.Unlock()
		if b.cancel != nil {
			b.cancel()
		}
		b.bg.Wait()
		b.lagEnds.stop()
		if b.stopACLs != nil {
			b.stopACLs()
		}
		if b.stopDeparted != nil {
			b.stopDeparted()
		}
		if b.stopTelemetry != nil {
			b.stopTelemetry()
		}
		// The fetchers stop before the connections they use.
		if b.replicas != nil {
			b.replicas.Stop()
		}
		b.peers.close()
	})
}

// endpoints returns this broker's advertised endpoints as the controller
// records them.
func (b *Broker) endpoints() []metadata.Endpoint {
	bound := b.server.Addrs()
	out := make([]metadata.Endpoint, 0, len(b.opts.Advertised))
	for _, ep := range b.opts.Advertised {
		// A listener configured with port 0 is advertised with the port
		// it was given.
		if a, ok := bound[ep.Name].(*net.TCPAddr); ok && ep.Port == 0 {
			ep.Port = int32(a.Port)
		}
		out = append(out, ep)
	}
	return out
}

// registrationRetries bounds the wait for a previous registration's
// session to expire (broker.session.timeout.ms is 9 s by default).
const registrationRetries = 30

// forward sends a request to the active controller and returns its answer:
// the one way from this broker to the controller, for clients' admin
// requests (forwardRequest) and the broker's own registration, heartbeats
// and producer-id allocations. Forwarding to a remote active controller
// (KIP-590 envelopes, NOT_CONTROLLER retries) will live here.
func (b *Broker) forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return b.forwardTo(ctx, b.ctrl, req)
}

func (b *Broker) forwardTo(ctx context.Context, ctrl ActiveController, req kmsg.Request) (kmsg.Response, error) {
	resp, err := ctrl.Handle(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s to the controller: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// forwardRequest answers r with the active controller's answer to its
// request, off the reader goroutine (the controller answers once the
// change is committed). finish, when set, adds what only the broker knows
// before the answer goes out. No answer (shutting down) closes the
// connection, as Kafka does.
func (b *Broker) forwardRequest(ctx context.Context, r *network.Request, finish func(resp kmsg.Response)) {
	// A forwarded request lives no longer than the client's own timeout
	// for it: one that could not reach a controller in time is dropped,
	// never applied long after the client was told it timed out.
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout(r.Body))
	// The controller authorizes it for the client (an envelope carries
	// the identity, client id included, to a remote one).
	ctx = withIdentity(ctx, identityOf(r))
	ctrl := b.ctrl
	if r.ControllerListener() && b.asController != nil {
		// A controller answers on its own listener, NOT_CONTROLLER when
		// it is not the active one, as Kafka's controllers do.
		ctrl = b.asController
	}
	// The controller also counts the client's mutations against its
	// quota, in process or (over the envelope) on another node.
	ctx, mq := withMutationQuota(ctx, b.quotas, r.Header.APIKey, r.Version(), r.Principal().Name, r.Header.ClientID)
	r.GoAsync(func() {
		defer cancel()
		resp, err := b.forwardTo(ctx, ctrl, r.Body)
		if err == nil && mq != nil {
			mq.ApplyThrottle(resp)
		}
		if err != nil {
			// No controller answered in time: REQUEST_TIMED_OUT, which
			// clients retry; whether the change happened is unknown to
			// them, as with Kafka.
			if resp = timedOutResponse(r.Body); resp == nil || b.runCtx.Err() != nil {
				b.log.Debug("forwarding failed; closing the connection", "err", err)
				r.CloseConnection()
				return
			}
			b.log.Debug("forwarding failed; answering REQUEST_TIMED_OUT", "api", kmsg.NameForKey(r.Body.Key()), "err", err)
			r.Respond(resp)
			return
		}
		if finish != nil {
			finish(resp)
		}
		r.Respond(resp)
	})
}

// register registers this broker with the controller (a BrokerRegistration
// request in combined mode goes straight to the local controller).
func (b *Broker) register(ctx context.Context) error {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID = b.opts.NodeID
	img := b.meta.Image()
	if img != nil {
		req.ClusterID = img.ClusterID
	}
	req.IncarnationID = protocol.RandomUUID()
	for _, ep := range b.endpoints() {
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name, l.Host, l.Port, l.SecurityProtocol = ep.Name, ep.Host, uint16(ep.Port), ep.SecurityProtocol
		req.Listeners = append(req.Listeners, l)
	}
	for name, r := range b.opts.SupportedFeatures {
		f := kmsg.NewBrokerRegistrationRequestFeature()
		f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = name, r[0], r[1]
		req.Features = append(req.Features, f)
	}
	req.Rack = b.opts.Rack
	for _, id := range b.opts.LogDirIDs {
		req.LogDirs = append(req.LogDirs, id)
	}
	if epoch, ok := b.replicas.PreviousBrokerEpoch(); ok {
		req.PreviousBrokerEpoch = epoch
	}
	// A previous incarnation may still hold a live session (another
	// process with this node id, or a crash the controller has not yet
	// noticed): retry, as Kafka brokers do, until it expires.
	var resp *kmsg.BrokerRegistrationResponse
	for attempt := 0; ; attempt++ {
		answer, err := b.forward(ctx, req)
		if err != nil {
			return fmt.Errorf("registering broker %d: %w", b.opts.NodeID, err)
		}
		resp = answer.(*kmsg.BrokerRegistrationResponse)
		if resp.ErrorCode != kerr.DuplicateBrokerRegistration.Code || attempt >= registrationRetries {
			break
		}
		if attempt == 0 {
			b.log.Warn("another incarnation of this broker id is registered; retrying until its session expires")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if resp.ErrorCode == kerr.DuplicateBrokerRegistration.Code {
		return fmt.Errorf("registering broker %d: another broker with node.id %d is alive and registered (its session did not expire in %d attempts): two nodes have the same node.id: %w",
			b.opts.NodeID, b.opts.NodeID, registrationRetries, kerr.DuplicateBrokerRegistration)
	}
	if err := errFromCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("registering broker %d: %w", b.opts.NodeID, err)
	}
	b.brokerEpoch = resp.BrokerEpoch
	b.replicas.SetBrokerEpoch(resp.BrokerEpoch)
	return b.unfence(ctx)
}

// unfenceWait bounds how long start-up heartbeats quickly to be unfenced;
// the heartbeat loop goes on asking after it.
const unfenceWait = 5 * time.Second

// unfence heartbeats until the controller unfences this broker: it does
// so once the broker's metadata has caught up with its own registration,
// so the first heartbeat waits for that, and the next ones follow closely
// rather than a heartbeat interval apart (as Kafka's broker lifecycle
// manager asks again at once while it is fenced).
func (b *Broker) unfence(ctx context.Context) error {
	deadline := b.now().Add(unfenceWait)
	for b.meta.Image().Offset < b.brokerEpoch && b.now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	for {
		resp, err := b.sendHeartbeat(ctx)
		if err != nil {
			return err
		}
		if !resp.IsFenced || !b.now().Before(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (b *Broker) heartbeat(ctx context.Context) error {
	_, err := b.sendHeartbeat(ctx)
	return err
}

func (b *Broker) sendHeartbeat(ctx context.Context) (*kmsg.BrokerHeartbeatResponse, error) {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID = b.opts.NodeID
	req.BrokerEpoch = b.brokerEpoch
	if img := b.meta.Image(); img != nil {
		req.CurrentMetadataOffset = img.Offset
	}
	req.WantFence = false
	req.WantShutdown = b.wantShutdown.Load()
	sent := time.Now()
	answer, err := b.forward(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := answer.(*kmsg.BrokerHeartbeatResponse)
	if err := errFromCode(resp.ErrorCode); err != nil {
		return resp, err
	}
	if resp.IsFenced {
		b.replicas.SetLeaderLease(time.Time{})
	} else {
		b.replicas.SetLeaderLease(sent.Add(leaderLeaseFor(b.opts.SessionTimeout)))
	}
	return resp, nil
}

// leaderLeaseFor is how long after a heartbeat's send an unfenced answer
// lets this broker lead (replica/lease.go): the session timeout, after
// which the controller would fence it counting from the heartbeat's
// arrival, less a tenth (at most a second) for clocks that do not run at
// quite the same rate on two machines.
func leaderLeaseFor(sessionTimeout time.Duration) time.Duration {
	return sessionTimeout - min(sessionTimeout/10, time.Second)
}

// controlledShutdownWait bounds how long Shutdown waits for the active
// controller to let this broker go.
const controlledShutdownWait = 30 * time.Second

// controlledShutdownSilence is how long Shutdown waits when no controller
// answers at all.
const controlledShutdownSilence = 3 * time.Second

// controlledShutdown heartbeats with WantShutdown until the controller has
// moved this broker's leaderships away and says it may stop (or there is
// no answer in time: the broker then stops anyway, and is fenced when its
// session lapses, as a crashed one would be).
func (b *Broker) controlledShutdown() {
	b.wantShutdown.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), controlledShutdownWait)
	defer cancel()
	start := b.now()
	answered := start
	for {
		hctx, hcancel := context.WithTimeout(ctx, controlledShutdownSilence)
		resp, err := b.sendHeartbeat(hctx)
		hcancel()
		if err == nil && resp.ShouldShutdown {
			b.log.Info("controlled shutdown done", "took", b.now().Sub(start).Round(time.Millisecond))
			return
		}
		if err == nil {
			answered = b.now()
		} else if b.now().Sub(answered) >= controlledShutdownSilence {
			// No controller to ask (the quorum is gone too, as when a
			// whole cluster stops): stopping is all that is left.
			b.log.Warn("no controller answers the controlled shutdown; stopping anyway", "err", err)
			return
		}
		select {
		case <-ctx.Done():
			b.log.Warn("controlled shutdown not acknowledged in time; stopping anyway", "err", err)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// heartbeatLoop keeps the broker's lease (broker.heartbeat.interval.ms).
func (b *Broker) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(b.opts.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// Bounded, so that a controller that vanished without a
			// word (no reset) does not hold the next heartbeat back
			// until the session lapses.
			hctx, cancel := context.WithTimeout(ctx, max(2*b.opts.HeartbeatInterval, 2*time.Second))
			err := b.heartbeat(hctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				b.log.Warn("broker heartbeat failed", "err", err)
			}
		}
	}
}

// RegisterMetrics registers the broker's network metrics: the requests it
// received, by API and version, and their times; once Start has built
// them, its coordinators' (coordmetrics.go) and the consumer lag of the
// groups it coordinates (lagmetrics.go), per partition only with
// perPartition (gregor.metrics.per.partition); its client quotas'
// measures (broker/quota); and its client telemetry's (KIP-714), with the
// series clients pushed. What its fetches carried is counted with the
// replica manager's topic meters.
func (b *Broker) RegisterMetrics(r *metrics.Registry, perPartition bool) {
	b.server.RegisterMetrics(r)
	b.sessions.registerMetrics(r)
	b.quotas.RegisterMetrics(r)
	b.registerCoordinatorMetrics(r)
	b.registerLagMetrics(r, perPartition)
	b.registerShareMetrics(r, perPartition)
	b.telemetry.RegisterMetrics(r)
}
