package network

// The client quotas around a request: what broker/quota measures of it
// (its size and its handler's time, in its slot), which requests the
// request quota leaves alone, the throttle its answer carries and the
// muting of its connection (KIP-219). The quotas themselves are
// broker/quota's.

import (
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/broker/quota"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// QuotaExempt reports whether the request quota leaves the request
// alone: what brokers and controllers send each other (Kafka's cluster
// actions, Handler.QuotaExempt, and the controller listener's APIs).
func (r *Request) QuotaExempt() bool {
	if r.conn.listener.Controller {
		return true
	}
	h := r.conn.srv.handlers[r.Header.APIKey]
	return h != nil && h.QuotaExempt
}

// requestQuota is what the client quotas measure of one request.
type requestQuota struct {
	// size is the request's frame length without its size prefix
	// (Kafka's request size, which the produce quota counts).
	size int
	// start is when the handler was called and localEnd when it
	// returned (Conn.monotonic; start 0: not measured).
	start    int64
	localEnd atomic.Int64
	// bandwidthThrottle is the byte-rate quota's throttle time for the
	// request, decided by its handler (produce), and bandwidthType that
	// quota's type.
	bandwidthThrottle int32
	bandwidthType     quota.Type
}

// requestTime is how long the request's handler ran on the connection's
// goroutine (Kafka's request handler thread time): from dispatch until
// the handler returned, or until now while it still runs.
func (r *Request) requestTime() time.Duration {
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

// RequestThrottle records the request's handler time against the
// client's request quota and returns its throttle time (0 when exempt or
// within quota).
func (r *Request) RequestThrottle() int32 {
	q := r.conn.srv.quotas
	if q == nil || r.slot.quota == nil || r.slot.quota.start == 0 || r.QuotaExempt() {
		return 0
	}
	return q.RecordRequestTime(r.Principal().Name, r.Header.ClientID, r.requestTime())
}

// RecordSize counts the request's size (its frame without the size
// prefix) against the client's quota of type t, while t is measured, and
// makes the throttle its answer's bandwidth throttle: every produce
// counts, refused or not (Kafka records the request's size before it
// answers).
func (r *Request) RecordSize(t quota.Type) {
	q := r.conn.srv.quotas
	if rq := r.slot.quota; rq != nil && q.Enabled(t) {
		rq.bandwidthThrottle, rq.bandwidthType = q.Record(t, r.Principal().Name, r.Header.ClientID, float64(rq.size)), t
	}
}

// applyQuotas is the last step before a response is encoded: the
// throttle time is the largest of what the handler decided (bandwidth),
// what the response already carries (a controller's mutation throttle)
// and the request quota's; a throttled response says so and the
// connection is muted for that long (KIP-219: the answer goes out at
// once, the next request waits). resp is nil for an acks=0 produce,
// which only a bandwidth throttle can mute.
func (r *Request) applyQuotas(resp kmsg.Response) {
	q := r.conn.srv.quotas
	if q == nil || !q.Active() {
		return
	}
	var throttle, bandwidth, request int32
	bandwidthType := quota.Produce
	if r.slot.quota != nil {
		bandwidth, bandwidthType = r.slot.quota.bandwidthThrottle, r.slot.quota.bandwidthType
		throttle = bandwidth
	}
	if resp != nil {
		if tr, ok := resp.(kmsg.ThrottleResponse); ok {
			t, _ := tr.Throttle()
			throttle = max(throttle, t)
		}
		request = r.RequestThrottle()
		throttle = max(throttle, request)
	}
	if throttle <= 0 {
		return
	}
	// The throttle-time metric of the quota that throttled, the larger of
	// the two, as Kafka's produce handler picks it; a controller
	// mutation's throttle is counted where it is applied
	// (quota.Mutation.ApplyThrottle).
	q.ThrottledByLonger(bandwidthType, r.Principal().Name, r.Header.ClientID, bandwidth, request)
	if st, ok := resp.(kmsg.SetThrottleResponse); ok {
		st.SetThrottle(throttle)
	}
	r.conn.mute(throttle)
}

// Mute keeps the request's connection from handling another request for
// ms milliseconds (a throttled client; a longer throttle already running
// stands).
func (r *Request) Mute(ms int32) { r.conn.mute(ms) }
