package broker

// GetTelemetrySubscriptions (key 71) v0 and PushTelemetry (key 72) v0:
// KIP-714's client telemetry, on client listeners.
//
// A client asks which of its metrics the broker wants
// (GetTelemetrySubscriptions): it gets its client instance id (a new one
// when it sends the zero id), the metrics and the push interval of the
// CLIENT_METRICS subscriptions (set with kafka-client-metrics.sh or
// kafka-configs --entity-type client-metrics) that match its client id,
// software name and version (ApiVersions v3+), source address and port,
// a subscription id that changes when they do, the compression types
// taken (zstd, lz4, gzip, snappy: Kafka's order), telemetry.max.bytes and
// delta temporality. It then pushes them as OTLP metrics
// (PushTelemetry). The checks and their errors are Kafka's
// ClientMetricsManager's (broker/telemetry).
//
// Deliberate deviations: Kafka advertises these APIs only when a
// ClientTelemetryExporterPlugin is configured, and hands payloads to it;
// Gregor is its own exporter and always serves them: the pushed metrics
// show on /metrics as gregor_client_* series (broker/telemetry/series.go),
// for at most gregor.metrics.client.telemetry.max.clients instances.
// Subscription ids are computed as Kafka's (CRC32C of the metrics and
// interval, XORed with the instance id's hash) but over the metrics in
// sorted order, so their values differ from Kafka's; clients treat them
// as opaque.
//
// Authorization: none, as in Kafka.

import (
	"context"
	"net"
	"strconv"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/broker/telemetry"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{
		key: kmsg.GetTelemetrySubscriptions, min: 0, max: 0,
		listeners:    clientListeners,
		authorizedAs: "nothing",
		errorAnswer: errorAnswerOf(func(_ *kmsg.GetTelemetrySubscriptionsRequest, out *kmsg.GetTelemetrySubscriptionsResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		handle: (*Broker).handleGetTelemetrySubscriptions,
	})
	register(api{
		key: kmsg.PushTelemetry, min: 0, max: 0,
		listeners:    clientListeners,
		authorizedAs: "nothing",
		errorAnswer: errorAnswerOf(func(_ *kmsg.PushTelemetryRequest, out *kmsg.PushTelemetryResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		handle: (*Broker).handlePushTelemetry,
	})
}

func (b *Broker) handleGetTelemetrySubscriptions(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.GetTelemetrySubscriptionsRequest)
	r.Respond(b.telemetry.GetSubscriptions(b.telemetryClient(r), req))
}

func (b *Broker) handlePushTelemetry(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.PushTelemetryRequest)
	r.Respond(b.telemetry.Push(b.telemetryClient(r), req))
}

// telemetryClient is what a telemetry subscription can match a request's
// client on. The first telemetry request of a connection starts the
// watch that drops its client instance when it closes, as Kafka does.
func (b *Broker) telemetryClient(r *network.Request) telemetry.Client {
	sw := r.ClientSoftware()
	c := telemetry.Client{
		ClientID:     r.Header.ClientID,
		SoftwareName: sw.Name, SoftwareVersion: sw.Version,
		SourceAddress: r.HostAddress(),
		Conn:          r.Conn(),
	}
	if addr, ok := r.RemoteAddr().(*net.TCPAddr); ok {
		c.SourcePort = strconv.Itoa(addr.Port)
	}
	if b.telemetry.WatchConnection(r.Conn()) {
		done := r.Done()
		conn := r.Conn()
		go func() {
			<-done
			b.telemetry.ConnectionClosed(conn)
		}()
	}
	return c
}

// clientMetricsConfigs are the CLIENT_METRICS resources' configs by name.
func clientMetricsConfigs(img *metadata.Image) map[string]map[string]string {
	out := map[string]map[string]string{}
	if img == nil {
		return out
	}
	for res, cfg := range img.Configs {
		if res.Type == metadata.ConfigResourceClientMetrics {
			out[res.Name] = cfg
		}
	}
	return out
}

// followTelemetrySubscriptions keeps the telemetry subscriptions those
// of the latest image.
func (b *Broker) followTelemetrySubscriptions() {
	b.telemetry.SetSubscriptions(clientMetricsConfigs(b.meta.Image()))
	b.stopTelemetry = b.meta.Subscribe(func(_, next *metadata.Image) {
		b.telemetry.SetSubscriptions(clientMetricsConfigs(next))
	})
}
