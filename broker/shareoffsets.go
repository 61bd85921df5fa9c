package broker

// DescribeShareGroupOffsets (key 90) v0-1, AlterShareGroupOffsets (key 91)
// v0 and DeleteShareGroupOffsets (key 92) v0: share groups' start offsets,
// as Kafka 4.3's KafkaApis and GroupCoordinatorService serve them.
//
//   - Describe: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED) and
//     topic. With topics named, each partition's share-partition start
//     offset and leader epoch from the share coordinator's summary, and (v1)
//     its lag, the high watermark less the start offset and the records
//     delivered for good since; a partition never initialized, or not in
//     the topic, is answered start -1, epoch 0, lag -1 and no error; a topic
//     not described is TOPIC_AUTHORIZATION_FAILED (appended after the
//     others), one not in the image start -1 with no error. With no topics,
//     the group's initialized partitions (unauthorized topics left out).
//     As in Kafka, named topics are described whatever the group is.
//   - Alter: READ on the group and each topic; the group must be an empty
//     share group (it is created when there is none); the partitions'
//     share state is initialized at the given offsets.
//   - Delete: DELETE on the group, READ on each topic; the group must be an
//     empty share group; the topics' share state is deleted.
//
// All three answer UNSUPPORTED_VERSION unless share.version >= 1.

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/coordinator/share"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleDescribeShareGroupOffsets(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	r.GoAsync(func() {
		for _, g := range req.Groups {
			resp.Groups = append(resp.Groups, b.describeShareOffsets(ctx, r, g))
		}
		r.Respond(resp)
	})
}

func (b *Broker) describeShareOffsets(ctx context.Context, r *network.Request, rg kmsg.DescribeShareGroupOffsetsRequestGroup) kmsg.DescribeShareGroupOffsetsResponseGroup {
	out := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
	out.GroupID = rg.GroupID
	out.Topics = []kmsg.DescribeShareGroupOffsetsResponseGroupTopic{}
	switch {
	case !b.shareEnabled():
		out.ErrorCode = kerr.UnsupportedVersion.Code
		return out
	case !b.can(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, rg.GroupID):
		out.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return out
	}
	img := b.meta.Image()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if rg.Topics == nil {
		parts, code := b.groups.coord.InitializedSharePartitions(rg.GroupID)
		if code != 0 {
			out.ErrorCode = code
			out.ErrorMessage = kmsg.StringPtr(kafkaMessage(code))
			return out
		}
		for _, id := range sortedIDs(parts) {
			t := img.TopicByID(protocol.UUID(id))
			if t == nil || !b.can(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Name) {
				continue
			}
			out.Topics = append(out.Topics, b.describeShareTopic(ctx, rg.GroupID, t.Name, id, int32(t.Partitions.Len()), parts[id]))
		}
		return out
	}
	var denied []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	for _, rt := range rg.Topics {
		if !b.can(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, rt.Topic) {
			dt := kmsg.DescribeShareGroupOffsetsResponseGroupTopic{Topic: rt.Topic}
			for _, p := range rt.Partitions {
				dp := unknownShareOffset(p)
				dp.ErrorCode, dp.ErrorMessage = kerr.TopicAuthorizationFailed.Code, kmsg.StringPtr(kafkaMessage(kerr.TopicAuthorizationFailed.Code))
				dt.Partitions = append(dt.Partitions, dp)
			}
			denied = append(denied, dt)
			continue
		}
		t := img.Topic(rt.Topic)
		if t == nil {
			dt := kmsg.DescribeShareGroupOffsetsResponseGroupTopic{Topic: rt.Topic}
			for _, p := range rt.Partitions {
				dt.Partitions = append(dt.Partitions, unknownShareOffset(p))
			}
			out.Topics = append(out.Topics, dt)
			continue
		}
		out.Topics = append(out.Topics, b.describeShareTopic(ctx, rg.GroupID, t.Name, t.ID, int32(t.Partitions.Len()), rt.Partitions))
	}
	out.Topics = append(out.Topics, denied...)
	return out
}

func unknownShareOffset(p int32) kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition {
	dp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
	dp.Partition, dp.StartOffset, dp.LeaderEpoch, dp.Lag = p, -1, 0, -1
	return dp
}

// describeShareTopic is one topic's partitions: start offsets from the
// share coordinator's summaries, lag against the high watermark.
func (b *Broker) describeShareTopic(ctx context.Context, group, name string, id [16]byte, count int32, partitions []int32) kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	dt := kmsg.DescribeShareGroupOffsetsResponseGroupTopic{Topic: name, TopicID: id}
	p := &sharePersister{b: b}
	for _, part := range partitions {
		dp := unknownShareOffset(part)
		if part >= 0 && part < count {
			sum, err := p.Summary(ctx, share.Key{Group: group, TopicID: id, Partition: part})
			if err == nil {
				dp.StartOffset, dp.LeaderEpoch = sum.StartOffset, max(sum.LeaderEpoch, 0)
				if sum.StartOffset >= 0 && sum.DeliveryCompleteCount >= 0 {
					if hw, code := b.shareHighWatermark(ctx, replica.TopicPartition{Topic: name, Partition: part}); code != 0 {
						dp.StartOffset, dp.LeaderEpoch = 0, 0
						dp.ErrorCode, dp.ErrorMessage = code, kmsg.StringPtr(kafkaMessage(code))
					} else {
						dp.Lag = hw - sum.StartOffset - int64(sum.DeliveryCompleteCount)
					}
				}
			}
		}
		dt.Partitions = append(dt.Partitions, dp)
	}
	return dt
}

