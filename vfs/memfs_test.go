package vfs

import (
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"syscall"
	"testing"
)

// writeFile creates (or truncates) name with data, syncing the data when
// sync is set; directory entries are left unsynced.
func writeFile(t *testing.T, m *MemFS, name, data string, sync bool) {
	t.Helper()
	f, err := m.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustSyncDir(t *testing.T, m *MemFS, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := m.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
}

func mustMkdir(t *testing.T, m *MemFS, dir string) {
	t.Helper()
	if err := MkdirAllDurable(m, dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// content is the file's content, or "<absent>".
func content(t *testing.T, m *MemFS, name string) string {
	t.Helper()
	data, err := ReadFile(m, name)
	if errors.Is(err, fs.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func expect(t *testing.T, m *MemFS, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if got := content(t, m, name); got != w {
			t.Errorf("%s: got %q, want %q", name, got, w)
		}
	}
}

func TestMemFSCrashDropsUnsyncedWrites(t *testing.T) {
	m := NewMemFS()
	mustMkdir(t, m, "/d")
	f, err := m.OpenFile("/d/a", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("durable"))
	f.Sync()
	f.Write([]byte("-lost"))
	mustSyncDir(t, m, "/d")
	m.Crash(false, nil)
	expect(t, m, map[string]string{"/d/a": "durable"})
}

// Closing a file does not make its data durable (on Linux the data stays
// in the page cache).
func TestMemFSCloseIsNotSync(t *testing.T) {
	m := NewMemFS()
	mustMkdir(t, m, "/d")
	writeFile(t, m, "/d/a", "unsynced", false)
	mustSyncDir(t, m, "/d")
	m.Crash(false, nil)
	expect(t, m, map[string]string{"/d/a": ""})
}

func TestMemFSTornWriteKeepsPrefix(t *testing.T) {
	m := NewMemFS()
	f, _ := m.OpenFile("/a", os.O_CREATE|os.O_RDWR, 0o644)
	f.Write([]byte("abc"))
	f.Sync()
	mustSyncDir(t, m, "/")
	f.Write([]byte("defghij"))
	m.Crash(true, rand.New(rand.NewSource(3)))
	got := content(t, m, "/a")
	if len(got) < 3 || len(got) > 10 || got != "abcdefghij"[:len(got)] {
		t.Fatalf("torn content %q is not a prefix", got)
	}
}

// A file whose data was synced but whose directory entry was not is lost.
func TestMemFSCreateNeedsSyncDir(t *testing.T) {
	m := NewMemFS()
	mustMkdir(t, m, "/d")
	writeFile(t, m, "/d/early", "synced data", true)
	mustSyncDir(t, m, "/d")
	writeFile(t, m, "/d/late", "synced data", true)
	m.Crash(false, nil)
	expect(t, m, map[string]string{"/d/early": "synced data", "/d/late": "<absent>"})

	m2 := NewMemFS()
	mustMkdir(t, m2, "/d")
	writeFile(t, m2, "/d/lost", "synced data", true)
	m2.Crash(false, nil)
	expect(t, m2, map[string]string{"/d/lost": "<absent>"})
}

// A file created then renamed (the write-to-temp-and-rename pattern)
// survives only when the directory is synced after the rename; otherwise
// it reverts to the state of the last SyncDir.
func TestMemFSCreateThenRenameNeedsSyncDir(t *testing.T) {
	for _, synced := range []bool{false, true} {
		m := NewMemFS()
		mustMkdir(t, m, "/d")
		writeFile(t, m, "/d/cp.tmp", "v1", true)
		if err := m.Rename("/d/cp.tmp", "/d/cp"); err != nil {
			t.Fatal(err)
		}
		if synced {
			mustSyncDir(t, m, "/d")
		}
		m.Crash(false, nil)
		if synced {
			expect(t, m, map[string]string{"/d/cp": "v1", "/d/cp.tmp": "<absent>"})
		} else {
			expect(t, m, map[string]string{"/d/cp": "<absent>", "/d/cp.tmp": "<absent>"})
		}
	}
	// Replacing an existing file: without a SyncDir the old content is
	// back, and the temporary name (synced before) too.
	m := NewMemFS()
	mustMkdir(t, m, "/d")
	writeFile(t, m, "/d/cp", "v1", true)
	mustSyncDir(t, m, "/d")
	writeFile(t, m, "/d/cp.tmp", "v2", true)
	mustSyncDir(t, m, "/d")
	if err := m.Rename("/d/cp.tmp", "/d/cp"); err != nil {
		t.Fatal(err)
	}
	expect(t, m, map[string]string{"/d/cp": "v2", "/d/cp.tmp": "<absent>"})
	m.Crash(false, nil)
	expect(t, m, map[string]string{"/d/cp": "v1", "/d/cp.tmp": "v2"})
}

func TestWriteFileAtomicSurvivesCrash(t *testing.T) {
	m := NewMemFS()
	mustMkdir(t, m, "/d")
	if err := WriteFileAtomic(m, "/d/cp", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	m.Crash(false, nil)
	expect(t, m, map[string]string{"/d/cp": "v1", "/d/cp.tmp": "<absent>"})
	if err := WriteFileAtomic(m, "/d/cp", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	m.Crash(true, rand.New(rand.NewSource(1)))
	expect(t, m, map[string]string{"/d/cp": "v2", "/d/cp.tmp": "<absent>"})
}

func TestMemFSRenameWithinDir(t *testing.T) {
	m := NewMemFS()
	mustMkdir(t, m, "/d")
	writeFile(t, m, "/d/a", "content", true)
	mustSyncDir(t, m, "/d")
	if err := m.Rename("/d/a", "/d/b"); err != nil {
		t.Fatal(err)
	}
	m.Crash(false, nil)
	expect(t, m, map[string]string{"/d/a": "content", "/d/b": "<absent>"})
	if err := m.Rename("/d/a", "/d/b"); err != nil {
		t.Fatal(err)
	}
	mustSyncDir(t, m, "/d")
	m.Crash(false, nil)
	expect(t, m, map[string]string{"/d/a": "<absent>", "/d/b": "content"})
}

// A rename across directories needs both directories synced: the
// destination for the new name, the source for the removal of the old one.
func TestMemFSRenameAcrossDirs(t *testing.T) {
	cases := []struct {
		syncSrc, syncDst bool
		want             map[string]string
	}{
		{false, false, map[string]string{"/src/f": "x", "/dst/f": "<absent>"}},
		{true, true, map[string]string{"/src/f": "<absent>", "/dst/f": "x"}},
		// The same inode under both names, as a hard link.
		{false, true, map[string]string{"/src/f": "x", "/dst/f": "x"}},
		{true, false, map[string]string{"/src/f": "<absent>", "/dst/f": "<absent>"}},
	}
	for _, c := range cases {
		m := NewMemFS()
		mustMkdir(t, m, "/src")
		mustMkdir(t, m, "/dst")
		writeFile(t, m, "/src/f", "x", true)
		mustSyncDir(t, m, "/src")
		if err := m.Rename("/src/f", "/dst/f"); err != nil {
			t.Fatal(err)
		}
		if c.syncSrc {
			mustSyncDir(t, m, "/src")
		}
		if c.syncDst {
			mustSyncDir(t, m, "/dst")
		}
		m.Crash(false, nil)
		expect(t, m, c.want)
	}
}

// A removal comes back after a crash, with its durable content, unless
// the directory was synced after it.
func TestMemFSRemoveNeedsSyncDir(t *testing.T) {
	m := NewMemFS()
	mustMkdir(t, m, "/d")
	f, _ := m.OpenFile("/d/a", os.O_CREATE|os.O_RDWR, 0o644)
	f.Write([]byte("durable"))
	f.Sync()
	f.Write([]byte("+cache"))
	f.Close()
	mustSyncDir(t, m, "/d")
	if err := m.Remove("/d/a"); err != nil {
		t.Fatal(err)
	}
	m.Crash(false, nil)
	expect(t, m, map[string]string{"/d/a": "durable"})
	if err := m.Remove("/d/a"); err != nil {
		t.Fatal(err)
	}
	mustSyncDir(t, m, "/d")
	m.Crash(false, nil)
	expect(t, m, map[string]string{"/d/a": "<absent>"})
}

// Each directory of a MkdirAll chain is an entry in its parent.
func TestMemFSMkdirAllChain(t *testing.T) {
	m := NewMemFS()
	if err := m.MkdirAll("/a/b/c", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m, "/a/b/c/f", "x", true)
	mustSyncDir(t, m, "/a/b/c", "/a/b") // but not "/" nor "/a"
	m.Crash(false, nil)
	if _, err := m.Stat("/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unsynced mkdir survived: %v", err)
	}

	m = NewMemFS()
	if err := MkdirAllDurable(m, "/a/b/c", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m, "/a/b/c/f", "x", true)
	mustSyncDir(t, m, "/a/b/c")
	m.Crash(false, nil)
	expect(t, m, map[string]string{"/a/b/c/f": "x"})
	// Existing parents are left alone; only new levels are synced.
	if err := MkdirAllDurable(m, "/a/b/c/d/e", 0o755); err != nil {
		t.Fatal(err)
	}
	m.Crash(false, nil)
	if _, err := m.Stat("/a/b/c/d/e"); err != nil {
		t.Fatalf("durable mkdir lost: %v", err)
	}
}

// RemoveAll takes the tree's entry out of its parent; the tree (with its
// durable entries and content) is back after a crash unless the parent
// was synced.
func TestMemFSRemoveAllTree(t *testing.T) {
	build := func() *MemFS {
		m := NewMemFS()
		mustMkdir(t, m, "/p/tree/sub")
		writeFile(t, m, "/p/tree/f", "f", true)
		writeFile(t, m, "/p/tree/sub/g", "g", true)
		writeFile(t, m, "/p/tree/sub/unsynced-entry", "h", true)
		mustSyncDir(t, m, "/p/tree")
		mustSyncDir(t, m, "/p/tree/sub")
		writeFile(t, m, "/p/tree/late", "late", true)
		return m
	}
	m := build()
	if err := m.RemoveAll("/p/tree"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Stat("/p/tree"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("tree still visible")
	}
	m.Crash(false, nil)
	expect(t, m, map[string]string{"/p/tree/f": "f", "/p/tree/sub/g": "g", "/p/tree/sub/unsynced-entry": "h", "/p/tree/late": "<absent>"})

	m = build()
	if err := m.RemoveAll("/p/tree"); err != nil {
		t.Fatal(err)
	}
	mustSyncDir(t, m, "/p")
	m.Crash(false, nil)
	if _, err := m.Stat("/p/tree"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("synced RemoveAll came back")
	}
	if err := m.RemoveAll("/p/nothing"); err != nil {
		t.Fatalf("RemoveAll of a missing path: %v", err)
	}
}

// Renaming a directory moves its subtree; durability of the move is the
// parent's, durability of the contents stays with the moved directory.
func TestMemFSRenameDir(t *testing.T) {
	m := NewMemFS()
	mustMkdir(t, m, "/p/part-0")
	writeFile(t, m, "/p/part-0/seg", "data", true)
	mustSyncDir(t, m, "/p/part-0")
	if err := m.Rename("/p/part-0", "/p/part-0.x-delete"); err != nil {
		t.Fatal(err)
	}
	expect(t, m, map[string]string{"/p/part-0.x-delete/seg": "data", "/p/part-0/seg": "<absent>"})
	m.Crash(false, nil)
	expect(t, m, map[string]string{"/p/part-0/seg": "data", "/p/part-0.x-delete/seg": "<absent>"})
	if err := m.Rename("/p/part-0", "/p/part-0.x-delete"); err != nil {
		t.Fatal(err)
	}
	mustSyncDir(t, m, "/p")
	m.Crash(false, nil)
	expect(t, m, map[string]string{"/p/part-0.x-delete/seg": "data", "/p/part-0/seg": "<absent>"})

	if err := m.Rename("/p", "/p/part-0.x-delete/inside"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("rename into own subtree: %v", err)
	}
	mustMkdir(t, m, "/q/nonempty")
	writeFile(t, m, "/q/nonempty/f", "", false)
	if err := m.Rename("/p", "/q/nonempty"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rename onto a non-empty dir: %v", err)
	}
}

// Handles opened before a crash belong to the dead process.
func TestMemFSHandlesDieWithTheCrash(t *testing.T) {
	m := NewMemFS()
	f, _ := m.OpenFile("/a", os.O_CREATE|os.O_RDWR, 0o644)
	f.Write([]byte("x"))
	f.Sync()
	mustSyncDir(t, m, "/")
	m.Crash(false, nil)
	if _, err := f.Write([]byte("y")); !errors.Is(err, errCrashed) {
		t.Fatalf("write through a pre-crash handle: %v", err)
	}
	if err := f.Sync(); !errors.Is(err, errCrashed) {
		t.Fatalf("sync through a pre-crash handle: %v", err)
	}
	expect(t, m, map[string]string{"/a": "x"})
}

// A removed file stays readable through a handle opened before the removal.
func TestMemFSRemovedFileStaysOpen(t *testing.T) {
	m := NewMemFS()
	writeFile(t, m, "/a", "still here", false)
	f, _ := m.OpenFile("/a", os.O_RDONLY, 0)
	if err := m.Remove("/a"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if n, _ := f.ReadAt(buf, 0); string(buf[:n]) != "still here" {
		t.Fatalf("read %q", buf[:n])
	}
}

func TestMemFSErrors(t *testing.T) {
	m := NewMemFS()
	if _, err := m.OpenFile("/missing/a", os.O_CREATE|os.O_RDWR, 0o644); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("create in a missing dir: %v", err)
	}
	mustMkdir(t, m, "/d")
	writeFile(t, m, "/d/f", "", false)
	if err := m.MkdirAll("/d/f/x", 0o755); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("mkdir under a file: %v", err)
	}
	if err := m.Remove("/d"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("remove non-empty dir: %v", err)
	}
	if _, err := m.OpenFile("/d", os.O_RDWR, 0); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("open a dir: %v", err)
	}
	if err := m.SyncDir("/nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("syncdir missing: %v", err)
	}
}

func TestMemFSCapacityAndInjectedFaults(t *testing.T) {
	m := NewMemFS()
	m.SetCapacity(4)
	f, _ := m.OpenFile("/a", os.O_CREATE|os.O_RDWR, 0o644)
	if _, err := f.Write([]byte("12345")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("want ENOSPC, got %v", err)
	}
	m.SetCapacity(0)
	boom := errors.New("boom")
	m.Inject(func(op Op, name string) error {
		if op == OpSync || op == OpSyncDir {
			return boom
		}
		return nil
	})
	if err := f.Sync(); !errors.Is(err, boom) {
		t.Fatalf("want injected error, got %v", err)
	}
	if err := m.SyncDir("/"); !errors.Is(err, boom) {
		t.Fatalf("want injected error, got %v", err)
	}
}

// CrashClone keeps what a crash would and leaves the original running.
func TestMemFSCrashClone(t *testing.T) {
	m := NewMemFS()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	m.SyncDir("/")
	f, _ := m.OpenFile("/d/kept", os.O_CREATE|os.O_RDWR, 0o644)
	f.Write([]byte("synced"))
	f.Sync()
	f.Write([]byte("+lost"))
	m.SyncDir("/d")
	g, _ := m.OpenFile("/d/unlinked", os.O_CREATE|os.O_RDWR, 0o644)
	g.Write([]byte("x"))
	g.Sync()

	c := m.CrashClone()
	if data, err := ReadFile(c, "/d/kept"); err != nil || string(data) != "synced" {
		t.Fatalf("clone holds %q, %v", data, err)
	}
	if _, err := c.Stat("/d/unlinked"); err == nil {
		t.Fatal("a file whose dir was not synced survived")
	}
	if data, _ := ReadFile(m, "/d/kept"); string(data) != "synced+lost" {
		t.Fatalf("the original changed: %q", data)
	}
	if _, err := f.Write([]byte("!")); err != nil {
		t.Fatalf("the original's handles died: %v", err)
	}
	h, _ := c.OpenFile("/d/kept", os.O_RDWR, 0)
	h.WriteAt([]byte("S"), 0)
	if data, _ := ReadFile(m, "/d/kept"); data[0] != 's' {
		t.Fatal("the clone shares data with the original")
	}
}
