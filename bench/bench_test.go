package bench

import (
	"strings"
	"testing"
	"time"
)

func TestParseProducerPerf(t *testing.T) {
	out := "5000 records sent, 1000.0 records/sec (0.98 MB/sec), 12.0 ms avg latency, 40.0 ms max latency.\n" +
		"200000 records sent, 85470.085470 records/sec (83.47 MB/sec), 208.25 ms avg latency, 250.00 ms max latency, 206 ms 50th, 217 ms 95th, 250 ms 99th, 250 ms 99.9th.\n"
	got, err := parseProducerPerf(out)
	if err != nil || got.RecordsPerSec != 85470.085470 || got.MBPerSec != 83.47 {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := parseProducerPerf("Exception in thread main\n"); err == nil {
		t.Fatal("no summary: no error")
	}
}

func TestParseConsumerPerf(t *testing.T) {
	out := "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n" +
		"2026-11-29 13:00:00:000, 2026-11-29 13:00:03:000, 195.3125, 65.1042, 200000, 66666.6667, 310, 2690, 72.6069, 74349.4424\n"
	got, err := parseConsumerPerf(out)
	if err != nil || got.RecordsPerSec != 74349.4424 || got.MBPerSec != 72.6069 {
		t.Fatalf("got %+v, %v", got, err)
	}
	empty := strings.Replace(out, "200000", "0", 1)
	if _, err := parseConsumerPerf(empty); err == nil {
		t.Fatal("nothing consumed: no error")
	}
	if _, err := parseConsumerPerf("WARN timeout\n"); err == nil {
		t.Fatal("no CSV: no error")
	}
}

func TestParseStatAndStatus(t *testing.T) {
	stat := "4242 (java main (x)) S 1 4242 4242 0 -1 4194560 12345 0 0 0 1500 250 0 0 20 0 60 0 100 0 0"
	cpu, err := parseStatCPU(stat)
	if err != nil || cpu != 17.5 {
		t.Fatalf("got %v, %v", cpu, err)
	}
	if _, err := parseStatCPU("garbage"); err == nil {
		t.Fatal("garbage stat: no error")
	}
	rss, err := parseVmHWM("Name:\tjava\nVmPeak:\t 100 kB\nVmHWM:\t  524288 kB\n")
	if err != nil || rss != 512 {
		t.Fatalf("got %v, %v", rss, err)
	}
	if _, err := parseVmHWM("Name: x\n"); err == nil {
		t.Fatal("no VmHWM: no error")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestRenderShowsRatiosAndFailures(t *testing.T) {
	produce := produceWorkloads()[0].name() + " records/s"
	consume := consumeName("franz-go") + " MB/s"
	run := &Run{Config: Config{Targets: bothTargets, Rounds: 2, Records: 1000, BrokerCPU: "0", LoadCPU: "1"},
		Started: time.Unix(0, 0), Payload: "p", Commands: []string{"w\n    cmd"},
		Rounds: []Round{
			{Target: "gregor", Round: 1, Figures: map[string]float64{figStartup: 0.2, produce: 100, consume: 300}, Errors: []string{"x | y"}},
			{Target: "kafka", Round: 1, Figures: map[string]float64{figStartup: 4, produce: 50}},
			{Target: targetNull, Round: 1, Figures: map[string]float64{produce: 200, consume: 1000}, Errors: []string{"null hiccup"}},
			{Target: "gregor", Round: 2, Figures: map[string]float64{figStartup: 0.4, produce: 120, consume: 500}},
			{Target: "kafka", Round: 2, Figures: map[string]float64{figStartup: 6, produce: 70}},
			{Target: targetNull, Round: 2, Figures: map[string]float64{produce: 240, consume: 600}},
		}}
	s := string(Render(run, Machine{Cores: 2, CPUModel: "cpu", MemGiB: 23.4}, "abc"))
	for _, want := range []string{
		"| figure | gregor | kafka | null | gregor/kafka | gregor/null | rounds (gregor) | rounds (kafka) | rounds (null) |",
		// Start-up is not taken against the null broker: no value, no ratio.
		"| " + figStartup + " | 0.3 | 5 | – | 0.06 | – | 0.2, 0.4 | 4, 6 |  |",
		"| " + produce + " | 110.0 | 60.0 | 220.0 | 1.83 | 0.50 | 100.0, 120.0 | 50.0, 70.0 | 200.0, 240.0 |",
		"| " + consume + " | 400.0 | failed | 800.0 | – | 0.50 | 300.0, 500.0 |  | 1000, 600.0 |",
		"| " + figCPU + " | failed | failed | – | – | – |",
		"round 1: x \\| y",
		"## Failures (null)\n\n- round 1: null hiccup",
		"taskset -c 0",
		"pinned like the brokers (`taskset -c 0`)",
		"Produce is acknowledged from the batch headers alone",
		"2 cores (cpu), 23.4 GiB",
		"`make bench TARGET=both`",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}

func TestRenderWithoutNull(t *testing.T) {
	produce := produceWorkloads()[0].name() + " records/s"
	run := &Run{Config: Config{Targets: []string{"gregor", "kafka"}, Rounds: 1, Records: 1000},
		Started: time.Unix(0, 0), Rounds: []Round{
			{Target: "gregor", Round: 1, Figures: map[string]float64{produce: 100}},
			{Target: "kafka", Round: 1, Figures: map[string]float64{produce: 50}},
		}}
	s := string(Render(run, Machine{Cores: 2}, "abc"))
	for _, want := range []string{"| " + produce + " | 100.0 | 50.0 | not run | 2.00 | – | 100.0 | 50.0 |  |", "`make bench TARGET=gregor,kafka`"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}

func TestParseTargets(t *testing.T) {
	for in, want := range map[string]string{"both": "gregor,kafka,null", "kafka": "kafka", "null,gregor": "null,gregor"} {
		got, err := ParseTargets(in)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("ParseTargets(%q) = %v, %v; want %s", in, got, err, want)
		}
		if in == "both" && makeTarget(got) != "both" {
			t.Errorf("makeTarget(%v) = %q, want both", got, makeTarget(got))
		}
	}
	for _, bad := range []string{"", "gregor,", "external", "gregor,gregor", "all"} {
		if got, err := ParseTargets(bad); err == nil {
			t.Errorf("ParseTargets(%q) = %v, want an error", bad, got)
		}
	}
}

func TestRenderOrdersGroupFiguresBeforeCPU(t *testing.T) {
	stable := groupProtocols()[0].stableFigure()
	commits := commitRateFigure(8)
	figs := map[string]float64{figCPU: 3, figRSS: 100, commits: 20000, stable: 1.5, "end-to-end latency x p50": 1}
	run := &Run{Config: Config{Targets: []string{"gregor"}, Rounds: 1, Records: 1000, CommitTime: 10 * time.Second},
		Started: time.Unix(0, 0), Rounds: []Round{{Target: "gregor", Round: 1, Figures: figs}}}
	s := string(Render(run, Machine{Cores: 2}, "abc"))
	at := func(f string) int { return figureAt(t, s, f) }
	if !(at("end-to-end latency x p50") < at(stable) && at(stable) < at(commits) && at(commits) < at(figCPU)) {
		t.Errorf("group figures out of order:\n%s", s)
	}
	for _, want := range []string{"group.initial.rebalance.delay.ms=0", "| " + stable + " | 1.5 | not run |", "for 10s;"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestRenderListsTransactionFiguresAfterGroupsBeforeCPU(t *testing.T) {
	commits := commitRateFigure(8)
	small := txnProduceName(100) + " records/s"
	latency := txnE2EName() + " (ms) p99"
	figs := map[string]float64{figCPU: 3, commits: 20000, small: 30000, latency: 25, figTxnVersion: 2}
	run := &Run{Config: Config{Targets: []string{"gregor", "kafka"}, Rounds: 1, Records: 1000},
		Started: time.Unix(0, 0), Rounds: []Round{{Target: "gregor", Round: 1, Figures: figs}, {Target: "kafka", Round: 1, Figures: figs}}}
	s := string(Render(run, Machine{Cores: 2}, "abc"))
	at := func(f string) int { return figureAt(t, s, f) }
	if !(at(commits) < at(small) && at(small) < at(latency) && at(latency) < at(figTxnVersion) && at(figTxnVersion) < at(figCPU)) {
		t.Errorf("transaction figures out of order:\n%s", s)
	}
	for _, want := range []string{"| " + small + " | 30000 | 30000 | – | 1.00 |", "10,000 records per transaction", "read_committed consumer", "(up to 9ms at this schedule), so about 4.5ms of the median"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(s, "A trial") {
		t.Error("full run called a trial")
	}
}

func TestOnlySelectsWorkloadsAndReportsTheTrial(t *testing.T) {
	r := &runner{cfg: Config{Only: "transaction"}}
	for _, name := range []string{txnProduceName(100), txnProduceName(10_000), txnE2EName()} {
		if !r.selected(name) {
			t.Errorf("-only transaction does not select %q", name)
		}
	}
	for _, name := range []string{produceWorkloads()[0].name(), consumeName("perf"), r.e2eName(), compactionName(), commitName(1), groupProtocols()[0].stableFigure()} {
		if r.selected(name) {
			t.Errorf("-only transaction selects %q", name)
		}
	}
	if all := (&runner{}); !all.selected(compactionName()) {
		t.Error("no -only: a workload left out")
	}

	small := txnProduceName(100) + " records/s"
	large := txnProduceName(10_000) + " records/s"
	run := &Run{Config: Config{Targets: []string{"gregor"}, Rounds: 1, Records: 1000, Only: "transaction"},
		Started: time.Unix(0, 0), Rounds: []Round{{Target: "gregor", Round: 1, Figures: map[string]float64{figStartup: 0.2, small: 30000}}}}
	s := string(Render(run, Machine{Cores: 2}, "abc"))
	for _, want := range []string{"`-only \"transaction\"`", "| " + figStartup + " | 0.2 |", "| " + small + " | 30000 |",
		// Selected but not taken: shown as failed, not dropped.
		"| " + large + " | failed |"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	for _, absent := range []string{produceWorkloads()[0].name(), compactionName(), groupProtocols()[0].stableFigure()} {
		if strings.Contains(s, absent) {
			t.Errorf("report lists %q, which -only left out:\n%s", absent, s)
		}
	}
}

// figureAt is where the report s has its row for figure f.
func figureAt(t *testing.T, s, f string) int {
	t.Helper()
	i := strings.Index(s, "| "+f+" |")
	if i < 0 {
		t.Fatalf("report lacks %q:\n%s", f, s)
	}
	return i
}

func TestParseBrokerTargets(t *testing.T) {
	if got, err := ParseBrokerTargets("kafka,gregor"); err != nil || strings.Join(got, ",") != "kafka,gregor" {
		t.Errorf("ParseBrokerTargets(kafka,gregor) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "null", "gregor,", "both"} {
		if got, err := ParseBrokerTargets(bad); err == nil {
			t.Errorf("ParseBrokerTargets(%q) = %v, want an error", bad, got)
		}
	}
}
