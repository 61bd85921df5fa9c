package broker

// The replica manager: the partitions this broker hosts, driven by the
// metadata image (like Kafka's metadata publisher).
//
// Goroutine ownership and locks: applyImage runs on the controller's
// subscription goroutine and is the only writer of replicaManager.parts
// (under replicaManager.mu, a RWMutex handlers read-lock). Each partition's
// mutable leadership state and waiter set are under partition.mu. Lock
// order: replicaManager.mu before partition.mu; neither is held while
// calling into the log, which has its own lock.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/gregorbroker/gregor/storage"
)

type partition struct {
	tp      storage.TopicPartition
	topicID controller.UUID
	log     *storage.Log

	mu          sync.Mutex
	leader      int32
	leaderEpoch int32
	replicas    []int32
	isr         []int32
	config      storage.LogConfig
	// waiters are long-poll fetches to wake when the high watermark moves.
	waiters map[chan struct{}]struct{}
}

// leadership returns the current leader and epoch.
func (p *partition) leadership() (leader, epoch int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leader, p.leaderEpoch
}

// logConfig is the partition's effective topic configuration.
func (p *partition) logConfig() storage.LogConfig {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.config
}

func (p *partition) isrSize() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.isr)
}

func (p *partition) addWaiter(ch chan struct{}) {
	p.mu.Lock()
	if p.waiters == nil {
		p.waiters = map[chan struct{}]struct{}{}
	}
	p.waiters[ch] = struct{}{}
	p.mu.Unlock()
}

func (p *partition) removeWaiter(ch chan struct{}) {
	p.mu.Lock()
	delete(p.waiters, ch)
	p.mu.Unlock()
}

// wake signals every waiting fetch (non-blocking; each waiter channel has
// room for one signal).
func (p *partition) wake() {
	p.mu.Lock()
	for ch := range p.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
}

// advanceHighWatermark moves the high watermark after an append. With this
// node the only in-sync replica, everything appended is committed.
func (p *partition) advanceHighWatermark() {
	p.log.AdvanceHighWatermark(p.log.LogEndOffset())
	p.wake()
}

type replicaManager struct {
	b *Broker

	mu    sync.RWMutex
	parts map[storage.TopicPartition]*partition

	unsubscribe func()
	// appliedMu guards applied and appliedCh: the offset of the last image
	// reconciled, and a channel closed (and replaced) whenever it moves.
	appliedMu sync.Mutex
	applied   int64
	appliedCh chan struct{}
	// ready is closed once the first image has been applied.
	ready     chan struct{}
	readyOnce sync.Once
	startErr  error
}

func newReplicaManager(b *Broker) *replicaManager {
	return &replicaManager{b: b, parts: map[storage.TopicPartition]*partition{}, ready: make(chan struct{}), appliedCh: make(chan struct{})}
}

// get returns the hosted partition.
func (rm *replicaManager) get(tp storage.TopicPartition) *partition {
	rm.mu.RLock()
	defer rm.mu.RUnlock()
	return rm.parts[tp]
}

// start subscribes to the image and waits until the current one has been
// applied, so that the broker serves with every hosted log open.
func (rm *replicaManager) start(ctx context.Context) error {
	rm.unsubscribe = rm.b.ctrl.Subscribe(rm.applyImage)
	select {
	case <-rm.ready:
		return rm.startErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (rm *replicaManager) stop() {
	if rm.unsubscribe != nil {
		rm.unsubscribe()
	}
}

// applyImage reconciles the hosted partitions with a new image.
func (rm *replicaManager) applyImage(prev, next *controller.Image) {
	first := prev == nil
	err := rm.reconcile(next, first)
	if err != nil {
		rm.b.log.Error("applying metadata to partitions", "offset", next.Offset, "err", err)
	}
	rm.readyOnce.Do(func() {
		rm.startErr = err
		close(rm.ready)
	})
	rm.appliedMu.Lock()
	rm.applied = next.Offset
	close(rm.appliedCh)
	rm.appliedCh = make(chan struct{})
	rm.appliedMu.Unlock()
}

// waitApplied waits (at most timeout) until the partitions reflect the
// image at offset, so that a topic this broker just created can be
// produced to at once instead of answering NOT_LEADER_OR_FOLLOWER.
func (rm *replicaManager) waitApplied(ctx context.Context, offset int64, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		rm.appliedMu.Lock()
		done, ch := rm.applied >= offset, rm.appliedCh
		rm.appliedMu.Unlock()
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

func (rm *replicaManager) reconcile(img *controller.Image, first bool) error {
	self := rm.b.opts.NodeID
	logs := rm.b.opts.Logs
	wanted := map[storage.TopicPartition]bool{}
	var errs []error
	for _, t := range img.Topics {
		for i, p := range t.Partitions {
			if !slices.Contains(p.Replicas, self) {
				continue
			}
			tp := storage.TopicPartition{Topic: t.Name, Partition: int32(i)}
			wanted[tp] = true
			cfg := rm.b.opts.Configs.LogConfig(img, t.Name)
			rm.mu.RLock()
			part := rm.parts[tp]
			rm.mu.RUnlock()
			if part == nil || part.topicID != controller.UUID(t.ID) {
				if part != nil {
					// Same name, new topic ID: the old topic was
					// deleted and recreated.
					rm.remove(tp)
				}
				l, err := logs.GetOrCreate(tp, t.ID, cfg)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				part = &partition{tp: tp, topicID: t.ID, log: l}
				rm.mu.Lock()
				rm.parts[tp] = part
				rm.mu.Unlock()
			} else {
				part.log.SetConfig(cfg)
			}
			part.mu.Lock()
			part.leader, part.leaderEpoch = p.Leader, p.LeaderEpoch
			part.replicas, part.isr = p.Replicas, p.ISR
			part.config = cfg
			part.mu.Unlock()
			if p.Leader == self {
				// A single in-sync replica: the leader's log end is
				// committed.
				if len(p.ISR) == 1 {
					part.advanceHighWatermark()
				}
			}
			if tp.Topic == group.OffsetsTopic && rm.b.groups != nil {
				rm.b.groups.leadershipChanged(part)
			}
		}
	}
	rm.mu.RLock()
	var gone []storage.TopicPartition
	for tp := range rm.parts {
		if !wanted[tp] {
			gone = append(gone, tp)
		}
	}
	rm.mu.RUnlock()
	for _, tp := range gone {
		rm.remove(tp)
		if err := logs.Delete(tp); err != nil {
			errs = append(errs, err)
		}
	}
	if first {
		// Stray logs: on disk but in no topic of the image (deleted
		// while this broker was down).
		for _, tp := range logs.OnDisk() {
			if !wanted[tp] {
				rm.b.log.Info("deleting stray log", "topic", tp.Topic, "partition", tp.Partition)
				if err := logs.Delete(tp); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

func (rm *replicaManager) remove(tp storage.TopicPartition) {
	rm.mu.Lock()
	part := rm.parts[tp]
	delete(rm.parts, tp)
	rm.mu.Unlock()
	if part != nil {
		part.wake()
	}
	if tp.Topic == group.OffsetsTopic && rm.b.groups != nil {
		rm.b.groups.partitionGone(tp.Partition)
	}
}

func topicPartition(topic string, partition int32) storage.TopicPartition {
	return storage.TopicPartition{Topic: topic, Partition: partition}
}
