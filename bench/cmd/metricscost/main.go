// Command metricscost measures what the metrics cost on the produce path:
// Gregor's CPU time per GB produced (1 KiB records, lz4, 16 partitions,
// acks=1, bench/loadgen) on a node whose /metrics a scraper reads every
// second, against the same node with no HTTP listener at all. Each round
// starts two fresh nodes, one of each, in alternating order (so that
// drift in the machine's load falls on both); the medians of the rounds
// and their ratio are printed last, with the command lines.
//
//	go run ./bench/cmd/metricscost -rounds 5 -records 1000000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/bench"
	"github.com/gregorbroker/gregor/integration"
)

func main() {
	rounds := flag.Int("rounds", 5, "rounds (each on two fresh nodes)")
	records := flag.Int("records", 1_000_000, "1 KiB records each produce run sends")
	scrapeEvery := flag.Duration("scrape-every", time.Second, "how often the scraper reads /metrics")
	rootFlag := flag.String("root", ".", "module root")
	flag.Parse()
	root, err := filepath.Abs(*rootFlag)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	work := filepath.Join(root, "bench", ".work", "metricscost")
	_ = os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		log.Fatal(err)
	}
	gregor := filepath.Join(work, "gregor")
	loadgen := filepath.Join(work, "loadgen")
	for _, b := range []struct{ out, dir, pkg string }{{gregor, root, "./cmd/gregor"}, {loadgen, filepath.Join(root, "bench", "loadgen"), "."}} {
		if _, err := integration.Run(ctx, integration.Cmd{Name: "go", Args: []string{"build", "-o", b.out, b.pkg}, Dir: b.dir, Timeout: 10 * time.Minute}); err != nil {
			log.Fatalf("building %s: %v", b.pkg, err)
		}
	}
	payloads := filepath.Join(work, "payloads.txt")
	if _, err := integration.Run(ctx, integration.Cmd{Name: loadgen, Args: []string{"payloads", "-out", payloads, "-n", "10000", "-size", "1024"}, Timeout: time.Minute}); err != nil {
		log.Fatalf("writing payloads: %v", err)
	}

	modes := []string{"no HTTP listener", "scraped every " + scrapeEvery.String()}
	results := map[string][]float64{}
	var cmdLine string
	for r := 1; r <= *rounds; r++ {
		order := []int{0, 1}
		if r%2 == 0 {
			order = []int{1, 0}
		}
		for _, m := range order {
			dir := filepath.Join(work, fmt.Sprintf("round-%d-%d", r, m))
			cpuPerGB, line, err := run(ctx, gregor, loadgen, payloads, dir, *records, m == 1, *scrapeEvery)
			if err != nil {
				log.Fatalf("round %d, %s: %v", r, modes[m], err)
			}
			cmdLine = line
			results[modes[m]] = append(results[modes[m]], cpuPerGB)
			fmt.Printf("round %d, %-22s %.2f CPU s/GB\n", r, modes[m]+":", cpuPerGB)
		}
	}
	med := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	off, on := med(results[modes[0]]), med(results[modes[1]])
	fmt.Printf("\nGregor CPU per GB produced, median of %d rounds (load %s):\n", *rounds, bench.LoadAvg())
	fmt.Printf("  %-28s %.2f s/GB   (runs: %s)\n", modes[0], off, list(results[modes[0]]))
	fmt.Printf("  %-28s %.2f s/GB   (runs: %s)\n", modes[1], on, list(results[modes[1]]))
	fmt.Printf("  ratio scraped / none        %.3f (%+.1f%%)\n", on/off, (on/off-1)*100)
	fmt.Printf("\nload: %s\n", cmdLine)
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
