package controller

// The controller: an etcd-raft metadata quorum, the image built from the
// committed log, and the admin operations that change it.
//
// Goroutines and ownership:
//   - The loop goroutine (run) owns the raft RawNode, the committed image
//     (c.committed), the write pipeline (pipeline.go: the entries proposed
//     and not yet applied, and the pending image that includes them), the
//     broker sessions and every other field marked "loop". It drives the
//     Ready loop: persist, send, apply, Advance. Admin operations reach it
//     as events on c.events; it decides them one at a time against the
//     pending image and proposes their records without waiting for earlier
//     entries to commit; each is answered once its own entry is applied.
//   - Callers of the admin methods wait for their event's reply.
//   - Each subscription has its own delivery goroutine.
//   - Start runs the loop's work itself (replay, first campaign) before the
//     loop goroutine exists.
//
// Locks: subsMu guards the subscription set and the publication of a new
// image; a subscription's own mu guards its queue. Order: subsMu, then a
// subscription's mu. raftlog.Log has its own internal lock, taken last.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/controller/decide"
	"github.com/gregorbroker/gregor/controller/raftlog"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Config configures a controller node.
type Config struct {
	FS          vfs.FS
	NodeID      int32
	ClusterID   string
	DirectoryID protocol.UUID
	// MetadataDir holds __cluster_metadata-0 (raft WAL and snapshots).
	MetadataDir string
	// Voters is the initial voter set (one voter, this node, in combined
	// single-node mode). The voter set recorded by Format is authoritative
	// for the quorum; endpoints given here fill in DescribeQuorum's Nodes
	// for voters whose endpoints the log does not know.
	Voters []metadata.Voter
	// DefaultPartitions and DefaultReplicationFactor apply when CreateTopics
	// asks for -1 (num.partitions, default.replication.factor).
	DefaultPartitions        int32
	DefaultReplicationFactor int16
	// Schema knows the config keys: validation, list types and defaults.
	Schema metadata.ConfigSchema
	// SupportedFeatures is the [min, max] level this node supports for
	// each feature (UpdateFeatures is validated against it).
	SupportedFeatures map[string][2]int16
	Logger            *slog.Logger
	Now               func() time.Time

	// Transport carries raft messages to the other voters; nil when this
	// node is the only voter.
	Transport Transport
	// TickInterval is the raft tick (default 100ms); an election times out
	// after ElectionTicks ticks (default 10, Kafka's
	// controller.quorum.election.timeout.ms of 1000) and the leader
	// heartbeats every tick.
	TickInterval  time.Duration
	ElectionTicks int
	// BrokerSessionTimeout is broker.session.timeout.ms (default 9s): a
	// broker that sends no heartbeat for this long is fenced.
	BrokerSessionTimeout time.Duration
	// Snapshot policy: a snapshot of the image is written and the log
	// compacted after SnapshotMaxBytes of records
	// (metadata.log.max.record.bytes.between.snapshots, default 20 MiB),
	// after SnapshotMaxEntries entries (default 10000), or when
	// SnapshotMaxInterval has passed with new records
	// (metadata.log.max.snapshot.interval.ms, default 1h).
	SnapshotMaxBytes    int64
	SnapshotMaxEntries  int64
	SnapshotMaxInterval time.Duration
	// SegmentBytes rolls the raft log segment (default 64 MiB).
	SegmentBytes int64
	// DisableTopicDeletion is delete.topic.enable=false.
	DisableTopicDeletion bool
	// UncleanLeaderElectionCheckInterval is
	// unclean.leader.election.interval.ms (default 5 minutes): how long
	// after a partition loses its leader the active controller tries an
	// unclean election for it (periodicelections.go).
	UncleanLeaderElectionCheckInterval time.Duration
	// DisableAutoLeaderRebalance is auto.leader.rebalance.enable=false;
	// otherwise leadership moves back to preferred replicas
	// LeaderImbalanceCheckInterval (leader.imbalance.check.interval.seconds,
	// default 300 s) after a partition is led by another (periodicelections.go).
	DisableAutoLeaderRebalance   bool
	LeaderImbalanceCheckInterval time.Duration

	// DelegationTokens configures delegation tokens
	// (delegationtokens.go).
	DelegationTokens metadata.DelegationTokenConfig

	// ControllerListener is the listener raft and voter changes use (the
	// first of controller.listener.names; default CONTROLLER).
	ControllerListener string
	// MayJoin says a controller formatted without voters may join a
	// dynamic quorum (controller.quorum.bootstrap.servers is set): its
	// owner then starts its announcements (StartAnnouncing).
	MayJoin bool
}

