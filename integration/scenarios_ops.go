package integration

// The operations scenarios: what an operator scrapes. On the kafka target
// the node runs with Prometheus' JMX exporter java agent and the
// exporter's Kafka naming convention, so a check that passes on both
// targets proves Gregor's metrics answer the queries written for Kafka.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func opsScenarios() []Scenario {
	return []Scenario{
		{Name: "ops/metrics-names", Doc: "after a produce and a fetch, /metrics (Kafka through the JMX exporter's Kafka naming) has the replica manager's, controller's, topic's, log's, request, raft, group coordinator, socket server and (for a throttled client id) quota metrics under the same names, labels and values", Timeout: 4 * time.Minute, OwnNodes: true, Run: opsMetricsNames},
	}
}

// scrapeTimeout bounds one scrape: Prometheus' default is 10 s.
const scrapeTimeout = 30 * time.Second

// scrape fetches and parses addr's /metrics, keeping the text in
// dir/metrics.txt for whoever reads a failure.
func scrape(ctx context.Context, addr, dir string) ([]Sample, error) {
	// The JMX exporter in a Kafka node walks every MBean on each scrape:
	// seconds on a loaded two-core machine (a kafka-cluster run saw every
	// scrape of a 30 s wait pass 5 s). What is checked is the names,
	// labels and values, not how fast Kafka's exporter answers.
	body, err := HTTPGet(ctx, "http://"+addr+"/metrics", scrapeTimeout)
	if err != nil {
		return nil, fmt.Errorf("/metrics: %w", err)
	}
	_ = os.WriteFile(filepath.Join(dir, "metrics.txt"), body, 0o644)
	return ParseExposition(string(body))
}

// sumOf is the sum of name's samples whose labels include match, and how
// many there are.
func sumOf(samples []Sample, name string, match map[string]string) (float64, int) {
	var sum float64
	n := 0
next:
	for _, s := range samples {
		if s.Name != name {
			continue
		}
		for k, v := range match {
			if s.Labels[k] != v {
				continue next
			}
		}
		if len(match) == 0 && len(s.Labels) > 0 {
			continue // the unlabelled (all-topics) series only
		}
		sum += s.Value
		n++
	}
	return sum, n
}

