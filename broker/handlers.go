package broker

import (
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handlers lists every API this broker serves, the versions whose
// semantics it fully honours, and the listeners that serve it. ApiVersions
// is derived from this list and nothing else.
func (b *Broker) handlers() []*handler {
	both := func(h *handler) *handler { h.onBroker, h.onController = true, true; return h }
	client := func(h *handler) *handler { h.onBroker = true; return h }
	ctrl := func(h *handler) *handler { h.onController = true; return h }
	hs := []*handler{
		both(&handler{key: kmsg.ApiVersions, min: 0, max: 4, fn: b.handleApiVersions}),
		// Authentication (saslauth.go): these answer only what reaches
		// them after authentication; the exchange itself runs in the
		// connection's state machine.
		both(&handler{key: kmsg.SASLHandshake, min: 0, max: 1, fn: b.handleSaslHandshake}),
		both(&handler{key: kmsg.SASLAuthenticate, min: 0, max: 2, fn: b.handleSaslAuthenticate}),
		client(&handler{key: kmsg.Metadata, min: 0, max: 13, fn: b.handleMetadata}),
		client(&handler{key: kmsg.Produce, min: 3, max: 13, fn: b.handleProduce,
			advertisedMin: 0, unsupported: b.produceUnsupportedVersion}),
		client(&handler{key: kmsg.Fetch, min: 4, max: 18, fn: b.handleFetch}),
		client(&handler{key: kmsg.ListOffsets, min: 1, max: 11, fn: b.handleListOffsets}),
		client(&handler{key: kmsg.OffsetForLeaderEpoch, min: 2, max: 4, fn: b.handleOffsetForLeaderEpoch}),
		client(&handler{key: kmsg.InitProducerID, min: 0, max: 5, fn: b.handleInitProducerID}),
		client(&handler{key: kmsg.DeleteRecords, min: 0, max: 2, fn: b.handleDeleteRecords}),
		client(&handler{key: kmsg.DescribeProducers, min: 0, max: 0, fn: b.handleDescribeProducers}),
		// Transactions (transactions.go, writetxnmarkers.go, listtransactions.go).
		client(&handler{key: kmsg.AddPartitionsToTxn, min: 0, max: 5, fn: b.handleAddPartitionsToTxn}),
		client(&handler{key: kmsg.AddOffsetsToTxn, min: 0, max: 4, fn: b.handleAddOffsetsToTxn}),
		client(&handler{key: kmsg.EndTxn, min: 0, max: 5, fn: b.handleEndTxn}),
		client(&handler{key: kmsg.WriteTxnMarkers, min: 0, max: 2, fn: b.handleWriteTxnMarkers}),
		client(&handler{key: kmsg.ListTransactions, min: 0, max: 2, fn: b.handleListTransactions}),
		client(&handler{key: kmsg.DescribeTransactions, min: 0, max: 0, fn: b.handleDescribeTransactions}),
		both(&handler{key: kmsg.CreateTopics, min: 2, max: 7, fn: b.handleCreateTopics}),
		both(&handler{key: kmsg.DeleteTopics, min: 1, max: 6, fn: b.handleDeleteTopics}),
		both(&handler{key: kmsg.CreatePartitions, min: 0, max: 3, fn: b.handleCreatePartitions}),
		both(&handler{key: kmsg.DescribeConfigs, min: 1, max: 4, fn: b.handleDescribeConfigs}),
		both(&handler{key: kmsg.AlterConfigs, min: 0, max: 2, fn: b.handleAlterConfigs}),
		both(&handler{key: kmsg.IncrementalAlterConfigs, min: 0, max: 1, fn: b.handleIncrementalAlterConfigs}),
		client(&handler{key: kmsg.DescribeClientQuotas, min: 0, max: 1, fn: b.handleDescribeClientQuotas}),
		both(&handler{key: kmsg.AlterClientQuotas, min: 0, max: 1, fn: b.handleAlterClientQuotas}),
		client(&handler{key: kmsg.ListConfigResources, min: 0, max: 1, fn: b.handleListConfigResources}),
		both(&handler{key: kmsg.DescribeCluster, min: 0, max: 2, fn: b.handleDescribeCluster}),
		client(&handler{key: kmsg.DescribeTopicPartitions, min: 0, max: 0, fn: b.handleDescribeTopicPartitions}),
		client(&handler{key: kmsg.AlterReplicaLogDirs, min: 1, max: 2, fn: b.handleAlterReplicaLogDirs}),
		client(&handler{key: kmsg.DescribeLogDirs, min: 1, max: 4, fn: b.handleDescribeLogDirs}),
		both(&handler{key: kmsg.DescribeQuorum, min: 0, max: 2, fn: b.handleDescribeQuorum}),
		// Voter changes (raftvoters.go).
		both(&handler{key: kmsg.AddRaftVoter, min: 0, max: 1, fn: b.handleRaftVoterChange}),
		both(&handler{key: kmsg.RemoveRaftVoter, min: 0, max: 0, fn: b.handleRaftVoterChange}),
		both(&handler{key: kmsg.UpdateRaftVoter, min: 0, max: 0, fn: b.handleRaftVoterChange}),
		both(&handler{key: kmsg.ElectLeaders, min: 0, max: 2, fn: b.handleElectLeaders}),
		both(&handler{key: kmsg.UpdateFeatures, min: 0, max: 2, fn: b.handleUpdateFeatures}),
		both(&handler{key: kmsg.UnregisterBroker, min: 0, max: 0, fn: b.handleUnregisterBroker}),
		both(&handler{key: kmsg.AlterPartitionAssignments, min: 0, max: 1, fn: b.handlePartitionReassignments}),
		both(&handler{key: kmsg.ListPartitionReassignments, min: 0, max: 0, fn: b.handlePartitionReassignments}),
		both(&handler{key: kmsg.DescribeACLs, min: 1, max: 3, fn: b.handleDescribeACLs}),
		both(&handler{key: kmsg.CreateACLs, min: 1, max: 3, fn: b.handleCreateACLs}),
		both(&handler{key: kmsg.DeleteACLs, min: 1, max: 3, fn: b.handleDeleteACLs}),
		// SCRAM credentials (scramcredentials.go).
		both(&handler{key: kmsg.DescribeUserSCRAMCredentials, min: 0, max: 0, fn: b.handleDescribeUserScramCredentials}),
		both(&handler{key: kmsg.AlterUserSCRAMCredentials, min: 0, max: 0, fn: b.handleAlterUserScramCredentials}),
		// Groups (groups.go, findcoordinator.go, txnoffsetcommit.go).
		client(&handler{key: kmsg.FindCoordinator, min: 0, max: 6, fn: b.handleFindCoordinator}),
		client(&handler{key: kmsg.JoinGroup, min: 0, max: 9, fn: b.handleJoinGroup}),
		client(&handler{key: kmsg.SyncGroup, min: 0, max: 5, fn: b.handleSyncGroup}),
		client(&handler{key: kmsg.Heartbeat, min: 0, max: 4, fn: b.handleHeartbeat}),
		client(&handler{key: kmsg.LeaveGroup, min: 0, max: 5, fn: b.handleLeaveGroup}),
		client(&handler{key: kmsg.OffsetCommit, min: 2, max: 10, fn: b.handleOffsetCommit}),
		client(&handler{key: kmsg.OffsetFetch, min: 0, max: 10, fn: b.handleOffsetFetch}),
		client(&handler{key: kmsg.DescribeGroups, min: 0, max: 6, fn: b.handleDescribeGroups}),
		client(&handler{key: kmsg.ListGroups, min: 0, max: 5, fn: b.handleListGroups}),
		client(&handler{key: kmsg.DeleteGroups, min: 0, max: 2, fn: b.handleDeleteGroups}),
		client(&handler{key: kmsg.OffsetDelete, min: 0, max: 0, fn: b.handleOffsetDelete}),
		client(&handler{key: kmsg.TxnOffsetCommit, min: 0, max: 5, fn: b.handleTxnOffsetCommit}),
		client(&handler{key: kmsg.ConsumerGroupHeartbeat, min: 0, max: 1, fn: b.handleConsumerGroupHeartbeat}),
		client(&handler{key: kmsg.ConsumerGroupDescribe, min: 0, max: 1, fn: b.handleConsumerGroupDescribe}),
	}
	if b.opts.LocalController != nil {
		// What controllers serve each other and brokers (controllerapis.go).
		hs = append(hs,
			ctrl(&handler{key: kmsg.Key(protocol.RaftMessagesKey), min: 0, max: 0, fn: b.handleRaftMessages, internal: true}),
			ctrl(&handler{key: kmsg.Key(protocol.MetadataFetchKey), min: 0, max: 1, fn: b.handleMetadataFetch, internal: true}),
			ctrl(&handler{key: kmsg.Envelope, min: 0, max: 0, fn: b.handleEnvelope}),
			ctrl(&handler{key: kmsg.BrokerRegistration, min: 0, max: 4, fn: b.handleControllerDirect}),
			ctrl(&handler{key: kmsg.BrokerHeartbeat, min: 0, max: 1, fn: b.handleControllerDirect}),
			ctrl(&handler{key: kmsg.AllocateProducerIDs, min: 0, max: 0, fn: b.handleControllerDirect}),
			ctrl(&handler{key: kmsg.AlterPartition, min: 2, max: 3, fn: b.handleControllerDirect}),
		)
	}
	return hs
}
