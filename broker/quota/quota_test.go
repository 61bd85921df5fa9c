package quota

import (
	"testing"
	"time"

	"github.com/gregorbroker/gregor/metadata"
)

// newTestQuotas is a Manager of quotas whose clock reads *clock, which
// the test moves.
func newTestQuotas(clock *time.Time, quotas map[metadata.QuotaEntity]map[string]float64) *Manager {
	q := New(DefaultOptions(), func() time.Time { return *clock })
	q.Update(quotas)
	return q
}

// TestQuotaPrecedence: the eight levels, most specific first, and the pair
// usage is counted under.
func TestQuotaPrecedence(t *testing.T) {
	u, c := metadata.QuotaNamed("alice"), metadata.QuotaNamed("app")
	du, dc := metadata.QuotaDefault(), metadata.QuotaDefault()
	levels := []metadata.QuotaEntity{
		{User: u, ClientID: c},
		{User: u, ClientID: dc},
		{User: u},
		{User: du, ClientID: c},
		{User: du, ClientID: dc},
		{User: du},
		{ClientID: c},
		{ClientID: dc},
	}
	wantKey := []sensorKey{
		{Produce, "alice", "app"},
		{Produce, "alice", "app"},
		{Produce, "alice", ""},
		{Produce, "alice", "app"},
		{Produce, "alice", "app"},
		{Produce, "alice", ""},
		{Produce, "", "app"},
		{Produce, "", "app"},
	}
	// With levels i.. configured, level i decides.
	for i := range levels {
		quotas := map[metadata.QuotaEntity]map[string]float64{}
		for j := i; j < len(levels); j++ {
			quotas[levels[j]] = map[string]float64{metadata.QuotaProducerByteRate: float64(100 * (j + 1))}
		}
		clock := time.Unix(1000, 0)
		q := newTestQuotas(&clock, quotas)
		key, limit, ok := q.levels.Load().resolve(Produce, "alice", "app")
		if !ok || limit != float64(100*(i+1)) || key != wantKey[i] {
			t.Errorf("from level %d: key %+v limit %v ok %v, want %+v %v", i+1, key, limit, ok, wantKey[i], 100*(i+1))
		}
		// Another user and client only get the defaults.
		key, limit, ok = q.levels.Load().resolve(Produce, "bob", "other")
		switch {
		case i <= 4:
			if !ok || limit != 500 || key != (sensorKey{Produce, "bob", "other"}) {
				t.Errorf("from level %d, bob/other: %+v %v %v", i+1, key, limit, ok)
			}
		case i == 5:
			if !ok || limit != 600 || key != (sensorKey{Produce, "bob", ""}) {
				t.Errorf("from level %d, bob/other: %+v %v %v", i+1, key, limit, ok)
			}
		default:
			if !ok || limit != 800 || key != (sensorKey{Produce, "", "other"}) {
				t.Errorf("from level %d, bob/other: %+v %v %v", i+1, key, limit, ok)
			}
		}
	}
	// A quota of another type does not apply; none at all measures
	// nothing.
	var clock time.Time
	q := newTestQuotas(&clock, map[metadata.QuotaEntity]map[string]float64{{ClientID: c}: {metadata.QuotaConsumerByteRate: 5}})
	if q.Enabled(Produce) || !q.Enabled(Fetch) {
		t.Fatal("enabled types")
	}
	if _, _, ok := q.levels.Load().resolve(Fetch, "alice", "other"); ok {
		t.Fatal("a client-id quota applied to another client id")
	}
	q.Update(nil)
	if q.Active() {
		t.Fatal("quotas active with none configured")
	}
}

// TestQuotaEmptyClientID: Kafka's quirk, kept: with only a
// <user, default client> quota, a client without a client id is counted
// under (user, "") and no quota applies to that pair.
func TestQuotaEmptyClientID(t *testing.T) {
	var clock time.Time
	q := newTestQuotas(&clock, map[metadata.QuotaEntity]map[string]float64{
		{User: metadata.QuotaNamed("alice"), ClientID: metadata.QuotaDefault()}: {metadata.QuotaProducerByteRate: 10},
	})
	if _, _, ok := q.levels.Load().resolve(Produce, "alice", ""); ok {
		t.Fatal("quota applied to an empty client id")
	}
}

