package bench

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// soakSamples are n samples a minute apart of three nodes whose figures
// grow as grow says (sample index -> extra).
func soakSamples(n int, grow func(i int) float64) []SoakSample {
	var out []SoakSample
	for i := range n {
		s := SoakSample{At: time.Duration(i+1) * time.Minute, Acked: 6000,
			P50: 4 * time.Millisecond, P99: 20 * time.Millisecond, P999: 40 * time.Millisecond}
		for id := 1; id <= 3; id++ {
			g := grow(i)
			s.Nodes = append(s.Nodes, SoakNode{ID: id, RSS: int64((200 + g) * (1 << 20)), Anon: int64((150 + g) * (1 << 20)), GoHeld: int64((120 + g) * (1 << 20)), Heap: int64((50 + g) * (1 << 20)), FDs: 150 + int(g), Goroutines: 300 + int(g),
				LogBytes: 40 << 20, Segments: 60, TopicBytes: 10 << 20})
		}
		out = append(out, s)
	}
	return out
}

func TestJudgeFlatnessWindows(t *testing.T) {
	// 120 samples, a 5-minute warm-up: minutes 6-15 against 111-120.
	f := JudgeFlatness(soakSamples(120, func(int) float64 { return 0 }), 5*time.Minute, SoakWindow)
	if !f.OK() || f.Window != 10 || f.FirstFrom != 6*time.Minute || f.FirstTo != 15*time.Minute ||
		f.LastFrom != 111*time.Minute || f.LastTo != 120*time.Minute {
		t.Fatalf("flat run judged %+v", f)
	}
	if len(f.Rows) != 3*4+1 {
		t.Errorf("want RSS, descriptors, goroutines and topic bytes of 3 nodes and the latency: %d rows", len(f.Rows))
	}
	t.Log(f)
	// A short run: 6 samples, warm-up of a quarter: minutes 2-6 remain,
	// windows of 2.
	f = JudgeFlatness(soakSamples(6, func(int) float64 { return 0 }), SoakWarmup(6*time.Minute), SoakWindow)
	if !f.OK() || f.Window != 2 || f.FirstFrom != 2*time.Minute || f.LastTo != 6*time.Minute {
		t.Fatalf("short run judged %+v", f)
	}
	// Nothing after the warm-up: not judged, which is not a pass.
	f = JudgeFlatness(soakSamples(2, func(int) float64 { return 0 }), 5*time.Minute, SoakWindow)
	if f.OK() || f.Note == "" || !strings.Contains(f.String(), "NOT JUDGED") {
		t.Fatalf("too few samples judged %+v", f)
	}
}

func TestJudgeFlatnessCatchesGrowth(t *testing.T) {
	// From the 60th minute on, node 1's RSS is 100 MiB more (300 MiB
	// against a limit of 200*1.25+32), node 2 has 100 descriptors more
	// (250 against 150*1.25+32) and node 3 50 goroutines more (350,
	// within 300*1.25+32).
	samples := soakSamples(120, func(int) float64 { return 0 })
	for i := 59; i < len(samples); i++ {
		samples[i].Nodes[0].RSS += 100 << 20
		samples[i].Nodes[1].FDs += 100
		samples[i].Nodes[2].Goroutines += 50
	}
	f := JudgeFlatness(samples, 5*time.Minute, SoakWindow)
	if f.OK() {
		t.Fatalf("growth judged flat:\n%s", f)
	}
	var grew []string
	for _, r := range f.Rows {
		if !r.OK {
			grew = append(grew, fmt.Sprintf("%s of node %d", r.Metric, r.Node))
		}
	}
	if got := strings.Join(grew, ", "); got != "RSS (MiB) of node 1, open descriptors of node 2" {
		t.Errorf("rows that grew: %s\n%s", got, f)
	}
	if !strings.Contains(f.String(), "GREW") || !strings.Contains(f.String(), "NOT FLAT") {
		t.Errorf("verdict does not say it:\n%s", f)
	}
	// A node that could not be read in a window is not judged, which
	// fails.
	samples = soakSamples(40, func(int) float64 { return 0 })
	for i := range samples {
		samples[i].Nodes[1].Goroutines = -1
	}
	if f := JudgeFlatness(samples, 5*time.Minute, SoakWindow); f.OK() {
		t.Errorf("unread goroutines judged flat:\n%s", f)
	}
	// Latency that triples fails.
	samples = soakSamples(40, func(int) float64 { return 0 })
	for i := 30; i < 40; i++ {
		samples[i].P99 = 200 * time.Millisecond
	}
	if f := JudgeFlatness(samples, 5*time.Minute, SoakWindow); f.OK() {
		t.Errorf("p99 from 20 to 200 ms judged flat:\n%s", f)
	}
}

