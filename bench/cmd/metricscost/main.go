// Command metricscost measures what the metrics cost on the produce path:
// Gregor's CPU time per GB produced (1 KiB records, lz4, 16 partitions,
// acks=1, bench/loadgen) on a node whose /metrics a scraper reads every
// second, against the same node with no HTTP listener at all. Each round
// starts two fresh nodes, one of each, in alternating order (so that
// drift in the machine's load falls on both), and each run starts with a
// clean page cache; the medians of the rounds and their ratio are printed
// last, with the command lines, and written to bench/RESULTS.md.
//
//	go run ./bench/cmd/metricscost -rounds 5 -records 1000000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/bench"
	"github.com/gregorbroker/gregor/integration"
)

func main() { os.Exit(measure()) }

func measure() int {
	rounds := flag.Int("rounds", 5, "rounds (each on two fresh nodes)")
	records := flag.Int("records", 1_000_000, "1 KiB records each produce run sends")
	scrapeEvery := flag.Duration("scrape-every", time.Second, "how often the scraper reads /metrics")
	out := flag.String("out", "", "report path (default bench/RESULTS.md); its metrics-cost section is replaced, the rest kept")
	flag.Parse()
	cmd, err := bench.StartCommand("metricscost", *rounds)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer cmd.Close()
	ctx, root := cmd.Ctx, cmd.Root
	work := filepath.Join(root, "bench", ".work", "metricscost")
	_ = os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		cmd.Log.Error("work directory", "err", err)
		return 1
	}
	defer os.RemoveAll(work)
	gregor := filepath.Join(work, "gregor")
	loadgen := filepath.Join(work, "loadgen")
	for _, b := range []struct{ out, dir, pkg string }{{gregor, root, "./cmd/gregor"}, {loadgen, filepath.Join(root, "bench", "loadgen"), "."}} {
		if _, err := integration.Run(ctx, integration.Cmd{Name: "go", Args: []string{"build", "-o", b.out, b.pkg}, Dir: b.dir, Timeout: 10 * time.Minute}); err != nil {
			cmd.Log.Error("building", "package", b.pkg, "err", err)
			return 1
		}
	}
	payloads := filepath.Join(work, "payloads.txt")
	if _, err := integration.Run(ctx, integration.Cmd{Name: loadgen, Args: []string{"payloads", "-out", payloads, "-n", "10000", "-size", "1024"}, Timeout: time.Minute}); err != nil {
		cmd.Log.Error("writing payloads", "err", err)
		return 1
	}

	res := &bench.MetricsCostRun{Started: time.Now(), Rounds: *rounds, Records: *records, ScrapeEvery: *scrapeEvery,
		ModeOff: "no HTTP listener", ModeOn: "scraped every " + scrapeEvery.String(), Runs: map[string][]float64{}}
	res.LoadAvg[0] = bench.LoadAvg()
	modes := []string{res.ModeOff, res.ModeOn}
	syscall.Sync()
	for r := 1; r <= *rounds; r++ {
		order := []int{0, 1}
		if r%2 == 0 {
			order = []int{1, 0}
		}
		for _, m := range order {
			dir := filepath.Join(work, fmt.Sprintf("round-%d-%d", r, m))
			cpuPerGB, line, err := run(ctx, gregor, loadgen, payloads, dir, *records, m == 1, *scrapeEvery)
			if err != nil {
				cmd.Log.Error("run failed", "round", r, "mode", modes[m], "err", err, "logs", dir)
				return 1
			}
			res.LoadLine = line
			// The run's gigabyte goes, and what is left dirty is written
			// out, before the next run starts: otherwise the runs after
			// the first few write into a page cache full of the earlier
			// ones' dirty pages, where the kernel's writeback throttling
			// and reclaim (charged to the broker as system time) make
			// CPU per GB several times higher and the two modes
			// incomparable.
			if err := os.RemoveAll(dir); err != nil {
				cmd.Log.Error("removing a run's data", "err", err)
				return 1
			}
			syscall.Sync()
			res.Runs[modes[m]] = append(res.Runs[modes[m]], cpuPerGB)
			fmt.Printf("round %d, %-22s %.2f CPU s/GB\n", r, modes[m]+":", cpuPerGB)
		}
	}
	res.Elapsed = time.Since(res.Started)
	res.LoadAvg[1] = bench.LoadAvg()
	ratio := res.Ratio()
	fmt.Printf("\nGregor CPU per GB produced, median of %d rounds (load %s):\n", *rounds, res.LoadAvg[1])
	for _, m := range modes {
		fmt.Printf("  %-28s %.2f s/GB   (runs: %s)\n", m, res.Median(m), list(res.Runs[m]))
	}
	fmt.Printf("  ratio scraped / none        %.3f (%+.1f%%)\n", ratio, (ratio-1)*100)
	fmt.Printf("\nload: %s\n", res.LoadLine)
	return cmd.Finish(*out, nil, nil, func(old []byte, commit string) []byte {
		return bench.MetricsCostSection().Put(old, bench.RenderMetricsCost(res, bench.DescribeMachine(), commit, cmd.Line))
	})
}

