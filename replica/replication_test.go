package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metadata/persist"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cluster is several managers in one process: their fetches go straight
// to each other's Manager.Fetch, and AlterPartition to a fake controller
// that applies the change to the shared image. Links can be cut.
type cluster struct {
	t     *testing.T
	nodes map[int32]*Manager
	logs  map[int32]*storage.Manager
	fs    map[int32]*vfs.MemFS

	mu  sync.Mutex
	img *metadata.Image
	cut map[int32]bool // nodes whose fetches fail
	// inflight counts the fetches under way to or from each node; setCut
	// waits for a cut node's to end, so that none that passed the cut
	// check reaches a leader afterwards (and, say, re-expands an ISR the
	// test just shrank).
	inflight map[int32]int
	// alters counts the AlterPartition requests the fake controller took.
	alters int
}

const clusterTopic = "r"

var clusterTopicID = protocol.UUID{9}

func newCluster(t *testing.T, ids []int32, cfg config.Topic, lag time.Duration) *cluster {
	t.Helper()
	return newClusterRacks(t, ids, nil, cfg, lag)
}

// newClusterRacks is newCluster with brokers in racks (by id) and the
// rack-aware replica selector on.
func newClusterRacks(t *testing.T, ids []int32, racks map[int32]string, cfg config.Topic, lag time.Duration) *cluster {
	t.Helper()
	return newClusterFetching(t, ids, racks, cfg, lag, 1<<20, 50*time.Millisecond)
}

// newClusterFetching is newClusterRacks with the followers fetching at
// most fetchMax bytes of a partition at a time, waiting up to maxWait.
func newClusterFetching(t *testing.T, ids []int32, racks map[int32]string, cfg config.Topic, lag time.Duration, fetchMax int32, maxWait time.Duration) *cluster {
	t.Helper()
	c := &cluster{t: t, nodes: map[int32]*Manager{}, logs: map[int32]*storage.Manager{}, fs: map[int32]*vfs.MemFS{}, cut: map[int32]bool{}, inflight: map[int32]int{}}
	c.img = &metadata.Image{Brokers: map[int32]*metadata.Broker{}}
	for _, id := range ids {
		c.img.Brokers[id] = &metadata.Broker{ID: id, Epoch: int64(100 + id)}
		if r, ok := racks[id]; ok {
			c.img.Brokers[id].Rack = &r
		}
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, id := range ids {
		c.fs[id] = vfs.NewMemFS()
		logs, err := storage.OpenManager(storage.ManagerOptions{FS: c.fs[id], Dirs: []string{"/data"}, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		m := NewManager(Options{
			NodeID: id, Logs: logs, Configs: topicConfigs{clusterTopic: cfg}, Logger: logger.With("node", id),
			Peers:             &clusterPeers{c: c, from: id},
			ReplicaLagTimeMax: lag,
			RackAwareReads:    racks != nil,
			Fetch:             FetcherConfig{Fetchers: 1, MaxBytes: fetchMax, ResponseMaxBytes: 10 << 20, MinBytes: 1, MaxWait: maxWait, Backoff: 20 * time.Millisecond},
		})
		m.SetBrokerEpoch(int64(100 + id))
		c.nodes[id], c.logs[id] = m, logs
	}
	for _, id := range ids {
		m := c.nodes[id]
		if err := m.Start(context.Background(), imageFunc(func() *metadata.Image { return c.image() })); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			m.Stop()
			c.logs[id].Close()
		})
	}
	return c
}

// imageFunc is an ImageSource giving one image and nothing after.
type imageFunc func() *metadata.Image

func (f imageFunc) Subscribe(fn func(prev, next *metadata.Image)) func() {
	fn(nil, f())
	return func() {}
}

func (c *cluster) image() *metadata.Image {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.img
}

// setPartition publishes a new image in which partition 0 of the topic is
// p (with its partition epoch bumped) and applies it to every node.
func (c *cluster) setPartition(p metadata.Partition) {
	c.mu.Lock()
	prev := c.img
	next := &metadata.Image{Offset: prev.Offset + 1, Topics: prev.Topics, TopicsByID: prev.TopicsByID, Brokers: prev.Brokers}
	if old := prev.Topic(clusterTopic); old != nil {
		p.PartitionEpoch = old.Partitions.At(0).PartitionEpoch + 1
	}
	tp := &metadata.Topic{Name: clusterTopic, ID: clusterTopicID, Partitions: persist.VectorOf(p)}
	next.Topics, next.TopicsByID = next.Topics.Set(clusterTopic, tp), next.TopicsByID.Set(clusterTopicID, tp)
	c.img = next
	c.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(c.nodes)) {
		c.nodes[id].ApplyImage(prev, next)
	}
}

