package storage

import (
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

// A node made leader assigns its epoch at the log end (AssignLeaderEpoch)
// and may lose the leadership before it appends anything. As a follower it
// is then told to truncate to its own log end: no record goes, but the
// epoch entry that starts there must (Kafka's truncateTo always truncates
// the epoch cache). Otherwise the follower keeps asking with an epoch its
// leader never had and is told to truncate to the same place for ever.
func TestTruncateToTheLogEndDropsAnEpochStartingThere(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	l := openTest(t, fsys, "/d/t-0", cfg)
	if _, _, err := l.Append(plainBatch(t, 5), 3, AppendClient); err != nil {
		t.Fatal(err)
	}
	if start, err := l.AssignLeaderEpoch(4); err != nil || start != 5 {
		t.Fatalf("AssignLeaderEpoch(4): %d, %v", start, err)
	}
	// The flush writes the new epoch into the checkpoint file.
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 5 {
		t.Fatalf("log end %d after truncating to it, want 5", l.LogEndOffset())
	}
	if e, ok := l.LatestEpoch(); !ok || e != 3 {
		t.Fatalf("latest epoch %d (%v) after truncating to the log end, want 3: epoch 4 started there", e, ok)
	}
	if e, end := l.EndOffsetForEpoch(3); e != 3 || end != 5 {
		t.Fatalf("EndOffsetForEpoch(3) = (%d, %d), want (3, 5)", e, end)
	}
	// More records of epoch 3 follow (as from the new leader); nothing assigns a new
	// epoch, so no flush would write the checkpoint again: the truncation
	// must have. After a power loss epoch 4 must not come back and claim
	// offsets 5-6.
	if _, _, err := l.Append(plainBatch(t, 2), 3, AppendClient); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	leo := l.LogEndOffset()
	l.bg.Wait()
	crash(fsys)
	l2 := openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.RecoveryPoint = leo })
	defer l2.Close()
	if e, ok := l2.LatestEpoch(); !ok || e != 3 {
		t.Fatalf("latest epoch %d (%v) after a crash, want 3", e, ok)
	}
	if e, ok := l2.EpochForOffset(6); !ok || e != 3 {
		t.Fatalf("epoch of offset 6 after a crash: %d (%v), want 3", e, ok)
	}
}

// Truncating to the log end when no epoch starts there changes nothing,
// and neither does truncating past it.
func TestTruncateToTheLogEndKeepsEarlierEpochs(t *testing.T) {
	l := openTest(t, vfs.NewMemFS(), "/d/t-0", smallConfig())
	defer l.Close()
	for _, e := range []int32{1, 2} {
		if _, _, err := l.Append(plainBatch(t, 3), e, AppendClient); err != nil {
			t.Fatal(err)
		}
	}
	for _, to := range []int64{6, 9} {
		if err := l.TruncateTo(to); err != nil {
			t.Fatal(err)
		}
		if l.LogEndOffset() != 6 {
			t.Fatalf("log end %d after TruncateTo(%d)", l.LogEndOffset(), to)
		}
		if e, end := l.EndOffsetForEpoch(2); e != 2 || end != 6 {
			t.Fatalf("EndOffsetForEpoch(2) after TruncateTo(%d) = (%d, %d), want (2, 6)", to, e, end)
		}
		if e, end := l.EndOffsetForEpoch(1); e != 1 || end != 3 {
			t.Fatalf("EndOffsetForEpoch(1) after TruncateTo(%d) = (%d, %d), want (1, 3)", to, e, end)
		}
	}
}
