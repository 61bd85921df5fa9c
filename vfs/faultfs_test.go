package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestFaultFS(t *testing.T) {
	root := t.TempDir()
	bad, good := filepath.Join(root, "bad"), filepath.Join(root, "good")
	f := NewFaultFS(OSFS{})
	for _, d := range []string{bad, good} {
		if err := f.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	open := func(dir string) File {
		file, err := f.OpenFile(filepath.Join(dir, "x"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { file.Close() })
		return file
	}
	fb, fg := open(bad), open(good)
	if _, ok := fb.(OSFiler); !ok {
		t.Fatal("a real file lost its OSFile")
	}
	if _, err := fb.Write([]byte("before")); err != nil {
		t.Fatal(err)
	}

	f.SetFaults([]Fault{{Dir: bad + "/", Kind: FaultFull}})
	if _, err := fb.WriteAt([]byte("more"), 6); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk: %v", err)
	}
	if err := f.MkdirAll(filepath.Join(bad, "sub"), 0o755); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("mkdir on a full disk: %v", err)
	}
	buf := make([]byte, 6)
	if _, err := fb.ReadAt(buf, 0); err != nil || string(buf) != "before" {
		t.Fatalf("read on a full disk: %q %v", buf, err)
	}
	if err := fb.Sync(); err != nil {
		t.Fatalf("sync on a full disk: %v", err)
	}
	if _, free, err := f.DiskUsage(bad); err != nil || free != 0 {
		t.Fatalf("full disk reports %d free (%v)", free, err)
	}
	if _, err := fg.Write([]byte("fine")); err != nil {
		t.Fatalf("write beside the full dir: %v", err)
	}

	f.SetFaults([]Fault{{Dir: bad, Kind: FaultIO}})
	if _, err := fb.ReadAt(buf, 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read on a failing disk: %v", err)
	}
	if err := fb.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync on a failing disk: %v", err)
	}
	if _, err := f.OpenFile(filepath.Join(bad, "y"), os.O_CREATE|os.O_RDWR, 0o644); !errors.Is(err, syscall.EIO) {
		t.Fatalf("open on a failing disk: %v", err)
	}
	if _, err := f.ReadDir(bad); !errors.Is(err, syscall.EIO) {
		t.Fatalf("readdir on a failing disk: %v", err)
	}
	if _, err := f.Stat(bad + "x"); err == nil || errors.Is(err, syscall.EIO) {
		t.Fatalf("a sibling whose name starts like the dir: %v", err)
	}

	f.SetFaults(nil)
	if _, err := fb.WriteAt([]byte("more"), 6); err != nil {
		t.Fatalf("write once the fault is cleared: %v", err)
	}
}
