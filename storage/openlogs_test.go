package storage

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// partitionRequests asks for n partitions of topic t, topic ID {1}.
func partitionRequests(n int) []LogRequest {
	reqs := make([]LogRequest, n)
	for i := range reqs {
		reqs[i] = LogRequest{TopicPartition: TopicPartition{"t", int32(i)}, TopicID: [16]byte{1}, Config: ptr(smallConfig())}
	}
	return reqs
}

// Concurrent OpenLogs calls asking for overlapping partitions open each log
// once and all get the same *Log.
func TestOpenLogsDedupesConcurrentOpens(t *testing.T) {
	fsys := vfs.NewMemFS()
	var metadataWrites, logDirSyncs atomic.Int64
	fsys.Inject(func(op vfs.Op, name string) error {
		switch {
		case op == vfs.OpWrite && strings.HasSuffix(name, PartitionMetadataFile):
			metadataWrites.Add(1)
		case op == vfs.OpSyncDir && name == "/a":
			logDirSyncs.Add(1)
		}
		return nil
	})
	m, err := OpenManager(ManagerOptions{FS: fsys, Dirs: []string{"/a"}, Parallelism: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	reqs := partitionRequests(40)
	const callers = 8
	results := make([][]LogResult, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			// Each caller asks for a different, overlapping window, twice
			// for some partitions within one call.
			mine := append(append([]LogRequest(nil), reqs[c*4:c*4+12]...), reqs[c*4])
			results[c] = m.OpenLogs(mine)
		})
	}
	wg.Wait()
	byTP := map[TopicPartition]*Log{}
	for c, res := range results {
		for i, r := range res {
			tp := reqs[c*4+i%12].TopicPartition
			if r.Err != nil {
				t.Fatalf("caller %d, %s: %v", c, tp, r.Err)
			}
			if prev, ok := byTP[tp]; ok && prev != r.Log {
				t.Fatalf("%s opened twice", tp)
			}
			byTP[tp] = r.Log
			if got, _ := m.Get(tp); got != r.Log {
				t.Fatalf("%s: the manager holds another log", tp)
			}
		}
	}
	if len(byTP) != 40 || metadataWrites.Load() != 40 {
		t.Fatalf("%d partitions, partition.metadata written %d times", len(byTP), metadataWrites.Load())
	}
	if n := logDirSyncs.Load(); n > callers+1 {
		t.Fatalf("log dir synced %d times for %d calls", n, callers)
	}
	if len(m.OnDisk()) != 40 {
		t.Fatalf("on disk: %v", m.OnDisk())
	}
}

// A Delete of a partition being opened waits for the open, then deletes.
func TestDeleteWaitsForTheOpen(t *testing.T) {
	fsys := vfs.NewMemFS()
	m := openTestManager(t, fsys, "/a")
	defer m.Close()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite && name == "/a/t-0/"+PartitionMetadataFile {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
		return nil
	})
	opened := make(chan LogResult)
	go func() { opened <- m.OpenLogs(partitionRequests(1))[0] }()
	<-entered
	deleted := make(chan error)
	go func() { deleted <- m.Delete(TopicPartition{"t", 0}) }()
	// A Delete that did not wait has returned by now: that it has not is
	// the test, so this is a sleep (a window), not a wait.
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-deleted:
		t.Fatalf("Delete returned (%v) while the log was being opened", err)
	case r := <-opened:
		t.Fatalf("the open finished early: %v", r.Err)
	default:
	}
	close(release)
	r := <-opened
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get(TopicPartition{"t", 0}); ok || len(m.OnDisk()) != 0 {
		t.Fatal("the log opened during the Delete survived it")
	}
	if _, _, err := r.Log.Append(plainBatch(t, 1), 0, AppendClient); err == nil {
		t.Fatal("the deleted log took an append")
	}
}

// One OpenLogs call over two dirs spreads the new partitions between them
// and syncs each log dir once.
func TestOpenLogsBatchesTheLogDirSync(t *testing.T) {
	fsys := vfs.NewMemFS()
	syncs := map[string]int{}
	var mu sync.Mutex
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpSyncDir {
			mu.Lock()
			syncs[name]++
			mu.Unlock()
		}
		return nil
	})
	m, err := OpenManager(ManagerOptions{FS: fsys, Dirs: []string{"/a", "/b"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	mu.Lock()
	clear(syncs)
	mu.Unlock()
	for _, r := range m.OpenLogs(partitionRequests(50)) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if syncs["/a"] != 1 || syncs["/b"] != 1 {
		t.Fatalf("log dir syncs %v", syncs)
	}
	for name, n := range syncs {
		if name != "/a" && name != "/b" {
			t.Fatalf("%s synced %d times at creation: %v", name, n, syncs)
		}
	}
	descs := m.DescribeDirs()
	if len(descs[0].Partitions) != 25 || len(descs[1].Partitions) != 25 {
		t.Fatalf("placement: %d and %d", len(descs[0].Partitions), len(descs[1].Partitions))
	}
}

// A failure to create one partition's dir fails that partition only, and
// a retry creates it.
func TestOpenLogsFailsOnePartition(t *testing.T) {
	fsys := vfs.NewMemFS()
	m := openTestManager(t, fsys, "/a")
	defer m.Close()
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpMkdir && strings.HasSuffix(name, "/t-3") {
			return fmt.Errorf("injected")
		}
		return nil
	})
	res := m.OpenLogs(partitionRequests(5))
	for i, r := range res {
		if (i == 3) != (r.Err != nil) {
			t.Fatalf("partition %d: %v", i, r.Err)
		}
	}
	if kerrOf(res[3].Err) != kerr.KafkaStorageError {
		t.Fatalf("got %v, want KAFKA_STORAGE_ERROR", res[3].Err)
	}
	fsys.Inject(nil)
	if r := m.OpenLogs(partitionRequests(5))[3]; r.Err != nil {
		t.Fatalf("retry: %v", r.Err)
	}
}

