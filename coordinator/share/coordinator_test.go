package share

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/gregorbroker/gregor/coordinator/runtime/runtimetest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var topicA = [16]byte{0xa}

// harness is a share coordinator over in-memory partitions.
type harness struct {
	t    *testing.T
	cfg  Config
	c    *Coordinator
	logs map[int32]*runtimetest.MemLog
}

func newHarness(t *testing.T, tweak func(*Config)) *harness {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NumPartitions = 3
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if tweak != nil {
		tweak(&cfg)
	}
	h := &harness{t: t, cfg: cfg, logs: map[int32]*runtimetest.MemLog{}}
	for p := int32(0); p < cfg.NumPartitions; p++ {
		h.logs[p] = &runtimetest.MemLog{}
	}
	h.reload()
	return h
}

// reload builds a fresh coordinator over the same logs (a restart).
func (h *harness) reload() {
	h.t.Helper()
	h.c = New(h.cfg)
	for p, l := range h.logs {
		if err := h.c.Load(context.Background(), p, l); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) initialize(group string, partition, stateEpoch int32, start int64) int16 {
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = group
	req.Topics = []kmsg.InitializeShareGroupStateRequestTopic{{TopicID: topicA, Partitions: []kmsg.InitializeShareGroupStateRequestTopicPartition{{Partition: partition, StateEpoch: stateEpoch, StartOffset: start}}}}
	return h.c.InitializeShareGroupState(context.Background(), req).Topics[0].Partitions[0].ErrorCode
}

func (h *harness) read(group string, partition, leaderEpoch int32) kmsg.ReadShareGroupStateResponseTopicPartition {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = group
	req.Topics = []kmsg.ReadShareGroupStateRequestTopic{{TopicID: topicA, Partitions: []kmsg.ReadShareGroupStateRequestTopicPartition{{Partition: partition, LeaderEpoch: leaderEpoch}}}}
	return h.c.ReadShareGroupState(context.Background(), req).Topics[0].Partitions[0]
}

func (h *harness) write(group string, partition, stateEpoch, leaderEpoch int32, start int64, batches ...Batch) int16 {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.Version = 1
	req.GroupID = group
	p := kmsg.WriteShareGroupStateRequestTopicPartition{Partition: partition, StateEpoch: stateEpoch, LeaderEpoch: leaderEpoch, StartOffset: start, DeliveryCompleteCount: -1}
	for _, b := range batches {
		p.StateBatches = append(p.StateBatches, kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{FirstOffset: b.First, LastOffset: b.Last, DeliveryState: b.State, DeliveryCount: b.Deliveries})
	}
	req.Topics = []kmsg.WriteShareGroupStateRequestTopic{{TopicID: topicA, Partitions: []kmsg.WriteShareGroupStateRequestTopicPartition{p}}}
	return h.c.WriteShareGroupState(context.Background(), req).Topics[0].Partitions[0].ErrorCode
}

func batchesOf(p kmsg.ReadShareGroupStateResponseTopicPartition) []Batch {
	out := []Batch{}
	for _, b := range p.StateBatches {
		out = append(out, Batch{First: b.FirstOffset, Last: b.LastOffset, State: b.DeliveryState, Deliveries: b.DeliveryCount})
	}
	return out
}

func TestInitializeWriteReadSurvivesReload(t *testing.T) {
	for _, perSnapshot := range []int32{0, 2, 500} {
		h := newHarness(t, func(c *Config) { c.UpdatesPerSnapshot = perSnapshot })
		if r := h.read("g", 0, 0); r.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("reading an uninitialized partition: %d", r.ErrorCode)
		}
		if code := h.initialize("g", 0, 2, -1); code != 0 {
			t.Fatal(code)
		}
		r := h.read("g", 0, 5)
		if r.ErrorCode != 0 || r.StartOffset != -1 || r.StateEpoch != 2 || len(r.StateBatches) != 0 {
			t.Fatalf("fresh read %+v", r)
		}
		// Writes as a leader makes them: 0-9 acknowledged, 10-14 released
		// once, then 10-12 rejected; the start moves on.
		steps := []struct {
			start int64
			b     []Batch
		}{
			{0, []Batch{{0, 9, 2, 1}}},
			{10, []Batch{{10, 14, 0, 1}}},
			{10, []Batch{{10, 12, 4, 2}}},
			{13, []Batch{{15, 15, 2, 1}}},
		}
		for _, s := range steps {
			if code := h.write("g", 0, 2, 5, s.start, s.b...); code != 0 {
				t.Fatalf("write: %d", code)
			}
		}
		want := []Batch{{13, 14, 0, 1}, {15, 15, 2, 1}}
		if got := batchesOf(h.read("g", 0, 5)); !reflect.DeepEqual(got, want) {
			t.Fatalf("per snapshot %d: state %v, want %v", perSnapshot, got, want)
		}
		h.reload()
		r = h.read("g", 0, 5)
		if got := batchesOf(r); r.StartOffset != 13 || !reflect.DeepEqual(got, want) {
			t.Fatalf("per snapshot %d, after a reload: start %d state %v, want 13 %v", perSnapshot, r.StartOffset, got, want)
		}
	}
}

