package integration

import (
	"os"
	"path/filepath"
	"testing"
)

// A passed run's work directory is emptied; a failed run's is moved aside
// with its spare's inside, and only the newest two failed runs stay.
func TestPrepareWorkDirKeepsFailedRuns(t *testing.T) {
	root := t.TempDir()
	dir, spare := filepath.Join(root, "gregor"), filepath.Join(root, "gregor-spare")
	write := func(path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("log"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kept := func() []string {
		t.Helper()
		got, err := filepath.Glob(dir + "-failed-*")
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	write(filepath.Join(dir, "broker.log"))
	if err := PrepareWorkDir(dir, spare); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("after a passed run: %v entries, %v", entries, err)
	}
	if got := kept(); len(got) != 0 {
		t.Fatalf("a passed run was kept: %v", got)
	}

	for run := range 3 {
		write(filepath.Join(dir, "broker.log"))
		write(filepath.Join(spare, "spare.log"))
		if err := MarkWorkDirFailed(dir); err != nil {
			t.Fatal(err)
		}
		if err := PrepareWorkDir(dir, spare); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if _, err := os.Stat(filepath.Join(dir, failedMarker)); !os.IsNotExist(err) {
			t.Fatalf("run %d: the new work dir holds the old marker (%v)", run, err)
		}
		if _, err := os.Stat(spare); !os.IsNotExist(err) {
			t.Fatalf("run %d: the spare dir was left in place (%v)", run, err)
		}
	}
	got := kept()
	if len(got) != failedRunsKept {
		t.Fatalf("kept %d failed runs, want %d: %v", len(got), failedRunsKept, got)
	}
	for _, k := range got {
		for _, f := range []string{"broker.log", failedMarker, filepath.Join("spare", "spare.log")} {
			if _, err := os.Stat(filepath.Join(k, f)); err != nil {
				t.Errorf("%s lacks %s: %v", k, f, err)
			}
		}
	}
}
