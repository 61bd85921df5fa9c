package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestUpdateCompatMergesColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "COMPAT.md")
	all := []Scenario{{Name: "cli/a", Doc: "checks a"}, {Name: "cli/b", Doc: "checks | b"}}
	kafka := TargetRun{Target: "kafka", Describe: "Apache Kafka", Commit: "abc", Date: "d1", Duration: "1m",
		Versions: map[string]string{"java": "17"},
		Results:  []Result{{Scenario: "cli/a", Status: Pass, Elapsed: 2 * time.Second}, {Scenario: "cli/b", Status: Pass, Note: "12 tests"}}}
	if err := UpdateCompat(path, all, kafka); err != nil {
		t.Fatal(err)
	}
	gregor := TargetRun{Target: "gregor", Describe: "gregor abc", Commit: "abc", Date: "d2", Duration: "5s",
		Results: []Result{{Scenario: "cli/a", Status: Fail, Reason: "target did not start: exit | 1"}, {Scenario: "gone", Status: Skip, Reason: "old"}}}
	if err := UpdateCompat(path, all, gregor); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{
		"| scenario | checks | gregor | kafka |",
		"| `cli/a` | checks a | **FAIL**: target did not start: exit \\| 1 | pass (2s) |",
		"| `cli/b` | checks \\| b | not run | pass (0s) [12 tests] |",
		"| `gone` | (scenario no longer exists) | skip: old | not run |",
		"- java: 17",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	// A third run replaces its own column only.
	kafka.Results[0].Status = Skip
	kafka.Results[0].Reason = "again"
	if err := UpdateCompat(path, all, kafka); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if !strings.Contains(string(b), "| `cli/a` | checks a | **FAIL**: target did not start: exit \\| 1 | skip: again |") {
		t.Errorf("merge lost a column:\n%s", b)
	}
}

func TestUpdateCompatRejectsCorruptData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "COMPAT.md")
	if err := os.WriteFile(path, []byte("# x\n"+dataStart+"{not json"+dataEnd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := UpdateCompat(path, nil, TargetRun{Target: "kafka"}); err == nil {
		t.Fatal("corrupt data block: no error")
	}
}

func TestUpdateCompatKeepsClusterColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "COMPAT.md")
	all := []Scenario{{Name: "cli/a", Doc: "checks a"}}
	for _, target := range []string{"kafka-cluster", "kafka"} {
		run := TargetRun{Target: target, Describe: target, Results: []Result{{Scenario: "cli/a", Status: Pass}}}
		if err := UpdateCompat(path, all, run); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "| scenario | checks | kafka | kafka-cluster |") {
		t.Errorf("report lacks the cluster column after kafka's:\n%s", b)
	}
}

func TestAddToCompatMergesIntoAColumn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "COMPAT.md")
	all := []Scenario{{Name: "cli/a", Doc: "a"}, {Name: "cli/new", Doc: "new"}}
	added := AddedRun{Commit: "def", Date: "d3", Duration: "9s"}
	results := []Result{{Scenario: "cli/new", Status: Pass, Elapsed: 4 * time.Second}}
	if err := AddToCompat(path, all, "kafka", added, results); err == nil {
		t.Fatal("no report yet: the partial run was accepted as a column")
	}
	kafka := TargetRun{Target: "kafka", Describe: "Apache Kafka", Commit: "abc", Date: "d1", Duration: "1m",
		Results: []Result{{Scenario: "cli/a", Status: Pass, Elapsed: 2 * time.Second}}}
	if err := UpdateCompat(path, all, kafka); err != nil {
		t.Fatal(err)
	}
	if err := AddToCompat(path, all, "gregor", added, results); err == nil {
		t.Fatal("no gregor column: the partial run was accepted as one")
	}
	if err := AddToCompat(path, all, "kafka", added, results); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	s := string(b)
	for _, want := range []string{
		"| kafka | Apache Kafka; then cli/new at def (d3, 9s) | abc | d1 | 1m | 2 | 0 | 0 |",
		"| `cli/a` | a | pass (2s) |",
		"| `cli/new` | new | pass (4s) |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	// Adding it again replaces its cell rather than adding a second result.
	results[0].Status, results[0].Reason = Fail, "broke"
	if err := AddToCompat(path, all, "kafka", added, results); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if s := string(b); !strings.Contains(s, "| `cli/new` | new | **FAIL**: broke |") || !strings.Contains(s, "| 1 | 1 | 0 |") {
		t.Errorf("second add did not replace the cell:\n%s", s)
	}
}
