package telemetry

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/metrics"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Unix(1_700_000_000, 0)} }
func javaClient() Client {
	return Client{ClientID: "producer-1", SoftwareName: "apache-kafka-java", SoftwareVersion: "4.3.1", SourceAddress: "127.0.0.1", SourcePort: "50000"}
}
func newTestManager(c *clock, maxClients int) *Manager {
	return New(Options{MaxBytes: 1 << 20, MaxClients: maxClients, Now: c.now})
}

func get(m *Manager, c Client, id protocol.UUID) *kmsg.GetTelemetrySubscriptionsResponse {
	req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	req.ClientInstanceID = id
	return m.GetSubscriptions(c, req)
}

func push(m *Manager, c Client, id protocol.UUID, sub int32, codec protocol.Codec, payload []byte, terminating bool) int16 {
	req := kmsg.NewPtrPushTelemetryRequest()
	req.ClientInstanceID, req.SubscriptionID, req.CompressionType = id, sub, int8(codec)
	req.Metrics, req.Terminating = payload, terminating
	return m.Push(c, req).ErrorCode
}

// TestSubscriptionsMatchTheClient: the metrics are the union of the
// subscriptions whose patterns all match, the interval the smallest of
// theirs, and the answer carries Kafka's constants.
func TestSubscriptionsMatchTheClient(t *testing.T) {
	c := newClock()
	m := newTestManager(c, 10)
	m.SetSubscriptions(map[string]map[string]string{
		"java":   {"metrics": "org.apache.kafka.producer.", "interval.ms": "2000", "match": "client_software_name=apache-kafka-java,client_software_version=4\\..*"},
		"byid":   {"metrics": "org.apache.kafka.consumer.", "interval.ms": "1000", "match": "client_id=producer-.*"},
		"python": {"metrics": "*", "interval.ms": "100", "match": "client_software_name=confluent-kafka-python"},
		"port":   {"metrics": "x.", "match": "client_source_port=1"}, // a partial match is no match
	})
	resp := get(m, javaClient(), protocol.UUID{})
	if resp.ErrorCode != 0 || resp.ClientInstanceID == [16]byte{} {
		t.Fatalf("error %d, instance id %x", resp.ErrorCode, resp.ClientInstanceID)
	}
	if want := []string{"org.apache.kafka.consumer.", "org.apache.kafka.producer."}; !slices.Equal(resp.RequestedMetrics, want) {
		t.Errorf("metrics %v, want %v", resp.RequestedMetrics, want)
	}
	if resp.PushIntervalMillis != 1000 || resp.TelemetryMaxBytes != 1<<20 || !resp.DeltaTemporality {
		t.Errorf("interval %d, max bytes %d, delta %v", resp.PushIntervalMillis, resp.TelemetryMaxBytes, resp.DeltaTemporality)
	}
	if want := []int8{4, 3, 1, 2}; !slices.Equal(resp.AcceptedCompressionTypes, want) {
		t.Errorf("compression types %v, want %v (zstd, lz4, gzip, snappy)", resp.AcceptedCompressionTypes, want)
	}

	// A client no subscription matches gets none, at the default interval;
	// one matching a "*" subscription gets "*" alone.
	other := Client{ClientID: "x", SoftwareName: "librdkafka", SoftwareVersion: "2.0"}
	if r := get(m, other, protocol.UUID{}); len(r.RequestedMetrics) != 0 || r.PushIntervalMillis != 300000 {
		t.Errorf("unmatched client: metrics %v, interval %d", r.RequestedMetrics, r.PushIntervalMillis)
	}
	py := Client{ClientID: "producer-2", SoftwareName: "confluent-kafka-python", SoftwareVersion: "2.5"}
	if r := get(m, py, protocol.UUID{}); !slices.Equal(r.RequestedMetrics, []string{"*"}) || r.PushIntervalMillis != 100 {
		t.Errorf("python client: metrics %v, interval %d", r.RequestedMetrics, r.PushIntervalMillis)
	}
	// The instance id itself can be matched.
	id := protocol.RandomUUID()
	m.SetSubscriptions(map[string]map[string]string{"one": {"metrics": "a.", "match": "client_instance_id=" + id.String()}})
	if r := get(m, other, id); !slices.Equal(r.RequestedMetrics, []string{"a."}) || r.ClientInstanceID != id {
		t.Errorf("by instance id: metrics %v", r.RequestedMetrics)
	}
}

