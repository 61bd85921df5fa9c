package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/controller/decide"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// imageBytes is a canonical encoding of an image's replicated content
// (everything but LeaderID, which is not in the log).
func imageBytes(img *metadata.Image) string {
	return fmt.Sprintf("%d/%d/%s/%x", img.Offset, img.Epoch, img.ClusterID, metadata.EncodeRecords(metadata.ImageRecords(img)))
}

// workload applies random admin operations; it stops at the first failure
// (the disk "died") and returns what was acknowledged.
type workload struct {
	rng     *rand.Rand
	c       *Controller
	epoch   int64
	created map[string]protocol.UUID
	configs map[string]string
	lastAck int64
	// inFlightDelete is the topic of a deletion that failed (was in flight
	// at the crash): it may or may not have committed.
	inFlightDelete string
}

func (w *workload) step(ctx context.Context) error {
	switch w.rng.Intn(6) {
	case 0, 1:
		name := fmt.Sprintf("t%d", w.rng.Intn(1000))
		if _, ok := w.created[name]; ok {
			return nil
		}
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Topics = []kmsg.CreateTopicsRequestTopic{topicReq(name, int32(1+w.rng.Intn(3)), 1)}
		r := w.c.CreateTopics(ctx, req).Topics[0]
		if r.ErrorCode != 0 {
			return fmt.Errorf("create %s: %d %v", name, r.ErrorCode, r.ErrorMessage)
		}
		w.created[name] = r.TopicID
	case 2:
		for name := range w.created {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.TopicNames = []string{name}
			r := w.c.DeleteTopics(ctx, req).Topics[0]
			if r.ErrorCode != 0 {
				w.inFlightDelete = name
				return fmt.Errorf("delete %s: %d", name, r.ErrorCode)
			}
			delete(w.created, name)
			delete(w.configs, name)
			break
		}
	case 3:
		for name := range w.created {
			v := fmt.Sprint(w.rng.Intn(100000))
			r := w.c.IncrementalAlterConfigs(ctx, alterReq(kmsg.ConfigResourceTypeTopic, name, "retention.ms", opSet, &v)).Resources[0]
			if r.ErrorCode != 0 {
				return fmt.Errorf("alter %s: %d", name, r.ErrorCode)
			}
			w.configs[name] = v
			break
		}
	case 4:
		req := kmsg.NewPtrAllocateProducerIDsRequest()
		req.BrokerID = 1
		req.BrokerEpoch = w.epoch
		if r := w.c.AllocateProducerIDs(ctx, req); r.ErrorCode != 0 {
			return fmt.Errorf("allocate: %d", r.ErrorCode)
		}
	case 5:
		hb := kmsg.NewPtrBrokerHeartbeatRequest()
		hb.BrokerID = 1
		hb.BrokerEpoch = w.epoch
		hb.CurrentMetadataOffset = w.c.Image().Offset
		if r := w.c.BrokerHeartbeat(ctx, hb); r.ErrorCode != 0 {
			return fmt.Errorf("heartbeat: %d", r.ErrorCode)
		}
	}
	w.lastAck = w.c.Image().Offset
	return nil
}

// TestCrashAtRandomPointsRebuildsImage runs a random workload, kills the
// disk after a random number of file operations, loses everything that was
// not synced (keeping torn prefixes), restarts and checks that nothing
// acknowledged was lost and the image is exactly one the log had.
func TestCrashAtRandomPointsRebuildsImage(t *testing.T) {
	forSeeds(t, 25, crashOnce)
}

// forSeeds runs one subtest per seed 1..seeds (5 with -short).
func forSeeds(t *testing.T, seeds int, run func(t *testing.T, seed int64)) {
	if testing.Short() {
		seeds = 5
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { run(t, seed) })
	}
}