func opsMetricsNames(ctx context.Context, e *Env) error {
	n, err := e.StartNode(ctx, NodeSpec{Metrics: true})
	if err != nil {
		return err
	}
	const topic = "ops-metered"
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Bootstrap()), kgo.DefaultProduceTopic(topic),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	const records = 10
	for i := range records {
		r := kgo.StringRecord(fmt.Sprintf("record-%d", i))
		r.Partition = int32(i % 2)
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return fmt.Errorf("producing: %w", err)
		}
	}
	got := 0
	for got < records {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("consumed %d of %d records: %w", got, records, err)
		}
		got += len(fs.Records())
	}

	topicLabel := map[string]string{"topic": topic}
	checks := []metricCheck{
		{"kafka_server_replicamanager_partitioncount", nil, 2, false},
		{"kafka_server_replicamanager_leadercount", nil, 2, false},
		{"kafka_server_replicamanager_underreplicatedpartitions", nil, 0, false},
		{"kafka_server_replicamanager_underminisrpartitioncount", nil, 0, false},
		{"kafka_server_replicamanager_atminisrpartitioncount", nil, 2, false},
		{"kafka_controller_kafkacontroller_activecontrollercount", nil, 1, false},
		{"kafka_controller_kafkacontroller_activebrokercount", nil, 1, false},
		{"kafka_controller_kafkacontroller_fencedbrokercount", nil, 0, false},
		{"kafka_controller_kafkacontroller_offlinepartitionscount", nil, 0, false},
		{"kafka_controller_kafkacontroller_globaltopiccount", nil, 1, false},
		{"kafka_controller_kafkacontroller_globalpartitioncount", nil, 2, false},
		{"kafka_controller_kafkacontroller_preferredreplicaimbalancecount", nil, 0, false},
		{"kafka_server_brokertopicmetrics_messagesin_total", topicLabel, records, false},
		{"kafka_server_brokertopicmetrics_messagesin_total", nil, records, false},
		{"kafka_server_brokertopicmetrics_bytesin_total", topicLabel, records * 8, true},
		{"kafka_server_brokertopicmetrics_bytesout_total", topicLabel, records * 8, true},
		// At least: Kafka counts a produce its leader refused and the
		// client retried (a new topic's first), as Gregor does.
		{"kafka_server_brokertopicmetrics_totalproducerequests_total", topicLabel, records, true},
		{"kafka_server_brokertopicmetrics_totalfetchrequests_total", topicLabel, 1, true},
		{"kafka_log_log_logendoffset", topicLabel, records, false},
		{"kafka_log_log_logstartoffset", topicLabel, 0, false},
		{"kafka_log_log_numlogsegments", topicLabel, 2, false},
		{"kafka_log_log_size", topicLabel, records * 8, true},
		{"kafka_network_requestmetrics_requests_total", map[string]string{"request": "Produce"}, records, true},
		{"kafka_network_requestmetrics_requests_total", map[string]string{"request": "CreateTopics"}, 1, true},
		{"kafka_network_requestmetrics_requests_total", map[string]string{"request": "Fetch"}, 1, true},
		{"kafka_network_requestmetrics_requests_total", map[string]string{"request": "FetchConsumer"}, 1, true},
		{"kafka_network_requestmetrics_totaltimems_count_total", map[string]string{"request": "Produce"}, records, true},
		{"kafka_network_requestmetrics_totaltimems", map[string]string{"request": "Produce", "quantile": "0.99"}, 0, true},
		{"kafka_network_requestmetrics_localtimems", map[string]string{"request": "Produce", "quantile": "0.50"}, 0, true},
		{"kafka_network_requestmetrics_remotetimems_count_total", map[string]string{"request": "FetchConsumer"}, 1, true},
		{"kafka_network_requestmetrics_responsesendtimems_count_total", map[string]string{"request": "Fetch"}, 1, true},
		// A fraction; 0 (saturated) is a value too.
		{"kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent", nil, 0, true},
		// The metadata quorum of the single combined node.
		{"kafka_server_raft_metrics_current_state", map[string]string{"state": "leader"}, 1, false},
		{"kafka_server_raft_metrics_current_leader", nil, 1, false},
		{"kafka_server_raft_metrics_current_epoch", nil, 1, true},
		{"kafka_server_raft_metrics_high_watermark", nil, 1, true},
		{"kafka_server_raft_metrics_log_end_offset", nil, 1, true},
		{"kafka_server_raft_metrics_number_of_voters", nil, 1, false},
		{"kafka_server_raft_metrics_commit_latency_max", nil, 0, true},
		{"kafka_server_raft_metrics_append_records_rate", nil, 0, true},
		{"kafka_server_raft_metrics_poll_idle_ratio_avg", nil, 0, true},
		// The client listener's connections (summed over Kafka's network
		// processors).
		{"kafka_server_socket_server_metrics_connection_count", map[string]string{"listener": "PLAINTEXT"}, 1, true},
		{"kafka_server_socket_server_metrics_connection_creation_total", map[string]string{"listener": "PLAINTEXT"}, 1, true},
		{"kafka_server_socket_server_metrics_connection_close_total", map[string]string{"listener": "PLAINTEXT"}, 0, true},
		{"kafka_server_socket_server_metrics_failed_authentication_total", map[string]string{"listener": "PLAINTEXT"}, 0, false},
		{"kafka_server_socket_server_metrics_successful_authentication_total", map[string]string{"listener": "PLAINTEXT"}, 0, false},
		// The process, as Prometheus' process collector names it (the
		// exporter's Java agent serves it for Kafka).
		{"process_cpu_seconds_total", nil, 0, true},
		{"process_resident_memory_bytes", nil, 1, true},
		{"process_open_fds", nil, 1, true},
		{"process_max_fds", nil, 1, true},
		{"process_start_time_seconds", nil, 1, true},
	}
	if err := checkMetrics(ctx, e, n.MetricsAddr, checks, 30*time.Second); err != nil {
		return err
	}

	// A classic group that joins, consumes and commits, and stays Stable
	// while the metrics are read.
	member, err := kgo.NewClient(kgo.SeedBrokers(n.Bootstrap()), kgo.ConsumerGroup("ops-metered-group"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		return err
	}
	defer member.Close()
	for consumed := 0; consumed < records; {
		fs := member.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("the group consumed %d of %d records: %w", consumed, records, err)
		}
		consumed += len(fs.Records())
	}
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		return fmt.Errorf("committing the group's offsets: %w", err)
	}

	groupChecks := []metricCheck{
		{"kafka_coordinator_group_groupmetadatamanager_numgroups", nil, 1, false},
		{"kafka_coordinator_group_groupmetadatamanager_numgroupsstable", nil, 1, false},
		{"kafka_coordinator_group_groupmetadatamanager_numgroupspreparingrebalance", nil, 0, false},
		{"kafka_coordinator_group_groupmetadatamanager_numoffsets", nil, 1, true},
		{"kafka_server_group_coordinator_metrics_group_count", map[string]string{"protocol": "classic"}, 1, false},
		{"kafka_server_group_coordinator_metrics_group_count", map[string]string{"protocol": "consumer"}, 0, false},
		{"kafka_server_group_coordinator_metrics_consumer_group_count", map[string]string{"state": "Stable"}, 0, false},
		{"kafka_server_group_coordinator_metrics_offset_commit_count", nil, 1, true},
		{"kafka_server_group_coordinator_metrics_group_completed_rebalance_count", nil, 1, true},
		{"kafka_server_group_coordinator_metrics_num_partitions", map[string]string{"state": "active"}, 1, true},
		{"kafka_server_group_coordinator_metrics_partition_load_time_max", nil, 0, true},
	}
	// Kafka's group coordinator counts its groups by protocol and state
	// once a minute; Gregor's gauges count them at the scrape.
	if err := checkMetrics(ctx, e, n.MetricsAddr, groupChecks, 90*time.Second); err != nil {
		return err
	}
	return opsQuotaMetrics(ctx, e, n, topic)
}

