package integration

// The operations scenarios: what an operator scrapes. On the kafka target
// the node runs with Prometheus' JMX exporter java agent and the
// exporter's Kafka naming convention, so a check that passes on both
// targets proves Gregor's metrics answer the queries written for Kafka.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func opsScenarios() []Scenario {
	return []Scenario{
		{Name: "ops/metrics-names", Doc: "after a produce and a fetch, /metrics (Kafka through the JMX exporter's Kafka naming) has the replica manager's, controller's, topic's, log's and request metrics under the same names, labels and values", Timeout: 4 * time.Minute, OwnNodes: true, Run: opsMetricsNames},
	}
}

// scrape fetches and parses addr's /metrics, keeping the text in
// dir/metrics.txt for whoever reads a failure.
func scrape(ctx context.Context, addr, dir string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
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
	type check struct {
		name  string
		match map[string]string
		// want is the value, summed over the matching samples, or with
		// atLeast its lower bound.
		want    float64
		atLeast bool
	}
	checks := []check{
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
	}
	// The gauges follow the state at once on Gregor; Kafka's JMX meters
	// and gauges may lag a moment.
	var problems []error
	deadline := time.Now().Add(30 * time.Second)
	for {
		samples, err := scrape(ctx, n.MetricsAddr, e.Dir)
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
