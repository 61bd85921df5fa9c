// Command gregor is a Kafka-compatible broker.
//
//	gregor [server.properties] [--override key=value]...
//	gregor storage random-uuid | format | info [flags]
//
// With no arguments it runs a combined broker and controller (node.id=1)
// on localhost:9092 (clients) and localhost:9093 (controller) with data in
// ./gregor-data, formatted automatically on first start.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
)

const usage = `Usage:
  gregor [server.properties] [--override key=value]...
      Start a node. Without a properties file Gregor uses its embedded
      defaults: one combined broker+controller on localhost:9092/9093 with
      data in ./gregor-data, formatted on first start.
  gregor storage random-uuid
  gregor storage format --config FILE [--cluster-id ID] [--standalone |
      --initial-controllers LIST | --no-initial-controllers] [--ignore-formatted]
      [--release-version V] [--feature name=level]... [--override key=value]...
  gregor storage info --config FILE
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "storage":
			return storageCommand(args[1:], stdout, stderr)
		case "-h", "--help", "help":
			fmt.Fprint(stdout, usage)
			return 0
		case "--version", "version":
			fmt.Fprintln(stdout, "gregor", version)
			return 0
		}
	}
	file, overrides, err := parseServerArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "gregor: %v\n\n%s", err, usage)
		return 2
	}
	settings, err := loadSettings(file, overrides, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "gregor: %v\n", err)
		return 1
	}
	ballast := gcBallast(gcBallastBytes)
	defer runtime.KeepAlive(ballast)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, settings, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "gregor: %v\n", err)
		return 1
	}
	return 0
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// parseServerArgs splits "[file] [--override k=v]..." (also accepting
// --override=k=v), the way kafka-server-start.sh takes them.
func parseServerArgs(args []string) (file string, overrides []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--override":
			if i+1 >= len(args) {
				return "", nil, fmt.Errorf("--override needs key=value")
			}
			i++
			overrides = append(overrides, args[i])
		case strings.HasPrefix(a, "--override="):
			overrides = append(overrides, strings.TrimPrefix(a, "--override="))
		case strings.HasPrefix(a, "-"):
			return "", nil, fmt.Errorf("unknown flag %s", a)
		case file == "":
			file = a
		default:
			return "", nil, fmt.Errorf("unexpected argument %q", a)
		}
	}
	for _, o := range overrides {
		if !strings.Contains(o, "=") {
			return "", nil, fmt.Errorf("--override %q is not key=value", o)
		}
	}
	return file, overrides, nil
}