func crashOnce(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	fsys := vfs.NewMemFS()
	formatTest(t, fsys)
	small := func(cfg *Config) {
		cfg.SnapshotMaxEntries = int64(3 + rng.Intn(10))
		cfg.SegmentBytes = int64(256 + rng.Intn(2048))
	}
	c := startTest(t, fsys, small)
	epoch := registerBroker(t, c, 1)

	published := recordImages(t, c)

	kill := diskThatDies(fsys, 20+rng.Intn(400))
	w := &workload{rng: rng, c: c, epoch: epoch, created: map[string]protocol.UUID{}, configs: map[string]string{}}
	acked := map[string]protocol.UUID{}
	ackedConfigs := map[string]string{}
	for i := 0; i < 300; i++ {
		ctx, done := context.WithTimeout(context.Background(), 2*time.Second)
		err := w.step(ctx)
		done()
		if err != nil {
			break
		}
		acked = cloneMap(w.created)
		ackedConfigs = cloneMap(w.configs)
	}
	lastAck := w.lastAck
	kill()
	c.Close()
	fsys.Inject(nil)
	if testing.Verbose() {
		des, _ := fsys.ReadDir(testDir + "/" + MetadataPartitionDir)
		for _, d := range des {
			fi, _ := d.Info()
			t.Logf("before crash: %s %d", d.Name(), fi.Size())
		}
		t.Logf("lastAck %d", lastAck)
	}
	fsys.Crash(true, rng)
	if testing.Verbose() {
		des, _ := fsys.ReadDir(testDir + "/" + MetadataPartitionDir)
		for _, d := range des {
			fi, _ := d.Info()
			t.Logf("after crash: %s %d", d.Name(), fi.Size())
		}
	}

	c2, err := Start(context.Background(), testConfig(fsys))
	if err != nil {
		t.Fatalf("restart after crash: %v", err)
	}
	img := c2.Image()
	if img.Offset < lastAck {
		t.Fatalf("restarted at offset %d, before the last acknowledged offset %d", img.Offset, lastAck)
	}
	for name, id := range acked {
		if tp := img.Topic(name); (tp == nil && name != w.inFlightDelete) || (tp != nil && tp.ID != id) {
			var names []string
			for n := range img.Topics.All() {
				names = append(names, n)
			}
			t.Fatalf("acknowledged topic %s (%s) lost; image offset %d topics %v acked %v", name, id, img.Offset, names, acked)
		}
	}
	// Only the one operation in flight at the crash may have changed an
	// acknowledged config (or deleted its topic).
	changed := 0
	for name, v := range ackedConfigs {
		if got := img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: name}]["retention.ms"]; got != v {
			changed++
		}
	}
	if changed > 1 {
		t.Fatalf("%d acknowledged configs changed by the crash", changed)
	}
	if want := published.at(img.Offset); want != nil && imageBytes(want) != imageBytes(img) {
		t.Fatalf("image at offset %d differs from the one published before the crash", img.Offset)
	}
	// A clean restart rebuilds exactly the same image (snapshot + log).
	before := imageBytes(c2.Image())
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	c3, err := Start(context.Background(), testConfig(fsys))
	if err != nil {
		t.Fatalf("second restart: %v", err)
	}
	defer c3.Close()
	// The restarted leader may commit its term's empty entry, which does
	// not change the image's content.
	if after := imageBytes(c3.Image()); after != before {
		t.Fatalf("clean restart changed the image:\n%s\n%s", before, after)
	}
	// And the controller still works.
	if r := createTopic(t, c3, "after-crash", 1, 1); r.ErrorCode != 0 && r.ErrorCode != 36 {
		t.Fatalf("create after restart: %d %v", r.ErrorCode, r.ErrorMessage)
	}
}

