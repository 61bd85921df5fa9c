package controller

// The requests the controller decides (controller/decide): each is a
// method that runs its decision on the loop (runDecision, decide.go) and
// is registered with Handle at package initialisation (decides, handle.go).
// What a request does, and how it is answered when its records are not
// committed, is the decide package's.

import (
	"context"

	"github.com/gregorbroker/gregor/controller/decide"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	decides((*Controller).CreateACLs)
	decides((*Controller).DeleteACLs)
	decides((*Controller).AlterUserScramCredentials)
	decides((*Controller).AlterClientQuotas)
	decides((*Controller).AlterConfigs)
	decides((*Controller).IncrementalAlterConfigs)
	decides((*Controller).UpdateFeatures)
	decides((*Controller).CreateDelegationToken)
	decides((*Controller).RenewDelegationToken)
	decides((*Controller).ExpireDelegationToken)
	decides((*Controller).CreateTopics)
	decides((*Controller).DeleteTopics)
	decides((*Controller).CreatePartitions)
	decides((*Controller).ElectLeaders)
	decides((*Controller).AlterPartitionReassignments)
	decides((*Controller).ListPartitionReassignments)
	decides((*Controller).AlterPartition)
	decides((*Controller).AllocateProducerIDs)
}

// CreateACLs adds ACLs. Each creation gets its own result, in request
// order.
func (c *Controller) CreateACLs(ctx context.Context, req *kmsg.CreateACLsRequest) *kmsg.CreateACLsResponse {
	return runDecision(c, ctx, req, (*decide.Env).CreateACLs, decide.CreateACLsFailed)
}

// DeleteACLs removes the ACLs each filter matches. Each filter gets its
// own result, in request order, listing what it matched.
func (c *Controller) DeleteACLs(ctx context.Context, req *kmsg.DeleteACLsRequest) *kmsg.DeleteACLsResponse {
	return runDecision(c, ctx, req, (*decide.Env).DeleteACLs, decide.DeleteACLsFailed)
}

// AlterUserScramCredentials upserts and deletes SCRAM credentials.
func (c *Controller) AlterUserScramCredentials(ctx context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) *kmsg.AlterUserSCRAMCredentialsResponse {
	return runDecision(c, ctx, req, (*decide.Env).AlterUserScramCredentials, decide.AlterUserScramCredentialsFailed)
}

// AlterClientQuotas sets and removes client quotas. The request is read
// before it reaches the loop.
func (c *Controller) AlterClientQuotas(ctx context.Context, req *kmsg.AlterClientQuotasRequest) *kmsg.AlterClientQuotasResponse {
	return runDecision(c, ctx, decide.ReadClientQuotaAlterations(req), (*decide.Env).AlterClientQuotas, decide.AlterClientQuotasFailed)
}

// IncrementalAlterConfigs changes configs key by key.
func (c *Controller) IncrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	resp := runDecision(c, ctx, req, (*decide.Env).IncrementalAlterConfigs, decide.IncrementalAlterConfigsFailed)
	c.checkUncleanElectionsIfEnabled(decide.IncrementalAlterConfigsEnabledUncleanElection(req, resp))
	return resp
}

// AlterConfigs replaces the whole config set of each resource.
func (c *Controller) AlterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse {
	resp := runDecision(c, ctx, req, (*decide.Env).AlterConfigs, decide.AlterConfigsFailed)
	c.checkUncleanElectionsIfEnabled(decide.AlterConfigsEnabledUncleanElection(req, resp))
	return resp
}

// UpdateFeatures changes finalized feature levels.
func (c *Controller) UpdateFeatures(ctx context.Context, req *kmsg.UpdateFeaturesRequest) *kmsg.UpdateFeaturesResponse {
	return runDecision(c, ctx, req, (*decide.Env).UpdateFeatures, decide.UpdateFeaturesFailed)
}

// CreateDelegationToken creates a token for the request's owner (or the
// requester).
func (c *Controller) CreateDelegationToken(ctx context.Context, req *kmsg.CreateDelegationTokenRequest) *kmsg.CreateDelegationTokenResponse {
	// The failed answer names the owner and the requester, as the
	// decision's refusals do, so it needs the context's principal.
	failed := func(req *kmsg.CreateDelegationTokenRequest, e *decide.Error) *kmsg.CreateDelegationTokenResponse {
		return decide.CreateDelegationTokenFailed(req, metadata.RequestPrincipal(ctx), e)
	}
	return runDecision(c, ctx, req, (*decide.Env).CreateDelegationToken, failed)
}

// RenewDelegationToken moves a token's expiry on.
func (c *Controller) RenewDelegationToken(ctx context.Context, req *kmsg.RenewDelegationTokenRequest) *kmsg.RenewDelegationTokenResponse {
	return runDecision(c, ctx, req, (*decide.Env).RenewDelegationToken, decide.RenewDelegationTokenFailed)
}

// ExpireDelegationToken expires a token now or moves its expiry.
func (c *Controller) ExpireDelegationToken(ctx context.Context, req *kmsg.ExpireDelegationTokenRequest) *kmsg.ExpireDelegationTokenResponse {
	return runDecision(c, ctx, req, (*decide.Env).ExpireDelegationToken, decide.ExpireDelegationTokenFailed)
}

// CreateTopics creates topics.
func (c *Controller) CreateTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	return runDecision(c, ctx, req, (*decide.Env).CreateTopics, decide.CreateTopicsFailed)
}

// DeleteTopics deletes topics by name or by id.
func (c *Controller) DeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	return runDecision(c, ctx, req, (*decide.Env).DeleteTopics, decide.DeleteTopicsFailed)
}

// CreatePartitions adds partitions to topics.
func (c *Controller) CreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
	return runDecision(c, ctx, req, (*decide.Env).CreatePartitions, decide.CreatePartitionsFailed)
}

// ElectLeaders runs preferred or unclean elections. Null Topics means every
// partition; then partitions that need no election are left out of the
// response, as Kafka does.
func (c *Controller) ElectLeaders(ctx context.Context, req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	return runDecision(c, ctx, req, (*decide.Env).ElectLeaders, decide.ElectLeadersFailed)
}

// AlterPartitionReassignments starts, changes or cancels reassignments.
func (c *Controller) AlterPartitionReassignments(ctx context.Context, req *kmsg.AlterPartitionAssignmentsRequest) *kmsg.AlterPartitionAssignmentsResponse {
	return runDecision(c, ctx, req, (*decide.Env).AlterPartitionReassignments, decide.AlterPartitionReassignmentsFailed)
}

// ListPartitionReassignments lists the reassignments in progress.
func (c *Controller) ListPartitionReassignments(ctx context.Context, req *kmsg.ListPartitionReassignmentsRequest) *kmsg.ListPartitionReassignmentsResponse {
	return runDecision(c, ctx, req, (*decide.Env).ListPartitionReassignments, decide.ListPartitionReassignmentsFailed)
}

// AlterPartition decides a leader's ISR changes; it needs version 2 or
// later (topic ids).
func (c *Controller) AlterPartition(ctx context.Context, req *kmsg.AlterPartitionRequest) *kmsg.AlterPartitionResponse {
	return runDecision(c, ctx, req, (*decide.Env).AlterPartition, decide.AlterPartitionFailed)
}

// AllocateProducerIDs hands the broker the next block of 1000 producer ids.
func (c *Controller) AllocateProducerIDs(ctx context.Context, req *kmsg.AllocateProducerIDsRequest) *kmsg.AllocateProducerIDsResponse {
	return runDecision(c, ctx, req, (*decide.Env).AllocateProducerIDs, decide.AllocateProducerIDsFailed)
}
