package storage

import (
	"testing"

	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// A follower starting over at the leader's local log start from remote
// storage gets the leader's log start below it, the remote segment's
// epochs and its producer state; reads between the two starts are
// OFFSET_MOVED_TO_TIERED_STORAGE, and the log start stays below the local
// one across a restart when remote storage is on.
func TestStartOverFromRemoteKeepsTwoStarts(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	cfg.RemoteStorageEnable = true
	l := openTest(t, fsys, "/d/t-0", cfg)
	mustAppend(t, l, plainBatch(t, 5))
	// The producer state of a remote segment's snapshot: one producer.
	snapLog := openTest(t, vfs.NewMemFS(), "/s/t-0", smallConfig())
	mustAppend(t, snapLog, makeBatch(t, batchSpec{n: 3, value: 20, pid: 42, epoch: 1, seq: 0}))
	snapshot := encodeSnapshot(snapLog.producers.producers)
	snapLog.Close()

	epochs := []EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 4, StartOffset: 60}, {Epoch: 6, StartOffset: 90}}
	if err := l.StartOverFromRemote(100, 20, epochs, snapshot); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 20 || l.LocalLogStartOffset() != 100 || l.LogEndOffset() != 100 {
		t.Fatalf("log start %d, local log start %d, log end %d; want 20, 100, 100", l.LogStartOffset(), l.LocalLogStartOffset(), l.LogEndOffset())
	}
	if e, ok := l.EpochForOffset(70); !ok || e != 4 {
		t.Fatalf("epoch of offset 70: %d %v, want 4", e, ok)
	}
	if e, ok := l.EpochForOffset(20); !ok || e != 1 {
		t.Fatalf("epoch of offset 20 (the log start): %d %v, want 1", e, ok)
	}
	if l.ProducerCount() != 1 {
		t.Fatalf("%d producers after the remote snapshot, want 1", l.ProducerCount())
	}
	if _, err := l.Read(50, 1<<20, 100, true); kerrOf(err) != kerr.OffsetMovedToTieredStorage {
		t.Fatalf("a read between the starts: %v", err)
	}
	if _, err := l.Read(10, 1<<20, 100, true); kerrOf(err) != kerr.OffsetOutOfRange {
		t.Fatalf("a read below the log start: %v", err)
	}
	mustAppend(t, l, plainBatch(t, 2))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.LogStartOffset = 20 })
	if l.LogStartOffset() != 20 || l.LocalLogStartOffset() != 100 {
		t.Fatalf("reopened: log start %d, local log start %d; want 20 and 100", l.LogStartOffset(), l.LocalLogStartOffset())
	}
	l.Close()
	cfg.RemoteStorageEnable = false
	l = openTest(t, fsys, "/d/t-0", cfg, func(o *LogOptions) { o.LogStartOffset = 20 })
	defer l.Close()
	if l.LogStartOffset() != 100 {
		t.Fatalf("reopened without remote storage: log start %d, want the first segment's 100", l.LogStartOffset())
	}
}
