package quota

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metrics"
)

// TestQuotaMetricsOfLimitedAndThrottledPairs: a pair a quota applies to
// shows its rate and, once throttled, its mean throttle; a pair without a
// quota shows nothing, even while its type is measured, unless it was
// throttled; the user or client id a pair is counted without is no label.
func TestQuotaMetricsOfLimitedAndThrottledPairs(t *testing.T) {
	clock := time.Unix(1000, 0)
	q := newTestQuotas(&clock, map[metadata.QuotaEntity]map[string]float64{
		{ClientID: metadata.QuotaNamed("c")}: {metadata.QuotaProducerByteRate: 1000},
		{User: metadata.QuotaNamed("alice")}: {metadata.QuotaRequestPercentage: 50, metadata.QuotaControllerMutationRate: 2},
	})
	r := metrics.NewRegistry()
	q.RegisterMetrics(r)
	scrape := func() string {
		var b bytes.Buffer
		if err := r.Write(&b, false); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}

	// 11000 bytes over the 10 s a fresh window counts: 1100 B/s, 1000
	// ms of throttle.
	ms := q.Record(Produce, "u", "c", 11000)
	q.Throttled(Produce, "u", "c", ms)
	q.Record(Produce, "u", "other", 5) // no quota applies: not reported
	q.RecordRequestTime("alice", "x", 100*time.Millisecond)
	mq := q.NewMutation("alice", "x", true)
	mq.Record(5) // a burst of 2/s * 11 s = 22 tokens: 17 left
	text := scrape()
	for _, w := range []string{
		`kafka_server_quota_byte_rate{resource="Produce",clientId="c"} 1100`,
		`kafka_server_quota_throttle_time{resource="Produce",clientId="c"} 1000`,
		`kafka_server_quota_request_time{resource="Request",user="alice"} 1`,
		`kafka_server_quota_throttle_time{resource="Request",user="alice"} NaN`,
		`kafka_server_quota_tokens{resource="ControllerMutation",user="alice"} 17`,
	} {
		if !strings.Contains(text, w+"\n") {
			t.Errorf("no %s in\n%s", w, text)
		}
	}
	if ms != 1000 || strings.Contains(text, `"other"`) {
		t.Errorf("throttle %d; a pair without a quota is reported:\n%s", ms, text)
	}

	// Once throttled, a pair without a quota is reported (its quota went
	// away since), and an hour unused forgets every pair.
	q.Update(map[metadata.QuotaEntity]map[string]float64{
		{ClientID: metadata.QuotaNamed("d")}: {metadata.QuotaProducerByteRate: 1000},
	})
	q.Throttled(Produce, "u", "c", 40)
	if text := scrape(); !strings.Contains(text, `kafka_server_quota_throttle_time{resource="Produce",clientId="c"} 520`+"\n") {
		t.Errorf("a throttled pair whose quota went:\n%s", text)
	}
	clock = clock.Add(2 * time.Hour)
	q.Record(Produce, "u", "d", 1) // a new pair sweeps the idle ones
	if text := scrape(); strings.Contains(text, `clientId="c"`) {
		t.Errorf("an idle pair is still reported:\n%s", text)
	}
}
