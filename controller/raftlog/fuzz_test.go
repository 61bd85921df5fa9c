package raftlog

import (
	"os"
	"path"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

// FuzzOpen: whatever bytes a segment holds, Open either recovers a log or
// returns an error; it never panics, and a recovered log reopens the same.
func FuzzOpen(f *testing.F) {
	f.Add(frozenSegment())
	f.Add(append(frozenSegment(), 0, 0, 0, 9, 1, 2))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := vfs.NewMemFS()
		fsys.MkdirAll(dir, 0o755)
		f, _ := fsys.OpenFile(path.Join(dir, "wal-00000000000000000001.log"), os.O_CREATE|os.O_WRONLY, 0o644)
		f.Write(data)
		f.Sync()
		f.Close()
		l, err := Open(Options{FS: fsys, Dir: dir})
		if err != nil {
			return
		}
		first, _ := l.LastIndex()
		l.Close()
		l2, err := Open(Options{FS: fsys, Dir: dir})
		if err != nil {
			t.Fatalf("reopen of a recovered log failed: %v", err)
		}
		if again, _ := l2.LastIndex(); again != first {
			t.Fatalf("last index %d then %d", first, again)
		}
		l2.Close()
	})
}
