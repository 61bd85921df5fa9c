package metrics

import "strings"

// The catalog: every metric a node exposes, declared once. docs/metrics.md
// lists them with the same names, kinds, labels and MBeans
// (TestDocsListTheCatalog). A label whose value is empty is left out of a
// sample, so a metric with a topic label also carries Kafka's all-topics
// series (the MBean without topic=) as the sample with no topic.

// The replica manager's gauges, computed from the partitions this node
// hosts at each scrape.
var (
	PartitionCount = &Desc{Name: "kafka_server_replicamanager_partitioncount", Kind: GaugeKind,
		MBean: "kafka.server:type=ReplicaManager,name=PartitionCount",
		Help:  "Partitions this broker hosts a replica of."}
	LeaderCount = &Desc{Name: "kafka_server_replicamanager_leadercount", Kind: GaugeKind,
		MBean: "kafka.server:type=ReplicaManager,name=LeaderCount",
		Help:  "Partitions this broker leads."}
	UnderReplicatedPartitions = &Desc{Name: "kafka_server_replicamanager_underreplicatedpartitions", Kind: GaugeKind,
		MBean: "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions",
		Help:  "Partitions this broker leads whose ISR is smaller than their replica set."}
	UnderMinISRPartitionCount = &Desc{Name: "kafka_server_replicamanager_underminisrpartitioncount", Kind: GaugeKind,
		MBean: "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount",
		Help:  "Partitions this broker leads whose ISR is smaller than min.insync.replicas."}
	AtMinISRPartitionCount = &Desc{Name: "kafka_server_replicamanager_atminisrpartitioncount", Kind: GaugeKind,
		MBean: "kafka.server:type=ReplicaManager,name=AtMinIsrPartitionCount",
		Help:  "Partitions this broker leads whose ISR is exactly min.insync.replicas."}
)

// The incremental fetch session cache (KIP-227), consumers' and
// followers' sessions alike.
var (
	NumIncrementalFetchSessions = &Desc{Name: "kafka_server_fetchsessioncache_numincrementalfetchsessions", Kind: GaugeKind,
		MBean: "kafka.server:type=FetchSessionCache,name=NumIncrementalFetchSessions",
		Help:  "Incremental fetch sessions this broker holds."}
	NumIncrementalFetchPartitionsCached = &Desc{Name: "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached", Kind: GaugeKind,
		MBean: "kafka.server:type=FetchSessionCache,name=NumIncrementalFetchPartitionsCached",
		Help:  "Partitions held by all the incremental fetch sessions."}
	IncrementalFetchSessionEvictions = &Desc{Name: "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total", Kind: CounterKind,
		MBean: "kafka.server:type=FetchSessionCache,name=IncrementalFetchSessionEvictionsPerSec (Count)",
		Help:  "Sessions evicted to make room for a new one (max.incremental.fetch.session.cache.slots)."}
)

// The active controller's view of the cluster, computed from the
// metadata image on every controller (ActiveControllerCount is 1 only on
// the active one).
var (
	ActiveControllerCount = &Desc{Name: "kafka_controller_kafkacontroller_activecontrollercount", Kind: GaugeKind,
		MBean: "kafka.controller:type=KafkaController,name=ActiveControllerCount",
		Help:  "1 on the active controller, 0 on the others."}
	OfflinePartitionsCount = &Desc{Name: "kafka_controller_kafkacontroller_offlinepartitionscount", Kind: GaugeKind,
		MBean: "kafka.controller:type=KafkaController,name=OfflinePartitionsCount",
		Help:  "Partitions without a leader."}
	ActiveBrokerCount = &Desc{Name: "kafka_controller_kafkacontroller_activebrokercount", Kind: GaugeKind,
		MBean: "kafka.controller:type=KafkaController,name=ActiveBrokerCount",
		Help:  "Registered brokers that are not fenced."}
	FencedBrokerCount = &Desc{Name: "kafka_controller_kafkacontroller_fencedbrokercount", Kind: GaugeKind,
		MBean: "kafka.controller:type=KafkaController,name=FencedBrokerCount",
		Help:  "Registered brokers that are fenced."}
	GlobalTopicCount = &Desc{Name: "kafka_controller_kafkacontroller_globaltopiccount", Kind: GaugeKind,
		MBean: "kafka.controller:type=KafkaController,name=GlobalTopicCount",
		Help:  "Topics in the cluster."}
	GlobalPartitionCount = &Desc{Name: "kafka_controller_kafkacontroller_globalpartitioncount", Kind: GaugeKind,
		MBean: "kafka.controller:type=KafkaController,name=GlobalPartitionCount",
		Help:  "Partitions in the cluster."}
	PreferredReplicaImbalanceCount = &Desc{Name: "kafka_controller_kafkacontroller_preferredreplicaimbalancecount", Kind: GaugeKind,
		MBean: "kafka.controller:type=KafkaController,name=PreferredReplicaImbalanceCount",
		Help:  "Partitions whose leader is not their preferred (first) replica."}
)

