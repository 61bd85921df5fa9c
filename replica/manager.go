package replica

import (
	"context"
	"errors"
	"github.com/gregorbroker/gregor/metrics"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metadata/persist"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/tiered"
	"github.com/twmb/franz-go/pkg/kerr"
)

// LogConfigs is a topic's effective log configuration in an image (the
// broker's config provider). The result may depend only on the image's
// configs of the topic and of the brokers (this broker's and the
// cluster-wide default): reconciliation computes it again only when one of
// those changed.
type LogConfigs interface {
	LogConfig(img *metadata.Image, topic string) config.Topic
}

// ImageSource is the metadata the manager follows: fn is called with every
// new image in order, first with the current one (prev nil).
type ImageSource interface {
	Subscribe(fn func(prev, next *metadata.Image)) (cancel func())
}

// Options configure a Manager.
type Options struct {
	NodeID  int32
	Logs    *storage.Manager
	Configs LogConfigs
	Logger  *slog.Logger
	// Peers reach the other brokers and the active controller; nil on a
	// node that replicates nothing (tests of one node): then no follower
	// fetches and no ISR change is sent.
	Peers Peers
	// Fetch configures the follower fetchers (DefaultFetcherConfig when
	// zero).
	Fetch FetcherConfig
	// ReplicaLagTimeMax is replica.lag.time.max.ms (30 s when zero).
	ReplicaLagTimeMax time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// RackAwareReads points consumers at a replica in their rack
	// (replica.selector.class=RackAwareReplicaSelector, KIP-392).
	RackAwareReads bool
	// QuotaWindow measures the replication throttles (DefaultQuotaWindow
	// when zero).
	QuotaWindow QuotaWindow
	// Tiered configures the remote log manager (tiered.go); nil: the
	// broker has no tiered storage (remote.log.storage.system.enable
	// false).
	Tiered *tiered.Options
}

// Manager hosts this node's partitions and serves every operation on
// them (see doc.go).
type Manager struct {
	self    int32
	logs    *storage.Manager
	configs LogConfigs
	log     *slog.Logger

	// applyMu serialises ApplyImage and listener registration, so that
	// listeners hear of each partition's leadership in order. It guards
	// listeners, reconciled, lastVisited and retry.
	applyMu   sync.Mutex
	listeners map[string][]*listenerEntry
	// reconciled is the last image applied (nil before the first): the
	// next one is compared with it, and only what changed is applied.
	reconciled *metadata.Image
	// lastVisited is how many partitions the last reconcile compared.
	lastVisited int
	// parkedRereads counts the reads of parked fetches a wake made
	// (delayedFetch.TryComplete): each reads every partition of its fetch.
	parkedRereads atomic.Int64
	// retry names the topics with a partition whose log failed to open:
	// they are reconciled again with every image, changed or not.
	retry map[string]bool

	mu    sync.RWMutex
	parts map[TopicPartition]*Partition
	// image is the last image applied: whether a partition not hosted
	// here exists at all (NOT_LEADER_OR_FOLLOWER rather than
	// UNKNOWN_TOPIC_OR_PARTITION), and the leader hints of partitions
	// hosted elsewhere.
	image atomic.Pointer[metadata.Image]
	// stats are the topics' produce and fetch meters (topicstats.go);
	// isrShrinks and isrExpands count the committed ISR changes of the
	// partitions this node leads (replication.go).
	stats                  topicStats
	isrShrinks, isrExpands metrics.Counter

	// produceWaits holds acks=all produces until the high watermark passes
	// their batches; fetchWaits holds fetches until MinBytes arrive.
	produceWaits *Purgatory[TopicPartition]
	fetchWaits   *Purgatory[TopicPartition]
	// replicaWaits holds followers' fetches until the log end or the
	// high watermark moves.
	replicaWaits *Purgatory[TopicPartition]
	// lowWaits holds DeleteRecords until the followers' log starts pass
	// the new one.
	lowWaits *Purgatory[TopicPartition]

	// appliedMu guards applied and appliedCh: the offset of the last image
	// reconciled, and a channel closed (and replaced) whenever it moves.
	appliedMu sync.Mutex
	applied   int64
	appliedCh chan struct{}
	ready     chan struct{}
	readyOnce sync.Once
	startErr  error

	unsubscribe func()

	// Replication (replication.go, fetcher.go).
	peers     Peers
	rackAware bool
	// leaderQuota and followerQuota are the replication throttles
	// (throttle.go).
	leaderQuota   *replicationQuota
	followerQuota *replicationQuota
	now           func() time.Time
	lagTimeMax    time.Duration
	brokerEpoch   atomic.Int64
	isr           *isrSender
	fetchers      *fetchers
	stopWorkers   context.CancelFunc
	workers       sync.WaitGroup

	// lease gates this node's leaderships (lease.go); every partition
	// shares it.
	lease      *leaderLease
	leaseState leaseState

	// tiered is the remote log manager (nil: none); its Run loop is
	// stopped by stopTiered and awaited with tieredDone.
	tiered     *tiered.Manager
	stopTiered context.CancelFunc
	tieredDone sync.WaitGroup

	// openHook, when set (tests), sees every batch of logs reconciliation
	// opens, before it opens them.
	openHook func([]storage.LogRequest)
}

