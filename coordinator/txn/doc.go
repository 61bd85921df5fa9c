// Package txn is the transaction coordinator: the state of every
// transactional id whose __transaction_state partition this node leads,
// as Kafka 4.3's TransactionCoordinator and TransactionStateManager keep
// it, on the coordinator runtime (coordinator/runtime) beside the group
// coordinator.
//
// # What it does
//
//   - Maps a transactional id to its partition as Kafka does, writes each
//     state transition as a record in Kafka's schemas (records.go), and
//     rebuilds the state by replaying the partition when it loads.
//   - InitProducerId (producer ids from the controller's blocks, epoch
//     bumps that fence older producers, KIP-360 recovery, producer id
//     rotation before the epoch runs out), AddPartitionsToTxn and
//     AddOffsetsToTxn, the verification of KIP-890 part 1, EndTxn with
//     TV1's and TV2's epoch rules, ListTransactions and
//     DescribeTransactions.
//   - Ends transactions: after PrepareCommit or PrepareAbort is written it
//     writes the markers through a MarkerWriter, retrying until every
//     partition has one, then writes CompleteCommit or CompleteAbort. A
//     partition loaded with prepared transactions finishes them, so a
//     coordinator that dies mid-commit loses nothing it acknowledged.
//   - Aborts transactions open past their timeout (fencing their
//     producer) and expires idle transactional ids with tombstones.
//
// # Deliberate deviations
//
//   - Kafka bumps the epoch in memory before the fencing abort is
//     written and remembers a failed fence; here the bumped epoch exists
//     only once PrepareAbort is committed, so a failed write leaves no
//     trace and the next attempt bumps from the same epoch.
//   - Transactions V2 is served for EndTxn v5 clients, but the broker does
//     not finalize transaction.version 2 until Produce's implicit
//     partition addition is built.
//
// Concurrency is described on Coordinator; the broker-wide lock order is
// in LOCKS.md.
//
// It imports, of Gregor's packages, coordinator/runtime and protocol; the
// README's import table allows replica, metadata and config besides.
package txn
