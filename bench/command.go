package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/integration"
)

// Command is what every benchmark command (bench/cmd/...) shares around
// its workloads: the repository root, a logger, a context that ends on
// SIGINT or SIGTERM or after two hours, the command line the report
// quotes, and the report's writing and verdict.
type Command struct {
	Name string
	Root string
	Log  *slog.Logger
	Ctx  context.Context
	// Line is the command line as a reader would type it again.
	Line string
	// commit is the tree's commit when the command started: the binaries
	// it measures are built from it, whatever is committed meanwhile.
	commit string
	stop   func()
}

// StartCommand begins the benchmark command name (its folder under
// bench/cmd) of rounds rounds, after the flags are parsed.
func StartCommand(name string, rounds int) (*Command, error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	root, err := integration.FindRepoRoot()
	if err != nil {
		return nil, fmt.Errorf("finding repository: %w", err)
	}
	if rounds < 3 {
		log.Warn("fewer than 3 rounds: medians will be weak", "rounds", rounds)
	}
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Hour)
	return &Command{
		Name: name, Root: root, Log: log, Ctx: ctx, commit: integration.GitCommit(ctx, root),
		Line: strings.TrimSpace("go run ./bench/cmd/" + name + " " + strings.Join(os.Args[1:], " ")),
		stop: func() { cancel(); stopSignals() },
	}, nil
}

// Close releases the command's context.
func (c *Command) Close() { c.stop() }

// PinnedCPUs are the CPUs for the broker and for the load generators when
// taskset can keep them apart ("" each when it cannot).
func PinnedCPUs() (broker, load string) {
	if _, err := exec.LookPath("taskset"); err == nil {
		return "0", "1"
	}
	return "", ""
}

// Finish writes the report (update turns RESULTS.md's old content into
// the new, given the commit measured), prints where it went and how many
// target-rounds failed, and returns the exit code: 1 when the run or a
// round failed or the report could not be written.
func (c *Command) Finish(out string, runErr error, rounds []Round, update func(old []byte, commit string) []byte) int {
	commit := c.commit
	if now := integration.GitCommit(c.Ctx, c.Root); now != commit {
		commit += " (the tree measured; " + now + " when the report was written)"
	}
	path, err := UpdateResults(c.Root, out, func(old []byte) []byte { return update(old, commit) })
	if err != nil {
		c.Log.Error(c.Name, "err", err)
		return 1
	}
	fmt.Println("wrote", path)
	failed := FailedRounds(rounds)
	fmt.Printf("%s: %d target-rounds, %d with failures\n", c.Name, len(rounds), failed)
	if runErr != nil || failed > 0 {
		return 1
	}
	return 0
}
