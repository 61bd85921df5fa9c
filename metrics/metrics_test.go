package metrics

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestWriteTextAndOpenMetrics(t *testing.T) {
	r := NewRegistry()
	d := &Desc{Name: "kafka_test_thing_events_total", Kind: CounterKind, Labels: []string{"topic"}, Help: "Events.\nMany \\ of them."}
	r.Collect(d, func(emit *Emit) {
		emit.Add(2, "b")
		emit.Add(1, "a\"x")
		emit.Add(3, "")
	})
	r.Gauge(&Desc{Name: "kafka_test_thing_level", Kind: GaugeKind, Help: "Level."}, func() float64 { return 0.25 })

	var text bytes.Buffer
	if err := r.Write(&text, false); err != nil {
		t.Fatal(err)
	}
	want := `# HELP kafka_test_thing_events_total Events.\nMany \\ of them.
# TYPE kafka_test_thing_events_total counter
kafka_test_thing_events_total 3
kafka_test_thing_events_total{topic="a\"x"} 1
kafka_test_thing_events_total{topic="b"} 2
# HELP kafka_test_thing_level Level.
# TYPE kafka_test_thing_level gauge
kafka_test_thing_level 0.25
`
	if text.String() != want {
		t.Fatalf("text format:\n%s\nwant:\n%s", text.String(), want)
	}
	var om bytes.Buffer
	if err := r.Write(&om, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(om.String(), "# TYPE kafka_test_thing_events counter\nkafka_test_thing_events_total 3\n") ||
		!strings.HasSuffix(om.String(), "# EOF\n") {
		t.Fatalf("OpenMetrics:\n%s", om.String())
	}
}

func TestTwoDeclarationsOfOneNamePanic(t *testing.T) {
	r := NewRegistry()
	r.Gauge(&Desc{Name: "x", Kind: GaugeKind}, func() float64 { return 0 })
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	r.Gauge(&Desc{Name: "x", Kind: GaugeKind}, func() float64 { return 0 })
}

var docsRow = regexp.MustCompile("^\\| `([a-z_]+)` \\| (counter|gauge) \\| ([^|]*) \\| `([^`]+)` \\| [^|]+ \\|$")

var update = flag.Bool("update", false, "rewrite docs/metrics.md's table from the catalog")

// docsTable is the table docs/metrics.md lists the catalog in.
func docsTable() string {
	var b strings.Builder
	b.WriteString("| name | type | labels | Kafka MBean | meaning |\n|---|---|---|---|---|\n")
	for _, d := range Catalog() {
		labels := "–"
		if len(d.Labels) > 0 {
			labels = "`" + strings.Join(d.Labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | `%s` | %s |\n", d.Name, d.Kind, labels, d.MBean, d.Help)
	}
	return b.String()
}

// TestDocsListTheCatalog: docs/metrics.md lists exactly the catalog, with
// each metric's kind, labels and MBean. go test ./metrics -run
// TestDocsListTheCatalog -update rewrites its table.
func TestDocsListTheCatalog(t *testing.T) {
	raw, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		text := string(raw)
		i := strings.Index(text, "| name | type |")
		if i < 0 {
			t.Fatal("docs/metrics.md has no table")
		}
		raw = []byte(text[:i] + docsTable())
		if err := os.WriteFile("../docs/metrics.md", raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	listed := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		m := docsRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		listed[m[1]] = m[2] + " " + strings.NewReplacer("`", "", " ", "").Replace(m[3]) + " " + m[4]
	}
	seen := map[string]bool{}
	for _, d := range Catalog() {
		if seen[d.Name] {
			t.Errorf("%s is twice in the catalog", d.Name)
		}
		seen[d.Name] = true
		labels := strings.Join(d.Labels, ",")
		if labels == "" {
			labels = "–"
		}
		want := d.Kind.String() + " " + labels + " " + d.MBean
		if got, ok := listed[d.Name]; !ok {
			t.Errorf("docs/metrics.md does not list %s", d.Name)
		} else if got != want {
			t.Errorf("docs/metrics.md lists %s as %q, the catalog declares %q", d.Name, got, want)
		}
	}
	for name := range listed {
		if !seen[name] {
			t.Errorf("docs/metrics.md lists %s, which the catalog does not declare", name)
		}
	}
}

var metricName = regexp.MustCompile(`kafka_[a-z_]+`)

// TestDashboardUsesOnlyCatalogMetrics: every metric docs/grafana-dashboard.json
// queries is in the catalog, so the dashboard shows what a node serves.
func TestDashboardUsesOnlyCatalogMetrics(t *testing.T) {
	raw, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, d := range Catalog() {
		known[d.Name] = true
	}
	queried := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			for _, name := range metricName.FindAllString(target.Expr, -1) {
				queried++
				if !known[name] {
					t.Errorf("panel %q queries %s, which the catalog does not declare", p.Title, name)
				}
			}
		}
	}
	if queried == 0 {
		t.Fatal("the dashboard queries no metric")
	}
}