// NewManager returns a manager hosting nothing; Start follows the image.
func NewManager(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ReplicaLagTimeMax <= 0 {
		opts.ReplicaLagTimeMax = 30 * time.Second
	}
	if opts.Fetch == (FetcherConfig{}) {
		opts.Fetch = DefaultFetcherConfig()
	}
	m := &Manager{
		self:          opts.NodeID,
		logs:          opts.Logs,
		configs:       opts.Configs,
		log:           opts.Logger,
		listeners:     map[string][]*listenerEntry{},
		retry:         map[string]bool{},
		parts:         map[TopicPartition]*Partition{},
		produceWaits:  NewPurgatory[TopicPartition](),
		fetchWaits:    NewPurgatory[TopicPartition](),
		replicaWaits:  NewPurgatory[TopicPartition](),
		lowWaits:      NewPurgatory[TopicPartition](),
		applied:       -1,
		appliedCh:     make(chan struct{}),
		ready:         make(chan struct{}),
		peers:         opts.Peers,
		rackAware:     opts.RackAwareReads,
		leaderQuota:   newReplicationQuota(opts.QuotaWindow),
		followerQuota: newReplicationQuota(opts.QuotaWindow),
		now:           opts.Now,
		lagTimeMax:    opts.ReplicaLagTimeMax,
	}
	m.brokerEpoch.Store(-1)
	m.lease = newLeaderLease()
	m.leaseState.announcedHeld.Store(true)
	m.fetchers = newFetchers(m, opts.Fetch)
	if opts.Peers != nil {
		m.isr = newISRSender(m)
	}
	if opts.Tiered != nil {
		m.tiered = tiered.New(*opts.Tiered, m)
	}
	return m
}

func (m *Manager) nowMs() int64 { return m.now().UnixMilli() }

// SetPeers sets the way to the other brokers and the controller when it
// could not be given in Options (the broker that implements it is made
// after the manager). It must be called before Start.
func (m *Manager) SetPeers(p Peers) {
	m.peers = p
	if m.isr == nil {
		m.isr = newISRSender(m)
	}
}

