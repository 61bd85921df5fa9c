package group

// Share group offsets administration (KIP-932): the coordinator's half of
// AlterShareGroupOffsets and DeleteShareGroupOffsets, and the initialized
// partitions DescribeShareGroupOffsets describes when it names no topic.
// The broker does the authorization and the per-topic checks of
// KafkaApis, reads the share state summaries and the end offsets; here
// the group is checked (an empty share group; altering creates one, as
// Kafka does), ShareGroupStatePartitionMetadata records what is
// initialized or being deleted, and the share coordinator is asked
// through Config.ShareState, off the shard's lock.

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitializedSharePartitions is the partitions of group's share state
// that are initialized (DescribeShareGroupOffsets with no topics): none
// for a group that is unknown or not a share group.
func (c *Coordinator) InitializedSharePartitions(group string) (map[[16]byte][]int32, int16) {
	s, code := c.lockGroup(group)
	if code != 0 {
		return nil, code
	}
	defer s.mu.Unlock()
	out := map[[16]byte][]int32{}
	if g := s.share[group]; g != nil {
		for id, st := range g.initialized {
			out[id] = slices.Clone(st.partitions)
		}
	}
	return out, 0
}

// emptyShareGroup returns group's shard locked and the group, which must
// be an empty share group (a new one when create is set and there is
// none), or the error code and message to answer with.
func (c *Coordinator) emptyShareGroup(group string, create bool) (*shard, *shareGroup, int16, string) {
	if group == "" {
		return nil, nil, kerr.InvalidGroupID.Code, ""
	}
	s, code := c.lockGroup(group)
	if code != 0 {
		return nil, nil, code, ""
	}
	g := s.share[group]
	switch {
	case g == nil && s.otherGroupType(group):
		code, msg := kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a share group.", group)
		s.mu.Unlock()
		return nil, nil, code, msg
	case g == nil && !create:
		s.mu.Unlock()
		return nil, nil, kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s not found.", group)
	case g != nil && len(g.members) > 0:
		s.mu.Unlock()
		return nil, nil, kerr.NonEmptyGroup.Code, ""
	case g == nil:
		g = newShareGroup(group)
	}
	return s, g, 0, ""
}

