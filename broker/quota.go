package broker

// Client quotas: Kafka's ClientQuotaManager and its subclasses
// (ClientRequestQuotaManager, ControllerMutationQuotaManager) with the
// default quota callback.
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
// reads nothing more until that time has passed (KIP-219, conn.go).
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
// Locks: clientQuotas.mu guards the sensor map; a sensor's mu guards its
// samples. Both are leaves; mu is released before a sensor's is taken.

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
	"github.com/twmb/franz-go/pkg/kmsg"
)

// quotaType is one of the quota managers.
type quotaType uint8

const (
	quotaProduce quotaType = iota
	quotaFetch
	quotaRequest
	quotaMutation
	numQuotaTypes
	// quotaConnection is connection_creation_rate per IP (KIP-612),
	// measured apart from the user and client-id types.
	quotaConnection = numQuotaTypes
)

// quotaKeys are the quota keys of the types.
var quotaKeys = [numQuotaTypes]string{
	quotaProduce:  metadata.QuotaProducerByteRate,
	quotaFetch:    metadata.QuotaConsumerByteRate,
	quotaRequest:  metadata.QuotaRequestPercentage,
	quotaMutation: metadata.QuotaControllerMutationRate,
}

// QuotaWindow is the measuring window of a quota type: Samples samples of
// Size each.
type QuotaWindow struct {
	Samples int
	Size    time.Duration
}

// QuotaOptions are the broker's quota settings.
type QuotaOptions struct {
	// Client is quota.window.num and quota.window.size.seconds (produce,
	// fetch and request quotas).
	Client QuotaWindow
	// Controller is controller.quota.window.num and
	// controller.quota.window.size.seconds (controller mutations).
	Controller QuotaWindow
}

// DefaultQuotaOptions are Kafka's defaults: 11 samples of a second.
func DefaultQuotaOptions() QuotaOptions {
	w := QuotaWindow{Samples: 11, Size: time.Second}
	return QuotaOptions{Client: w, Controller: w}
}

// quotaLevels are the configured quotas of each type, by entity; a type
// without entities is not measured.
type quotaLevels struct {
	byType [numQuotaTypes]map[metadata.QuotaEntity]float64
}

// inactiveSensorExpiry is how long an unused pair is remembered
// (ClientQuotaManager.InactiveSensorExpirationTimeSeconds).
const inactiveSensorExpiry = time.Hour

// clientQuotas is a node's quota managers.
type clientQuotas struct {
	windows [numQuotaTypes + 1]QuotaWindow
	now     func() time.Time
	// levels is nil while no quota of any type exists.
	levels atomic.Pointer[quotaLevels]
	// ips is nil while no IP has a connection_creation_rate.
	ips atomic.Pointer[ipQuotas]

	mu        sync.Mutex
	sensors   map[sensorKey]*quotaSensor
	lastSweep time.Time
}

// sensorKey is the pair usage is counted under, per type.
type sensorKey struct {
	typ          quotaType
	user, client string
}

func newClientQuotas(opts QuotaOptions, now func() time.Time) *clientQuotas {
	def := DefaultQuotaOptions()
	if opts.Client.Samples < 1 || opts.Client.Size <= 0 {
		opts.Client = def.Client
	}
	if opts.Controller.Samples < 1 || opts.Controller.Size <= 0 {
		opts.Controller = def.Controller
	}
	q := &clientQuotas{now: now, sensors: map[sensorKey]*quotaSensor{}, lastSweep: now()}
	q.windows = [numQuotaTypes + 1]QuotaWindow{opts.Client, opts.Client, opts.Client, opts.Controller, opts.Client}
	return q
}

// ipQuotas are the connection_creation_rate quotas: by address, and the
// default for the others.
type ipQuotas struct {
	byIP       map[netip.Addr]float64
	def        float64
	hasDefault bool
}