// Tiered storage (KIP-405): Kafka's BrokerTopicMetrics of the remote log
// manager, per topic, for the partitions this node leads (copies,
// deletions) or serves remote reads of.
var (
	RemoteCopyBytes = &Desc{Name: "kafka_server_brokertopicmetrics_remotecopybytes_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=RemoteCopyBytesPerSec,topic=<t> (Count)",
		Help:  "Bytes of segments copied to remote storage."}
	RemoteCopyRequests = &Desc{Name: "kafka_server_brokertopicmetrics_remotecopyrequests_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=RemoteCopyRequestsPerSec,topic=<t> (Count)",
		Help:  "Segment copies to remote storage attempted."}
	FailedRemoteCopyRequests = &Desc{Name: "kafka_server_brokertopicmetrics_failedremotecopyrequests_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=FailedRemoteCopyRequestsPerSec,topic=<t> (Count)",
		Help:  "Segment copies to remote storage that failed (retried at the next task)."}
	RemoteFetchBytes = &Desc{Name: "kafka_server_brokertopicmetrics_remotefetchbytes_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=RemoteFetchBytesPerSec,topic=<t> (Count)",
		Help:  "Bytes of records read from remote storage for fetches."}
	RemoteFetchRequests = &Desc{Name: "kafka_server_brokertopicmetrics_remotefetchrequests_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=RemoteFetchRequestsPerSec,topic=<t> (Count)",
		Help:  "Partition reads from remote storage (fetches below the local log start)."}
	FailedRemoteFetchRequests = &Desc{Name: "kafka_server_brokertopicmetrics_failedremotefetchrequests_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=FailedRemoteFetchRequestsPerSec,topic=<t> (Count)",
		Help:  "Partition reads from remote storage that failed."}
	RemoteDeleteRequests = &Desc{Name: "kafka_server_brokertopicmetrics_remotedeleterequests_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=RemoteDeleteRequestsPerSec,topic=<t> (Count)",
		Help:  "Remote segments deleted (retention, DeleteRecords)."}
	RemoteCopyLagBytes = &Desc{Name: "kafka_server_brokertopicmetrics_remotecopylagbytes", Kind: GaugeKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=RemoteCopyLagBytes,topic=<t> (Value)",
		Help:  "Bytes of rolled segments ready to copy and not in remote storage yet, on the partitions this node leads."}
	RemoteCopyLagSegments = &Desc{Name: "kafka_server_brokertopicmetrics_remotecopylagsegments", Kind: GaugeKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=RemoteCopyLagSegments,topic=<t> (Value)",
		Help:  "Rolled segments ready to copy and not in remote storage yet, on the partitions this node leads."}
	RemoteLogSizeBytes = &Desc{Name: "kafka_server_brokertopicmetrics_remotelogsizebytes", Kind: GaugeKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=RemoteLogSizeBytes,topic=<t> (Value)",
		Help:  "Bytes in remote storage of the partitions this node leads."}
	RemoteLogMetadataCount = &Desc{Name: "kafka_server_brokertopicmetrics_remotelogmetadatacount", Kind: GaugeKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=RemoteLogMetadataCount,topic=<t> (Value)",
		Help:  "Remote segments of the partitions this node leads."}
)

// What partitions this node leads took in and gave out (Kafka's
// kafka.server:type=BrokerTopicMetrics), per topic and for all topics.
var (
	MessagesIn = &Desc{Name: "kafka_server_brokertopicmetrics_messagesin_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec[,topic=<t>] (Count)",
		Help:  "Records appended to the partitions this broker leads."}
	BytesIn = &Desc{Name: "kafka_server_brokertopicmetrics_bytesin_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec[,topic=<t>] (Count)",
		Help:  "Bytes of record batches appended to the partitions this broker leads."}
	BytesOut = &Desc{Name: "kafka_server_brokertopicmetrics_bytesout_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec[,topic=<t>] (Count)",
		Help:  "Bytes of records sent to consumers (not to followers)."}
	ReplicationBytesOut = &Desc{Name: "kafka_server_brokertopicmetrics_replicationbytesout_total", Kind: CounterKind,
		MBean: "kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesOutPerSec (Count)",
		Help:  "Bytes of records sent to followers."}
	TotalProduceRequests = &Desc{Name: "kafka_server_brokertopicmetrics_totalproducerequests_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=TotalProduceRequestsPerSec[,topic=<t>] (Count)",
		Help:  "Partition appends asked of this broker (one per partition of a Produce request that reached the log)."}
	FailedProduceRequests = &Desc{Name: "kafka_server_brokertopicmetrics_failedproducerequests_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=FailedProduceRequestsPerSec[,topic=<t>] (Count)",
		Help:  "Partition appends that failed, but for the errors a client expects and retries (not leader, unknown partition, too large, corrupt, storage error), as Kafka counts them."}
	TotalFetchRequests = &Desc{Name: "kafka_server_brokertopicmetrics_totalfetchrequests_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=TotalFetchRequestsPerSec[,topic=<t>] (Count)",
		Help:  "Partition reads asked of this broker (one per partition of a Fetch, consumers' and followers')."}
	FailedFetchRequests = &Desc{Name: "kafka_server_brokertopicmetrics_failedfetchrequests_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=FailedFetchRequestsPerSec[,topic=<t>] (Count)",
		Help:  "Partition reads that failed, but for the errors a client expects and retries, as Kafka counts them."}
	TotalShareFetchRequests = &Desc{Name: "kafka_server_brokertopicmetrics_totalsharefetchrequests_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=TotalShareFetchRequestsPerSec[,topic=<t>] (Count)",
		Help:  "ShareFetch requests that asked this broker for records of the topic (one per topic of a request, as Kafka counts them)."}
	FailedShareFetchRequests = &Desc{Name: "kafka_server_brokertopicmetrics_failedsharefetchrequests_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=FailedShareFetchRequestsPerSec[,topic=<t>] (Count)",
		Help:  "ShareFetch requests answered with an error for a partition of the topic (one per topic of a request)."}
	TotalShareAcknowledgementRequests = &Desc{Name: "kafka_server_brokertopicmetrics_totalshareacknowledgementrequests_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=TotalShareAcknowledgementRequestsPerSec[,topic=<t>] (Count)",
		Help:  "Requests (ShareAcknowledge, or ShareFetch carrying acknowledgements) that acknowledged records of the topic (one per topic of a request)."}
	FailedShareAcknowledgementRequests = &Desc{Name: "kafka_server_brokertopicmetrics_failedshareacknowledgementrequests_total", Kind: CounterKind, Labels: []string{"topic"},
		MBean: "kafka.server:type=BrokerTopicMetrics,name=FailedShareAcknowledgementRequestsPerSec[,topic=<t>] (Count)",
		Help:  "Acknowledgements refused for a partition of the topic (one per topic of a request)."}
)

