package runtime_test

// The runtime with the real replica layer (replica.Manager over a MemFS
// log dir, fed hand-made metadata images) and the group coordinator: what
// a __consumer_offsets partition does for the groups living in it.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/gregorbroker/gregor/coordinator/runtime"
	"github.com/gregorbroker/gregor/internal/await"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metadata/persist"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/replica"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// offsetsConfigs is __consumer_offsets compacted, min.insync.replicas
// as set. setOffsets puts minISR in the image as the topic's config: the
// replica layer recomputes a topic's configuration only when the image's
// configs change, as with the broker's provider.
type offsetsConfigs struct{ minISR int32 }

func (c *offsetsConfigs) LogConfig(img *metadata.Image, topic string) config.Topic {
	cfg := config.DefaultTopic()
	cfg.Compact, cfg.Delete = true, false
	if v, ok := img.Configs[offsetsResource(topic)]["min.insync.replicas"]; ok {
		n, _ := strconv.Atoi(v)
		cfg.MinInsyncReplicas = int32(n)
	}
	return cfg
}

func offsetsResource(topic string) metadata.ConfigResource {
	return metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: topic}
}

// node is node 1's replica layer over fs.
type node struct {
	t        *testing.T
	fs       *vfs.MemFS
	logs     *storage.Manager
	configs  *offsetsConfigs
	replicas *replica.Manager
	img      *metadata.Image
	stopped  bool
}

func newNode(t *testing.T, fs *vfs.MemFS) *node {
	t.Helper()
	logs, err := storage.OpenManager(storage.ManagerOptions{FS: fs, Dirs: []string{"/data"}, Logger: discard()})
	if err != nil {
		t.Fatalf("opening the log manager: %v", err)
	}
	n := &node{t: t, fs: fs, logs: logs, configs: &offsetsConfigs{}}
	n.replicas = replica.NewManager(replica.Options{NodeID: 1, Logs: logs, Configs: n.configs, Logger: discard()})
	t.Cleanup(n.stop)
	return n
}

func (n *node) stop() {
	if n.stopped {
		return
	}
	n.stopped = true
	n.replicas.Stop()
	n.logs.Close()
}

// setOffsets applies an image in which __consumer_offsets has parts (the
// first one as a restarted node's first image).
func (n *node) setOffsets(parts ...metadata.Partition) {
	next := &metadata.Image{}
	if n.img != nil {
		next.Offset = n.img.Offset + 1
		next.Topics, next.TopicsByID = n.img.Topics, n.img.TopicsByID
	}
	t := &metadata.Topic{Name: group.OffsetsTopic, ID: protocol.UUID{1}, Partitions: persist.VectorOf(parts...)}
	next.Topics, next.TopicsByID = next.Topics.Set(t.Name, t), next.TopicsByID.Set(t.ID, t)
	if n.configs.minISR > 0 {
		next.Configs = map[metadata.ConfigResource]map[string]string{
			offsetsResource(t.Name): {"min.insync.replicas": strconv.Itoa(int(n.configs.minISR))},
		}
	}
	prev := n.img
	n.img = next
	n.replicas.ApplyImage(prev, next)
}

func led(leader, epoch int32, replicas, isr []int32) metadata.Partition {
	return metadata.Partition{Leader: leader, LeaderEpoch: epoch, Replicas: replicas, ISR: isr}
}

var offsets0 = replica.TopicPartition{Topic: group.OffsetsTopic, Partition: 0}

// capture is a Coordinator that keeps the PartitionLog it is loaded with.
type capture struct {
	mu   sync.Mutex
	log  runtime.PartitionLog
	gone bool
}

func (c *capture) Load(_ context.Context, _ int32, log runtime.PartitionLog) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log, c.gone = log, false
	return nil
}

func (c *capture) Unload(int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gone = true
}

