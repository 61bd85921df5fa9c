package group

// Transactional offset commits: TxnOffsetCommit, and the end of the
// transactions they belong to (CompleteTransaction).
//
// A TxnOffsetCommit writes ordinary OffsetCommit records, but in a
// transactional batch carrying the producer's id and epoch, as Kafka's
// coordinator runtime writes them. Its offsets are pending, held per
// producer id and invisible to OffsetFetch, until the transaction
// coordinator writes the producer's transaction marker to the partition
// (through CompleteTransaction, which appends the marker itself): COMMIT
// makes them the committed offsets, ABORT drops them. Replaying the
// partition does the same when it meets the transactional batch and then
// the marker; a transaction whose marker is not in the log yet stays
// pending after the load.
//
// Of a pending offset and a plain commit of the same partition, the one
// whose record comes later in the log wins when the transaction commits
// (Kafka compares record offsets, so that compacting __consumer_offsets
// cannot change which one is materialised). A tombstone (OffsetDelete,
// DeleteGroups, expiry) drops a partition's pending offsets along with its
// committed one.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// namedPartition is one partition of a topic named by its name.
type namedPartition struct {
	topic     string
	partition int32
}

// addPendingOffset holds e as producerID's pending offset of a group's
// partition (a later one of the same transaction replaces it).
func (s *shard) addPendingOffset(producerID int64, group, topic string, partition int32, e *offsetEntry) {
	groups := s.pending[producerID]
	if groups == nil {
		groups = map[string]*groupOffsets{}
		s.pending[producerID] = groups
	}
	o := groups[group]
	if o == nil {
		o = newGroupOffsets()
		groups[group] = o
	}
	o.put(topic, partition, e)
	open := s.openTxns[group]
	if open == nil {
		open = map[int64]bool{}
		s.openTxns[group] = open
	}
	open[producerID] = true
	s.ensureGroup(group, e.commitTimestamp)
}

// dropPendingOffsets removes every producer's pending offset of a group's
// partition (its tombstone was written).
func (s *shard) dropPendingOffsets(group, topic string, partition int32) {
	for pid := range s.openTxns[group] {
		groups := s.pending[pid]
		if o := groups[group]; o != nil && o.remove(topic, partition) {
			s.forgetPendingGroup(pid, group)
		}
	}
}

// forgetPendingGroup drops producerID's (now empty) pending offsets of
// group, keeping openTxns listing exactly the producers with some.
func (s *shard) forgetPendingGroup(producerID int64, group string) {
	delete(s.pending[producerID], group)
	if len(s.pending[producerID]) == 0 {
		delete(s.pending, producerID)
	}
	if open := s.openTxns[group]; open != nil {
		delete(open, producerID)
		if len(open) == 0 {
			delete(s.openTxns, group)
		}
	}
}

// hasPendingOffset reports whether some open transaction holds an offset
// of the group's partition.
func (s *shard) hasPendingOffset(group, topic string, partition int32) bool {
	for pid := range s.openTxns[group] {
		if s.pending[pid][group].get(topic, partition) != nil {
			return true
		}
	}
	return false
}

// hasOpenTransactions reports whether some open transaction holds an
// offset of the group.
func (s *shard) hasOpenTransactions(group string) bool { return len(s.openTxns[group]) > 0 }

