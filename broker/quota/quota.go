// Package quota is the client quotas' machinery: Kafka's
// ClientQuotaManager and its subclasses (ClientRequestQuotaManager,
// ControllerMutationQuotaManager) with the default quota callback, and the
// connection_creation_rate of KIP-612. It owns the quota table by user,
// client id and IP taken from the metadata image, the sensors that measure
// usage, the throttle-time arithmetic and the controller mutation quota
// that implements metadata.MutationQuota. What needs a request or a
// connection (which request is exempt, muting a throttled connection,
// putting the throttle into a response) is broker/network's
// (requestquota.go); which requests mutate partitions is the broker's
// (throttle.go). Of Gregor's packages it imports metadata, and metrics for
// the quota metrics (metrics.go).
//
// The quotas come from the metadata image (metadata/quotas.go). For each
// quota type the broker keeps the entities that set its key; a request's
// user (the session principal's name) and client id (the request header's)
// are resolved in Kafka's precedence order:
//
//	/config/users/<user>/clients/<client-id>
//	/config/users/<user>/clients/<default>
//	/config/users/<user>
//	/config/users/<default>/clients/<client-id>
//	/config/users/<default>/clients/<default>
//	/config/users/<default>
//	/config/clients/<client-id>
//	/config/clients/<default>
//
// in two steps, as Kafka does: the first level that exists decides which
// (user, client-id) pair the usage is counted under (so a user quota is
// shared by all the user's client ids), and the quota of that pair is then
// looked up (DefaultQuotaCallback.quotaMetricTags and quotaLimit). Kafka
// shortcuts the first step while only one kind of level has ever been
// configured; the shortcut picks the same pair whenever a quota applies.
//
// Usage is measured per pair like Kafka's Rate stat: quota.window.num
// samples of quota.window.size.seconds, the sum of the samples divided by
// the time they span (at least all but one of the samples' length). A
// request that takes the rate above the quota is answered at once with the
// time the client must wait for the rate to fall back to it,
// (rate - quota) / quota * window, in throttle_time_ms; the connection then
// reads nothing more until that time has passed (KIP-219, broker/network's
// conn.go).
// controller_mutation_rate is a token bucket instead (KIP-599): a burst of
// quota * controller.quota.window.num * controller.quota.window.size.seconds
// partition mutations, refilled at the quota; the throttle is the time to
// refill the deficit.
//
// connection_creation_rate (KIP-612) counts the connections an address
// opens, over the same window; one past the rate is held unserved and
// closed when its throttle (at most one window) ends, as Kafka's acceptor
// does.
//
// The hot paths pay one atomic load when no quota of their type exists.
//
// request_percentage measures the time a request's handler runs on its
// connection's goroutine, from dispatch until it returns (the inline part:
// a produce's append, a fetch that answers at once, the decoding and
// checks of a request that then waits elsewhere), as a share of one
// thread's second. Kafka counts the time a request handler thread spends
// on it plus the network thread's time to read it and send its answer;
// Gregor has no fixed pool of handler threads (each connection runs its
// requests on its own goroutine), so the share is of one goroutine, and
// the time to read and write the bytes is not counted. Exempt, as in
// Kafka: what brokers and controllers send each other (the controller
// listener, WriteTxnMarkers, follower fetches) and acks=0 produces.
//
// Deliberate departures: Kafka starts measuring a type once any quota of
// it has been configured since the broker started and keeps measuring
// after they are all deleted; Gregor measures while one exists. Idle
// pairs are forgotten after an hour, as Kafka's sensors are. A muted
// connection has usually read its next request already (Gregor reads
// ahead while Kafka reads one request at a time); the request waits,
// unhandled, until the throttle ends. Auto-created topics (Metadata) are
// not counted against controller_mutation_rate (Kafka counts them
// permissively).
//
// Locks: Manager.mu guards the sensor map; a sensor's mu guards its
// samples; a Mutation's mu its last throttle. All are leaves; Manager.mu
// is released before a sensor's is taken.
package quota