// Share groups on the partitions this node leads (Kafka's
// kafka.server:type=ShareGroupMetrics and SharePartitionMetrics).
var (
	RecordAcknowledgements = &Desc{Name: "kafka_server_sharegroupmetrics_recordacknowledgements_total", Kind: CounterKind, Labels: []string{"ackType"},
		MBean: "kafka.server:type=ShareGroupMetrics,name=RecordAcknowledgementsPerSec,ackType=<Accept|Release|Reject|Renew> (Count)",
		Help:  "Records acknowledged by share consumers, by acknowledgement type."}
	ShareInFlightMessageCount = &Desc{Name: "kafka_server_sharepartitionmetrics_inflightmessagecount", Kind: GaugeKind, Labels: []string{"group", "topic", "partition"},
		MBean: "kafka.server:type=SharePartitionMetrics,name=InFlightMessageCount,group=<g>,topic=<t>,partition=<p>",
		Help:  "Offsets in the share partition's in-flight window, from its start offset (the first not acknowledged or archived) to one past the last acquired."}
	ShareAcquisitionLockTimeouts = &Desc{Name: "kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total", Kind: CounterKind, Labels: []string{"group", "topic", "partition"},
		MBean: "kafka.server:type=SharePartitionMetrics,name=AcquisitionLockTimeoutPerSec,group=<g>,topic=<t>,partition=<p> (Count)",
		Help:  "Acquisition locks of the share partition that expired before their records were acknowledged (one per expiry pass that released records)."}
)

// The ISR changes the partitions this node leads made (Kafka's
// kafka.server:type=ReplicaManager meters).
var (
	ISRShrinks = &Desc{Name: "kafka_server_replicamanager_isrshrinks_total", Kind: CounterKind,
		MBean: "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec (Count)",
		Help:  "ISR shrinks of partitions this broker leads, committed by the controller."}
	ISRExpands = &Desc{Name: "kafka_server_replicamanager_isrexpands_total", Kind: CounterKind,
		MBean: "kafka.server:type=ReplicaManager,name=IsrExpandsPerSec (Count)",
		Help:  "ISR expansions of partitions this broker leads, committed by the controller."}
)

// Each hosted partition's log (Kafka's kafka.log:type=Log), unless
// gregor.metrics.per.partition=false leaves them out (nodes with very many
// partitions).
var (
	LogSize = &Desc{Name: "kafka_log_log_size", Kind: GaugeKind, Labels: []string{"topic", "partition"},
		MBean: "kafka.log:type=Log,name=Size,topic=<t>,partition=<p>",
		Help:  "Bytes of the partition's log segments on this broker."}
	LogStartOffset = &Desc{Name: "kafka_log_log_logstartoffset", Kind: GaugeKind, Labels: []string{"topic", "partition"},
		MBean: "kafka.log:type=Log,name=LogStartOffset,topic=<t>,partition=<p>",
		Help:  "The partition's log start offset on this broker."}
	LogEndOffset = &Desc{Name: "kafka_log_log_logendoffset", Kind: GaugeKind, Labels: []string{"topic", "partition"},
		MBean: "kafka.log:type=Log,name=LogEndOffset,topic=<t>,partition=<p>",
		Help:  "The partition's log end offset on this broker."}
	NumLogSegments = &Desc{Name: "kafka_log_log_numlogsegments", Kind: GaugeKind, Labels: []string{"topic", "partition"},
		MBean: "kafka.log:type=Log,name=NumLogSegments,topic=<t>,partition=<p>",
		Help:  "The partition's log segments on this broker."}
)

// The requests this node answered, by API and version.
var Requests = &Desc{Name: "kafka_network_requestmetrics_requests_total", Kind: CounterKind,
	Labels: []string{"request", "version"},
	MBean:  "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=<api>,version=<v> (Count)",
	Help:   "Requests received, by API name (Kafka's, e.g. Produce; a Fetch counts also as FetchConsumer or FetchFollower) and version."}

