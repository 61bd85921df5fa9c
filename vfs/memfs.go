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

// MemFS is a strict in-memory FS for crash and fault tests: its Crash
// forgets everything a power loss may forget.
//
// Durability rules (what survives Crash):
//   - File data is per inode: a file keeps the content of its last Sync
//     (optionally plus a torn prefix of what was appended since). Closing a
//     file does not make it durable, as on Linux, where closing leaves dirty
//     data in the page cache.
//   - Directory entries are per directory: creations, renames, removals and
//     mkdirs in a directory become durable only when that directory is
//     synced (SyncDir). A crash gives every directory the entries it had at
//     its last SyncDir. So a file created in a never-synced directory
//     disappears even if its data was synced; an unsynced rename reverts to
//     the old name; an unsynced removal comes back with its durable content.
//   - A directory is itself an entry in its parent: a MkdirAll chain
//     survives only when the parent of each new directory was synced.
//   - A rename across directories touches two entries: the new name needs
//     a SyncDir of the destination, the removal of the old one a SyncDir of
//     the source. With only the destination synced the file survives under
//     both names (the same inode, as a hard link); with only the source
//     synced it survives under neither.
//   - RemoveAll removes the tree's entry from its parent; the tree comes
//     back after a crash unless the parent was synced.
//   - The root always exists.
//
// Handles opened before a crash belong to the dead process: every operation
// on them fails afterwards.
//
// Inject installs a hook that runs before every operation and can fail it,
// which is how tests simulate I/O errors; SetCapacity simulates a full disk.
type MemFS struct {
	mu   sync.Mutex
	root *memNode
	// generation counts crashes; handles from an earlier generation are
	// dead.
	generation int
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
	OpSyncFS   Op = "syncfs"
)

// memNode is an inode: a file or a directory.
type memNode struct {
	dir bool
	// File content written so far, and as of the last Sync.
	data    []byte
	durable []byte
	modTime time.Time
	// Directory entries now, and as of the last SyncDir.
	children map[string]*memNode
	synced   map[string]*memNode
}

func newDirNode() *memNode {
	return &memNode{dir: true, children: map[string]*memNode{}, synced: map[string]*memNode{}, modTime: time.Now()}
}

// errCrashed fails operations on handles opened before a crash.
var errCrashed = errors.New("memfs: file handle from before the crash")

// NewMemFS returns an empty in-memory filesystem with a root directory.
func NewMemFS() *MemFS {
	return &MemFS{root: newDirNode()}
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

// Crash simulates a power loss: every directory goes back to its entries at
// its last SyncDir and every file still reachable loses the writes since
// its last Sync. With tear set, each file keeps a random prefix of its
// unsynced appended bytes (a torn write), chosen with rng. Handles opened
// before the crash stop working.
func (m *MemFS) Crash(tear bool, rng *rand.Rand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.generation++
	seen := map[*memNode]bool{}
	var revert func(n *memNode)
	revert = func(n *memNode) {
		if seen[n] {
			return
		}
		seen[n] = true
		if !n.dir {
			kept := append([]byte(nil), n.durable...)
			if tear && rng != nil && len(n.data) > len(n.durable) && hasPrefix(n.data, n.durable) {
				extra := rng.Intn(len(n.data) - len(n.durable) + 1)
				kept = append(kept, n.data[len(n.durable):len(n.durable)+extra]...)
			}
			n.data = kept
			n.durable = append([]byte(nil), kept...)
			return
		}
		n.children = make(map[string]*memNode, len(n.synced))
		for name, c := range n.synced {
			n.children[name] = c
		}
		// Sorted, so that the rng is used deterministically.
		for _, name := range sortedNames(n.children) {
			revert(n.children[name])
		}
	}
	revert(m.root)
}

func sortedNames(entries map[string]*memNode) []string {
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func hasPrefix(b, prefix []byte) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == string(prefix)
}

// split cleans name into its parent directory path and base name. The root
// ("/" or ".") has an empty base.
func split(name string) (dir, base string) {
	name = path.Clean("/" + name)
	if name == "/" {
		return "/", ""
	}
	return path.Dir(name), path.Base(name)
}

// lookupLocked walks to the node at name (nil if absent).
func (m *MemFS) lookupLocked(name string) *memNode {
	n := m.root
	for _, part := range strings.Split(strings.Trim(path.Clean("/"+name), "/"), "/") {
		if part == "" {
			continue
		}
		if !n.dir {
			return nil
		}
		if n = n.children[part]; n == nil {
			return nil
		}
	}
	return n
}

// parentLocked returns the directory holding name and name's base.
func (m *MemFS) parentLocked(op, name string) (*memNode, string, error) {
	dir, base := split(name)
	if base == "" {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: syscall.EINVAL}
	}
	p := m.lookupLocked(dir)
	if p == nil {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	if !p.dir {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: syscall.ENOTDIR}
	}
	return p, base, nil
}

