package broker

// errorResponse is a request's answer when it fails as a whole (Kafka's
// AbstractRequest.getErrorResponse for each API): the error on every item
// the request named, or at the top where the response has a top-level
// error. Which message goes with the code follows each API: ApiError's
// (kept when it is not the code's default), the code's default message,
// or none.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// defaultMessage is Errors.message() for a code.
func defaultMessage(code int16) *string {
	msg := kafkaMessage(code)
	return &msg
}

// errorResponse is req's answer failing with e, or nil for an API whose
// whole-request failure is not answered this way.
func errorResponse(req kmsg.Request, e apiErr) kmsg.Response {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		out := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, e.code, e.msg
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.DeleteTopicsRequest:
		out := resp.(*kmsg.DeleteTopicsResponse)
		for _, name := range r.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), e.code
			out.Topics = append(out.Topics, rt)
		}
		for _, t := range r.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, e.code
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.CreatePartitionsRequest:
		out := resp.(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, e.code, e.msg
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.AlterConfigsRequest:
		out := resp.(*kmsg.AlterConfigsResponse)
		for _, res := range r.Resources {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = res.ResourceType, res.ResourceName, e.code, e.msg
			out.Resources = append(out.Resources, rr)
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		out := resp.(*kmsg.IncrementalAlterConfigsResponse)
		for _, res := range r.Resources {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = res.ResourceType, res.ResourceName, e.code, e.msg
			out.Resources = append(out.Resources, rr)
		}
	case *kmsg.ElectLeadersRequest:
		out := resp.(*kmsg.ElectLeadersResponse)
		out.ErrorCode = e.code
		for _, t := range r.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, e.code, e.msg
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.UpdateFeaturesRequest:
		out := resp.(*kmsg.UpdateFeaturesResponse)
		out.ErrorCode, out.ErrorMessage = e.code, e.msg
	case *kmsg.DescribeQuorumRequest:
		out := resp.(*kmsg.DescribeQuorumResponse)
		out.ErrorCode, out.ErrorMessage = e.code, defaultMessage(e.code)
	case *kmsg.UnregisterBrokerRequest:
		out := resp.(*kmsg.UnregisterBrokerResponse)
		out.ErrorCode, out.ErrorMessage = e.code, e.msg
		if out.ErrorMessage == nil {
			out.ErrorMessage = defaultMessage(e.code)
		}
	case *kmsg.AlterPartitionAssignmentsRequest:
		out := resp.(*kmsg.AlterPartitionAssignmentsResponse)
		out.ErrorCode, out.ErrorMessage = e.code, e.msg
		for _, t := range r.Topics {
			rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p.Partition, e.code, e.msg
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.ListPartitionReassignmentsRequest:
		out := resp.(*kmsg.ListPartitionReassignmentsResponse)
		out.ErrorCode, out.ErrorMessage = e.code, e.msg
		for _, t := range r.Topics {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.AddRaftVoterRequest:
		out := resp.(*kmsg.AddRaftVoterResponse)
		out.ErrorCode, out.ErrorMessage = e.code, defaultMessage(e.code)
	case *kmsg.RemoveRaftVoterRequest:
		out := resp.(*kmsg.RemoveRaftVoterResponse)
		out.ErrorCode, out.ErrorMessage = e.code, defaultMessage(e.code)
	case *kmsg.UpdateRaftVoterRequest:
		resp.(*kmsg.UpdateRaftVoterResponse).ErrorCode = e.code
	case *kmsg.BrokerRegistrationRequest:
		resp.(*kmsg.BrokerRegistrationResponse).ErrorCode = e.code
	case *kmsg.BrokerHeartbeatRequest:
		resp.(*kmsg.BrokerHeartbeatResponse).ErrorCode = e.code
	case *kmsg.AllocateProducerIDsRequest:
		resp.(*kmsg.AllocateProducerIDsResponse).ErrorCode = e.code
	case *kmsg.AlterPartitionRequest:
		resp.(*kmsg.AlterPartitionResponse).ErrorCode = e.code
	case *kmsg.EnvelopeRequest:
		resp.(*kmsg.EnvelopeResponse).ErrorCode = e.code
	case *kmsg.DescribeACLsRequest:
		out := resp.(*kmsg.DescribeACLsResponse)
		out.ErrorCode, out.ErrorMessage = e.code, e.msg
	case *kmsg.CreateACLsRequest:
		out := resp.(*kmsg.CreateACLsResponse)
		for range r.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = e.code, e.msg
			out.Results = append(out.Results, res)
		}
	case *kmsg.DeleteACLsRequest:
		out := resp.(*kmsg.DeleteACLsResponse)
		for range r.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = e.code, e.msg
			out.Results = append(out.Results, res)
		}
	case *kmsg.DescribeClusterRequest:
		out := resp.(*kmsg.DescribeClusterResponse)
		out.ErrorCode, out.ErrorMessage = e.code, e.msg
	case *kmsg.DescribeClientQuotasRequest:
		out := resp.(*kmsg.DescribeClientQuotasResponse)
		out.ErrorCode, out.ErrorMessage = e.code, e.msg
	case *kmsg.AlterClientQuotasRequest:
		out := resp.(*kmsg.AlterClientQuotasResponse)
		for _, en := range r.Entries {
			re := kmsg.NewAlterClientQuotasResponseEntry()
			re.ErrorCode, re.ErrorMessage = e.code, defaultMessage(e.code)
			for _, ent := range en.Entity {
				rent := kmsg.NewAlterClientQuotasResponseEntryEntity()
				rent.Type, rent.Name = ent.Type, ent.Name
				re.Entity = append(re.Entity, rent)
			}
			out.Entries = append(out.Entries, re)
		}
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		// Results carry no user name, one per user asked about.
		out := resp.(*kmsg.DescribeUserSCRAMCredentialsResponse)
		out.ErrorCode, out.ErrorMessage = e.code, e.msg
		for range r.Users {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.ErrorCode, res.ErrorMessage = e.code, e.msg
			out.Results = append(out.Results, res)
		}
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		// One result per user named, deletions and upsertions together,
		// sorted.
		out := resp.(*kmsg.AlterUserSCRAMCredentialsResponse)
		users := scramAlterationUsers(r)
		slices.Sort(users)
		for _, name := range slices.Compact(users) {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode, res.ErrorMessage = name, e.code, e.msg
			out.Results = append(out.Results, res)
		}
	case *kmsg.JoinGroupRequest:
		out := resp.(*kmsg.JoinGroupResponse)
		out.ErrorCode, out.Generation, out.LeaderID, out.MemberID = e.code, -1, "", ""
		if r.Version >= 7 {
			out.Protocol = nil
		} else {
			out.Protocol = kmsg.StringPtr("")
		}
	case *kmsg.SyncGroupRequest:
		out := resp.(*kmsg.SyncGroupResponse)
		out.ErrorCode, out.MemberAssignment = e.code, []byte{}
	case *kmsg.HeartbeatRequest:
		resp.(*kmsg.HeartbeatResponse).ErrorCode = e.code
	case *kmsg.LeaveGroupRequest:
		resp.(*kmsg.LeaveGroupResponse).ErrorCode = e.code
	case *kmsg.OffsetDeleteRequest:
		resp.(*kmsg.OffsetDeleteResponse).ErrorCode = e.code
	case *kmsg.ConsumerGroupHeartbeatRequest:
		resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode = e.code
	case *kmsg.OffsetCommitRequest:
		out := resp.(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, e.code
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.TxnOffsetCommitRequest:
		out := resp.(*kmsg.TxnOffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, e.code
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.AddPartitionsToTxnRequest:
		out := resp.(*kmsg.AddPartitionsToTxnResponse)
		if r.Version >= 4 {
			out.ErrorCode = e.code
			break
		}
		for _, t := range r.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, e.code
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.InitProducerIDRequest:
		out := resp.(*kmsg.InitProducerIDResponse)
		out.ErrorCode, out.ProducerID, out.ProducerEpoch = e.code, -1, -1
	case *kmsg.AddOffsetsToTxnRequest:
		resp.(*kmsg.AddOffsetsToTxnResponse).ErrorCode = e.code
	case *kmsg.EndTxnRequest:
		resp.(*kmsg.EndTxnResponse).ErrorCode = e.code
	case *kmsg.WriteTxnMarkersRequest:
		out := resp.(*kmsg.WriteTxnMarkersResponse)
		for _, m := range r.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, e.code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			out.Markers = append(out.Markers, rm)
		}
	case *kmsg.AlterReplicaLogDirsRequest:
		out := resp.(*kmsg.AlterReplicaLogDirsResponse)
		for _, d := range r.Dirs {
			for _, t := range d.Topics {
				rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, e.code
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
		}
	case *kmsg.CreateDelegationTokenRequest, *kmsg.RenewDelegationTokenRequest, *kmsg.ExpireDelegationTokenRequest:
		tokenErrorResponse(resp, e.code)
	case *kmsg.DescribeDelegationTokenRequest:
		resp.(*kmsg.DescribeDelegationTokenResponse).ErrorCode = e.code
	default:
		return nil
	}
	return resp
}