// RequestHandlerAvgIdlePercent is how much of the node's request-handling
// capacity was idle. Kafka measures its request handler pool (num.io.threads
// threads) and the JMX exporter shows the meter's one-minute rate as a
// fraction. Gregor has no pool: each connection's goroutine runs its
// requests' handlers (async handlers hand their waits to other goroutines,
// as Kafka's purgatories do), and the Go scheduler runs at most GOMAXPROCS
// of them at once. So the capacity is GOMAXPROCS handlers, the busy time is
// the handlers' local time (LocalTimeMs, summed over every request), and
// the value is 1 - busy / (GOMAXPROCS x elapsed), floored at 0, over the
// last minute (measured between scrapes: from the oldest scrape of the last
// minute, or the one before it, to this one; since start-up at the first).
// Handlers blocked in a system call count as busy, as Kafka's blocked
// handler threads do.
var RequestHandlerAvgIdlePercent = &Desc{Name: "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent", Kind: GaugeKind,
	MBean: "kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent (OneMinuteRate)",
	Help:  "Fraction (0 to 1) of the node's request-handling capacity (GOMAXPROCS handlers) that was idle over the last minute."}

// The time requests took, by Kafka's API name (Kafka's
// kafka.network:type=RequestMetrics histograms), as the JMX exporter
// renders a histogram: its percentiles over the last five minutes as
// samples with a quantile label (0.50, 0.75, 0.95, 0.98, 0.99, 0.999), its
// count as <name>_count_total (the exporter's rules make the count a
// counter, and the exporter since 1.0 ends a counter's name in _total). Received to dispatched is the request queue time,
// the handler's own work the local time, waiting in a purgatory (acks=all,
// a fetch's long poll) or for the controller the remote time, answered to
// picked up by the connection's writer the response queue time, and the
// write the response send time.
var (
	RequestQueueTimeMs, RequestQueueTimeMsCount   = requestTime("RequestQueueTimeMs", "waiting to be handled")
	LocalTimeMs, LocalTimeMsCount                 = requestTime("LocalTimeMs", "in its handler")
	RemoteTimeMs, RemoteTimeMsCount               = requestTime("RemoteTimeMs", "waiting for replicas, new data or the controller")
	ResponseQueueTimeMs, ResponseQueueTimeMsCount = requestTime("ResponseQueueTimeMs", "answered, waiting to be written")
	ResponseSendTimeMs, ResponseSendTimeMsCount   = requestTime("ResponseSendTimeMs", "being written")
	TotalTimeMs, TotalTimeMsCount                 = requestTime("TotalTimeMs", "from received to written")
)

// requestTime declares one request histogram: its quantiles and its count.
func requestTime(mbeanName, what string) (quantiles, count *Desc) {
	name := "kafka_network_requestmetrics_" + strings.ToLower(mbeanName)
	mbean := "kafka.network:type=RequestMetrics,name=" + mbeanName + ",request=<api>"
	return &Desc{Name: name, Kind: GaugeKind, Labels: []string{"request", "quantile"},
			MBean: mbean + " (50thPercentile ... 999thPercentile)",
			Help:  "Milliseconds a request spent " + what + ", quantiles of the last five minutes."},
		&Desc{Name: name + "_count_total", Kind: CounterKind, Labels: []string{"request"},
			MBean: mbean + " (Count)",
			Help:  "Requests timed."}
}

