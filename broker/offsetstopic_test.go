package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"strconv"
	"syscall"
	"testing"
	"time"

	cfgdef "github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// offsetsLogFixture is one __consumer_offsets partition on a MemFS, led by
// node 1, without a controller: enough to drive offsetsPartitionLog.
type offsetsLogFixture struct {
	fs   *vfs.MemFS
	logs *storage.Manager
	part *partition
}

func newOffsetsLogFixture(t *testing.T, fs *vfs.MemFS) *offsetsLogFixture {
	t.Helper()
	logs, err := storage.OpenManager(storage.ManagerOptions{FS: fs, Dirs: []string{"/data"}, Logger: discardLogger()})
	if err != nil {
		t.Fatalf("opening the log manager: %v", err)
	}
	t.Cleanup(func() { logs.Close() })
	cfg := cfgdef.DefaultTopic()
	cfg.Compact, cfg.Delete = true, false
	tp := storage.TopicPartition{Topic: group.OffsetsTopic, Partition: 0}
	l, err := logs.GetOrCreate(tp, [16]byte{1}, cfg)
	if err != nil {
		t.Fatalf("opening %s: %v", tp, err)
	}
	part := &partition{tp: tp, log: l, leader: 1, leaderEpoch: 3, replicas: []int32{1}, isr: []int32{1}, config: cfg}
	part.advanceHighWatermark()
	return &offsetsLogFixture{fs: fs, logs: logs, part: part}
}

func (f *offsetsLogFixture) plog() *offsetsPartitionLog {
	return &offsetsPartitionLog{self: 1, part: f.part, epoch: 3}
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

func readAll(t *testing.T, plog *offsetsPartitionLog, from int64) (bases []int64) {
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

func TestOffsetsPartitionLogAppendsAndReads(t *testing.T) {
	f := newOffsetsLogFixture(t, vfs.NewMemFS())
	plog := f.plog()
	var want []int64
	// Enough bytes that ReadFrom needs several chunks.
	for i := range 40 {
		base, err := plog.Append(context.Background(), testBatch(strconv.Itoa(i), 3, 20<<10))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if base != int64(i*3) {
			t.Fatalf("append %d: base offset %d, want %d", i, base, i*3)
		}
		want = append(want, base)
	}
	if hw := f.part.log.HighWatermark(); hw != 120 {
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
	if _, err := f.part.log.DeleteRecordsBefore(60); err != nil {
		t.Fatalf("deleting records: %v", err)
	}
	if got := readAll(t, plog, 0); len(got) == 0 || got[0] > 60 || got[len(got)-1] != 117 {
		t.Fatalf("ReadFrom(0) after the log start moved read %v", got)
	}
}

// Only what the high watermark covers is read: replay never sees an
// uncommitted tail.
func TestOffsetsPartitionLogReadsOnlyCommitted(t *testing.T) {
	f := newOffsetsLogFixture(t, vfs.NewMemFS())
	plog := f.plog()
	if _, err := plog.Append(context.Background(), testBatch("committed", 2, 10)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.part.log.Append(testBatch("uncommitted", 2, 10), 3, storage.AppendCoordinator); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, plog, 0); fmt.Sprint(got) != "[0]" {
		t.Fatalf("read %v, want only the committed batch [0]", got)
	}
}

func TestOffsetsPartitionLogRefusals(t *testing.T) {
	tests := []struct {
		name  string
		setup func(p *partition)
		want  *kerr.Error
	}{
		{"leadership moved to another broker", func(p *partition) { p.leader = 2 }, kerr.NotLeaderForPartition},
		{"re-elected with a newer epoch", func(p *partition) { p.leaderEpoch = 4 }, kerr.NotLeaderForPartition},
		{"ISR below min.insync.replicas", func(p *partition) { p.config.MinInsyncReplicas = 2 }, kerr.NotEnoughReplicas},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newOffsetsLogFixture(t, vfs.NewMemFS())
			f.part.mu.Lock()
			tc.setup(f.part)
			f.part.mu.Unlock()
			leo := f.part.log.LogEndOffset()
			_, err := f.plog().Append(context.Background(), testBatch("x", 1, 10))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Append: %v, want %v", err, tc.want)
			}
			if f.part.log.LogEndOffset() != leo {
				t.Fatalf("a refused append reached the log")
			}
		})
	}
}

func TestOffsetsPartitionLogWaitsForTheHighWatermark(t *testing.T) {
	f := newOffsetsLogFixture(t, vfs.NewMemFS())
	plog := f.plog()
	res, _, err := f.part.log.Append(testBatch("pending", 1, 10), 3, storage.AppendCoordinator)
	if err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- plog.awaitHighWatermark(context.Background(), res.LastOffset+1) }()
	select {
	case err := <-waitErr:
		t.Fatalf("returned (%v) before the high watermark moved", err)
	case <-time.After(50 * time.Millisecond):
	}
	f.part.advanceHighWatermark()
	if err := <-waitErr; err != nil {
		t.Fatalf("after the high watermark moved: %v", err)
	}

	// A waiter gives up when its context ends or leadership moves.
	res, _, err = f.part.log.Append(testBatch("pending", 1, 10), 3, storage.AppendCoordinator)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { waitErr <- plog.awaitHighWatermark(ctx, res.LastOffset+1) }()
	cancel()
	if err := <-waitErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
	go func() { waitErr <- plog.awaitHighWatermark(context.Background(), res.LastOffset+1) }()
	time.Sleep(20 * time.Millisecond)
	f.part.mu.Lock()
	f.part.leader = 2
	f.part.mu.Unlock()
	f.part.wake()
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

func newTestCoordinator(t *testing.T, plog group.PartitionLog) *group.Coordinator {
	t.Helper()
	cfg := group.DefaultConfig()
	cfg.OffsetsTopicNumPartitions = 1
	cfg.Logger = discardLogger()
	c := group.New(cfg, ordersTopic)
	if err := c.Load(context.Background(), 0, plog); err != nil {
		t.Fatalf("loading the coordinator: %v", err)
	}
	return c
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
	f := newOffsetsLogFixture(t, fs)
	c := newTestCoordinator(t, f.plog())
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
	// The log is marked failed after an I/O error; whatever the
	// coordinator answers now, it must not claim the failed commit.
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
			f := newOffsetsLogFixture(t, fs)
			c := newTestCoordinator(t, f.plog())
			const flushedUpTo, last = 20, 60
			for off := int64(1); off <= last; off++ {
				if code := commitOffsets(c, "g", off); code != 0 {
					t.Fatalf("commit %d: %v", off, kerr.ErrorForCode(code))
				}
				if off == flushedUpTo {
					if err := f.part.log.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			fs.Crash(true, rand.New(rand.NewSource(seed)))
			f.logs.Close()

			f2 := newOffsetsLogFixture(t, fs)
			c2 := newTestCoordinator(t, f2.plog())
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
