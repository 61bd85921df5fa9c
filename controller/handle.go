package controller

import (
	"context"
	"fmt"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Handle answers one metadata-changing request as the active controller:
// the requests a broker sends it (forwards from clients, and its own
// registration, heartbeats, producer-id allocations and partition
// leaders' ISR changes). Each is answered
// only after its change is committed. In a combined node the broker calls
// it directly while this controller is the active one; a broker elsewhere
// reaches it through this node's controller listener (directly, or in an
// Envelope carrying a client's request).
func (c *Controller) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		return answered(c.CreateTopics(ctx, r))
	case *kmsg.DeleteTopicsRequest:
		return answered(c.DeleteTopics(ctx, r))
	case *kmsg.CreatePartitionsRequest:
		return answered(c.CreatePartitions(ctx, r))
	case *kmsg.AlterConfigsRequest:
		return answered(c.AlterConfigs(ctx, r))
	case *kmsg.IncrementalAlterConfigsRequest:
		return answered(c.IncrementalAlterConfigs(ctx, r))
	case *kmsg.AlterClientQuotasRequest:
		return answered(c.AlterClientQuotas(ctx, r))
	case *kmsg.ElectLeadersRequest:
		return answered(c.ElectLeaders(ctx, r))
	case *kmsg.UpdateFeaturesRequest:
		return answered(c.UpdateFeatures(ctx, r))
	case *kmsg.DescribeQuorumRequest:
		return answered(c.DescribeQuorum(ctx, r))
	case *kmsg.BrokerRegistrationRequest:
		return answered(c.RegisterBroker(ctx, r))
	case *kmsg.BrokerHeartbeatRequest:
		return answered(c.BrokerHeartbeat(ctx, r))
	case *kmsg.AllocateProducerIDsRequest:
		return answered(c.AllocateProducerIDs(ctx, r))
	case *kmsg.AlterPartitionAssignmentsRequest:
		return answered(c.AlterPartitionReassignments(ctx, r))
	case *kmsg.ListPartitionReassignmentsRequest:
		return answered(c.ListPartitionReassignments(ctx, r))
	case *kmsg.AlterPartitionRequest:
		return answered(c.AlterPartition(ctx, r))
	case *kmsg.UnregisterBrokerRequest:
		return answered(c.UnregisterBroker(ctx, r))
	case *kmsg.AddRaftVoterRequest:
		return answered(c.AddRaftVoter(ctx, r))
	case *kmsg.RemoveRaftVoterRequest:
		return answered(c.RemoveRaftVoter(ctx, r))
	case *kmsg.UpdateRaftVoterRequest:
		return answered(c.UpdateRaftVoter(ctx, r))
	case *kmsg.CreateACLsRequest:
		return answered(c.CreateACLs(ctx, r))
	case *kmsg.DeleteACLsRequest:
		return answered(c.DeleteACLs(ctx, r))
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		return answered(c.AlterUserScramCredentials(ctx, r))
	case *kmsg.CreateDelegationTokenRequest:
		return answered(c.CreateDelegationToken(ctx, r))
	case *kmsg.RenewDelegationTokenRequest:
		return answered(c.RenewDelegationToken(ctx, r))
	case *kmsg.ExpireDelegationTokenRequest:
		return answered(c.ExpireDelegationToken(ctx, r))
	}
	return nil, fmt.Errorf("the controller does not handle %s", kmsg.NameForKey(req.Key()))
}

// answered turns a typed nil answer into metadata.ErrNoAnswer.
func answered[R any, P interface {
	*R
	kmsg.Response
}](resp P) (kmsg.Response, error) {
	if resp == nil {
		return nil, metadata.ErrNoAnswer
	}
	return resp, nil
}