// The metadata quorum as this controller sees it (Kafka's own metrics
// kafka.server:type=raft-metrics, not Yammer's), named as the JMX
// exporter's KRaft example rules (kafka-kraft-3_0_0.yml) render them: the
// type and attribute lower-cased, dashes as underscores; the state as the
// label of a gauge that is 1 (the rule names it ..._info, which the
// exporter's Prometheus client drops as a reserved suffix).
var (
	RaftCurrentState = &Desc{Name: "kafka_server_raft_metrics_current_state", Kind: GaugeKind, Labels: []string{"state"},
		MBean: "kafka.server:type=raft-metrics (current-state)",
		Help:  "1, labelled with this controller's raft state: leader, candidate, prospective (a pre-vote), follower, or unattached (no leader known)."}
	RaftCurrentLeader = &Desc{Name: "kafka_server_raft_metrics_current_leader", Kind: GaugeKind,
		MBean: "kafka.server:type=raft-metrics (current-leader)",
		Help:  "The quorum leader's node id, -1 when unknown."}
	RaftCurrentVote = &Desc{Name: "kafka_server_raft_metrics_current_vote", Kind: GaugeKind,
		MBean: "kafka.server:type=raft-metrics (current-vote)",
		Help:  "The node this controller voted for in the current epoch, -1 when none."}
	RaftCurrentEpoch = &Desc{Name: "kafka_server_raft_metrics_current_epoch", Kind: GaugeKind,
		MBean: "kafka.server:type=raft-metrics (current-epoch)",
		Help:  "The quorum's epoch (raft term)."}
	RaftHighWatermark = &Desc{Name: "kafka_server_raft_metrics_high_watermark", Kind: GaugeKind,
		MBean: "kafka.server:type=raft-metrics (high-watermark)",
		Help:  "The metadata log's committed offset as this controller knows it."}
	RaftLogEndOffset = &Desc{Name: "kafka_server_raft_metrics_log_end_offset", Kind: GaugeKind,
		MBean: "kafka.server:type=raft-metrics (log-end-offset)",
		Help:  "The offset after the last entry of this controller's metadata log."}
	RaftNumberOfVoters = &Desc{Name: "kafka_server_raft_metrics_number_of_voters", Kind: GaugeKind,
		MBean: "kafka.server:type=raft-metrics (number-of-voters)",
		Help:  "Voters of the metadata quorum."}
	RaftNumberOfObservers = &Desc{Name: "kafka_server_raft_metrics_number_of_observers", Kind: GaugeKind,
		MBean: "kafka.server:type=raft-metrics (number-of-observers)",
		Help:  "Controllers following the quorum without a vote (raft learners); brokers that follow the committed log are not counted."}
	RaftCommitLatencyAvg = &Desc{Name: "kafka_server_raft_metrics_commit_latency_avg", Kind: GaugeKind,
		MBean: "kafka.server:type=raft-metrics (commit-latency-avg)",
		Help:  "Milliseconds from the leader proposing an entry to applying it committed, mean over the last 30 to 60 seconds; NaN when nothing was committed."}
	RaftCommitLatencyMax = &Desc{Name: "kafka_server_raft_metrics_commit_latency_max", Kind: GaugeKind,
		MBean: "kafka.server:type=raft-metrics (commit-latency-max)",
		Help:  "Milliseconds from the leader proposing an entry to applying it committed, maximum over the last 30 to 60 seconds; NaN when nothing was committed."}
	RaftAppendRecordsRate = &Desc{Name: "kafka_server_raft_metrics_append_records_rate", Kind: GaugeKind,
		MBean: "kafka.server:type=raft-metrics (append-records-rate)",
		Help:  "Metadata records a second this controller appended as the leader, over the last 30 to 60 seconds."}
	RaftFetchRecordsRate = &Desc{Name: "kafka_server_raft_metrics_fetch_records_rate", Kind: GaugeKind,
		MBean: "kafka.server:type=raft-metrics (fetch-records-rate)",
		Help:  "Metadata records a second this controller took from the leader as a follower, over the last 30 to 60 seconds."}
	RaftPollIdleRatioAvg = &Desc{Name: "kafka_server_raft_metrics_poll_idle_ratio_avg", Kind: GaugeKind,
		MBean: "kafka.server:type=raft-metrics (poll-idle-ratio-avg)",
		Help:  "The fraction of time the raft loop waited for work, over the last 30 to 60 seconds."}
)

