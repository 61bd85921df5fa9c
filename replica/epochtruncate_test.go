package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metadata/persist"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A node made leader assigns its epoch at its log end and loses the
// leadership before it appends anything (fault campaign finding #3). The
// next leader never had that epoch and tells it, as a follower, that its
// log diverged at its own log end: the truncation removes no record but
// must drop the epoch, or the follower asks again with the same epoch at
// once, for ever, and never rejoins the ISR.
func TestFollowerDropsAnEpochItLedWithoutAppending(t *testing.T) {
	c := newCluster(t, []int32{1, 2}, replicatedTopic(1), 10*time.Second)
	c.setPartition(led(1, 1, []int32{1, 2}, []int32{1, 2}))
	c.produce(1, -1, batch(t, 3, 1), batch(t, 2, 2))
	waitUntil(t, "node 2 caught up", func() bool { return c.log(2).LogEndOffset() == 5 })
	// Node 2 leads epoch 2 (its epoch cache gets epoch 2 at offset 5) and
	// appends nothing; node 1 takes over in epoch 3 (epoch 3 at 5).
	c.setPartition(led(2, 2, []int32{1, 2}, []int32{1, 2}))
	if e, _ := c.log(2).LatestEpoch(); e != 2 {
		t.Fatalf("node 2's latest epoch %d as leader of epoch 2", e)
	}
	c.setPartition(led(1, 3, []int32{1, 2}, []int32{1}))
	waitUntil(t, "node 2 back in the ISR", func() bool { return slices.Equal(c.isrOn(1), []int32{1, 2}) })
	if res := c.produce(1, -1, batch(t, 2, 3)); res[0].Result.Err != nil {
		t.Fatalf("acks=all with node 2 back in the ISR: %v", res[0].Result.Err)
	}
	waitUntil(t, "node 2 caught up again", func() bool { return c.log(2).LogEndOffset() == 7 })
	if !bytes.Equal(c.logBytes(2), c.logBytes(1)) {
		t.Fatal("node 2's log differs from the leader's")
	}
	if e, end := c.log(2).EndOffsetForEpoch(2); e != 1 || end != 5 {
		t.Fatalf("node 2's EndOffsetForEpoch(2) = (%d, %d), want (1, 5): it appended nothing in epoch 2", e, end)
	}
}

// stuckLeader answers every fetch with the same DivergingEpoch, one that
// the follower's truncation does not change: offset 0 of epoch 0 for an
// empty follower log.
type stuckLeader struct {
	mu      sync.Mutex
	fetches int
}

func (s *stuckLeader) SendToBroker(_ context.Context, _ int32, _ int, req kmsg.Request) (kmsg.Response, error) {
	r, ok := req.(*kmsg.FetchRequest)
	if !ok {
		return nil, fmt.Errorf("unexpected %T", req)
	}
	s.mu.Lock()
	s.fetches++
	s.mu.Unlock()
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.HighWatermark, rp.LastStableOffset = p.Partition, 0, 0
			rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = 0, 0
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (s *stuckLeader) SendToController(context.Context, kmsg.Request) (kmsg.Response, error) {
	return nil, errors.New("no controller")
}

func (s *stuckLeader) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches
}

// A truncation for a DivergingEpoch that changes neither the fetch offset
// nor the last fetched epoch would send the very fetch just answered: the
// follower backs off replica.fetch.backoff.ms instead of spinning.
func TestFollowerBacksOffWhenATruncationChangesNothing(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	logs, err := storage.OpenManager(storage.ManagerOptions{FS: vfs.NewMemFS(), Dirs: []string{"/data"}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	leader := &stuckLeader{}
	m := NewManager(Options{
		NodeID: 1, Logs: logs, Configs: topicConfigs{}, Logger: logger, Peers: leader,
		Fetch: FetcherConfig{Fetchers: 1, MaxBytes: 1 << 20, ResponseMaxBytes: 10 << 20, MinBytes: 1, MaxWait: 50 * time.Millisecond, Backoff: time.Hour},
	})
	m.SetBrokerEpoch(101)
	img := &metadata.Image{Brokers: map[int32]*metadata.Broker{
		1: {ID: 1, Epoch: 101}, 2: {ID: 2, Epoch: 102},
	}}
	if err := m.Start(context.Background(), imageFunc(func() *metadata.Image { return img })); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Stop()
		logs.Close()
	})
	next := &metadata.Image{Offset: 1, Topics: img.Topics, TopicsByID: img.TopicsByID, Brokers: img.Brokers}
	tp := &metadata.Topic{Name: clusterTopic, ID: clusterTopicID, Partitions: persist.VectorOf(led(2, 1, []int32{1, 2}, []int32{2}))}
	next.Topics, next.TopicsByID = next.Topics.Set(clusterTopic, tp), next.TopicsByID.Set(clusterTopicID, tp)
	m.ApplyImage(img, next)

	delayed := func() bool {
		m.fetchers.mu.Lock()
		defer m.fetchers.mu.Unlock()
		st := m.fetchers.assigned[TopicPartition{Topic: clusterTopic}]
		if st == nil {
			return false
		}
		f := m.fetchers.running[st.key]
		if f == nil {
			return false
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return time.Until(st.delayedUntil) > 30*time.Minute
	}
	waitUntil(t, "backoff by the follower", delayed)
	if n := leader.count(); n != 1 {
		t.Fatalf("%d fetches sent before the follower backed off, want 1", n)
	}
}
