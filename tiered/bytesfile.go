package tiered

import (
	"bytes"
	"errors"
	"io/fs"
	"time"
)

// bytesFile is a read-only vfs.File over bytes read from remote storage, so
// that a remote read travels the fetch path as a FileRange does (copied
// into the response instead of sent with sendfile).
type bytesFile struct {
	*bytes.Reader
	name string
	size int64
}

func newBytesFile(b []byte, name string) *bytesFile {
	return &bytesFile{Reader: bytes.NewReader(b), name: "remote:" + name, size: int64(len(b))}
}

var errReadOnly = errors.New("remote read buffer is read-only")

func (f *bytesFile) Write([]byte) (int, error)          { return 0, errReadOnly }
func (f *bytesFile) WriteAt([]byte, int64) (int, error) { return 0, errReadOnly }
func (f *bytesFile) Sync() error                        { return nil }
func (f *bytesFile) Truncate(int64) error               { return errReadOnly }
func (f *bytesFile) Close() error                       { return nil }
func (f *bytesFile) Name() string                       { return f.name }
func (f *bytesFile) Stat() (fs.FileInfo, error)         { return bytesInfo{f}, nil }

type bytesInfo struct{ f *bytesFile }

func (i bytesInfo) Name() string       { return i.f.name }
func (i bytesInfo) Size() int64        { return i.f.size }
func (i bytesInfo) Mode() fs.FileMode  { return 0o444 }
func (i bytesInfo) ModTime() time.Time { return time.Time{} }
func (i bytesInfo) IsDir() bool        { return false }
func (i bytesInfo) Sys() any           { return nil }