// loadedLog starts a runtime on n and returns the PartitionLog of
// __consumer_offsets-0 once it is loaded (led by node 1 at epoch 3).
func loadedLog(t *testing.T, n *node) runtime.PartitionLog {
	t.Helper()
	c := &capture{}
	rt := runtime.Start(context.Background(), runtime.Options{
		Topic: (&group.Config{}).TopicSpec(), Coordinator: c, Replicas: n.replicas, Logger: discard(),
		CreateTopic: func(context.Context, kmsg.CreateTopicsRequestTopic) error { return nil },
	})
	t.Cleanup(rt.Stop)
	n.setOffsets(led(1, 3, []int32{1}, []int32{1}))
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		log := c.log
		c.mu.Unlock()
		if log != nil {
			return log
		}
		if time.Now().After(deadline) {
			t.Fatal("never loaded")
		}
		time.Sleep(time.Millisecond)
	}
}

// testBatch is an uncompressed v2 batch of n keyed records whose values
// start with id.
func testBatch(id string, n int, valueSize int) []byte {
	var records []byte
	for i := range n {
		v := make([]byte, valueSize)
		copy(v, fmt.Sprintf("%s/%d", id, i))
		var body []byte
		body = kbin.AppendInt8(body, 0)          // attributes
		body = kbin.AppendVarlong(body, 0)       // timestamp delta
		body = kbin.AppendVarint(body, int32(i)) // offset delta
		body = kbin.AppendVarint(body, 1)
		body = append(body, 'k')
		body = kbin.AppendVarint(body, int32(len(v)))
		body = append(body, v...)
		body = kbin.AppendVarint(body, 0) // headers
		records = kbin.AppendVarint(records, int32(len(body)))
		records = append(records, body...)
	}
	now := time.Now().UnixMilli()
	b := make([]byte, protocol.BatchHeaderSize, protocol.BatchHeaderSize+len(records))
	be := binary.BigEndian
	be.PutUint32(b[8:], uint32(protocol.BatchHeaderSize+len(records)-protocol.BatchOverhead))
	be.PutUint32(b[12:], 0xffffffff) // partition leader epoch
	b[16] = 2                        // magic
	be.PutUint32(b[23:], uint32(n-1))
	be.PutUint64(b[27:], uint64(now))
	be.PutUint64(b[35:], uint64(now))
	be.PutUint64(b[43:], 0xffffffffffffffff) // producer id
	be.PutUint16(b[51:], 0xffff)             // producer epoch
	be.PutUint32(b[53:], 0xffffffff)         // base sequence
	be.PutUint32(b[57:], uint32(n))
	b = append(b, records...)
	be.PutUint32(b[17:], protocol.ComputeBatchCRC(b))
	return b
}

func readAll(t *testing.T, plog runtime.PartitionLog, from int64) (bases []int64) {
	t.Helper()
	err := plog.ReadFrom(context.Background(), from, func(b []byte) error {
		h, err := protocol.ParseBatchHeader(b)
		if err != nil {
			return err
		}
		bases = append(bases, h.BaseOffset)
		return nil
	})
	if err != nil {
		t.Fatalf("ReadFrom(%d): %v", from, err)
	}
	return bases
}

func appendCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPartitionLogAppendsAndReads(t *testing.T) {
	n := newNode(t, vfs.NewMemFS())
	plog := loadedLog(t, n)
	var want []int64
	// Enough bytes that ReadFrom needs several chunks.
	for i := range 40 {
		base, err := plog.Append(appendCtx(t), testBatch(strconv.Itoa(i), 3, 20<<10))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if base != int64(i*3) {
			t.Fatalf("append %d: base offset %d, want %d", i, base, i*3)
		}
		want = append(want, base)
	}
	l, _ := n.logs.Get(offsets0)
	if hw := l.HighWatermark(); hw != 120 {
		t.Fatalf("high watermark %d after the appends, want 120", hw)
	}
	if got := readAll(t, plog, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ReadFrom(0) read batches %v, want %v", got, want)
	}
	// A start inside a batch returns that batch.
	if got := readAll(t, plog, 31); len(got) != 30 || got[0] != 30 {
		t.Fatalf("ReadFrom(31) read batches %v, want 30 batches from 30", got)
	}
	if got := readAll(t, plog, 120); len(got) != 0 {
		t.Fatalf("ReadFrom(log end) read %v", got)
	}
	// Records below the log start offset are gone: reading starts there.
	if _, err := l.DeleteRecordsBefore(60); err != nil {
		t.Fatalf("deleting records: %v", err)
	}
	if got := readAll(t, plog, 0); len(got) == 0 || got[0] > 60 || got[len(got)-1] != 117 {
		t.Fatalf("ReadFrom(0) after the log start moved read %v", got)
	}
}