func (m *MemFS) check(op Op, name string) error {
	if m.hook != nil {
		if err := m.hook(op, name); err != nil {
			return &fs.PathError{Op: string(op), Path: name, Err: err}
		}
	}
	return nil
}

// usedLocked is the bytes held by the files reachable from the root.
func (m *MemFS) usedLocked() int64 {
	var total int64
	seen := map[*memNode]bool{}
	var walk func(n *memNode)
	walk = func(n *memNode) {
		if seen[n] {
			return
		}
		seen[n] = true
		total += int64(len(n.data))
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(m.root)
	return total
}

func (m *MemFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpOpen, clean(name)); err != nil {
		return nil, err
	}
	p, base, err := m.parentLocked("open", name)
	if err != nil {
		return nil, err
	}
	n, ok := p.children[base]
	switch {
	case !ok:
		if flag&os.O_CREATE == 0 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		n = &memNode{modTime: time.Now()}
		p.children[base] = n
	case n.dir:
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	case flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	}
	if flag&os.O_TRUNC != 0 {
		n.data = nil
	}
	return &memFile{fs: m, name: clean(name), node: n, appendMode: flag&os.O_APPEND != 0, generation: m.generation}, nil
}

func clean(name string) string { return path.Clean(name) }

func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpRemove, clean(name)); err != nil {
		return err
	}
	p, base, err := m.parentLocked("remove", name)
	if err != nil {
		return err
	}
	n, ok := p.children[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(n.children) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	delete(p.children, base)
	return nil
}

func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpRemove, clean(name)); err != nil {
		return err
	}
	p, base, err := m.parentLocked("removeall", name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	n, ok := p.children[base]
	if !ok {
		return nil
	}
	// Unlink everything inside as os.RemoveAll does; none of it is durable
	// until the directories concerned are synced.
	var unlink func(n *memNode)
	unlink = func(n *memNode) {
		for _, c := range n.children {
			if c.dir {
				unlink(c)
			}
		}
		if n.dir {
			n.children = map[string]*memNode{}
		}
	}
	unlink(n)
	delete(p.children, base)
	return nil
}

func (m *MemFS) Rename(oldName, newName string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpRename, clean(oldName)); err != nil {
		return err
	}
	op, obase, err := m.parentLocked("rename", oldName)
	if err != nil {
		return err
	}
	n, ok := op.children[obase]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldName, Err: fs.ErrNotExist}
	}
	np, nbase, err := m.parentLocked("rename", newName)
	if err != nil {
		return err
	}
	if n.dir {
		// A directory cannot move into its own subtree.
		for d := path.Clean("/" + newName); d != "/"; d = path.Dir(d) {
			if m.lookupLocked(d) == n {
				return &fs.PathError{Op: "rename", Path: newName, Err: syscall.EINVAL}
			}
		}
	}
	if target, ok := np.children[nbase]; ok {
		if target == n {
			return nil
		}
		switch {
		case n.dir && !target.dir:
			return &fs.PathError{Op: "rename", Path: newName, Err: syscall.ENOTDIR}
		case !n.dir && target.dir:
			return &fs.PathError{Op: "rename", Path: newName, Err: syscall.EISDIR}
		case target.dir && len(target.children) > 0:
			return &fs.PathError{Op: "rename", Path: newName, Err: syscall.ENOTEMPTY}
		}
	}
	delete(op.children, obase)
	np.children[nbase] = n
	return nil
}

func (m *MemFS) MkdirAll(dir string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpMkdir, clean(dir)); err != nil {
		return err
	}
	n := m.root
	for _, part := range strings.Split(strings.Trim(path.Clean("/"+dir), "/"), "/") {
		if part == "" {
			continue
		}
		c, ok := n.children[part]
		if !ok {
			c = newDirNode()
			n.children[part] = c
		} else if !c.dir {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		n = c
	}
	return nil
}

