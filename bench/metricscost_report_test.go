package bench

import (
	"strings"
	"testing"
	"time"
)

func TestRenderMetricsCost(t *testing.T) {
	run := &MetricsCostRun{Started: time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC), Elapsed: 90 * time.Second, Rounds: 3, Records: 1_000_000,
		ScrapeEvery: time.Second, ModeOff: "no HTTP listener", ModeOn: "scraped every 1s",
		Runs:    map[string][]float64{"no HTTP listener": {1.2, 1.0, 1.1}, "scraped every 1s": {1.2, 1.1, 1.15}},
		LoadAvg: [2]string{"0.5 0.4 0.3", "1.0 0.6 0.4"}, LoadLine: "loadgen produce -records 1000000"}
	doc := string(RenderMetricsCost(run, Machine{Cores: 2, CPUModel: "cpu", MemGiB: 24, Kernel: "6.1"}, "abc123", "go run ./bench/cmd/metricscost -rounds 3"))
	if !strings.HasPrefix(doc, metricsCostBegin+"\n") || !strings.HasSuffix(doc, metricsCostEnd+"\n") {
		t.Fatalf("markers:\n%s", doc)
	}
	for _, want := range []string{
		"`go run ./bench/cmd/metricscost -rounds 3`",
		"- commit: abc123",
		"1,000,000 records of 1 KiB",
		"| no HTTP listener | 1.10 | 1.20, 1.00, 1.10 |",
		"| scraped every 1s | 1.15 | 1.20, 1.10, 1.15 |",
		"| scraped / none | 1.045 (+4.5 %) | |",
		"this run is **over** it",
		"`loadgen produce -records 1000000`",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(doc, "A trial") {
		t.Error("3 rounds marked a trial")
	}
	// Every other writer keeps the section.
	old := MetricsCostSection().Put([]byte("# Benchmark results\n\nsingle v1\n"), []byte(doc))
	kept := KeepSections(old, []byte("# Benchmark results\n\nsingle v2\n"))
	if !strings.Contains(string(kept), doc) || !strings.Contains(string(kept), "single v2") {
		t.Fatalf("make bench dropped the metrics-cost section:\n%s", kept)
	}
}
