package storage

import (
	"testing"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

// The cleaner cleans segments whose files the segment cache closed (idle
// partitions, or a log just moved to another dir): their indexes are read
// only under a pin, which opens them again.
func TestCleanerCleansSegmentsWithClosedFiles(t *testing.T) {
	l, clock := compactLog(t, vfs.NewMemFS(), compactConfig())
	writeVersions(t, l, clock, 30, 10)
	want := latestPerKey(readAll(t, l))
	if n := l.segCache.closeIdle(time.Now().Add(time.Hour)); n == 0 {
		t.Fatal("no segment files closed")
	}
	cl := newTestCleaner(l, 1<<20)
	cleanRound(t, cl, l, -1)
	if got := latestPerKey(readAll(t, l)); len(got) != len(want) {
		t.Fatalf("%d keys after cleaning, want %d", len(got), len(want))
	}
}
