package storage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	defer l.Close()
	written := map[int64][]byte{}
	for i := 0; i < 60; i++ {
		res := mustAppend(t, l, makeBatch(t, batchSpec{n: 2, value: 40, pid: -1}))
		r, _ := l.Read(res.FirstOffset, 1, res.FirstOffset+1, true)
		written[res.FirstOffset] = readRange(t, r)
	}
	act := l.active()
	// A new segment's index is created with its first entry.
	if act.offsets.count() == 0 || !act.offsets.mapped {
		t.Fatalf("index of %d entries not memory-mapped on OSFS", act.offsets.count())
	}
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

// openDescriptorsOf counts the process's descriptors open on paths that
// contain part.
func openDescriptorsOf(t *testing.T, part string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.Contains(target, part) {
			n++
		}
	}
	return n
}

// A range read from a segment keeps the segment file open after the
// segment is deleted (DeleteRecords with file.delete.delay.ms=0 removes the
// files at once) and after the log is closed; releasing it closes the file.
func TestRangeHoldsDeletedSegmentOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	cfg := smallConfig()
	cfg.SegmentBytes = 1024
	l := openTest(t, vfs.OSFS{}, dir, cfg)
	var first []byte
	for i := 0; i < 30; i++ {
		res := mustAppend(t, l, plainBatch(t, 2))
		if i == 0 {
			r, _ := l.Read(res.FirstOffset, 1, 1, true)
			first = readRange(t, r)
		}
	}
	r, err := l.Read(0, 1<<20, l.LogEndOffset(), true)
	if err != nil || r.Size == 0 {
		t.Fatalf("read: %v", err)
	}
	l.AdvanceHighWatermark(l.LogEndOffset())
	if _, err := l.DeleteRecordsBefore(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	segment0 := filepath.Base(segmentFileName(dir, 0, logSuffix))
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(filepath.Join(dir, segment0+deletedSuffix)); os.IsNotExist(err) {
			break // the deletion ran
		}
		if time.Now().After(deadline) {
			t.Fatal("segment never removed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := openDescriptorsOf(t, segment0); n != 1 {
		t.Fatalf("%d descriptors open on the deleted segment while a range holds it, want 1", n)
	}
	buf := make([]byte, len(first))
	if _, err := r.File.ReadAt(buf, r.Pos); err != nil || string(buf) != string(first) {
		t.Fatalf("the range no longer reads its batches: %v", err)
	}
	r.Release()
	r.Release()
	if n := openDescriptorsOf(t, segment0); n != 0 {
		t.Fatalf("%d descriptors still open on the deleted segment after the release", n)
	}
}

// The index mappings are advised random access: a page faults in alone,
// not with a readahead window of a preallocated index's zeroed pages.
// /proc/self/smaps shows the advice as the "rr" VmFlag.
func TestOSFSIndexMappingsAdviseRandomAccess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	l := openTest(t, vfs.OSFS{}, dir, smallConfig())
	defer l.Close()
	// The indexes are created, and mapped, with their first entries.
	for l.active().times.count() == 0 {
		mustAppend(t, l, makeBatch(t, batchSpec{n: 4, value: 100, pid: -1}))
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	act := l.active()
	for _, name := range []string{segmentFileName(dir, act.baseOffset, indexSuffix), segmentFileName(dir, act.baseOffset, timeIndexSuffix)} {
		flags, ok := "", false
		for _, mapping := range strings.Split(string(smaps), "\n") {
			if strings.HasSuffix(mapping, " "+name) {
				ok = true
				continue
			}
			if ok && strings.HasPrefix(mapping, "VmFlags:") {
				flags = mapping
				break
			}
		}
		if !ok {
			t.Fatalf("%s is not mapped", name)
		}
		if !strings.Contains(" "+strings.TrimPrefix(flags, "VmFlags:")+" ", " rr ") {
			t.Errorf("%s: %q, want the random-access advice (rr)", filepath.Base(name), flags)
		}
	}
}
