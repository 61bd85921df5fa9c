package broker

// DescribeProducers (key 61), version 0.
//
// Lists the producers each partition's log tracks for idempotence (and,
// once transactions exist, their open transaction's first offset), as
// kafka-transactions describe-producers shows them. As in Kafka any
// replica with the log answers (the tool asks the leader). An illegal
// topic name is INVALID_TOPIC_EXCEPTION, a topic the principal may not
// READ TOPIC_AUTHORIZATION_FAILED, both before the partitions are looked
// at, as in Kafka.

import (
	"context"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleDescribeProducers(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		var topicErr *kerr.Error
		var topicMsg *string
		if msg := metadata.TopicNameError(t.Topic); msg != "" {
			topicErr, topicMsg = kerr.InvalidTopicException, &msg
		} else if !b.can(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Topic) {
			topicErr = kerr.TopicAuthorizationFailed
		}
		for _, idx := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = idx
			if topicErr != nil {
				rp.ErrorCode, rp.ErrorMessage = topicErr.Code, topicMsg
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			producers, ke := b.replicas.ActiveProducers(replica.TopicPartition{Topic: t.Topic, Partition: idx})
			if ke != nil {
				rp.ErrorCode = ke.Code
			}
			for _, p := range producers {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = p.ProducerID, int32(p.ProducerEpoch)
				ap.LastSequence, ap.LastTimestamp = p.LastSequence, p.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = p.CoordinatorEpoch, p.CurrentTxnStartOffset
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}

func init() {
	register(api{
		key: kmsg.DescribeProducers, min: 0, max: 0,
		listeners:    clientListeners,
		authorizedAs: "READ on each topic",
		handle:       (*Broker).handleDescribeProducers,
	})
}
