// Package replica is the partition as a replica: the partitions this node
// hosts, their role (leader or follower), leader epoch, replicas and ISR,
// the log end offset, high watermark and log start offset of each, and the
// one API the broker's handlers use to touch partition data (Manager):
// append with acks, fetch with isolation and long polling, list offsets,
// delete records, offsets for leader epoch, producer state, log dirs.
//
// # What it owns
//
//   - Partition: one hosted partition's replica state and its log
//     (*storage.Log). The high watermark is the smallest log end offset
//     over the ISR (the leader's own is the log's; followers' come from
//     their fetches), computed under the
//     partition's lock and stored by the log, which only lets it move
//     forward. acks=all and min.insync.replicas use Kafka's effective
//     minimum, min(min.insync.replicas, replication factor).
//   - Manager: the hosted partitions, reconciled with each metadata image
//     (partitions created, updated, deleted; stray logs deleted at start;
//     only what changed since the last image is applied, and new
//     partitions' logs are opened together, in parallel, before they are
//     announced),
//     the single leadership and epoch check every operation goes through
//     (Manager.leaderPartition: Kafka's choice and order of errors), the
//     purgatories, and the leadership listeners.
//   - Purgatory: delayed operations keyed by partition (acks=all produce,
//     consumers' long-poll fetches, followers' fetches).
//   - Replication (replication.go, fetcher.go): followers fetch from their
//     leader with their replica id (fetchers, num.replica.fetchers per
//     leader broker) and append what the leader wrote as it wrote it; the
//     leader tracks each follower's log end and caught-up time, moves the
//     high watermark, answers a diverged follower with DivergingEpoch, and
//     asks the active controller (AlterPartition) to shrink and expand the
//     ISR.
//   - Leadership listeners: a component registers for a topic and is told,
//     in order per partition, when this node becomes its leader (with the
//     epoch) and when it resigns or the partition goes away. The
//     coordinator runtime loads and unloads coordinator shards with them.
//
// It does not own sockets, request decoding or metadata decisions: the
// controller decides, the image says, the manager follows.
//
// # Goroutines
//
//   - ApplyImage runs on the metadata subscription's goroutine (the
//     controller's, in a combined node). It is the only writer of the
//     partition map and of each partition's leadership state, and it calls
//     the leadership listeners, which must not block.
//   - Append, Fetch and the other operations run on the caller's
//     goroutine: a connection's reader goroutine for produce (so appends
//     happen in the order the client sent them), a coordinator shard's for
//     its writes. No operation starts a goroutine.
//   - Follower fetchers, the AlterPartition sender and the ISR expiry
//     check are goroutines of their own (see replication.go, fetcher.go),
//     started by Start and stopped by Stop.
//   - Completions run on the goroutine that triggered them (see
//     purgatory.go): the caller when an operation completes at once, the
//     appender or the metadata goroutine when progress or a leadership
//     change wakes a waiting one, a timer's goroutine at a deadline.
//
// # Locks
//
// Manager.applyMu serialises image application and listener registration;
// Manager.mu guards the partition map; Partition.mu guards a partition's
// leadership state (written by ApplyImage, read by every operation, held
// shared across an append so that leadership cannot change under it). The
// order is applyMu, the fetchers' locks, Manager.mu, Partition.mu, then the log's own locks;
// the purgatory's locks are taken with none of these held. The whole
// broker's order is in LOCKS.md at the repository root.
package replica
