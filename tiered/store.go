package tiered

import (
	"context"
	"errors"
	"io"
)

// Store is the object store remote segments live in: a flat namespace of
// immutable objects named by slash-separated keys. The directory backend
// (DirStore) and the S3 one implement it.
type Store interface {
	// Put stores size bytes of body under key, whole: a reader sees all
	// of it or nothing. body is read from offset 0, and read again from 0
	// when the store retries.
	Put(ctx context.Context, key string, body io.ReaderAt, size int64) error
	// Get reads n bytes of key from off (n < 0: to its end). A missing
	// key is ErrNotFound; a range past its end returns what there is.
	Get(ctx context.Context, key string, off, n int64) ([]byte, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the keys directly under dir (a key prefix ending in
	// "/"), sorted, without dir; a dir with nothing under it is empty.
	// It may list objects of puts in progress, under names of their own.
	List(ctx context.Context, dir string) ([]string, error)
	// String names the store for logs and errors.
	String() string
}

// FileTidier is a store kept in files (DirStore), which holds what a
// bucket does not: temporary files of puts a crash cut short, and
// directories that outlive their objects.
type FileTidier interface {
	// RemoveTemporaries removes the temporaries of puts of a segment's
	// objects (stem: the partition directory and the segment's name
	// without a suffix).
	RemoveTemporaries(ctx context.Context, stem string) error
	// RemoveDir removes an emptied partition directory.
	RemoveDir(dir string) error
}

// ErrNotFound is a Get of a key the store does not hold.
var ErrNotFound = errors.New("not in remote storage")
