// Package telemetry is KIP-714's client telemetry on the broker side:
// Kafka's ClientMetricsManager (the client instances, the subscriptions
// they match, the checks of GetTelemetrySubscriptions and PushTelemetry)
// and, in the role of Kafka's ClientTelemetryExporterPlugin, the decoding
// of the OTLP metrics clients push into series that /metrics shows
// (series.go). The handlers of the two APIs are broker/telemetry.go's.
//
// A client instance lives for max(60 s, 3 × its push interval) after its
// last request, or until the connection it last spoke on closes, as in
// Kafka. Its exported series live on their own clock: for the same time
// after its last push, so that a client's last (terminating) push can
// still be scraped after it disconnected.
package telemetry

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	cfgdef "github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/metrics"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's limits of the client instance cache (ClientMetricsManager).
const (
	maxInstances   = 16384
	minExpiry      = 60 * time.Second
	expiryInterval = 3 // push intervals
)

// acceptedCompressionTypes are Kafka's, in its order of preference:
// zstd, lz4, gzip, snappy.
func acceptedCompressionTypes() []int8 {
	return []int8{int8(protocol.CodecZstd), int8(protocol.CodecLZ4), int8(protocol.CodecGzip), int8(protocol.CodecSnappy)}
}

// Options configure a Manager.
type Options struct {
	// MaxBytes is telemetry.max.bytes: the largest metrics payload a
	// client may push (compressed).
	MaxBytes int32
	// MaxClients is how many client instances' pushed series /metrics
	// shows at most (gregor.metrics.client.telemetry.max.clients); the
	// one that pushed least recently is dropped for a new one.
	MaxClients int
	Now        func() time.Time
	Logger     *slog.Logger
}

// Client is what a request tells of the client that sent it.
type Client struct {
	ClientID        string
	SoftwareName    string
	SoftwareVersion string
	// SourceAddress is the peer's address as Java's getHostAddress
	// writes it, SourcePort its port ("" when unknown).
	SourceAddress string
	SourcePort    string
	// Conn identifies the connection (the instance is dropped when the
	// connection it last spoke on closes).
	Conn any
}

// Manager is one broker's client telemetry state. It is safe for
// concurrent use.
type Manager struct {
	opts  Options
	log   *slog.Logger
	store *store

	mu sync.Mutex
	// subs are the subscriptions (CLIENT_METRICS resources) by name;
	// version counts their changes, so that an instance made before
	// the latest change is made again (Kafka's subscriptionUpdateVersion).
	subs    map[string]cfgdef.ClientMetrics
	raw     map[string]map[string]string
	version int
	// instances are the client instances by id; byConn the instance a
	// connection last spoke for.
	instances map[protocol.UUID]*instance
	byConn    map[any]protocol.UUID
	// watched are the connections whose end is watched.
	watched   map[any]bool
	lastSweep time.Time

	unknownSubscription metrics.Counter
	throttled           metrics.Counter
	exported            metrics.Counter
	exportErrors        metrics.Counter
}

// instance is Kafka's ClientMetricsInstance.
type instance struct {
	id             protocol.UUID
	attrs          map[string]string
	subscriptionID int32
	version        int
	metrics        []string
	intervalMs     int32
	lastGet        time.Time
	lastPush       time.Time
	terminating    bool
	lastError      int16
	expires        time.Time
	lastUsed       time.Time
}

// New returns a Manager with no subscriptions.
func New(opts Options) *Manager {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 1 << 20
	}
	if opts.MaxClients <= 0 {
		opts.MaxClients = DefaultMaxClients
	}
	return &Manager{
		opts:      opts,
		log:       opts.Logger,
		store:     newStore(opts.MaxClients),
		subs:      map[string]cfgdef.ClientMetrics{},
		raw:       map[string]map[string]string{},
		instances: map[protocol.UUID]*instance{},
		byConn:    map[any]protocol.UUID{},
		watched:   map[any]bool{},
	}
}

// DefaultMaxClients is gregor.metrics.client.telemetry.max.clients'
// default.
const DefaultMaxClients = 100

