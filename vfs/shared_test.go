package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// countingFile records whether the underlying file was closed.
type countingFile struct {
	File
	closed int
}

func (c *countingFile) Close() error { c.closed++; return c.File.Close() }

func TestSharedFileClosesAfterTheLastRange(t *testing.T) {
	m := NewMemFS()
	writeFile(t, m, "/seg", "0123456789", false)
	f, err := m.OpenFile("/seg", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	cf := &countingFile{File: f}
	s := NewSharedFile(cf)
	r1, err := s.Range(2, 3)
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := s.Range(5, 5)
	copyOfR1 := r1
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Range(0, 1); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("range of a closed file: %v", err)
	}
	if cf.closed != 0 {
		t.Fatal("closed while ranges hold it")
	}
	// The owner's removal of the file does not disturb the ranges.
	if err := m.Remove("/seg"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	if _, err := r1.File.ReadAt(buf, r1.Pos); err != nil || string(buf) != "234" {
		t.Fatalf("read through a range: %q %v", buf, err)
	}
	r1.Release()
	copyOfR1.Release() // a copy shares the reference: no second release
	r1.Release()
	if cf.closed != 0 {
		t.Fatal("a range released twice closed the file under another range")
	}
	r2.Release()
	if cf.closed != 1 {
		t.Fatalf("file closed %d times after the last release", cf.closed)
	}
	FileRange{}.Release() // the zero range holds nothing
}

func TestSharedFileWithoutRangesClosesAtOnce(t *testing.T) {
	f, err := OSFS{}.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSharedFile(f)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	if _, err := f.Stat(); err == nil {
		t.Fatal("file still open")
	}
}