// pendingPartitions lists the partitions of group with a pending offset,
// sorted by topic and partition.
func (s *shard) pendingPartitions(group string) []namedPartition {
	var out []namedPartition
	for pid := range s.openTxns[group] {
		for topic, ps := range s.pending[pid][group].topics {
			for p := range ps {
				out = append(out, namedPartition{topic, p})
			}
		}
	}
	slices.SortFunc(out, func(a, b namedPartition) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	return slices.Compact(out)
}

// replayControl applies a control batch met while replaying: a COMMIT or
// ABORT marker ends its producer's transaction. Other control records are
// not the coordinator's business.
func (s *shard) replayControl(h protocol.BatchHeader, r record) error {
	typ, err := protocol.ParseControlRecordKey(r.key)
	if err != nil {
		return fmt.Errorf("control batch of producer %d: %w", h.ProducerID, err)
	}
	switch typ {
	case protocol.ControlCommit:
		s.endTransaction(h.ProducerID, true)
	case protocol.ControlAbort:
		s.endTransaction(h.ProducerID, false)
	}
	return nil
}

// endTransaction applies producerID's transaction marker: on commit its
// pending offsets become committed unless a plain commit of the same
// partition was written after them; either way they stop being pending.
// A producer with nothing pending here (a retried marker, or a
// transaction that committed no offsets to this partition) changes
// nothing.
func (s *shard) endTransaction(producerID int64, commit bool) {
	groups := s.pending[producerID]
	for _, group := range sortedKeys(groups) {
		o := groups[group]
		s.forgetPendingGroup(producerID, group)
		if !commit {
			continue
		}
		for _, topic := range sortedKeys(o.topics) {
			for p, e := range o.topics[topic] {
				if cur := s.offsets[group].get(topic, p); cur == nil || e.recordOffset > cur.recordOffset {
					s.putOffset(group, topic, p, e)
				}
			}
		}
	}
}

func txnCommitResponse(req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// TxnOffsetCommit stores offsets as part of the request's transaction and
// answers once their transactional batch is durably appended. The offsets
// become visible when the transaction commits (CompleteTransaction).
//
// As Kafka does, partitions of unknown topics are answered
// UNKNOWN_TOPIC_OR_PARTITION before the group is looked at, and the
// group's error (NOT_COORDINATOR, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
// FENCED_INSTANCE_ID, ...) goes to every other partition; a group that
// does not exist is created as a simple group when the commit carries no
// generation. Versions 0-1 get COORDINATOR_NOT_AVAILABLE for
// COORDINATOR_LOAD_IN_PROGRESS (clients before Kafka 2.0 do not expect the
// latter there).
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := txnCommitResponse(req)
	type target struct {
		topic string
		p     *kmsg.TxnOffsetCommitRequestTopicPartition
		code  *int16
	}
	var targets []target
	for i := range req.Topics {
		t := &req.Topics[i]
		info, ok := c.topics.TopicByName(t.Topic)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			code := &resp.Topics[i].Partitions[j].ErrorCode
			if !ok || p.Partition < 0 || p.Partition >= info.Partitions {
				*code = kerr.UnknownTopicOrPartition.Code
				continue
			}
			targets = append(targets, target{t.Topic, p, code})
		}
	}
	if len(targets) == 0 {
		return resp
	}
	fail := func(code int16) *kmsg.TxnOffsetCommitResponse {
		if req.Version < 2 && code == kerr.CoordinatorLoadInProgress.Code {
			code = kerr.CoordinatorNotAvailable.Code
		}
		for _, t := range targets {
			*t.code = code
		}
		return resp
	}
	if req.Group == "" {
		return fail(kerr.InvalidGroupID.Code)
	}
	if req.ProducerID < 0 {
		// Kafka's verification with the transaction coordinator refuses
		// a producer id the transactional id does not have; without a
		// producer id the records would not even be transactional.
		return fail(kerr.InvalidProducerIDMapping.Code)
	}
	s, code := c.lockGroup(req.Group)
	if code != 0 {
		return fail(code)
	}
	defer s.mu.Unlock()
	parts := map[string][]int32{}
	for _, t := range targets {
		parts[t.topic] = append(parts[t.topic], t.p.Partition)
	}
	if code := s.validateCommit(committer{group: req.Group, memberID: req.MemberID, instanceID: req.InstanceID,
		generation: req.Generation, transactional: true, partitions: parts}); code != 0 {
		return fail(code)
	}
	now := c.nowMs()
	var recs []record
	var written []*int16
	for _, t := range targets {
		if t.p.Metadata != nil && int32(len(*t.p.Metadata)) > c.cfg.OffsetMetadataMaxBytes {
			*t.code = kerr.OffsetMetadataTooLarge.Code
			continue
		}
		e := &offsetEntry{offset: t.p.Offset, leaderEpoch: t.p.LeaderEpoch, commitTimestamp: now, expireTimestamp: -1}
		if req.Version < 2 {
			e.leaderEpoch = -1
		}
		if t.p.Metadata != nil {
			e.metadata = *t.p.Metadata
		}
		recs = append(recs, offsetRecord(req.Group, t.topic, t.p.Partition, e))
		written = append(written, t.code)
	}
	s.writeCommits(ctx, recs, now, batchProducer{id: req.ProducerID, epoch: req.ProducerEpoch}, written)
	return resp
}

// CompleteTransaction ends producerID's transaction on a __consumer_offsets
// partition: it appends the transaction marker (COMMIT when commit, ABORT
// otherwise) the transaction coordinator asked for, and then commits or
// drops the producer's pending offsets there. The broker calls it for
// WriteTxnMarkers instead of appending a marker to __consumer_offsets
// itself, as Kafka delegates it to its group coordinator. The marker is
// written even when nothing is pending (a retry, or a transaction that
// committed no offsets here): the log's producer state needs it all the
// same.
//
// Errors wrap a *kerr.Error: NOT_COORDINATOR or
// COORDINATOR_LOAD_IN_PROGRESS when the partition is not served here, or
// the append's own (INVALID_PRODUCER_EPOCH for a stale marker,
// NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ...).
func (c *Coordinator) CompleteTransaction(ctx context.Context, partition int32, producerID int64, producerEpoch int16, coordinatorEpoch int32, commit bool) error {
	result := "ABORT"
	if commit {
		result = "COMMIT"
	}
	s, code := c.lockPartition(partition)
	if code != 0 {
		return fmt.Errorf("writing the %s marker of producer %d to %s-%d: %w",
			result, producerID, OffsetsTopic, partition, kerr.ErrorForCode(code))
	}
	defer s.mu.Unlock()
	marker := protocol.EndTxnMarkerBatch(producerID, producerEpoch, commit, coordinatorEpoch, c.nowMs())
	if _, err := s.appendBatch(ctx, marker, 1); err != nil {
		var ke *kerr.Error
		if !asKerr(err, &ke) && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", kerr.RequestTimedOut, err)
		}
		return fmt.Errorf("writing the %s marker of producer %d: %w", result, producerID, err)
	}
	s.endTransaction(producerID, commit)
	return nil
}
