// Command compat runs the compatibility scenarios against one target and
// merges that target's column into integration/COMPAT.md.
//
//	go run ./integration/cmd/compat -target kafka
//	go run ./integration/cmd/compat -target gregor -required   # what `make test` runs
//	go run ./integration/cmd/compat -target external -bootstrap host:port
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/integration"
)

func main() {
	os.Exit(run())
}

func run() int {
	target := flag.String("target", envOr("TARGET", "gregor"), "gregor, kafka, kafka-cluster, gregor-cluster, kafka-cluster-split, gregor-cluster-split or external")
	bootstrap := flag.String("bootstrap", os.Getenv("BOOTSTRAP"), "host:port of the external target")
	required := flag.Bool("required", false, "run only the scenarios listed in integration/REQUIRED and do not touch COMPAT.md")
	only := flag.String("run", envOr("SCENARIOS", ""), "comma-separated scenario names to run (default all); the report is not written")
	list := flag.Bool("list", false, "list scenarios and exit")
	verbose := flag.Bool("v", false, "log every command")
	add := flag.Bool("add", false, "with -run: merge the results into the target's existing column of COMPAT.md (for scenarios written after its full run)")
	total := flag.Duration("timeout", 90*time.Minute, "bound on the whole run")
	flag.Parse()

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	all := integration.Scenarios()
	if *list {
		for _, s := range all {
			fmt.Printf("%-40s %s\n", s.Name, s.Doc)
		}
		return 0
	}
	root, err := integration.FindRepoRoot()
	if err != nil {
		log.Error("finding repository", "err", err)
		return 2
	}

	scenarios := all
	writeReport := true
	switch {
	case *required:
		names, err := integration.ReadNameList(filepath.Join(root, "integration", "REQUIRED"))
		if err != nil {
			log.Error("reading REQUIRED", "err", err)
			return 2
		}
		if scenarios, err = integration.Select(all, names); err != nil {
			log.Error("REQUIRED names a scenario that does not exist", "err", err)
			return 2
		}
		writeReport = false
	case *only != "":
		if scenarios, err = integration.Select(all, strings.Split(*only, ",")); err != nil {
			log.Error("selecting scenarios", "err", err)
			return 2
		}
		writeReport = false
	}
	if *add && (*only == "" || *required) {
		log.Error("-add merges the scenarios named by -run into an existing column; give -run and not -required")
		return 2
	}
	if len(scenarios) == 0 {
		// Getting here still proves the harness compiles and that
		// REQUIRED names only real scenarios.
		fmt.Println("compat: no scenarios selected (integration/REQUIRED lists none yet)")
		return 0
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *total)
	defer cancel()

	tools := integration.NewTools(root)
	workDir := filepath.Join(root, "integration", ".work", *target)
	spareDir := workDir + "-spare"
	if err := integration.PrepareWorkDir(workDir, spareDir); err != nil {
		log.Error("preparing the work dir", "err", err)
		return 2
	}
	tgt, err := integration.NewTarget(*target, tools, integration.TargetOptions{WorkDir: workDir, Bootstrap: *bootstrap})
	if err != nil {
		log.Error("target", "err", err)
		return 2
	}
	defer func() {
		if err := tgt.Stop(); err != nil {
			log.Warn("stopping target", "err", err)
		}
	}()

	// A spare of the same kind takes shared-target scenarios once the
	// OwnNodes lane is done (Runner.Spare); an external target has none.
	var spare func() (integration.Target, error)
	if *target != "external" {
		spare = func() (integration.Target, error) {
			// PrepareWorkDir emptied it.
			if err := os.MkdirAll(spareDir, 0o755); err != nil {
				return nil, err
			}
			return integration.NewTarget(*target, tools, integration.TargetOptions{WorkDir: spareDir})
		}
	}

	started := time.Now()
	commit := integration.GitCommit(ctx, root) // before the run: the tree may change while it runs
	runner := &integration.Runner{Target: tgt, Spare: spare, Tools: tools, WorkDir: workDir, Log: log,
		Report: func(r integration.Result) {
			line := fmt.Sprintf("%-4s %-40s %6.1fs", strings.ToUpper(string(r.Status)), r.Scenario, r.Elapsed.Seconds())
			if r.Reason != "" {
				line += "  " + r.Reason
			}
			// The note is the scenario's own account of what it saw
			// (MirrorMaker 2's re-reads, a suite's counts), which a run of
			// a few scenarios (-run) has no report for.
			if r.Note != "" {
				line += "\n     " + r.Note
			}
			fmt.Println(line)
		}}
	results := runner.Run(ctx, scenarios)
	elapsed := time.Since(started)
	pass, fail, skip := integration.Summary(results)

	if writeReport && ctx.Err() == nil {
		run := integration.TargetRun{
			Target:   *target,
			Describe: tgt.Describe(),
			Commit:   commit,
			Date:     time.Now().UTC().Format(time.RFC3339),
			Duration: elapsed.Round(time.Second).String(),
			Versions: tools.Versions(ctx),
			Results:  results,
		}
		path := filepath.Join(root, "integration", "COMPAT.md")
		if err := integration.UpdateCompat(path, all, run); err != nil {
			log.Error("writing COMPAT.md", "err", err)
			return 2
		}
		fmt.Println("wrote", path)
	}
	if *add && ctx.Err() == nil {
		added := integration.AddedRun{
			Commit:   commit,
			Date:     time.Now().UTC().Format(time.RFC3339),
			Duration: elapsed.Round(time.Second).String(),
		}
		path := filepath.Join(root, "integration", "COMPAT.md")
		if err := integration.AddToCompat(path, all, *target, added, results); err != nil {
			log.Error("adding to COMPAT.md", "err", err)
			return 2
		}
		fmt.Println("added", len(results), "results to", path)
	}
	fmt.Printf("compat %s: %d passed, %d failed, %d skipped in %s\n", *target, pass, fail, skip, elapsed.Round(time.Second))
	fmt.Printf("%d passed, %d failed, %d skipped\n", pass, fail, skip)
	if fail > 0 || ctx.Err() != nil {
		if err := integration.MarkWorkDirFailed(workDir); err != nil {
			log.Warn("marking the work dir failed", "err", err)
		}
		fmt.Printf("the logs of this run stay in %s (the next run moves them to %s-failed-<time>)\n", workDir, workDir)
		return 1
	}
	return 0
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
