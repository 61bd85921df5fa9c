package group

// Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and offsets
// retention. Each commit is an OffsetCommit record; a deletion or an
// expiry is its tombstone. Transactional commits (txnoffsets.go) are the
// same records in transactional batches, held pending until their
// transaction ends.

import (
	"context"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

type offsetEntry struct {
	offset          int64
	leaderEpoch     int32
	metadata        string
	commitTimestamp int64
	expireTimestamp int64 // -1 when the commit carried no retention
	topicID         [16]byte
	// recordOffset is where the commit's record sits in the log: of a
	// transactional commit and a plain one of the same partition, the one
	// written last wins when the transaction commits, as in Kafka.
	recordOffset int64
}

type groupOffsets struct {
	topics map[string]map[int32]*offsetEntry
}

func newGroupOffsets() *groupOffsets {
	return &groupOffsets{topics: map[string]map[int32]*offsetEntry{}}
}

func (o *groupOffsets) get(topic string, partition int32) *offsetEntry {
	if o == nil {
		return nil
	}
	return o.topics[topic][partition]
}

func (o *groupOffsets) put(topic string, partition int32, e *offsetEntry) {
	ps := o.topics[topic]
	if ps == nil {
		ps = map[int32]*offsetEntry{}
		o.topics[topic] = ps
	}
	ps[partition] = e
}

// remove drops one partition's entry and reports whether o is empty now.
func (o *groupOffsets) remove(topic string, partition int32) (empty bool) {
	if ps := o.topics[topic]; ps != nil {
		delete(ps, partition)
		if len(ps) == 0 {
			delete(o.topics, topic)
		}
	}
	return len(o.topics) == 0
}

// replayOffset applies an offset commit found at offset in a batch of
// producerID: a plain commit is committed at once, a transactional one is
// held pending for its producer. A tombstone removes the partition's
// committed offset and its pending ones alike.
func (s *shard) replayOffset(k parsedKey, value []byte, offset, producerID int64) error {
	if value == nil {
		if o := s.offsets[k.group]; o != nil && o.remove(k.topic, k.partition) {
			delete(s.offsets, k.group)
		}
		s.dropPendingOffsets(k.group, k.topic, k.partition)
		return nil
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(value); err != nil {
		return err
	}
	e := &offsetEntry{
		offset: v.Offset, leaderEpoch: -1, metadata: v.Metadata,
		commitTimestamp: v.CommitTimestamp, expireTimestamp: -1, topicID: v.TopicID,
		recordOffset: offset,
	}
	if v.Version >= 3 {
		e.leaderEpoch = v.LeaderEpoch
	}
	if v.Version == 1 {
		e.expireTimestamp = v.ExpireTimestamp
	}
	if producerID != protocol.NoProducerID {
		s.addPendingOffset(producerID, k.group, k.topic, k.partition, e)
		return nil
	}
	s.putOffset(k.group, k.topic, k.partition, e)
	return nil
}

// putOffset makes e the committed offset of a group's partition. A commit
// for a group that does not exist makes a "simple" classic group, as in
// Kafka, so that it is listed and can be deleted; a transactional commit
// makes one too, when it is replayed, even before its transaction ends.
func (s *shard) putOffset(group, topic string, partition int32, e *offsetEntry) {
	o := s.offsets[group]
	if o == nil {
		o = newGroupOffsets()
		s.offsets[group] = o
	}
	o.put(topic, partition, e)
	s.ensureGroup(group, e.commitTimestamp)
}

func (s *shard) ensureGroup(group string, nowMs int64) {
	if s.classic[group] == nil && s.consumer[group] == nil && s.share[group] == nil && s.streams[group] == nil {
		s.classic[group] = newClassicGroup(group, nowMs)
	}
}

func offsetRecord(group, topic string, partition int32, e *offsetEntry) record {
	v := kmsg.NewOffsetCommitValue()
	v.Offset = e.offset
	v.LeaderEpoch = e.leaderEpoch
	v.Metadata = e.metadata
	v.CommitTimestamp = e.commitTimestamp
	switch {
	case e.expireTimestamp >= 0:
		v.Version = offsetValueVersionExpire
		v.ExpireTimestamp = e.expireTimestamp
	case e.topicID != [16]byte{}:
		v.Version = offsetValueVersionTopicID
		v.TopicID = e.topicID
	default:
		v.Version = offsetValueVersion
	}
	return record{key: offsetKey(group, topic, partition), value: v.AppendTo(nil)}
}

func offsetTombstone(group, topic string, partition int32) record {
	return record{key: offsetKey(group, topic, partition)}
}

func commitResponse(req *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// OffsetCommit stores offsets and answers once their records are durably
// appended.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	if req.Group == "" {
		return commitResponse(req, kerr.InvalidGroupID.Code)
	}
	s, code := c.lockGroup(req.Group)
	if code != 0 {
		return commitResponse(req, code)
	}
	defer s.mu.Unlock()
	parts := map[string][]int32{}
	for _, t := range req.Topics {
		name := t.Topic
		if req.Version >= 10 {
			info, _ := c.topics.TopicByID(t.TopicID)
			name = info.Name
		}
		for _, p := range t.Partitions {
			parts[name] = append(parts[name], p.Partition)
		}
	}
	if code := s.validateCommit(committer{group: req.Group, memberID: req.MemberID, instanceID: req.InstanceID,
		generation: req.Generation, version: req.Version, partitions: parts}); code != 0 {
		return commitResponse(req, code)
	}
	resp := commitResponse(req, 0)
	now := c.nowMs()
	var recs []record
	var codes []*int16 // of the partitions in recs
	for i, t := range req.Topics {
		name, id := t.Topic, t.TopicID
		var topicCode int16
		if req.Version >= 10 {
			info, ok := c.topics.TopicByID(t.TopicID)
			if !ok {
				topicCode = kerr.UnknownTopicID.Code
			}
			name = info.Name
		} else if info, ok := c.topics.TopicByName(t.Topic); ok {
			id = info.ID
		} else {
			topicCode = kerr.UnknownTopicOrPartition.Code
		}
		info, _ := c.topics.TopicByName(name)
		for j, p := range t.Partitions {
			rp := &resp.Topics[i].Partitions[j]
			switch {
			case topicCode != 0:
				rp.ErrorCode = topicCode
				continue
			case p.Partition < 0 || p.Partition >= info.Partitions:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			case p.Metadata != nil && int32(len(*p.Metadata)) > c.cfg.OffsetMetadataMaxBytes:
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			e := &offsetEntry{offset: p.Offset, leaderEpoch: p.LeaderEpoch, commitTimestamp: now, expireTimestamp: -1}
			if req.Version < 6 {
				e.leaderEpoch = -1
			}
			if p.Metadata != nil {
				e.metadata = *p.Metadata
			}
			if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
				e.expireTimestamp = now + req.RetentionTimeMillis
			}
			if req.Version >= 10 {
				e.topicID = id
			}
			codes = append(codes, &rp.ErrorCode)
			recs = append(recs, offsetRecord(req.Group, name, p.Partition, e))
		}
	}
	s.writeCommits(ctx, recs, now, noProducer, codes)
	return resp
}

// writeCommits appends offset commit records as one batch of producer p
// (noProducer, or a transaction's) and applies them once it is durable;
// if the append fails, every code gets the commit's error instead.
func (s *shard) writeCommits(ctx context.Context, recs []record, nowMs int64, p batchProducer, codes []*int16) {
	if len(recs) == 0 {
		return
	}
	base, err := s.appendBatch(ctx, encodeProducerBatch(recs, nowMs, p), len(recs))
	if err != nil {
		code := commitErrorCode(err)
		for _, c := range codes {
			*c = code
		}
		return
	}
	for i := range recs {
		_ = s.replayAt(base+int64(i), p.id, recs[i])
	}
	s.c.events.offsetCommits.Add(uint64(len(recs)))
}

// commitErrorCode is the answer to a commit whose append failed: a batch
// too large is the commit's fault (INVALID_COMMIT_OFFSET_SIZE, as Kafka
// answers it), the rest as for any coordinator write.
func commitErrorCode(err error) int16 {
	var ke *kerr.Error
	if asKerr(err, &ke) && (ke == kerr.MessageTooLarge || ke == kerr.RecordListTooLarge || ke == kerr.InvalidFetchSize) {
		return kerr.InvalidCommitOffsetSize.Code
	}
	return appendErrorCode(err)
}

// committer is who commits offsets: the member fields of OffsetCommit or
// TxnOffsetCommit.
type committer struct {
	group      string
	memberID   string
	instanceID *string
	generation int32 // the member epoch for consumer-protocol members
	// version is OffsetCommit's; transactional commits do not depend on it.
	version       int16
	transactional bool
	// partitions are the partitions committed, by topic name (a streams
	// member one epoch behind may commit only its own active tasks).
	partitions map[string][]int32
}

// validateCommit is Kafka's validateOffsetCommit of both groups' kinds.
// Transactional commits are checked less (TxnOffsetCommit v0-v2 carry no
// member, and the group's state does not matter to them), and a stale
// member epoch is ILLEGAL_GENERATION to them, as Kafka answers.
func (s *shard) validateCommit(cm committer) int16 {
	if s.share[cm.group] != nil {
		return kerr.GroupIDNotFound.Code // Kafka: "Group X is not a consumer group."
	}
	if sg := s.streams[cm.group]; sg != nil {
		code := s.validateStreamsCommit(sg, cm)
		if code == kerr.StaleMemberEpoch.Code && cm.transactional {
			code = kerr.IllegalGeneration.Code
		}
		return code
	}
	if cg := s.consumer[cm.group]; cg != nil {
		if cm.generation < 0 && len(cg.members) == 0 {
			return 0
		}
		m := cg.members[cm.memberID]
		if m == nil {
			return kerr.UnknownMemberID.Code
		}
		if m.usesClassicProtocol() {
			// A classic member commits with its generation, which is
			// its member epoch.
			if cm.generation != m.epoch {
				return kerr.IllegalGeneration.Code
			}
			return 0
		}
		if !cm.transactional && cm.version < 9 {
			return kerr.UnsupportedVersion.Code
		}
		if cm.generation != m.epoch {
			if cm.transactional {
				return kerr.IllegalGeneration.Code
			}
			return kerr.StaleMemberEpoch.Code
		}
		return 0
	}
	g := s.classic[cm.group]
	if g == nil {
		if cm.generation < 0 {
			return 0 // a simple group, created when the record is applied
		}
		if !cm.transactional && cm.version >= 9 {
			return kerr.GroupIDNotFound.Code
		}
		return kerr.IllegalGeneration.Code
	}
	if g.state == classicDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if cm.generation < 0 && g.state == classicEmpty {
		return 0
	}
	if cm.generation >= 0 || cm.memberID != "" || cm.instanceID != nil {
		if code := g.validateMember(cm.memberID, cm.instanceID); code != 0 {
			return code
		}
		if cm.generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
	} else if !cm.transactional && g.state != classicEmpty {
		return kerr.UnknownMemberID.Code
	}
	if !cm.transactional && g.state == classicCompleting {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// OffsetFetch answers committed offsets, for one group (v0-v7) or many
// (v8+).
func (c *Coordinator) OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			resp.Groups = append(resp.Groups, c.fetchGroup(req.Version, req.RequireStable, rg))
		}
		return resp
	}
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = req.Group
	rg.MemberEpoch = -1
	if req.Topics != nil {
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
		for _, t := range req.Topics {
			rg.Topics = append(rg.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	g := c.fetchGroup(req.Version, req.RequireStable, rg)
	resp.ErrorCode = g.ErrorCode
	for _, t := range g.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
			if req.Version < 2 && g.ErrorCode != 0 {
				rp.ErrorCode = g.ErrorCode
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func noOffset(partition int32) kmsg.OffsetFetchResponseGroupTopicPartition {
	p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
	p.Partition = partition
	p.Offset = -1
	p.LeaderEpoch = -1
	p.Metadata = strPtr("")
	return p
}

// fetchGroup answers one group's committed offsets. Pending transactional
// offsets are not visible; with requireStable (v7+), a partition that has
// some is answered UNSTABLE_OFFSET_COMMIT instead, for the consumer to
// retry once the transaction has ended.
func (c *Coordinator) fetchGroup(version int16, requireStable bool, rg kmsg.OffsetFetchRequestGroup) kmsg.OffsetFetchResponseGroup {
	out := kmsg.NewOffsetFetchResponseGroup()
	out.Group = rg.Group
	// With an error, requested partitions are still listed (v0-v1 carry
	// the error only there).
	failWith := func(code int16) kmsg.OffsetFetchResponseGroup {
		out.ErrorCode = code
		for _, t := range rg.Topics {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := noOffset(p)
				if version < 2 {
					rp.ErrorCode = code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
		return out
	}
	if rg.Group == "" && version >= 8 {
		return failWith(kerr.InvalidGroupID.Code)
	}
	s, code := c.lockGroup(rg.Group)
	if code != 0 {
		return failWith(code)
	}
	defer s.mu.Unlock()
	if s.share[rg.Group] != nil {
		return failWith(kerr.GroupIDNotFound.Code)
	}
	if sg := s.streams[rg.Group]; sg != nil && rg.MemberID != nil && version >= 9 && !(rg.MemberEpoch < 0 && *rg.MemberID == "") {
		m := sg.members[*rg.MemberID]
		if m == nil {
			return failWith(kerr.UnknownMemberID.Code)
		}
		if rg.MemberEpoch != m.epoch {
			return failWith(kerr.StaleMemberEpoch.Code)
		}
	}
	if cg := s.consumer[rg.Group]; cg != nil && rg.MemberID != nil && version >= 9 {
		if !(rg.MemberEpoch < 0 && *rg.MemberID == "") {
			m := cg.members[*rg.MemberID]
			if m == nil {
				return failWith(kerr.UnknownMemberID.Code)
			}
			if rg.MemberEpoch != m.epoch {
				return failWith(kerr.StaleMemberEpoch.Code)
			}
		}
	}
	offs := s.offsets[rg.Group]
	lookup := func(topic string, p int32) kmsg.OffsetFetchResponseGroupTopicPartition {
		rp := noOffset(p)
		if requireStable && s.hasPendingOffset(rg.Group, topic, p) {
			rp.ErrorCode = kerr.UnstableOffsetCommit.Code
			return rp
		}
		if e := offs.get(topic, p); e != nil {
			rp.Offset, rp.LeaderEpoch, rp.Metadata = e.offset, e.leaderEpoch, strPtr(e.metadata)
		}
		return rp
	}
	if rg.Topics == nil {
		if offs == nil {
			out.Topics = []kmsg.OffsetFetchResponseGroupTopic{}
			return out
		}
		for _, topic := range sortedKeys(offs.topics) {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = topic
			if version >= 10 {
				info, ok := c.topics.TopicByName(topic)
				if !ok {
					continue
				}
				rt.TopicID = info.ID
			}
			ps := make([]int32, 0, len(offs.topics[topic]))
			for p := range offs.topics[topic] {
				ps = append(ps, p)
			}
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			for _, p := range ps {
				rt.Partitions = append(rt.Partitions, lookup(topic, p))
			}
			out.Topics = append(out.Topics, rt)
		}
		return out
	}
	for _, t := range rg.Topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name := t.Topic
		var topicCode int16
		if version >= 10 {
			info, ok := c.topics.TopicByID(t.TopicID)
			if !ok {
				topicCode = kerr.UnknownTopicID.Code
			}
			name = info.Name
		}
		for _, p := range t.Partitions {
			rp := lookup(name, p)
			if topicCode != 0 {
				rp = noOffset(p)
				rp.ErrorCode = topicCode
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out.Topics = append(out.Topics, rt)
	}
	return out
}

// OffsetDelete removes committed offsets of topics the group no longer
// consumes.
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	s, code := c.lockGroup(req.Group)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	defer s.mu.Unlock()
	var subscribed func(topic string) bool
	if s.share[req.Group] != nil {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp
	}
	if cg := s.consumer[req.Group]; cg != nil {
		subscribed = func(topic string) bool { return cg.subscribedTopicNames()[topic] }
	} else if sg := s.streams[req.Group]; sg != nil {
		subscribed = sg.streamsSubscribed
	} else if g := s.classic[req.Group]; g != nil && g.state != classicDead {
		if g.state != classicEmpty && g.protocolType != "consumer" {
			resp.ErrorCode = kerr.NonEmptyGroup.Code
			return resp
		}
		topics := g.subscribedTopics()
		subscribed = func(topic string) bool { return topics[topic] }
	} else {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp
	}
	var recs []record
	var codes []*int16
	offs := s.offsets[req.Group]
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		isSub := subscribed(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			if isSub {
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			} else if offs.get(t.Topic, p.Partition) != nil || s.hasPendingOffset(req.Group, t.Topic, p.Partition) {
				// The tombstone removes pending transactional offsets too.
				recs = append(recs, offsetTombstone(req.Group, t.Topic, p.Partition))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			codes = append(codes, &resp.Topics[i].Partitions[j].ErrorCode)
		}
	}
	if err := s.write(ctx, recs); err != nil {
		resp.ErrorCode = appendErrorCode(err)
		for _, c := range codes {
			*c = 0
		}
		resp.Topics = nil
		return resp
	}
	for _, r := range recs {
		_ = s.replay(r)
	}
	s.c.events.offsetDeletions.Add(uint64(len(recs)))
	return resp
}

// subscribedTopics decodes the members' consumer-protocol subscriptions
// (only for protocol type "consumer", as Kafka does).
func (g *classicGroup) subscribedTopics() map[string]bool {
	out := map[string]bool{}
	if g.protocolType != "consumer" || g.protocol == "" {
		return out
	}
	for _, m := range g.members {
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			continue
		}
		for _, t := range sub.Topics {
			out[t] = true
		}
	}
	return out
}

// expireOffsets applies offsets.retention.minutes and then deletes groups
// left empty with no offsets, as Kafka's periodic cleanup does. An offset
// whose partition has a pending transactional commit does not expire, and
// a group with any pending transactional offset is not deleted.
func (s *shard) expireOffsets(ctx context.Context, now int64) {
	retention := s.c.cfg.offsetsRetention().Milliseconds()
	var recs []record
	expiredOffsets := 0
	groups := map[string]bool{}
	for id := range s.classic {
		groups[id] = true
	}
	for id := range s.consumer {
		groups[id] = true
	}
	for id := range s.offsets {
		groups[id] = true
	}
	for _, id := range sortedKeys(groups) {
		offs := s.offsets[id]
		remaining := 0
		if offs != nil {
			base, subscribed, ok := s.expirationCondition(id)
			for _, topic := range sortedKeys(offs.topics) {
				ps := offs.topics[topic]
				for _, p := range sortedPartitions(ps) {
					e := ps[p]
					expired := false
					if ok && !subscribed[topic] {
						if e.expireTimestamp >= 0 {
							expired = now >= e.expireTimestamp
						} else {
							expired = now-base(e) >= retention
						}
					}
					if expired && !s.hasPendingOffset(id, topic, p) {
						recs = append(recs, offsetTombstone(id, topic, p))
						expiredOffsets++
					} else {
						remaining++
					}
				}
			}
		}
		if remaining > 0 || s.hasOpenTransactions(id) {
			continue
		}
		if g := s.classic[id]; g != nil && g.state == classicEmpty && len(g.pending) == 0 {
			recs = append(recs, record{key: groupMetadataKey(id)})
		} else if cg := s.consumer[id]; cg != nil && len(cg.members) == 0 {
			recs = append(recs, s.deleteConsumerGroupRecords(cg)...)
		} else if sg := s.streams[id]; sg != nil && len(sg.members) == 0 {
			recs = append(recs, deleteStreamsGroupRecords(sg)...)
		}
	}
	if len(recs) == 0 {
		return
	}
	if err := s.write(ctx, recs); err != nil {
		s.c.log.Warn("expiring offsets failed", "partition", s.partition, "err", err)
		return
	}
	for _, r := range recs {
		_ = s.replay(r)
	}
	s.c.events.offsetExpirations.Add(uint64(expiredOffsets))
	s.c.log.Info("expired offsets and groups", "partition", s.partition, "records", len(recs))
}

func sortedPartitions(ps map[int32]*offsetEntry) []int32 {
	out := make([]int32, 0, len(ps))
	for p := range ps {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// expirationCondition is Kafka's offsetExpirationCondition: the timestamp
// retention counts from, the topics exempt, and whether offsets of this
// group expire at all now.
func (s *shard) expirationCondition(id string) (base func(*offsetEntry) int64, subscribed map[string]bool, ok bool) {
	commitTime := func(e *offsetEntry) int64 { return e.commitTimestamp }
	if cg := s.consumer[id]; cg != nil {
		return commitTime, cg.subscribedTopicNames(), true
	}
	if sg := s.streams[id]; sg != nil {
		subscribed := map[string]bool{}
		if len(sg.members) > 0 && sg.topology != nil {
			for _, st := range sg.topology.Subtopologies {
				for _, t := range st.SourceTopics {
					subscribed[t] = true
				}
				for _, t := range st.RepartitionSourceTopics {
					subscribed[t.Name] = true
				}
			}
		}
		return commitTime, subscribed, true
	}
	g := s.classic[id]
	if g == nil || g.protocolType == "" {
		// A simple group: retention counts from each commit.
		return commitTime, nil, true
	}
	switch {
	case g.state == classicEmpty:
		ts := g.stateTimestamp
		return func(e *offsetEntry) int64 {
			if ts > 0 {
				return ts
			}
			return e.commitTimestamp
		}, nil, true
	case g.protocolType == "consumer" && g.state == classicStable:
		return commitTime, g.subscribedTopics(), true
	}
	return nil, nil, false
}

// validateStreamsCommit is Kafka's StreamsGroup.validateOffsetCommit: an
// admin commit to an empty group, or a member at its epoch; a member
// behind its epoch may still commit the active tasks it was assigned at
// or before the epoch it sends (KAFKA-19779).
func (s *shard) validateStreamsCommit(g *streamsGroup, cm committer) int16 {
	if cm.generation < 0 && len(g.members) == 0 {
		return 0
	}
	if cm.transactional && cm.generation == -1 && cm.memberID == "" && cm.instanceID == nil {
		return 0
	}
	m := g.members[cm.memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case !cm.transactional && cm.version < 9:
		return kerr.UnsupportedVersion.Code
	case cm.generation == m.epoch:
		return 0
	case cm.generation > m.epoch || g.topology == nil:
		return kerr.StaleMemberEpoch.Code
	}
	subOf := map[string]string{}
	for _, st := range g.topology.Subtopologies {
		for _, t := range st.SourceTopics {
			subOf[t] = st.ID
		}
		for _, t := range st.RepartitionSourceTopics {
			subOf[t.Name] = st.ID
		}
	}
	for topic, ps := range cm.partitions {
		sub, ok := subOf[topic]
		if !ok {
			return kerr.StaleMemberEpoch.Code
		}
		for _, p := range ps {
			t := streamsTask{sub, p}
			e, ok := m.epochs[t]
			if !ok || !(m.assigned.Active.has(sub, p) || m.pending.Active.has(sub, p)) || cm.generation < e {
				return kerr.StaleMemberEpoch.Code
			}
		}
	}
	return 0
}

// streamsSubscribed reports whether a streams group reads topic: a source
// or repartition source topic of its topology while it has members.
func (g *streamsGroup) streamsSubscribed(topic string) bool {
	if len(g.members) == 0 || g.topology == nil {
		return false
	}
	for _, st := range g.topology.Subtopologies {
		if slices.Contains(st.SourceTopics, topic) {
			return true
		}
		for _, r := range st.RepartitionSourceTopics {
			if r.Name == topic {
				return true
			}
		}
	}
	return false
}