func (c *cluster) partition() metadata.Partition {
	return *c.image().Topic(clusterTopic).Partitions.At(0)
}

// isrOn is the ISR node id applies for partition 0.
func (c *cluster) isrOn(id int32) []int32 {
	p := c.nodes[id].hosted(TopicPartition{Topic: clusterTopic})
	if p == nil {
		return nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return slices.Clone(p.isr)
}

func (c *cluster) setCut(id int32, cut bool) {
	c.mu.Lock()
	c.cut[id] = cut
	c.mu.Unlock()
	if cut {
		waitUntil(c.t, fmt.Sprintf("node %d's fetches under way to end", id), func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.inflight[id] == 0
		})
	}
}

// clusterPeers is one node's Peers in a cluster.
type clusterPeers struct {
	c    *cluster
	from int32
}

var errCut = errors.New("link cut by the test")

func (cp *clusterPeers) SendToBroker(ctx context.Context, id int32, _ int, req kmsg.Request) (kmsg.Response, error) {
	c := cp.c
	c.mu.Lock()
	if c.cut[cp.from] || c.cut[id] {
		c.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
		return nil, errCut
	}
	c.inflight[cp.from]++
	c.inflight[id]++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inflight[cp.from]--
		c.inflight[id]--
		c.mu.Unlock()
	}()
	m := c.nodes[id]
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		resp, err := serveFetch(ctx, m, r)
		c.mu.Lock()
		cut := c.cut[cp.from] || c.cut[id]
		c.mu.Unlock()
		if cut {
			// A long poll that began before the cut brings nothing back.
			return nil, errCut
		}
		return resp, err
	case *kmsg.ListOffsetsRequest:
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				lo := m.ListOffset(TopicPartition{Topic: t.Topic, Partition: p.Partition}, p.CurrentLeaderEpoch, p.Timestamp, ReadUncommitted, r.ReplicaID)
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.Offset, rp.Timestamp, rp.LeaderEpoch = p.Partition, lo.Offset, lo.Timestamp, lo.LeaderEpoch
				if lo.Err != nil {
					rp.ErrorCode = lo.Err.Code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	return nil, fmt.Errorf("unexpected %T", req)
}

// serveFetch is what the broker's Fetch handler does for a follower.
func serveFetch(ctx context.Context, m *Manager, r *kmsg.FetchRequest) (kmsg.Response, error) {
	var entries []FetchEntry
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			entries = append(entries, FetchEntry{
				TopicPartition: TopicPartition{Topic: clusterTopic, Partition: p.Partition},
				FetchOffset:    p.FetchOffset, MaxBytes: p.PartitionMaxBytes, CurrentLeaderEpoch: p.CurrentLeaderEpoch, LastFetchedEpoch: p.LastFetchedEpoch, HasLastFetchedEpoch: p.LastFetchedEpoch >= 0, LogStartOffset: p.LogStartOffset,
			})
		}
	}
	done := make(fetchResults, 1)
	m.Fetch(FetchParams{ReplicaID: r.ReplicaState.ID, ReplicaEpoch: r.ReplicaState.Epoch, MaxWait: time.Duration(r.MaxWaitMillis) * time.Millisecond, MinBytes: r.MinBytes, MaxBytes: r.MaxBytes}, entries, done)
	var got []FetchEntry
	select {
	case got = <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic, rt.TopicID = clusterTopic, clusterTopicID
	for _, e := range got {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = e.TopicPartition.Partition
		res := e.Result
		if res.Err != nil {
			rp.ErrorCode = res.Err.Code
		}
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
		rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = res.Diverging.Epoch, res.Diverging.EndOffset
		b, err := copyRange(res.Records)
		if err != nil {
			return nil, err
		}
		rp.RecordBatches = b
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, rt)
	return resp, nil
}

