package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/gregorbroker/gregor/metrics"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConsumerLagIsEndLessCommitted: the tool's LAG, with no lag where
// the end or the committed offset is unknown, and sums per group and
// topic.
func TestConsumerLagIsEndLessCommitted(t *testing.T) {
	tp := func(topic string, p int32) replica.TopicPartition {
		return replica.TopicPartition{Topic: topic, Partition: p}
	}
	ends := map[replica.TopicPartition]int64{tp("a", 0): 10, tp("a", 1): 4, tp("b", 0): 7}
	offsets := []group.CommittedOffset{
		{Group: "g1", Topic: "a", Partition: 0, Offset: 3},
		{Group: "g1", Topic: "a", Partition: 1, Offset: 4},
		{Group: "g1", Topic: "b", Partition: 0, Offset: 9},  // past the end: negative, as the tool prints it
		{Group: "g1", Topic: "c", Partition: 0, Offset: 1},  // end unknown
		{Group: "g2", Topic: "a", Partition: 0, Offset: -1}, // no offset
		{Group: "g2", Topic: "a", Partition: 1, Offset: 0},
	}
	lags := consumerLag(offsets, func(tp replica.TopicPartition) (int64, bool) { e, ok := ends[tp]; return e, ok })
	var got []string
	for _, l := range lags {
		got = append(got, fmt.Sprintf("%s/%s/%d=%d", l.group, l.topic, l.partition, l.lag()))
	}
	want := []string{"g1/a/0=7", "g1/a/1=0", "g1/b/0=-2", "g2/a/1=4"}
	if !slices.Equal(got, want) {
		t.Errorf("lags %v, want %v", got, want)
	}
	sums := lagSums(lags)
	if len(sums) != 3 || sums[[2]string{"g1", "a"}] != 7 || sums[[2]string{"g1", "b"}] != -2 || sums[[2]string{"g2", "a"}] != 4 {
		t.Errorf("sums %v", sums)
	}
}

// TestRemoteEndsRefreshAtMostOncePerInterval: a scrape starts a refresh
// only when the last began lagRefreshInterval ago, waits for it at most
// lagRefreshWait, and a leader that fails leaves its partitions out.
func TestRemoteEndsRefreshAtMostOncePerInterval(t *testing.T) {
	var clock atomic.Int64
	now := func() time.Time { return time.Unix(1000, 0).Add(time.Duration(clock.Load())) }
	var calls atomic.Int32
	var mu sync.Mutex
	end := int64(10)
	block := make(chan struct{})
	blocking := atomic.Bool{}
	r := newRemoteEnds(func(ctx context.Context, leader int32, tps []replica.TopicPartition) (map[replica.TopicPartition]int64, error) {
		calls.Add(1)
		if leader == 3 {
			return nil, errors.New("leader 3 is away")
		}
		if blocking.Load() {
			select {
			case <-block:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		mu.Lock()
		defer mu.Unlock()
		out := map[replica.TopicPartition]int64{}
		for _, tp := range tps {
			out[tp] = end
		}
		return out, nil
	}, now, slog.New(slog.DiscardHandler))
	defer r.stop()
	a0 := replica.TopicPartition{Topic: "a", Partition: 0}
	c0 := replica.TopicPartition{Topic: "c", Partition: 0}
	want := map[int32][]replica.TopicPartition{2: {a0}, 3: {c0}}

	got := r.get(want)
	if got[a0] != 10 || len(got) != 1 || calls.Load() != 2 {
		t.Fatalf("first scrape: ends %v after %d calls, want a-0 at 10 after 2", got, calls.Load())
	}
	mu.Lock()
	end = 12
	mu.Unlock()
	if got := r.get(want); got[a0] != 10 || calls.Load() != 2 {
		t.Fatalf("a scrape within the interval: ends %v after %d calls, want the cached 10 and no call", got, calls.Load())
	}
	clock.Add(int64(lagRefreshInterval))
	if got := r.get(want); got[a0] != 12 || calls.Load() != 4 {
		t.Fatalf("a scrape after the interval: ends %v after %d calls, want 12 after 4", got, calls.Load())
	}

	// A leader slower than lagRefreshWait: the scrape answers with the
	// last refresh's ends, and the next one after the answer has it.
	blocking.Store(true)
	mu.Lock()
	end = 15
	mu.Unlock()
	clock.Add(int64(lagRefreshInterval))
	start := time.Now()
	if got := r.get(want); got[a0] != 12 {
		t.Fatalf("a scrape whose refresh is slow: ends %v, want the previous 12", got)
	}
	if waited := time.Since(start); waited > 5*lagRefreshWait {
		t.Fatalf("the scrape waited %v", waited)
	}
	close(block)
	deadline := time.Now().Add(10 * time.Second)
	for r.get(want)[a0] != 15 {
		if time.Now().After(deadline) {
			t.Fatal("the slow refresh's ends never showed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConsumerLagMetricsOfACommittedGroup: a group that committed part of
// what was produced shows its lag, committed offsets and sum on the node
// that coordinates it; without per-partition series only the sum.
func TestConsumerLagMetricsOfACommittedGroup(t *testing.T) {
	n := startTestNode(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.DefaultProduceTopic("lagged"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "lagged"); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		r := kgo.StringRecord("r")
		r.Partition = int32(i % 2)
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "lagged", Partition: 0, At: 2, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "lagged", Partition: 1, At: 5, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "lag-g", offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}

	scrape := func(perPartition bool) string {
		r := metrics.NewRegistry()
		n.b.registerLagMetrics(r, perPartition)
		var b bytes.Buffer
		if err := r.Write(&b, false); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	text := scrape(true)
	for _, w := range []string{
		`gregor_consumergroup_lag{group="lag-g",topic="lagged",partition="0"} 3`,
		`gregor_consumergroup_lag{group="lag-g",topic="lagged",partition="1"} 0`,
		`gregor_consumergroup_committed_offset{group="lag-g",topic="lagged",partition="0"} 2`,
		`gregor_consumergroup_lag_sum{group="lag-g",topic="lagged"} 3`,
	} {
		if !strings.Contains(text, w+"\n") {
			t.Errorf("no %s in\n%s", w, grepLines(text, "gregor_"))
		}
	}
	text = scrape(false)
	if strings.Contains(text, "gregor_consumergroup_lag{") || !strings.Contains(text, `gregor_consumergroup_lag_sum{group="lag-g",topic="lagged"} 3`) {
		t.Errorf("without per-partition series:\n%s", grepLines(text, "gregor_"))
	}
}
