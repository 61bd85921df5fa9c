package bench

import (
	"fmt"
	"strings"
	"testing"
)

func TestClusterSectionSurvivesBothWriters(t *testing.T) {
	section := func(body string) []byte { return []byte(clusterBegin + "\n" + body + "\n" + clusterEnd + "\n") }
	single := []byte("# Benchmark results\n\nsingle v1\n")

	// The cluster writer adds its section to a single-node report, then
	// replaces it in place.
	doc := ClusterSection().Put(single, section("cluster v1"))
	if want := "# Benchmark results\n\nsingle v1\n\n" + string(section("cluster v1")); string(doc) != want {
		t.Fatalf("added section:\n%q\nwant\n%q", doc, want)
	}
	doc = ClusterSection().Put(doc, section("cluster v2"))
	if strings.Contains(string(doc), "cluster v1") || !strings.Contains(string(doc), "cluster v2") || !strings.Contains(string(doc), "single v1") {
		t.Fatalf("replaced section:\n%s", doc)
	}

	// The single-node writer replaces everything but the cluster section.
	doc = KeepSections(doc, []byte("# Benchmark results\n\nsingle v2\n"))
	if strings.Contains(string(doc), "single v1") || !strings.Contains(string(doc), "single v2") || !strings.Contains(string(doc), "cluster v2") {
		t.Fatalf("kept section:\n%s", doc)
	}
	if strings.Count(string(doc), clusterBegin) != 1 || strings.Count(string(doc), clusterEnd) != 1 {
		t.Fatalf("markers duplicated:\n%s", doc)
	}

	// No section yet: the single-node report is written as rendered, and
	// the cluster section alone makes a file of its own.
	if got := KeepSections(single, []byte("fresh\n")); string(got) != "fresh\n" {
		t.Fatalf("no section to keep: %q", got)
	}
	if got := ClusterSection().Put(nil, section("only")); string(got) != string(section("only")) {
		t.Fatalf("empty file: %q", got)
	}
	// A begin marker without its end is not a section: nothing is cut.
	broken := []byte("x\n" + clusterBegin + "\ny\n")
	if got := KeepSections(broken, []byte("fresh\n")); string(got) != "fresh\n" {
		t.Fatalf("unterminated section kept: %q", got)
	}
}

func TestPercentileNearestRank(t *testing.T) {
	var vs []float64
	for i := 20; i >= 1; i-- {
		vs = append(vs, float64(i))
	}
	if p := percentile(vs, 99); p != 20 {
		t.Fatalf("p99 of 1..20 = %v, want 20", p)
	}
	if p := percentile(vs, 50); p != 10 {
		t.Fatalf("p50 of 1..20 = %v, want 10", p)
	}
	if p := percentile(nil, 99); p != 0 {
		t.Fatalf("p99 of nothing = %v", p)
	}
	if vs[0] != 20 {
		t.Fatal("percentile sorted its input")
	}
}

// TestBenchKeepsEveryMarkedSection: make bench rewrites the single-node
// report and must keep every section another command wrote, in place.
func TestBenchKeepsEveryMarkedSection(t *testing.T) {
	doc := []byte("# Benchmark results\n\nsingle v1\n")
	var bodies []string
	for i, s := range markedSections() {
		body := fmt.Sprintf("%s\n\nsection %d\n\n%s\n", s.Begin, i, s.End)
		bodies = append(bodies, body)
		doc = s.Put(doc, []byte(body))
	}
	kept := string(KeepSections(doc, []byte("# Benchmark results\n\nsingle v2\n")))
	if !strings.HasPrefix(kept, "# Benchmark results\n\nsingle v2\n") {
		t.Errorf("fresh report not first:\n%s", kept)
	}
	for _, body := range bodies {
		if !strings.Contains(kept, body) {
			t.Errorf("make bench dropped %q:\n%s", body, kept)
		}
	}
	if !strings.Contains(kept, scaleBegin) {
		t.Error("the scale section is not among the kept ones")
	}
}