// TestSubscriptionIDFollowsTheSubscriptions: the id is stable while the
// subscriptions are, a push with the old one after a change is
// UNKNOWN_SUBSCRIPTION_ID, and the client may then ask again at once.
func TestSubscriptionIDFollowsTheSubscriptions(t *testing.T) {
	c := newClock()
	m := newTestManager(c, 10)
	m.SetSubscriptions(map[string]map[string]string{"all": {"metrics": "org.apache.kafka.", "interval.ms": "1000"}})
	first := get(m, javaClient(), protocol.UUID{})
	id := protocol.UUID(first.ClientInstanceID)
	if code := push(m, javaClient(), id, first.SubscriptionID, protocol.CodecNone, nil, false); code != 0 {
		t.Fatalf("first push: %v", kerr.ErrorForCode(code))
	}
	// The same configs again change nothing.
	m.SetSubscriptions(map[string]map[string]string{"all": {"metrics": "org.apache.kafka.", "interval.ms": "1000"}})
	c.advance(time.Second)
	if code := push(m, javaClient(), id, first.SubscriptionID, protocol.CodecNone, nil, false); code != 0 {
		t.Fatalf("push after an unchanged update: %v", kerr.ErrorForCode(code))
	}
	m.SetSubscriptions(map[string]map[string]string{"all": {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}})
	c.advance(time.Second)
	if code := push(m, javaClient(), id, first.SubscriptionID, protocol.CodecNone, nil, false); code != kerr.UnknownSubscriptionID.Code {
		t.Fatalf("push with the old subscription: %v, want UNKNOWN_SUBSCRIPTION_ID", kerr.ErrorForCode(code))
	}
	second := get(m, javaClient(), id)
	if second.ErrorCode != 0 || second.SubscriptionID == first.SubscriptionID || protocol.UUID(second.ClientInstanceID) != id {
		t.Fatalf("after the change: error %d, subscription %d (was %d)", second.ErrorCode, second.SubscriptionID, first.SubscriptionID)
	}
	if m.unknownSubscription.Value() != 1 {
		t.Errorf("unknown subscription count %d", m.unknownSubscription.Value())
	}
	if subscriptionID([]string{"a"}, 1000, id) == subscriptionID([]string{"a"}, 2000, id) ||
		subscriptionID([]string{"a"}, 1000, id) == subscriptionID([]string{"b"}, 1000, id) {
		t.Error("subscription ids do not follow the metrics and the interval")
	}
}