// Announcer sends a joining controller's announcement to addr (the active
// controller when known, else "" for any bootstrap controller).
type Announcer func(ctx context.Context, addr string, req *protocol.MetadataFetchRequest) (*protocol.MetadataFetchResponse, error)

// Transport sends raft messages to peers. Send must not block on the
// network (queue and drop on overload: raft retransmits); messages from
// peers are handed to Controller.Step.
type Transport interface {
	Send(msgs []*pb.Message)
}

var (
	errNotController = errors.New("this node is not the active controller")
	errStopped       = errors.New("controller is shut down")
)

// Controller runs the metadata quorum and applies committed records to the
// image. In combined mode the broker in the same process calls it directly.
type Controller struct {
	cfg  Config
	info FormatInfo
	// env is what the decisions read (controller/decide); its logger and
	// clock are the controller's own (logger, now).
	env     *decide.Env
	logger  *slog.Logger
	now     func() time.Time
	rlog    *raftlog.Log
	raftID  uint64
	events  chan *event
	recvc   chan *pb.Message
	reports chan func(*raft.RawNode)
	stop    chan struct{}
	done    chan struct{}
	closeMu sync.Mutex
	closed  bool

	publisher
	// active mirrors serving() for other goroutines (the broker's
	// forwarding and its controller listener).
	active atomic.Bool
	// probeMu guards probing (the brokers whose listeners are being
	// dialled to see whether they died) and reachable (the broker epoch
	// whose listeners were last seen accepting), liveness.go.
	probeMu   sync.Mutex
	probing   map[int32]bool
	reachable map[int32]int64
	// The applied index for MetadataFetch (observers.go).
	wakeMu        sync.Mutex
	appliedSignal uint64
	appliedWake   chan struct{}
	obsMu         sync.Mutex
	observers     map[int32]observerStatus
	quorum        atomic.Pointer[quorumStatus]
	fatal         atomic.Pointer[error]
	// member: this node is a voter or learner (membership.go); the
	// announcer reads it, the loop writes it.
	member       atomic.Bool
	leaderHint   atomic.Pointer[leaderHint]
	announceDone chan struct{} // nil unless the announcer runs; closeMu

	// loop-owned
	rn              *raft.RawNode
	committed       *metadata.Image
	appliedIndex    uint64
	appliedTerm     uint64
	confState       *pb.ConfState
	isLeader        bool
	term            uint64
	leadRaftID      uint64
	sessions        map[int32]*brokerSession
	entriesSinceSn  int64
	lastSnapshot    time.Time
	snapshotIndex   uint64
	peerLastContact map[uint64]time.Time
	peerCaughtUp    map[uint64]time.Time
	// confChangeIndex is the index of the last conf change this node
	// proposed (membership.go).
	confChangeIndex uint64
	// the periodic elections (periodicelections.go)
	uncleanCheck   periodicCheck
	rebalanceCheck periodicCheck
	// nextTokenSweep is when expired delegation tokens are next removed;
	// zero when not scheduled (delegationtokens.go).
	nextTokenSweep time.Time

	// the write pipeline (loop-owned, see pipeline.go)
	inflight      []*proposal
	inflightBytes int
	pending       *metadata.Image // nil when inflight is empty
	// inflightCount is len(inflight), readable outside the loop.
	inflightCount atomic.Int64

	// raftStats are raft-metrics' windowed stats (raftmetrics.go),
	// recorded by the loop and read by scrapes.
	raftStats raftStats
}

// brokerSession is the leader's view of a broker's liveness (not part of the
// replicated state; rebuilt when a node becomes leader).
type brokerSession struct {
	lastSeen time.Time
	// contacted is true once the broker registered with or heartbeated to
	// this leader. Sessions a new leader grants on taking over (so that it
	// does not fence everyone at once) are not proof that the registered
	// incarnation is still alive, so they do not block a re-registration.
	contacted      bool
	metadataOffset int64
	// controlledShutdownOffset is the offset at which the broker entered
	// controlled shutdown (-1 if it is not shutting down).
	controlledShutdownOffset int64
	// fencedOffset is the offset of the record that last fenced the
	// broker as far as this leader knows (its registration, which fences
	// it, or a fencing change; the image's offset when this leader took
	// over). A fenced broker is unfenced only once its metadata has
	// reached it (brokers.go, nextBrokerState).
	fencedOffset int64
}

func raftIDOf(nodeID int32) uint64 { return uint64(nodeID) + 1 }
func nodeIDOf(raftID uint64) int32 {
	if raftID == 0 {
		return -1
	}
	return int32(raftID - 1)
}

