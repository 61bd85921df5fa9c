package node

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration"
)

// StockTool returns a runner of Apache Kafka 4.3.1's tools (by main class
// under org.apache.kafka.tools) that fails the test when one fails and
// returns its standard output; it skips the test when there is no JRE or
// the jars cannot be fetched.
func StockTool(ctx context.Context, t testing.TB) func(mainClass string, args ...string) string {
	t.Helper()
	run := StockToolMain(ctx, t)
	return func(mainClass string, args ...string) string {
		t.Helper()
		return run("org.apache.kafka.tools."+mainClass, args...)
	}
}

// StockToolMain is StockTool for tools named by their whole main class,
// such as kafka-configs' kafka.admin.ConfigCommand.
func StockToolMain(ctx context.Context, t testing.TB) func(mainClass string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("java not found: the stock tools need a JRE")
	}
	root, err := integration.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tools := integration.NewTools(root)
	if _, err := tools.MavenLibs(ctx, integration.SetKafka); err != nil {
		t.Skipf("the Kafka %s jars are not available: %v", integration.KafkaVersion, err)
	}
	return func(mainClass string, args ...string) string {
		t.Helper()
		cmd, err := tools.JavaCmd(ctx, integration.SetKafka, mainClass, args...)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Timeout = time.Minute
		out, err := integration.Run(ctx, cmd)
		t.Logf("%s %s:\n%s%s", mainClass, strings.Join(args, " "), out.Stdout, out.Stderr)
		if err != nil || out.ExitCode != 0 {
			t.Fatalf("%s %s: exit %d, %v", mainClass, strings.Join(args, " "), out.ExitCode, err)
		}
		return out.Stdout
	}
}

// StartSingle starts a fresh single node of flavor ("gregor" or "kafka")
// with the listeners and properties of spec (integration.StartNode), in a
// directory of the test's, stopped when the test ends. A kafka node needs
// a JRE and the Kafka jars; without them the test is skipped.
func StartSingle(ctx context.Context, t testing.TB, flavor string, spec integration.NodeSpec) *integration.SingleNode {
	t.Helper()
	root, err := integration.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tools := integration.NewTools(root)
	if flavor == "kafka" {
		if _, err := exec.LookPath("java"); err != nil {
			t.Skip("java not found: a Kafka node needs a JRE")
		}
		if _, err := tools.MavenLibs(ctx, integration.SetKafka); err != nil {
			t.Skipf("the Kafka %s jars are not available: %v", integration.KafkaVersion, err)
		}
	}
	n, err := integration.StartNode(ctx, tools, flavor, t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Logf("stopping the %s node: %v", flavor, err)
		}
	})
	return n
}

// Flavor is the flavor of node a test that runs against either one should
// start: $GREGOR_TEST_FLAVOR ("gregor" or "kafka"), gregor by default.
func Flavor() string {
	if f := os.Getenv("GREGOR_TEST_FLAVOR"); f != "" {
		return f
	}
	return "gregor"
}