// diskThatDies makes fsys fail every mutating operation after budget of
// them, and every operation once it is dead; kill kills it at once.
func diskThatDies(fsys *vfs.MemFS, budget int) (kill func()) {
	var mu sync.Mutex
	dead := false
	fsys.Inject(func(op vfs.Op, name string) error {
		switch op {
		case vfs.OpRead, vfs.OpReadDir, vfs.OpOpen:
			mu.Lock()
			alive := !dead
			mu.Unlock()
			if alive {
				return nil
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if dead {
			return errors.New("disk gone")
		}
		budget--
		if budget <= 0 {
			dead = true
			return errors.New("disk gone")
		}
		return nil
	})
	return func() {
		mu.Lock()
		dead = true
		mu.Unlock()
	}
}

// burstWriter is one of the concurrent writers of crashBurstOnce and what
// it was told.
type burstWriter struct {
	topics map[string]protocol.UUID
	blocks []int64
	// config is the last acknowledged retention.ms of its own topic;
	// failedConfig the one whose write failed (it may have committed).
	config, failedConfig string
	lastAck              int64
}

// run writes until its first failure; a failure must be one a pending
// write gets when the disk dies (NOT_CONTROLLER) or one a write gets
// after (UNKNOWN_SERVER_ERROR), never a hang.
func (w *burstWriter) run(t *testing.T, c *Controller, rng *rand.Rand, id int, epoch int64) {
	w.topics = map[string]protocol.UUID{}
	for i := range 40 {
		ctx, done := context.WithTimeout(context.Background(), 5*time.Second)
		var code int16
		switch rng.Intn(3) {
		case 0:
			name := fmt.Sprintf("w%d-%d", id, i)
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Topics = []kmsg.CreateTopicsRequestTopic{topicReq(name, int32(1+rng.Intn(3)), 1)}
			r := c.CreateTopics(ctx, req).Topics[0]
			if code = r.ErrorCode; code == 0 {
				w.topics[name] = r.TopicID
			}
		case 1:
			req := kmsg.NewPtrAllocateProducerIDsRequest()
			req.BrokerID, req.BrokerEpoch = 1, epoch
			r := c.AllocateProducerIDs(ctx, req)
			if code = r.ErrorCode; code == 0 {
				w.blocks = append(w.blocks, r.ProducerIDStart)
			}
		case 2:
			v := fmt.Sprint(id*1000 + i)
			r := c.IncrementalAlterConfigs(ctx, alterReq(kmsg.ConfigResourceTypeTopic, fmt.Sprintf("cfg-%d", id), "retention.ms", opSet, &v)).Resources[0]
			if code = r.ErrorCode; code == 0 {
				w.config = v
			} else {
				w.failedConfig = v
			}
		}
		done()
		if code != 0 {
			if code != kerr.NotController.Code && code != kerr.UnknownServerError.Code {
				t.Errorf("writer %d: failed with code %d", id, code)
			}
			return
		}
		w.lastAck = max(w.lastAck, c.Image().Offset)
	}
}

// TestCrashDuringPipelinedBurst: concurrent writers keep entries in flight
// when the disk dies; after the crash (unsynced data lost, torn tails
// kept) and a restart, every acknowledged write is in the replayed image.
func TestCrashDuringPipelinedBurst(t *testing.T) {
	forSeeds(t, 20, crashBurstOnce)
}

func crashBurstOnce(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	fsys := vfs.NewMemFS()
	formatTest(t, fsys)
	c := startTest(t, fsys, func(cfg *Config) {
		cfg.SnapshotMaxEntries = int64(5 + rng.Intn(20))
		cfg.SegmentBytes = int64(1024 + rng.Intn(8192))
	})
	epoch := registerBroker(t, c, 1)
	const writers = 8
	for id := range writers {
		if r := createTopic(t, c, fmt.Sprintf("cfg-%d", id), 1, 1); r.ErrorCode != 0 {
			t.Fatalf("create cfg-%d: %d", id, r.ErrorCode)
		}
	}
	published := recordImages(t, c)
	kill := diskThatDies(fsys, 30+rng.Intn(300))
	ws := make([]burstWriter, writers)
	rngs := make([]*rand.Rand, writers)
	for id := range writers {
		rngs[id] = rand.New(rand.NewSource(rng.Int63()))
	}
	concurrently(writers, func(id int) { ws[id].run(t, c, rngs[id], id, epoch) })
	kill()
	c.Close()
	fsys.Inject(nil)
	fsys.Crash(true, rng)

	c2, err := Start(context.Background(), testConfig(fsys))
	if err != nil {
		t.Fatalf("restart after crash: %v", err)
	}
	defer c2.Close()
	img := c2.Image()
	blocks := map[int64]bool{}
	for id, w := range ws {
		if img.Offset < w.lastAck {
			t.Fatalf("restarted at offset %d, before writer %d's acknowledged offset %d", img.Offset, id, w.lastAck)
		}
		for name, tid := range w.topics {
			if tp := img.Topic(name); tp == nil || tp.ID != tid {
				t.Fatalf("acknowledged topic %s lost (image offset %d)", name, img.Offset)
			}
		}
		for _, start := range w.blocks {
			if blocks[start] {
				t.Fatalf("producer id block %d handed out twice", start)
			}
			blocks[start] = true
			if start+decide.ProducerIDBlockSize > img.NextProducerID {
				t.Fatalf("acknowledged producer id block %d is not below the next producer id %d", start, img.NextProducerID)
			}
		}
		got := img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: fmt.Sprintf("cfg-%d", id)}]["retention.ms"]
		if got != w.config && got != w.failedConfig {
			t.Fatalf("cfg-%d retention.ms = %q, acknowledged %q, in flight %q", id, got, w.config, w.failedConfig)
		}
	}
	if want := published.at(img.Offset); want != nil && imageBytes(want) != imageBytes(img) {
		t.Fatalf("image at offset %d differs from the one published before the crash", img.Offset)
	}
	if r := createTopic(t, c2, "after-crash", 1, 1); r.ErrorCode != 0 {
		t.Fatalf("create after restart: %d %v", r.ErrorCode, r.ErrorMessage)
	}
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestRestartKeepsEverythingAndSnapshotsCompactTheLog(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys, func(cfg *Config) { cfg.SnapshotMaxEntries = 10; cfg.SegmentBytes = 512 })
	registerBroker(t, c, 1)
	for i := range 50 {
		if r := createTopic(t, c, fmt.Sprintf("topic-%d", i), 2, 1); r.ErrorCode != 0 {
			t.Fatalf("create: %+v", r)
		}
	}
	want := imageBytes(c.Image())
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	entries, _ := fsys.ReadDir(testDir + "/" + MetadataPartitionDir)
	var snaps, segs int
	for _, e := range entries {
		switch {
		case len(e.Name()) > 5 && e.Name()[:5] == "snap-":
			snaps++
		case len(e.Name()) > 4 && e.Name()[:4] == "wal-":
			segs++
		}
	}
	if snaps == 0 || snaps > 2 {
		t.Fatalf("%d snapshot files, want 1 or 2", snaps)
	}
	if segs > 2 {
		t.Fatalf("%d log segments after compaction", segs)
	}
	c2 := startTest(t, fsys)
	if got := imageBytes(c2.Image()); got != want {
		t.Fatalf("image after restart differs")
	}
	if c2.Image().Topics.Len() != 50 {
		t.Fatalf("%d topics after restart", c2.Image().Topics.Len())
	}
}

