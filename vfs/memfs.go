package vfs

import (
	"errors"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemFS is an in-memory FS for crash and fault tests. Each file keeps the
// content written so far and the content last made durable by Sync; Crash
// throws away what was not synced (optionally keeping a torn prefix of it),
// the way a power loss would. Directory operations (create, rename, remove)
// are durable at once, which is the common behaviour of journalling
// filesystems for metadata.
//
// Inject installs a hook that runs before every operation and can fail it,
// which is how tests simulate I/O errors and a full disk.
type MemFS struct {
	mu    sync.Mutex
	files map[string]*memNode
	dirs  map[string]bool
	// hook, when set, is called before each operation; a non-nil error
	// fails the operation.
	hook func(op Op, name string) error
	// capacity, when positive, is the total number of bytes the files may
	// hold; writes past it fail with ENOSPC.
	capacity int64
}

// Op names a filesystem operation for fault injection.
type Op string

const (
	OpOpen     Op = "open"
	OpRead     Op = "read"
	OpWrite    Op = "write"
	OpSync     Op = "sync"
	OpTruncate Op = "truncate"
	OpRemove   Op = "remove"
	OpRename   Op = "rename"
	OpMkdir    Op = "mkdir"
	OpReadDir  Op = "readdir"
	OpSyncDir  Op = "syncdir"
)

type memNode struct {
	data    []byte
	durable []byte
	modTime time.Time
}

// NewMemFS returns an empty in-memory filesystem with a root directory.
func NewMemFS() *MemFS {
	return &MemFS{files: map[string]*memNode{}, dirs: map[string]bool{"/": true, ".": true}}
}

// Inject sets the fault hook (nil removes it).
func (m *MemFS) Inject(hook func(op Op, name string) error) {
	m.mu.Lock()
	m.hook = hook
	m.mu.Unlock()
}

// SetCapacity limits the total size of all files (0 means unlimited).
func (m *MemFS) SetCapacity(bytes int64) {
	m.mu.Lock()
	m.capacity = bytes
	m.mu.Unlock()
}

// Crash simulates a power loss: every file loses the writes since its last
// Sync. With tear set, each file keeps a random prefix of its unsynced
// appended bytes (a torn write), chosen with rng.
func (m *MemFS) Crash(tear bool, rng *rand.Rand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.files))
	for name := range m.files {
		names = append(names, name)
	}
	sort.Strings(names) // deterministic rng use
	for _, name := range names {
		n := m.files[name]
		kept := append([]byte(nil), n.durable...)
		if tear && rng != nil && len(n.data) > len(n.durable) && hasPrefix(n.data, n.durable) {
			extra := rng.Intn(len(n.data) - len(n.durable) + 1)
			kept = append(kept, n.data[len(n.durable):len(n.durable)+extra]...)
		}
		n.data = kept
		n.durable = append([]byte(nil), kept...)
	}
}

func hasPrefix(b, prefix []byte) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == string(prefix)
}

func clean(name string) string { return path.Clean(name) }

func (m *MemFS) check(op Op, name string) error {
	if m.hook != nil {
		if err := m.hook(op, name); err != nil {
			return &fs.PathError{Op: string(op), Path: name, Err: err}
		}
	}
	return nil
}

func (m *MemFS) usedLocked() int64 {
	var total int64
	for _, n := range m.files {
		total += int64(len(n.data))
	}
	return total
}

func (m *MemFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = clean(name)
	if err := m.check(OpOpen, name); err != nil {
		return nil, err
	}
	n, ok := m.files[name]
	if !ok {
		if flag&os.O_CREATE == 0 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		if !m.dirs[path.Dir(name)] {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		n = &memNode{modTime: time.Now()}
		m.files[name] = n
	} else if flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	}
	if flag&os.O_TRUNC != 0 {
		n.data = nil
	}
	f := &memFile{fs: m, name: name, node: n, appendMode: flag&os.O_APPEND != 0}
	return f, nil
}

func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = clean(name)
	if err := m.check(OpRemove, name); err != nil {
		return err
	}
	if _, ok := m.files[name]; ok {
		delete(m.files, name)
		return nil
	}
	if m.dirs[name] {
		for f := range m.files {
			if path.Dir(f) == name {
				return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
			}
		}
		delete(m.dirs, name)
		return nil
	}
	return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
}

func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = clean(name)
	if err := m.check(OpRemove, name); err != nil {
		return err
	}
	prefix := name + "/"
	for f := range m.files {
		if f == name || strings.HasPrefix(f, prefix) {
			delete(m.files, f)
		}
	}
	for d := range m.dirs {
		if d == name || strings.HasPrefix(d, prefix) {
			delete(m.dirs, d)
		}
	}
	return nil
}

