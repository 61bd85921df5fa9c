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
	return tieredLogAt(t, fsys, "/data/t-0", n)
}

func tieredLogAt(t *testing.T, fsys vfs.FS, dir string, n int) *storage.Log {
	t.Helper()
	cfg := config.DefaultTopic()
	cfg.SegmentBytes = 16 << 10
	cfg.SegmentIndexBytes = 1024
	cfg.IndexIntervalBytes = 512
	cfg.FileDeleteDelayMs = 0
	cfg.RemoteStorageEnable = true
	cfg.LocalRetentionMs = 0
	l, err := storage.OpenLog(storage.LogOptions{FS: fsys, Dir: dir, TopicPartition: storage.TopicPartition{Topic: "t"},
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

func newTestManager(t *testing.T, src Source, store Store, log *memLog) *Manager {
	return startManager(t, Options{Store: store, BrokerID: 1, Logger: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return time.UnixMilli(baseTs + 1_000_000) }}, src, log)
}

// readyRound runs the manager's tasks once the metadata of the source's
// partitions is loaded (a round skips a partition until then, and the
// next round, a task interval later, runs it).
func readyRound(t *testing.T, m *Manager, src Source) {
	t.Helper()
	ctx := context.Background()
	parts := src.TieredPartitions(nil)
	for _, p := range parts {
		if err := m.view.waitApplied(ctx, partKey{p.TopicID, p.TP.Partition}, -1); err != nil {
			t.Fatal(err)
		}
	}
	m.round(ctx, parts)
}

// startManager makes a manager on log and runs its metadata consumer
// until the test ends (its tasks run when the test calls round).
func startManager(t *testing.T, opts Options, src Source, log *memLog) *Manager {
	opts.Metadata = log.reader()
	m := New(opts, src)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.consume(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return m
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
	log := newMemLog(3)
	m := newTestManager(t, src, store, log)
	readyRound(t, m, src)
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

// dyingStore fails every put of a leader-epoch checkpoint (the broker
// died here, in the middle of a copy) and, with noDelete, every delete
// (the store became unreachable after the objects were put).
type dyingStore struct {
	Store
	noDelete bool
}

func (s dyingStore) Put(ctx context.Context, key string, body io.ReaderAt, size int64) error {
	if strings.HasSuffix(key, suffixEpochs) {
		return errors.New("the broker died here")
	}
	return s.Store.Put(ctx, key, body, size)
}

func (s dyingStore) Delete(ctx context.Context, key string) error {
	if s.noDelete {
		return errors.New("unreachable")
	}
	return s.Store.Delete(ctx, key)
}

// A copy cut short is published as started and never finished: it is
// never read, and the next leader deletes its objects and publishes its
// deletion before copying the segment again.
func TestCopyCutShortIsNeverReadAndIsCleanedUp(t *testing.T) {
	ctx := context.Background()
	_, l, dir, src := tieredSetup(t, true)
	log := newMemLog(3)
	m := newTestManager(t, src, dyingStore{dir, true}, log)
	readyRound(t, m, src)
	pdir := partitionDir("t", 0, l.TopicID())
	left, _ := dir.List(ctx, pdir)
	k := partKey{l.TopicID(), 0}
	cut := m.view.unfinished(k)
	if len(left) == 0 || len(cut) != 1 || cut[0].State != CopySegmentStarted || l.HighestRemoteOffset() != -1 {
		t.Fatalf("objects %v, unfinished %+v, highest remote offset %d: want one copy started and never finished", left, cut, l.HighestRemoteOffset())
	}
	if res, err := m.Read(ctx, l, l.TopicID(), 0, 1<<20, l.HighWatermark(), true, false); err != nil || !res.Local {
		t.Fatalf("a read of the unfinished copy: %+v %v; want it sent to the local log", res, err)
	}
	// Another node, or this one after a restart, leads at a new epoch.
	src.part.LeaderEpoch = 4
	m2 := newTestManager(t, src, dir, log)
	readyRound(t, m2, src)
	for _, name := range mustList(t, dir, pdir) {
		if strings.HasPrefix(name, segmentStem(cut[0].StartOffset, cut[0].SegmentID)) {
			t.Fatalf("the new leader left %s of the copy cut short", name)
		}
	}
	if u := m2.view.unfinished(k); len(u) != 0 {
		t.Fatalf("unfinished after the new leader's task: %+v", u)
	}
	var states []string
	for _, rec := range log.records(t) {
		switch {
		case rec.Segment != nil && rec.Segment.SegmentID == cut[0].SegmentID:
			states = append(states, fmt.Sprint(rec.Segment.State))
		case rec.Update != nil && rec.Update.SegmentID == cut[0].SegmentID:
			states = append(states, fmt.Sprint(rec.Update.State))
		}
	}
	if fmt.Sprint(states) != "[0 2 3]" {
		t.Fatalf("the cut copy's states in __remote_log_metadata: %v; want COPY_SEGMENT_STARTED, DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED", states)
	}
	if l.HighestRemoteOffset() < 0 || len(m2.view.committed(k)) == 0 {
		t.Fatal("the new leader did not copy the segment again")
	}
}

func mustList(t *testing.T, s Store, dir string) []string {
	t.Helper()
	names, err := s.List(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// A leader that lost its leadership while copying does not commit, and
// deletes what it put.
func TestCopyByADeposedLeaderIsNotCommitted(t *testing.T) {
	ctx := context.Background()
	_, l, dir, src := tieredSetup(t, false)
	log := newMemLog(3)
	m := newTestManager(t, src, dir, log)
	readyRound(t, m, src)
	if left, _ := dir.List(ctx, partitionDir("t", 0, l.TopicID())); len(left) != 0 || l.HighestRemoteOffset() != -1 {
		t.Fatalf("a deposed leader left %v and highest remote offset %d", left, l.HighestRemoteOffset())
	}
	if segs := m.view.all(partKey{l.TopicID(), 0}); len(segs) != 0 {
		t.Fatalf("segments in the metadata: %+v", segs)
	}
}

// Two managers sharing the metadata topic see the same segments: a
// follower learns what the leader copied, and its local retention may
// delete it.
func TestFollowerSeesTheLeadersCopies(t *testing.T) {
	fsys, l, dir, src := tieredSetup(t, true)
	log := newMemLog(50)
	readyRound(t, newTestManager(t, src, dir, log), src)
	copied := l.HighestRemoteOffset()
	if copied < 0 {
		t.Fatal("nothing copied")
	}
	other := tieredLogAt(t, fsys, "/other/t-0", 40)
	fsrc := &fakeSource{part: Partition{TP: other.TopicPartition(), TopicID: other.TopicID(), Log: other, LeaderEpoch: 3}}
	follower := newTestManager(t, fsrc, dir, log)
	readyRound(t, follower, fsrc)
	if got := other.HighestRemoteOffset(); got != copied {
		t.Fatalf("the follower's highest remote offset %d, the leader copied to %d", got, copied)
	}
	if n := log.inits; n != 0 {
		t.Fatalf("round initialised the topic %d times; Run does", n)
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
	_, l, dir, src := tieredSetup(t, true)
	log := newMemLog(3)
	readyRound(t, newTestManager(t, src, dir, log), src)
	m := startManager(t, Options{Store: slowStore{dir, 200 * time.Millisecond}, FetchMaxWait: 20 * time.Millisecond, ReaderThreads: 1,
		Logger: slog.New(slog.DiscardHandler)}, src, log)
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
