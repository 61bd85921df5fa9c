package replica

// Tiered storage (KIP-405) in the replica layer: the manager hosts the
// remote log manager (package tiered) when the broker has
// remote.log.storage.system.enable, reports its tiered partitions to it,
// and sends consumers' fetches and offset lookups below the local log
// start to it. Followers are answered OFFSET_MOVED_TO_TIERED_STORAGE below
// the leader's local log start, as Kafka answers them.

import (
	"context"
	"errors"
	"time"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/tiered"
	"github.com/twmb/franz-go/pkg/kerr"
)

// remoteDeleteTimeout bounds the deletion of a deleted topic's remote data
// (retried by nobody after: Kafka's RemotePartitionDeleteMetadata is not
// retried either once the topic is gone).
const remoteDeleteTimeout = 5 * time.Minute

// TieredPartitions reports the hosted partitions of tiered topics, with
// this node's role (tiered.Source).
func (m *Manager) TieredPartitions(dst []tiered.Partition) []tiered.Partition {
	var parts []*Partition
	parts = m.appendPartitions(parts)
	for _, p := range parts {
		if p.log == nil || !p.log.Config().RemoteStorageEnable {
			continue
		}
		p.log.SetTiered(true)
		p.mu.RLock()
		leader, epoch := p.isLeaderLocked(), p.leaderEpoch
		p.mu.RUnlock()
		dst = append(dst, tiered.Partition{TP: p.tp, TopicID: p.topicID, Log: p.log, Leader: leader, LeaderEpoch: epoch})
	}
	return dst
}

// StillLeader reports whether this node leads tp at leaderEpoch
// (tiered.Source).
func (m *Manager) StillLeader(tp storage.TopicPartition, leaderEpoch int32) bool {
	p := m.hosted(tp)
	if p == nil {
		return false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.isLeaderLocked() && p.leaderEpoch == leaderEpoch
}

// Tiered is the remote log manager, nil without tiered storage.
func (m *Manager) Tiered() *tiered.Manager { return m.tiered }

// setTiered marks a log tiered when its topic has remote.storage.enable
// and this broker has tiered storage.
func (m *Manager) setTiered(p *Partition, l *storage.Log) {
	if l == nil {
		return
	}
	cfg := l.Config()
	on := m.tiered != nil && cfg.RemoteStorageEnable
	was := l.Tiered()
	l.SetTiered(on)
	if was && !on && m.tiered != nil && cfg.RemoteLogDeleteOnDisable {
		// remote.storage.enable=false with remote.log.delete.on.disable:
		// the remote data goes, and the log starts where the local log
		// does (Kafka's RemoteLogManager on disabling).
		if err := l.AdvanceLogStartOffset(l.LocalLogStartOffset()); err != nil {
			m.log.Warn("moving the log start past the remote data of a topic whose tiered storage was turned off", "partition", l.TopicPartition().String(), "err", err)
		}
		if p == nil {
			return
		}
		p.mu.RLock()
		leader := p.isLeaderLocked()
		p.mu.RUnlock()
		if !leader {
			return // the leader deletes the remote data
		}
		tp, id := p.tp, p.topicID
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), remoteDeleteTimeout)
			defer cancel()
			if err := m.tiered.DeletePartition(ctx, tp, id); err != nil {
				m.log.Warn("deleting the remote data of a topic whose tiered storage was turned off", "partition", tp.String(), "err", err)
			}
		}()
	}
}

// readRemote answers a consumer's fetch below the local log start from
// remote storage.
func (m *Manager) readRemote(p *Partition, params FetchParams, e *FetchEntry, limit int64, maxOffset int64, minOne bool) bool {
	if m.tiered == nil {
		return false
	}
	if m.tiered.FetchQuotaExceeded() {
		// remote.log.manager.fetch.max.bytes.per.second: no remote read
		// now; the partition is answered without records.
		return true
	}
	l := p.log
	res, err := m.tiered.Read(context.Background(), l, p.topicID, e.FetchOffset, int32(limit), maxOffset, minOne, params.Isolation == ReadCommitted)
	if err != nil {
		m.log.Warn("reading from remote storage failed", "partition", p.tp.String(), "offset", e.FetchOffset, "err", err)
		e.Result.Err = storageErr(err)
		return true
	}
	if res.Local {
		return false
	}
	e.Result.Records = res.Records
	if len(res.Aborted) > 0 {
		e.Result.AbortedTransactions = res.Aborted
	}
	return true
}

// isTieredRead reports whether a local read failed because the offset is
// only in remote storage.
func isTieredRead(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && ke == kerr.OffsetMovedToTieredStorage
}

// deleteRemote removes the remote data of a deleted topic's partitions
// that this node led (or, leaderless, was the first replica of), in the
// background.
func (m *Manager) deleteRemote(old *metadata.Topic) {
	if m.tiered == nil {
		return
	}
	for i, meta := range old.Partitions.All() {
		owner := meta.Leader
		if owner < 0 && len(meta.Replicas) > 0 {
			owner = meta.Replicas[0]
		}
		if owner != m.self {
			continue
		}
		tp := TopicPartition{Topic: old.Name, Partition: int32(i)}
		id := old.ID
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), remoteDeleteTimeout)
			defer cancel()
			if err := m.tiered.DeletePartition(ctx, tp, id); err != nil {
				m.log.Warn("deleting a deleted partition's remote data failed", "partition", tp.String(), "err", err)
			}
		}()
	}
}

// tieredLog reports whether l is kept in remote storage by this node.
func (m *Manager) tieredLog(l *storage.Log) bool { return m.tiered != nil && l.Tiered() }
