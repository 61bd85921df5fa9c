package tiered

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gregorbroker/gregor/vfs"
)

// DirStore is a Store in a local directory (gregor.remote.storage=dir:<path>,
// or Kafka's LocalTieredStorage with rsm.config.dir): a key is a file
// under Root. It is for one machine and for tests; several brokers on the
// machine may share it, as they would share a bucket. Every write is made
// durable before Put returns (written to a temporary file, synced,
// renamed, the directory synced), so an object is there whole or not at
// all after a crash.
type DirStore struct {
	FS   vfs.FS
	Root string
	seq  atomic.Uint64
}

// NewDirStore returns the store in root, creating it.
func NewDirStore(fsys vfs.FS, root string) (*DirStore, error) {
	if fsys == nil {
		fsys = vfs.OSFS{}
	}
	if err := vfs.MkdirAllDurable(fsys, root, 0o755); err != nil {
		return nil, fmt.Errorf("creating the remote storage directory %s: %w", root, err)
	}
	return &DirStore{FS: fsys, Root: root}, nil
}

func (d *DirStore) String() string { return "dir:" + d.Root }

// tmpMark is in every temporary file's name.
const tmpMark = ".tmp-"

func (d *DirStore) path(key string) (string, error) {
	if key == "" || strings.Contains(key, "..") || strings.HasPrefix(key, "/") {
		return "", fmt.Errorf("invalid remote storage key %q", key)
	}
	return filepath.Join(d.Root, filepath.FromSlash(key)), nil
}

func (d *DirStore) Put(ctx context.Context, key string, body io.ReaderAt, size int64) error {
	name, err := d.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := filepath.Dir(name)
	if err := vfs.MkdirAllDurable(d.FS, dir, 0o755); err != nil {
		return fmt.Errorf("putting %s in %s: %w", key, d, err)
	}
	tmp := name + tmpMark + strconv.FormatUint(d.seq.Add(1), 10)
	f, err := d.FS.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("putting %s in %s: %w", key, d, err)
	}
	_, err = io.Copy(f, io.NewSectionReader(body, 0, size))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.FS.Rename(tmp, name)
	}
	if err == nil {
		err = d.FS.SyncDir(dir)
	}
	if err != nil {
		_ = d.FS.Remove(tmp)
		return fmt.Errorf("putting %s in %s: %w", key, d, err)
	}
	return nil
}

func (d *DirStore) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	name, err := d.path(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := d.FS.OpenFile(name, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s in %s: %w", key, d, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s in %s: %w", key, d, err)
	}
	defer f.Close()
	if n < 0 {
		st, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("reading %s in %s: %w", key, d, err)
		}
		n = max(st.Size()-off, 0)
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading %s in %s: %w", key, d, err)
	}
	return buf[:got], nil
}

func (d *DirStore) Delete(ctx context.Context, key string) error {
	name, err := d.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.FS.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deleting %s in %s: %w", key, d, err)
	}
	return nil
}

func (d *DirStore) List(ctx context.Context, dir string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name, err := d.path(strings.TrimSuffix(dir, "/"))
	if err != nil {
		return nil, err
	}
	entries, err := d.FS.ReadDir(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s in %s: %w", dir, d, err)
	}
	var keys []string
	for _, e := range entries {
		if !e.IsDir() {
			// A put's temporary file is listed too: it is an object of
			// a copy in progress, or cut short by a crash, which a new
			// leader's clean-up deletes with the rest of that copy.
			keys = append(keys, e.Name())
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// RemoveTemporaries removes the temporary files of puts of a segment's
// objects (stem: the partition directory and the segment's name without
// a suffix) that a crash cut short; no other store has them.
func (d *DirStore) RemoveTemporaries(ctx context.Context, stem string) error {
	dir, base := path.Split(stem)
	names, err := d.List(ctx, dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.HasPrefix(name, base+".") && strings.Contains(name, tmpMark) {
			if err := d.Delete(ctx, dir+name); err != nil {
				return err
			}
		}
	}
	return nil
}

var _ FileTidier = (*DirStore)(nil)

// RemoveDir removes an emptied partition directory (after the partition's
// remote data is deleted); other stores have no directories.
func (d *DirStore) RemoveDir(dir string) error {
	name, err := d.path(strings.TrimSuffix(dir, "/"))
	if err != nil {
		return err
	}
	if err := d.FS.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