// TestRateThrottle checks the Rate arithmetic against hand-computed
// values: 11 samples of 1 s, a quota of 1000 B/s.
func TestRateThrottle(t *testing.T) {
	clock := time.Unix(1000, 0)
	q := newTestQuotas(&clock, map[metadata.QuotaEntity]map[string]float64{
		{ClientID: metadata.QuotaNamed("c")}: {metadata.QuotaProducerByteRate: 1000},
	})
	// 10000 bytes over a window of at least 10 s: 1000 B/s, at the
	// quota, not above it.
	if ms := q.Record(Produce, "u", "c", 10000); ms != 0 {
		t.Fatalf("at the quota: throttle %d", ms)
	}
	// 1 byte more: (10001/10 - 1000)/1000 * 10000 ms = 1 ms.
	if ms := q.Record(Produce, "u", "c", 1); ms != 1 {
		t.Fatalf("just above: throttle %d, want 1", ms)
	}
	// 5000 more: rate 15001/10 s = 1500.1; (1500.1-1000)/1000*10000 = 5001.
	if ms := q.Record(Produce, "u", "c", 5000); ms != 5001 {
		t.Fatalf("burst: throttle %d, want 5001", ms)
	}
	// 10.5 s later the window spans 10.5 s: 15001 / 10.5 = 1428.67;
	// (1428.67-1000)/1000 * 10500 = 4501.
	clock = clock.Add(10500 * time.Millisecond)
	if ms := q.Record(Produce, "u", "c", 0); ms != 4501 {
		t.Fatalf("later: throttle %d, want 4501", ms)
	}
	// 11 s after the last sample everything has expired.
	clock = clock.Add(11 * time.Second)
	if ms := q.Record(Produce, "u", "c", 100); ms != 0 {
		t.Fatalf("after expiry: throttle %d", ms)
	}
	// Unrecording takes a value back.
	q.Record(Produce, "u", "c", 20000)
	q.Unrecord(Produce, "u", "c", 20000)
	if ms := q.Record(Produce, "u", "c", 0); ms != 0 {
		t.Fatalf("after unrecord: throttle %d", ms)
	}
	// The request quota's throttle is at most one window.
	q.Update(map[metadata.QuotaEntity]map[string]float64{{ClientID: metadata.QuotaNamed("c")}: {metadata.QuotaRequestPercentage: 1}})
	if ms := q.Record(Request, "u", "c", 1000); ms != 1000 {
		t.Fatalf("request throttle %d, want the 1000 ms cap", ms)
	}
	// The fetch cap: quota * (samples-1) * window.
	q.Update(map[metadata.QuotaEntity]map[string]float64{{ClientID: metadata.QuotaNamed("c")}: {metadata.QuotaConsumerByteRate: 2000}})
	if most, ok := q.MaxValueInWindow(Fetch, "u", "c"); !ok || most != 20000 {
		t.Fatalf("max in window %v %v", most, ok)
	}
}

// TestMutationTokenBucket: a burst of quota * samples * window permits,
// refilled at the quota; strict refuses once below zero, permissive only
// throttles. (Which requests get a mutation quota, and which of them a
// strict one, is the broker's: TestMutationQuotaByAPIVersion.)
func TestMutationTokenBucket(t *testing.T) {
	clock := time.Unix(1000, 0)
	q := newTestQuotas(&clock, map[metadata.QuotaEntity]map[string]float64{
		{ClientID: metadata.QuotaNamed("c")}: {metadata.QuotaControllerMutationRate: 2},
	})
	strict := q.NewMutation("u", "c", true) // CreateTopics v6
	if strict == nil || !strict.strict {
		t.Fatal("no strict quota for CreateTopics v6")
	}
	// The bucket holds 2 * 11 * 1 = 22 permits.
	if !strict.Record(22) || strict.ThrottleTime() != 0 {
		t.Fatal("the burst was refused")
	}
	// At zero, more is still taken (the check comes first), going to -5:
	// 5/2 s to refill.
	if !strict.Record(5) {
		t.Fatal("refused at zero tokens")
	}
	if strict.Record(1) {
		t.Fatal("taken below zero")
	}
	if got := strict.ThrottleTime(); got != 2500 {
		t.Fatalf("strict throttle %d, want 2500", got)
	}
	clock = clock.Add(time.Second)
	if got := strict.ThrottleTime(); got != 1500 {
		t.Fatalf("throttle a second later %d, want 1500", got)
	}
	// Permissive (CreateTopics v5) takes everything and throttles.
	perm := q.NewMutation("u", "c", false) // CreateTopics v5
	if perm.strict || !perm.Record(10) {
		t.Fatal("permissive quota refused")
	}
	// -5 + 2 (refilled) - 10 = -13: 6.5 s.
	if got := perm.ThrottleTime(); got != 6500 {
		t.Fatalf("permissive throttle %d, want 6500", got)
	}
	if q.NewMutation("u", "other", true) != nil {
		t.Fatal("a client without a quota got one")
	}
}

// A connection creation rate takes a burst of the limit times the
// window's span at once, then asks the acceptor to wait in proportion to
// the excess, never more than one sample's length.
func TestConnectionRateThrottle(t *testing.T) {
	r := NewConnectionRate(10, Window{Samples: 11, Size: time.Second})
	now := time.UnixMilli(1_700_000_000_000)
	for i := range 100 {
		if d := r.Throttle(now); d != 0 {
			t.Fatalf("connection %d of the burst waits %s", i+1, d)
		}
	}
	// 101 over the 10 s window: 10.1 a second, 1% over.
	if d := r.Throttle(now); d != 100*time.Millisecond {
		t.Fatalf("the 101st waits %s, want 100ms", d)
	}
	for range 98 {
		r.Throttle(now)
	}
	if d := r.Throttle(now); d != time.Second {
		t.Fatalf("the 200th waits %s, want the 1s bound", d)
	}
}