// SetSubscriptions replaces the subscriptions with the CLIENT_METRICS
// resources' configs (by resource name). A subscription whose configs
// do not parse (committed by an older node with other rules) is left out
// with a warning. Nothing changes when the configs are the same.
func (m *Manager) SetSubscriptions(configs map[string]map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if maps.EqualFunc(m.raw, configs, maps.Equal) {
		return
	}
	subs := map[string]cfgdef.ClientMetrics{}
	for name, cfg := range configs {
		if len(cfg) == 0 {
			continue
		}
		cm, err := cfgdef.ParseClientMetrics(name, cfg)
		if err != nil {
			m.log.Warn("client metrics subscription is invalid; ignored", "name", name, "err", err)
			continue
		}
		subs[name] = cm
	}
	raw := make(map[string]map[string]string, len(configs))
	for name, cfg := range configs {
		raw[name] = maps.Clone(cfg)
	}
	m.subs, m.raw = subs, raw
	m.version++
	m.log.Info("client metrics subscriptions changed", "subscriptions", len(subs))
}

// instanceFor is Kafka's clientInstance: the cached instance, made anew
// when it is not cached or was made before the latest subscription
// change, with its expiry pushed back. Called with m.mu held.
func (m *Manager) instanceFor(id protocol.UUID, c Client, now time.Time) *instance {
	m.sweep(now)
	in := m.instances[id]
	if in == nil || in.version < m.version {
		attrs := map[string]string{
			cfgdef.MatchClientInstanceID:      uuidText(id),
			cfgdef.MatchClientID:              c.ClientID,
			cfgdef.MatchClientSoftwareName:    c.SoftwareName,
			cfgdef.MatchClientSoftwareVersion: c.SoftwareVersion,
			cfgdef.MatchClientSourceAddress:   c.SourceAddress,
			cfgdef.MatchClientSourcePort:      c.SourcePort,
		}
		for k, v := range attrs {
			// Kafka's attribute is null (matching nothing) when the
			// client did not say (no ApiVersions v3+).
			if v == "" && k != cfgdef.MatchClientID {
				delete(attrs, k)
			}
		}
		if in != nil {
			attrs = in.attrs // Kafka keeps the instance's metadata
		}
		in = m.newInstance(id, attrs)
		if len(m.instances) >= maxInstances {
			m.evictLeastRecentlyUsed()
		}
		m.instances[id] = in
	}
	if c.Conn != nil {
		m.byConn[c.Conn] = id
	}
	in.lastUsed = now
	in.expires = now.Add(max(minExpiry, expiryInterval*time.Duration(in.intervalMs)*time.Millisecond))
	return in
}

// newInstance matches the subscriptions against a client
// (createClientInstance): the union of the matched metrics ("*" alone
// when one of them wants every metric), the smallest of their intervals
// (the default when none matches).
func (m *Manager) newInstance(id protocol.UUID, attrs map[string]string) *instance {
	interval := int32(cfgdef.ClientMetricsDefaultIntervalMs)
	set := map[string]bool{}
	all := false
	for _, name := range slices.Sorted(maps.Keys(m.subs)) {
		s := m.subs[name]
		if !s.Matches(attrs) {
			continue
		}
		for _, metric := range s.Metrics {
			set[metric] = true
			all = all || metric == cfgdef.ClientMetricsAllMetrics
		}
		interval = min(interval, s.IntervalMs)
	}
	requested := slices.Sorted(maps.Keys(set))
	if all {
		requested = []string{cfgdef.ClientMetricsAllMetrics}
	}
	return &instance{
		id: id, attrs: attrs, version: m.version, metrics: requested, intervalMs: interval,
		subscriptionID: subscriptionID(requested, interval, id),
	}
}

// subscriptionID is Kafka's computeSubscriptionId: the CRC32C of the
// requested metrics printed as a Java set followed by the interval,
// XORed with the instance id's Java hashCode. Gregor prints the set
// sorted where Java prints a HashSet in hash order, so the ids differ
// from Kafka's; they are opaque to clients, and change exactly when the
// metrics or the interval do.
func subscriptionID(requested []string, intervalMs int32, id protocol.UUID) int32 {
	text := fmt.Sprintf("[%s]%d", strings.Join(requested, ", "), intervalMs)
	crc := crc32.Checksum([]byte(text), crc32.MakeTable(crc32.Castagnoli))
	hi, lo := binary.BigEndian.Uint64(id[:8]), binary.BigEndian.Uint64(id[8:])
	h := hi ^ lo
	return int32(crc) ^ int32(uint32(h>>32)^uint32(h))
}

