package bench

import (
	"strings"
	"testing"
)

func TestRenderClusterScale(t *testing.T) {
	cfg := ClusterScaleConfig{ScaleConfig: ScaleConfig{Targets: []string{"gregor", "kafka"}, Rounds: 1, Topics: 10, PerTopic: 100}}
	run := &ClusterScaleRun{Config: cfg, runInfo: newRunInfo(), Notes: map[string][]string{"gregor": {"round 1: Metadata answer 42432 bytes"}}}
	run.Rounds = []Round{
		{Target: "gregor", Round: 1, Figures: map[string]float64{figCScaleIdleCPU: 29, figCScaleKill: 0.8}},
		{Target: "kafka", Round: 1, Figures: map[string]float64{figCScaleIdleCPU: 290, figCScaleKill: 16}, Errors: []string{"restart: boom"}},
	}
	doc := string(RenderClusterScale(run, Machine{Cores: 2, CPUModel: "cpu", MemGiB: 1, Kernel: "k"}, "abc123", "go run ./bench/cmd/scalebench -cluster -rounds 1"))
	if !strings.HasPrefix(doc, clusterScaleBegin+"\n") || !strings.HasSuffix(doc, clusterScaleEnd+"\n") {
		t.Fatalf("markers:\n%s", doc)
	}
	for _, want := range []string{
		"## Partitions at scale: a three-node cluster, 1,000 partitions of replication factor 3",
		"| " + figCScaleIdleCPU + " | 29.0 | 290.0 | 0.10 |",
		"| " + figCScaleKill + " | 0.8 | 16.0 | 0.05 |",
		"round 1: Metadata answer 42432 bytes",
		"restart: boom",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q:\n%s", want, doc)
		}
	}
	// The one-node scale section and this one are kept apart.
	both := ScaleSection().Put(ClusterScaleSection().Put([]byte("# Benchmark results\n"), []byte(doc)), []byte(scaleBegin+"\none node\n"+scaleEnd+"\n"))
	kept := string(KeepSections(both, []byte("# Benchmark results\n\nsingle v2\n")))
	if !strings.Contains(kept, doc) || !strings.Contains(kept, "one node") {
		t.Fatalf("make bench dropped a scale section:\n%s", kept)
	}
}