// update takes the quotas of a new image.
func (q *clientQuotas) update(quotas map[metadata.QuotaEntity]map[string]float64) {
	var l quotaLevels
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
		for t, key := range quotaKeys {
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

// connectionThrottle records a new connection from ip against its
// connection_creation_rate and returns how long to hold it before closing
// it unserved (0: accept it). A refused connection is not counted, and
// the wait is at most one window (ConnectionQuotas
// .recordIpConnectionMaybeThrottle).
func (q *clientQuotas) connectionThrottle(ip netip.Addr) time.Duration {
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
	s := q.sensor(sensorKey{typ: quotaConnection, user: ip.String()}, now)
	ms := s.recordRate(1, limit, true, now)
	if ms <= 0 {
		return 0
	}
	s.recordRate(-1, 0, false, now)
	return time.Duration(min(ms, q.windows[quotaRequest].Size.Milliseconds())) * time.Millisecond
}

// enabled reports whether usage of type t is measured.
func (q *clientQuotas) enabled(t quotaType) bool {
	l := q.levels.Load()
	return l != nil && l.byType[t] != nil
}

// active reports whether any quota exists.
func (q *clientQuotas) active() bool { return q.levels.Load() != nil }

// resolve is the pair usage of (user, clientID) is counted under for type
// t, and the quota that applies to it (ok false: none).
func (l *quotaLevels) resolve(t quotaType, user, clientID string) (key sensorKey, limit float64, ok bool) {
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
func (l *quotaLevels) limit(t quotaType, user, clientID string) (float64, bool) {
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

// sensor returns the pair's sensor, creating it.
func (q *clientQuotas) sensor(key sensorKey, now time.Time) *quotaSensor {
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
		s = &quotaSensor{window: q.windows[key.typ]}
		q.sensors[key] = s
	}
	return s
}

// lookup resolves the pair and its sensor for type t; ok is false when
// the type is not measured.
func (q *clientQuotas) lookup(t quotaType, user, clientID string, now time.Time) (s *quotaSensor, limit float64, limited, ok bool) {
	l := q.levels.Load()
	if l == nil || l.byType[t] == nil {
		return nil, 0, false, false
	}
	key, limit, limited := l.resolve(t, user, clientID)
	return q.sensor(key, now), limit, limited, true
}

// record counts value for the client and returns the throttle time in
// milliseconds (0 when within its quota, or none applies).
// ClientQuotaManager.recordAndGetThrottleTimeMs; the request quota's
// throttle is at most one window (ClientRequestQuotaManager).
func (q *clientQuotas) record(t quotaType, user, clientID string, value float64) int32 {
	now := q.now()
	s, limit, limited, ok := q.lookup(t, user, clientID, now)
	if !ok {
		return 0
	}
	ms := s.recordRate(value, limit, limited, now)
	if t == quotaRequest {
		ms = min(ms, q.windows[quotaRequest].Size.Milliseconds())
	}
	return clampMillis(ms)
}

// unrecord takes back a value recorded for a response that was not sent
// (a throttled fetch answers empty).
func (q *clientQuotas) unrecord(t quotaType, user, clientID string, value float64) {
	now := q.now()
	if s, _, _, ok := q.lookup(t, user, clientID, now); ok {
		s.recordRate(-value, 0, false, now)
	}
}

// maxValueInWindow is the most that can be recorded at once without
// certain throttling: quota * (samples - 1) * window
// (ClientQuotaManager.getMaxValueInQuotaWindow); ok false when no quota
// applies.
func (q *clientQuotas) maxValueInWindow(t quotaType, user, clientID string) (float64, bool) {
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

// quotaSensor is one pair's usage of one quota type: Kafka's Rate over a
// SampledStat (WindowedSum), or its TokenBucket for controller
// mutations.
type quotaSensor struct {
	window QuotaWindow

	mu      sync.Mutex
	samples []rateSample
	current int
	// tokens and tokensAt are the token bucket (mutations).
	tokens   float64
	tokensAt int64
	lastMs   atomic.Int64
}

// rateSample is one of SampledStat's samples (milliseconds).
type rateSample struct {
	value     float64
	events    int64
	start     int64
	lastEvent int64
}

func (s *quotaSensor) lastUsed() time.Time { return time.UnixMilli(s.lastMs.Load()) }

// recordRate adds value at now and, when limited, returns the throttle
// time if the rate is then above limit (Sensor.record with checkQuotas,
// then QuotaUtils.throttleTime).
func (s *quotaSensor) recordRate(value, limit float64, limited bool, now time.Time) int64 {
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

func (s *quotaSensor) windowMs() int64 { return s.window.Size.Milliseconds() }

// recordLocked is SampledStat.record.
func (s *quotaSensor) recordLocked(value float64, now int64) {
	sm := s.currentLocked(now)
	if now-sm.start >= s.windowMs() {
		sm = s.advanceLocked(now)
	}
	sm.value += value
	sm.events++
	sm.lastEvent = now
}

func (s *quotaSensor) currentLocked(now int64) *rateSample {
	if len(s.samples) == 0 {
		s.samples = append(s.samples, rateSample{start: now, lastEvent: now})
	}
	return &s.samples[s.current]
}

// advanceLocked moves to the next sample, keeping samples+1 of them (one
// that overlaps the window's start).
func (s *quotaSensor) advanceLocked(now int64) *rateSample {
	s.current = (s.current + 1) % (s.window.Samples + 1)
	if s.current >= len(s.samples) {
		s.samples = append(s.samples, rateSample{start: now, lastEvent: now})
	} else {
		s.samples[s.current] = rateSample{start: now, lastEvent: now}
	}
	return &s.samples[s.current]
}

// purgeLocked resets the samples with no event within the window.
func (s *quotaSensor) purgeLocked(now int64) {
	expire := int64(s.window.Samples) * s.windowMs()
	for i := range s.samples {
		if now-s.samples[i].lastEvent >= expire {
			s.samples[i] = rateSample{start: now, lastEvent: now}
		}
	}
}

// rateLocked is Rate.measure: the samples' sum per second of the window.
func (s *quotaSensor) rateLocked(now int64) float64 {
	s.purgeLocked(now)
	var sum float64
	for _, sm := range s.samples {
		sum += sm.value
	}
	return sum / (float64(s.windowSizeLocked(now)) / 1000)
}

// windowSizeLocked is Rate.windowSize in milliseconds: the time since the
// oldest sample began, at least samples-1 whole windows.
func (s *quotaSensor) windowSizeLocked(now int64) int64 {
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
func (s *quotaSensor) refillLocked(limit float64, now int64) {
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
func (s *quotaSensor) recordMutations(permits, limit float64, strict bool, now time.Time) (throttleMs int64, refused bool) {
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

// followQuotas keeps the quota managers on the metadata image's quotas.
func (b *Broker) followQuotas() {
	if b.meta == nil {
		return
	}
	if img := b.meta.Image(); img != nil {
		b.quotas.update(img.ClientQuotas)
	}
	b.stopQuotas = b.meta.Subscribe(func(prev, next *metadata.Image) {
		// An image shares its quota map with the previous one unless a
		// quota record changed it.
		if prev == nil || reflect.ValueOf(prev.ClientQuotas).UnsafePointer() != reflect.ValueOf(next.ClientQuotas).UnsafePointer() {
			b.quotas.update(next.ClientQuotas)
		}
	})
}

// nanosToPercentage turns time spent on a request into its share of one
// thread's second (ClientRequestQuotaManager.NanosToPercentagePerSecond).
func nanosToPercentage(d time.Duration) float64 { return float64(d.Nanoseconds()) * 100 / 1e9 }

// requestQuotaExempt reports whether the request quota leaves the
// request alone: what brokers and controllers send each other (Kafka's
// cluster actions and the controller listener's APIs).
func (r *request) requestQuotaExempt() bool {
	if r.conn.listener.Controller {
		return true
	}
	a := apiFor(r.hdr.APIKey)
	return a != nil && a.quota.requestExempt
}

// requestQuota is what the client quotas measure of one request.
type requestQuota struct {
	// size is the request's frame length without its size prefix
	// (Kafka's request size, which the produce quota counts).
	size int
	// start is when the handler was called and localEnd when it
	// returned (conn.monotonic; start 0: not measured).
	start    int64
	localEnd atomic.Int64
	// bandwidthThrottle is the byte-rate quota's throttle time for the
	// request, decided by its handler (produce).
	bandwidthThrottle int32
}

// requestTime is how long the request's handler ran on the connection's
// goroutine (Kafka's request handler thread time): from dispatch until
// the handler returned, or until now while it still runs.
func (r *request) requestTime() time.Duration {
	rq := r.slot.quota
	if rq == nil || rq.start == 0 {
		return 0
	}
	end := rq.localEnd.Load()
	if end == 0 {
		end = r.conn.monotonic()
	}
	return time.Duration(max(end-rq.start, 0))
}

// requestThrottle records the request's handler time against the
// client's request quota and returns its throttle time (0 when exempt or
// within quota).
func (r *request) requestThrottle() int32 {
	q := r.conn.srv.quotas
	if q == nil || r.slot.quota == nil || r.slot.quota.start == 0 || r.requestQuotaExempt() {
		return 0
	}
	return q.record(quotaRequest, r.principal().Name, r.hdr.ClientID, nanosToPercentage(r.requestTime()))
}

// applyQuotas is the last step before a response is encoded: the
// throttle time is the largest of what the handler decided (bandwidth),
// what the response already carries (a controller's mutation throttle)
// and the request quota's; a throttled response says so and the
// connection is muted for that long (KIP-219: the answer goes out at
// once, the next request waits). resp is nil for an acks=0 produce,
// which only a bandwidth throttle can mute.
func (r *request) applyQuotas(resp kmsg.Response) {
	q := r.conn.srv.quotas
	if q == nil || !q.active() {
		return
	}
	var throttle int32
	if r.slot.quota != nil {
		throttle = r.slot.quota.bandwidthThrottle
	}
	if resp != nil {
		if tr, ok := resp.(kmsg.ThrottleResponse); ok {
			t, _ := tr.Throttle()
			throttle = max(throttle, t)
		}
		throttle = max(throttle, r.requestThrottle())
	}
	if throttle <= 0 {
		return
	}
	if st, ok := resp.(kmsg.SetThrottleResponse); ok {
		st.SetThrottle(throttle)
	}
	r.conn.mute(throttle)
}

// mutationQuota is one request's controller mutation quota
// (Strict/PermissiveControllerMutationQuota).
type mutationQuota struct {
	sensor *quotaSensor
	limit  float64
	strict bool
	now    func() time.Time

	mu         sync.Mutex
	throttleMs int64
	recordedAt time.Time
}

// Record implements metadata.MutationQuota.
func (m *mutationQuota) Record(permits int) bool {
	now := m.now()
	ms, refused := m.sensor.recordMutations(float64(permits), m.limit, m.strict, now)
	if ms > 0 {
		m.mu.Lock()
		m.throttleMs, m.recordedAt = ms, now
		m.mu.Unlock()
	}
	return !refused
}

// throttleTime is the throttle still due: the last one recorded, less the
// time since (the request may have waited for its commit meanwhile).
func (m *mutationQuota) throttleTime() int32 {
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

// newMutationQuota is the mutation quota of a request from (user,
// clientID) at version; nil when the request mutates nothing or no quota
// applies (Kafka's UnboundedControllerMutationQuota).
func (q *clientQuotas) newMutationQuota(key int16, version int16, user, clientID string) *mutationQuota {
	a := apiFor(key)
	if a == nil || !a.quota.mutates {
		return nil
	}
	now := q.now()
	s, limit, limited, ok := q.lookup(quotaMutation, user, clientID, now)
	if !ok || !limited {
		return nil
	}
	return &mutationQuota{sensor: s, limit: limit, strict: version >= a.quota.strictSince, now: q.now}
}

// withMutationQuota attaches the mutation quota of a request to ctx for
// the controller deciding it; the quota is nil when none applies.
func (q *clientQuotas) withMutationQuota(ctx context.Context, key, version int16, user, clientID string) (context.Context, *mutationQuota) {
	mq := q.newMutationQuota(key, version, user, clientID)
	if mq == nil {
		return ctx, nil
	}
	return metadata.WithMutationQuota(ctx, mq), mq
}

// applyMutationThrottle puts a mutation quota's throttle into the
// answer, unless it already carries a larger one (a remote controller's).
func applyMutationThrottle(resp kmsg.Response, mq *mutationQuota) {
	t := mq.throttleTime()
	if t == 0 {
		return
	}
	tr, ok := resp.(kmsg.ThrottleResponse)
	if !ok {
		return
	}
	if cur, _ := tr.Throttle(); cur < t {
		resp.(kmsg.SetThrottleResponse).SetThrottle(t)
	}
}