// Replay reads up to the log end, above the high watermark, as Kafka's
// coordinator loader does: a new leader's log is what every replica will
// have, and the tail of the previous leader's term above this node's high
// watermark may already have been acknowledged there (an offset commit).
func TestPartitionLogReplaysToTheLogEnd(t *testing.T) {
	n := newNode(t, vfs.NewMemFS())
	plog := loadedLog(t, n)
	if _, err := plog.Append(appendCtx(t), testBatch("committed", 2, 10)); err != nil {
		t.Fatal(err)
	}
	l, _ := n.logs.Get(offsets0)
	if _, _, err := l.Append(testBatch("uncommitted", 2, 10), 3, storage.AppendCoordinator); err != nil {
		t.Fatal(err)
	}
	if hw := l.HighWatermark(); hw != 2 {
		t.Fatalf("high watermark %d, want 2 (the tail above it is not committed)", hw)
	}
	if got := readAll(t, plog, 0); fmt.Sprint(got) != "[0 2]" {
		t.Fatalf("read %v, want both batches [0 2]", got)
	}
}

// Appends of a shard loaded at epoch 3 are refused once the leadership or
// its epoch moved, and when the ISR is below min.insync.replicas.
func TestPartitionLogRefusals(t *testing.T) {
	tests := []struct {
		name   string
		minISR int32
		next   metadata.Partition
		want   *kerr.Error
	}{
		{"leadership moved to another broker", 0, led(2, 4, []int32{1, 2}, []int32{2}), kerr.NotLeaderForPartition},
		{"re-elected with a newer epoch", 0, led(1, 4, []int32{1}, []int32{1}), kerr.NotLeaderForPartition},
		{"ISR below min.insync.replicas", 2, led(1, 3, []int32{1, 2}, []int32{1}), kerr.NotEnoughReplicas},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, vfs.NewMemFS())
			plog := loadedLog(t, n)
			n.configs.minISR = tc.minISR
			n.setOffsets(tc.next)
			l, _ := n.logs.Get(offsets0)
			leo := l.LogEndOffset()
			_, err := plog.Append(appendCtx(t), testBatch("x", 1, 10))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Append: %v, want %v", err, tc.want)
			}
			if l.LogEndOffset() != leo {
				t.Fatalf("a refused append reached the log")
			}
		})
	}
}

// An append waiting for the high watermark (a follower in the ISR) gives
// up when its context ends, and fails when the leadership moves.
func TestPartitionLogWaitsForTheHighWatermark(t *testing.T) {
	n := newNode(t, vfs.NewMemFS())
	plog := loadedLog(t, n)
	n.setOffsets(led(1, 3, []int32{1, 2}, []int32{1, 2}))
	short, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := plog.Append(short, testBatch("pending", 1, 10)); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("after the deadline: %v", err)
	}
	waitErr := make(chan error, 1)
	go func() {
		_, err := plog.Append(appendCtx(t), testBatch("pending", 1, 10))
		waitErr <- err
	}()
	select {
	case err := <-waitErr:
		t.Fatalf("returned (%v) before the high watermark moved", err)
	case <-time.After(50 * time.Millisecond):
	}
	n.setOffsets(led(2, 4, []int32{1, 2}, []int32{2}))
	if err := <-waitErr; !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("after losing leadership: %v", err)
	}
}

