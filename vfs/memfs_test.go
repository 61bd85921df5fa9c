package vfs

import (
	"errors"
	"math/rand"
	"os"
	"syscall"
	"testing"
)

func TestMemFSCrashDropsUnsyncedWrites(t *testing.T) {
	m := NewMemFS()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := m.OpenFile("/d/a", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("durable"))
	f.Sync()
	f.Write([]byte("-lost"))
	m.Crash(false, nil)
	got, err := ReadFile(m, "/d/a")
	if err != nil || string(got) != "durable" {
		t.Fatalf("after crash got %q, %v", got, err)
	}
}

func TestMemFSTornWriteKeepsPrefix(t *testing.T) {
	m := NewMemFS()
	f, _ := m.OpenFile("/a", os.O_CREATE|os.O_RDWR, 0o644)
	f.Write([]byte("abc"))
	f.Sync()
	f.Write([]byte("defghij"))
	m.Crash(true, rand.New(rand.NewSource(3)))
	got, _ := ReadFile(m, "/a")
	if len(got) < 3 || len(got) > 10 || string(got) != "abcdefghij"[:len(got)] {
		t.Fatalf("torn content %q is not a prefix", got)
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
		if op == OpSync {
			return boom
		}
		return nil
	})
	if err := f.Sync(); !errors.Is(err, boom) {
		t.Fatalf("want injected error, got %v", err)
	}
}

func TestWriteFileAtomicSurvivesCrash(t *testing.T) {
	m := NewMemFS()
	m.MkdirAll("/d", 0o755)
	if err := WriteFileAtomic(m, "/d/cp", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	m.Crash(true, rand.New(rand.NewSource(1)))
	got, _ := ReadFile(m, "/d/cp")
	if string(got) != "v1" {
		t.Fatalf("got %q", got)
	}
}
