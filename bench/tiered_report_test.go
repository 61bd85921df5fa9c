package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRenderTiered(t *testing.T) {
	cfg := TieredConfig{Targets: []string{"gregor", "kafka"}, Rounds: 2, Records: 262144, LatencyRate: 20480, LatencyTime: 15 * time.Second,
		BrokerCPU: "0", LoadCPU: "1"}
	run := &TieredRun{Config: cfg, runInfo: newRunInfo(), Payload: "payloads", Commands: []string{"cold read\n    loadgen consume"},
		Notes: map[string][]string{"kafka": {"round 1: 260 segments"}}}
	cold := figTColdRate(cfg.Records)
	run.Rounds = []Round{
		{Target: "gregor", Round: 1, Figures: map[string]float64{cold: 400, figTCopySecs: 1}},
		{Target: "kafka", Round: 1, Figures: map[string]float64{cold: 100, figTCopySecs: 4}},
		{Target: "gregor", Round: 2, Figures: map[string]float64{cold: 600, figTCopySecs: 3}},
		{Target: "kafka", Round: 2, Figures: map[string]float64{cold: 100, figTCopySecs: 4}, Errors: []string{"cold read: boom"}},
	}
	doc := string(RenderTiered(run, Machine{Cores: 2, CPUModel: "cpu", MemGiB: 1, Kernel: "k"}, "abc123", "go run ./bench/cmd/tieredbench -rounds 2"))
	if !strings.HasPrefix(doc, tieredBegin+"\n") || !strings.HasSuffix(doc, tieredEnd+"\n") {
		t.Fatalf("markers:\n%s", doc)
	}
	for _, want := range []string{
		"**A trial, not the full benchmark:** 2 round(s).",
		"- commit: abc123",
		"| " + cold + " | 500.0 | 100.0 | 5.00 |",
		"| " + figTCopySecs + " | 2 | 4 | 0.50 | 1, 3 | 4, 4 |",
		"cold read of 256 MiB from offset 0",
		"20,480 records/s (20.0 MiB/s)",
		"### Offsets behind the copy figures (kafka)\n\n- round 1: 260 segments",
		"### Tiered bench failures (kafka)\n\n- round 2: cold read: boom",
		"loadgen consume",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q:\n%s", want, doc)
		}
	}
	kept := KeepSections(TieredSection().Put([]byte("# Benchmark results\n\nsingle v1\n"), []byte(doc)), []byte("# Benchmark results\n\nsingle v2\n"))
	if !strings.Contains(string(kept), doc) {
		t.Fatal("make bench dropped the tiered section")
	}
}

func TestSegmentSizes(t *testing.T) {
	dir := t.TempDir()
	for name, size := range map[string]int{"00000000000000000000.log": 1000, "00000000000000000010.log": 2000,
		"00000000000000000030.log": 5, "00000000000000000010.index": 7, "leader-epoch-checkpoint": 3} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	segs, err := segmentSizes(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 3 || segs[0] != (segment{Base: 0, Size: 1000}) || segs[1] != (segment{Base: 10, Size: 2000}) || segs[2] != (segment{Base: 30, Size: 5}) {
		t.Fatalf("segments: %v", segs)
	}
	// 3000 bytes over offsets 0-29; the active segment does not count.
	if got := bytesPerRecord(segs); got != 100 {
		t.Fatalf("bytes per record %v, want 100", got)
	}
	if got := bytesPerRecord(segs[2:]); got != 0 {
		t.Fatalf("one segment: %v, want 0", got)
	}
}