// SendToController is a fake controller's AlterPartition: it checks the
// leader and partition epochs as Kafka's does and applies the new ISR.
func (cp *clusterPeers) SendToController(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	c := cp.c
	r := req.(*kmsg.AlterPartitionRequest)
	resp := r.ResponseKind().(*kmsg.AlterPartitionResponse)
	c.mu.Lock()
	c.alters++
	c.mu.Unlock()
	for _, t := range r.Topics {
		rt := kmsg.NewAlterPartitionResponseTopic()
		rt.TopidID = t.TopicID
		for _, p := range t.Partitions {
			cur := c.partition()
			rp := kmsg.NewAlterPartitionResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case p.LeaderEpoch != cur.LeaderEpoch:
				rp.ErrorCode = kerr.FencedLeaderEpoch.Code
			case p.PartitionEpoch != cur.PartitionEpoch:
				rp.ErrorCode = kerr.InvalidUpdateVersion.Code
			default:
				next := cur
				next.LeaderRecoveryState = metadata.LeaderRecoveryState(p.LeaderRecoveryState)
				next.ISR = nil
				for _, b := range p.NewEpochISR {
					next.ISR = append(next.ISR, b.BrokerID)
				}
				c.setPartition(next)
				now := c.partition()
				rp.LeaderID, rp.LeaderEpoch, rp.ISR, rp.PartitionEpoch = now.Leader, now.LeaderEpoch, now.ISR, now.PartitionEpoch
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (c *cluster) produce(leader int32, acks int16, batches ...[]byte) []AppendEntry {
	c.t.Helper()
	var entries []AppendEntry
	for _, b := range batches {
		entries = append(entries, AppendEntry{TopicPartition: TopicPartition{Topic: clusterTopic}, Records: b, LeaderEpoch: -1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range entries {
		one := entries[i : i+1]
		if err := c.nodes[leader].AppendWait(ctx, acks, OriginClient, one); err != nil {
			c.t.Fatalf("append: %v", err)
		}
	}
	return entries
}

func (c *cluster) log(id int32) *storage.Log {
	l, ok := c.logs[id].Get(TopicPartition{Topic: clusterTopic})
	if !ok {
		c.t.Fatalf("node %d has no log", id)
	}
	return l
}

// logBytes is the whole log of a node, read from its start.
func (c *cluster) logBytes(id int32) []byte {
	c.t.Helper()
	l := c.log(id)
	fr, err := l.Read(l.LogStartOffset(), 1<<30, l.LogEndOffset(), true)
	if err != nil {
		c.t.Fatal(err)
	}
	b, err := copyRange(fr)
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func replicatedTopic(minISR int16) config.Topic {
	cfg := config.DefaultTopic()
	cfg.MinInsyncReplicas = int32(minISR)
	return cfg
}

// Followers copy the leader's log byte for byte, acks=all is answered once
// both have the batch, and the followers learn the high watermark.
func TestFollowersCopyTheLeaderAndAcksAllWaitsForThem(t *testing.T) {
	c := newCluster(t, []int32{1, 2, 3}, replicatedTopic(2), 10*time.Second)
	c.setPartition(led(1, 1, []int32{1, 2, 3}, []int32{1, 2, 3}))
	for i := range 20 {
		res := c.produce(1, -1, batch(t, 1+i%3, int64(1000+i)))
		if res[0].Result.Err != nil {
			t.Fatalf("acks=all append %d: %v", i, res[0].Result.Err)
		}
	}
	leo := c.log(1).LogEndOffset()
	if hw := c.log(1).HighWatermark(); hw != leo {
		t.Fatalf("leader high watermark %d, log end %d after acks=all appends", hw, leo)
	}
	for _, id := range []int32{2, 3} {
		waitUntil(t, fmt.Sprintf("node %d's high watermark at %d", id, leo), func() bool { return c.log(id).HighWatermark() == leo })
		if !bytes.Equal(c.logBytes(id), c.logBytes(1)) {
			t.Fatalf("node %d's log differs from the leader's", id)
		}
	}
}

// A follower that stops fetching leaves the ISR after
// replica.lag.time.max.ms (AlterPartition); acks=all with
// min.insync.replicas=3 is then refused with NOT_ENOUGH_REPLICAS; once it
// fetches again and catches up, it is added back.
func TestISRShrinksAndExpands(t *testing.T) {
	c := newCluster(t, []int32{1, 2, 3}, replicatedTopic(3), 300*time.Millisecond)
	c.setPartition(led(1, 1, []int32{1, 2, 3}, []int32{1, 2, 3}))
	c.produce(1, -1, batch(t, 2, 1))
	c.setCut(3, true)
	c.produce(1, 1, batch(t, 2, 2))
	waitUntil(t, "the ISR without node 3", func() bool { return slices.Equal(c.isrOn(1), []int32{1, 2}) })
	if res := c.produce(1, -1, batch(t, 1, 3)); res[0].Result.Err != kerr.NotEnoughReplicas {
		t.Fatalf("acks=all with ISR [1 2] and min.insync.replicas 3: %v", res[0].Result.Err)
	}
	c.setCut(3, false)
	waitUntil(t, "node 3 back in the ISR", func() bool { return slices.Equal(c.isrOn(1), []int32{1, 2, 3}) })
	if res := c.produce(1, -1, batch(t, 1, 4)); res[0].Result.Err != nil {
		t.Fatalf("acks=all with the ISR full again: %v", res[0].Result.Err)
	}
	if !bytes.Equal(c.logBytes(3), c.logBytes(1)) {
		t.Fatal("node 3's log differs from the leader's")
	}
}

// TestRejoiningThousandsOfISRsWakesNoFetchPerPartition: an ISR expansion
// the controller committed wakes none of the partition's parked fetches:
// the high watermark did not move (the returning follower is at or past
// it) and no waiter's condition changed. Waking them once per partition
// read every parked follower fetch (thousands of partitions each) again
// once per partition of an AlterPartition answer, and a broker restarted
// beside 10,000 partitions took 20 to 70 s to rejoin every ISR instead of
// about 5. A shrink still wakes them (acks=all produces may complete).
func TestRejoiningThousandsOfISRsWakesNoFetchPerPartition(t *testing.T) {
	// Parked fetches wait up to 3 s, longer than what is measured.
	c := newClusterFetching(t, []int32{1, 2, 3}, nil, replicatedTopic(2), time.Minute, 1<<20, 3*time.Second)
	c.setPartition(led(1, 1, []int32{1, 2, 3}, []int32{1, 2, 3}))
	c.produce(1, -1, batch(t, 2, 1))
	leader := c.nodes[1]
	p := leader.hosted(TopicPartition{Topic: clusterTopic, Partition: 0})
	settled := func(expand bool) int64 {
		// Both followers' next fetches park afresh after this write.
		c.produce(1, -1, batch(t, 1, 2))
		time.Sleep(300 * time.Millisecond)
		before := leader.parkedRereads.Load()
		p.mu.RLock()
		ch := &isrChange{p: p, topicID: p.topicID, leaderEpoch: p.leaderEpoch, partitionEpoch: p.partitionEpoch, isr: slices.Clone(p.isr), expand: expand}
		rp := &kmsg.AlterPartitionResponseTopicPartition{LeaderID: 1, LeaderEpoch: p.leaderEpoch, PartitionEpoch: p.partitionEpoch, ISR: slices.Clone(p.isr)}
		p.mu.RUnlock()
		ch.settle(leader, rp)
		return leader.parkedRereads.Load() - before
	}
	if n := settled(true); n != 0 {
		t.Fatalf("a committed ISR expansion read the parked fetches again %d times, want 0", n)
	}
	if n := settled(false); n == 0 {
		t.Fatal("a committed ISR shrink woke no parked fetch")
	}
}

// An old leader with a tail its followers never fetched truncates it when
// it follows the new leader (DivergingEpoch), then copies the new leader's
// log: the logs end identical and nothing the new leader has is lost.
func TestOldLeaderTruncatesItsUnreplicatedTail(t *testing.T) {
	c := newCluster(t, []int32{1, 2}, replicatedTopic(1), 10*time.Second)
	c.setPartition(led(1, 1, []int32{1, 2}, []int32{1, 2}))
	c.produce(1, -1, batch(t, 3, 1), batch(t, 2, 2))
	waitUntil(t, "node 2 caught up", func() bool { return c.log(2).LogEndOffset() == 5 })
	c.setCut(2, true)
	c.produce(1, 1, batch(t, 1, 3), batch(t, 1, 4)) // offsets 5-6 only on node 1
	if leo := c.log(1).LogEndOffset(); leo != 7 {
		t.Fatalf("node 1's log end %d", leo)
	}
	// Node 2 is elected (an unclean choice made by hand: the test's
	// point is what node 1 does with its tail). Its own offsets 5-9, at
	// epoch 2, reach past node 1's log end: only the epochs show that
	// node 1's 5-6 are not the leader's.
	c.setPartition(led(2, 2, []int32{1, 2}, []int32{2}))
	c.produce(2, 1, batch(t, 5, 5))
	c.setCut(2, false)
	waitUntil(t, "node 1 truncated and caught up", func() bool {
		return c.log(1).LogEndOffset() == 10 && bytes.Equal(c.logBytes(1), c.logBytes(2))
	})
	if e, end := c.log(1).EndOffsetForEpoch(1); e != 1 || end != 5 {
		t.Fatalf("node 1's epoch 1 ends at %d (epoch %d), want 5", end, e)
	}
	waitUntil(t, "node 1 back in the ISR", func() bool { return slices.Equal(c.isrOn(2), []int32{1, 2}) })
}

// A follower that fell below the leader's log start starts over from it
// (OFFSET_OUT_OF_RANGE, ListOffsets earliest).
func TestFollowerBelowTheLogStartStartsOver(t *testing.T) {
	c := newCluster(t, []int32{1, 2}, replicatedTopic(1), 10*time.Second)
	c.setCut(2, true)
	c.setPartition(led(1, 1, []int32{1, 2}, []int32{1}))
	c.produce(1, 1, batch(t, 3, 1), batch(t, 3, 2), batch(t, 3, 3))
	if low, ke, _ := c.nodes[1].DeleteRecords(TopicPartition{Topic: clusterTopic}, 6); ke != nil || low != 6 {
		t.Fatalf("DeleteRecords: %d %v", low, ke)
	}
	c.setCut(2, false)
	waitUntil(t, "node 2 at the leader's log end", func() bool {
		l := c.log(2)
		return l.LogStartOffset() == 6 && l.LogEndOffset() == 9
	})
	if !bytes.Equal(c.logBytes(2), c.logBytes(1)) {
		t.Fatal("node 2's log differs from the leader's")
	}
}

// consumerFetch is a consumer's Fetch v11+ of partition 0 at offset, on
// node id.
func (c *cluster) consumerFetch(id int32, offset int64, rack string, clientMetadata bool) FetchResult {
	c.t.Helper()
	done := make(fetchResults, 1)
	entries := []FetchEntry{{TopicPartition: TopicPartition{Topic: clusterTopic}, FetchOffset: offset, MaxBytes: 1 << 20, CurrentLeaderEpoch: -1}}
	c.nodes[id].Fetch(FetchParams{ReplicaID: ConsumerReplicaID, MaxBytes: 1 << 20, ClientMetadata: clientMetadata, ClientRack: rack}, entries, done)
	got := receive(c.t, done)
	got[0].Result.Records.Release()
	return got[0].Result
}

// KIP-392: a consumer (Fetch v11+) may read from a follower, below the
// follower's high watermark; with the rack-aware selector the leader
// points a consumer at an in-sync replica in its rack, and reads itself
// for a consumer in its own rack or in none of the replicas' racks.
func TestConsumersFetchFromFollowers(t *testing.T) {
	c := newClusterRacks(t, []int32{1, 2, 3}, map[int32]string{1: "a", 2: "b", 3: "c"}, replicatedTopic(2), 10*time.Second)
	c.setPartition(led(1, 1, []int32{1, 2, 3}, []int32{1, 2, 3}))
	c.produce(1, -1, batch(t, 3, 1), batch(t, 2, 2))
	waitUntil(t, "node 2's high watermark at 5", func() bool { return c.log(2).HighWatermark() == 5 })
	// Both followers have fetched from 5 once the leader's high watermark
	// reached it; the selector wants them caught up to the fetch offset.
	if r := c.consumerFetch(2, 0, "", true); r.Err != nil || r.Records.Size == 0 || r.HighWatermark != 5 {
		t.Fatalf("fetch v11 from follower 2: %+v", r)
	}
	if r := c.consumerFetch(2, 0, "", false); r.Err != kerr.NotLeaderForPartition {
		t.Fatalf("fetch v10 from follower 2: %v, want NOT_LEADER_OR_FOLLOWER", r.Err)
	}
	if r := c.consumerFetch(1, 0, "b", true); r.PreferredReadReplica != 2 || r.Records.Size != 0 {
		t.Fatalf("consumer in rack b on the leader: preferred %d, %d bytes", r.PreferredReadReplica, r.Records.Size)
	}
	for _, rack := range []string{"a", "z", ""} {
		if r := c.consumerFetch(1, 0, rack, true); r.PreferredReadReplica != -1 || r.Records.Size == 0 {
			t.Fatalf("consumer in rack %q on the leader: preferred %d, %d bytes", rack, r.PreferredReadReplica, r.Records.Size)
		}
	}
	// A replica out of the ISR is never preferred.
	c.setCut(3, true)
	next := c.partition()
	next.ISR = []int32{1, 2}
	c.setPartition(next)
	if r := c.consumerFetch(1, 0, "c", true); r.PreferredReadReplica != -1 {
		t.Fatalf("consumer in rack c, replica 3 out of the ISR: preferred %d", r.PreferredReadReplica)
	}
}

// DeleteRecords' low watermark is the smallest log start over the live
// replicas: it waits for the followers to move theirs (their next fetch
// tells them), and times out while one cannot fetch.
func TestDeleteRecordsWaitsForTheFollowers(t *testing.T) {
	c := newCluster(t, []int32{1, 2}, replicatedTopic(1), 10*time.Second)
	c.setPartition(led(1, 1, []int32{1, 2}, []int32{1, 2}))
	c.produce(1, -1, batch(t, 3, 1), batch(t, 3, 2), batch(t, 3, 3))
	tp := TopicPartition{Topic: clusterTopic}
	if low, ke, _ := c.nodes[1].DeleteRecords(tp, 3); ke != nil || low != 3 {
		t.Fatalf("DeleteRecords: %d %v", low, ke)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if low, ke := c.nodes[1].WaitLowWatermark(ctx, tp, 3); ke != nil || low != 3 {
		t.Fatalf("low watermark %d %v, want 3", low, ke)
	}
	if got := c.log(2).LogStartOffset(); got != 3 {
		t.Fatalf("follower's log start %d", got)
	}
	c.setCut(2, true)
	if low, ke, _ := c.nodes[1].DeleteRecords(tp, 6); ke != nil || low != 6 {
		t.Fatalf("DeleteRecords: %d %v", low, ke)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if low, ke := c.nodes[1].WaitLowWatermark(short, tp, 6); ke != kerr.RequestTimedOut || low != 3 {
		t.Fatalf("with the follower cut off: %d %v, want 3 REQUEST_TIMED_OUT", low, ke)
	}
}

// A leader elected uncleanly (RECOVERING) reports RECOVERED at once with
// an AlterPartition that keeps its ISR.
func TestUncleanLeaderReportsRecovered(t *testing.T) {
	c := newCluster(t, []int32{1, 2}, replicatedTopic(1), 10*time.Second)
	c.setCut(2, true) // no ISR expansion to carry the news instead
	p := led(1, 3, []int32{1, 2}, []int32{1})
	p.LeaderRecoveryState = metadata.LeaderRecovering
	c.setPartition(p)
	waitUntil(t, "the partition RECOVERED", func() bool {
		return c.partition().LeaderRecoveryState == metadata.LeaderRecovered
	})
	if isr := c.partition().ISR; !slices.Equal(isr, []int32{1}) {
		t.Fatalf("ISR %v after reporting RECOVERED, want [1]", isr)
	}
}

// A follower waiting at the log end hears of a new high watermark at once,
// not when its long poll (a minute here) runs out.
func TestFollowersLearnTheHighWatermarkWithoutWaitingForData(t *testing.T) {
	c := newClusterFetching(t, []int32{1, 2, 3}, nil, replicatedTopic(2), 10*time.Second, 1<<20, time.Minute)
	c.setPartition(led(1, 1, []int32{1, 2, 3}, []int32{1, 2, 3}))
	for i := range 3 {
		if res := c.produce(1, -1, batch(t, 2, int64(i))); res[0].Result.Err != nil {
			t.Fatalf("acks=all: %v", res[0].Result.Err)
		}
		leo := c.log(1).LogEndOffset()
		for _, id := range []int32{2, 3} {
			waitUntil(t, fmt.Sprintf("node %d's high watermark at %d", id, leo), func() bool { return c.log(id).HighWatermark() == leo })
		}
	}
}

// The slow-disk nemesis: a follower whose every write takes 20 ms falls
// behind an acks=1 stream, leaves the ISR after replica.lag.time.max.ms,
// and acks=all writes go on with the leader and the other follower; once
// the disk is fast again it catches up and rejoins. A slow leader disk
// only slows acks=all down. Every acknowledged batch is in every log at
// the end, and the logs are identical.
func TestSlowDiskNemesis(t *testing.T) {
	c := newCluster(t, []int32{1, 2, 3}, replicatedTopic(2), 400*time.Millisecond)
	c.setPartition(led(1, 1, []int32{1, 2, 3}, []int32{1, 2, 3}))
	slow := func(id int32, on bool) {
		if !on {
			c.fs[id].Inject(nil)
			return
		}
		c.fs[id].Inject(func(op vfs.Op, _ string) error {
			if op == vfs.OpWrite {
				time.Sleep(20 * time.Millisecond)
			}
			return nil
		})
	}
	acked := 0
	write := func(acks int16, n int) {
		t.Helper()
		for range n {
			res := c.produce(1, acks, batch(t, 3, 1))
			if res[0].Result.Err == nil {
				acked++
			} else if acks == -1 {
				t.Fatalf("acks=all with two replicas in sync: %v", res[0].Result.Err)
			}
		}
	}
	slow(3, true)
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(c.isrOn(1), []int32{1, 2}) {
		if time.Now().After(deadline) {
			t.Fatalf("the slow follower still in the ISR %v", c.isrOn(1))
		}
		write(1, 20)
	}
	write(-1, 20)
	slow(3, false)
	waitUntil(t, "the follower back in the ISR", func() bool { return slices.Equal(c.isrOn(1), []int32{1, 2, 3}) })
	slow(1, true)
	write(-1, 10)
	slow(1, false)
	leo := c.log(1).LogEndOffset()
	if leo != int64(3*acked) {
		t.Fatalf("leader's log end %d after %d acknowledged batches of 3", leo, acked)
	}
	for _, id := range []int32{2, 3} {
		waitUntil(t, fmt.Sprintf("node %d at the leader's log end", id), func() bool { return c.log(id).LogEndOffset() == leo })
		if !bytes.Equal(c.logBytes(id), c.logBytes(1)) {
			t.Fatalf("node %d's log differs from the leader's", id)
		}
	}
}
