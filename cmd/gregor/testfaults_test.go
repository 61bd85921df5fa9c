package main

import (
	"testing"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

func TestParseTestFaults(t *testing.T) {
	f, err := parseTestFaults([]byte("# a comment\n\nio /data/d0\nfull  /data/d1 \nclock -90m\nhold tiered-copy\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []vfs.Fault{{Dir: "/data/d0", Kind: vfs.FaultIO}, {Dir: "/data/d1", Kind: vfs.FaultFull}}
	if len(f.storage) != len(want) || f.storage[0] != want[0] || f.storage[1] != want[1] || f.clock != -90*time.Minute || !f.holdTieredCopy {
		t.Fatalf("got %+v, want %v, clock -1h30m and the tiered copy held", f, want)
	}
	for _, bad := range []string{"io", "slow /data", "full ", "clock soon", "hold", "hold everything"} {
		if _, err := parseTestFaults([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if f, err := parseTestFaults(nil); err != nil || len(f.storage) != 0 || f.clock != 0 || f.holdTieredCopy {
		t.Fatalf("no file: %+v %v", f, err)
	}
}
