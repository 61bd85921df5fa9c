package decide

// AlterPartition (key 56) v2-3 (KIP-497, KIP-841, KIP-903): a partition
// leader asks for a new ISR (and reports that it recovered from an unclean
// election, KIP-704), decided as Kafka's
// ReplicationControlManager.alterPartition does. The leader's broker epoch
// is checked first (STALE_BROKER_EPOCH for the whole request). Per
// partition, in Kafka's order:
//
//   - unknown topic id: UNKNOWN_TOPIC_ID; unknown partition:
//     UNKNOWN_TOPIC_OR_PARTITION;
//   - a leader or partition epoch newer than this controller's:
//     NOT_CONTROLLER (this controller is likely behind a newer one);
//   - an older leader epoch: FENCED_LEADER_EPOCH;
//   - a sender that is not the leader: INVALID_REQUEST;
//   - an older partition epoch: INVALID_UPDATE_VERSION;
//   - an ISR with a non-replica, a duplicate, or without the leader, a
//     recovering leader with more than itself in the ISR, RECOVERED going
//     back to RECOVERING: INVALID_REQUEST;
//   - an ISR member that is not registered, fenced, in controlled shutdown,
//     or (v3) whose broker epoch is not its registration's:
//     INELIGIBLE_REPLICA.
//
// An accepted change is one PartitionChangeRecord (the partition epoch
// moves by one on replay); an ISR that holds every target replica of a
// reassignment completes it, and with ELR the members that leave an ISR
// below min.insync.replicas join the ELR, which the ISR growing back to it
// empties (partitionchange.go). The answer, sent once
// the record is committed, carries the partition as the record leaves it:
// leader, leader epoch, ISR, leader recovery state, partition epoch. When
// completing a reassignment moved leadership away from the sender, the
// record is written and the answer is NEW_LEADER_ELECTED, as in Kafka. A
// change that changes nothing writes nothing and answers the current
// state. Records that are not committed leave the answer at the commit's
// error for the whole request (NOT_CONTROLLER, REQUEST_TIMED_OUT), with no
// partitions, as in Kafka.
//
// Deviations: versions 0-1 (topic names) are not served, as in Kafka 4; a
// leader recovery state other than 0 or 1 is INVALID_REQUEST.

import (
	"context"
	"slices"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartition decides an AlterPartition request.
func (e *Env) AlterPartition(_ context.Context, img *metadata.Image, _ int64, req *kmsg.AlterPartitionRequest) ([]metadata.Record, *kmsg.AlterPartitionResponse) {
	if req.Version < 2 {
		return nil, AlterPartitionFailed(req, &Error{err: kerr.UnsupportedVersion})
	}
	if err := CheckBrokerEpoch(img, req.BrokerID, req.BrokerEpoch); err != nil {
		return nil, AlterPartitionFailed(req, err)
	}
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	var recs []metadata.Record
	for _, rt := range req.Topics {
		topic := kmsg.NewAlterPartitionResponseTopic()
		topic.TopidID = rt.TopicID
		t := img.TopicByID(rt.TopicID)
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterPartitionResponseTopicPartition()
			p.Partition = rp.Partition
			if t == nil {
				p.ErrorCode = kerr.UnknownTopicID.Code
				topic.Partitions = append(topic.Partitions, p)
				continue
			}
			rec, err := e.alterOnePartition(img, req, t, rp)
			if err != nil {
				p.ErrorCode = err.Code
				topic.Partitions = append(topic.Partitions, p)
				continue
			}
			after := *t.Partitions.At(int(rp.Partition))
			if rec != nil {
				recs = append(recs, rec)
				after = metadata.ApplyPartitionChange(after, rec)
				if rec.Leader != metadata.NoLeaderChange && rec.Leader != req.BrokerID {
					p.ErrorCode = kerr.NewLeaderElected.Code
					topic.Partitions = append(topic.Partitions, p)
					continue
				}
			}
			p.LeaderID = after.Leader
			p.LeaderEpoch = after.LeaderEpoch
			p.ISR = slices.Clone(after.ISR)
			if p.ISR == nil {
				p.ISR = []int32{}
			}
			p.LeaderRecoveryState = int8(after.LeaderRecoveryState)
			p.PartitionEpoch = after.PartitionEpoch
			topic.Partitions = append(topic.Partitions, p)
		}
		resp.Topics = append(resp.Topics, topic)
	}
	return recs, resp
}