// Start follows src and returns once the current image has been applied,
// so that the node serves with every hosted log open.
func (m *Manager) Start(ctx context.Context, src ImageSource) error {
	if m.peers != nil {
		wctx, cancel := context.WithCancel(context.Background())
		m.stopWorkers = cancel
		m.workers.Add(2)
		go func() {
			defer m.workers.Done()
			m.isr.run(wctx)
		}()
		go func() {
			defer m.workers.Done()
			m.isrExpiry(wctx)
		}()
		m.fetchers.start(wctx)
	}
	if m.tiered != nil {
		tctx, cancel := context.WithCancel(context.Background())
		m.stopTiered = cancel
		m.tieredDone.Add(1)
		go func() {
			defer m.tieredDone.Done()
			m.tiered.Run(tctx)
		}()
	}
	m.unsubscribe = src.Subscribe(m.ApplyImage)
	select {
	case <-m.ready:
		return m.startErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop stops following the image and answers every waiting operation
// (with what it has: a fetch its data, a produce REQUEST_TIMED_OUT).
func (m *Manager) Stop() {
	if m.unsubscribe != nil {
		m.unsubscribe()
	}
	m.stopLease()
	if m.stopTiered != nil {
		m.stopTiered()
		m.tieredDone.Wait()
	}
	if m.stopWorkers != nil {
		m.stopWorkers()
		m.fetchers.stop()
		m.workers.Wait()
	}
	m.produceWaits.ExpireAll()
	m.fetchWaits.ExpireAll()
	m.replicaWaits.ExpireAll()
	m.lowWaits.ExpireAll()
}

// PreviousBrokerEpoch is the broker epoch recorded by the last clean
// shutdown of the log dirs (BrokerRegistration's PreviousBrokerEpoch).
func (m *Manager) PreviousBrokerEpoch() (int64, bool) { return m.logs.PreviousBrokerEpoch() }

// SetBrokerEpoch records the broker epoch for the clean-shutdown marker.
func (m *Manager) SetBrokerEpoch(epoch int64) {
	m.brokerEpoch.Store(epoch)
	m.logs.SetBrokerEpoch(epoch)
}

// ApplyImage reconciles the hosted partitions with a new image. It runs on
// the subscription's goroutine.
func (m *Manager) ApplyImage(prev, next *metadata.Image) {
	m.applyMu.Lock()
	m.image.Store(next)
	err := m.reconcile(m.reconciled, next)
	m.reconciled = next
	m.applyMu.Unlock()
	if err != nil {
		m.log.Error("applying metadata to partitions", "offset", next.Offset, "err", err)
	}
	m.readyOnce.Do(func() {
		m.startErr = err
		close(m.ready)
	})
	m.appliedMu.Lock()
	m.applied = next.Offset
	close(m.appliedCh)
	m.appliedCh = make(chan struct{})
	m.appliedMu.Unlock()
}

// WaitApplied waits until the partitions reflect the image at offset (the
// logs of the partitions it adds here are open), so that a topic this node
// just created can be produced to at once instead of answering
// NOT_LEADER_OR_FOLLOWER, or until ctx ends. It reports whether they do.
func (m *Manager) WaitApplied(ctx context.Context, offset int64) bool {
	for {
		m.appliedMu.Lock()
		done, ch := m.applied >= offset, m.appliedCh
		m.appliedMu.Unlock()
		if done {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// reconcile makes the hosted partitions what img says: the partitions
// with a replica here are opened (or updated), the others closed and their
// logs deleted, and on the first image the stray logs (on disk, in no
// topic: deleted while this node was down) deleted. The caller holds
// applyMu.
//
// Only what changed since prev, the image reconciled last, is applied,
// and finding it costs O(changed), not O(all): images are persistent
// (metadata/persist), so a topic no record touched keeps its *Topic and
// the subtrees of the topic map and of a topic's partition vector that
// hold no change are shared and skipped by the diff. A topic is also
// looked at when its configs changed or it has a partition whose log
// failed to open (every partition of it then). Everything is compared when
// there is no prev (the first image) or when what every topic depends on
// changed: the brokers' configs (the log defaults) or this broker's
// registration. A topic's configuration is computed once for all its
// partitions.
//
// New partitions' logs are opened together, after the changes to hosted
// partitions are applied (storage opens them in parallel); each new
// partition is announced and serves only once its log is open.
func (m *Manager) reconcile(prev, img *metadata.Image) error {
	r := &reconciliation{m: m, img: img, all: prev == nil || brokerInputsChanged(m.self, prev, img)}
	if r.all {
		r.wanted = map[TopicPartition]bool{}
		for _, t := range img.Topics.All() {
			var old *metadata.Topic
			if prev != nil {
				old = prev.Topic(t.Name)
			}
			delete(m.retry, t.Name)
			r.topic(old, t, true, true)
		}
		var gone []*Partition
		m.mu.RLock()
		for tp, p := range m.parts {
			if !r.wanted[tp] {
				gone = append(gone, p)
			}
		}
		m.mu.RUnlock()
		for _, p := range gone {
			r.drop(p)
		}
	} else {
		// Only the topics that differ: the persistent topic maps are
		// compared subtree by subtree (O(changed · log topics)), the topic
		// configs only when a config changed, and the retried topics.
		changed := map[string]bool{}
		var removed []*metadata.Topic
		persist.Diff(prev.Topics, img.Topics, func(a, b *metadata.Topic) bool { return a == b },
			func(name string, old *metadata.Topic, _ bool, _ *metadata.Topic, inImg bool) {
				if inImg {
					changed[name] = true
				} else {
					removed = append(removed, old)
				}
			})
		cfgChanged := map[string]bool{}
		for _, name := range img.ChangedConfigs(prev, metadata.ConfigResourceTopic) {
			cfgChanged[name] = true
			changed[name] = true
		}
		for name := range m.retry {
			changed[name] = true
		}
		for name := range changed {
			t := img.Topic(name)
			if t == nil {
				continue
			}
			retried := m.retry[name]
			delete(m.retry, name)
			r.topic(prev.Topic(name), t, cfgChanged[name], retried)
		}
		for _, old := range removed {
			r.dropTopic(old, 0)
			m.deleteRemote(old)
			delete(m.retry, old.Name)
		}
	}
	r.openNew()
	m.lastVisited = r.visited
	if prev == nil {
		for _, tp := range m.logs.OnDisk() {
			if !r.wanted[tp] {
				m.log.Info("deleting stray log", "topic", tp.Topic, "partition", tp.Partition)
				if err := m.logs.Delete(tp); err != nil {
					r.errs = append(r.errs, err)
				}
			}
		}
	}
	return errors.Join(r.errs...)
}

// brokerInputsChanged reports whether something every topic's partitions
// depend on differs between the images: the broker configs (log defaults,
// this broker's and the cluster's) or this broker's registration.
func brokerInputsChanged(self int32, prev, img *metadata.Image) bool {
	if prev.Brokers[self] != img.Brokers[self] {
		return true
	}
	for _, name := range []string{strconv.Itoa(int(self)), ""} {
		res := metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: name}
		if !maps.Equal(prev.Configs[res], img.Configs[res]) {
			return true
		}
	}
	return false
}

// reconciliation is one image's reconcile in progress.
type reconciliation struct {
	m   *Manager
	img *metadata.Image
	// all: every topic is compared; wanted then collects the partitions
	// with a replica here, so that the others can be dropped.
	all    bool
	wanted map[TopicPartition]bool
	// opens are the new partitions, with what the image says of them.
	opens []toOpen
	errs  []error
	// visited counts the partitions compared (lastVisited, for tests).
	visited int
}

type toOpen struct {
	tp   TopicPartition
	id   protocol.UUID
	meta metadata.Partition
	cfg  *config.Topic
}

// topic applies a topic that is new or changed (or compared anyway); old
// is the topic under that name in the previous image, if any. Every
// partition is visited when the topic is new, its configs changed or
// every is set (the first image, a retry of logs that failed to open);
// otherwise only the partitions that differ from old's, found by
// comparing the persistent partition vectors leaf by leaf.
func (r *reconciliation) topic(old, t *metadata.Topic, cfgChanged, every bool) {
	m := r.m
	// One configuration per topic, shared by its partitions (not a
	// 256-byte copy in each).
	var cfg *config.Topic
	topicCfg := func() *config.Topic {
		if cfg == nil {
			c := m.configs.LogConfig(r.img, t.Name)
			cfg = &c
		}
		return cfg
	}
	if old != nil && old.ID != t.ID {
		// Same name, new topic ID: the old topic was deleted and
		// recreated; its logs must not serve the new one.
		r.dropTopic(old, 0)
		m.deleteRemote(old)
		old = nil
	}
	visit := func(i int, meta *metadata.Partition) {
		r.visited++
		tp := TopicPartition{Topic: t.Name, Partition: int32(i)}
		p := m.hosted(tp)
		if !slices.Contains(meta.Replicas, m.self) {
			if p != nil {
				r.drop(p)
			}
			return
		}
		if r.wanted != nil {
			r.wanted[tp] = true
		}
		if p != nil && p.topicID != t.ID {
			r.drop(p)
			p = nil
		}
		if p == nil || p.log == nil {
			if p != nil {
				// Offline: retried as a new partition.
				m.forget(p)
			}
			r.opens = append(r.opens, toOpen{tp: tp, id: t.ID, meta: *meta, cfg: topicCfg()})
			return
		}
		if !cfgChanged && old != nil && i < old.Partitions.Len() && samePartition(*old.Partitions.At(i), *meta) {
			return
		}
		var newCfg *config.Topic
		if cfgChanged {
			newCfg = topicCfg()
			p.log.SetConfig(newCfg)
			m.setTiered(p, p.log)
		}
		p.update(*meta, newCfg, m.nowMs())
		r.settle(p)
	}
	if old == nil || cfgChanged || every {
		for i, meta := range t.Partitions.All() {
			visit(i, meta)
		}
	} else {
		persist.DiffVectors(old.Partitions, t.Partitions, func(a, b *metadata.Partition) bool { return samePartition(*a, *b) },
			func(i int, _, meta *metadata.Partition) {
				if meta != nil {
					visit(i, meta)
				}
			})
	}
	if old != nil && old.Partitions.Len() > t.Partitions.Len() {
		r.dropTopic(old, t.Partitions.Len())
	}
}

// samePartition reports whether the image's view of a partition is
// unchanged (every change bumps the partition epoch; the rest is compared
// too, as it is cheap).
func samePartition(a, b metadata.Partition) bool {
	return a.PartitionEpoch == b.PartitionEpoch && a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch &&
		slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.ISR, b.ISR)
}

// dropTopic drops the hosted partitions of old from index from on.
func (r *reconciliation) dropTopic(old *metadata.Topic, from int) {
	for i := from; i < old.Partitions.Len(); i++ {
		if p := r.m.hosted(TopicPartition{Topic: old.Name, Partition: int32(i)}); p != nil && p.topicID == old.ID {
			r.drop(p)
		}
	}
}

// drop stops hosting p and deletes its log.
func (r *reconciliation) drop(p *Partition) {
	r.m.remove(p)
	if err := r.m.logs.Delete(p.tp); err != nil {
		r.errs = append(r.errs, err)
	}
}

// settle tells the partition's listeners and waiting operations of its new
// state: the high watermark may move with the ISR, waiting produces and
// fetches complete or fail with a leadership change.
func (r *reconciliation) settle(p *Partition) {
	if p.log != nil {
		p.maybeAdvanceHighWatermark()
	}
	if r.m.peers != nil {
		r.m.fetchers.sync(p)
		r.m.maybeReportRecovered(p)
	}
	r.m.announce(p)
	r.m.wake(p.tp)
}

// openNew opens the logs of the new partitions together, then hosts and
// announces each. A log that fails to open leaves its partition offline
// (KAFKA_STORAGE_ERROR) and its topic to be retried with the next image.
func (r *reconciliation) openNew() {
	if len(r.opens) == 0 {
		return
	}
	m := r.m
	reqs := make([]storage.LogRequest, len(r.opens))
	for i, n := range r.opens {
		reqs[i] = storage.LogRequest{TopicPartition: n.tp, TopicID: n.id, Config: n.cfg}
	}
	if m.openHook != nil {
		m.openHook(reqs)
	}
	results := m.logs.OpenLogs(reqs)
	for i, n := range r.opens {
		res := results[i]
		if res.Err != nil {
			r.errs = append(r.errs, res.Err)
			m.retry[n.tp.Topic] = true
		}
		m.setTiered(nil, res.Log)
		p := newPartition(n.tp, n.id, m.self, res.Log, m.lease)
		p.update(n.meta, n.cfg, m.nowMs())
		m.mu.Lock()
		m.parts[n.tp] = p
		m.mu.Unlock()
		r.settle(p)
	}
}

// remove stops hosting p: it stops serving, its listeners hear it resign,
// and whatever waits on it fails. The caller holds applyMu.
func (m *Manager) remove(p *Partition) {
	m.mu.Lock()
	if m.parts[p.tp] == p {
		delete(m.parts, p.tp)
	}
	m.mu.Unlock()
	p.markRemoved()
	m.fetchers.sync(p)
	m.announce(p)
	m.wake(p.tp)
}

// forget takes an offline partition out of the map without announcing
// anything (it never led: listeners were never told of it), so that its
// log is opened again. The caller holds applyMu.
func (m *Manager) forget(p *Partition) {
	m.mu.Lock()
	if m.parts[p.tp] == p {
		delete(m.parts, p.tp)
	}
	m.mu.Unlock()
}

// wake retries the operations waiting on tp. The caller holds no
// partition or log lock.
func (m *Manager) wake(tp TopicPartition) {
	m.produceWaits.CheckAndComplete(tp)
	m.fetchWaits.CheckAndComplete(tp)
	m.replicaWaits.CheckAndComplete(tp)
	m.lowWaits.CheckAndComplete(tp)
}

// hosted returns the partition if this node hosts it.
func (m *Manager) hosted(tp TopicPartition) *Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.parts[tp]
}

// partitions is every hosted partition, as the map holds them now.
func (m *Manager) partitions() []*Partition { return m.appendPartitions(nil) }

// appendPartitions appends the hosted partitions to dst (the metrics
// reuse one slice from scrape to scrape).
func (m *Manager) appendPartitions(dst []*Partition) []*Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	dst = slices.Grow(dst, len(m.parts))
	for _, p := range m.parts {
		dst = append(dst, p)
	}
	return dst
}

// Hosts reports whether this node hosts tp with an open log.
func (m *Manager) Hosts(tp TopicPartition) bool {
	p := m.hosted(tp)
	return p != nil && p.log != nil
}

// Leads reports whether this node serves as tp's leader now: it hosts it,
// the image names it the leader and, for a replicated partition, the
// leader lease runs (lease.go).
func (m *Manager) Leads(tp TopicPartition) bool {
	p := m.hosted(tp)
	if p == nil {
		return false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.isLeaderLocked()
}

// LeaderHint is the leader a NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
// answer names (Produce v10+ and Fetch v12+ CurrentLeader); -1 when none
// is known.
type LeaderHint struct {
	ID    int32
	Epoch int32
}

var noLeaderHint = LeaderHint{ID: -1, Epoch: -1}

// partitionOrError is Kafka's ReplicaManager.getPartitionOrError: the
// hosted partition, KAFKA_STORAGE_ERROR when it is offline,
// NOT_LEADER_OR_FOLLOWER when the partition exists but has no replica
// here, UNKNOWN_TOPIC_OR_PARTITION when it does not exist.
func (m *Manager) partitionOrError(tp TopicPartition) (*Partition, *kerr.Error) {
	if p := m.hosted(tp); p != nil {
		if p.log == nil || p.log.Err() != nil {
			return nil, kerr.KafkaStorageError
		}
		return p, nil
	}
	if m.imageHas(tp) {
		return nil, kerr.NotLeaderForPartition
	}
	return nil, kerr.UnknownTopicOrPartition
}

func (m *Manager) imageHas(tp TopicPartition) bool {
	img := m.image.Load()
	if img == nil {
		return false
	}
	t := img.Topic(tp.Topic)
	return t != nil && tp.Partition >= 0 && int(tp.Partition) < t.Partitions.Len()
}

// leaderPartition is the one leadership and epoch check every operation
// goes through, with Kafka's choice and order of errors: first the hosted
// partition (partitionOrError), then the request's current leader epoch
// (FENCED_LEADER_EPOCH when older than the partition's,
// UNKNOWN_LEADER_EPOCH when newer; currentEpoch -1 skips it), then
// leadership when requireLeader (NOT_LEADER_OR_FOLLOWER) — Kafka's
// Partition.getLocalLog. With an error it returns the leader hint a
// NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH answer carries: the
// partition's own view when hosted, the image's otherwise.
func (m *Manager) leaderPartition(tp TopicPartition, currentEpoch int32, requireLeader bool) (*Partition, *kerr.Error, LeaderHint) {
	p, ke := m.partitionOrError(tp)
	if ke != nil {
		return nil, ke, m.hintFor(tp, ke, nil)
	}
	p.mu.RLock()
	ke = p.checkLeaderEpochLocked(currentEpoch)
	if ke == nil && requireLeader && !p.isLeaderLocked() {
		ke = kerr.NotLeaderForPartition
	}
	p.mu.RUnlock()
	if ke != nil {
		return nil, ke, m.hintFor(tp, ke, p)
	}
	return p, nil, noLeaderHint
}

// hintFor is the CurrentLeader of an answer with error ke (Kafka's
// KafkaApis.getCurrentLeader): only NOT_LEADER_OR_FOLLOWER and
// FENCED_LEADER_EPOCH name one.
func (m *Manager) hintFor(tp TopicPartition, ke *kerr.Error, p *Partition) LeaderHint {
	if ke != kerr.NotLeaderForPartition && ke != kerr.FencedLeaderEpoch {
		return noLeaderHint
	}
	if p == nil {
		p = m.hosted(tp)
	}
	if p != nil {
		p.mu.RLock()
		serving, leader, epoch := !p.removed && p.log != nil, p.leader, p.leaderEpoch
		p.mu.RUnlock()
		if serving {
			return LeaderHint{ID: leader, Epoch: epoch}
		}
	}
	if img := m.image.Load(); img != nil {
		if t := img.Topic(tp.Topic); t != nil && tp.Partition >= 0 && int(tp.Partition) < t.Partitions.Len() {
			meta := *t.Partitions.At(int(tp.Partition))
			return LeaderHint{ID: meta.Leader, Epoch: meta.LeaderEpoch}
		}
	}
	return noLeaderHint
}