func (cfg *Config) setDefaults() {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = 100 * time.Millisecond
	}
	if cfg.ElectionTicks <= 0 {
		cfg.ElectionTicks = 10
	}
	if cfg.BrokerSessionTimeout <= 0 {
		cfg.BrokerSessionTimeout = 9 * time.Second
	}
	if cfg.UncleanLeaderElectionCheckInterval <= 0 {
		cfg.UncleanLeaderElectionCheckInterval = 5 * time.Minute
	}
	if cfg.LeaderImbalanceCheckInterval <= 0 {
		cfg.LeaderImbalanceCheckInterval = 300 * time.Second
	}
	if cfg.SnapshotMaxBytes <= 0 {
		cfg.SnapshotMaxBytes = 20 << 20
	}
	if cfg.SnapshotMaxEntries <= 0 {
		cfg.SnapshotMaxEntries = 10000
	}
	if cfg.SnapshotMaxInterval <= 0 {
		cfg.SnapshotMaxInterval = time.Hour
	}
	if cfg.DefaultPartitions <= 0 {
		cfg.DefaultPartitions = 1
	}
	if cfg.ControllerListener == "" {
		cfg.ControllerListener = "CONTROLLER"
	}
	if cfg.DefaultReplicationFactor <= 0 {
		cfg.DefaultReplicationFactor = 1
	}
}

