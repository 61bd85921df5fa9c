package integration

// departure is a place where Gregor deliberately behaves otherwise than
// Apache Kafka, because Kafka loses or leaks data there (or wastes what a
// user pays for); the report lists them with the test that proves it.
type departure struct {
	topic, kafka, gregor, proof string
}

func departures() []departure {
	return []departure{
		{
			topic:  "DeleteRecords and a crash",
			kafka:  "writes log-start-offset-checkpoint every log.flush.start.offset.checkpoint.interval.ms (60 s): after a crash in between, a log start inside a segment goes back to the segment's base and the deleted records are readable again",
			gregor: "writes the checkpoint before it answers DeleteRecords",
			proof:  "integration/lifecycle TestLogStartOffsetSurvivesKillAndIsHonoured (kill -9 right after DeleteRecords), storage TestDeleteRecordsLogStartSurvivesCrash",
		},
		{
			topic:  "tombstones past delete.retention.ms",
			kafka:  "drops them only in a cleaning that the log's dirty ratio triggers: a compacted topic that is no longer written keeps its deleted keys for good",
			gregor: "also cleans a log when the delete horizon of a tombstone or marker it kept has passed",
			proof:  "storage TestCleanerTombstonesStayUntilTheDeleteHorizon; cli/compaction (Kafka needs new writes to get there)",
		},
		{
			topic:  "a full disk",
			kafka:  "treats ENOSPC as any I/O error: the whole log dir goes offline, reads included, until the broker is restarted",
			gregor: "refuses the append with KAFKA_STORAGE_ERROR, leaves the log as it was, keeps serving reads, and takes appends again once space is freed (a failed fsync still takes the dir offline)",
			proof:  "integration/lifecycle TestFullDiskRefusesAppendsAndRecovers, storage TestFullDiskRefusesAppendsAndRecovers and TestFullDiskAtRollKeepsTheActiveSegment",
		},
		{
			topic:  "the cleaner's memory",
			kafka:  "allocates log.cleaner.dedupe.buffer.size (128 MiB) when the cleaner starts, whatever it will clean",
			gregor: "grows each thread's offset map up to its share of the buffer, as keys come",
			proof:  "storage TestOffsetMapFillsAtItsBudget",
		},
		{
			topic:  "a broker killed with kill -9",
			kafka:  "is fenced, and its partitions' leaderships moved, only when its session lapses: broker.session.timeout.ms (9 s) without a heartbeat, all that time its partitions take no writes",
			gregor: "the active controller sees the broker's heartbeat connection close and dials its registered listeners; when every one that accepted before now refuses, the process is gone and the broker is fenced at once (a paused or partitioned broker still waits its session out; a controller that just became active probes the brokers it inherited)",
			proof:  "integration/replication TestKilledBrokerFencedAtOnce (session timeout 60 s, fenced in about 0.1 s, or election plus 0.3 s when the active controller died), controller TestProbeFencesOnlyBrokersWhoseListenersWentAway",
		},
		{
			topic:  "the high watermark on followers",
			kafka:  "a follower learns a new high watermark only with its next fetch's answer, which waits for new data up to replica.fetch.wait.max.ms (500 ms) when the partition is idle",
			gregor: "a waiting follower fetch is answered as soon as the high watermark moves past what that follower was last sent, so followers (and consumers reading from them, KIP-392) see committed records without the wait",
			proof:  "replica TestFollowersLearnTheHighWatermarkWithoutWaitingForData (long polls of a minute)",
		},
		{
			topic:  "a combined node's own requests under an authorizer",
			kafka:  "its broker registers, heartbeats, asks for producer ids and creates internal topics over its own controller listener, authorized as that connection's principal: with allow.everyone.if.no.acl.found=false (or an ACL on the cluster) and that principal not a super user, the node cannot register and never serves",
			gregor: "reaches its own controller in process: the node's own requests need no grant; other nodes' requests and everything clients send are authorized as in Kafka (forwarded ones with the client's principal)",
			proof:  "broker TestAuthzControllerListener (CLUSTER_ACTION denied on the controller listener, the node keeps its registration), TestAuthzForwardingCarriesThePrincipal (another node's own CreateTopics is authorized as its connection)",
		},
		{
			topic:  "a leader cut off from the controller quorum",
			kafka:  "goes on answering as the leader of its partitions and as its groups' coordinator after the quorum fenced it and moved them (its image still names it): a consumer whose metadata came from it is told OFFSET_OUT_OF_RANGE for the new leader's committed offsets and resets (to the start with auto.offset.reset=earliest, skipping to the end with latest), ListOffsets gets its stale log end, FindCoordinator names it and OffsetFetch returns its stale commits, so a group resumes from behind; a fenced broker back with metadata from before its fencing is unfenced at once",
			gregor: "keeps a leader lease: it leads a replicated partition (and hosts its coordinator shard) only while the controller's last unfenced answer to a heartbeat is younger than broker.session.timeout.ms, counted from the heartbeat's send, less a tenth (at most 1 s), which is no later than the controller could fence it; otherwise it answers NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR and, to FindCoordinator, COORDINATOR_NOT_AVAILABLE, which clients retry elsewhere; the controller unfences a broker only once its metadata has reached its fencing. A partition with one replica keeps serving (no other node could lead it)",
			proof:  "integration/faults TestFaultIsolatedLeaderStopsServing (in make test; fails on Kafka 4.3.1 in all four ways), replica TestLeaderLeaseGatesReplicatedLeaderships, controller TestFencedBrokerIsUnfencedOnlyOnceCaughtUpWithItsFencing, broker TestFindCoordinatorNamesOnlyALeaderThatCanServe",
		},
		{
			topic:  "a node's wall clock stepped forward",
			kafka:  "decides retention.ms, producer.id.expiration.ms, the cleaner's delete horizon and committed offsets' expiry (offsets.retention.minutes) by the wall clock (UnifiedLog compares time.milliseconds() with a segment's largest timestamp; read in Kafka's source, not measured here): a step of eight days deletes every segment of every partition the node leads, and followers move their log start after the leader's, so acknowledged records are gone, producers' state is forgotten, so a retried batch is appended twice, and a group empty at that moment loses its committed offsets",
			gregor: "decides what is old enough to delete by a clock that never runs ahead of the wall clock at start-up plus the monotonic time elapsed since (a backward step is followed; a forward one, or time spent suspended, only delays deletions until the next restart, and is logged once); LogAppendTime and segment.ms still follow the wall clock",
			proof:  "integration/faults TestFaultClockStepLeader (a leader's clock stepped 8 days ahead four times in 40 s: 0 violations; with the guard taken out, segments were deleted past retention and the final read failed), storage TestRetentionDeletesByTheExpiryClock, coordinator/group TestOffsetsExpireByTheExpiryClock, cmd/gregor TestStepGuardHoldsForwardStepsBack",
		},
	}
}
