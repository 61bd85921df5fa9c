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
		ActiveControllerCount, OfflinePartitionsCount, ActiveBrokerCount, FencedBrokerCount, GlobalTopicCount,
		GlobalPartitionCount, PreferredReplicaImbalanceCount,
		MessagesIn, BytesIn, BytesOut, ReplicationBytesOut, TotalProduceRequests, FailedProduceRequests,
		TotalFetchRequests, FailedFetchRequests, ISRShrinks, ISRExpands,
		LogSize, LogStartOffset, LogEndOffset, NumLogSegments,
		Requests,
		RequestQueueTimeMs, RequestQueueTimeMsCount, LocalTimeMs, LocalTimeMsCount, RemoteTimeMs, RemoteTimeMsCount,
		ResponseQueueTimeMs, ResponseQueueTimeMsCount, ResponseSendTimeMs, ResponseSendTimeMsCount, TotalTimeMs, TotalTimeMsCount,
		ClientMetricsInstanceCount, ClientMetricsUnknownSubscriptionRequests, ClientMetricsThrottles,
		ClientMetricsPluginExports, ClientMetricsPluginErrors, ClientTelemetry,
	}
}