func TestLeaderAndStateEpochFencing(t *testing.T) {
	h := newHarness(t, nil)
	h.initialize("g", 1, 3, 0)
	if r := h.read("g", 1, 7); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	// The old leader (epoch 6) is fenced from now on, even after a reload.
	if code := h.write("g", 1, 3, 6, 0, Batch{0, 0, 2, 1}); code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("old leader's write: %d", code)
	}
	h.reload()
	if r := h.read("g", 1, 6); r.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("old leader's read after reload: %d", r.ErrorCode)
	}
	if code := h.write("g", 1, 2, 7, 0, Batch{0, 0, 2, 1}); code != kerr.FencedStateEpoch.Code {
		t.Fatalf("old state epoch's write: %d", code)
	}
	if code := h.initialize("g", 1, 2, 0); code != kerr.FencedStateEpoch.Code {
		t.Fatalf("initializing with an older state epoch: %d", code)
	}
	if code := h.write("g", 1, 3, 7, 0, Batch{0, 0, 2, 1}); code != 0 {
		t.Fatalf("current leader's write: %d", code)
	}
}

func TestDeleteSummaryAndAppendFailure(t *testing.T) {
	h := newHarness(t, nil)
	h.initialize("g", 2, 1, 40)
	sum := func() kmsg.ReadShareGroupStateSummaryResponseTopicPartition {
		req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		req.Version = 1
		req.GroupID = "g"
		req.Topics = []kmsg.ReadShareGroupStateSummaryRequestTopic{{TopicID: topicA, Partitions: []kmsg.ReadShareGroupStateSummaryRequestTopicPartition{{Partition: 2, LeaderEpoch: -1}}}}
		return h.c.ReadShareGroupStateSummary(context.Background(), req).Topics[0].Partitions[0]
	}
	if s := sum(); s.ErrorCode != 0 || s.StartOffset != 40 || s.StateEpoch != 1 {
		t.Fatalf("summary %+v", s)
	}
	// A failed append changes nothing.
	p := PartitionFor(Key{Group: "g", TopicID: topicA, Partition: 2}, h.cfg.NumPartitions)
	h.logs[p].Fail(kerr.NotEnoughReplicas)
	if code := h.write("g", 2, 1, 0, 50, Batch{40, 49, 2, 1}); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("write with a failing log: %d", code)
	}
	h.logs[p].Fail(nil)
	if s := sum(); s.StartOffset != 40 {
		t.Fatalf("a failed write moved the start to %d", s.StartOffset)
	}
	del := kmsg.NewPtrDeleteShareGroupStateRequest()
	del.GroupID = "g"
	del.Topics = []kmsg.DeleteShareGroupStateRequestTopic{{TopicID: topicA, Partitions: []kmsg.DeleteShareGroupStateRequestTopicPartition{{Partition: 2}}}}
	if code := h.c.DeleteShareGroupState(context.Background(), del).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatal(code)
	}
	h.reload()
	if s := sum(); s.ErrorCode != 0 || s.StartOffset != -1 || s.DeliveryCompleteCount != -1 {
		t.Fatalf("summary after delete %+v", s)
	}
	if r := h.read("g", 2, 0); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("read after delete: %d", r.ErrorCode)
	}
	// Not loaded here: NOT_COORDINATOR.
	h.c.Unload(p)
	if r := h.read("g", 2, 0); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("read of an unloaded partition: %d", r.ErrorCode)
	}
}

