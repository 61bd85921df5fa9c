package lifecycle

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration/node"
)

// kafka-configs --entity-type broker-loggers describes the node's loggers,
// lowers one component's level at run time (its DEBUG lines then appear in
// the node's output, no other component's do) and deletes it again (they
// stop), with the stock tool.
func TestBrokerLoggersWithKafkaConfigs(t *testing.T) {
	n := node.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := node.StockToolMain(ctx, t)
	configs := func(args ...string) string {
		t.Helper()
		return run("kafka.admin.ConfigCommand", append([]string{"--bootstrap-server", n.Addr(), "--entity-type", "broker-loggers", "--entity-name", "1"}, args...)...)
	}

	out := configs("--describe")
	for _, want := range []string{"Dynamic configs for broker-logger 1 are:", "root=INFO sensitive=false synonyms={}", "request=INFO", "replica=INFO", "controller=INFO"} {
		if !strings.Contains(out, want) {
			t.Fatalf("--describe does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(n.Output(), "msg=request") {
		t.Fatalf("requests logged at INFO:\n%s", n.Output())
	}

	out = configs("--alter", "--add-config", "request=DEBUG")
	if !strings.Contains(out, "Completed updating config for broker-logger 1.") {
		t.Fatalf("--alter: %s", out)
	}
	mark := len(n.Output())
	out = configs("--describe")
	if !strings.Contains(out, "request=DEBUG") || !strings.Contains(out, "root=INFO") || !strings.Contains(out, "replica=INFO") {
		t.Fatalf("--describe after --alter:\n%s", out)
	}
	after := n.Output()[mark:]
	if !strings.Contains(after, "level=DEBUG msg=request component=request api=DescribeConfigs") {
		t.Fatalf("the describe was not logged at DEBUG:\n%s", after)
	}
	for _, line := range strings.Split(after, "\n") {
		if strings.Contains(line, "level=DEBUG") && !strings.Contains(line, "component=request") {
			t.Errorf("a DEBUG line of another logger: %s", line)
		}
	}

	out = configs("--alter", "--delete-config", "request")
	if !strings.Contains(out, "Completed updating config for broker-logger 1.") {
		t.Fatalf("--alter --delete-config: %s", out)
	}
	mark = len(n.Output())
	out = configs("--describe")
	if !strings.Contains(out, "request=INFO") {
		t.Fatalf("--describe after --delete-config:\n%s", out)
	}
	if after := n.Output()[mark:]; strings.Contains(after, "msg=request") {
		t.Fatalf("requests still logged after --delete-config:\n%s", after)
	}
	// The node said what changed, at WARN as Kafka does.
	for _, want := range []string{"Updated the log level of request to DEBUG", "Unset the log level of request"} {
		if !strings.Contains(n.Output(), want) {
			t.Errorf("the node did not log %q", want)
		}
	}
}
