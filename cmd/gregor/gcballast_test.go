package main

import (
	"os"
	"testing"
)

func TestGCBallastOnlyWithoutAnOperatorsGCSettings(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		if _, ok := os.LookupEnv(env); ok {
			t.Skipf("%s is set in this test's environment", env)
		}
	}
	if b := gcBallast(1 << 20); len(b) != 1<<20 {
		t.Fatalf("ballast of %d bytes; want 1 MiB", len(b))
	}
	t.Setenv("GOGC", "200")
	if b := gcBallast(1 << 20); b != nil {
		t.Fatal("a ballast with GOGC set")
	}
	os.Unsetenv("GOGC")
	t.Setenv("GOMEMLIMIT", "1GiB")
	if b := gcBallast(1 << 20); b != nil {
		t.Fatal("a ballast with GOMEMLIMIT set")
	}
}