// fixedTopics is a TopicView over one topic.
type fixedTopics struct{ info group.TopicInfo }

func (f fixedTopics) TopicByName(name string) (group.TopicInfo, bool) {
	return f.info, name == f.info.Name
}
func (f fixedTopics) TopicByID(id [16]byte) (group.TopicInfo, bool) { return f.info, id == f.info.ID }
func (f fixedTopics) TopicNames() []string                          { return []string{f.info.Name} }

var ordersTopic = fixedTopics{group.TopicInfo{Name: "orders", ID: [16]byte{9}, Partitions: 4}}

// startGroups runs the group coordinator with one __consumer_offsets
// partition on n, led by node 1 at epoch, and waits until it serves.
func startGroups(t *testing.T, n *node, epoch int32) *group.Coordinator {
	t.Helper()
	cfg := group.DefaultConfig()
	cfg.OffsetsTopicNumPartitions = 1
	cfg.InitialRebalanceDelayMs = 0
	cfg.Logger = discard()
	c := group.New(cfg, ordersTopic)
	rt := runtime.Start(context.Background(), runtime.Options{
		Topic: cfg.TopicSpec(), Coordinator: c, Replicas: n.replicas, Logger: discard(),
		CreateTopic: func(context.Context, kmsg.CreateTopicsRequestTopic) error { return nil },
	})
	t.Cleanup(rt.Stop)
	n.setOffsets(led(1, epoch, []int32{1}, []int32{1}))
	waitCoordinator(t, c, "g", 0)
	return c
}

func waitCoordinator(t *testing.T, c *group.Coordinator, groupID string, want int16) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, code := c.CoordinatorFor(groupID)
		if code == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinator state %v, want %v", kerr.ErrorForCode(code), kerr.ErrorForCode(want))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func commitOffsets(c *group.Coordinator, groupID string, offset int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group, req.Generation = groupID, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "orders"
	for p := range int32(4) {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, offset
		rp.Metadata = kmsg.StringPtr("m" + strconv.FormatInt(offset, 10))
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := c.OffsetCommit(context.Background(), req)
	for _, rp := range resp.Topics[0].Partitions {
		if rp.ErrorCode != 0 {
			return rp.ErrorCode
		}
	}
	return 0
}

func fetchOffsets(t *testing.T, c *group.Coordinator, groupID string) []int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = groupID
	resp := c.OffsetFetch(context.Background(), req)
	if resp.ErrorCode != 0 {
		t.Fatalf("fetching offsets: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	offsets := make([]int64, 4)
	for i := range offsets {
		offsets[i] = -1
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			offsets[rp.Partition] = rp.Offset
		}
	}
	return offsets
}

// A failing disk fails the commit with NOT_COORDINATOR (Kafka's answer
// for a storage error on the offsets topic) and nothing half-applied is
// served afterwards.
func TestOffsetCommitOnAFailingDisk(t *testing.T) {
	fs := vfs.NewMemFS()
	n := newNode(t, fs)
	c := startGroups(t, n, 3)
	if code := commitOffsets(c, "g", 5); code != 0 {
		t.Fatalf("first commit: %v", kerr.ErrorForCode(code))
	}
	fs.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite {
			return syscall.EIO
		}
		return nil
	})
	if code := commitOffsets(c, "g", 9); code != kerr.NotCoordinator.Code {
		t.Fatalf("commit on a failing disk: %v, want NOT_COORDINATOR", kerr.ErrorForCode(code))
	}
	fs.Inject(nil)
	// Whatever the coordinator answers now, it must not claim the failed
	// commit.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 7, "g"
	resp := c.OffsetFetch(context.Background(), req)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.Offset == 9 {
				t.Fatalf("the failed commit is visible: %+v", resp)
			}
		}
	}
}

