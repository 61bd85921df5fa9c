package telemetry

// The payload of PushTelemetry: OTLP's MetricsData
// (opentelemetry.proto.metrics.v1), compressed with the codec the request
// names, decoded with go.opentelemetry.io/proto/otlp into the points the
// series store keeps. Gauges, sums and explicit-bucket histograms are
// kept; exponential histograms and summaries are skipped (the Java client
// sends neither).

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gregorbroker/gregor/protocol"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// pointKind is how a point's value is kept.
type pointKind uint8

const (
	gaugePoint     pointKind = iota // the value replaces the last
	counterPoint                    // a monotonic sum: deltas add up
	histogramPoint                  // explicit buckets: deltas add up
)

// point is one data point of a pushed metric, its labels already in
// Prometheus' form.
type point struct {
	name   string // the exported family name
	kind   pointKind
	delta  bool
	labels []label // sorted by name
	value  float64
	// histograms
	bounds  []float64
	buckets []uint64 // per bucket, not cumulative; len(bounds)+1
	sum     float64
	count   uint64
}

type label struct{ name, value string }

// maxDecompressed bounds what a payload may inflate to: telemetry.max.bytes
// bounds the compressed payload only, and a hostile one must not take the
// broker's memory.
func maxDecompressed(maxBytes int32) int {
	return min(protocol.DefaultMaxDecompressedBytes, 64*int(max(maxBytes, 1)))
}

// decodePayload decompresses and decodes a pushed payload.
func decodePayload(codec protocol.Codec, payload []byte, maxBytes int32) ([]point, error) {
	raw, err := protocol.AppendDecompressed(nil, codec, payload, maxDecompressed(maxBytes))
	if err != nil {
		return nil, fmt.Errorf("decompressing the metrics: %w", err)
	}
	return decodeMetrics(raw)
}

// decodeMetrics decodes OTLP's MetricsData into points.
func decodeMetrics(raw []byte) ([]point, error) {
	var data metricspb.MetricsData
	if err := proto.Unmarshal(raw, &data); err != nil {
		return nil, fmt.Errorf("decoding OTLP MetricsData: %w", err)
	}
	var points []point
	for _, rm := range data.GetResourceMetrics() {
		resource := attributes(rm.GetResource().GetAttributes(), nil)
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				points = appendPoints(points, m, resource)
			}
		}
	}
	return points, nil
}

func appendPoints(points []point, m *metricspb.Metric, resource map[string]string) []point {
	name := familyName(m.GetName())
	if name == familyPrefix {
		return points
	}
	switch {
	case m.GetGauge() != nil:
		for _, dp := range m.GetGauge().GetDataPoints() {
			points = append(points, point{name: name, kind: gaugePoint, labels: labelsOf(dp.GetAttributes(), resource), value: numberValue(dp)})
		}
	case m.GetSum() != nil:
		s := m.GetSum()
		kind, fam := gaugePoint, name
		if s.GetIsMonotonic() {
			kind = counterPoint
			if !strings.HasSuffix(fam, "_total") {
				fam += "_total"
			}
		}
		delta := s.GetAggregationTemporality() == metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
		for _, dp := range s.GetDataPoints() {
			points = append(points, point{name: fam, kind: kind, delta: delta, labels: labelsOf(dp.GetAttributes(), resource), value: numberValue(dp)})
		}
	case m.GetHistogram() != nil:
		h := m.GetHistogram()
		delta := h.GetAggregationTemporality() == metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
		for _, dp := range h.GetDataPoints() {
			bounds, buckets := dp.GetExplicitBounds(), dp.GetBucketCounts()
			if len(buckets) != len(bounds)+1 || !slices.IsSorted(bounds) {
				continue // OTLP's rule; a point breaking it has no meaning
			}
			points = append(points, point{name: name, kind: histogramPoint, delta: delta, labels: labelsOf(dp.GetAttributes(), resource),
				bounds: slices.Clone(bounds), buckets: slices.Clone(buckets), sum: dp.GetSum(), count: dp.GetCount()})
		}
	}
	return points
}

func numberValue(dp *metricspb.NumberDataPoint) float64 {
	if _, ok := dp.GetValue().(*metricspb.NumberDataPoint_AsInt); ok {
		return float64(dp.GetAsInt())
	}
	return dp.GetAsDouble()
}

// familyPrefix starts every exported family's name.
const familyPrefix = "gregor_client_"

// familyName is a pushed metric's Prometheus name: the prefix, then the
// OTLP name with every character Prometheus does not allow (dots among
// them) turned into an underscore.
func familyName(otlp string) string {
	return familyPrefix + sanitize(otlp)
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// labelName is an attribute's label name: sanitized, never starting with
// a digit or with "__" (reserved by Prometheus), and never
// client_instance_id or le, the labels the store adds.
func labelName(key string) string {
	n := sanitize(key)
	if n == "" || n[0] >= '0' && n[0] <= '9' || strings.HasPrefix(n, "__") || n == instanceLabel || n == "le" {
		n = "attr_" + n
	}
	return n
}

// instanceLabel is the label of the client instance id.
const instanceLabel = "client_instance_id"

// attributes turns OTLP attributes into label values by label name,
// added to base (a copy).
func attributes(kvs []*commonpb.KeyValue, base map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(kvs))
	for k, v := range base {
		out[k] = v
	}
	for _, kv := range kvs {
		if v, ok := anyValueText(kv.GetValue()); ok && v != "" {
			out[labelName(kv.GetKey())] = v
		}
	}
	return out
}

// labelsOf is a point's labels: the resource's attributes, overridden by
// the point's own.
func labelsOf(kvs []*commonpb.KeyValue, resource map[string]string) []label {
	attrs := attributes(kvs, resource)
	out := make([]label, 0, len(attrs))
	for k, v := range attrs {
		out = append(out, label{k, v})
	}
	slices.SortFunc(out, func(a, b label) int { return strings.Compare(a.name, b.name) })
	return out
}

// anyValueText prints a scalar attribute; arrays, maps and bytes are not
// labels.
func anyValueText(v *commonpb.AnyValue) (string, bool) {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue, true
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue), true
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10), true
	case *commonpb.AnyValue_DoubleValue:
		if math.IsNaN(x.DoubleValue) {
			return "NaN", true
		}
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64), true
	}
	return "", false
}
