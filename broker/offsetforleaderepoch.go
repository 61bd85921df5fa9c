package broker

// OffsetForLeaderEpoch (key 23), versions 2-4.
//
// Answered by the replica manager from the partition log's leader epoch
// cache: the largest epoch <= the requested one and the offset where it
// ended (the log end offset for the current epoch). Consumers use it to
// detect truncation after a leader change. Gregor's followers learn of
// divergence from Fetch's DivergingEpoch instead, as Kafka's have since
// 2.7 (replica/replication.go); a follower's request (ReplicaID set) is
// answered as a consumer's. The current leader epoch is checked
// (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH) as in Kafka. CLUSTER_ACTION
// on the cluster (a follower) or DESCRIBE on each topic (a consumer) is
// needed; the partitions of the other topics get
// TOPIC_AUTHORIZATION_FAILED, listed after the others.

import (
	"context"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleOffsetForLeaderEpoch(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	who := identityOf(r)
	cluster := b.authz == nil || b.allowedQuiet(who, kmsg.ACLOperationClusterAction, kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName)
	var denied []kmsg.OffsetForLeaderEpochResponseTopic
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		if !cluster && !b.allowed(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Topic) {
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			denied = append(denied, rt)
			continue
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = p.Partition
			eo := b.replicas.OffsetForLeaderEpoch(replica.TopicPartition{Topic: t.Topic, Partition: p.Partition}, p.CurrentLeaderEpoch, p.LeaderEpoch)
			rp.LeaderEpoch, rp.EndOffset = eo.LeaderEpoch, eo.EndOffset
			if eo.Err != nil {
				rp.ErrorCode = eo.Err.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	resp.Topics = append(resp.Topics, denied...)
	r.Respond(resp)
}

func init() {
	register(api{
		key: kmsg.OffsetForLeaderEpoch, min: 2, max: 4,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE on each topic; CLUSTER_ACTION for a follower",
		handle:       (*Broker).handleOffsetForLeaderEpoch,
	})
}