// sweep drops the instances whose time is up, at most once a second.
func (m *Manager) sweep(now time.Time) {
	if now.Sub(m.lastSweep) < time.Second {
		return
	}
	m.lastSweep = now
	for id, in := range m.instances {
		if !now.Before(in.expires) {
			delete(m.instances, id)
		}
	}
	for conn, id := range m.byConn {
		if m.instances[id] == nil {
			delete(m.byConn, conn)
		}
	}
}

// evictLeastRecentlyUsed makes room in a full cache (Kafka's LRU cache).
func (m *Manager) evictLeastRecentlyUsed() {
	var oldest *instance
	for _, in := range m.instances {
		if oldest == nil || in.lastUsed.Before(oldest.lastUsed) {
			oldest = in
		}
	}
	if oldest != nil {
		delete(m.instances, oldest.id)
	}
}

// WatchConnection reports whether conn is new to the manager, whose end
// the caller is then to report with ConnectionClosed.
func (m *Manager) WatchConnection(conn any) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.watched[conn] {
		return false
	}
	m.watched[conn] = true
	return true
}

// ConnectionClosed drops the instance the connection last spoke for, as
// Kafka's ClientConnectionDisconnectListener does.
func (m *Manager) ConnectionClosed(conn any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.watched, conn)
	if id, ok := m.byConn[conn]; ok {
		delete(m.byConn, conn)
		delete(m.instances, id)
	}
}

// reserved reports Kafka's Uuid.RESERVED: the zero id and the metadata
// topic's id (0, 1).
func reserved(id protocol.UUID) bool {
	return binary.BigEndian.Uint64(id[:8]) == 0 && binary.BigEndian.Uint64(id[8:]) <= 1
}

