package storage

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

// Truncating a mapped, preallocated index (as recovery does to every
// active segment's indexes after a crash) leaves the file its length, the
// kept entries as they were, and zeros after them, through the mapping
// and in the file, and the index takes new entries after the kept ones.
func TestTruncateEntriesOfAMappedIndex(t *testing.T) {
	file := segmentFile{t.TempDir(), 0, indexSuffix}
	name := file.String()
	const size = 1 << 20
	x, err := openIndexFile(vfs.OSFS{}, file, 8, size)
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	if !x.mapped {
		t.Skip("the file system refused mmap")
	}
	entry := make([]byte, 8)
	for i := range x.maxEntries {
		binary.BigEndian.PutUint32(entry, uint32(i+1))
		binary.BigEndian.PutUint32(entry[4:], uint32(i+1))
		if err := x.appendEntry(vfs.OSFS{}, entry); err != nil {
			t.Fatal(err)
		}
	}
	const keep = 3
	if err := x.truncateEntries(keep); err != nil {
		t.Fatal(err)
	}
	if x.count() != keep {
		t.Fatalf("%d entries, want %d", x.count(), keep)
	}
	onDisk, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(onDisk) != size {
		t.Fatalf("file of %d bytes after the truncation, want %d", len(onDisk), size)
	}
	for _, view := range [][]byte{x.data, onDisk} {
		for i := range keep {
			if got := binary.BigEndian.Uint32(view[i*8:]); got != uint32(i+1) {
				t.Fatalf("kept entry %d reads %d", i, got)
			}
		}
		if !bytes.Equal(view[keep*8:], make([]byte, size-keep*8)) {
			t.Fatal("bytes after the kept entries are not zero")
		}
	}
	binary.BigEndian.PutUint32(entry, 99)
	if err := x.appendEntry(vfs.OSFS{}, entry); err != nil {
		t.Fatalf("appending after the truncation: %v", err)
	}
	if got := binary.BigEndian.Uint32(x.data[keep*8:]); got != 99 {
		t.Fatalf("the new entry reads %d", got)
	}
}