// Start replays the snapshot and WAL, starts raft and returns once this node
// has replayed everything it had on disk. A node that is the only voter
// campaigns at once and is the leader when Start returns.
func Start(ctx context.Context, cfg Config) (*Controller, error) {
	cfg.setDefaults()
	info, err := ReadFormat(cfg.FS, cfg.MetadataDir)
	if err != nil {
		return nil, fmt.Errorf("starting controller: %w", err)
	}
	if cfg.ClusterID != "" && cfg.ClusterID != info.ClusterID {
		return nil, fmt.Errorf("starting controller: configured cluster id %s does not match the formatted cluster id %s", cfg.ClusterID, info.ClusterID)
	}
	if cfg.NodeID != info.NodeID {
		return nil, fmt.Errorf("starting controller: configured node id %d does not match the formatted node id %d", cfg.NodeID, info.NodeID)
	}
	var voterIDs []uint64
	isVoter := false
	for _, v := range info.Voters {
		voterIDs = append(voterIDs, raftIDOf(v.ID))
		isVoter = isVoter || v.ID == cfg.NodeID
	}
	// A controller formatted with no voters joins a dynamic quorum as a
	// learner (membership.go).
	joining := len(info.Voters) == 0
	if !isVoter && !joining {
		return nil, fmt.Errorf("starting controller: node %d is not among the formatted voters", cfg.NodeID)
	}
	if joining && !cfg.MayJoin {
		return nil, fmt.Errorf("starting controller: node %d was formatted without initial controllers and has no quorum to join (controller.quorum.bootstrap.servers)", cfg.NodeID)
	}
	rlog, err := raftlog.Open(raftlog.Options{
		FS:               cfg.FS,
		Dir:              path.Join(cfg.MetadataDir, MetadataPartitionDir),
		InitialConfState: &pb.ConfState{Voters: voterIDs},
		RollBytes:        cfg.SegmentBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("starting controller: opening metadata log: %w", err)
	}
	logger := cfg.Logger.With("component", "controller", "node", cfg.NodeID)
	c := &Controller{
		cfg:             cfg,
		info:            info,
		env:             newEnv(cfg, logger),
		logger:          logger,
		now:             cfg.Now,
		rlog:            rlog,
		raftID:          raftIDOf(cfg.NodeID),
		events:          make(chan *event),
		recvc:           make(chan *pb.Message, 256),
		reports:         make(chan func(*raft.RawNode), 64),
		stop:            make(chan struct{}),
		done:            make(chan struct{}),
		sessions:        map[int32]*brokerSession{},
		peerLastContact: map[uint64]time.Time{},
		peerCaughtUp:    map[uint64]time.Time{},
		appliedWake:     make(chan struct{}),
		observers:       map[int32]observerStatus{},
	}
	c.lastSnapshot = c.now()
	snap, _ := rlog.Snapshot()
	img := metadata.EmptyImage(info.ClusterID)
	c.confState = snap.GetMetadata().GetConfState()
	if idx := snap.GetMetadata().GetIndex(); idx > 0 {
		img, err = imageFromSnapshot(info.ClusterID, snap)
		if err != nil {
			rlog.Close()
			return nil, fmt.Errorf("starting controller: %w", err)
		}
		c.appliedIndex, c.appliedTerm, c.snapshotIndex = idx, snap.GetMetadata().GetTerm(), idx
		c.appliedSignal = idx
	}
	c.committed = img
	c.image.Store(img)
	rn, err := raft.NewRawNode(&raft.Config{
		ID:              c.raftID,
		ElectionTick:    cfg.ElectionTicks,
		HeartbeatTick:   1,
		Storage:         rlog,
		Applied:         c.appliedIndex,
		MaxSizePerMsg:   1 << 20,
		MaxInflightMsgs: 256,
		CheckQuorum:     true,
		PreVote:         true,
		// A leader that removes itself from the voters steps down
		// (membership.go hands leadership over first).
		StepDownOnRemoval: true,
		Logger:            raftLogger{c.logger},
	})
	if err != nil {
		rlog.Close()
		return nil, fmt.Errorf("starting controller: creating raft node: %w", err)
	}
	c.rn = rn
	hs, _, _ := rlog.InitialState()
	c.term = hs.GetTerm()
	for c.appliedIndex < hs.GetCommit() && rn.HasReady() {
		c.handleReady()
		if err := c.fatalErr(); err != nil {
			rlog.Close()
			return nil, fmt.Errorf("starting controller: replaying metadata log: %w", err)
		}
	}
	if len(voterIDs) == 1 && voterIDs[0] == c.raftID {
		// The only voter need not wait for an election timeout.
		if err := rn.Campaign(); err != nil {
			rlog.Close()
			return nil, fmt.Errorf("starting controller: campaigning: %w", err)
		}
		c.drain()
		c.maybeBootstrap()
		c.drain()
	}
	if err := c.fatalErr(); err != nil {
		rlog.Close()
		return nil, fmt.Errorf("starting controller: %w", err)
	}
	if err := ctx.Err(); err != nil {
		rlog.Close()
		return nil, fmt.Errorf("starting controller: %w", err)
	}
	c.active.Store(c.serving())
	c.logger.Info("controller started", "cluster", info.ClusterID, "offset", c.committed.Offset, "leader", c.isLeader)
	if t, ok := cfg.Transport.(interface{ Bind(*Controller) }); ok {
		// Unreachable peers and snapshot outcomes are reported to this
		// controller, and peers' addresses come from its image.
		t.Bind(c)
	}
	go c.run()
	// Each broker's listeners are dialled once per registration, so that
	// a later probe that finds them refusing means something
	// (liveness.go).
	c.Subscribe(c.noteReachable)
	return c, nil
}

func imageFromSnapshot(clusterID string, snap *pb.Snapshot) (*metadata.Image, error) {
	recs, err := metadata.DecodeRecords(snap.GetData())
	if err != nil {
		return nil, fmt.Errorf("decoding snapshot at offset %d: %w", snap.GetMetadata().GetIndex(), err)
	}
	img, err := metadata.ApplyBatch(metadata.EmptyImage(clusterID), recs, int64(snap.GetMetadata().GetIndex()), int64(snap.GetMetadata().GetTerm()))
	if err != nil {
		return nil, fmt.Errorf("loading snapshot: %w", err)
	}
	return img, nil
}

// Active reports whether this node is the active controller: the raft
// leader, caught up with its term, serving admin requests.
func (c *Controller) Active() bool { return c.active.Load() }

// NodeID is this controller's node id.
func (c *Controller) NodeID() int32 { return c.cfg.NodeID }

// Err returns the error that stopped the controller, if any (a metadata
// record it cannot read, a storage failure).
func (c *Controller) Err() error { return c.fatalErr() }

func (c *Controller) fatalErr() error {
	if p := c.fatal.Load(); p != nil {
		return *p
	}
	return nil
}

func (c *Controller) setFatal(err error) {
	if c.fatal.CompareAndSwap(nil, &err) {
		c.logger.Error("controller stopped applying the metadata log", "err", err)
	}
}

// Step hands a raft message from a peer to this node.
func (c *Controller) Step(ctx context.Context, m *pb.Message) error {
	select {
	case c.recvc <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return errStopped
	}
}

// ReportUnreachable tells raft that the transport could not reach a peer,
// so the leader stops pipelining to it until it answers again.
func (c *Controller) ReportUnreachable(nodeID int32) {
	c.report(func(rn *raft.RawNode) { rn.ReportUnreachable(raftIDOf(nodeID)) })
}

// ReportSnapshot tells raft whether a snapshot message (MsgSnap) reached
// its peer; the transport must call it for every MsgSnap it sends.
func (c *Controller) ReportSnapshot(nodeID int32, failed bool) {
	status := raft.SnapshotFinish
	if failed {
		status = raft.SnapshotFailure
	}
	c.report(func(rn *raft.RawNode) { rn.ReportSnapshot(raftIDOf(nodeID), status) })
}

func (c *Controller) report(fn func(*raft.RawNode)) {
	select {
	case c.reports <- fn:
	case <-c.done:
	}
}

// Resign hands the quorum's leadership to the most caught-up other voter
// when this controller leads, and waits until another voter leads or ctx
// ends. A leader that just stops leaves the cluster without a controller
// for an election timeout and more, while the brokers' heartbeats fail
// and their leader leases lapse; Kafka's leader resigns on shutdown
// (EndQuorumEpoch) for the same reason. Called before Close, while the
// listeners still carry raft's messages.
func (c *Controller) Resign(ctx context.Context) {
	var to uint64
	asked := make(chan struct{})
	c.report(func(rn *raft.RawNode) {
		defer close(asked)
		if !c.isLeader {
			return
		}
		if to = c.mostCaughtUpPeer(rn); to == 0 {
			return // the only voter: there is no one to hand over to
		}
		// No longer active from here, so that brokers never find two
		// active controllers; the raft state follows when the other
		// voter wins.
		c.active.Store(false)
		c.logger.Info("shutting down: handing the quorum's leadership over", "to", nodeIDOf(to))
		rn.TransferLeader(to)
	})
	select {
	case <-asked:
	case <-ctx.Done():
		return
	}
	if to == 0 {
		return
	}
	for {
		led := make(chan bool, 1)
		c.report(func(rn *raft.RawNode) {
			lead := rn.BasicStatus().Lead
			led <- lead != c.raftID && lead != raft.None
		})
		select {
		case other := <-led:
			if other {
				return
			}
		case <-c.done:
			return
		case <-ctx.Done():
			c.logger.Warn("shutting down while still the quorum's leader: the handover did not finish in time")
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Close stops raft and syncs the log.
func (c *Controller) Close() error {
	c.closeMu.Lock()
	if c.closed {
		c.closeMu.Unlock()
		return nil
	}
	c.closed = true
	close(c.stop)
	announceDone := c.announceDone
	c.closeMu.Unlock()
	<-c.done
	if announceDone != nil {
		<-announceDone
	}
	c.closeSubscriptions()
	if err := c.rlog.Close(); err != nil {
		return fmt.Errorf("closing metadata log: %w", err)
	}
	return nil
}

// run is the loop goroutine.
func (c *Controller) run() {
	defer close(c.done)
	ticker := time.NewTicker(c.cfg.TickInterval)
	defer ticker.Stop()
	for {
		var events chan *event
		if c.canTakeEvents() {
			events = c.events
		}
		waitStart := c.now()
		select {
		case <-c.stop:
			c.failInflight(errStopped)
			return
		case <-ticker.C:
			c.rn.Tick()
			c.onTick()
		case m := <-c.recvc:
			c.observePeer(m)
			if err := c.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
				c.logger.Debug("raft step", "err", err)
			}
		case ev := <-events:
			c.handleEvents(ev)
		case report := <-c.reports:
			report(c.rn)
		}
		c.raftStats.noteWait(waitStart, c.now())
		c.drain()
		c.maybeBootstrap()
		c.drain()
		c.active.Store(c.serving())
		if err := c.fatalErr(); err != nil {
			c.active.Store(false)
			// Kafka fails every pending write with NOT_CONTROLLER when
			// its controller renounces; the cause goes along.
			c.failInflight(fmt.Errorf("%w: %w", errNotController, err))
			// Keep draining events with the error until Close.
			c.failEventsUntilStop(err)
			return
		}
	}
}

func (c *Controller) failEventsUntilStop(err error) {
	for {
		select {
		case <-c.stop:
			return
		case ev := <-c.events:
			ev.reply <- eventResult{err: err}
		case <-c.recvc:
		case <-c.reports:
		}
	}
}

// drain processes every pending Ready.
func (c *Controller) drain() {
	for c.fatalErr() == nil && c.rn.HasReady() {
		c.handleReady()
	}
}

// serving reports whether this node is the leader, has applied everything
// committed before its term, and the log is bootstrapped.
func (c *Controller) serving() bool {
	return c.isLeader && c.appliedTerm == c.term && c.committed.Features[metadata.MetadataVersionFeature] != 0
}

// canTakeEvents: the leader serves them while the pipeline has room; a
// follower that knows the leader answers NOT_CONTROLLER; a node in an
// election keeps them queued.
func (c *Controller) canTakeEvents() bool {
	if c.serving() {
		return c.hasRoom()
	}
	return !c.isLeader && c.leadRaftID != raft.None && c.leadRaftID != c.raftID
}

func (c *Controller) handleReady() {
	rd := c.rn.Ready()
	if rd.SoftState != nil {
		c.onSoftState(rd.SoftState)
	}
	if rd.HardState != nil && !raft.IsEmptyHardState(rd.HardState) {
		c.term = rd.HardState.GetTerm()
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := c.rlog.ApplySnapshot(rd.Snapshot); err != nil {
			c.setFatal(fmt.Errorf("persisting snapshot from the leader: %w", err))
			return
		}
		img, err := imageFromSnapshot(c.info.ClusterID, rd.Snapshot)
		if err != nil {
			c.setFatal(err)
			return
		}
		img.LeaderID = c.committed.LeaderID
		c.committed = img
		c.appliedIndex = rd.Snapshot.GetMetadata().GetIndex()
		c.appliedTerm = rd.Snapshot.GetMetadata().GetTerm()
		c.confState = rd.Snapshot.GetMetadata().GetConfState()
		c.snapshotIndex = c.appliedIndex
		c.publish(img)
		c.noteApplied(c.appliedIndex)
		c.logger.Info("installed a metadata snapshot from the leader", "offset", c.appliedIndex, "bytes", len(rd.Snapshot.GetData()))
	}
	if err := c.rlog.Save(rd.HardState, rd.Entries, rd.MustSync); err != nil {
		c.setFatal(fmt.Errorf("persisting metadata log: %w", err))
		return
	}
	if len(rd.Messages) > 0 && c.cfg.Transport != nil {
		c.cfg.Transport.Send(rd.Messages)
	}
	for _, e := range rd.CommittedEntries {
		if err := c.applyEntry(e); err != nil {
			c.setFatal(err)
			return
		}
	}
	// What this Ready committed of this node's proposals has been answered;
	// the rest can no longer commit under its term. (A term never changes
	// while a node stays leader, but comparing terms costs nothing.)
	if len(c.inflight) > 0 && (!c.isLeader || c.inflight[0].term != c.term) {
		c.failInflight(errNotController)
	}
	c.rn.Advance(rd)
	c.updateQuorumStatus()
	c.maybeSnapshot()
}

func (c *Controller) onSoftState(ss *raft.SoftState) {
	wasLeader := c.isLeader
	c.isLeader = ss.RaftState == raft.StateLeader
	if ss.Lead != c.leadRaftID {
		c.leadRaftID = ss.Lead
		img := *c.committed
		img.LeaderID = nodeIDOf(ss.Lead)
		c.committed = &img
		c.publish(&img)
	}
	if wasLeader && !c.isLeader {
		// handleReady fails the pending proposals once it has applied
		// what this Ready commits.
		c.logger.Info("lost metadata quorum leadership", "leader", nodeIDOf(ss.Lead), "pending", len(c.inflight))
	}
	if !wasLeader && c.isLeader {
		c.logger.Info("became the active controller")
		// Every registered broker gets a fresh session from the new leader.
		c.sessions = map[int32]*brokerSession{}
		now := c.now()
		for id := range c.committed.Brokers {
			c.sessions[id] = &brokerSession{lastSeen: now, metadataOffset: -1, controlledShutdownOffset: -1, fencedOffset: c.committed.Offset}
		}
		// Brokers that died with the previous leader are found at once
		// rather than after a session timeout (liveness.go); the probes
		// start once this leader serves.
		time.AfterFunc(newLeaderProbeDelay, c.probeAllBrokers)
	}
}

func (c *Controller) applyEntry(e *pb.Entry) error {
	switch e.GetType() {
	case pb.EntryConfChange:
		var cc pb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			return fmt.Errorf("decoding conf change at %d: %w", e.GetIndex(), err)
		}
		c.confState = c.rn.ApplyConfChange(&cc)
	case pb.EntryConfChangeV2:
		var cc pb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			return fmt.Errorf("decoding conf change at %d: %w", e.GetIndex(), err)
		}
		if err := c.applyConfChangeV2(e, &cc); err != nil {
			return err
		}
	case pb.EntryNormal:
		if len(e.GetData()) > 0 {
			if err := c.applyRecords(e, e.GetData(), "metadata log entry"); err != nil {
				return err
			}
		}
	}
	c.appliedIndex = e.GetIndex()
	c.appliedTerm = e.GetTerm()
	c.noteApplied(c.appliedIndex)
	if e.GetType() != pb.EntryNormal {
		c.snapshotAfterConfChange()
	}
	// The image with this entry is published: whoever settle answers sees
	// it in Image().
	c.settle(e)
	return nil
}

// applyRecords applies the records data holds (an entry's, or a conf
// change's context) to the committed image at e's offset and publishes it
// (loop).
func (c *Controller) applyRecords(e *pb.Entry, data []byte, what string) error {
	recs, err := metadata.DecodeRecords(data)
	if err != nil {
		return fmt.Errorf("%s at offset %d: %w", what, e.GetIndex(), err)
	}
	img, err := metadata.ApplyBatch(c.committed, recs, int64(e.GetIndex()), int64(e.GetTerm()))
	if err != nil {
		return err
	}
	c.committed = img
	c.entriesSinceSn++
	if !c.isLeader {
		c.raftStats.fetchRecords.Record(float64(len(recs)), c.now())
	}
	c.publish(img)
	return nil
}

// trackSessions keeps the leader's broker sessions in step with what it
// proposes, so that decisions on the pending image see the sessions that
// go with it (a second registration in a burst sees the first one's live
// contact). Sessions are the leader's own; a new leader rebuilds them.
func (c *Controller) trackSessions(recs []metadata.Record, offset int64) {
	for _, rec := range recs {
		switch r := rec.(type) {
		case *metadata.RegisterBrokerRecord:
			s := c.sessions[r.BrokerID]
			if s == nil {
				s = &brokerSession{metadataOffset: -1}
				c.sessions[r.BrokerID] = s
			}
			s.lastSeen = c.now()
			s.contacted = true
			s.controlledShutdownOffset = -1
			s.fencedOffset = offset
		case *metadata.UnregisterBrokerRecord:
			delete(c.sessions, r.BrokerID)
		case *metadata.BrokerRegistrationChangeRecord:
			if s := c.sessions[r.BrokerID]; s != nil {
				if r.InControlledShutdown == metadata.ControlledShutdownChangeShutdown {
					s.controlledShutdownOffset = offset
				}
				if r.Fenced == metadata.FenceChangeFence {
					s.controlledShutdownOffset = -1
					s.fencedOffset = offset
				}
			}
		}
	}
}

// maybeBootstrap writes the bootstrap records once the first leader has
// applied the log and finds it empty.
func (c *Controller) maybeBootstrap() {
	c.drain()
	if !c.isLeader || c.appliedTerm != c.term || len(c.inflight) > 0 || c.fatalErr() != nil {
		return
	}
	if c.committed.Features[metadata.MetadataVersionFeature] != 0 {
		return
	}
	c.logger.Info("writing bootstrap metadata records", "features", c.info.Features)
	recs := c.info.bootstrapRecords()
	if c.info.Features[metadata.EligibleLeaderReplicasFeature] > 0 {
		recs = append(recs, c.env.ELRSafetyRecords(c.latest())...)
	}
	c.propose(recs, c.nextIndex(), func(err error) {
		if err != nil {
			c.logger.Warn("bootstrap records were not committed; retrying", "err", err)
		}
	})
}

func (c *Controller) onTick() {
	c.drain()
	if !c.serving() || c.fatalErr() != nil {
		c.resetPeriodicElections()
		c.nextTokenSweep = time.Time{}
		return
	}
	if !c.hasRoom() {
		return
	}
	c.maybeFenceStaleBroker()
	c.runPeriodicElections()
	if c.hasRoom() {
		c.sweepExpiredTokens()
	}
}

// maybeSnapshot writes a snapshot of the applied image and compacts the log
// when the policy says so.
func (c *Controller) maybeSnapshot() {
	if c.appliedIndex <= c.snapshotIndex || c.entriesSinceSn == 0 {
		return
	}
	due := c.entriesSinceSn >= c.cfg.SnapshotMaxEntries ||
		c.rlog.BytesSinceSnapshot() >= c.cfg.SnapshotMaxBytes ||
		c.now().Sub(c.lastSnapshot) >= c.cfg.SnapshotMaxInterval
	if !due {
		return
	}
	c.writeSnapshot()
}

// writeSnapshot writes a snapshot of the applied image and compacts the
// log up to it (loop).
func (c *Controller) writeSnapshot() {
	data := metadata.EncodeRecords(metadata.ImageRecords(c.committed))
	if err := c.rlog.CreateSnapshot(c.appliedIndex, c.confState, data); err != nil {
		if errors.Is(err, raft.ErrSnapOutOfDate) {
			return
		}
		c.setFatal(fmt.Errorf("writing metadata snapshot at offset %d: %w", c.appliedIndex, err))
		return
	}
	c.logger.Debug("wrote metadata snapshot", "offset", c.appliedIndex, "bytes", len(data))
	c.snapshotIndex = c.appliedIndex
	c.entriesSinceSn = 0
	c.lastSnapshot = c.now()
}

// publisher holds the current image and delivers each new one to the
// subscribers, for the Controller and the Follower alike.
type publisher struct {
	image   atomic.Pointer[metadata.Image]
	subsMu  sync.Mutex
	subs    map[*subscription]struct{}
	stopped bool // subsMu
}

// Image returns the current committed image.
func (c *publisher) Image() *metadata.Image { return c.image.Load() }

func (c *publisher) closeSubscriptions() {
	c.subsMu.Lock()
	c.stopped = true
	for s := range c.subs {
		s.close()
	}
	c.subs = nil
	c.subsMu.Unlock()
}

// publish makes img the current image and queues it for subscribers.
func (c *publisher) publish(img *metadata.Image) {
	c.subsMu.Lock()
	defer c.subsMu.Unlock()
	prev := c.image.Swap(img)
	if c.subs == nil && !c.stopped {
		c.subs = map[*subscription]struct{}{}
	}
	for s := range c.subs {
		s.push(prev, img)
	}
}

// Subscribe calls fn for every new image, in order, on one goroutine, first
// with the current image (prev is nil then). It returns a function that
// cancels the subscription.
func (c *publisher) Subscribe(fn func(prev, next *metadata.Image)) (cancel func()) {
	s := &subscription{fn: fn, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	c.subsMu.Lock()
	if c.stopped {
		c.subsMu.Unlock()
		close(s.done)
		return func() {}
	}
	s.push(nil, c.image.Load())
	if c.subs == nil {
		c.subs = map[*subscription]struct{}{}
	}
	c.subs[s] = struct{}{}
	c.subsMu.Unlock()
	go s.run()
	return func() {
		c.subsMu.Lock()
		if c.subs != nil {
			delete(c.subs, s)
		}
		c.subsMu.Unlock()
		s.close()
		// Once cancel returns, fn is not running and will not run again
		// (the caller may close what fn uses). Must not be called from fn.
		<-s.done
	}
}

type imagePair struct{ prev, next *metadata.Image }

type subscription struct {
	fn        func(prev, next *metadata.Image)
	mu        sync.Mutex
	queue     []imagePair
	wake      chan struct{}
	quit      chan struct{}
	done      chan struct{} // closed when run returns
	closeOnce sync.Once
}

func (s *subscription) push(prev, next *metadata.Image) {
	s.mu.Lock()
	s.queue = append(s.queue, imagePair{prev, next})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscription) close() { s.closeOnce.Do(func() { close(s.quit) }) }

func (s *subscription) run() {
	defer close(s.done)
	for {
		select {
		case <-s.quit:
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			q := s.queue
			s.queue = nil
			s.mu.Unlock()
			if len(q) == 0 {
				break
			}
			for _, p := range q {
				select {
				case <-s.quit:
					return
				default:
				}
				s.fn(p.prev, p.next)
			}
		}
	}
}

// raftLogger sends etcd raft's logging to slog.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)              { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(f string, v ...any)   { r.l.Debug(fmt.Sprintf(f, v...)) }
func (r raftLogger) Info(v ...any)               { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(f string, v ...any)    { r.l.Debug(fmt.Sprintf(f, v...)) }
func (r raftLogger) Warning(v ...any)            { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(f string, v ...any) { r.l.Warn(fmt.Sprintf(f, v...)) }
func (r raftLogger) Error(v ...any)              { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(f string, v ...any)   { r.l.Error(fmt.Sprintf(f, v...)) }
func (r raftLogger) Fatal(v ...any)              { r.Panic(v...) }
func (r raftLogger) Fatalf(f string, v ...any)   { r.Panicf(f, v...) }
func (r raftLogger) Panic(v ...any)              { s := fmt.Sprint(v...); r.l.Error(s); panic(s) }
func (r raftLogger) Panicf(f string, v ...any)   { s := fmt.Sprintf(f, v...); r.l.Error(s); panic(s) }
func containsInt32(s []int32, v int32) bool      { return slices.Contains(s, v) }
func withoutInt32(s []int32, v int32) []int32 {
	return slices.DeleteFunc(slices.Clone(s), func(x int32) bool { return x == v })
}
func strPtr(s string) *string { return &s }
