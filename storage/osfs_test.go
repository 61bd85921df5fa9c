package storage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

// TestOSFSMappedIndexes runs the log on the real filesystem, where the
// indexes are memory-mapped: preallocated while active, trimmed on roll and
// close, and read back after reopening.
func TestOSFSMappedIndexes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	cfg := smallConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 200
	l := openTest(t, vfs.OSFS{}, dir, cfg)
	if !l.active().offsets.mapped {
		t.Fatal("index not memory-mapped on OSFS")
	}
	written := map[int64][]byte{}
	for i := 0; i < 60; i++ {
		res := mustAppend(t, l, makeBatch(t, batchSpec{n: 2, value: 40, pid: -1}))
		r, _ := l.Read(res.FirstOffset, 1, res.FirstOffset+1, true)
		written[res.FirstOffset] = readRange(t, r)
	}
	act := l.active()
	st, _ := os.Stat(segmentFileName(dir, act.baseOffset, indexSuffix))
	if st.Size() != int64(cfg.SegmentIndexBytes) {
		t.Fatalf("active index is %d bytes, want preallocated %d", st.Size(), cfg.SegmentIndexBytes)
	}
	first := l.segments[0]
	st, _ = os.Stat(segmentFileName(dir, first.baseOffset, indexSuffix))
	if st.Size() != int64(first.offsets.count()*8) || st.Size() == 0 {
		t.Fatalf("rolled index is %d bytes for %d entries", st.Size(), first.offsets.count())
	}
	checkLog(t, l, written)
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openTest(t, vfs.OSFS{}, dir, cfg, func(o *LogOptions) { o.CleanShutdown = true; o.RecoveryPoint = leo })
	defer l2.Close()
	checkLog(t, l2, written)
	for off := int64(0); off < leo; off += 3 {
		if _, ts, _, found, err := l2.OffsetForTimestamp(testNowMs); err != nil || !found || ts != testNowMs {
			t.Fatalf("by timestamp: %v %v", found, err)
		}
	}
}
