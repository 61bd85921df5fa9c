package broker

// DescribeProducers (key 61), version 0.
//
// Lists the producers each partition's log tracks for idempotence (and,
// once transactions exist, their open transaction's first offset), as
// kafka-transactions describe-producers shows them. As in Kafka any
// replica with the log answers (the tool asks the leader).

import (
	"context"

	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleDescribeProducers(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		for _, idx := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = idx
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
	r.respond(resp)
}
