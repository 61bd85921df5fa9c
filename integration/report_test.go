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
