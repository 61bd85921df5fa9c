package integration

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMergeClassListsKeepsFirstOrder(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	b := filepath.Join(dir, "b")
	if err := os.WriteFile(a, []byte("# header\njava/lang/Object\nkafka/A\n@lambda-proxy kafka/A run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("# header\njava/lang/Object\nkafka/B\nkafka/A\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "merged")
	if err := mergeClassLists(out, []string{a, filepath.Join(dir, "missing"), b}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := "java/lang/Object\nkafka/A\n@lambda-proxy kafka/A run\nkafka/B\n"; string(got) != want {
		t.Fatalf("merged:\n%s\nwant:\n%s", got, want)
	}
	if err := mergeClassLists(out, []string{filepath.Join(dir, "missing")}); err == nil {
		t.Fatal("no lists merged into an archive's class list")
	}
}