// The group coordinator's groups and offsets on the partitions of
// __consumer_offsets this node leads (Kafka's Yammer gauges
// kafka.coordinator.group:type=GroupMetadataManager, and its own metrics
// kafka.server:type=group-coordinator-metrics with their tags as labels),
// counted at scrape time; Kafka's -count attributes are gauges under the
// KRaft rules, as here.
var (
	NumGroups = &Desc{Name: "kafka_coordinator_group_groupmetadatamanager_numgroups", Kind: GaugeKind,
		MBean: "kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups",
		Help:  "Groups this node coordinates, classic and consumer."}
	NumOffsets = &Desc{Name: "kafka_coordinator_group_groupmetadatamanager_numoffsets", Kind: GaugeKind,
		MBean: "kafka.coordinator.group:type=GroupMetadataManager,name=NumOffsets",
		Help:  "Committed offsets of the groups this node coordinates."}
	NumGroupsEmpty               = classicGroupsIn("Empty")
	NumGroupsPreparingRebalance  = classicGroupsIn("PreparingRebalance")
	NumGroupsCompletingRebalance = classicGroupsIn("CompletingRebalance")
	NumGroupsStable              = classicGroupsIn("Stable")
	NumGroupsDead                = classicGroupsIn("Dead")
	GroupCount                   = &Desc{Name: "kafka_server_group_coordinator_metrics_group_count", Kind: GaugeKind, Labels: []string{"protocol"},
		MBean: "kafka.server:type=group-coordinator-metrics,protocol=<classic|consumer|share|streams> (group-count)",
		Help:  "Groups this node coordinates, by rebalance protocol."}
	StreamsGroupCount = &Desc{Name: "kafka_server_group_coordinator_metrics_streams_group_count", Kind: GaugeKind, Labels: []string{"state"},
		MBean: "kafka.server:type=group-coordinator-metrics,state=<Empty|NotReady|Assigning|Reconciling|Stable|Dead> (streams-group-count)",
		Help:  "Streams (KIP-1071) groups this node coordinates, by state."}
	StreamsGroupRebalanceCount = &Desc{Name: "kafka_server_group_coordinator_metrics_streams_group_rebalance_count", Kind: GaugeKind,
		MBean: "kafka.server:type=group-coordinator-metrics (streams-group-rebalance-count)",
		Help:  "Target assignments of streams groups this node coordinates computed since it started."}
	ShareGroupCount = &Desc{Name: "kafka_server_group_coordinator_metrics_share_group_count", Kind: GaugeKind, Labels: []string{"state"},
		MBean: "kafka.server:type=group-coordinator-metrics,state=<Empty|Stable|Dead> (share-group-count)",
		Help:  "Share groups this node coordinates, by state."}
	ShareGroupRebalanceCount = &Desc{Name: "kafka_server_group_coordinator_metrics_share_group_rebalance_count", Kind: GaugeKind,
		MBean: "kafka.server:type=group-coordinator-metrics (share-group-rebalance-count)",
		Help:  "Group epoch bumps of share groups this node coordinates since it started."}
	ConsumerGroupCount = &Desc{Name: "kafka_server_group_coordinator_metrics_consumer_group_count", Kind: GaugeKind, Labels: []string{"state"},
		MBean: "kafka.server:type=group-coordinator-metrics,state=<Empty|Assigning|Reconciling|Stable|Dead> (consumer-group-count)",
		Help:  "Consumer (KIP-848) groups this node coordinates, by state."}
	OffsetCommitCount = &Desc{Name: "kafka_server_group_coordinator_metrics_offset_commit_count", Kind: GaugeKind,
		MBean: "kafka.server:type=group-coordinator-metrics (offset-commit-count)",
		Help:  "Offsets committed (one per partition, OffsetCommit and TxnOffsetCommit) through this node since it started."}
	OffsetExpirationCount = &Desc{Name: "kafka_server_group_coordinator_metrics_offset_expiration_count", Kind: GaugeKind,
		MBean: "kafka.server:type=group-coordinator-metrics (offset-expiration-count)",
		Help:  "Committed offsets this node removed after offsets.retention.minutes since it started."}
	OffsetDeletionCount = &Desc{Name: "kafka_server_group_coordinator_metrics_offset_deletion_count", Kind: GaugeKind,
		MBean: "kafka.server:type=group-coordinator-metrics (offset-deletion-count)",
		Help:  "Committed offsets removed by OffsetDelete through this node since it started."}
	GroupCompletedRebalanceCount = &Desc{Name: "kafka_server_group_coordinator_metrics_group_completed_rebalance_count", Kind: GaugeKind,
		MBean: "kafka.server:type=group-coordinator-metrics (group-completed-rebalance-count)",
		Help:  "Rebalances of classic groups this node completed (the leader's assignment stored) since it started."}
	ConsumerGroupRebalanceCount = &Desc{Name: "kafka_server_group_coordinator_metrics_consumer_group_rebalance_count", Kind: GaugeKind,
		MBean: "kafka.server:type=group-coordinator-metrics (consumer-group-rebalance-count)",
		Help:  "Group epoch bumps of consumer groups this node coordinates since it started."}
	GroupNumPartitions = &Desc{Name: "kafka_server_group_coordinator_metrics_num_partitions", Kind: GaugeKind, Labels: []string{"state"},
		MBean: "kafka.server:type=group-coordinator-metrics,state=<loading|active|failed> (num-partitions)",
		Help:  "Partitions of __consumer_offsets this node leads, by the state of their coordinator shard."}
	GroupPartitionLoadTimeAvg = &Desc{Name: "kafka_server_group_coordinator_metrics_partition_load_time_avg", Kind: GaugeKind,
		MBean: "kafka.server:type=group-coordinator-metrics (partition-load-time-avg)",
		Help:  "Milliseconds loading a __consumer_offsets partition took, mean over the last 30 to 60 seconds; NaN when none loaded."}
	GroupPartitionLoadTimeMax = &Desc{Name: "kafka_server_group_coordinator_metrics_partition_load_time_max", Kind: GaugeKind,
		MBean: "kafka.server:type=group-coordinator-metrics (partition-load-time-max)",
		Help:  "Milliseconds loading a __consumer_offsets partition took, maximum over the last 30 to 60 seconds; NaN when none loaded."}
)

// classicGroupsIn declares the GroupMetadataManager gauge of classic
// groups in one state.
func classicGroupsIn(state string) *Desc {
	return &Desc{Name: "kafka_coordinator_group_groupmetadatamanager_numgroups" + strings.ToLower(state), Kind: GaugeKind,
		MBean: "kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups" + state,
		Help:  "Classic groups this node coordinates in state " + state + "."}
}

// The transaction coordinator's loads of __transaction_state partitions
// (Kafka's kafka.server:type=transaction-coordinator-metrics).
var (
	TxnPartitionLoadTimeAvg = &Desc{Name: "kafka_server_transaction_coordinator_metrics_partition_load_time_avg", Kind: GaugeKind,
		MBean: "kafka.server:type=transaction-coordinator-metrics (partition-load-time-avg)",
		Help:  "Milliseconds loading a __transaction_state partition took, mean over the last 30 to 60 seconds; NaN when none loaded."}
	TxnPartitionLoadTimeMax = &Desc{Name: "kafka_server_transaction_coordinator_metrics_partition_load_time_max", Kind: GaugeKind,
		MBean: "kafka.server:type=transaction-coordinator-metrics (partition-load-time-max)",
		Help:  "Milliseconds loading a __transaction_state partition took, maximum over the last 30 to 60 seconds; NaN when none loaded."}
)

// Each listener's connections and SASL authentications (Kafka's
// kafka.server:type=socket-server-metrics,listener=<l>,networkProcessor=<n>).
// Kafka keeps them per network thread; Gregor has no network threads (a
// connection has goroutines of its own), so every listener reports one
// networkProcessor, "0", holding all of its connections.
var (
	ConnectionCount               = socketServer("connection-count", GaugeKind, "Connections open on the listener.")
	ConnectionCreationTotal       = socketServer("connection-creation-total", CounterKind, "Connections the listener accepted and served (not those refused by a connection limit or quota).")
	ConnectionCloseTotal          = socketServer("connection-close-total", CounterKind, "Connections of the listener that closed.")
	SuccessfulAuthenticationTotal = socketServer("successful-authentication-total", CounterKind, "SASL authentications that succeeded on the listener (not re-authentications).")
	FailedAuthenticationTotal     = socketServer("failed-authentication-total", CounterKind, "SASL authentications that failed on the listener (not re-authentications).")
)