// opsQuotaMetrics: a client id with a producer_byte_rate and a
// request_percentage, throttled by the first, has its pair's quota
// metrics, under the client id alone (the quotas name no user).
func opsQuotaMetrics(ctx context.Context, e *Env, n *SingleNode, topic string) error {
	const client = "ops-quota-client"
	var throttled atomic.Bool
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Bootstrap()), kgo.ClientID(client), kgo.DefaultProduceTopic(topic),
		kgo.WithHooks(throttleHook{&throttled}))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	alter := []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: kadm.StringPtr(client)}},
		Ops: []kadm.AlterClientQuotaOp{
			{Key: "producer_byte_rate", Value: 1024},
			{Key: "request_percentage", Value: 1000},
		},
	}}
	if _, err := adm.AlterClientQuotas(ctx, alter); err != nil {
		return fmt.Errorf("setting %s's quotas: %w", client, err)
	}
	// The quota applies once the node has the metadata record: produce
	// until a produce is throttled.
	value := make([]byte, 16<<10)
	deadline := time.Now().Add(30 * time.Second)
	for !throttled.Load() {
		if time.Now().After(deadline) {
			return fmt.Errorf("no produce of %s was throttled in 30 s", client)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			return fmt.Errorf("producing as %s: %w", client, err)
		}
	}
	clientLabel := func(resource string) map[string]string {
		return map[string]string{"resource": resource, "clientId": client}
	}
	return checkMetrics(ctx, e, n.MetricsAddr, []metricCheck{
		{"kafka_server_quota_byte_rate", clientLabel("Produce"), 1, true},
		{"kafka_server_quota_throttle_time", clientLabel("Produce"), 1, true},
		{"kafka_server_quota_request_time", clientLabel("Request"), 0, true},
	}, 30*time.Second)
}

// throttleHook notes a broker's throttle.
type throttleHook struct{ throttled *atomic.Bool }

func (h throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.throttled.Store(true)
	}
}

// metricCheck is a metric's expected value: summed over the samples whose
// labels include match, equal to want, or with atLeast at least want.
type metricCheck struct {
	name    string
	match   map[string]string
	want    float64
	atLeast bool
}

// checkMetrics scrapes addr until every check holds or wait has passed.
func checkMetrics(ctx context.Context, e *Env, addr string, checks []metricCheck, wait time.Duration) error {
	// The gauges follow the state at once on Gregor; Kafka's JMX meters
	// and gauges may lag a moment.
	var problems []error
	deadline := time.Now().Add(wait)
	for {
		samples, err := scrape(ctx, addr, e.Dir)
		problems = nil
		if err != nil {
			problems = append(problems, err)
		}
		for _, c := range checks {
			sum, count := sumOf(samples, c.name, c.match)
			switch {
			case count == 0:
				problems = append(problems, fmt.Errorf("no %s%v sample", c.name, c.match))
			case c.atLeast && sum < c.want, !c.atLeast && sum != c.want:
				bound := ""
				if c.atLeast {
					bound = "at least "
				}
				problems = append(problems, fmt.Errorf("%s%v is %v, want %s%v", c.name, c.match, sum, bound, c.want))
			}
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return reportProblems(e, problems)
}
