package lifecycle

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration/node"
)

// TestJavaProducerPushesTelemetry: a subscription made with the stock
// kafka-client-metrics.sh (ClientMetricsCommand) for the producer's
// metrics every second reaches the real Java 4.3.1 producer, which
// pushes them (enable.metrics.push is on by default): /metrics then shows
// them as gregor_client_org_apache_kafka_producer_* series, its record
// count among them, and the broker's own telemetry counts.
func TestJavaProducerPushesTelemetry(t *testing.T) {
	n := node.Start(t, "gregor.http.listener=127.0.0.1:0")
	m := httpListening.FindStringSubmatch(n.Output())
	if m == nil {
		t.Fatalf("the node does not say where its HTTP listener is:\n%s", n.Output())
	}
	addr := m[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tool := node.StockTool(ctx, t)
	tool("ClientMetricsCommand", "--bootstrap-server", n.Addr(), "--alter", "--name", "all",
		"--metrics", "org.apache.kafka.producer.", "--interval", "1000")
	if out := tool("ClientMetricsCommand", "--bootstrap-server", n.Addr(), "--describe", "--name", "all"); !strings.Contains(out, "interval.ms=1000") ||
		!strings.Contains(out, "metrics=org.apache.kafka.producer.") {
		t.Fatalf("describe:\n%s", out)
	}
	createTopic(t, n, "pushed", 1)
	// 5,000 records at 500 a second: ten seconds of one-second pushes,
	// so that the producer's periodic pushes, not only the terminating
	// one it may skip at close, reach the broker (with 2,000 records, four
	// seconds, a loaded machine once saw no push at all).
	tool("ProducerPerformance", "--topic", "pushed", "--num-records", "5000", "--record-size", "100",
		"--throughput", "500", "--producer-props", "bootstrap.servers="+n.Addr(), "client.id=telemetry-test")
	var text string
	node.WaitFor(t, 10*time.Second, "the producer's pushed metrics in /metrics", func() bool {
		_, text = httpGet(t, addr, "/metrics", "")
		return strings.Contains(text, "\ngregor_client_org_apache_kafka_producer_")
	})
	got := samples(t, text)
	var sent float64
	for name, v := range got {
		if strings.HasPrefix(name, "gregor_client_org_apache_kafka_producer_record_send_total{") {
			sent += v
		}
	}
	// The producer pushes the deltas of its counters every second, and a
	// last, terminating push when it closes; the running total adds them
	// up. The terminating push is best effort in the Java client (its
	// close does not wait for it beyond the close timeout: on a busy
	// machine it was missing once, 1,546 of 2,000 counted after three
	// accepted pushes), so the total is checked to be no more than what
	// was sent (no delta counted twice) and at least a push's worth; with
	// no push refused and none undecodable.
	t.Logf("record_send_total adds up to %v of the 5000 records sent, in %v accepted pushes", sent, got["kafka_server_client_metrics_plugin_export_total"])
	if sent <= 0 || sent > 5000 {
		t.Errorf("record_send_total adds up to %v, want 1 to 5000:\n%s", sent, text)
	}
	if got["kafka_server_client_metrics_plugin_export_total"] < 1 || got["kafka_server_client_metrics_plugin_error_total"] != 0 ||
		got["kafka_server_client_metrics_throttle_total"] != 0 {
		t.Errorf("exports %v, errors %v, throttled %v", got["kafka_server_client_metrics_plugin_export_total"],
			got["kafka_server_client_metrics_plugin_error_total"], got["kafka_server_client_metrics_throttle_total"])
	}
}
