package tiered

import (
	"bytes"
	"context"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

func sampleMetadata() SegmentMetadata {
	return SegmentMetadata{
		Topic: "orders", TopicID: [16]byte{1, 2, 3}, Partition: 7, SegmentID: [16]byte{9, 8, 7},
		StartOffset: 100, EndOffset: 199, BrokerID: 3, MaxTimestamp: 1700000000000, EventTimeMs: 1700000000500,
		LeaderEpochs: []EpochStart{{Epoch: 2, Offset: 100}, {Epoch: 4, Offset: 150}},
		SizeInBytes:  4096, State: CopySegmentFinished,
	}
}

// The directory store keeps objects whole, lists a directory's objects
// without the temporary files of a put in progress, and reads ranges.
func TestDirStore(t *testing.T) {
	ctx := context.Background()
	fsys := vfs.NewMemFS()
	d, err := NewDirStore(fsys, "/remote")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("0123456789")
	if err := d.Put(ctx, "p-0-x/a.log", bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(ctx, "p-0-x/b.index", bytes.NewReader(body[:4]), 4); err != nil {
		t.Fatal(err)
	}
	if got, err := d.Get(ctx, "p-0-x/a.log", 3, 4); err != nil || string(got) != "3456" {
		t.Fatalf("range: %q %v", got, err)
	}
	if got, err := d.Get(ctx, "p-0-x/a.log", 8, -1); err != nil || string(got) != "89" {
		t.Fatalf("to the end: %q %v", got, err)
	}
	if _, err := d.Get(ctx, "p-0-x/c.log", 0, -1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing object: %v", err)
	}
	if keys, err := d.List(ctx, "p-0-x/"); err != nil || !reflect.DeepEqual(keys, []string{"a.log", "b.index"}) {
		t.Fatalf("list: %v %v", keys, err)
	}
	if err := d.Delete(ctx, "p-0-x/a.log"); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(ctx, "p-0-x/a.log"); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}
	if keys, _ := d.List(ctx, "p-0-x/"); !reflect.DeepEqual(keys, []string{"b.index"}) {
		t.Fatalf("list after delete: %v", keys)
	}
	if _, err := d.Get(ctx, "../etc/passwd", 0, -1); err == nil {
		t.Fatal("a key leaving the root was read")
	}
}

// An object the directory store put is there whole after a power loss
// (its data synced before the rename, the rename synced).
func TestDirStorePutSurvivesACrash(t *testing.T) {
	ctx := context.Background()
	fsys := vfs.NewMemFS()
	d, err := NewDirStore(fsys, "/remote")
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("segment "), 1000)
	if err := d.Put(ctx, "p-0-x/00000000000000000000-AAAAAAAAAAAAAAAAAAAAAA.log", bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	fsys.Crash(false, nil)
	d, err = NewDirStore(fsys, "/remote")
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Get(ctx, "p-0-x/00000000000000000000-AAAAAAAAAAAAAAAAAAAAAA.log", 0, -1)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("after a crash: %d bytes, %v; want the %d put", len(got), err, len(body))
	}
	if keys, err := d.List(ctx, "p-0-x/"); err != nil || len(keys) != 1 {
		t.Fatalf("after a crash: %v %v", keys, err)
	}
}

// A put a crash cut short leaves a temporary file, which the clean-up of
// its segment removes with nothing else.
func TestDirStoreRemovesTemporariesOfASegment(t *testing.T) {
	ctx := context.Background()
	fsys := vfs.NewMemFS()
	d, err := NewDirStore(fsys, "/remote")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"p-0-x/00-a.log", "p-0-x/00-b.log"} {
		if err := d.Put(ctx, key, bytes.NewReader([]byte("x")), 1); err != nil {
			t.Fatal(err)
		}
	}
	f, err := fsys.OpenFile("/remote/p-0-x/00-a.index"+tmpMark+"7", os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := d.RemoveTemporaries(ctx, "p-0-x/00-a"); err != nil {
		t.Fatal(err)
	}
	if names, _ := d.List(ctx, "p-0-x/"); !reflect.DeepEqual(names, []string{"00-a.log", "00-b.log"}) {
		t.Fatalf("left %v", names)
	}
}
