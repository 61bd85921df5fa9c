package telemetry

import (
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
)

// FuzzDecodePayload: no payload panics the decoder or the store, and what
// decodes shows on /metrics under the prefix.
func FuzzDecodePayload(f *testing.F) {
	f.Add(int8(0), payload(f, 0, gauge("a.b", 1), counter("c", 2, "k", "v"), histogram("h", []float64{1}, []uint64{1, 1}, 2)))
	f.Add(int8(4), payload(f, protocol.CodecZstd, gauge("z", 1)))
	f.Add(int8(1), []byte{0x1f, 0x8b})
	f.Add(int8(0), []byte{0x0a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, codec int8, data []byte) {
		if !protocol.Codec(codec).Valid() {
			return
		}
		points, err := decodePayload(protocol.Codec(codec), data, 1<<16)
		if err != nil {
			return
		}
		s := newStore(3)
		now := time.Unix(0, 0)
		s.record("x", points, now, time.Minute)
		s.record("x", points, now, time.Minute)
		m := New(Options{Now: func() time.Time { return now }})
		m.store = s
		text := scrape(t, m)
		for _, line := range strings.Split(text, "\n") {
			if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "gregor_client_") && !strings.HasPrefix(line, "kafka_server_client_metrics_") {
				t.Fatalf("a line outside the families: %q", line)
			}
		}
	})
}

// FuzzTelemetryRequests: any sequence of gets and pushes with any ids,
// subscription ids, codecs and payloads is answered with one of Kafka's
// codes and never panics.
func FuzzTelemetryRequests(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5}, []byte{})
	f.Fuzz(func(t *testing.T, ops []byte, data []byte) {
		c := newClock()
		m := New(Options{MaxBytes: 128, MaxClients: 2, Now: c.now})
		m.SetSubscriptions(map[string]map[string]string{"all": {"metrics": "*", "interval.ms": "100"}})
		var ids []protocol.UUID
		var subs []int32
		for i, op := range ops {
			c.advance(time.Duration(op) * time.Millisecond)
			pick := func() (protocol.UUID, int32) {
				if len(ids) == 0 {
					return protocol.UUID{byte(op)}, int32(op)
				}
				j := int(op) % len(ids)
				return ids[j], subs[j] + int32(op%2)
			}
			switch op % 3 {
			case 0:
				r := get(m, Client{Conn: int(op % 4)}, protocol.UUID{})
				if r.ErrorCode == 0 {
					ids, subs = append(ids, r.ClientInstanceID), append(subs, r.SubscriptionID)
				}
			case 1:
				id, _ := pick()
				get(m, Client{}, id)
			case 2:
				id, sub := pick()
				end := min(len(data), i*7)
				push(m, Client{Conn: int(op % 4)}, id, sub, protocol.Codec(op%8), data[:end], op%5 == 0)
			}
			if op%11 == 0 {
				m.ConnectionClosed(int(op % 4))
			}
		}
		scrape(t, m)
	})
}
