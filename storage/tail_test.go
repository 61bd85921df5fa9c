package storage

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/vfs"
)

// tailConfig keeps every batch in one segment, with an index entry only
// every few batches (so that the file path scans several headers).
func tailConfig() config.Topic {
	c := smallConfig()
	c.SegmentBytes = 1 << 20
	c.SegmentIndexBytes = 4096
	c.IndexIntervalBytes = 700
	return c
}

// appendVaried appends batches of one to four records of about 100 bytes.
func appendVaried(t *testing.T, l *Log, batches int) {
	t.Helper()
	for i := 0; i < batches; i++ {
		mustAppend(t, l, makeBatch(t, batchSpec{n: 1 + i%4, value: 60 + 17*(i%5), pid: -1}))
	}
}

type segmentRead struct {
	pos, size, next int64
	found           bool
	err             error
}

func readSegment(s *segment, target int64, maxBytes int32, maxOffset int64, minOne bool) segmentRead {
	r, next, found, err := s.read(target, maxBytes, maxOffset, minOne)
	r.Release()
	return segmentRead{pos: r.Pos, size: r.Size, next: next, found: found, err: err}
}

// Reads answered from the remembered tail are the reads the file gives:
// for every offset, limit and bound, with and without the first batch
// forced in.
func TestTailReadsMatchTheFile(t *testing.T) {
	l := openTest(t, vfs.NewMemFS(), "/t-0", tailConfig())
	defer l.Close()
	appendVaried(t, l, 30)
	s := l.active()
	tail := s.tail.Load()
	if tail == nil || tail.n != tailBatchCount {
		t.Fatalf("the active segment remembers %+v, want its last %d batches", tail, tailBatchCount)
	}
	leo := l.LogEndOffset()
	for target := int64(0); target <= leo; target++ {
		for _, maxBytes := range []int32{1, 150, 400, 1 << 20} {
			for _, maxOffset := range []int64{leo, leo - 2, target + 1, target} {
				for _, minOne := range []bool{true, false} {
					got := readSegment(s, target, maxBytes, maxOffset, minOne)
					s.tail.Store(nil)
					want := readSegment(s, target, maxBytes, maxOffset, minOne)
					s.tail.Store(tail)
					if got != want {
						t.Fatalf("read(%d, %d, %d, %v): from the tail %+v, from the file %+v", target, maxBytes, maxOffset, minOne, got, want)
					}
				}
			}
		}
	}
}

// A read at the tail touches no file: it works while every read of the
// file fails, and one of an older batch still reads the file.
func TestTailReadsWithoutTheFile(t *testing.T) {
	fsys := vfs.NewMemFS()
	l := openTest(t, fsys, "/t-0", tailConfig())
	defer l.Close()
	appendVaried(t, l, 30)
	leo := l.LogEndOffset()
	want := readRange(t, mustRead(t, l, leo-1))
	if len(want) == 0 {
		t.Fatal("nothing read at the tail")
	}
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpRead && strings.HasSuffix(name, logSuffix) {
			return errors.New("injected read failure")
		}
		return nil
	})
	r := mustRead(t, l, leo-1)
	if r.Size != int64(len(want)) {
		t.Fatalf("tail read without the file: %d bytes, want %d", r.Size, len(want))
	}
	r.Release()
	if r, err := l.Read(0, 1<<20, leo, true); err == nil {
		r.Release()
		t.Fatal("a read from the log's start did not read the file")
	}
}

func mustRead(t *testing.T, l *Log, offset int64) vfs.FileRange {
	t.Helper()
	r, err := l.Read(offset, 1<<20, l.LogEndOffset(), true)
	if err != nil {
		t.Fatalf("Read(%d): %v", offset, err)
	}
	return r
}

// The tail is the active segment's only: a roll drops the old segment's,
// a truncation forgets what it cut, and reads stay right through both.
func TestTailForgottenOnRollAndTruncation(t *testing.T) {
	cfg := tailConfig()
	cfg.SegmentBytes = 4096
	l := openTest(t, vfs.OSFS{}, filepath.Join(t.TempDir(), "t-0"), cfg)
	defer l.Close()
	appendVaried(t, l, 60)
	if len(l.segments) < 2 {
		t.Fatalf("%d segments, want a roll", len(l.segments))
	}
	for _, s := range l.segments[:len(l.segments)-1] {
		if s.tail.Load() != nil {
			t.Fatalf("inactive segment %d still remembers its tail", s.baseOffset)
		}
	}
	act := l.active()
	if act.tail.Load() == nil {
		t.Fatal("the active segment remembers nothing")
	}
	if err := l.TruncateTo(l.LogEndOffset() - 3); err != nil {
		t.Fatal(err)
	}
	if l.active() != act || act.tail.Load() != nil {
		t.Fatal("the truncated segment still remembers batches it may have cut")
	}
	cut := l.LogEndOffset()
	if r, err := l.Read(cut, 1<<20, cut+1, true); err != nil || r.Size != 0 {
		t.Fatalf("a read at the cut: %d bytes, %v", r.Size, err)
	}
	appendVaried(t, l, 3)
	next := cut
	for next < l.LogEndOffset() {
		r := mustRead(t, l, next)
		s := act.tail.Load()
		act.tail.Store(nil)
		fromFile := mustRead(t, l, next)
		act.tail.Store(s)
		if r.Pos != fromFile.Pos || r.Size != fromFile.Size || r.Size == 0 {
			t.Fatalf("read at %d after truncation: tail %d+%d, file %d+%d", next, r.Pos, r.Size, fromFile.Pos, fromFile.Size)
		}
		r.Release()
		fromFile.Release()
		next++
	}
}

// A read at the tail allocates only the range's reference to its file.
func TestReadAtTailAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	l := openTest(t, vfs.OSFS{}, filepath.Join(t.TempDir(), "t-0"), tailConfig())
	defer l.Close()
	appendVaried(t, l, 30)
	leo := l.LogEndOffset()
	allocs := testing.AllocsPerRun(100, func() {
		r, err := l.Read(leo-2, 1<<20, leo, true)
		if err != nil || r.Size == 0 {
			t.Fatalf("read: %d bytes, %v", r.Size, err)
		}
		r.Release()
	})
	if allocs > 1 {
		t.Fatalf("%v allocations per read at the tail, want at most the range's reference", allocs)
	}
}