// TestPushErrors: Kafka's checks, in its order.
func TestPushErrors(t *testing.T) {
	c := newClock()
	m := New(Options{MaxBytes: 64, MaxClients: 10, Now: c.now})
	m.SetSubscriptions(map[string]map[string]string{"all": {"metrics": "*", "interval.ms": "1000"}})
	r := get(m, javaClient(), protocol.UUID{})
	id, sub := protocol.UUID(r.ClientInstanceID), r.SubscriptionID

	// A get within the interval is throttled.
	if g := get(m, javaClient(), id); g.ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Errorf("early get: %v", kerr.ErrorForCode(g.ErrorCode))
	}
	for _, tc := range []struct {
		name    string
		id      protocol.UUID
		sub     int32
		codec   protocol.Codec
		payload []byte
		want    *kerr.Error
	}{
		{"zero instance id", protocol.UUID{}, sub, 0, nil, kerr.InvalidRequest},
		{"unknown compression", id, sub, 6, nil, kerr.UnsupportedCompressionType},
	} {
		if code := push(m, javaClient(), tc.id, tc.sub, tc.codec, tc.payload, false); code != tc.want.Code {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(code), tc.want)
		}
	}
	// The compression failure took the push's slot: the next one within
	// the interval is throttled.
	if code := push(m, javaClient(), id, sub, 0, nil, false); code != kerr.ThrottlingQuotaExceeded.Code {
		t.Errorf("early push: %v", kerr.ErrorForCode(code))
	}
	c.advance(time.Second)
	if code := push(m, javaClient(), id, sub, 0, bytes.Repeat([]byte{1}, 65), false); code != kerr.TelemetryTooLarge.Code {
		t.Errorf("large push: %v", kerr.ErrorForCode(code))
	}
	c.advance(time.Second)
	if code := push(m, javaClient(), id, sub, protocol.CodecGzip, []byte("not gzip"), false); code != kerr.InvalidRecord.Code {
		t.Errorf("undecodable push: %v", kerr.ErrorForCode(code))
	}
	c.advance(time.Second)
	if code := push(m, javaClient(), id, sub, 0, []byte{0xff, 0xff, 0xff}, false); code != kerr.InvalidRecord.Code {
		t.Errorf("bad protobuf: %v", kerr.ErrorForCode(code))
	}
	if m.exportErrors.Value() != 2 {
		t.Errorf("export errors %d, want 2", m.exportErrors.Value())
	}
	// A terminating push is taken within the interval; nothing after it.
	if code := push(m, javaClient(), id, sub, 0, nil, true); code != 0 {
		t.Errorf("terminating push: %v", kerr.ErrorForCode(code))
	}
	c.advance(time.Hour)
	if code := push(m, javaClient(), id, sub, 0, nil, false); code != 0 {
		// An hour later the instance expired: a new one takes the push.
		t.Errorf("push after expiry: %v", kerr.ErrorForCode(code))
	}
	if code := push(m, javaClient(), id, sub, 0, nil, true); code != kerr.ThrottlingQuotaExceeded.Code && code != 0 {
		t.Errorf("second terminating push: %v", kerr.ErrorForCode(code))
	}
	if code := push(m, javaClient(), id, sub, 0, nil, false); code != kerr.InvalidRequest.Code {
		t.Errorf("push after terminating: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}
}

// TestInstancesExpireAndCloseWithTheirConnection: an instance lives
// max(60 s, 3 intervals) after its last request, or until its
// connection closes.
func TestInstancesExpireAndCloseWithTheirConnection(t *testing.T) {
	c := newClock()
	m := newTestManager(c, 10)
	m.SetSubscriptions(map[string]map[string]string{"all": {"metrics": "*", "interval.ms": "30000"}})
	cl := javaClient()
	cl.Conn = "conn-1"
	r := get(m, cl, protocol.UUID{})
	if len(m.instances) != 1 {
		t.Fatalf("%d instances", len(m.instances))
	}
	c.advance(89 * time.Second)
	get(m, Client{}, protocol.RandomUUID()) // sweeps
	if len(m.instances) != 2 {
		t.Fatalf("the instance expired before 3 intervals: %d instances", len(m.instances))
	}
	c.advance(2 * time.Second)
	get(m, Client{}, protocol.RandomUUID())
	if m.instances[protocol.UUID(r.ClientInstanceID)] != nil {
		t.Fatal("the instance outlived 3 intervals")
	}
	r = get(m, cl, protocol.UUID{})
	m.ConnectionClosed("conn-1")
	if m.instances[protocol.UUID(r.ClientInstanceID)] != nil {
		t.Fatal("the instance outlived its connection")
	}
}

func gauge(name string, v float64, attrs ...string) *metricspb.Metric {
	return &metricspb.Metric{Name: name, Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{
		DataPoints: []*metricspb.NumberDataPoint{{Attributes: kvs(attrs...), Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: v}}}}}}
}

func counter(name string, v int64, attrs ...string) *metricspb.Metric {
	return &metricspb.Metric{Name: name, Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{
		IsMonotonic: true, AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA,
		DataPoints: []*metricspb.NumberDataPoint{{Attributes: kvs(attrs...), Value: &metricspb.NumberDataPoint_AsInt{AsInt: v}}}}}}
}

func histogram(name string, bounds []float64, buckets []uint64, sum float64) *metricspb.Metric {
	var n uint64
	for _, b := range buckets {
		n += b
	}
	return &metricspb.Metric{Name: name, Data: &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{
		AggregationTemporality: metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA,
		DataPoints:             []*metricspb.HistogramDataPoint{{ExplicitBounds: bounds, BucketCounts: buckets, Sum: &sum, Count: n}}}}}
}

func kvs(pairs ...string) []*commonpb.KeyValue {
	var out []*commonpb.KeyValue
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, &commonpb.KeyValue{Key: pairs[i], Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: pairs[i+1]}}})
	}
	return out
}