// AlterPartitionFailed is the answer with e for the whole request and no
// partitions (Kafka's AlterPartitionRequest.getErrorResponse).
func AlterPartitionFailed(req *kmsg.AlterPartitionRequest, e *Error) *kmsg.AlterPartitionResponse {
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	resp.ErrorCode = e.Code()
	return resp
}

// alterOnePartition checks one partition's requested change and returns its
// record (nil when nothing changes), or the error Kafka answers.
func (e *Env) alterOnePartition(img *metadata.Image, req *kmsg.AlterPartitionRequest, t *metadata.Topic, rp kmsg.AlterPartitionRequestTopicPartition) (*metadata.PartitionChangeRecord, *kerr.Error) {
	if rp.Partition < 0 || int(rp.Partition) >= t.Partitions.Len() {
		return nil, kerr.UnknownTopicOrPartition
	}
	cur := *t.Partitions.At(int(rp.Partition))
	switch {
	case rp.LeaderEpoch > cur.LeaderEpoch, rp.PartitionEpoch > cur.PartitionEpoch:
		return nil, kerr.NotController
	case rp.LeaderEpoch < cur.LeaderEpoch:
		return nil, kerr.FencedLeaderEpoch
	case req.BrokerID != cur.Leader:
		return nil, kerr.InvalidRequest
	case rp.PartitionEpoch < cur.PartitionEpoch:
		return nil, kerr.InvalidUpdateVersion
	}
	isr, epochs := requestedISR(req.Version, rp)
	if !validISR(cur.Replicas, isr) || !containsInt32(isr, cur.Leader) {
		return nil, kerr.InvalidRequest
	}
	state := metadata.LeaderRecoveryState(rp.LeaderRecoveryState)
	switch {
	case state != metadata.LeaderRecovered && state != metadata.LeaderRecovering:
		return nil, kerr.InvalidRequest
	case state == metadata.LeaderRecovering && len(isr) > 1:
		return nil, kerr.InvalidRequest
	case cur.LeaderRecoveryState == metadata.LeaderRecovered && state == metadata.LeaderRecovering:
		return nil, kerr.InvalidRequest
	}
	for i, id := range isr {
		b := img.Brokers[id]
		if b == nil || b.InControlledShutdown || b.Fenced || epochs[i] != -1 && epochs[i] != b.Epoch {
			e.Logger.Info("refusing an ISR with an ineligible replica", "topic", t.Name, "partition", rp.Partition, "leader", req.BrokerID, "replica", id)
			return nil, kerr.IneligibleReplica
		}
	}
	pc := e.newPartitionChange(img, t, rp.Partition)
	pc.isr, pc.recovery = isr, state
	return pc.build(), nil
}

// requestedISR is the new ISR with each member's broker epoch (-1: not
// checked, as in v2 requests).
func requestedISR(version int16, rp kmsg.AlterPartitionRequestTopicPartition) (ids []int32, epochs []int64) {
	if version < 3 {
		for _, id := range rp.NewISR {
			ids, epochs = append(ids, id), append(epochs, -1)
		}
		return ids, epochs
	}
	for _, m := range rp.NewEpochISR {
		ids, epochs = append(ids, m.BrokerID), append(epochs, m.BrokerEpoch)
	}
	return ids, epochs
}

// validISR is Kafka's Replicas.validateIsr: every member is a replica,
// none twice.
func validISR(replicas, isr []int32) bool {
	for i, id := range isr {
		if id < 0 || !containsInt32(replicas, id) || slices.Contains(isr[:i], id) {
			return false
		}
	}
	return true
}