// AlterShareGroupOffsets sets the start offsets of an empty share group's
// partitions (creating the group when there is none). The request holds
// only the topics the broker authorized and found.
func (c *Coordinator) AlterShareGroupOffsets(ctx context.Context, req *kmsg.AlterShareGroupOffsetsRequest) *kmsg.AlterShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	fail := func(code int16, msg string) *kmsg.AlterShareGroupOffsetsResponse {
		resp.ErrorCode, resp.Topics = code, nil
		if msg == "" {
			msg = kerr.ErrorForCode(code).(*kerr.Error).Description
		}
		resp.ErrorMessage = &msg
		return resp
	}
	s, g, code, msg := c.emptyShareGroup(req.GroupID, true)
	if code != 0 {
		return fail(code, msg)
	}
	offsets := map[[16]byte]map[int32]int64{}
	initializing := cloneTopicStates(g.initializing)
	for _, t := range req.Topics {
		rt := kmsg.AlterShareGroupOffsetsResponseTopic{Topic: t.Topic}
		info, ok := c.topics.TopicByName(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.AlterShareGroupOffsetsResponseTopicPartition{Partition: p.Partition}
			if !ok || p.Partition < 0 || p.Partition >= info.Partitions {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				rp.ErrorMessage = kmsg.StringPtr(kerr.UnknownTopicOrPartition.Description)
			} else {
				if offsets[info.ID] == nil {
					offsets[info.ID] = map[int32]int64{}
				}
				offsets[info.ID][p.Partition] = p.StartOffset
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		if ok {
			rt.TopicID = info.ID
			st := initializing[info.ID]
			if st == nil {
				st = &shareTopicState{name: info.Name}
				initializing[info.ID] = st
			}
			for p := range offsets[info.ID] {
				st.partitions = append(st.partitions, p)
			}
			st.partitions = sortedCopy(st.partitions)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(offsets) == 0 {
		s.mu.Unlock()
		return resp
	}
	deleting := map[[16]byte]string{}
	for id, name := range g.deleting {
		if offsets[id] == nil {
			deleting[id] = name
		}
	}
	var recs []record
	if s.share[g.id] == nil {
		s.share[g.id] = g
	}
	s.emit(&recs, shareStatePartitionsRecord(g, initializing, g.initialized, deleting))
	if err := s.write(ctx, recs); err != nil {
		s.mu.Unlock()
		return fail(appendErrorCode(err), "")
	}
	epoch := g.epoch
	partition := s.partition
	s.mu.Unlock()

	if c.cfg.ShareState == nil {
		return fail(kerr.UnsupportedVersion.Code, "")
	}
	err := c.cfg.ShareState.InitializeAt(ctx, req.GroupID, epoch, offsets)
	if err != nil {
		// Kafka leaves the partitions initializing: a heartbeat retries
		// them later from share.auto.offset.reset.
		code := kerr.UnknownServerError.Code
		var ke *kerr.Error
		if asKerr(err, &ke) {
			code = ke.Code
		}
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				rp := &resp.Topics[i].Partitions[j]
				if rp.ErrorCode == 0 {
					rp.ErrorCode, rp.ErrorMessage = code, kmsg.StringPtr(err.Error())
				}
			}
		}
		return resp
	}
	parts := map[[16]byte][]int32{}
	for id, ps := range offsets {
		for p := range ps {
			parts[id] = append(parts[id], p)
		}
	}
	c.finishShareInit(context.WithoutCancel(ctx), partition, req.GroupID, parts, true)
	return resp
}

// DeleteShareGroupOffsets deletes the share state of topics of an empty
// share group.
func (c *Coordinator) DeleteShareGroupOffsets(ctx context.Context, req *kmsg.DeleteShareGroupOffsetsRequest) *kmsg.DeleteShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	fail := func(code int16, msg string) *kmsg.DeleteShareGroupOffsetsResponse {
		resp.ErrorCode, resp.Topics = code, nil
		if msg == "" {
			msg = kerr.ErrorForCode(code).(*kerr.Error).Description
		}
		resp.ErrorMessage = &msg
		return resp
	}
	s, g, code, msg := c.emptyShareGroup(req.GroupID, false)
	if code != 0 {
		return fail(code, msg)
	}
	if len(g.initializing) == 0 && len(g.initialized) == 0 && len(g.deleting) == 0 {
		// No share state recorded at all: Kafka answers no topic.
		s.mu.Unlock()
		return resp
	}
	var failed []kmsg.DeleteShareGroupOffsetsResponseTopic
	toDelete := map[[16]byte][]int32{}
	names := map[[16]byte]string{}
	initialized := cloneTopicStates(g.initialized)
	deleting := map[[16]byte]string{}
	for id, name := range g.deleting {
		deleting[id] = name
	}
	for _, t := range req.Topics {
		info, ok := c.topics.TopicByName(t.Topic)
		switch {
		case !ok:
			failed = append(failed, kmsg.DeleteShareGroupOffsetsResponseTopic{Topic: t.Topic, ErrorCode: kerr.UnknownTopicOrPartition.Code,
				ErrorMessage: kmsg.StringPtr(kerr.UnknownTopicOrPartition.Description)})
		case initialized[info.ID] != nil:
			toDelete[info.ID] = initialized[info.ID].partitions
			delete(initialized, info.ID)
			deleting[info.ID] = info.Name
		case g.deleting[info.ID] != "":
			for p := int32(0); p < info.Partitions; p++ {
				toDelete[info.ID] = append(toDelete[info.ID], p)
			}
		default:
			failed = append(failed, kmsg.DeleteShareGroupOffsetsResponseTopic{Topic: t.Topic, ErrorCode: kerr.UnknownTopicOrPartition.Code,
				ErrorMessage: kmsg.StringPtr("There is no offset information to delete.")})
		}
		if ok {
			names[info.ID] = info.Name
		}
	}
	var recs []record
	s.emit(&recs, shareStatePartitionsRecord(g, g.initializing, initialized, deleting))
	if err := s.write(ctx, recs); err != nil {
		s.mu.Unlock()
		return fail(appendErrorCode(err), "")
	}
	s.mu.Unlock()
	if len(toDelete) == 0 {
		resp.Topics = failed
		return resp
	}
	var done [][16]byte
	for _, id := range sortedTopicIDsOf(toDelete) {
		err := c.cfg.ShareState.Delete(ctx, req.GroupID, map[[16]byte][]int32{id: toDelete[id]})
		if err != nil {
			code := kerr.UnknownServerError.Code
			var ke *kerr.Error
			if asKerr(err, &ke) {
				code = ke.Code
			}
			failed = append(failed, kmsg.DeleteShareGroupOffsetsResponseTopic{Topic: names[id], TopicID: id, ErrorCode: code,
				ErrorMessage: kmsg.StringPtr(kerr.ErrorForCode(code).(*kerr.Error).Description)})
			continue
		}
		done = append(done, id)
		resp.Topics = append(resp.Topics, kmsg.DeleteShareGroupOffsetsResponseTopic{Topic: names[id], TopicID: id})
	}
	resp.Topics = append(resp.Topics, failed...)
	if len(done) == 0 {
		return resp
	}
	// The deleted topics are no longer deleting.
	s, code = c.lockGroup(req.GroupID)
	if code != 0 {
		return resp
	}
	defer s.mu.Unlock()
	if g = s.share[req.GroupID]; g != nil {
		left := map[[16]byte]string{}
		for id, name := range g.deleting {
			if !slices.Contains(done, id) {
				left[id] = name
			}
		}
		recs = nil
		s.emit(&recs, shareStatePartitionsRecord(g, g.initializing, g.initialized, left))
		if err := s.write(ctx, recs); err != nil {
			c.log.Warn("recording deleted share offsets failed", "group", req.GroupID, "err", err)
		}
	}
	return resp
}