func TestCoordinatorKeys(t *testing.T) {
	k := Key{Group: "a:b", TopicID: topicA, Partition: 7}
	got, ok := ParseCoordinatorKey(k.CoordinatorKey())
	if !ok || got != k {
		t.Fatalf("%q parsed to %+v %v", k.CoordinatorKey(), got, ok)
	}
	for _, bad := range []string{"", "g", "g:x:1", "g:" + k.CoordinatorKey()[4:] + "x", ":AAAAAAAAAAAAAAAAAAAAAA:1"} {
		if _, ok := ParseCoordinatorKey(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func FuzzDecodeValue(f *testing.F) {
	f.Add(int16(0), encodeSnapshot(&snapshotValue{SnapshotEpoch: 1, Batches: []Batch{{1, 2, 2, 1}}, DeliveryCompleteCount: 3}))
	f.Add(int16(1), encodeUpdate(&snapshotValue{StartOffset: -1, DeliveryCompleteCount: -1}))
	f.Fuzz(func(t *testing.T, typ int16, b []byte) {
		_, _ = decodeValue(typ&1, b)
		_, _, _ = decodeKey(b)
	})
}

func TestPruneKeepsWhatTheStateNeeds(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.UpdatesPerSnapshot = 2 })
	h.initialize("g", 0, 1, 0)
	h.initialize("h", 0, 1, 0)
	for i := int64(0); i < 10; i++ {
		if code := h.write("g", 0, 1, 0, i, Batch{i, i, 2, 1}); code != 0 {
			t.Fatal(code)
		}
	}
	want := batchesOf(h.read("g", 0, 0))
	pg := PartitionFor(Key{Group: "g", TopicID: topicA, Partition: 0}, h.cfg.NumPartitions)
	before := h.logs[pg].Len()
	h.c.Prune()
	after := h.logs[pg].Len()
	if after >= before {
		t.Fatalf("prune kept %d of %d records", after, before)
	}
	h.reload()
	if got := batchesOf(h.read("g", 0, 0)); !reflect.DeepEqual(got, want) {
		t.Fatalf("after pruning and a reload: %v, want %v", got, want)
	}
	if r := h.read("h", 0, 0); r.ErrorCode != 0 || r.StartOffset != 0 {
		t.Fatalf("the other share partition after pruning: %+v", r)
	}
	t.Logf("%d records before pruning, %d after", before, after)
}

func TestPruneSnapshotsColdPartitionsAgain(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.NumPartitions = 1; c.UpdatesPerSnapshot = 500; c.ColdSnapshotIntervalMs = -1 })
	h.initialize("cold", 0, 1, 0) // never written again
	h.initialize("hot", 0, 1, 0)
	for i := int64(0); i < 20; i++ {
		h.write("hot", 0, 1, 0, i, Batch{i, i, 2, 1})
	}
	want := batchesOf(h.read("hot", 0, 0))
	h.c.Prune()
	if n := h.logs[0].Len(); n > 3 {
		t.Fatalf("%d records left: the cold partition held the pruning back", n)
	}
	h.reload()
	if got := batchesOf(h.read("hot", 0, 0)); !reflect.DeepEqual(got, want) {
		t.Fatalf("hot after pruning: %v, want %v", got, want)
	}
	if r := h.read("cold", 0, 0); r.ErrorCode != 0 || r.StartOffset != 0 {
		t.Fatalf("cold after pruning: %+v", r)
	}
}
