package storage

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/vfs"
)

func openTestManager(t *testing.T, fsys vfs.FS, dirs ...string) *Manager {
	t.Helper()
	m, err := OpenManager(ManagerOptions{FS: fsys, Dirs: dirs, Now: (&testClock{ms: testNowMs}).now})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestManagerPlacesCheckpointsAndReopens(t *testing.T) {
	fsys := vfs.NewMemFS()
	m := openTestManager(t, fsys, "/a", "/b")
	cfg := smallConfig()
	cfg.SegmentBytes = 1024
	tps := []TopicPartition{{"orders", 0}, {"orders", 1}, {"my-topic-x", 2}, {"z", 0}}
	for i, tp := range tps {
		l, err := m.GetOrCreate(tp, [16]byte{byte(i + 1)}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 10*(i+1); j++ {
			mustAppend(t, l, plainBatch(t, 2))
		}
		l.AdvanceHighWatermark(l.LogEndOffset() - 1)
	}
	again, _ := m.GetOrCreate(tps[0], [16]byte{1}, cfg)
	if l, _ := m.Get(tps[0]); l != again {
		t.Fatal("GetOrCreate opened a second log")
	}
	// Fewest partitions first: two in each dir.
	descs := m.DescribeDirs()
	if len(descs) != 2 || len(descs[0].Partitions) != 2 || len(descs[1].Partitions) != 2 {
		t.Fatalf("placement %+v", descs)
	}
	if descs[0].TotalBytes <= 0 || descs[0].Partitions[0].Size <= 0 {
		t.Fatalf("sizes %+v", descs[0])
	}
	l3, _ := m.Get(tps[3])
	l3.AdvanceHighWatermark(l3.LogEndOffset())
	if _, err := l3.DeleteRecordsBefore(5); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	var rpFile string
	for _, d := range []string{"/a", "/b"} {
		data, err := vfs.ReadFile(fsys, d+"/"+RecoveryPointCheckpointFile)
		if err != nil {
			t.Fatal(err)
		}
		rpFile += string(data)
		if _, err := fsys.Stat(d + "/" + CleanShutdownFile); err != nil {
			t.Fatalf("no clean shutdown marker in %s", d)
		}
	}
	if !strings.Contains(rpFile, "my-topic-x 2 60\n") || !strings.HasPrefix(rpFile, "0\n2\n") {
		t.Fatalf("recovery point checkpoints:\n%s", rpFile)
	}

	m2 := openTestManager(t, fsys, "/a", "/b")
	defer m2.Close()
	if _, ok := m2.PreviousBrokerEpoch(); !ok {
		t.Fatal("clean shutdown not seen")
	}
	if _, err := fsys.Stat("/a/" + CleanShutdownFile); err == nil {
		t.Fatal("marker not removed at open")
	}
	if got := m2.OnDisk(); len(got) != 4 || got[0] != (TopicPartition{"my-topic-x", 2}) {
		t.Fatalf("on disk %v", got)
	}
	// Checkpointing before a log is reopened keeps its offsets.
	if err := m2.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for i, tp := range tps {
		l, err := m2.GetOrCreate(tp, [16]byte{byte(i + 1)}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(20 * (i + 1))
		if l.LogEndOffset() != want || l.RecoveryPoint() != want || l.HighWatermark() != want-1 && i != 3 {
			t.Fatalf("%s: end %d rp %d hw %d", tp, l.LogEndOffset(), l.RecoveryPoint(), l.HighWatermark())
		}
	}
	if l, _ := m2.Get(tps[3]); l.LogStartOffset() != 5 {
		t.Fatalf("log start offset not checkpointed: %d", l.LogStartOffset())
	}
}

// createAndDelete creates partition gone-0 with a record and deletes it
// (its files are removed after a minute).
func createAndDelete(t *testing.T, m *Manager) (TopicPartition, config.Topic) {
	t.Helper()
	cfg := smallConfig()
	cfg.FileDeleteDelayMs = 60000
	tp := TopicPartition{"gone", 0}
	l, err := m.GetOrCreate(tp, [16]byte{1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, plainBatch(t, 1))
	if err := m.Delete(tp); err != nil {
		t.Fatal(err)
	}
	return tp, cfg
}

func TestManagerDelete(t *testing.T) {
	fsys := vfs.NewMemFS()
	m := openTestManager(t, fsys, "/a")
	tp, cfg := createAndDelete(t, m)
	if _, ok := m.Get(tp); ok || len(m.OnDisk()) != 0 {
		t.Fatal("deleted partition still known")
	}
	ents, _ := fsys.ReadDir("/a")
	found := false
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "gone-0.") && strings.HasSuffix(e.Name(), "-delete") && len(e.Name()) == len("gone-0.")+32+len("-delete") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no -delete dir: %v", ents)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	ents, _ = fsys.ReadDir("/a")
	for _, e := range ents {
		if e.IsDir() {
			t.Fatalf("dir %s left after close", e.Name())
		}
	}
	// Recreating gets a fresh log.
	m2 := openTestManager(t, fsys, "/a")
	defer m2.Close()
	l2, err := m2.GetOrCreate(tp, [16]byte{2}, cfg)
	if err != nil || l2.LogEndOffset() != 0 {
		t.Fatalf("recreated: %v", err)
	}
}

func TestManagerUncleanReopenRecovers(t *testing.T) {
	fsys := vfs.NewMemFS()
	m := openTestManager(t, fsys, "/a")
	tp := TopicPartition{"t", 0}
	l, _ := m.GetOrCreate(tp, [16]byte{1}, smallConfig())
	for i := 0; i < 10; i++ {
		mustAppend(t, l, plainBatch(t, 2))
	}
	l.Flush()
	m.Checkpoint()
	mustAppend(t, l, plainBatch(t, 2))
	l.bg.Wait()
	fsys.Crash(false, nil)
	m2 := openTestManager(t, fsys, "/a")
	defer m2.Close()
	if _, ok := m2.PreviousBrokerEpoch(); ok {
		t.Fatal("unclean shutdown reported clean")
	}
	l2, err := m2.GetOrCreate(tp, [16]byte{1}, smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	if l2.LogEndOffset() != 20 {
		t.Fatalf("log end %d", l2.LogEndOffset())
	}
}

func TestManagerRunFlushesAndCheckpoints(t *testing.T) {
	fsys := vfs.NewMemFS()
	m, err := OpenManager(ManagerOptions{FS: fsys, Dirs: []string{"/a"}, FlushSchedulerInterval: 5 * time.Millisecond, CheckpointInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cfg := smallConfig()
	cfg.FlushMs = 1
	l, _ := m.GetOrCreate(TopicPartition{"t", 0}, [16]byte{1}, cfg)
	mustAppend(t, l, plainBatch(t, 3))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for l.RecoveryPoint() != 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	var data []byte
	for time.Now().Before(deadline) {
		data, _ = vfs.ReadFile(fsys, "/a/"+RecoveryPointCheckpointFile)
		if strings.Contains(string(data), "t 0 3") {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if l.RecoveryPoint() != 3 || !strings.Contains(string(data), "t 0 3") {
		t.Fatalf("recovery point %d, checkpoint %q", l.RecoveryPoint(), data)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestParsePartitionDir(t *testing.T) {
	cases := map[string]bool{"a-0": true, "my-topic-12": true, "a": false, "a-x": false, "a-1.abc-delete": false, "a-1.abc-future": false, "-1": false}
	for name, ok := range cases {
		if _, got := parsePartitionDir(name); got != ok {
			t.Errorf("%s: %v", name, got)
		}
	}
	tp, _ := parsePartitionDir("my-topic-12")
	if tp != (TopicPartition{"my-topic", 12}) {
		t.Fatalf("%v", tp)
	}
}

// The controller's metadata log shares a log dir with the partitions; the
// manager must never treat it as a partition (a stray-log sweep would
// delete the raft log).
func TestManagerIgnoresMetadataLogDir(t *testing.T) {
	fsys := vfs.NewMemFS()
	if err := fsys.MkdirAll("/data/__cluster_metadata-0", 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := OpenManager(ManagerOptions{FS: fsys, Dirs: []string{"/data"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.OnDisk(); len(got) != 0 {
		t.Fatalf("metadata log listed as a partition: %v", got)
	}
	if _, ok := parsePartitionDir("__cluster_metadata-0"); ok {
		t.Fatal("metadata log parsed as a partition")
	}
}