// run starts a fresh node (with its HTTP listener scraped every interval
// when scraped), produces records to a 16-partition topic and returns the
// node's CPU seconds per GB of payload produced.
func run(ctx context.Context, gregor, loadgen, payloads, dir string, records int, scraped bool, interval time.Duration) (float64, string, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return 0, "", err
	}
	host, err := integration.ClaimLoopback()
	if err != nil {
		return 0, "", err
	}
	defer host.Release()
	args := integration.GregorArgs(data, host.IP)
	metricsAddr := host.Addr(integration.DebugPort)
	if scraped {
		args = append(args, "--override", "gregor.http.listener="+metricsAddr)
	}
	proc, err := integration.Start(integration.Cmd{Name: gregor, Args: args, Dir: dir}, filepath.Join(dir, "broker.log"))
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = proc.Stop(10 * time.Second) }()
	bootstrap := host.Addr(integration.ClientPort)
	if err := integration.WaitReady(ctx, bootstrap, proc.Done()); err != nil {
		return 0, "", err
	}
	stopScraper := make(chan struct{})
	scraperDone := make(chan struct{})
	go func() {
		defer close(scraperDone)
		if !scraped {
			return
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stopScraper:
				return
			case <-t.C:
				if resp, err := http.Get("http://" + metricsAddr + "/metrics"); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}
	}()
	cpu0, err := bench.CPUSeconds(proc.Pid())
	if err != nil {
		return 0, "", err
	}
	c := integration.Cmd{Name: loadgen, Args: []string{"produce", "-bootstrap", bootstrap, "-topic", "metered", "-partitions", "16",
		"-records", strconv.Itoa(records), "-acks", "1", "-payloads", payloads}, Timeout: 10 * time.Minute}
	out, err := integration.Run(ctx, c)
	close(stopScraper)
	<-scraperDone
	if err != nil {
		return 0, "", fmt.Errorf("producing: %w", err)
	}
	var res struct {
		MBPerSec float64 `json:"mb_per_sec"`
	}
	if err := json.Unmarshal([]byte(out.Stdout), &res); err != nil || res.MBPerSec <= 0 {
		return 0, "", fmt.Errorf("loadgen printed %q: %v", out.Stdout, err)
	}
	cpu1, err := bench.CPUSeconds(proc.Pid())
	if err != nil {
		return 0, "", err
	}
	gb := float64(records) * 1024 / 1e9
	return (cpu1 - cpu0) / gb, strings.Join(append([]string{"loadgen"}, c.Args...), " "), nil
}

func list(v []float64) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf("%.2f", x))
	}
	return strings.Join(s, " ")
}
