package node

import (
	"context"
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
		cmd, err := tools.JavaCmd(ctx, integration.SetKafka, "org.apache.kafka.tools."+mainClass, args...)
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