func TestSnapshotAfterInterval(t *testing.T) {
	fsys := vfs.NewMemFS()
	clock := &fakeClock{now: time.Unix(1000, 0)}
	c := startTest(t, fsys, func(cfg *Config) {
		cfg.Now = clock.Now
		cfg.SnapshotMaxEntries = 1 << 30
		cfg.SnapshotMaxInterval = time.Minute
	})
	registerBroker(t, c, 1)
	snapshots := func() int {
		des, _ := fsys.ReadDir(testDir + "/" + MetadataPartitionDir)
		n := 0
		for _, d := range des {
			if len(d.Name()) > 5 && d.Name()[:5] == "snap-" {
				n++
			}
		}
		return n
	}
	createTopic(t, c, "a", 1, 1)
	if n := snapshots(); n != 0 {
		t.Fatalf("%d snapshots before the interval", n)
	}
	clock.Add(2 * time.Minute)
	createTopic(t, c, "b", 1, 1)
	if n := snapshots(); n != 1 {
		t.Fatalf("%d snapshots after the interval, want 1", n)
	}
}

// A formatted metadata directory survives a crash: the bootstrap file and
// every directory above it are durable when Format returns.
func TestFormatSurvivesCrash(t *testing.T) {
	fsys := vfs.NewMemFS()
	formatTest(t, fsys)
	fsys.Crash(false, nil)
	info, err := ReadFormat(fsys, testDir)
	if err != nil {
		t.Fatalf("format lost in a crash: %v", err)
	}
	if info.ClusterID != "test-cluster" {
		t.Fatalf("cluster id %q", info.ClusterID)
	}
}