// socketServer declares a socket-server-metrics attribute.
func socketServer(attribute string, kind Kind, help string) *Desc {
	return &Desc{Name: "kafka_server_socket_server_metrics_" + strings.ReplaceAll(attribute, "-", "_"), Kind: kind,
		Labels: []string{"listener", "networkProcessor"},
		MBean:  "kafka.server:type=socket-server-metrics,listener=<l>,networkProcessor=<n> (" + attribute + ")",
		Help:   help}
}

// The client quotas' measures of each user and client id pair a quota
// applies to or that was throttled (Kafka's
// kafka.server:type=<Produce|Fetch|Request|ControllerMutation>,user=<u>,client-id=<c>;
// the user or client id is left out when the pair is counted without it,
// as Kafka's MBean name leaves it out), named as the JMX exporter's
// example quota rules render them: kafka_server_quota_<attribute>, the
// type as the resource label.
var (
	QuotaByteRate = quota("byte-rate", "<Produce|Fetch>",
		"Bytes a second the pair produced (request bytes) or fetched (response bytes), over quota.window.num samples of quota.window.size.seconds.")
	QuotaRequestTime = quota("request-time", "Request",
		"The share of one thread's time (percent) the pair's requests took to handle, over quota.window.num samples of quota.window.size.seconds.")
	QuotaTokens = quota("tokens", "ControllerMutation",
		"Partition mutations left in the pair's controller_mutation_rate token bucket (negative: in debt).")
	QuotaThrottleTime = quota("throttle-time", "<Produce|Fetch|Request|ControllerMutation>",
		"Milliseconds the pair's throttled requests were throttled by this quota, mean over the last 30 to 60 seconds; NaN when none was.")
)

// quota declares a quota attribute of the MBeans of resources.
func quota(attribute, resources, help string) *Desc {
	return &Desc{Name: "kafka_server_quota_" + strings.ReplaceAll(attribute, "-", "_"), Kind: GaugeKind,
		Labels: []string{"resource", "user", "clientId"},
		MBean:  "kafka.server:type=" + resources + ",user=<u>,client-id=<c> (" + attribute + ")",
		Help:   help}
}

// The lag of the consumer groups this node coordinates (Gregor's own:
// Kafka's brokers have no MBean for it; kafka-lag-exporter and Burrow
// compute it outside), at scrape time: a partition's high watermark, as
// kafka-consumer-groups --describe lists it as LOG-END-OFFSET, less the
// group's committed offset (broker/lagmetrics.go). The per-partition
// series only with gregor.metrics.per.partition.
var (
	ConsumerGroupLag = &Desc{Name: "gregor_consumergroup_lag", Kind: GaugeKind, Labels: []string{"group", "topic", "partition"},
		MBean: "none: Gregor's own",
		Help:  "The partition's high watermark less the group's committed offset (kafka-consumer-groups' LAG), for the groups this node coordinates."}
	ConsumerGroupLagSum = &Desc{Name: "gregor_consumergroup_lag_sum", Kind: GaugeKind, Labels: []string{"group", "topic"},
		MBean: "none: Gregor's own",
		Help:  "The group's lag summed over the topic's partitions it committed offsets of, for the groups this node coordinates."}
	ConsumerGroupCommittedOffset = &Desc{Name: "gregor_consumergroup_committed_offset", Kind: GaugeKind, Labels: []string{"group", "topic", "partition"},
		MBean: "none: Gregor's own",
		Help:  "The group's committed offset of the partition (kafka-consumer-groups' CURRENT-OFFSET), where its lag is known."}
)

// RequestTimeQuantiles are the quantiles the request histograms give, as
// the JMX exporter labels Kafka's percentiles.
var RequestTimeQuantiles = []float64{0.50, 0.75, 0.95, 0.98, 0.99, 0.999}

// RequestTimeQuantileLabels are their label values.
var RequestTimeQuantileLabels = []string{"0.50", "0.75", "0.95", "0.98", "0.99", "0.999"}

