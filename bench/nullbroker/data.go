package nullbroker

import (
	"errors"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceTopicIDsFrom is the version from which Produce names topics by id.
const produceTopicIDsFrom = 13

func unknownTopic(version, idFrom int16) int16 {
	if version >= idFrom {
		return kerr.UnknownTopicID.Code
	}
	return kerr.UnknownTopicOrPartition.Code
}

func (c *conn) metadata(kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	s := c.srv
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = nodeID, s.host, s.port
	resp.Brokers = []kmsg.MetadataResponseBroker{b}
	cluster := clusterID
	resp.ClusterID = &cluster
	resp.ControllerID = nodeID
	// v0 asks for every topic with an empty list, v1+ with a null one.
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for _, t := range s.topics.all() {
			resp.Topics = append(resp.Topics, topicMetadata(t))
		}
		return resp
	}
	autoCreate := req.Version < 4 || req.AllowAutoTopicCreation
	for _, rt := range req.Topics {
		var t *topic
		if rt.Topic != nil {
			t = s.topics.named(*rt.Topic)
			if t == nil && autoCreate && *rt.Topic != "" {
				t, _ = s.topics.create(*rt.Topic, int32(s.cfg.DefaultPartitions))
			}
		} else {
			t = s.topics.withID(rt.TopicID)
		}
		if t == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if rt.Topic == nil {
				mt.ErrorCode = kerr.UnknownTopicID.Code
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, topicMetadata(t))
	}
	return resp
}

func topicMetadata(t *topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.name
	mt.Topic, mt.TopicID = &name, t.id
	for p := int32(0); p < t.partitions(); p++ {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p, nodeID, 0
		mp.Replicas, mp.ISR, mp.OfflineReplicas = []int32{nodeID}, []int32{nodeID}, []int32{}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

func (c *conn) createTopics(kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		n := rt.NumPartitions
		if len(rt.ReplicaAssignment) > 0 {
			n = int32(len(rt.ReplicaAssignment))
		} else if n == -1 {
			n = int32(c.srv.cfg.DefaultPartitions)
		}
		switch {
		case rt.Topic == "":
			st.ErrorCode = kerr.InvalidTopicException.Code
		case n <= 0:
			st.ErrorCode = kerr.InvalidPartitions.Code
		case c.srv.topics.named(rt.Topic) != nil:
			st.ErrorCode = kerr.TopicAlreadyExists.Code
		default:
			if !req.ValidateOnly {
				c.srv.topics.create(rt.Topic, n)
			}
			st.TopicID = topicID(rt.Topic)
			st.NumPartitions, st.ReplicationFactor = n, 1
			st.Configs = []kmsg.CreateTopicsResponseTopicConfig{}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (c *conn) initProducerID(kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if req.TransactionalID != nil {
		// No transaction coordinator here; the response has no message
		// field, so a transactional client just sees INVALID_REQUEST.
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	resp.ProducerID = c.srv.producerIDs.Add(1)
	resp.ProducerEpoch = 0
	return resp
}

// produce acknowledges every batch without looking past its header.
func (c *conn) produce(kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		t := c.srv.topics.lookup(req.Version, produceTopicIDsFrom, rt.Topic, rt.TopicID)
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			n, err := countRecords(rp.Records)
			switch {
			case t == nil:
				sp.ErrorCode = unknownTopic(req.Version, produceTopicIDsFrom)
			case !t.has(rp.Partition):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case err != nil:
				sp.ErrorCode = kerr.CorruptMessage.Code
			default:
				sp.BaseOffset = t.next[rp.Partition].Add(n) - n
				sp.LogStartOffset = 0
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Acks == 0 {
		return nil
	}
	return resp
}

// countRecords is the number of offsets the batches in records take.
func countRecords(records []byte) (int64, error) {
	var n int64
	for len(records) > 0 {
		_, rest, h, err := protocol.NextBatch(records)
		if err != nil {
			return 0, err
		}
		n += int64(h.LastOffsetDelta) + 1
		records = rest
	}
	if n == 0 {
		return 0, errors.New("no records")
	}
	return n, nil
}

func (c *conn) listOffsets(kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	r := c.srv.ring
	for _, rt := range req.Topics {
		t := c.srv.topics.named(rt.Topic)
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			if t == nil || !t.has(rp.Partition) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			sp.LeaderEpoch = 0
			switch ts := rp.Timestamp; {
			case ts == -1: // latest
				sp.Offset = r.end
			case ts == -3: // the record with the largest timestamp
				sp.Offset, sp.Timestamp = r.end-1, r.timestamp
			case ts >= 0: // every record carries r.timestamp
				if ts <= r.timestamp {
					sp.Offset, sp.Timestamp = 0, r.timestamp
				} else {
					sp.LeaderEpoch = -1
				}
			default: // earliest (-2) and the other special timestamps: the log start
				sp.Offset = 0
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