func soakRun(samples []SoakSample, d time.Duration) *SoakRun {
	run := &SoakRun{Started: time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC), Elapsed: d + 3*time.Minute, Duration: d, Interval: time.Minute,
		Cluster: "gregor abc123, combined3", LoadAvg: [2]string{"1.0 1.0 1.0", "2.0 2.0 2.0"},
		Config: []string{"queue topic soak-queue: retention.ms=120000"}, Properties: "node.id=1\n", Samples: samples,
		Rows:      []SoakRow{{Workload: "queue+group", Operations: 1234567, Acked: 1000000}, {Workload: "compacted", Operations: 10, Acked: 9, Lost: 1, Invalid: 1}},
		Summaries: []string{"queue workload:\nwrites: ..."}}
	run.Flatness = JudgeFlatness(samples, SoakWarmup(d), SoakWindow)
	return run
}

func TestRenderSoak(t *testing.T) {
	run := soakRun(soakSamples(120, func(int) float64 { return 0 }), 2*time.Hour)
	doc := string(RenderSoak(run, Machine{Cores: 2, CPUModel: "cpu", MemGiB: 24, Kernel: "6.1"}, "abc123", "make soak", "soak.svg"))
	for _, want := range []string{
		soakBegin, soakEnd, "![soak](soak.svg)", "Written by `make soak` (`make soak`)", "- commit: abc123",
		"load average 1.0 1.0 1.0 at the start, 2.0 2.0 2.0 at the end",
		"| queue+group | 1,234,567 | 1,000,000 | 0 | 0 | 0 |", "| compacted | 10 | 9 | 1 | 0 | 1 |",
		"**FAILED** (checkers: 1 violations; flatness: flat)",
		"### Samples (every 5th, and the last)", "| 5m | 200 / 150 / 120 / 50 / 150 / 300 / 10 / 40 |", "| 120m |",
		"| RSS (MiB) | node 1 | 200.0 | 200.0 | 282.0 | ok |", "queue workload:\nwrites: ...",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(doc, "| 4m |") || strings.Contains(doc, "A trial") {
		t.Errorf("a 2-hour run shows every 5th sample and is no trial:\n%s", doc)
	}
	short := string(RenderSoak(soakRun(soakSamples(6, func(int) float64 { return 0 }), 6*time.Minute), Machine{}, "abc", "make soak SOAK_DURATION=6m", "soak.svg"))
	if !strings.Contains(short, "**A trial, not the soak:** the workloads ran 6m0s") || !strings.Contains(short, "| 4m |") {
		t.Errorf("short run:\n%s", short)
	}
	kept := KeepSections(SoakSection().Put([]byte("# Benchmark results\n\nsingle v1\n"), []byte(doc)), []byte("# Benchmark results\n\nsingle v2\n"))
	if !strings.Contains(string(kept), doc) {
		t.Fatal("make bench dropped the soak section")
	}
}

func TestSoakSVG(t *testing.T) {
	samples := soakSamples(30, func(i int) float64 { return float64(i) })
	samples[3].Nodes[2].RSS = -1 // a gap in node 3's RSS line
	samples[4].Acked = 0         // no latency that minute
	svg := SoakSVG(soakRun(samples, 30*time.Minute))
	// Well-formed XML, and count what it draws.
	dec := xml.NewDecoder(strings.NewReader(string(svg)))
	counts := map[string]int{}
	var texts []string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, svg)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			counts[el.Name.Local]++
		case xml.CharData:
			texts = append(texts, string(el))
		}
	}
	// Seven per-node panels of 3 lines (node 3's RSS in two pieces), the
	// latency panel's 3 (each in two pieces) and the acks line.
	if want := 7*3 + 1 + 3*2 + 1; counts["polyline"] != want {
		t.Errorf("%d polylines, want %d", counts["polyline"], want)
	}
	all := strings.Join(texts, "|")
	for _, want := range []string{"RSS (MiB)", "anonymous RSS (MiB)", "Go runtime's memory not returned to the OS (MiB)", "Go heap in use (MiB)", "open descriptors", "goroutines", "bounded topics' log (MiB)", "produce latency, send to ack (ms)",
		"node 1", "node 3", "p99.9", "warm-up", "first window", "last window", "minutes", ": a trial"} {
		if !strings.Contains(all, want) {
			t.Errorf("the picture lacks %q", want)
		}
	}
}

func TestNiceStep(t *testing.T) {
	for _, c := range []struct{ raw, want float64 }{{0, 1}, {0.3, 0.5}, {7, 10}, {12, 20}, {23, 25}, {250, 250}, {251, 500}} {
		if got := niceStep(c.raw); got != c.want {
			t.Errorf("niceStep(%v) = %v, want %v", c.raw, got, c.want)
		}
	}
}
