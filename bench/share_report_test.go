package bench

import (
	"strings"
	"testing"
	"time"
)

func TestParseSharePerf(t *testing.T) {
	out := "start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, data.consumed.in.nMsg, fetch.time.ms\n" +
		"2026-12-06 21:10:00:000, 2026-12-06 21:10:04:000, 97.6562, 24.4141, 25000.0000, 100000, 4000\n"
	figs, err := parseSharePerf("[log line]\n" + out)
	if err != nil {
		t.Fatal(err)
	}
	if figs["nMsg.sec"] != 25000 || figs["MB.sec"] != 24.4141 || figs["data.consumed.in.nMsg"] != 100000 {
		t.Fatalf("figures: %v", figs)
	}
	if _, err := parseSharePerf("start.time, end.time, nMsg.sec\n"); err == nil {
		t.Fatal("a header without figures parsed")
	}
}

func TestRenderShare(t *testing.T) {
	cfg := ShareConfig{Targets: []string{"gregor", "kafka"}, Rounds: 2, Records: 100000, AckRecords: 20000, MaxPoll: 100, LockSamples: 5,
		Lock: 10 * time.Second, BrokerCPU: "0", LoadCPU: "1"}
	run := &ShareRun{Config: cfg, runInfo: newRunInfo(), Payload: "payloads", Commands: []string{"share-ack\n    loadgen share-ack"}}
	rec := figShareThroughput(4, 16, "records/s")
	run.Rounds = []Round{
		{Target: "gregor", Round: 1, Figures: map[string]float64{rec: 40000, figShareLockP50: 10}},
		{Target: "kafka", Round: 1, Figures: map[string]float64{rec: 20000, figShareLockP50: 100}},
		{Target: "gregor", Round: 2, Figures: map[string]float64{rec: 60000, figShareLockP50: 30}},
		{Target: "kafka", Round: 2, Figures: map[string]float64{rec: 20000, figShareLockP50: 100}, Errors: []string{"share-ack: boom"}},
	}
	doc := string(RenderShare(run, Machine{Cores: 2, CPUModel: "cpu", MemGiB: 1, Kernel: "k"}, "abc123", "go run ./bench/cmd/sharebench -rounds 2"))
	if !strings.HasPrefix(doc, shareBegin+"\n") || !strings.HasSuffix(doc, shareEnd+"\n") {
		t.Fatalf("markers:\n%s", doc)
	}
	for _, want := range []string{
		"**A trial, not the full benchmark:** 2 round(s).",
		"- commit: abc123",
		"`group.share.record.lock.duration.ms=10000`",
		"| " + rec + " | 50000 | 20000 | 2.50 |",
		"| " + figShareLockP50 + " | 20.0 | 100.0 | 0.20 |",
		"### Share bench failures (kafka)\n\n- round 2: share-ack: boom",
		"loadgen share-ack",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q:\n%s", want, doc)
		}
	}
	kept := KeepSections(ShareSection().Put([]byte("# Benchmark results\n\nsingle v1\n"), []byte(doc)), []byte("# Benchmark results\n\nsingle v2\n"))
	if !strings.Contains(string(kept), doc) {
		t.Fatal("make bench dropped the share section")
	}
}
