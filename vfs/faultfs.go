package vfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
)

// FaultKind is what goes wrong under a directory of a FaultFS.
type FaultKind int

const (
	// FaultIO fails every operation with EIO: a failing disk.
	FaultIO FaultKind = iota + 1
	// FaultFull fails every write and every directory creation with
	// ENOSPC, and reports no free space: a full disk. Reads, renames,
	// removals and syncs still work, so freeing space is possible.
	FaultFull
)

// Fault is one directory tree whose operations fail.
type Fault struct {
	Dir  string
	Kind FaultKind
}

// FaultFS wraps an FS (the real one, typically) and fails the operations
// under chosen directories, on files opened before the fault was set too.
// MemFS's hooks serve unit tests; FaultFS serves tests of the whole binary
// on a real disk (cmd/gregor's GREGOR_TEST_FAULTS_FILE hook), where making
// a disk fail or fill needs root. Without faults it costs an atomic load
// per operation.
//
// Files keep their OSFile when the wrapped FS's have one, so sendfile and
// the indexes' memory maps work as without the wrapper; what goes through
// them (bytes sent to a client, index entries) is not failed.
type FaultFS struct {
	fsys   FS
	faults atomic.Pointer[[]Fault]
}

// NewFaultFS wraps fsys, with no fault set.
func NewFaultFS(fsys FS) *FaultFS { return &FaultFS{fsys: fsys} }

// SetFaults replaces the faults (nil or empty: none).
func (f *FaultFS) SetFaults(faults []Fault) {
	cleaned := make([]Fault, len(faults))
	for i, ft := range faults {
		cleaned[i] = Fault{Dir: filepath.Clean(ft.Dir), Kind: ft.Kind}
	}
	f.faults.Store(&cleaned)
}

// fault is the kind of fault set over name, 0 if none.
func (f *FaultFS) fault(name string) FaultKind {
	p := f.faults.Load()
	if p == nil || len(*p) == 0 {
		return 0
	}
	name = filepath.Clean(name)
	for _, ft := range *p {
		if name == ft.Dir || strings.HasPrefix(name, ft.Dir+string(filepath.Separator)) {
			return ft.Kind
		}
	}
	return 0
}

// check fails op on name under a fault: every op under FaultIO, writes
// (write set) under FaultFull.
func (f *FaultFS) check(op, name string, write bool) error {
	switch f.fault(name) {
	case FaultIO:
		return &fs.PathError{Op: op, Path: name, Err: syscall.EIO}
	case FaultFull:
		if write {
			return &fs.PathError{Op: op, Path: name, Err: syscall.ENOSPC}
		}
	}
	return nil
}

func (f *FaultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if err := f.check("open", name, false); err != nil {
		return nil, err
	}
	file, err := f.fsys.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	ff := &faultFile{File: file, fsys: f, name: name}
	if osf, ok := file.(OSFiler); ok {
		return &faultOSFile{faultFile: ff, osf: osf}, nil
	}
	return ff, nil
}

func (f *FaultFS) Remove(name string) error {
	if err := f.check("remove", name, false); err != nil {
		return err
	}
	return f.fsys.Remove(name)
}

func (f *FaultFS) RemoveAll(name string) error {
	if err := f.check("removeall", name, false); err != nil {
		return err
	}
	return f.fsys.RemoveAll(name)
}

func (f *FaultFS) Rename(oldName, newName string) error {
	if err := f.check("rename", oldName, false); err != nil {
		return err
	}
	if err := f.check("rename", newName, false); err != nil {
		return err
	}
	return f.fsys.Rename(oldName, newName)
}

func (f *FaultFS) MkdirAll(dir string, perm fs.FileMode) error {
	if err := f.check("mkdir", dir, true); err != nil {
		return err
	}
	return f.fsys.MkdirAll(dir, perm)
}

func (f *FaultFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	if err := f.check("readdir", dir, false); err != nil {
		return nil, err
	}
	return f.fsys.ReadDir(dir)
}

func (f *FaultFS) Stat(name string) (fs.FileInfo, error) {
	if err := f.check("stat", name, false); err != nil {
		return nil, err
	}
	return f.fsys.Stat(name)
}

func (f *FaultFS) SyncDir(dir string) error {
	if err := f.check("syncdir", dir, false); err != nil {
		return err
	}
	return f.fsys.SyncDir(dir)
}

func (f *FaultFS) SyncFS(dir string) error {
	if err := f.check("syncfs", dir, false); err != nil {
		return err
	}
	return f.fsys.SyncFS(dir)
}

func (f *FaultFS) DiskUsage(dir string) (total, free int64, err error) {
	if err := f.check("statfs", dir, false); err != nil {
		return 0, 0, err
	}
	total, free, err = f.fsys.DiskUsage(dir)
	if err == nil && f.fault(dir) == FaultFull {
		free = 0
	}
	return total, free, err
}

// faultFile is a file of a FaultFS: each operation checks the faults set
// now, not those set when it was opened.
type faultFile struct {
	File
	fsys *FaultFS
	name string
}

func (f *faultFile) Read(p []byte) (int, error) {
	if err := f.fsys.check("read", f.name, false); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fsys.check("read", f.name, false); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fsys.check("write", f.name, true); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fsys.check("write", f.name, true); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	if err := f.fsys.check("sync", f.name, false); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fsys.check("truncate", f.name, false); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// faultOSFile is a faultFile over a real file descriptor.
type faultOSFile struct {
	*faultFile
	osf OSFiler
}

func (f *faultOSFile) OSFile() *os.File { return f.osf.OSFile() }