// Close flushes and closes many logs (in parallel) and writes the
// clean-shutdown marker; the next start trusts every log at its end.
func TestManagerClosesManyLogs(t *testing.T) {
	fsys := vfs.NewMemFS()
	m, err := OpenManager(ManagerOptions{FS: fsys, Dirs: []string{"/a"}, Parallelism: 8})
	if err != nil {
		t.Fatal(err)
	}
	res := m.OpenLogs(partitionRequests(64))
	for i, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		for range i%3 + 1 {
			mustAppend(t, r.Log, plainBatch(t, 2))
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if err := r.Log.Err(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := r.Log.Append(plainBatch(t, 1), 0, AppendClient); err == nil {
			t.Fatal("a closed log took an append")
		}
	}
	// Power loss right after the clean shutdown: everything was synced.
	crash(fsys)
	m2 := openTestManager(t, fsys, "/a")
	defer m2.Close()
	if _, ok := m2.PreviousBrokerEpoch(); !ok {
		t.Fatal("clean shutdown not seen")
	}
	for i, r := range m2.OpenLogs(partitionRequests(64)) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		want := int64(2 * (i%3 + 1))
		if r.Log.LogEndOffset() != want || r.Log.RecoveryPoint() != want {
			t.Fatalf("partition %d: end %d, recovery point %d, want %d", i, r.Log.LogEndOffset(), r.Log.RecoveryPoint(), want)
		}
	}
}

// A log that fails to close keeps the marker out of its dir only; the
// other dir, whose logs closed, gets its marker.
func TestManagerCloseFailureKeepsTheMarkerOut(t *testing.T) {
	fsys := vfs.NewMemFS()
	m := openTestManager(t, fsys, "/a", "/b")
	res := m.OpenLogs(partitionRequests(6))
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		mustAppend(t, r.Log, plainBatch(t, 1))
	}
	failing := res[0].Log.Dir()
	// The close writes the producer snapshot (and syncs nothing itself).
	fsys.Inject(func(op vfs.Op, name string) error {
		if (op == vfs.OpOpen || op == vfs.OpWrite) && strings.HasPrefix(name, failing+"/") {
			return fmt.Errorf("injected")
		}
		return nil
	})
	if err := m.Close(); err == nil {
		t.Fatal("Close hid a failed log")
	}
	fsys.Inject(nil)
	bad, good := "/a", "/b"
	if !strings.HasPrefix(failing, "/a/") {
		bad, good = good, bad
	}
	if _, err := fsys.Stat(bad + "/" + CleanShutdownFile); err == nil {
		t.Fatal("marker written in the dir of the failed log")
	}
	if _, err := fsys.Stat(good + "/" + CleanShutdownFile); err != nil {
		t.Fatal("no marker in the healthy dir")
	}
}

// The logs of a clean shutdown are made durable by one sync of each log
// dir's filesystem: when it fails, that dir gets no marker, and its logs'
// recovery points stay where the last flush left them.
func TestManagerCloseSyncFSFailureKeepsTheMarkerOut(t *testing.T) {
	fsys := vfs.NewMemFS()
	m := openTestManager(t, fsys, "/a", "/b")
	for _, r := range m.OpenLogs(partitionRequests(6)) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		mustAppend(t, r.Log, plainBatch(t, 1))
	}
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpSyncFS && name == "/a" {
			return fmt.Errorf("injected")
		}
		return nil
	})
	if err := m.Close(); err == nil {
		t.Fatal("Close hid a failed sync of the filesystem")
	}
	fsys.Inject(nil)
	if _, err := fsys.Stat("/a/" + CleanShutdownFile); err == nil {
		t.Fatal("marker written in the dir whose filesystem sync failed")
	}
	if _, err := fsys.Stat("/b/" + CleanShutdownFile); err != nil {
		t.Fatal("no marker in the healthy dir")
	}
	// A power loss now: /b's logs come back whole from its marker; /a's
	// are recovered from their checkpointed recovery point (0), which the
	// failed close did not move.
	fsys.Crash(false, nil)
	m2 := openTestManager(t, fsys, "/a", "/b")
	defer m2.Close()
	for _, r := range m2.OpenLogs(partitionRequests(6)) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if strings.HasPrefix(r.Log.Dir(), "/a/") && r.Log.RecoveryPoint() != 0 {
			t.Fatalf("%s: recovery point %d after a close whose sync failed, want 0", r.Log.Dir(), r.Log.RecoveryPoint())
		}
		if strings.HasPrefix(r.Log.Dir(), "/b/") && (r.Log.RecoveryPoint() != 1 || r.Log.LogEndOffset() != 1) {
			t.Fatalf("%s: recovery point %d, end %d after a clean close, want 1 and 1", r.Log.Dir(), r.Log.RecoveryPoint(), r.Log.LogEndOffset())
		}
	}
}
