// Package group is Gregor's group coordinator: the classic group protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), the KIP-848 consumer
// protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe), committed
// offsets (OffsetCommit, OffsetFetch, OffsetDelete), transactional
// offsets (TxnOffsetCommit, and CompleteTransaction for the transaction
// markers of __consumer_offsets), share group membership (KIP-932:
// ShareGroupHeartbeat, ShareGroupDescribe; share.go), streams groups
// (KIP-1071: StreamsGroupHeartbeat, StreamsGroupDescribe; streams*.go) and
// group administration (DescribeGroups, ListGroups, DeleteGroups).
//
// # Boundaries
//
// The broker owns the network, the replica layer the __consumer_offsets
// partitions; this package owns what is in them. The coordinator runtime
// (coordinator/runtime) calls Load when this node becomes leader of a
// partition (the coordinator replays it, answering
// COORDINATOR_LOAD_IN_PROGRESS meanwhile) and Unload when it stops being
// leader, and runs Run for the timers; groups of partitions not loaded
// answer NOT_COORDINATOR. The broker calls one method per API with the
// decoded kmsg request. CoordinatorFor answers the group half of
// FindCoordinator; Config.TopicSpec is how __consumer_offsets is created.
// The broker's WriteTxnMarkers calls CompleteTransaction for a
// __consumer_offsets partition instead of appending the marker itself,
// as Kafka delegates it to its group coordinator.
//
// # Persistence
//
// Everything that survives a restart is a record in Kafka's key/value
// schemas (see records.go): OffsetCommit (key version 1; value v3, v1 with
// an expire timestamp, v4 with a topic id), GroupMetadata (key version 2,
// value v3), the KIP-848 ConsumerGroup* records (key versions 3, 5, 6,
// 7, 8, 16), the KIP-932 ShareGroup* records (10-15) and the KIP-1071
// StreamsGroup* records (17, 19-23), with tombstones
// where Kafka writes them. A request that
// changes persisted state is answered only after its batch is appended
// (PartitionLog.Append has acks=all semantics). Transactional offsets are
// OffsetCommit records in a transactional batch of the producer, pending
// until the producer's COMMIT or ABORT marker (a control batch in the
// same partition) is appended or, on load, replayed (txnoffsets.go).
//
// # Supported versions (the broker advertises these)
//
//	JoinGroup v0-v9, SyncGroup v0-v5, Heartbeat v0-v4, LeaveGroup v0-v5,
//	OffsetCommit v2-v10 (v0-v1 are not served: Kafka 4 dropped them),
//	OffsetFetch v0-v10, DescribeGroups v0-v6, ListGroups v0-v5,
//	DeleteGroups v0-v2, OffsetDelete v0, ConsumerGroupHeartbeat v0-v1,
//	ConsumerGroupDescribe v0-v1, TxnOffsetCommit v0-v5,
//	ShareGroupHeartbeat v1, ShareGroupDescribe v1, StreamsGroupHeartbeat
//	v0, StreamsGroupDescribe v0 (Kafka 4.3 serves no later ones), and the coordinator's
//	half of AlterShareGroupOffsets v0 and DeleteShareGroupOffsets v0
//	(shareoffsets.go). (kmsg knows DeleteGroups v3, newer than
//	Kafka 4.3; its per-group error messages are not filled, so it is not
//	advertised.)
//
// # Deliberate deviations and gaps
//
//   - Online migration between the protocols follows
//     group.consumer.migration.policy (migration.go): a consumer-protocol
//     member joining a live classic group upgrades it, classic members of a
//     consumer group keep using JoinGroup/SyncGroup/Heartbeat/LeaveGroup,
//     and the group turns back into a classic group when its last
//     consumer-protocol member leaves. Kafka's downgrade when a static
//     classic member replaces the last consumer-protocol member is not
//     done: the member is replaced inside the consumer group.
//   - TxnOffsetCommit is checked against the transaction coordinator
//     (the __consumer_offsets partition in the producer's transaction,
//     KIP-890 part 1, or added to it for v5 under transaction.version 2)
//     by the broker before it reaches this package
//     (broker/txnoffsetcommit.go), not by the coordinator runtime as in
//     Kafka; here only a request without a producer id is refused
//     (INVALID_PRODUCER_ID_MAPPING). The log still fences a producer epoch
//     older than the partition's.
//   - TxnOffsetCommit v6 (topic ids), which kmsg knows, is not served.
//   - Regular expressions are resolved synchronously with Go's regexp (RE2
//     syntax, as Kafka's RE2J) on heartbeats. Like Kafka, every topic of
//     the image is a candidate, internal ones included.
//   - When an append fails, the partition's state is rebuilt from its log
//     and every parked request of that partition is answered
//     NOT_COORDINATOR; Kafka instead reverts to its last committed
//     in-memory snapshot.
//   - Of the per-group dynamic configs (GROUP config resources, Kafka's
//     GroupConfig), consumer.session.timeout.ms and
//     consumer.heartbeat.interval.ms are honoured (Config.GroupConfigs,
//     from a member's next heartbeat on, as in Kafka);
//     consumer.assignment.interval.ms is not, as the broker-wide
//     group.consumer.assignment.interval.ms is not either. Of the share.*
//     keys, share.session.timeout.ms, share.heartbeat.interval.ms and
//     share.assignment.interval.ms are honoured here; the streams.* keys
//     wait for streams groups.
//   - The share assignor places partitions in sorted order where Kafka's
//     follows Java hash order: the same balance and stickiness, other
//     placements. The share metadata hash (ShareGroupMetadataValue) is
//     an FNV-64a of the subscribed topics' ids, names and partition
//     counts, not Kafka's xxh3 (it is only compared with itself).
//   - Deleting a share group asks the share coordinator to delete its
//     share state while the shard's lock is held, and does not first
//     record the topics as deleting (Kafka rewrites
//     ShareGroupStatePartitionMetadata with them): a failed delete is
//     answered with its error and leaves the group as it was.
//
// It imports, of Gregor's packages, coordinator/runtime and protocol; the
// README's import table allows replica, metadata and config besides.
package group
