package metrics

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

// The requests this node answered, by API and version.
var Requests = &Desc{Name: "kafka_network_requestmetrics_requests_total", Kind: CounterKind,
	Labels: []string{"request", "version"},
	MBean:  "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=<api>,version=<v> (Count)",
	Help:   "Requests received, by API name (Kafka's, e.g. Produce) and version."}

// Catalog is every metric declared above, in the order docs/metrics.md
// lists them.
func Catalog() []*Desc {
	return []*Desc{
		PartitionCount, LeaderCount, UnderReplicatedPartitions, UnderMinISRPartitionCount, AtMinISRPartitionCount,
		ActiveControllerCount, OfflinePartitionsCount, ActiveBrokerCount, FencedBrokerCount, GlobalTopicCount,
		GlobalPartitionCount, PreferredReplicaImbalanceCount,
		Requests,
	}
}
