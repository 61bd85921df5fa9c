package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSecuritySectionKeptByEveryWriter(t *testing.T) {
	sec := func(body string) []byte { return []byte(securityBegin + "\n" + body + "\n" + securityEnd + "\n") }
	cluster := func(body string) []byte { return []byte(clusterBegin + "\n" + body + "\n" + clusterEnd + "\n") }
	doc := []byte("# Benchmark results\n\nsingle v1\n")

	doc = SecuritySection().Put(doc, sec("security v1"))
	doc = ClusterSection().Put(doc, cluster("cluster v1"))
	doc = SecuritySection().Put(doc, sec("security v2"))
	want := "# Benchmark results\n\nsingle v1\n\n" + string(sec("security v2")) + "\n" + string(cluster("cluster v1"))
	if string(doc) != want {
		t.Fatalf("security section replaced in place:\n%q\nwant\n%q", doc, want)
	}
	// make bench keeps it, where it was.
	doc = KeepSections(doc, []byte("# Benchmark results\n\nsingle v2\n"))
	want = "# Benchmark results\n\nsingle v2\n\n" + string(sec("security v2")) + "\n" + string(cluster("cluster v1"))
	if string(doc) != want {
		t.Fatalf("kept by make bench:\n%q\nwant\n%q", doc, want)
	}
	if got := KeepSections(sec("only"), []byte("fresh\n")); string(got) != "fresh\n\n"+string(sec("only")) {
		t.Fatalf("security section alone: %q", got)
	}
}

func TestAddRatios(t *testing.T) {
	ratios := []secRatio{{"r", "a", "b"}, {"no den", "a", "missing"}, {"zero den", "a", "z"}}
	figs := map[string]float64{"a": 3, "b": 4, "z": 0}
	addRatios(figs, ratios)
	if figs["r"] != 0.75 {
		t.Errorf("r = %v, want 0.75", figs["r"])
	}
	for _, n := range []string{"no den", "zero den"} {
		if _, ok := figs[n]; ok {
			t.Errorf("%s added", n)
		}
	}
	// Every ratio row names figures the tables list.
	for _, f := range []func() ([]string, []secRatio){
		func() ([]string, []secRatio) { return tlsFigures(2000) },
		func() ([]string, []secRatio) { return authFigures(2000, 1000) },
	} {
		rows, rs := f()
		for _, r := range rs {
			for _, n := range []string{r.name, r.num, r.den} {
				if !containsString(rows, n) {
					t.Errorf("%q not among the rows", n)
				}
			}
		}
	}
}

func containsString(vs []string, s string) bool {
	for _, v := range vs {
		if v == s {
			return true
		}
	}
	return false
}

func securityFixture() *SecurityRun {
	cfg := SecurityConfig{Targets: []string{"gregor", "kafka"}, Rounds: 2, Records: 20000, Rate: 2000, LatencyTime: 3 * time.Second,
		ACLs: 1000, BrokerCPU: "0", LoadCPU: "1"}
	run := &SecurityRun{Config: cfg, runInfo: newRunInfo(), Payload: "payloads", NoAuthorizer: map[string]string{"gregor": "no authorizer: SECURITY_DISABLED"},
		TLS: map[string]string{"kafka": "TLS 1.3, TLS_AES_256_GCM_SHA384"}}
	run.Properties = "node.id=1\nsuper.users=" + brokerPrincipal + "\n"
	run.Commands = []string{"produce\n    loadgen produce -records 20000"}
	prodP, prodS := figSecProduce("PLAINTEXT")+" records/s", figSecProduce("SSL")+" records/s"
	on := authLabel(cfg.ACLs)
	prodOn := figSecProduce(on) + " records/s"
	latOff, latOn := figSecProduceLatency(cfg.Rate, "PLAINTEXT")+" p99", figSecProduceLatency(cfg.Rate, on)+" p99"
	round := func(target string, n int, figs map[string]float64, errs ...string) Round {
		_, tr := tlsFigures(cfg.Rate)
		_, ar := authFigures(cfg.Rate, cfg.ACLs)
		addRatios(figs, append(tr, ar...))
		return Round{Target: target, Round: n, Figures: figs, Errors: errs}
	}
	run.Rounds = []Round{
		round("gregor", 1, map[string]float64{prodP: 100000, prodS: 80000}),
		round("kafka", 1, map[string]float64{prodP: 50000, prodS: 40000, prodOn: 45000, latOff: 10, latOn: 12}),
		round("gregor", 2, map[string]float64{prodP: 120000, prodS: 90000}),
		round("kafka", 2, map[string]float64{prodP: 60000, prodS: 30000, prodOn: 54000, latOff: 20, latOn: 20}, "e2e: a|b"),
	}
	return run
}