// KIP-714 client telemetry: the broker's own counts (Kafka's
// kafka.server:type=client-metrics; Kafka's per-instance throttle, export
// and error meters are counted here for all instances together, for a
// client instance id is an unbounded label), and the family of what
// clients push.
var (
	ClientMetricsInstanceCount = &Desc{Name: "kafka_server_client_metrics_instance_count", Kind: GaugeKind,
		MBean: "kafka.server:type=client-metrics (instance-count)",
		Help:  "Client instances (KIP-714) this broker keeps: they asked for their telemetry subscription or pushed telemetry lately."}
	ClientMetricsUnknownSubscriptionRequests = &Desc{Name: "kafka_server_client_metrics_unknown_subscription_request_total", Kind: CounterKind,
		MBean: "kafka.server:type=client-metrics (unknown-subscription-request-count)",
		Help:  "PushTelemetry requests answered UNKNOWN_SUBSCRIPTION_ID: the client's subscription changed."}
	ClientMetricsThrottles = &Desc{Name: "kafka_server_client_metrics_throttle_total", Kind: CounterKind,
		MBean: "kafka.server:type=client-metrics,client_instance_id=<id> (throttle-count), all instances",
		Help:  "Telemetry requests answered THROTTLING_QUOTA_EXCEEDED: sent before the push interval passed."}
	ClientMetricsPluginExports = &Desc{Name: "kafka_server_client_metrics_plugin_export_total", Kind: CounterKind,
		MBean: "kafka.server:type=client-metrics,client_instance_id=<id> (plugin-export-count), all instances",
		Help:  "Pushed telemetry payloads decoded into the gregor_client_ series."}
	ClientMetricsPluginErrors = &Desc{Name: "kafka_server_client_metrics_plugin_error_total", Kind: CounterKind,
		MBean: "kafka.server:type=client-metrics,client_instance_id=<id> (plugin-error-count), all instances",
		Help:  "Pushed telemetry payloads that did not decompress or decode (answered INVALID_RECORD)."}
	ClientTelemetry = &Desc{Name: "gregor_client_", Kind: GaugeKind, Labels: []string{"client_instance_id"}, Family: true,
		MBean: "none: the OTLP metrics clients push (KIP-714), named gregor_client_<OTLP name, dots as underscores>",
		Help: "A family per metric clients push: gauges and non-monotonic sums as gauges, monotonic sums as counters (_total; delta pushes added up), histograms as _bucket, _sum and _count; " +
			"labels client_instance_id and the points' and resource's attributes; the series of at most gregor.metrics.client.telemetry.max.clients (100) instances, each dropped max(60 s, 3 push intervals) after its last push."}
)

// Catalog is every metric declared above, in the order docs/metrics.md
// lists them.
func Catalog() []*Desc {
	return []*Desc{
		PartitionCount, LeaderCount, UnderReplicatedPartitions, UnderMinISRPartitionCount, AtMinISRPartitionCount,
		NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached, IncrementalFetchSessionEvictions,
		ActiveControllerCount, OfflinePartitionsCount, ActiveBrokerCount, FencedBrokerCount, GlobalTopicCount,
		GlobalPartitionCount, PreferredReplicaImbalanceCount,
		MessagesIn, BytesIn, BytesOut, ReplicationBytesOut, TotalProduceRequests, FailedProduceRequests,
		TotalFetchRequests, FailedFetchRequests,
		TotalShareFetchRequests, FailedShareFetchRequests, TotalShareAcknowledgementRequests, FailedShareAcknowledgementRequests,
		RemoteCopyBytes, RemoteCopyRequests, FailedRemoteCopyRequests, RemoteFetchBytes, RemoteFetchRequests, FailedRemoteFetchRequests,
		RemoteDeleteRequests, RemoteCopyLagBytes, RemoteCopyLagSegments, RemoteLogSizeBytes, RemoteLogMetadataCount,
		ISRShrinks, ISRExpands,
		LogSize, LogStartOffset, LogEndOffset, NumLogSegments,
		Requests, RequestHandlerAvgIdlePercent,
		RequestQueueTimeMs, RequestQueueTimeMsCount, LocalTimeMs, LocalTimeMsCount, RemoteTimeMs, RemoteTimeMsCount,
		ResponseQueueTimeMs, ResponseQueueTimeMsCount, ResponseSendTimeMs, ResponseSendTimeMsCount, TotalTimeMs, TotalTimeMsCount,
		RaftCurrentState, RaftCurrentLeader, RaftCurrentVote, RaftCurrentEpoch, RaftHighWatermark, RaftLogEndOffset,
		RaftNumberOfVoters, RaftNumberOfObservers, RaftCommitLatencyAvg, RaftCommitLatencyMax, RaftAppendRecordsRate,
		RaftFetchRecordsRate, RaftPollIdleRatioAvg,
		NumGroups, NumOffsets, NumGroupsEmpty, NumGroupsPreparingRebalance, NumGroupsCompletingRebalance, NumGroupsStable,
		NumGroupsDead, GroupCount, ConsumerGroupCount, ShareGroupCount, ShareGroupRebalanceCount, StreamsGroupCount, StreamsGroupRebalanceCount, OffsetCommitCount, OffsetExpirationCount, OffsetDeletionCount,
		GroupCompletedRebalanceCount, ConsumerGroupRebalanceCount, GroupNumPartitions, GroupPartitionLoadTimeAvg,
		GroupPartitionLoadTimeMax, TxnPartitionLoadTimeAvg, TxnPartitionLoadTimeMax,
		ConnectionCount, ConnectionCreationTotal, ConnectionCloseTotal, SuccessfulAuthenticationTotal, FailedAuthenticationTotal,
		QuotaByteRate, QuotaRequestTime, QuotaTokens, QuotaThrottleTime,
		ConsumerGroupLag, ConsumerGroupLagSum, ConsumerGroupCommittedOffset,
		RecordAcknowledgements, ShareInFlightMessageCount, ShareAcquisitionLockTimeouts,
		ProcessCPUSeconds, ProcessResidentMemory, ProcessVirtualMemory, ProcessOpenFDs, ProcessMaxFDs, ProcessStartTime,
		GoGoroutines, GoAllocBytes, GoHeapInUse, GoSysBytes, GoHeapReleased, GoStackInUse, GoGCCycles,
		ClientMetricsInstanceCount, ClientMetricsUnknownSubscriptionRequests, ClientMetricsThrottles,
		ClientMetricsPluginExports, ClientMetricsPluginErrors, ClientTelemetry,
	}
}