// shareHighWatermark is a partition's high watermark, from its leader.
func (b *Broker) shareHighWatermark(ctx context.Context, tp replica.TopicPartition) (int64, int16) {
	if b.replicas.Leads(tp) {
		lo := b.replicas.ListOffset(tp, -1, -1, replica.ReadUncommitted, -1)
		if lo.Err != nil {
			return 0, lo.Err.Code
		}
		return lo.Offset, 0
	}
	leader := imageLeader(b.meta.Image(), tp)
	if leader < 0 {
		return 0, kerr.LeaderNotAvailable.Code
	}
	ends, err := b.listEndOffsets(ctx, leader, []replica.TopicPartition{tp})
	if err != nil {
		return 0, kerr.UnknownServerError.Code
	}
	end, ok := ends[tp]
	if !ok {
		return 0, kerr.UnknownTopicOrPartition.Code
	}
	return end, 0
}

func (b *Broker) handleAlterShareGroupOffsets(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	fail := func(code int16) {
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(kafkaMessage(code))
		r.Respond(resp)
	}
	if code := b.shareAdminRefusal(r, kmsg.ACLOperationRead, req.GroupID); code != 0 {
		fail(code)
		return
	}
	img := b.meta.Image()
	inner := *req
	inner.Topics = nil
	var refused []kmsg.AlterShareGroupOffsetsResponseTopic
	for _, t := range req.Topics {
		code := int16(0)
		switch {
		case !b.can(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Topic):
			code = kerr.TopicAuthorizationFailed.Code
		case img.Topic(t.Topic) == nil:
			code = kerr.UnknownTopicOrPartition.Code
		default:
			inner.Topics = append(inner.Topics, t)
			continue
		}
		rt := kmsg.AlterShareGroupOffsetsResponseTopic{Topic: t.Topic}
		if it := img.Topic(t.Topic); it != nil {
			rt.TopicID = it.ID
		}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.AlterShareGroupOffsetsResponseTopicPartition{Partition: p.Partition, ErrorCode: code, ErrorMessage: kmsg.StringPtr(kafkaMessage(code))})
		}
		refused = append(refused, rt)
	}
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		out := b.groups.coord.AlterShareGroupOffsets(ctx, &inner)
		if out.ErrorCode != 0 {
			return out
		}
		out.Topics = append(refused, out.Topics...)
		return out
	})
}

func (b *Broker) handleDeleteShareGroupOffsets(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	fail := func(code int16) {
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(kafkaMessage(code))
		r.Respond(resp)
	}
	if code := b.shareAdminRefusal(r, kmsg.ACLOperationDelete, req.GroupID); code != 0 {
		fail(code)
		return
	}
	inner := *req
	inner.Topics = nil
	var refused []kmsg.DeleteShareGroupOffsetsResponseTopic
	for _, t := range req.Topics {
		if !b.can(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Topic) {
			refused = append(refused, kmsg.DeleteShareGroupOffsetsResponseTopic{Topic: t.Topic, ErrorCode: kerr.TopicAuthorizationFailed.Code,
				ErrorMessage: kmsg.StringPtr(kafkaMessage(kerr.TopicAuthorizationFailed.Code))})
			continue
		}
		inner.Topics = append(inner.Topics, t)
	}
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		out := b.groups.coord.DeleteShareGroupOffsets(ctx, &inner)
		if out.ErrorCode != 0 {
			return out
		}
		out.Topics = append(refused, out.Topics...)
		return out
	})
}

// shareAdminRefusal is the top-level refusal of an offsets request: share
// groups off, or op on the group not allowed.
func (b *Broker) shareAdminRefusal(r *network.Request, op kmsg.ACLOperation, group string) int16 {
	switch {
	case !b.shareEnabled():
		return kerr.UnsupportedVersion.Code
	case !b.can(r, op, kmsg.ACLResourceTypeGroup, group):
		return kerr.GroupAuthorizationFailed.Code
	}
	return 0
}

// sortedIDs is a map's topic ids in order.
func sortedIDs(m map[[16]byte][]int32) [][16]byte {
	ids := make([][16]byte, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	return ids
}

func init() {
	register(api{
		key: kmsg.DescribeShareGroupOffsets, min: 0, max: 1,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE on each group and topic",
		handle:       (*Broker).handleDescribeShareGroupOffsets,
	})
	register(api{
		key: kmsg.AlterShareGroupOffsets, min: 0, max: 0,
		listeners:    clientListeners,
		authorizedAs: "READ on the group and each topic",
		errorAnswer: errorAnswerOf(func(_ *kmsg.AlterShareGroupOffsetsRequest, out *kmsg.AlterShareGroupOffsetsResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		handle: (*Broker).handleAlterShareGroupOffsets,
	})
	register(api{
		key: kmsg.DeleteShareGroupOffsets, min: 0, max: 0,
		listeners:    clientListeners,
		authorizedAs: "DELETE on the group, READ on each topic",
		errorAnswer: errorAnswerOf(func(_ *kmsg.DeleteShareGroupOffsetsRequest, out *kmsg.DeleteShareGroupOffsetsResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		handle: (*Broker).handleDeleteShareGroupOffsets,
	})
}
