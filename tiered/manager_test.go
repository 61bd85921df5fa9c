package tiered

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
)

// fakeSource is the replica layer of one partition this node leads.
type fakeSource struct {
	part   Partition
	leader bool
}

func (f *fakeSource) TieredPartitions(dst []Partition) []Partition { return append(dst, f.part) }
func (f *fakeSource) StillLeader(storage.TopicPartition, int32) bool {
	return f.leader
}

const baseTs = 1_700_000_000_000

// tieredLog is a log with 16 KiB segments holding n one-record batches of
// 1 KiB, all below the high watermark; record i has timestamp baseTs+i.
func tieredLog(t *testing.T, fsys vfs.FS, n int) *storage.Log {
	t.Helper()
	cfg := config.DefaultTopic()
	cfg.SegmentBytes = 16 << 10
	cfg.SegmentIndexBytes = 1024
	cfg.IndexIntervalBytes = 512
	cfg.FileDeleteDelayMs = 0
	cfg.RemoteStorageEnable = true
	cfg.LocalRetentionMs = 0
	l, err := storage.OpenLog(storage.LogOptions{FS: fsys, Dir: "/data/t-0", TopicPartition: storage.TopicPartition{Topic: "t"},
		TopicID: [16]byte{7}, Config: cfg, Logger: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return time.UnixMilli(baseTs + 1_000_000) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i := range n {
		b := protocol.NewBatchBuilder(protocol.CodecNone)
		b.Add(nil, []byte(fmt.Sprintf("%06d-%s", i, strings.Repeat("v", 1000))), nil, baseTs+int64(i))
		batch, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.Append(batch, 3, storage.AppendClient); err != nil {
			t.Fatal(err)
		}
	}
	l.AdvanceHighWatermark(l.LogEndOffset())
	return l
}

// tieredSetup is a 40-batch tiered log this node leads at epoch 3 (and
// still leads when stillLeader), and a directory store, on one MemFS.
func tieredSetup(t *testing.T, stillLeader bool) (vfs.FS, *storage.Log, *DirStore, *fakeSource) {
	t.Helper()
	fsys := vfs.NewMemFS()
	l := tieredLog(t, fsys, 40)
	dir, err := NewDirStore(fsys, "/remote")
	if err != nil {
		t.Fatal(err)
	}
	return fsys, l, dir, &fakeSource{part: Partition{TP: l.TopicPartition(), TopicID: l.TopicID(), Log: l, Leader: true, LeaderEpoch: 3}, leader: stillLeader}
}

func newTestManager(fsys vfs.FS, src Source, store Store) *Manager {
	return New(Options{Store: store, BrokerID: 1, Logger: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return time.UnixMilli(baseTs + 1_000_000) }}, src)
}

// The leader copies every rolled segment; once local retention has
// deleted them, fetches and timestamp lookups below the local log start
// read the store and get what the local log gave.
func TestCopyThenReadBelowTheLocalLog(t *testing.T) {
	ctx := context.Background()
	fsys := vfs.NewMemFS()
	l := tieredLog(t, fsys, 100)
	want, err := l.Read(0, 1<<20, l.HighWatermark(), true)
	if err != nil {
		t.Fatal(err)
	}
	wantBytes := make([]byte, want.Size)
	if _, err := want.File.ReadAt(wantBytes, want.Pos); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	want.Release()
	store, err := NewDirStore(fsys, "/remote")
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{part: Partition{TP: l.TopicPartition(), TopicID: l.TopicID(), Log: l, Leader: true, LeaderEpoch: 3}, leader: true}
	m := newTestManager(fsys, src, store)
	m.round(ctx, src.TieredPartitions(nil))
	copied := l.HighestRemoteOffset()
	if copied < 80 || l.NumSegments() < 2 {
		t.Fatalf("highest remote offset %d with %d segments", copied, l.NumSegments())
	}
	if _, err := l.DeleteRetainedSegments(); err != nil {
		t.Fatal(err)
	}
	if local := l.LocalLogStartOffset(); local != copied+1 || l.LogStartOffset() != 0 {
		t.Fatalf("local log start %d, log start %d; want %d and 0", local, l.LogStartOffset(), copied+1)
	}
	if _, err := l.Read(0, 1<<20, l.HighWatermark(), true); err == nil || !strings.Contains(err.Error(), "remote storage") {
		t.Fatalf("a local read below the local log start: %v", err)
	}
	res, err := m.Read(ctx, l, l.TopicID(), 0, 1<<20, l.HighWatermark(), true, false)
	if err != nil || res.Local {
		t.Fatalf("remote read: %+v %v", res, err)
	}
	got := make([]byte, res.Records.Size)
	if _, err := res.Records.File.ReadAt(got, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(wantBytes, got) || len(got) < 10<<10 {
		t.Fatalf("the remote read gave %d bytes that the local read (%d bytes) did not start with", len(got), len(wantBytes))
	}
	// From inside a batch of the middle of a segment, one batch at most.
	res, err = m.Read(ctx, l, l.TopicID(), 37, 10, l.HighWatermark(), true, false)
	if err != nil || res.Records.Size == 0 {
		t.Fatalf("remote read at 37: %+v %v", res, err)
	}
	got = make([]byte, res.Records.Size)
	_, _ = res.Records.File.ReadAt(got, 0)
	if _, rest, h, err := protocol.NextBatch(got); err != nil || h.BaseOffset != 37 || len(rest) != 0 {
		t.Fatalf("remote read at 37 with 10 bytes: batch at %d, %d bytes more, %v", h.BaseOffset, len(rest), err)
	}
	off, ts, epoch, found, err := m.FindOffsetByTimestamp(ctx, l, l.TopicID(), baseTs+42)
	if err != nil || !found || off != 42 || ts != baseTs+42 || epoch != 3 {
		t.Fatalf("timestamp lookup: offset %d ts %d epoch %d found %v %v", off, ts, epoch, found, err)
	}
}

// failingMetadataStore fails every put of a metadata object: a copy cut
// short between the segment's objects and its commit.
type failingMetadataStore struct{ Store }

func (s failingMetadataStore) Put(ctx context.Context, key string, body io.ReaderAt, size int64) error {
	if strings.HasSuffix(key, suffixMetadata) {
		return errors.New("the broker died here")
	}
	return s.Store.Put(ctx, key, body, size)
}

// failingDeleteStore cannot delete (the store became unreachable after
// the objects were put).
type failingDeleteStore struct{ failingMetadataStore }

func (failingDeleteStore) Delete(context.Context, string) error { return errors.New("unreachable") }

// A copy cut short before its metadata is never read, and the next leader
// deletes what it left.
func TestCopyCutShortIsNeverReadAndIsCleanedUp(t *testing.T) {
	ctx := context.Background()
	fsys, l, dir, src := tieredSetup(t, true)
	m := newTestManager(fsys, src, failingDeleteStore{failingMetadataStore{dir}})
	m.round(ctx, src.TieredPartitions(nil))
	pdir := partitionDir("t", 0, l.TopicID())
	left, _ := dir.List(ctx, pdir)
	if len(left) == 0 || l.HighestRemoteOffset() != -1 {
		t.Fatalf("objects %v, highest remote offset %d: want objects without a commit", left, l.HighestRemoteOffset())
	}
	// Another node, or this one after a restart, leads at a new epoch.
	src.part.LeaderEpoch = 4
	m2 := newTestManager(fsys, src, failingMetadataStore{dir})
	segs, err := m2.list(ctx, m2.state(src.part.TP, src.part.TopicID), true)
	if err != nil || len(segs) != 0 {
		t.Fatalf("committed segments %v, %v: want none", segs, err)
	}
	if left, _ := dir.List(ctx, pdir); len(left) != 0 {
		t.Fatalf("the new leader left %v", left)
	}
}

// A leader that lost its leadership while copying does not commit.
func TestCopyByADeposedLeaderIsNotCommitted(t *testing.T) {
	ctx := context.Background()
	fsys, l, dir, src := tieredSetup(t, false)
	m := newTestManager(fsys, src, dir)
	m.round(ctx, src.TieredPartitions(nil))
	if left, _ := dir.List(ctx, partitionDir("t", 0, l.TopicID())); len(left) != 0 || l.HighestRemoteOffset() != -1 {
		t.Fatalf("a deposed leader left %v and highest remote offset %d", left, l.HighestRemoteOffset())
	}
}

// slowStore answers reads after a delay.
type slowStore struct {
	Store
	delay time.Duration
}

func (s slowStore) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	time.Sleep(s.delay)
	return s.Store.Get(ctx, key, off, n)
}

// A remote read slower than remote.fetch.max.wait.ms answers without
// records, and goes on into the cache: the next fetch gets the records.
func TestSlowRemoteReadAnswersEmptyThenFromTheCache(t *testing.T) {
	ctx := context.Background()
	fsys, l, dir, src := tieredSetup(t, true)
	newTestManager(fsys, src, dir).round(ctx, src.TieredPartitions(nil))
	m := New(Options{Store: slowStore{dir, 200 * time.Millisecond}, FetchMaxWait: 20 * time.Millisecond, ReaderThreads: 1,
		Logger: slog.New(slog.DiscardHandler)}, src)
	start := time.Now()
	res, err := m.Read(ctx, l, l.TopicID(), 0, 1<<20, l.HighWatermark(), true, false)
	if err != nil || res.Records.Size != 0 || res.Local {
		t.Fatalf("a slow read: %+v %v; want no records", res, err)
	}
	if took := time.Since(start); took > 150*time.Millisecond {
		t.Fatalf("a slow read held the fetch %s, past remote.fetch.max.wait.ms", took)
	}
	var got ReadResult
	deadline := time.Now().Add(10 * time.Second)
	for got.Records.Size == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if got, err = m.Read(ctx, l, l.TopicID(), 0, 1<<20, l.HighWatermark(), true, false); err != nil {
			t.Fatal(err)
		}
	}
	if got.Records.Size == 0 {
		t.Fatal("the records never came from the cache")
	}
}
