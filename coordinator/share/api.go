package share

// The five persister RPCs, as the share coordinator answers them: each
// partition of a request on its own, answered with its own error.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// forEach runs fn for each share partition of a request, under its shard's
// lock, or answers the partition with the shard's error.
func (c *Coordinator) forEach(k Key, fn func(s *shard) int16) int16 {
	s, code := c.lockKey(k)
	if code != 0 {
		return code
	}
	defer s.mu.Unlock()
	return fn(s)
}

// InitializeShareGroupState sets up (or resets) share partitions: a fresh
// snapshot with the request's state epoch and start offset (-1: the leader
// starts from share.auto.offset.reset) and nothing in flight.
func (c *Coordinator) InitializeShareGroupState(ctx context.Context, req *kmsg.InitializeShareGroupStateRequest) *kmsg.InitializeShareGroupStateResponse {
	resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.InitializeShareGroupStateResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			k := Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			code := c.forEach(k, func(s *shard) int16 {
				st := s.states[k]
				if st != nil && p.StateEpoch != -1 && p.StateEpoch < st.stateEpoch {
					return kerr.FencedStateEpoch.Code
				}
				now := c.now().UnixMilli()
				// An explicit start (AlterShareGroupOffsets) has nothing
				// delivered after it yet; -1 leaves the count unknown.
				complete := int32(-1)
				if p.StartOffset >= 0 {
					complete = 0
				}
				v := &snapshotValue{StateEpoch: p.StateEpoch, LeaderEpoch: -1, StartOffset: p.StartOffset,
					DeliveryCompleteCount: complete, CreateTimestamp: now, WriteTimestamp: now}
				if st != nil {
					v.SnapshotEpoch = st.snapshotEpoch + 1
				}
				return s.write(ctx, k, recSnapshot, v)
			})
			rt.Partitions = append(rt.Partitions, kmsg.InitializeShareGroupStateResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// ReadShareGroupState answers a partition leader taking share partitions
// up: their state epoch, start offset and batches. A newer leader epoch
// is recorded first, fencing the previous leader's writes.
func (c *Coordinator) ReadShareGroupState(ctx context.Context, req *kmsg.ReadShareGroupStateRequest) *kmsg.ReadShareGroupStateResponse {
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.ReadShareGroupStateResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			k := Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = c.forEach(k, func(s *shard) int16 {
				st := s.states[k]
				switch {
				case st == nil:
					rp.ErrorMessage = kmsg.StringPtr("The share partition's state is not initialized.")
					return kerr.InvalidRequest.Code
				case p.LeaderEpoch != -1 && p.LeaderEpoch < st.leaderEpoch:
					return kerr.FencedLeaderEpoch.Code
				case p.LeaderEpoch > st.leaderEpoch:
					v := &snapshotValue{SnapshotEpoch: st.snapshotEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: -1, DeliveryCompleteCount: -1}
					if code := s.write(ctx, k, recUpdate, v); code != 0 {
						return code
					}
					st = s.states[k]
				}
				rp.StateEpoch, rp.StartOffset = st.stateEpoch, st.startOffset
				rp.StateBatches = []kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch{}
				for _, b := range st.batches {
					rp.StateBatches = append(rp.StateBatches, kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch{
						FirstOffset: b.First, LastOffset: b.Last, DeliveryState: b.State, DeliveryCount: b.Deliveries,
					})
				}
				return 0
			})
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// WriteShareGroupState records a leader's changes: the start offset (-1:
// unchanged) and the batches whose state changed.
func (c *Coordinator) WriteShareGroupState(ctx context.Context, req *kmsg.WriteShareGroupStateRequest) *kmsg.WriteShareGroupStateResponse {
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.WriteShareGroupStateResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			k := Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			code := c.forEach(k, func(s *shard) int16 {
				st := s.states[k]
				switch {
				case st == nil:
					return kerr.InvalidRequest.Code
				case p.LeaderEpoch != -1 && p.LeaderEpoch < st.leaderEpoch:
					return kerr.FencedLeaderEpoch.Code
				case p.StateEpoch != -1 && p.StateEpoch < st.stateEpoch:
					return kerr.FencedStateEpoch.Code
				}
				add := make([]Batch, 0, len(p.StateBatches))
				for _, b := range p.StateBatches {
					add = append(add, Batch{First: b.FirstOffset, Last: b.LastOffset, State: b.DeliveryState, Deliveries: b.DeliveryCount})
				}
				complete := int32(-1)
				if req.Version >= 1 {
					complete = p.DeliveryCompleteCount
				}
				if st.updates >= c.cfg.UpdatesPerSnapshot {
					start := st.startOffset
					if p.StartOffset >= 0 {
						start = p.StartOffset
					}
					if complete < 0 {
						complete = st.complete
					}
					v := &snapshotValue{SnapshotEpoch: st.snapshotEpoch + 1, StateEpoch: st.stateEpoch,
						LeaderEpoch: max(st.leaderEpoch, p.LeaderEpoch), StartOffset: start, DeliveryCompleteCount: complete,
						CreateTimestamp: st.created, WriteTimestamp: c.now().UnixMilli(), Batches: prune(merge(st.batches, add), start)}
					return s.write(ctx, k, recSnapshot, v)
				}
				v := &snapshotValue{SnapshotEpoch: st.snapshotEpoch, LeaderEpoch: max(st.leaderEpoch, p.LeaderEpoch),
					StartOffset: p.StartOffset, DeliveryCompleteCount: complete, Batches: add}
				return s.write(ctx, k, recUpdate, v)
			})
			rt.Partitions = append(rt.Partitions, kmsg.WriteShareGroupStateResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// DeleteShareGroupState deletes share partitions (a partition that has no
// state is deleted already).
func (c *Coordinator) DeleteShareGroupState(ctx context.Context, req *kmsg.DeleteShareGroupStateRequest) *kmsg.DeleteShareGroupStateResponse {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	for _, t := range req.Topics {
		rt := kmsg.DeleteShareGroupStateResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			k := Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			code := c.forEach(k, func(s *shard) int16 {
				if s.states[k] == nil {
					return 0
				}
				return s.write(ctx, k, recSnapshot, nil)
			})
			rt.Partitions = append(rt.Partitions, kmsg.DeleteShareGroupStateResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// ReadShareGroupStateSummary answers the start offset and delivery-complete
// count of share partitions (-1 when not initialized).
func (c *Coordinator) ReadShareGroupStateSummary(ctx context.Context, req *kmsg.ReadShareGroupStateSummaryRequest) *kmsg.ReadShareGroupStateSummaryResponse {
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
	for _, t := range req.Topics {
		rt := kmsg.ReadShareGroupStateSummaryResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			k := Key{Group: req.GroupID, TopicID: t.TopicID, Partition: p.Partition}
			rp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
			rp.Partition, rp.StartOffset, rp.DeliveryCompleteCount = p.Partition, -1, -1
			rp.ErrorCode = c.forEach(k, func(s *shard) int16 {
				if st := s.states[k]; st != nil {
					rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset, rp.DeliveryCompleteCount = st.stateEpoch, st.leaderEpoch, st.startOffset, st.complete
				}
				return 0
			})
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
