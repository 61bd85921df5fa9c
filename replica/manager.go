package replica

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/storage"
	"github.com/twmb/franz-go/pkg/kerr"
)

// LogConfigs is a topic's effective log configuration in an image (the
// broker's config provider).
type LogConfigs interface {
	LogConfig(img *controller.Image, topic string) config.Topic
}

// ImageSource is the metadata the manager follows: fn is called with every
// new image in order, first with the current one (prev nil).
type ImageSource interface {
	Subscribe(fn func(prev, next *controller.Image)) (cancel func())
}

// Options configure a Manager.
type Options struct {
	NodeID  int32
	Logs    *storage.Manager
	Configs LogConfigs
	Logger  *slog.Logger
}

// Manager hosts this node's partitions and serves every operation on
// them (see doc.go).
type Manager struct {
	self    int32
	logs    *storage.Manager
	configs LogConfigs
	log     *slog.Logger

	// applyMu serialises ApplyImage and listener registration, so that
	// listeners hear of each partition's leadership in order.
	applyMu   sync.Mutex
	listeners map[string][]*listenerEntry

	mu    sync.RWMutex
	parts map[TopicPartition]*Partition
	// image is the last image applied: whether a partition not hosted
	// here exists at all (NOT_LEADER_OR_FOLLOWER rather than
	// UNKNOWN_TOPIC_OR_PARTITION), and the leader hints of partitions
	// hosted elsewhere.
	image atomic.Pointer[controller.Image]

	// produceWaits holds acks=all produces until the high watermark passes
	// their batches; fetchWaits holds fetches until MinBytes arrive.
	produceWaits *Purgatory[TopicPartition]
	fetchWaits   *Purgatory[TopicPartition]

	// appliedMu guards applied and appliedCh: the offset of the last image
	// reconciled, and a channel closed (and replaced) whenever it moves.
	appliedMu sync.Mutex
	applied   int64
	appliedCh chan struct{}
	ready     chan struct{}
	readyOnce sync.Once
	startErr  error

	unsubscribe func()
}

// NewManager returns a manager hosting nothing; Start follows the image.
func NewManager(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Manager{
		self:         opts.NodeID,
		logs:         opts.Logs,
		configs:      opts.Configs,
		log:          opts.Logger,
		listeners:    map[string][]*listenerEntry{},
		parts:        map[TopicPartition]*Partition{},
		produceWaits: NewPurgatory[TopicPartition](),
		fetchWaits:   NewPurgatory[TopicPartition](),
		applied:      -1,
		appliedCh:    make(chan struct{}),
		ready:        make(chan struct{}),
	}
}

// Start follows src and returns once the current image has been applied,
// so that the node serves with every hosted log open.
func (m *Manager) Start(ctx context.Context, src ImageSource) error {
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
	m.produceWaits.ExpireAll()
	m.fetchWaits.ExpireAll()
}

// PreviousBrokerEpoch is the broker epoch recorded by the last clean
// shutdown of the log dirs (BrokerRegistration's PreviousBrokerEpoch).
func (m *Manager) PreviousBrokerEpoch() (int64, bool) { return m.logs.PreviousBrokerEpoch() }

// SetBrokerEpoch records the broker epoch for the clean-shutdown marker.
func (m *Manager) SetBrokerEpoch(epoch int64) { m.logs.SetBrokerEpoch(epoch) }

// ApplyImage reconciles the hosted partitions with a new image. It runs on
// the subscription's goroutine.
func (m *Manager) ApplyImage(prev, next *controller.Image) {
	m.applyMu.Lock()
	m.image.Store(next)
	err := m.reconcile(next, prev == nil)
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

// WaitApplied waits (at most timeout) until the partitions reflect the
// image at offset, so that a topic this node just created can be produced
// to at once instead of answering NOT_LEADER_OR_FOLLOWER.
func (m *Manager) WaitApplied(ctx context.Context, offset int64, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		m.appliedMu.Lock()
		done, ch := m.applied >= offset, m.appliedCh
		m.appliedMu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		}
	}
}

// reconcile makes the hosted partitions what img says: the partitions
// with a replica here are opened (or updated), the others closed and their
// logs deleted, and on the first image the stray logs (on disk, in no
// topic: deleted while this node was down) deleted. The caller holds
// applyMu.
func (m *Manager) reconcile(img *controller.Image, first bool) error {
	wanted := map[TopicPartition]bool{}
	var errs []error
	for _, t := range img.Topics {
		for i, meta := range t.Partitions {
			if !slices.Contains(meta.Replicas, m.self) {
				continue
			}
			tp := TopicPartition{Topic: t.Name, Partition: int32(i)}
			wanted[tp] = true
			cfg := m.configs.LogConfig(img, t.Name)
			p := m.hosted(tp)
			if p != nil && p.topicID != t.ID {
				// Same name, new topic ID: the old topic was deleted
				// and recreated; its log must not serve the new one.
				m.remove(p)
				if err := m.logs.Delete(tp); err != nil {
					errs = append(errs, err)
				}
				p = nil
			}
			if p == nil || p.log == nil {
				l, err := m.logs.GetOrCreate(tp, t.ID, cfg)
				if err != nil {
					errs = append(errs, err)
				}
				p = newPartition(tp, t.ID, m.self, l)
				m.mu.Lock()
				m.parts[tp] = p
				m.mu.Unlock()
			} else {
				p.log.SetConfig(cfg)
			}
			p.update(meta, cfg)
			if p.log != nil {
				p.maybeAdvanceHighWatermark()
			}
			m.announce(p)
			// Leadership or the high watermark may have moved: waiting
			// produces and fetches complete or fail.
			m.wake(tp)
		}
	}
	var gone []*Partition
	m.mu.RLock()
	for tp, p := range m.parts {
		if !wanted[tp] {
			gone = append(gone, p)
		}
	}
	m.mu.RUnlock()
	for _, p := range gone {
		m.remove(p)
		if err := m.logs.Delete(p.tp); err != nil {
			errs = append(errs, err)
		}
	}
	if first {
		for _, tp := range m.logs.OnDisk() {
			if !wanted[tp] {
				m.log.Info("deleting stray log", "topic", tp.Topic, "partition", tp.Partition)
				if err := m.logs.Delete(tp); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
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
	m.announce(p)
	m.wake(p.tp)
}

// wake retries the operations waiting on tp. The caller holds no
// partition or log lock.
func (m *Manager) wake(tp TopicPartition) {
	m.produceWaits.CheckAndComplete(tp)
	m.fetchWaits.CheckAndComplete(tp)
}

// hosted returns the partition if this node hosts it.
func (m *Manager) hosted(tp TopicPartition) *Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.parts[tp]
}

// Hosts reports whether this node hosts tp with an open log.
func (m *Manager) Hosts(tp TopicPartition) bool {
	p := m.hosted(tp)
	return p != nil && p.log != nil
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
	t := img.Topics[tp.Topic]
	return t != nil && tp.Partition >= 0 && int(tp.Partition) < len(t.Partitions)
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
		if t := img.Topics[tp.Topic]; t != nil && tp.Partition >= 0 && int(tp.Partition) < len(t.Partitions) {
			meta := t.Partitions[tp.Partition]
			return LeaderHint{ID: meta.Leader, Epoch: meta.LeaderEpoch}
		}
	}
	return noLeaderHint
}