func (m *MemFS) Rename(oldName, newName string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldName, newName = clean(oldName), clean(newName)
	if err := m.check(OpRename, oldName); err != nil {
		return err
	}
	if n, ok := m.files[oldName]; ok {
		if !m.dirs[path.Dir(newName)] {
			return &fs.PathError{Op: "rename", Path: newName, Err: fs.ErrNotExist}
		}
		delete(m.files, oldName)
		m.files[newName] = n
		return nil
	}
	if !m.dirs[oldName] {
		return &fs.PathError{Op: "rename", Path: oldName, Err: fs.ErrNotExist}
	}
	oldPrefix, newPrefix := oldName+"/", newName+"/"
	for f, n := range m.files {
		if strings.HasPrefix(f, oldPrefix) {
			delete(m.files, f)
			m.files[newPrefix+strings.TrimPrefix(f, oldPrefix)] = n
		}
	}
	for d := range m.dirs {
		if d == oldName || strings.HasPrefix(d, oldPrefix) {
			delete(m.dirs, d)
			m.dirs[newName+strings.TrimPrefix(d, oldName)] = true
		}
	}
	return nil
}

func (m *MemFS) MkdirAll(dir string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = clean(dir)
	if err := m.check(OpMkdir, dir); err != nil {
		return err
	}
	for d := dir; ; d = path.Dir(d) {
		if _, isFile := m.files[d]; isFile {
			return &fs.PathError{Op: "mkdir", Path: d, Err: syscall.ENOTDIR}
		}
		m.dirs[d] = true
		if d == "/" || d == "." {
			return nil
		}
	}
}

func (m *MemFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = clean(dir)
	if err := m.check(OpReadDir, dir); err != nil {
		return nil, err
	}
	if !m.dirs[dir] {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	var out []fs.DirEntry
	for f, n := range m.files {
		if path.Dir(f) == dir {
			out = append(out, fs.FileInfoToDirEntry(memInfo{name: path.Base(f), size: int64(len(n.data)), mod: n.modTime}))
		}
	}
	for d := range m.dirs {
		if d != dir && path.Dir(d) == dir {
			out = append(out, fs.FileInfoToDirEntry(memInfo{name: path.Base(d), dir: true}))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = clean(name)
	if n, ok := m.files[name]; ok {
		return memInfo{name: path.Base(name), size: int64(len(n.data)), mod: n.modTime}, nil
	}
	if m.dirs[name] {
		return memInfo{name: path.Base(name), dir: true}, nil
	}
	return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.check(OpSyncDir, clean(dir))
}

func (m *MemFS) DiskUsage(dir string) (total, free int64, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	used := m.usedLocked()
	if m.capacity <= 0 {
		return 1 << 40, 1<<40 - used, nil
	}
	return m.capacity, m.capacity - used, nil
}

// memFile is an open MemFS file. The node is shared by every handle of the
// same name, as with real files.
type memFile struct {
	fs         *MemFS
	name       string
	node       *memNode
	pos        int64
	appendMode bool
	closed     bool
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, fs.ErrClosed
	}
	if err := f.fs.check(OpRead, f.name); err != nil {
		return 0, err
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	if f.appendMode {
		f.fs.mu.Lock()
		f.pos = int64(len(f.node.data))
		f.fs.mu.Unlock()
	}
	n, err := f.WriteAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, fs.ErrClosed
	}
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	end := off + int64(len(p))
	if grow := end - int64(len(f.node.data)); grow > 0 && f.fs.capacity > 0 && f.fs.usedLocked()+grow > f.fs.capacity {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	if end > int64(len(f.node.data)) {
		f.node.data = append(f.node.data, make([]byte, end-int64(len(f.node.data)))...)
	}
	copy(f.node.data[off:], p)
	f.node.modTime = time.Now()
	return len(p), nil
}

func (f *memFile) Seek(offset int64, whence int) (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += int64(len(f.node.data))
	}
	if offset < 0 {
		return 0, errors.New("memfs: negative seek")
	}
	f.pos = offset
	return offset, nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return fs.ErrClosed
	}
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	f.node.durable = append(f.node.durable[:0], f.node.data...)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return fs.ErrClosed
	}
	if err := f.fs.check(OpTruncate, f.name); err != nil {
		return err
	}
	if size <= int64(len(f.node.data)) {
		f.node.data = f.node.data[:size]
	} else {
		f.node.data = append(f.node.data, make([]byte, size-int64(len(f.node.data)))...)
	}
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return memInfo{name: path.Base(f.name), size: int64(len(f.node.data)), mod: f.node.modTime}, nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return fs.ErrClosed
	}
	f.closed = true
	return nil
}

type memInfo struct {
	name string
	size int64
	mod  time.Time
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return i.mod }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
