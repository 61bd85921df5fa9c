// Package share is the share coordinator of KIP-932 share groups: the
// durable state of every share partition (which offsets of a topic
// partition a share group has acknowledged, archived or handed out how
// often, and where its start offset is), kept in __share_group_state on
// the coordinator runtime (coordinator/runtime) beside the group and
// transaction coordinators, as Kafka 4.3's ShareCoordinatorShard keeps it.
//
// # What it serves
//
// The inter-broker RPCs of Kafka's persister, each partition on its own:
//
//	InitializeShareGroupState v0 (the group coordinator, before a share
//	group's members are assigned a partition), ReadShareGroupState v0 (a
//	partition's leader, when it takes the partition's share state up),
//	WriteShareGroupState v0-v1 (the leader, after each acknowledgement,
//	release and lock expiry), DeleteShareGroupState v0 (the group
//	coordinator, deleting the group), ReadShareGroupStateSummary v0-v1
//	(the group coordinator, describing the group's offsets).
//
// A share partition is keyed "group:topicId:partition" (the topic id in
// Kafka's base64), which maps to a __share_group_state partition with
// Kafka's hash. Its state is a ShareSnapshot record, followed by
// ShareUpdate records that each carry the batches of one write, until
// share.coordinator.snapshot.update.records.per.snapshot updates made a
// new snapshot worthwhile; a tombstone of the snapshot key deletes it.
// Records are Kafka's (records.go), so kafka-dump-log's share group state
// decoder reads them.
//
// Fencing, as Kafka's: a read or write with a leader epoch older than the
// one recorded is FENCED_LEADER_EPOCH (a read with a newer one records
// it, so that the previous leader's late writes are refused), a write or
// initialization with an older state epoch FENCED_STATE_EPOCH, a read or
// write of a partition never initialized INVALID_REQUEST.
//
// # Deliberate deviations
//
//   - Kafka merges a write's batches into the state keeping, where two
//     batches overlap, the higher delivery count (the higher state on a
//     tie); here the later write wins. A partition's writes come from its
//     leader one after the other, and a write with an older leader epoch
//     is refused, so the later write is the newer truth; the two rules
//     agree on every sequence a leader produces.
//   - The state topic is pruned as Kafka prunes it, every
//     share.coordinator.state.topic.prune.interval.ms: the records below
//     the oldest current snapshot of a share partition are deleted. A share
//     partition whose snapshot is older than
//     share.coordinator.cold.partition.snapshot.interval.ms is snapshotted
//     again first, so that a partition never written again does not hold
//     the pruning back.
//   - One append per partition of a request, under the shard's lock
//     (Kafka batches the writes of its event loop).
//
// It imports, of Gregor's packages, coordinator/runtime and protocol.
package share