func TestRenderSecurity(t *testing.T) {
	run := securityFixture()
	doc := string(RenderSecurity(run, Machine{Cores: 2, CPUModel: "cpu", MemGiB: 1, Kernel: "k"}, "abc123", "go run ./bench/cmd/securitybench -rounds 2"))
	if !strings.HasPrefix(doc, securityBegin+"\n") || !strings.HasSuffix(doc, securityEnd+"\n") {
		t.Fatalf("markers:\n%s", doc)
	}
	for _, want := range []string{
		"`go run ./bench/cmd/securitybench -rounds 2`",
		"**A trial, not the full benchmark:** 2 round(s), 20,000 records per throughput workload",
		"- commit: abc123",
		"load average " + run.LoadAvg[0] + " at the start",
		"`taskset -c 0`",
		"kafka's SSL listener negotiated TLS 1.3, TLS_AES_256_GCM_SHA384",
		"`super.users=User:CN=broker,O=Gregor`",
		"1,001 ACLs are created",
		"### Authorization not run (gregor)\n\n- no authorizer: SECURITY_DISABLED",
		"### Security failures (kafka)\n\n- round 2: e2e: a\\|b",
		"loadgen produce -records 20000",
		"super.users=User:CN=broker,O=Gregor\n```",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	on := authLabel(1000)
	checks := map[string]string{
		figSecProduce("PLAINTEXT") + " records/s": "| " + figSecProduce("PLAINTEXT") + " records/s | 110000 | 55000 | 2.00 | 100000, 120000 | 50000, 60000 |",
		// Ratios are each round's, then the median: not the ratio of the
		// medians (85000/110000 = 0.773).
		"SSL / PLAINTEXT: produce records/s": "| SSL / PLAINTEXT: produce records/s | 0.775 | 0.65 | 1.19 | 0.8, 0.75 | 0.8, 0.5 |",
		// Gregor had no authorizer: its cells say so, not "failed".
		figSecProduce(on) + " records/s":           "| " + figSecProduce(on) + " records/s | not run: no authorizer at this commit | 49500 | – |  | 45000, 54000 |",
		"authorizer on / off: produce records/s":   "| authorizer on / off: produce records/s | not run: no authorizer at this commit | 0.9 | – |  | 0.9, 0.9 |",
		"authorizer on / off: produce latency p99": "| authorizer on / off: produce latency p99 | not run: no authorizer at this commit | 1.1 | – |  | 1.2, 1 |",
		// Figures without values are failed; TLS rows have no note.
		figSecConsume("SSL") + " records/s": "| " + figSecConsume("SSL") + " records/s | failed | failed | – |  |  |",
	}
	for fig, want := range checks {
		if got := row(doc, fig); got != want {
			t.Errorf("row %q:\n got %s\nwant %s", fig, got, want)
		}
	}
	if strings.Index(doc, "### TLS") > strings.Index(doc, "### Authorization (PLAINTEXT)") {
		t.Error("the TLS table comes after the authorization table")
	}

	// A full run is not marked a trial; a target not run is "not run".
	run.Config.Rounds = 3
	run.Config.Targets = []string{"kafka"}
	doc = string(RenderSecurity(run, Machine{}, "abc", "cmd"))
	if strings.Contains(doc, "A trial") {
		t.Error("3 rounds marked a trial")
	}
	if got := row(doc, "SSL / PLAINTEXT: produce records/s"); !strings.Contains(got, "| not run | 0.65 |") {
		t.Errorf("gregor not run: %s", got)
	}
}

func TestOtherACLsNeverApplyToTheProducer(t *testing.T) {
	const topic = "bench-sec-produce-1"
	acls := otherACLs(1000)
	if len(acls) != 1000 {
		t.Fatalf("%d ACLs", len(acls))
	}
	kinds := map[kmsg.ACLResourcePatternType]int{}
	deny, principals := 0, map[string]bool{}
	seen := map[string]bool{}
	for _, a := range acls {
		if a.Principal == anonymous || a.ResourceType != kmsg.ACLResourceTypeTopic || a.Host != "*" {
			t.Fatalf("%+v", a)
		}
		switch a.ResourcePatternType {
		case kmsg.ACLResourcePatternTypeLiteral:
			if a.ResourceName == topic {
				t.Fatalf("literal ACL on the producer's topic: %+v", a)
			}
		case kmsg.ACLResourcePatternTypePrefixed:
			if strings.HasPrefix(topic, a.ResourceName) {
				t.Fatalf("prefix matching the producer's topic: %+v", a)
			}
		default:
			t.Fatalf("pattern type %v", a.ResourcePatternType)
		}
		key := a.ResourceName + "|" + a.Principal + "|" + a.Operation.String() + "|" + a.PermissionType.String()
		if seen[key] {
			t.Fatalf("duplicate ACL %s", key)
		}
		seen[key] = true
		kinds[a.ResourcePatternType]++
		principals[a.Principal] = true
		if a.PermissionType == kmsg.ACLPermissionTypeDeny {
			deny++
		}
	}
	if kinds[kmsg.ACLResourcePatternTypeLiteral] != 500 || kinds[kmsg.ACLResourcePatternTypePrefixed] != 500 || deny != 100 || len(principals) != 100 {
		t.Fatalf("mix: %v, %d DENY, %d principals", kinds, deny, len(principals))
	}
	p := producerACL(topic)
	if p.Principal != anonymous || p.ResourceName != topic || p.ResourcePatternType != kmsg.ACLResourcePatternTypeLiteral ||
		p.Operation != kmsg.ACLOperationWrite || p.PermissionType != kmsg.ACLPermissionTypeAllow {
		t.Fatalf("producer's ACL: %+v", p)
	}
}

func TestSecurityHelpers(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1001: "1,001", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q", n, got)
		}
	}
	if !refusesAuthorizer("gregor node did not become ready: exit status 1; log: unknown key authorizer.class.name") {
		t.Error("a refusal naming the key not recognised")
	}
	if refusesAuthorizer("kafka node did not become ready: context deadline exceeded") {
		t.Error("another start-up failure taken for a refusal")
	}
}
