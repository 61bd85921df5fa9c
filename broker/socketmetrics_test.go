package broker

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/metrics"
	"github.com/gregorbroker/gregor/sasl"
)

// TestSocketServerMetricsCountConnectionsAndLogins: one login that fails
// and one that succeeds on the SASL listener show in its
// socket-server-metrics.
func TestSocketServerMetricsCountConnectionsAndLogins(t *testing.T) {
	n, addr := startSASLNode(t, 0, 0, nil)
	r := metrics.NewRegistry()
	n.b.RegisterMetrics(r, true)

	bad := dialRaw(t, addr)
	bad.handshake(1, sasl.Plain)
	bad.authenticate(1, "\x00alice\x00wrong")
	bad.expectClosed()
	good := dialRaw(t, addr)
	good.handshake(1, sasl.Plain)
	if resp := good.authenticate(2, "\x00alice\x00alice-secret"); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %+v", resp)
	}

	want := []string{
		`kafka_server_socket_server_metrics_failed_authentication_total{listener="SASL_PLAINTEXT",networkProcessor="0"} 1`,
		`kafka_server_socket_server_metrics_successful_authentication_total{listener="SASL_PLAINTEXT",networkProcessor="0"} 1`,
		`kafka_server_socket_server_metrics_connection_creation_total{listener="SASL_PLAINTEXT",networkProcessor="0"} 2`,
		`kafka_server_socket_server_metrics_connection_count{listener="SASL_PLAINTEXT",networkProcessor="0"} 1`,
		`kafka_server_socket_server_metrics_connection_close_total{listener="SASL_PLAINTEXT",networkProcessor="0"} 1`,
	}
	var text string
	for range 100 { // the failed connection's close is counted as its goroutines end
		var b bytes.Buffer
		if err := r.Write(&b, false); err != nil {
			t.Fatal(err)
		}
		text = b.String()
		missing := false
		for _, w := range want {
			missing = missing || !strings.Contains(text, w+"\n")
		}
		if !missing {
			return
		}
		waitABit()
	}
	for _, w := range want {
		if !strings.Contains(text, w+"\n") {
			t.Errorf("no %s in\n%s", w, grepLines(text, "socket_server"))
		}
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func waitABit() { time.Sleep(20 * time.Millisecond) }