func payload(t testing.TB, codec protocol.Codec, ms ...*metricspb.Metric) []byte {
	t.Helper()
	raw, err := proto.Marshal(&metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource:     &resourcepb.Resource{Attributes: kvs("client_id", "producer-1")},
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: ms}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := protocol.AppendCompressed(nil, codec, raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func scrape(t testing.TB, m *Manager) string {
	t.Helper()
	r := metrics.NewRegistry()
	m.RegisterMetrics(r)
	var b strings.Builder
	if err := r.Write(&b, false); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestPushedMetricsShowOnMetrics: gauges replace, delta counters add up,
// histograms become buckets, in every codec; labels are the instance id
// and the attributes.
func TestPushedMetricsShowOnMetrics(t *testing.T) {
	c := newClock()
	m := newTestManager(c, 10)
	m.SetSubscriptions(map[string]map[string]string{"all": {"metrics": "*", "interval.ms": "1000"}})
	r := get(m, javaClient(), protocol.UUID{})
	id, sub := protocol.UUID(r.ClientInstanceID), r.SubscriptionID
	for i, codec := range []protocol.Codec{protocol.CodecNone, protocol.CodecGzip, protocol.CodecSnappy, protocol.CodecLZ4, protocol.CodecZstd} {
		p := payload(t, codec,
			gauge("org.apache.kafka.producer.buffer.available.bytes", float64(100+i)),
			counter("org.apache.kafka.producer.node.request.total", 5, "node_id", "node-1"),
			histogram("org.apache.kafka.test.latency", []float64{1, 10}, []uint64{1, 2, 3}, 50))
		if code := push(m, javaClient(), id, sub, codec, p, false); code != 0 {
			t.Fatalf("push %d (%v): %v", i, codec, kerr.ErrorForCode(code))
		}
		c.advance(time.Second)
	}
	text := scrape(t, m)
	inst := id.String()
	for _, want := range []string{
		`gregor_client_org_apache_kafka_producer_buffer_available_bytes{client_instance_id="` + inst + `",client_id="producer-1"} 104`,
		"# TYPE gregor_client_org_apache_kafka_producer_node_request_total counter",
		`gregor_client_org_apache_kafka_producer_node_request_total{client_instance_id="` + inst + `",client_id="producer-1",node_id="node-1"} 25`,
		`gregor_client_org_apache_kafka_test_latency_bucket{client_instance_id="` + inst + `",client_id="producer-1",le="1"} 5`,
		`gregor_client_org_apache_kafka_test_latency_bucket{client_instance_id="` + inst + `",client_id="producer-1",le="10"} 15`,
		`gregor_client_org_apache_kafka_test_latency_bucket{client_instance_id="` + inst + `",client_id="producer-1",le="+Inf"} 30`,
		`gregor_client_org_apache_kafka_test_latency_sum{client_instance_id="` + inst + `",client_id="producer-1"} 250`,
		`gregor_client_org_apache_kafka_test_latency_count{client_instance_id="` + inst + `",client_id="producer-1"} 30`,
		"kafka_server_client_metrics_plugin_export_total 5",
		"kafka_server_client_metrics_instance_count 1",
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The series go max(60 s, 3 intervals) after the last push.
	c.advance(time.Minute)
	if text := scrape(t, m); strings.Contains(text, "\ngregor_client_") {
		t.Errorf("expired series still shown:\n%s", text)
	}
}

// TestPushedSeriesKeepAtMostMaxClients: the instance that pushed least
// recently is dropped for a new one.
func TestPushedSeriesKeepAtMostMaxClients(t *testing.T) {
	c := newClock()
	m := newTestManager(c, 2)
	m.SetSubscriptions(map[string]map[string]string{"all": {"metrics": "*", "interval.ms": "1000"}})
	var ids []string
	for i := 0; i < 3; i++ {
		r := get(m, javaClient(), protocol.UUID{})
		id := protocol.UUID(r.ClientInstanceID)
		ids = append(ids, id.String())
		if code := push(m, javaClient(), id, r.SubscriptionID, 0, payload(t, 0, gauge("g", 1)), false); code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
		c.advance(time.Second)
	}
	text := scrape(t, m)
	if strings.Contains(text, ids[0]) || !strings.Contains(text, ids[1]) || !strings.Contains(text, ids[2]) {
		t.Errorf("want the last two instances only:\n%s", text)
	}
}
