// Package controller is Gregor's cluster metadata quorum: the etcd-raft
// node and the Ready loop that owns it, the log of metadata records
// (controller/raftlog keeps it durable on a vfs.FS), the transport between
// the voters, the committed log served to the nodes that follow it without
// voting (and the Follower a broker-only node runs), and the running of
// the decisions Kafka's QuorumController makes, which are package
// controller/decide's (topic creation and placement, configs, ACLs, client
// quotas, SCRAM credentials, delegation tokens, leader elections,
// producer-id blocks, feature levels), with the brokers' sessions
// (registration, heartbeats and fencing) that decide when a broker's
// state changes.
//
// The model is package metadata's: the immutable Image, the records and
// their encoding, and replay. The controller decides records against an
// image, proposes them, applies the committed ones with
// metadata.ApplyBatch and publishes each new image.
//
// Files:
//
//	controller.go  Start/Close, the raft Ready loop and the event loop
//	               that owns it, subscriptions
//	pipeline.go    the write pipeline: operations decided one at a time
//	               against the pending image, their entries proposed
//	               without waiting for earlier commits, each answered
//	               once its own entry is applied, all pending ones failed
//	               with NOT_CONTROLLER when leadership is lost; submit
//	format.go      Format/ReadFormat (bootstrap.checkpoint)
//	handle.go      Handle: a request to the decision that answers it
//	decide.go      runDecision: a decision (controller/decide) run on the
//	               loop, its failed answer when its records are not
//	               committed (commitError)
//	decisions.go   the Controller's method for each decided request
//	               (CreateTopics, configs, ACLs, quotas, SCRAM, tokens,
//	               ElectLeaders, reassignments, AlterPartition,
//	               UpdateFeatures, AllocateProducerIDs), registered with
//	               Handle
//	periodicelections.go  scheduling the active controller's periodic
//	               unclean elections and preferred-leader rebalancing
//	tokensweep.go  scheduling the sweep of expired delegation tokens
//	brokers.go     RegisterBroker, BrokerHeartbeat, UnregisterBroker:
//	               the brokers' sessions and fencing
//	liveness.go    probing a broker whose heartbeat connection closed
//	quorum.go      DescribeQuorum
//	transport.go   NetTransport: raft messages to the other voters over
//	               their CONTROLLER listeners (RaftMessages)
//	observers.go   FetchCommitted: the committed log for brokers that
//	               follow it without voting (MetadataFetch), and the
//	               observers DescribeQuorum lists
//	follower.go    Follower: a broker-only node's image, fetched
//	               from the controllers
//	membership.go  dynamic membership (KIP-853): joining controllers as
//	               raft learners, AddRaftVoter, RemoveRaftVoter,
//	               UpdateRaftVoter
//
// Offsets: a metadata offset is the raft index of the entry holding the
// records (Image.Offset, broker epochs, DescribeQuorum's high watermark and
// log end offsets). Every record of one entry shares its offset. Each
// operation that writes records gets one entry of its own, so the offset it
// decides with (a new broker's epoch) is the index its entry gets.
//
// Deliberate deviations from Kafka 4.3 (the ledger):
//   - The log is Gregor's own format (raft entries, CRC-32C frames), not
//     Kafka's record batches: kafka-metadata-shell and kafka-dump-log
//     --cluster-metadata-decoder cannot read it. The quorum is etcd raft,
//     whose log, hard state and snapshots are what it persists; writing
//     them as KRaft's batches (with its LeaderChange, SnapshotHeader and
//     KRaftVersion control records) would only dress one protocol as
//     another. /debug/metadata on the debug listener gives the offset and
//     digest of a node's image instead.
//   - Controllers talk over two private APIs of the Kafka framing on the
//     CONTROLLER listener, left out of ApiVersions: RaftMessages (etcd
//     raft's messages, in place of KRaft's Vote, BeginQuorumEpoch,
//     EndQuorumEpoch, Fetch and FetchSnapshot) and MetadataFetch (how
//     brokers follow the log, in place of KRaft's Fetch of
//     __cluster_metadata). A Kafka broker cannot join a Gregor quorum, nor
//     a Gregor broker a Kafka one.
//   - A broker-only node keeps the metadata log in memory: on restart it
//     fetches the latest snapshot and what follows again.
//   - Only the raft leader serves; followers answer NOT_CONTROLLER (admin
//     clients and brokers go to the leader).
//   - Eligible leader replicas (KIP-966, eligible.leader.replicas.version
//     1, finalized on a new cluster as by Kafka 4.3): a min.insync.replicas
//     change clears the affected ELRs with one PartitionChangeRecord per
//     partition (bumping its partition epoch) where Kafka writes one
//     ClearElrRecord; a cluster-wide change touching more than
//     maxRecordsPerOp partitions is refused. The last known leader is
//     elected only once it can lead (Kafka elects it even while it is
//     fenced); a single broker that restarts uncleanly leads its
//     partitions again when it is unfenced, as in Kafka. A replica that
//     a completed reassignment removes never stays in the ELR (Kafka's
//     builder can leave it there).
//   - Turning unclean.leader.election.enable on elects the leaderless
//     partitions it allows at once; Kafka waits for the periodic check
//     (unclean.leader.election.interval.ms). As in Kafka's KRaft
//     controller, leader.imbalance.per.broker.percentage is read by
//     nobody: the rebalance moves every partition whose preferred replica
//     can lead.
//   - Elections and placement ignore log directories (Kafka also refuses a
//     leader whose directory for the partition is offline).
//   - No directory assignment (AssignReplicasToDirs; PartitionChangeRecords
//     never set directories).
//   - Reassignment throttles are the brokers' (replica/throttle.go): the
//     controller stores leader/follower.replication.throttled.replicas
//     and the rates as any config.
//   - A broker whose heartbeat connection closes is probed (liveness.go):
//     when the listeners it was seen serving on refuse connections, it is
//     fenced at once instead of at its session's end.
//   - Dynamic membership (membership.go): an observer controller is a raft
//     learner, added by the leader when it announces itself and never
//     removed (a learner that is gone for good costs the leader retries);
//     a removed voter is demoted to a learner. AddRaftVoter sends no
//     ApiVersions to the new voter (Gregor's nodes all support
//     kraft.version 1): it requires a caught-up learner with the same
//     directory id. Every answer, UpdateRaftVoter's and AddRaftVoter v1
//     with AckWhenCommitted=false included, waits for the commit. Voters
//     do not send UpdateRaftVoter when their endpoints change on restart.
//   - UpdateFeatures does not check inter-feature dependencies
//     (Features.validateVersion); metadata.version downgrades are refused.
//   - BROKER_LOGGER config resources are refused with INVALID_REQUEST: the
//     broker that owns the loggers must handle them.
//   - CreateTopics leaves each topic's Configs for the broker to fill.
//   - No create-topic or alter-config policies, no controller mutation
//     quota.
//   - The write pipeline does not linger (Kafka's
//     controller.quorum.append.linger.ms, default 25): the operations
//     already queued when the loop takes one are decided together (up to
//     64) and share one log sync; at most 256 entries or 8 MiB are in
//     flight, and the loop takes no operation while either is reached.
//   - Records a leader decided but that do not apply to the image they
//     were decided against are refused (UNKNOWN_SERVER_ERROR for that
//     operation) and never written; Kafka treats it as a fatal fault.
package controller
