package main

import (
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

func TestParseTestFaults(t *testing.T) {
	got, err := parseTestFaults([]byte("# a comment\n\nio /data/d0\nfull  /data/d1 \n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []vfs.Fault{{Dir: "/data/d0", Kind: vfs.FaultIO}, {Dir: "/data/d1", Kind: vfs.FaultFull}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"io", "slow /data", "full "} {
		if _, err := parseTestFaults([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if got, err := parseTestFaults(nil); err != nil || len(got) != 0 {
		t.Fatalf("no file: %v %v", got, err)
	}
}