func (m *MemFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpReadDir, clean(dir)); err != nil {
		return nil, err
	}
	n := m.lookupLocked(dir)
	if n == nil {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: syscall.ENOTDIR}
	}
	out := make([]fs.DirEntry, 0, len(n.children))
	for _, name := range sortedNames(n.children) {
		out = append(out, fs.FileInfoToDirEntry(n.children[name].info(name)))
	}
	return out, nil
}

func (n *memNode) info(name string) memInfo {
	return memInfo{name: name, size: int64(len(n.data)), mod: n.modTime, dir: n.dir}
}

func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.lookupLocked(name)
	if n == nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	_, base := split(name)
	if base == "" {
		base = "/"
	}
	return n.info(base), nil
}

// SyncDir makes dir's current entries durable (not the entries of its
// subdirectories, nor dir's own entry in its parent).
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpSyncDir, clean(dir)); err != nil {
		return err
	}
	n := m.lookupLocked(dir)
	if n == nil {
		return &fs.PathError{Op: "syncdir", Path: dir, Err: fs.ErrNotExist}
	}
	if !n.dir {
		return &fs.PathError{Op: "syncdir", Path: dir, Err: syscall.ENOTDIR}
	}
	n.synced = make(map[string]*memNode, len(n.children))
	for name, c := range n.children {
		n.synced[name] = c
	}
	return nil
}

// SyncFS makes the whole filesystem durable, as a SyncDir of every
// directory and a Sync of every file reachable now.
func (m *MemFS) SyncFS(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpSyncFS, clean(dir)); err != nil {
		return err
	}
	if n := m.lookupLocked(dir); n == nil {
		return &fs.PathError{Op: "syncfs", Path: dir, Err: fs.ErrNotExist}
	}
	seen := map[*memNode]bool{}
	var sync func(n *memNode)
	sync = func(n *memNode) {
		if seen[n] {
			return
		}
		seen[n] = true
		if !n.dir {
			n.durable = append(n.durable[:0], n.data...)
			return
		}
		n.synced = make(map[string]*memNode, len(n.children))
		for name, c := range n.children {
			n.synced[name] = c
			sync(c)
		}
	}
	sync(m.root)
	return nil
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
// same inode, as with real files.
type memFile struct {
	fs         *MemFS
	name       string
	node       *memNode
	pos        int64
	appendMode bool
	closed     bool
	generation int
}

func (f *memFile) Name() string { return f.name }

// usableLocked fails operations on closed handles and on handles of a
// process that crashed; the caller holds fs.mu.
func (f *memFile) usableLocked() error {
	if f.closed {
		return fs.ErrClosed
	}
	if f.generation != f.fs.generation {
		return &fs.PathError{Op: "use", Path: f.name, Err: errCrashed}
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usableLocked(); err != nil {
		return 0, err
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
	if err := f.usableLocked(); err != nil {
		return 0, err
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
	if err := f.usableLocked(); err != nil {
		return 0, err
	}
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
	if err := f.usableLocked(); err != nil {
		return err
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
	if err := f.usableLocked(); err != nil {
		return err
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
	if err := f.usableLocked(); err != nil {
		return nil, err
	}
	return f.node.info(path.Base(f.name)), nil
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

// CrashClone returns what a crash now would leave, as a new MemFS, and
// leaves m running: each directory with its entries as of its last
// SyncDir, each file with its content as of its last Sync (no torn tail).
// Tests take one at chosen points of a protocol and check that each
// restarts well. Hooks and capacity are not copied.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	copies := map[*memNode]*memNode{}
	var clone func(n *memNode) *memNode
	clone = func(n *memNode) *memNode {
		if c, ok := copies[n]; ok {
			return c // another name of the same inode
		}
		if !n.dir {
			c := &memNode{data: append([]byte(nil), n.durable...), durable: append([]byte(nil), n.durable...), modTime: n.modTime}
			copies[n] = c
			return c
		}
		c := newDirNode()
		copies[n] = c
		for name, child := range n.synced {
			cc := clone(child)
			c.children[name] = cc
			c.synced[name] = cc
		}
		return c
	}
	return &MemFS{root: clone(m.root)}
}
