package decide

// ElectLeaders: preferred and unclean leader elections (Kafka's
// ReplicationControlManager.electLeaders); the election itself is
// partitionchange.go's, with the ISR, ELR and last known leader rules.
// More than maxRecordsPerOp elections fail the whole request with
// POLICY_VIOLATION, as Kafka's bounded record list does.

import (
	"context"
	"maps"
	"slices"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	electionPreferred int8 = 0
	electionUnclean   int8 = 1
)

// ElectLeaders decides an ElectLeaders request.
func (e *Env) ElectLeaders(_ context.Context, img *metadata.Image, _ int64, req *kmsg.ElectLeadersRequest) ([]metadata.Record, *kmsg.ElectLeadersResponse) {
	electionType := req.ElectionType
	if req.Version == 0 {
		electionType = electionPreferred
	}
	if electionType != electionPreferred && electionType != electionUnclean {
		return nil, ElectLeadersFailed(req, NewError(kerr.InvalidRequest, "Unknown election type %d", electionType))
	}
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	var recs []metadata.Record
	elect := func(rt *kmsg.ElectLeadersResponseTopic, partition int32, skipNotNeeded bool) {
		rec, err := e.electLeader(img, rt.Topic, partition, electionType)
		if err != nil && err.err == kerr.ElectionNotNeeded && skipNotNeeded {
			return
		}
		if rec != nil {
			recs = append(recs, rec)
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition = partition
		rp.ErrorCode = err.Code()
		rp.ErrorMessage = err.Message()
		rt.Partitions = append(rt.Partitions, rp)
	}
	if req.Topics == nil {
		for _, name := range slices.Sorted(img.Topics.Keys()) {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = name
			for i := range img.Topic(name).Partitions.All() {
				elect(&rt, int32(i), true)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	} else {
		for _, t := range req.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				elect(&rt, p, false)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if len(recs) > maxRecordsPerOp {
		// Kafka's bounded record list fails the whole request.
		return nil, ElectLeadersFailed(req, NewError(kerr.PolicyViolation, excessivelyLargeOperation))
	}
	return recs, resp
}

// ElectLeadersFailed answers the request, and every partition it names,
// with e.
func ElectLeadersFailed(req *kmsg.ElectLeadersRequest, e *Error) *kmsg.ElectLeadersResponse {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = e.Code()
	for _, t := range req.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = p
			rp.ErrorCode = e.Code()
			rp.ErrorMessage = e.Message()
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// electLeader returns the record electing a leader for one partition, or
// why there is none (Kafka's ReplicationControlManager.electLeader): a
// preferred election makes the first replica the leader if it is in the
// ISR and active (with no leader, it may elect another ISR member); an
// unclean one elects from the ISR, then the ELR, then any active replica.
func (e *Env) electLeader(img *metadata.Image, topic string, partition int32, electionType int8) (metadata.Record, *Error) {
	t := img.Topic(topic)
	if t == nil {
		return nil, NewError(kerr.UnknownTopicOrPartition, "No such topic as %s", topic)
	}
	if partition < 0 || int(partition) >= t.Partitions.Len() {
		return nil, NewError(kerr.UnknownTopicOrPartition, "No such partition as %s-%d", topic, partition)
	}
	p := *t.Partitions.At(int(partition))
	preferred := int32(-1)
	if len(p.Replicas) > 0 {
		preferred = p.Replicas[0]
	}
	if electionType == electionPreferred && p.Leader == preferred || electionType == electionUnclean && p.Leader != -1 {
		return nil, &Error{err: kerr.ElectionNotNeeded}
	}
	pc := e.newPartitionChange(img, t, partition)
	pc.election = electPreferred
	if electionType == electionUnclean {
		pc.election = electUnclean
	}
	rec := pc.build()
	if rec == nil {
		if electionType == electionPreferred {
			return nil, &Error{err: kerr.PreferredLeaderNotAvailable}
		}
		return nil, &Error{err: kerr.EligibleLeadersNotAvailable}
	}
	return rec, nil
}

func sortedBrokerIDs(img *metadata.Image) []int32 { return slices.Sorted(maps.Keys(img.Brokers)) }