// After a power loss that tears the unsynced tail of the partition, the
// coordinator reloads from what survived: every offset it serves is one
// that was committed, and nothing flushed before the crash is lost.
func TestCoordinatorReloadsAfterATornTail(t *testing.T) {
	for seed := int64(1); seed <= 5; seed++ {
		t.Run("seed"+strconv.FormatInt(seed, 10), func(t *testing.T) {
			fs := vfs.NewMemFS()
			n := newNode(t, fs)
			c := startGroups(t, n, 3)
			const flushedUpTo, last = 20, 60
			for off := int64(1); off <= last; off++ {
				if code := commitOffsets(c, "g", off); code != 0 {
					t.Fatalf("commit %d: %v", off, kerr.ErrorForCode(code))
				}
				if off == flushedUpTo {
					l, _ := n.logs.Get(offsets0)
					if err := l.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			fs.Crash(true, rand.New(rand.NewSource(seed)))
			n.stop()

			n2 := newNode(t, fs)
			c2 := startGroups(t, n2, 4)
			got := fetchOffsets(t, c2, "g")
			for p, off := range got {
				if off < flushedUpTo || off > last {
					t.Fatalf("partition %d at offset %d after the crash; flushed %d, last commit %d", p, off, flushedUpTo, last)
				}
			}
			// The reloaded coordinator keeps working.
			if code := commitOffsets(c2, "g", 100); code != 0 {
				t.Fatalf("commit after reload: %v", kerr.ErrorForCode(code))
			}
			if got := fetchOffsets(t, c2, "g"); got[0] != 100 {
				t.Fatalf("after the reload and a new commit: %v", got)
			}
		})
	}
}

// The coordinator follows the leadership of its partition: unloaded when
// another broker leads (a parked JoinGroup answered NOT_COORDINATOR),
// loaded again with the replayed state when leadership comes back.
func TestGroupCoordinatorFollowsLeadership(t *testing.T) {
	n := newNode(t, vfs.NewMemFS())
	c := startGroups(t, n, 3)
	if code := commitOffsets(c, "follow", 42); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	join := func(memberID string) *kmsg.JoinGroupRequest {
		r := kmsg.NewPtrJoinGroupRequest()
		r.Version, r.Group, r.MemberID = 5, "follow", memberID
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 30000, 60000
		r.ProtocolType = "consumer"
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}}
		return r
	}
	client := group.Client{ID: "test", Host: "/127.0.0.1"}
	j := c.JoinGroup(context.Background(), client, join(""))
	if j.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %v", kerr.ErrorForCode(j.ErrorCode))
	}
	if j = c.JoinGroup(context.Background(), client, join(j.MemberID)); j.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(j.ErrorCode))
	}
	j2 := c.JoinGroup(context.Background(), client, join(""))
	parked := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { parked <- c.JoinGroup(context.Background(), client, join(j2.MemberID)) }()
	// The second member's join is parked: the rebalance it started waits
	// for the first member.
	await.Until(t, 5*time.Second, "the second member's join parked in a rebalance", func() error {
		d := c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Groups: []string{"follow"}}).Groups[0]
		if d.State != "PreparingRebalance" || len(d.Members) != 2 {
			return fmt.Errorf("group %s with %d members (error %v)", d.State, len(d.Members), kerr.ErrorForCode(d.ErrorCode))
		}
		return nil
	})

	n.setOffsets(led(2, 4, []int32{1, 2}, []int32{2}))
	select {
	case r := <-parked:
		if r.ErrorCode != kerr.NotCoordinator.Code {
			t.Fatalf("parked join after losing leadership: %v, want NOT_COORDINATOR", kerr.ErrorForCode(r.ErrorCode))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked join was not answered")
	}
	waitCoordinator(t, c, "follow", kerr.NotCoordinator.Code)

	n.setOffsets(led(1, 5, []int32{1, 2}, []int32{1, 2}))
	waitCoordinator(t, c, "follow", 0)
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 7, "follow"
	resp := c.OffsetFetch(context.Background(), req)
	if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].Offset != 42 || *resp.Topics[0].Partitions[0].Metadata != "m42" {
		t.Fatalf("offsets after the reload: %+v", resp)
	}
}