import (
	"context"
	"math"
	"net"
	"net/netip"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metrics"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Type is one of the quota managers.
type Type uint8

const (
	// Produce is producer_byte_rate: produce request bytes.
	Produce Type = iota
	// Fetch is consumer_byte_rate: consumer fetch response bytes.
	Fetch
	// Request is request_percentage: handler time.
	Request
	// ControllerMutation is controller_mutation_rate: partitions
	// created or deleted.
	ControllerMutation
	numTypes
	// connection is connection_creation_rate per IP (KIP-612),
	// measured apart from the user and client-id types.
	connection = numTypes
)

// keys are the quota keys of the types.
var keys = [numTypes]string{
	Produce:            metadata.QuotaProducerByteRate,
	Fetch:              metadata.QuotaConsumerByteRate,
	Request:            metadata.QuotaRequestPercentage,
	ControllerMutation: metadata.QuotaControllerMutationRate,
}

// Window is the measuring window of a quota type: Samples samples of
// Size each.
type Window struct {
	Samples int
	Size    time.Duration
}

// Options are the broker's quota settings.
type Options struct {
	// Client is quota.window.num and quota.window.size.seconds (produce,
	// fetch and request quotas).
	Client Window
	// Controller is controller.quota.window.num and
	// controller.quota.window.size.seconds (controller mutations).
	Controller Window
}

// DefaultOptions are Kafka's defaults: 11 samples of a second.
func DefaultOptions() Options {
	w := Window{Samples: 11, Size: time.Second}
	return Options{Client: w, Controller: w}
}

// table is the configured quotas of each type, by entity; a type
// without entities is not measured.
type table struct {
	byType [numTypes]map[metadata.QuotaEntity]float64
}

// inactiveSensorExpiry is how long an unused pair is remembered
// (ClientQuotaManager.InactiveSensorExpirationTimeSeconds).
const inactiveSensorExpiry = time.Hour

// Manager is a node's quota managers.
type Manager struct {
	windows [numTypes + 1]Window
	now     func() time.Time
	// levels is nil while no quota of any type exists.
	levels atomic.Pointer[table]
	// ips is nil while no IP has a connection_creation_rate.
	ips atomic.Pointer[ipQuotas]

	mu        sync.Mutex
	sensors   map[sensorKey]*sensor
	lastSweep time.Time
}

// sensorKey is the pair usage is counted under, per type.
type sensorKey struct {
	typ          Type
	user, client string
}

// New returns the quota managers with opts' windows (Kafka's defaults
// for a window left zero), measuring nothing until Update gives them
// quotas.
func New(opts Options, now func() time.Time) *Manager {
	def := DefaultOptions()
	if opts.Client.Samples < 1 || opts.Client.Size <= 0 {
		opts.Client = def.Client
	}
	if opts.Controller.Samples < 1 || opts.Controller.Size <= 0 {
		opts.Controller = def.Controller
	}
	q := &Manager{now: now, sensors: map[sensorKey]*sensor{}, lastSweep: now()}
	q.windows = [numTypes + 1]Window{opts.Client, opts.Client, opts.Client, opts.Controller, opts.Client}
	return q
}

// ipQuotas are the connection_creation_rate quotas: by address, and the
// default for the others.
type ipQuotas struct {
	byIP       map[netip.Addr]float64
	def        float64
	hasDefault bool
}

// Update takes the quotas of a new image.
func (q *Manager) Update(quotas map[metadata.QuotaEntity]map[string]float64) {
	var l table
	var ips ipQuotas
	anyIP := false
	any := false
	for entity, values := range quotas {
		if entity.IP.Set {
			v, ok := values[metadata.QuotaConnectionCreationRate]
			if !ok {
				continue
			}
			anyIP = true
			if entity.IP.Default {
				ips.def, ips.hasDefault = v, true
				continue
			}
			if ips.byIP == nil {
				ips.byIP = map[netip.Addr]float64{}
			}
			for _, addr := range resolveQuotaIP(entity.IP.Name) {
				ips.byIP[addr] = v
			}
			continue
		}
		for t, key := range keys {
			v, ok := values[key]
			if !ok {
				continue
			}
			if l.byType[t] == nil {
				l.byType[t] = map[metadata.QuotaEntity]float64{}
			}
			l.byType[t][entity] = v
			any = true
		}
	}
	if anyIP {
		q.ips.Store(&ips)
	} else {
		q.ips.Store(nil)
	}
	if !any {
		q.levels.Store(nil)
		return
	}
	q.levels.Store(&l)
}

// resolveQuotaIP is the addresses an ip entity names: itself, or what a
// host name resolves to (Kafka's InetAddress.getByName).
func resolveQuotaIP(name string) []netip.Addr {
	if addr, err := netip.ParseAddr(name); err == nil {
		return []netip.Addr{addr.Unmap()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil
	}
	for i := range ips {
		ips[i] = ips[i].Unmap()
	}
	return ips
}

// ConnectionThrottle records a new connection from ip against its
// connection_creation_rate and returns how long to hold it before closing
// it unserved (0: accept it). A refused connection is not counted, and
// the wait is at most one window (ConnectionQuotas
// .recordIpConnectionMaybeThrottle).
func (q *Manager) ConnectionThrottle(ip netip.Addr) time.Duration {
	if q == nil {
		return 0
	}
	ips := q.ips.Load()
	if ips == nil {
		return 0
	}
	limit, ok := ips.byIP[ip]
	if !ok {
		if !ips.hasDefault {
			return 0
		}
		limit = ips.def
	}
	now := q.now()
	s := q.sensorFor(sensorKey{typ: connection, user: ip.String()}, now)
	ms := s.recordRate(1, limit, true, now)
	if ms <= 0 {
		return 0
	}
	s.recordRate(-1, 0, false, now)
	return time.Duration(min(ms, q.windows[Request].Size.Milliseconds())) * time.Millisecond
}

// Enabled reports whether usage of type t is measured.
func (q *Manager) Enabled(t Type) bool {
	l := q.levels.Load()
	return l != nil && l.byType[t] != nil
}

// Active reports whether any quota exists.
func (q *Manager) Active() bool { return q.levels.Load() != nil }

// resolve is the pair usage of (user, clientID) is counted under for type
// t, and the quota that applies to it (ok false: none).
func (l *table) resolve(t Type, user, clientID string) (key sensorKey, limit float64, ok bool) {
	m := l.byType[t]
	has := func(e metadata.QuotaEntity) bool { _, ok := m[e]; return ok }
	u, c := metadata.QuotaNamed(user), metadata.QuotaNamed(clientID)
	du, dc := metadata.QuotaDefault(), metadata.QuotaDefault()
	key.typ = t
	switch {
	case has(metadata.QuotaEntity{User: u, ClientID: c}), has(metadata.QuotaEntity{User: u, ClientID: dc}):
		key.user, key.client = user, clientID
	case has(metadata.QuotaEntity{User: u}):
		key.user = user
	case has(metadata.QuotaEntity{User: du, ClientID: c}), has(metadata.QuotaEntity{User: du, ClientID: dc}):
		key.user, key.client = user, clientID
	case has(metadata.QuotaEntity{User: du}):
		key.user = user
	default:
		key.client = clientID
	}
	limit, ok = l.limit(t, key.user, key.client)
	return key, limit, ok
}

// limit is DefaultQuotaCallback.quotaLimit: the quota of a pair.
func (l *table) limit(t Type, user, clientID string) (float64, bool) {
	m := l.byType[t]
	var candidates []metadata.QuotaEntity
	u, c := metadata.QuotaNamed(user), metadata.QuotaNamed(clientID)
	du, dc := metadata.QuotaDefault(), metadata.QuotaDefault()
	switch {
	case user != "" && clientID != "":
		candidates = []metadata.QuotaEntity{{User: u, ClientID: c}, {User: u, ClientID: dc}, {User: du, ClientID: c}, {User: du, ClientID: dc}}
	case user != "":
		candidates = []metadata.QuotaEntity{{User: u}, {User: du}}
	case clientID != "":
		candidates = []metadata.QuotaEntity{{ClientID: c}, {ClientID: dc}}
	}
	for _, e := range candidates {
		if v, ok := m[e]; ok {
			return v, true
		}
	}
	return 0, false
}

// sensorFor returns the pair's sensor, creating it.
func (q *Manager) sensorFor(key sensorKey, now time.Time) *sensor {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.sensors[key]
	if s == nil {
		if now.Sub(q.lastSweep) >= time.Minute {
			q.lastSweep = now
			for k, old := range q.sensors {
				if now.Sub(old.lastUsed()) >= inactiveSensorExpiry {
					delete(q.sensors, k)
				}
			}
		}
		s = &sensor{window: q.windows[key.typ]}
		q.sensors[key] = s
	}
	return s
}

// lookup resolves the pair and its sensor for type t; ok is false when
// the type is not measured.
func (q *Manager) lookup(t Type, user, clientID string, now time.Time) (s *sensor, limit float64, limited, ok bool) {
	l := q.levels.Load()
	if l == nil || l.byType[t] == nil {
		return nil, 0, false, false
	}
	key, limit, limited := l.resolve(t, user, clientID)
	return q.sensorFor(key, now), limit, limited, true
}

// Record counts value for the client and returns the throttle time in
// milliseconds (0 when within its quota, or none applies).
// ClientQuotaManager.recordAndGetThrottleTimeMs; the request quota's
// throttle is at most one window (ClientRequestQuotaManager).
func (q *Manager) Record(t Type, user, clientID string, value float64) int32 {
	now := q.now()
	s, limit, limited, ok := q.lookup(t, user, clientID, now)
	if !ok {
		return 0
	}
	ms := s.recordRate(value, limit, limited, now)
	if t == Request {
		ms = min(ms, q.windows[Request].Size.Milliseconds())
	}
	return clampMillis(ms)
}

// Unrecord takes back a value recorded for a response that was not sent
// (a throttled fetch answers empty).
func (q *Manager) Unrecord(t Type, user, clientID string, value float64) {
	now := q.now()
	if s, _, _, ok := q.lookup(t, user, clientID, now); ok {
		s.recordRate(-value, 0, false, now)
	}
}

// MaxValueInWindow is the most that can be recorded at once without
// certain throttling: quota * (samples - 1) * window
// (ClientQuotaManager.getMaxValueInQuotaWindow); ok false when no quota
// applies.
func (q *Manager) MaxValueInWindow(t Type, user, clientID string) (float64, bool) {
	l := q.levels.Load()
	if l == nil || l.byType[t] == nil {
		return 0, false
	}
	_, limit, ok := l.resolve(t, user, clientID)
	if !ok {
		return 0, false
	}
	w := q.windows[t]
	return limit * float64(w.Samples-1) * w.Size.Seconds(), true
}

func clampMillis(ms int64) int32 {
	if ms > math.MaxInt32 {
		return math.MaxInt32
	}
	if ms < 0 {
		return 0
	}
	return int32(ms)
}

// sensor is one pair's usage of one quota type: Kafka's Rate over a
// SampledStat (WindowedSum), or its TokenBucket for controller
// mutations.
type sensor struct {
	window Window

	mu      sync.Mutex
	samples []rateSample
	current int
	// tokens and tokensAt are the token bucket (mutations).
	tokens   float64
	tokensAt int64
	lastMs   atomic.Int64
	// throttles are the throttles applied to the pair, for its
	// throttle-time metric; wasThrottled says there was one (metrics.go).
	throttles    metrics.Window
	wasThrottled atomic.Bool
}

// rateSample is one of SampledStat's samples (milliseconds).
type rateSample struct {
	value     float64
	events    int64
	start     int64
	lastEvent int64
}

func (s *sensor) lastUsed() time.Time { return time.UnixMilli(s.lastMs.Load()) }

// recordRate adds value at now and, when limited, returns the throttle
// time if the rate is then above limit (Sensor.record with checkQuotas,
// then QuotaUtils.throttleTime).
func (s *sensor) recordRate(value, limit float64, limited bool, now time.Time) int64 {
	ms := now.UnixMilli()
	s.lastMs.Store(ms)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recordLocked(value, ms)
	if !limited {
		return 0
	}
	rate := s.rateLocked(ms)
	if rate <= limit {
		return 0
	}
	return int64(math.Round((rate - limit) / limit * float64(s.windowSizeLocked(ms))))
}

func (s *sensor) windowMs() int64 { return s.window.Size.Milliseconds() }

// recordLocked is SampledStat.record.
func (s *sensor) recordLocked(value float64, now int64) {
	sm := s.currentLocked(now)
	if now-sm.start >= s.windowMs() {
		sm = s.advanceLocked(now)
	}
	sm.value += value
	sm.events++
	sm.lastEvent = now
}

func (s *sensor) currentLocked(now int64) *rateSample {
	if len(s.samples) == 0 {
		s.samples = append(s.samples, rateSample{start: now, lastEvent: now})
	}
	return &s.samples[s.current]
}

// advanceLocked moves to the next sample, keeping samples+1 of them (one
// that overlaps the window's start).
func (s *sensor) advanceLocked(now int64) *rateSample {
	s.current = (s.current + 1) % (s.window.Samples + 1)
	if s.current >= len(s.samples) {
		s.samples = append(s.samples, rateSample{start: now, lastEvent: now})
	} else {
		s.samples[s.current] = rateSample{start: now, lastEvent: now}
	}
	return &s.samples[s.current]
}

// purgeLocked resets the samples with no event within the window.
func (s *sensor) purgeLocked(now int64) {
	expire := int64(s.window.Samples) * s.windowMs()
	for i := range s.samples {
		if now-s.samples[i].lastEvent >= expire {
			s.samples[i] = rateSample{start: now, lastEvent: now}
		}
	}
}

// rateLocked is Rate.measure: the samples' sum per second of the window.
func (s *sensor) rateLocked(now int64) float64 {
	s.purgeLocked(now)
	var sum float64
	for _, sm := range s.samples {
		sum += sm.value
	}
	return sum / (float64(s.windowSizeLocked(now)) / 1000)
}

// windowSizeLocked is Rate.windowSize in milliseconds: the time since the
// oldest sample began, at least samples-1 whole windows.
func (s *sensor) windowSizeLocked(now int64) int64 {
	s.purgeLocked(now)
	if len(s.samples) == 0 {
		s.samples = append(s.samples, rateSample{start: now, lastEvent: now})
	}
	oldest := s.samples[0].start
	for _, sm := range s.samples[1:] {
		oldest = min(oldest, sm.start)
	}
	total := now - oldest
	full := total / s.windowMs()
	if minFull := int64(s.window.Samples - 1); full < minFull {
		total += (minFull - full) * s.windowMs()
	}
	return max(total, 1)
}

// refillLocked is TokenBucket.refill: the bucket starts full.
func (s *sensor) refillLocked(limit float64, now int64) {
	burst := float64(s.window.Samples) * s.window.Size.Seconds() * limit
	s.tokens = min(burst, s.tokens+limit*float64(now-s.tokensAt)/1000)
	s.tokensAt = now
}

// mutationThrottle is the time for the bucket to refill to zero
// (ControllerMutationQuotaManager.throttleTimeMs).
func mutationThrottle(tokens, limit float64) int64 {
	return int64(math.Round(-tokens / limit * 1000))
}

// recordMutations takes permits from the bucket. Strict: refused (no
// permits taken) while the bucket is below zero, with the throttle time;
// permissive: always taken, and the throttle time once below zero.
func (s *sensor) recordMutations(permits, limit float64, strict bool, now time.Time) (throttleMs int64, refused bool) {
	ms := now.UnixMilli()
	s.lastMs.Store(ms)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refillLocked(limit, ms)
	if strict && s.tokens < 0 {
		return mutationThrottle(s.tokens, limit), true
	}
	s.tokens = min(float64(s.window.Samples)*s.window.Size.Seconds()*limit, s.tokens-permits)
	if !strict && s.tokens < 0 {
		return mutationThrottle(s.tokens, limit), false
	}
	return 0, false
}

// LimitsConnections reports whether any address has a
// connection_creation_rate.
func (q *Manager) LimitsConnections() bool { return q.ips.Load() != nil }

// Images is the metadata image a node follows and its changes, in order,
// first with the current image (prev nil): the broker's MetadataView.
type Images interface {
	Image() *metadata.Image
	Subscribe(fn func(prev, next *metadata.Image)) (cancel func())
}

// Follow keeps the quota managers on the image's quotas; cancel ends it.
func (q *Manager) Follow(images Images) (cancel func()) {
	if img := images.Image(); img != nil {
		q.Update(img.ClientQuotas)
	}
	return images.Subscribe(func(prev, next *metadata.Image) {
		// An image shares its quota map with the previous one unless a
		// quota record changed it.
		if prev == nil || reflect.ValueOf(prev.ClientQuotas).UnsafePointer() != reflect.ValueOf(next.ClientQuotas).UnsafePointer() {
			q.Update(next.ClientQuotas)
		}
	})
}

// nanosToPercentage turns time spent on a request into its share of one
// thread's second (ClientRequestQuotaManager.NanosToPercentagePerSecond).
func nanosToPercentage(d time.Duration) float64 { return float64(d.Nanoseconds()) * 100 / 1e9 }

// RecordRequestTime records d, the time a request's handler ran, against
// the client's request_percentage and returns its throttle time in
// milliseconds (0 when within its quota, or none applies).
func (q *Manager) RecordRequestTime(user, clientID string, d time.Duration) int32 {
	return q.Record(Request, user, clientID, nanosToPercentage(d))
}

// Mutation is one request's controller mutation quota
// (Strict/PermissiveControllerMutationQuota).
type Mutation struct {
	sensor *sensor
	limit  float64
	strict bool
	now    func() time.Time

	mu         sync.Mutex
	throttleMs int64
	recordedAt time.Time
}

// Record implements metadata.MutationQuota.
func (m *Mutation) Record(permits int) bool {
	now := m.now()
	ms, refused := m.sensor.recordMutations(float64(permits), m.limit, m.strict, now)
	if ms > 0 {
		m.mu.Lock()
		m.throttleMs, m.recordedAt = ms, now
		m.mu.Unlock()
	}
	return !refused
}

// ThrottleTime is the throttle still due: the last one recorded, less the
// time since (the request may have waited for its commit meanwhile). A
// nil Mutation has none.
func (m *Mutation) ThrottleTime() int32 {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.throttleMs == 0 {
		return 0
	}
	return clampMillis(m.throttleMs - m.now().Sub(m.recordedAt).Milliseconds())
}

// NewMutation is the mutation quota of a request from (user, clientID)
// that mutates partitions; strict for the versions whose answers carry
// THROTTLING_QUOTA_EXCEEDED. Nil when no quota applies (Kafka's
// UnboundedControllerMutationQuota).
func (q *Manager) NewMutation(user, clientID string, strict bool) *Mutation {
	now := q.now()
	s, limit, limited, ok := q.lookup(ControllerMutation, user, clientID, now)
	if !ok || !limited {
		return nil
	}
	return &Mutation{sensor: s, limit: limit, strict: strict, now: q.now}
}

// ApplyThrottle puts the quota's throttle into the answer, unless it
// already carries a larger one (a remote controller's).
func (m *Mutation) ApplyThrottle(resp kmsg.Response) {
	t := m.ThrottleTime()
	if t == 0 {
		return
	}
	tr, ok := resp.(kmsg.ThrottleResponse)
	if !ok {
		return
	}
	if cur, _ := tr.Throttle(); cur < t {
		resp.(kmsg.SetThrottleResponse).SetThrottle(t)
		m.sensor.throttled(t, m.now())
	}
}

// ConnectionRate holds the new connections of a broker, or of one of its
// listeners, to max.connection.creation.rate (KIP-612). Unlike an
// address's connection_creation_rate, whose excess is closed unserved,
// this one makes the acceptor wait: every connection is counted, and one
// past the rate is taken only after Throttle's wait, at most one window
// (Kafka's ConnectionQuotas bounds it to quota.window.size.seconds). The
// rate is measured as the quotas' Rate is, over the window's samples, so
// a burst of up to the limit times the window's span is taken at once.
type ConnectionRate struct {
	limit float64
	s     sensor
}

// NewConnectionRate is a rate of limit connections a second measured over
// w (quota.window.num samples of quota.window.size.seconds).
func NewConnectionRate(limit int32, w Window) *ConnectionRate {
	return &ConnectionRate{limit: float64(limit), s: sensor{window: w}}
}

// Throttle counts a new connection at now and returns how long to wait
// before accepting it (0: at once).
func (r *ConnectionRate) Throttle(now time.Time) time.Duration {
	ms := r.s.recordRate(1, r.limit, true, now)
	if ms <= 0 {
		return 0
	}
	return time.Duration(min(ms, r.s.windowMs())) * time.Millisecond
}
