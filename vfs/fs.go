// Package vfs is the filesystem seam under storage and the controller's
// raft log: the FS interface, the real filesystem (OSFS), and an in-memory
// filesystem (MemFS) whose crash forgets what was not made durable, with
// fault injection for I/O errors, torn writes and a full disk. Nothing here
// knows what the files mean.
//
// It imports nothing of Gregor's (the README's import table).
package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// FS is the narrow filesystem surface that the log, its indexes, the
// checkpoints and the controller's raft log use. Every file operation goes
// through it so that crash, torn-write, full-disk and I/O-error behaviour can
// be tested with an in-memory or fault-injecting implementation (see
// memfs.go) instead of a real disk.
type FS interface {
	// OpenFile opens name with os.OpenFile's flag semantics.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Remove(name string) error
	// RemoveAll removes a directory tree (a deleted partition).
	RemoveAll(name string) error
	Rename(oldName, newName string) error
	MkdirAll(dir string, perm fs.FileMode) error
	ReadDir(dir string) ([]fs.DirEntry, error)
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes renames, creations and removals in dir durable.
	SyncDir(dir string) error
	// SyncFS makes everything written on the filesystem holding dir
	// durable: every file's data and every directory's entries
	// (syncfs(2)). A clean shutdown makes its many small writes durable
	// with it, in place of an fsync per file and directory.
	SyncFS(dir string) error
	// DiskUsage reports the total and free bytes of the filesystem holding
	// dir (DescribeLogDirs reports them).
	DiskUsage(dir string) (total, free int64, err error)
}

// File is an open file. Writes at the end use Write; indexes that are
// rewritten in place use WriteAt.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Seeker
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
	Close() error
	Name() string
}

// OSFiler is implemented by files backed by a real file descriptor. The
// broker uses it to send fetch responses with sendfile(2) and the index code
// uses it to mmap. Files that do not implement it are read with ReadAt.
type OSFiler interface {
	OSFile() *os.File
}

// OSFS is the real filesystem.
type OSFS struct{}

type osFile struct{ *os.File }

func (f osFile) OSFile() *os.File { return f.File }

func (OSFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (OSFS) Remove(name string) error                    { return os.Remove(name) }
func (OSFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (OSFS) Rename(oldName, newName string) error        { return os.Rename(oldName, newName) }
func (OSFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }
func (OSFS) ReadDir(dir string) ([]fs.DirEntry, error)   { return os.ReadDir(dir) }
func (OSFS) Stat(name string) (fs.FileInfo, error)       { return os.Stat(name) }
func (OSFS) DiskUsage(dir string) (total, free int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil
}

func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	// Some filesystems refuse fsync on a directory; that is not data loss.
	if errors.Is(err, syscall.EINVAL) {
		return nil
	}
	return err
}

func (OSFS) SyncFS(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	defer d.Close()
	raw, err := d.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		for {
			if serr = unix.Syncfs(int(fd)); serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &fs.PathError{Op: "syncfs", Path: dir, Err: serr}
	}
	return nil
}

// WriteFileAtomic writes data to name through a temporary file, fsyncs it,
// renames it over name and fsyncs the directory, so that a crash leaves
// either the old or the new content (checkpoints, meta.properties).
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	if err := WriteFileSynced(fsys, name, data); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(name))
}

// WriteFileSynced is WriteFileAtomic without the directory fsync: the new
// content is durable, its name only once the caller syncs the directory
// (batching that fsync with others). Until then a crash leaves the old
// content or, for a new file, no file, never a partial one: the content
// is synced before the rename can become durable.
func WriteFileSynced(fsys FS, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fsys.Rename(tmp, name)
}

// WriteFileUnsynced replaces name's content through a temporary file and a
// rename, syncing nothing: for a writer that makes it durable later with
// SyncFS (a clean shutdown). Until then a crash may leave the old content,
// the new, or for a new file an empty one or none.
func WriteFileUnsynced(fsys FS, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fsys.Rename(tmp, name)
}

// MkdirAllDurable creates dir and any missing parents, and syncs the parent
// of each directory it creates so that the whole chain survives a crash (a
// new directory is an entry in its parent, durable only once the parent is
// synced).
func MkdirAllDurable(fsys FS, dir string, perm fs.FileMode) error {
	dir = filepath.Clean(dir)
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		_, err := fsys.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if parent := filepath.Dir(d); parent == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, perm); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := fsys.SyncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// ReadFile reads a whole (small) file through fsys.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// FileRange is a contiguous byte range of a segment file holding whole
// record batches, sent to the client with sendfile where File supports it.
// Size 0 means no batches.
//
// A FileRange handed out by a SharedFile holds a reference to it: the file
// stays open, whatever its owner does, until Release. A send that outlives
// a topic deletion or a segment removal therefore still reads the bytes it
// was given, never those of a file that reused the descriptor number.
type FileRange struct {
	File File
	Pos  int64
	Size int64
	ref  *rangeRef
}

// rangeRef is one reference to a SharedFile; copies of a FileRange share
// it, so releasing any copy, any number of times, releases it once.
type rangeRef struct {
	once sync.Once
	file *SharedFile
}

// Release gives the range's reference back. It is safe on the zero
// FileRange, on ranges that hold no reference and more than once.
func (r FileRange) Release() {
	if r.ref != nil {
		r.ref.once.Do(func() { r.ref.file.release() })
	}
}

// SharedFile is a File shared by its owner and the readers it hands ranges
// to: the underlying file is closed when the owner has closed it and the
// last range is released.
type SharedFile struct {
	f File

	mu sync.Mutex
	// refs counts the owner (until Close) and the unreleased ranges; the
	// file is closed when it reaches zero.
	refs int
	// ownerClosed: no new ranges are handed out.
	ownerClosed bool
}

// NewSharedFile takes ownership of f.
func NewSharedFile(f File) *SharedFile { return &SharedFile{f: f, refs: 1} }

// File is the underlying file, for the owner's own reads and writes.
func (s *SharedFile) File() File { return s.f }

// Range returns a FileRange of the file that holds a reference to it. It
// fails once the owner has closed the file.
func (s *SharedFile) Range(pos, size int64) (FileRange, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ownerClosed {
		return FileRange{}, fmt.Errorf("range of %s: %w", s.f.Name(), fs.ErrClosed)
	}
	s.refs++
	return FileRange{File: s.f, Pos: pos, Size: size, ref: &rangeRef{file: s}}, nil
}

// Close gives up the owner's reference: the file is closed now if no range
// holds it, else when the last range is released. The error is that of
// closing the file when it is closed now.
func (s *SharedFile) Close() error {
	s.mu.Lock()
	if s.ownerClosed {
		s.mu.Unlock()
		return fs.ErrClosed
	}
	s.ownerClosed = true
	s.refs--
	last := s.refs == 0
	s.mu.Unlock()
	if last {
		return s.f.Close()
	}
	return nil
}

func (s *SharedFile) release() {
	s.mu.Lock()
	s.refs--
	last := s.refs == 0
	s.mu.Unlock()
	if last {
		// The owner closed it already; nobody is left to report to.
		_ = s.f.Close()
	}
}
