package main

import (
	"testing"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

func TestParseTestFaults(t *testing.T) {
	got, clock, err := parseTestFaults([]byte("# a comment\n\nio /data/d0\nfull  /data/d1 \nclock -90m\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []vfs.Fault{{Dir: "/data/d0", Kind: vfs.FaultIO}, {Dir: "/data/d1", Kind: vfs.FaultFull}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || clock != -90*time.Minute {
		t.Fatalf("got %v and clock %s, want %v and -1h30m", got, clock, want)
	}
	for _, bad := range []string{"io", "slow /data", "full ", "clock soon"} {
		if _, _, err := parseTestFaults([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if got, clock, err := parseTestFaults(nil); err != nil || len(got) != 0 || clock != 0 {
		t.Fatalf("no file: %v %s %v", got, clock, err)
	}
}
