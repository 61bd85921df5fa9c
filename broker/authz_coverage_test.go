package broker

import (
	"slices"
	"testing"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authorizedAs names, for every API Gregor serves, what Kafka authorizes
// it against (KafkaApis, ControllerApis, AclApis) and so what Gregor
// checks. An API added to handlers.go fails TestEveryServedAPIIsAuthorized
// until its check is written (b.allowed, b.clusterAllowed, or
// clusterOperation for what reaches the controller) and listed here.
var authorizedAs = map[int16]string{
	kmsg.ApiVersions.Int16():                  "nothing",
	kmsg.Metadata.Int16():                     "DESCRIBE on each topic (hidden when denied), CREATE to auto-create, authorized operations",
	kmsg.Produce.Int16():                      "WRITE on each topic, WRITE on the transactional id",
	kmsg.Fetch.Int16():                        "READ on each topic; CLUSTER_ACTION for a follower",
	kmsg.ListOffsets.Int16():                  "DESCRIBE on each topic",
	kmsg.OffsetForLeaderEpoch.Int16():         "DESCRIBE on each topic; CLUSTER_ACTION for a follower",
	kmsg.InitProducerID.Int16():               "WRITE on the transactional id, else IDEMPOTENT_WRITE on the cluster or WRITE on any topic",
	kmsg.DeleteRecords.Int16():                "DELETE on each topic",
	kmsg.DescribeProducers.Int16():            "READ on each topic",
	kmsg.AddPartitionsToTxn.Int16():           "WRITE on the transactional id and each topic; CLUSTER_ACTION from v4",
	kmsg.AddOffsetsToTxn.Int16():              "WRITE on the transactional id, READ on the group",
	kmsg.EndTxn.Int16():                       "WRITE on the transactional id",
	kmsg.WriteTxnMarkers.Int16():              "CLUSTER_ACTION",
	kmsg.ListTransactions.Int16():             "DESCRIBE on each transactional id listed",
	kmsg.DescribeTransactions.Int16():         "DESCRIBE on each transactional id and its topics",
	kmsg.CreateTopics.Int16():                 "CREATE on the cluster or each topic, DESCRIBE_CONFIGS for its configs",
	kmsg.DeleteTopics.Int16():                 "DESCRIBE and DELETE on each topic",
	kmsg.CreatePartitions.Int16():             "ALTER on each topic",
	kmsg.DescribeConfigs.Int16():              "DESCRIBE_CONFIGS on each resource",
	kmsg.AlterConfigs.Int16():                 "ALTER_CONFIGS on each resource",
	kmsg.IncrementalAlterConfigs.Int16():      "ALTER_CONFIGS on each resource",
	kmsg.DescribeClientQuotas.Int16():         "DESCRIBE_CONFIGS on the cluster",
	kmsg.AlterClientQuotas.Int16():            "ALTER_CONFIGS on the cluster",
	kmsg.ListConfigResources.Int16():          "DESCRIBE_CONFIGS on the cluster",
	kmsg.DescribeCluster.Int16():              "DESCRIBE on the cluster (authorized operations); ALTER on a controller listener",
	kmsg.DescribeTopicPartitions.Int16():      "DESCRIBE on each topic, authorized operations",
	kmsg.AlterReplicaLogDirs.Int16():          "ALTER on the cluster",
	kmsg.DescribeLogDirs.Int16():              "DESCRIBE on the cluster",
	kmsg.DescribeQuorum.Int16():               "DESCRIBE on the cluster",
	kmsg.AddRaftVoter.Int16():                 "ALTER on the cluster",
	kmsg.RemoveRaftVoter.Int16():              "ALTER on the cluster",
	kmsg.UpdateRaftVoter.Int16():              "CLUSTER_ACTION",
	kmsg.ElectLeaders.Int16():                 "ALTER on the cluster",
	kmsg.UpdateFeatures.Int16():               "ALTER on the cluster",
	kmsg.UnregisterBroker.Int16():             "ALTER on the cluster",
	kmsg.AlterPartitionAssignments.Int16():    "ALTER on the cluster",
	kmsg.ListPartitionReassignments.Int16():   "DESCRIBE on the cluster",
	kmsg.DescribeACLs.Int16():                 "DESCRIBE on the cluster",
	kmsg.CreateACLs.Int16():                   "ALTER on the cluster",
	kmsg.DeleteACLs.Int16():                   "ALTER on the cluster",
	kmsg.FindCoordinator.Int16():              "DESCRIBE on the group or transactional id",
	kmsg.JoinGroup.Int16():                    "READ on the group",
	kmsg.SyncGroup.Int16():                    "READ on the group",
	kmsg.Heartbeat.Int16():                    "READ on the group",
	kmsg.LeaveGroup.Int16():                   "READ on the group",
	kmsg.OffsetCommit.Int16():                 "READ on the group and each topic",
	kmsg.OffsetFetch.Int16():                  "DESCRIBE on the group, DESCRIBE on each topic",
	kmsg.DescribeGroups.Int16():               "DESCRIBE on each group, authorized operations",
	kmsg.ListGroups.Int16():                   "DESCRIBE on the cluster, else DESCRIBE on each group listed",
	kmsg.DeleteGroups.Int16():                 "DELETE on each group",
	kmsg.OffsetDelete.Int16():                 "DELETE on the group, READ on each topic",
	kmsg.TxnOffsetCommit.Int16():              "WRITE on the transactional id, READ on the group and each topic",
	kmsg.ConsumerGroupHeartbeat.Int16():       "READ on the group, DESCRIBE on each subscribed topic",
	kmsg.ConsumerGroupDescribe.Int16():        "DESCRIBE on each group and its members' topics, authorized operations",
	kmsg.Envelope.Int16():                     "CLUSTER_ACTION, then the forwarded principal",
	kmsg.BrokerRegistration.Int16():           "CLUSTER_ACTION",
	kmsg.BrokerHeartbeat.Int16():              "CLUSTER_ACTION",
	kmsg.AllocateProducerIDs.Int16():          "CLUSTER_ACTION",
	kmsg.AlterPartition.Int16():               "CLUSTER_ACTION",
	kmsg.SASLHandshake.Int16():                "nothing (authentication)",
	kmsg.SASLAuthenticate.Int16():             "nothing (authentication)",
	kmsg.DescribeUserSCRAMCredentials.Int16(): "DESCRIBE on the cluster",
	kmsg.AlterUserSCRAMCredentials.Int16():    "ALTER on the cluster",
	kmsg.CreateDelegationToken.Int16():        "CREATE_TOKENS on the owner's USER when it is not the requester",
	kmsg.RenewDelegationToken.Int16():         "nothing (the owner or a renewer, checked by the controller)",
	kmsg.ExpireDelegationToken.Int16():        "nothing (the owner or a renewer, checked by the controller)",
	kmsg.DescribeDelegationToken.Int16():      "DESCRIBE on each token or DESCRIBE_TOKENS on its owner's USER, unless owned or renewable",
	int16(protocol.RaftMessagesKey):           "CLUSTER_ACTION",
	int16(protocol.MetadataFetchKey):          "CLUSTER_ACTION",
}

func TestEveryServedAPIIsAuthorized(t *testing.T) {
	n := startAuthzNode(t, &AuthorizerOptions{AllowEveryoneIfNoACLFound: true}, nil)
	var missing []string
	for key := range n.b.server.handlers {
		if _, ok := authorizedAs[key]; !ok {
			missing = append(missing, kmsg.NameForKey(key))
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Fatalf("served without a listed authorization (see authorizedAs): %v", missing)
	}
}

// The SCRAM credential APIs answer a refusal as Kafka's getErrorResponse
// does.
func TestSCRAMErrorResponses(t *testing.T) {
	who := identity{principal: Principal{Type: "User", Name: "ANONYMOUS"}}
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, name := range []string{"b", "a"} {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name = name
		alter.Deletions = append(alter.Deletions, d)
	}
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name = "a"
	alter.Upsertions = append(alter.Upsertions, u)
	if op, ok := clusterOperation(alter); !ok || op != kmsg.ACLOperationAlter {
		t.Fatalf("AlterUserScramCredentials needs %v %v", op, ok)
	}
	e := clusterDenied(who, kmsg.ACLOperationAlter)
	resp := errorResponse(alter, e).(*kmsg.AlterUserSCRAMCredentialsResponse)
	if len(resp.Results) != 2 || resp.Results[0].User != "a" || resp.Results[1].User != "b" {
		t.Fatalf("results %+v", resp.Results)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != e.code || r.ErrorMessage != e.msg {
			t.Fatalf("result %+v", r)
		}
	}
	describe := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	describe.Users = make([]kmsg.DescribeUserSCRAMCredentialsRequestUser, 2)
	dresp := errorResponse(describe, errCode(kerr.ClusterAuthorizationFailed)).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if dresp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || dresp.ErrorMessage != nil || len(dresp.Results) != 2 ||
		dresp.Results[1].ErrorCode != kerr.ClusterAuthorizationFailed.Code || dresp.Results[1].User != "" {
		t.Fatalf("describe %+v", dresp)
	}
}