// GetSubscriptions answers GetTelemetrySubscriptions (Kafka's
// processGetTelemetrySubscriptionRequest): a new instance id for a
// client that sends the zero one, its subscription, or
// THROTTLING_QUOTA_EXCEEDED for a request within the push interval of
// the previous one (unless the last push failed for an unknown
// subscription or compression type, or the subscriptions changed).
func (m *Manager) GetSubscriptions(c Client, req *kmsg.GetTelemetrySubscriptionsRequest) *kmsg.GetTelemetrySubscriptionsResponse {
	resp := req.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	now := m.opts.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	id := protocol.UUID(req.ClientInstanceID)
	if id == (protocol.UUID{}) {
		for {
			id = protocol.RandomUUID()
			if m.instances[id] == nil {
				break
			}
		}
	}
	in := m.instanceFor(id, c, now)
	since := now.Sub(later(in.lastGet, in.lastPush))
	if !in.lastGet.IsZero() || !in.lastPush.IsZero() {
		if since < time.Duration(in.intervalMs)*time.Millisecond &&
			in.lastError != kerr.UnknownSubscriptionID.Code && in.lastError != kerr.UnsupportedCompressionType.Code {
			m.throttled.Inc()
			resp.ErrorCode = kerr.ThrottlingQuotaExceeded.Code
			return resp
		}
	}
	in.lastGet = now
	in.lastError = 0
	resp.ClientInstanceID = id
	resp.SubscriptionID = in.subscriptionID
	resp.AcceptedCompressionTypes = acceptedCompressionTypes()
	resp.PushIntervalMillis = in.intervalMs
	resp.TelemetryMaxBytes = m.opts.MaxBytes
	resp.DeltaTemporality = true
	resp.RequestedMetrics = slices.Clone(in.metrics)
	return resp
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Push answers PushTelemetry (Kafka's processPushTelemetryRequest and
// validatePushRequest, in their order): INVALID_REQUEST for a reserved
// instance id or a push after a terminating one, THROTTLING_QUOTA_EXCEEDED
// within the push interval (a push right after GetTelemetrySubscriptions
// and a terminating push are always taken, for the client jitters its
// first push), UNKNOWN_SUBSCRIPTION_ID when the subscription changed,
// UNSUPPORTED_COMPRESSION_TYPE, TELEMETRY_TOO_LARGE, then INVALID_RECORD
// when the payload does not decompress or decode.
func (m *Manager) Push(c Client, req *kmsg.PushTelemetryRequest) *kmsg.PushTelemetryResponse {
	resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
	id := protocol.UUID(req.ClientInstanceID)
	if reserved(id) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	now := m.opts.Now()
	m.mu.Lock()
	in := m.instanceFor(id, c, now)
	code := m.checkPush(in, req, now)
	in.terminating = in.terminating || req.Terminating
	if code != 0 {
		in.lastError = code
		m.mu.Unlock()
		resp.ErrorCode = code
		return resp
	}
	interval := time.Duration(in.intervalMs) * time.Millisecond
	m.mu.Unlock()

	if len(req.Metrics) > 0 {
		points, err := decodePayload(protocol.Codec(req.CompressionType), req.Metrics, m.opts.MaxBytes)
		if err != nil {
			m.exportErrors.Inc()
			m.log.Debug("client telemetry payload refused", "client_instance_id", uuidText(id), "err", err)
			m.setLastError(id, kerr.InvalidRecord.Code)
			resp.ErrorCode = kerr.InvalidRecord.Code
			return resp
		}
		m.store.record(uuidText(id), points, now, max(minExpiry, expiryInterval*interval))
		m.exported.Inc()
	}
	m.setLastError(id, 0)
	return resp
}

func (m *Manager) setLastError(id protocol.UUID, code int16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if in := m.instances[id]; in != nil {
		in.lastError = code
	}
}

// checkPush is Kafka's validatePushRequest; called with m.mu held.
func (m *Manager) checkPush(in *instance, req *kmsg.PushTelemetryRequest, now time.Time) int16 {
	if in.terminating {
		return kerr.InvalidRequest.Code
	}
	// A push right after GetTelemetrySubscriptions is taken whenever it
	// comes: the client jitters its push between 0.5 and 1.5 intervals.
	accept := in.lastGet.After(in.lastPush) || in.lastPush.IsZero() ||
		now.Sub(in.lastPush) >= time.Duration(in.intervalMs)*time.Millisecond
	if accept {
		in.lastPush = now
	} else if !req.Terminating {
		m.throttled.Inc()
		return kerr.ThrottlingQuotaExceeded.Code
	}
	if req.SubscriptionID != in.subscriptionID {
		m.unknownSubscription.Inc()
		return kerr.UnknownSubscriptionID.Code
	}
	if !protocol.Codec(req.CompressionType).Valid() {
		return kerr.UnsupportedCompressionType.Code
	}
	if len(req.Metrics) > int(m.opts.MaxBytes) {
		return kerr.TelemetryTooLarge.Code
	}
	return 0
}

// uuidText is a Kafka Uuid's text (base64url without padding).
func uuidText(id protocol.UUID) string { return id.String() }

// RegisterMetrics registers the telemetry's broker metrics (Kafka's
// kafka.server:type=client-metrics) and the series clients pushed.
func (m *Manager) RegisterMetrics(r *metrics.Registry) {
	r.Gauge(metrics.ClientMetricsInstanceCount, func() float64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.sweep(m.opts.Now())
		return float64(len(m.instances))
	})
	r.RegisterCounter(metrics.ClientMetricsUnknownSubscriptionRequests, &m.unknownSubscription)
	r.RegisterCounter(metrics.ClientMetricsThrottles, &m.throttled)
	r.RegisterCounter(metrics.ClientMetricsPluginExports, &m.exported)
	r.RegisterCounter(metrics.ClientMetricsPluginErrors, &m.exportErrors)
	r.Dynamic(metrics.ClientTelemetry, func(add func(d *metrics.Desc, collect func(*metrics.Emit))) {
		m.store.collect(m.opts.Now(), add)
	})
}
