package lifecycle

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/gregorbroker/gregor/metrics"
	"github.com/twmb/franz-go/pkg/kgo"
)

var httpListening = regexp.MustCompile(`HTTP listener serving [^\n]* addr=(\S+)`)

// httpGet fetches path from the node's HTTP listener.
func httpGet(t *testing.T, addr, path, accept string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// samples parses a /metrics answer.
func samples(t *testing.T, text string) map[string]float64 {
	t.Helper()
	out, err := node.ParseMetrics(text)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHTTPListenerServesMetricsHealthAndReadiness: a node started with
// gregor.http.listener answers /healthz and /readyz, and /metrics lists
// every metric of the catalog under Kafka's exporter names, with values
// that are the node's state: the partitions it hosts and leads, the
// cluster the controller sees, the requests it answered.
func TestHTTPListenerServesMetricsHealthAndReadiness(t *testing.T) {
	n := node.Start(t, "gregor.http.listener=127.0.0.1:0")
	m := httpListening.FindStringSubmatch(n.Output())
	if m == nil {
		t.Fatalf("the node does not say where its HTTP listener is:\n%s", n.Output())
	}
	addr := m[1]
	if code, body := httpGet(t, addr, "/healthz", ""); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	node.WaitFor(t, 10*time.Second, "ready /readyz", func() bool {
		code, _ := httpGet(t, addr, "/readyz", "")
		return code == http.StatusOK
	})

	createTopic(t, n, "metered", 3)
	cl := n.Client(kgo.DefaultProduceTopic("metered"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("one")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	want := map[string]float64{
		"kafka_server_replicamanager_partitioncount":                      3,
		"kafka_server_replicamanager_leadercount":                         3,
		"kafka_server_replicamanager_underreplicatedpartitions":           0,
		"kafka_server_replicamanager_underminisrpartitioncount":           0,
		"kafka_server_replicamanager_atminisrpartitioncount":              3,
		"kafka_controller_kafkacontroller_activecontrollercount":          1,
		"kafka_controller_kafkacontroller_activebrokercount":              1,
		"kafka_controller_kafkacontroller_fencedbrokercount":              0,
		"kafka_controller_kafkacontroller_globaltopiccount":               1,
		"kafka_controller_kafkacontroller_globalpartitioncount":           3,
		"kafka_controller_kafkacontroller_offlinepartitionscount":         0,
		"kafka_controller_kafkacontroller_preferredreplicaimbalancecount": 0,
	}
	var text string
	var got map[string]float64
	node.WaitFor(t, 10*time.Second, "the node's state in /metrics", func() bool {
		_, text = httpGet(t, addr, "/metrics", "")
		got = samples(t, text)
		for name, v := range want {
			if got[name] != v {
				return false
			}
		}
		return true
	})
	for _, d := range metrics.Catalog() {
		if d.Family {
			continue // names known only once clients push (telemetry_test.go)
		}
		if !strings.Contains(text, "# TYPE "+d.Name+" "+d.Kind.String()+"\n") {
			t.Errorf("/metrics has no %s", d.Name)
		}
	}
	// A node that answered a handful of requests had its handlers idle
	// nearly all the time.
	if idle, ok := got["kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"]; !ok || idle < 0.5 || idle > 1 {
		t.Errorf("request handler idle fraction %v (present %v), want between 0.5 and 1 on a quiet node", idle, ok)
	}
	// What the topic took in, per topic and for all topics (one record
	// of 3 bytes in a batch of more), and gave out once consumed.
	for _, series := range []string{"", `{topic="metered"}`} {
		if got["kafka_server_brokertopicmetrics_messagesin_total"+series] != 1 ||
			got["kafka_server_brokertopicmetrics_bytesin_total"+series] < 3 ||
			got["kafka_server_brokertopicmetrics_totalproducerequests_total"+series] != 1 ||
			got["kafka_server_brokertopicmetrics_failedproducerequests_total"+series] != 0 {
			t.Fatalf("produce meters%s:\n%s", series, text)
		}
	}
	if recs := consumeAll(t, n, "metered", 1); len(recs) != 1 {
		t.Fatalf("consumed %d records", len(recs))
	}
	node.WaitFor(t, 10*time.Second, "bytes out counted", func() bool {
		_, text = httpGet(t, addr, "/metrics", "")
		got = samples(t, text)
		return got[`kafka_server_brokertopicmetrics_bytesout_total{topic="metered"}`] >= 3 &&
			got["kafka_server_brokertopicmetrics_bytesout_total"] == got[`kafka_server_brokertopicmetrics_bytesout_total{topic="metered"}`] &&
			got[`kafka_server_brokertopicmetrics_totalfetchrequests_total{topic="metered"}`] >= 1
	})
	// The logs: one record in partition p of the three, its bytes on disk.
	var end, size float64
	for p := range 3 {
		series := `{topic="metered",partition="` + strconv.Itoa(p) + `"}`
		end += got["kafka_log_log_logendoffset"+series]
		size += got["kafka_log_log_size"+series]
		if got["kafka_log_log_numlogsegments"+series] != 1 || got["kafka_log_log_logstartoffset"+series] != 0 {
			t.Fatalf("partition %d's log:\n%s", p, text)
		}
	}
	if end != 1 || size < 3 {
		t.Fatalf("log end offsets sum to %v, sizes to %v:\n%s", end, size, text)
	}
	var produces, creates float64
	for k, v := range got {
		if strings.HasPrefix(k, `kafka_network_requestmetrics_requests_total{request="Produce",version=`) {
			produces += v
		}
		if strings.HasPrefix(k, `kafka_network_requestmetrics_requests_total{request="CreateTopics",version=`) {
			creates += v
		}
	}
	if produces < 1 || creates < 1 {
		t.Fatalf("requests counted: %v Produce, %v CreateTopics\n%s", produces, creates, text)
	}

	_, om := httpGet(t, addr, "/metrics", "application/openmetrics-text; version=1.0.0")
	if !strings.HasSuffix(om, "# EOF\n") || !strings.Contains(om, "# TYPE kafka_network_requestmetrics_requests counter\n") {
		t.Fatalf("OpenMetrics answer:\n%s", om)
	}
	if code, body := httpGet(t, addr, "/debug/metadata", ""); code != http.StatusOK || !strings.Contains(body, `"digest"`) {
		t.Fatalf("/debug/metadata: %d %q", code, body)
	}
}

// TestReadyzTurnsReadyAsTheBrokerJoins: a broker whose controller is down
// is alive (/healthz 200) but not ready (/readyz 503, saying why) while it
// waits to register; once the controller is back it registers, is
// unfenced and turns ready, which is what a Kubernetes readiness probe
// waits for during a rolling restart.
func TestReadyzTurnsReadyAsTheBrokerJoins(t *testing.T) {
	ctrls, brks := node.StartSplit(t, 1, 1)
	ctrl, brk := ctrls[0], brks[0]
	node.WaitFor(t, 10*time.Second, "the joined broker's /readyz 200", func() bool {
		code, _ := httpGet(t, brk.DebugAddr, "/readyz", "")
		return code == http.StatusOK
	})

	if err := brk.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := ctrl.Stop(); err != nil {
		t.Fatal(err)
	}
	brk.Launch()
	node.WaitFor(t, 10*time.Second, "the restarted broker's /healthz", func() bool {
		code, _, err := tryGet(brk.DebugAddr, "/healthz")
		return err == nil && code == http.StatusOK
	})
	// The controller is down, so the broker cannot register: it stays
	// not ready however long it waits. Two answers a second apart show
	// that it is not a moment's state.
	for range 2 {
		code, body := httpGet(t, brk.DebugAddr, "/readyz", "")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready: starting") {
			t.Fatalf("/readyz of a broker that cannot reach its controller: %d %q", code, body)
		}
		time.Sleep(time.Second)
	}

	ctrl.Restart()
	node.WaitFor(t, 30*time.Second, "the broker's /readyz 200 once its controller is back", func() bool {
		code, _ := httpGet(t, brk.DebugAddr, "/readyz", "")
		return code == http.StatusOK
	})
	brk.AwaitReady(10 * time.Second)
}

// tryGet is httpGet that reports a refused connection instead of failing
// the test (the listener may not be up yet).
func tryGet(addr, path string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
