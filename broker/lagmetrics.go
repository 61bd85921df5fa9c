package broker

// Consumer group lag, what kafka-lag-exporter and Burrow give and Kafka's
// brokers do not: per group, topic and partition, the partition's end
// offset less the group's committed offset, computed at scrape time.
//
// The committed offsets are those the group coordinator holds for the
// groups whose __consumer_offsets partition this node leads, so each group
// is reported by one node (its coordinator) and a cluster's series add up
// without duplicates.
//
// The end offset is what kafka-consumer-groups --describe subtracts from:
// its LOG-END-OFFSET comes from Admin.listOffsets(OffsetSpec.latest()) with
// the default ListOffsetsOptions, READ_UNCOMMITTED, i.e. the partition's
// high watermark (not the log end, and not the last stable offset, even
// for a transactional topic). LAG is end - committed, negative if the
// committed offset is past it, as the tool prints it; a partition whose
// end is unknown has no lag, as the tool prints "-".
//
// A partition this node leads is asked of the replica manager, exactly as
// ListOffsets answers it. One led elsewhere is asked of its leader with
// ListOffsets, in the background: a scrape starts a refresh when the last
// began at least lagRefreshInterval ago, waits for it at most
// lagRefreshWait, and otherwise reports the end offsets of the refresh
// before (a scrape never waits on the network for longer). A partition
// whose leader did not answer, or that has none, has no lag series until
// it does. A follower's own high watermark is not used: it trails the
// leader's, and one source of truth keeps the numbers equal to the tool's.
//
// Labels: group ids are the users'; a series exists per committed offset,
// as many as NumOffsets counts, which is what lag exporters expose.
// gregor.metrics.per.partition=false keeps only the sums per group and
// topic.

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metrics"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// lagRefreshInterval is the least time between two refreshes of the
	// end offsets of partitions led elsewhere: Prometheus scrapes every
	// 15 s or more, so each scrape normally starts one.
	lagRefreshInterval = 5 * time.Second
	// lagRefreshWait is how long a scrape waits for the refresh it
	// started before it reports the previous one's end offsets.
	lagRefreshWait = 500 * time.Millisecond
	// lagRefreshTimeout bounds a refresh's requests to the leaders.
	lagRefreshTimeout = 5 * time.Second
)

// partitionLag is one group's committed offset of a partition and that
// partition's end offset.
type partitionLag struct {
	group, topic string
	partition    int32
	committed    int64
	end          int64
}

func (l *partitionLag) lag() int64 { return l.end - l.committed }

// consumerLag pairs the committed offsets with the partitions' end
// offsets; end reports false for a partition whose end is unknown, which
// is then left out.
func consumerLag(offsets []group.CommittedOffset, end func(replica.TopicPartition) (int64, bool)) []partitionLag {
	out := make([]partitionLag, 0, len(offsets))
	for _, o := range offsets {
		// -1 is no offset (a commit of -1 is possible), which the tool
		// shows without a lag.
		if o.Offset < 0 {
			continue
		}
		e, ok := end(replica.TopicPartition{Topic: o.Topic, Partition: o.Partition})
		if !ok {
			continue
		}
		out = append(out, partitionLag{group: o.Group, topic: o.Topic, partition: o.Partition, committed: o.Offset, end: e})
	}
	return out
}

// lagSums adds the lags up per group and topic.
func lagSums(lags []partitionLag) map[[2]string]int64 {
	sums := map[[2]string]int64{}
	for i := range lags {
		sums[[2]string{lags[i].group, lags[i].topic}] += lags[i].lag()
	}
	return sums
}

// registerLagMetrics registers the consumer lag gauges (see the top of
// this file).
func (b *Broker) registerLagMetrics(r *metrics.Registry, perPartition bool) {
	g := b.groups
	if g == nil {
		return
	}
	var lags []partitionLag
	r.OnScrape(func() {
		offsets := g.coord.CommittedOffsets()
		img := b.meta.Image()
		local := map[replica.TopicPartition]int64{}
		remote := map[int32][]replica.TopicPartition{}
		for _, o := range offsets {
			tp := replica.TopicPartition{Topic: o.Topic, Partition: o.Partition}
			if _, ok := local[tp]; ok {
				continue
			}
			lo := b.replicas.ListOffset(tp, -1, replica.LatestTimestamp, replica.ReadUncommitted, replica.ConsumerReplicaID)
			if lo.Err == nil {
				local[tp] = lo.Offset
				continue
			}
			if leader := imageLeader(img, tp); leader >= 0 && leader != b.opts.NodeID {
				remote[leader] = append(remote[leader], tp)
			}
		}
		var ends map[replica.TopicPartition]int64
		if len(remote) > 0 {
			ends = b.lagEnds.get(remote)
		}
		lags = consumerLag(offsets, func(tp replica.TopicPartition) (int64, bool) {
			if e, ok := local[tp]; ok {
				return e, true
			}
			e, ok := ends[tp]
			return e, ok
		})
	})
	if perPartition {
		r.Collect(metrics.ConsumerGroupLag, func(emit *metrics.Emit) {
			for i := range lags {
				l := &lags[i]
				emit.Add(float64(l.lag()), l.group, l.topic, strconv.Itoa(int(l.partition)))
			}
		})
		r.Collect(metrics.ConsumerGroupCommittedOffset, func(emit *metrics.Emit) {
			for i := range lags {
				l := &lags[i]
				emit.Add(float64(l.committed), l.group, l.topic, strconv.Itoa(int(l.partition)))
			}
		})
	}
	r.Collect(metrics.ConsumerGroupLagSum, func(emit *metrics.Emit) {
		for k, sum := range lagSums(lags) {
			emit.Add(float64(sum), k[0], k[1])
		}
	})
}

// imageLeader is tp's leader in img, -1 when none or unknown.
func imageLeader(img *metadata.Image, tp replica.TopicPartition) int32 {
	if img == nil {
		return -1
	}
	t := img.Topic(tp.Topic)
	if t == nil || tp.Partition < 0 || int(tp.Partition) >= t.Partitions.Len() {
		return -1
	}
	return t.Partitions.At(int(tp.Partition)).Leader
}

// remoteEnds is the cache of end offsets of partitions led by other
// brokers, refreshed by ListOffsets to their leaders.
type remoteEnds struct {
	// list asks leader for the end offsets of tps.
	list func(ctx context.Context, leader int32, tps []replica.TopicPartition) (map[replica.TopicPartition]int64, error)
	now  func() time.Time
	log  *slog.Logger

	mu sync.Mutex
	// ends is replaced whole by each refresh, never changed in place, so
	// a scrape reads the one it was given without the lock.
	ends    map[replica.TopicPartition]int64
	started time.Time
	// running is closed when the refresh in flight ends; nil when none.
	running chan struct{}
	stopped bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func newRemoteEnds(list func(context.Context, int32, []replica.TopicPartition) (map[replica.TopicPartition]int64, error), now func() time.Time, log *slog.Logger) *remoteEnds {
	ctx, cancel := context.WithCancel(context.Background())
	return &remoteEnds{list: list, now: now, log: log, ctx: ctx, cancel: cancel}
}

// get returns the end offsets to report: those of a refresh of want
// (partitions by leader) started now if the last began lagRefreshInterval
// ago or more and answered within lagRefreshWait, else the last refresh's.
func (r *remoteEnds) get(want map[int32][]replica.TopicPartition) map[replica.TopicPartition]int64 {
	r.mu.Lock()
	done := r.running
	if done == nil && !r.stopped && r.now().Sub(r.started) >= lagRefreshInterval {
		done = make(chan struct{})
		r.running, r.started = done, r.now()
		r.wg.Add(1)
		go r.refresh(want, done)
	}
	r.mu.Unlock()
	if done != nil {
		t := time.NewTimer(lagRefreshWait)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ends
}

// refresh asks every leader at once; a leader that fails leaves its
// partitions out until the next refresh.
func (r *remoteEnds) refresh(want map[int32][]replica.TopicPartition, done chan struct{}) {
	defer r.wg.Done()
	ctx, cancel := context.WithTimeout(r.ctx, lagRefreshTimeout)
	defer cancel()
	var mu sync.Mutex
	ends := map[replica.TopicPartition]int64{}
	var wg sync.WaitGroup
	for leader, tps := range want {
		wg.Go(func() {
			got, err := r.list(ctx, leader, tps)
			if err != nil {
				if r.ctx.Err() == nil {
					r.log.Debug("consumer lag: end offsets not listed", "leader", leader, "err", err)
				}
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for tp, e := range got {
				ends[tp] = e
			}
		})
	}
	wg.Wait()
	r.mu.Lock()
	r.ends, r.running = ends, nil
	r.mu.Unlock()
	close(done)
}

// stop ends a refresh in flight and keeps others from starting.
func (r *remoteEnds) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// listEndOffsets asks leader, on the inter-broker listener, for the end
// offsets of tps as kafka-consumer-groups asks for them (latest,
// read_uncommitted, as a consumer).
func (b *Broker) listEndOffsets(ctx context.Context, leader int32, tps []replica.TopicPartition) (map[replica.TopicPartition]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(7)
	req.ReplicaID = replica.ConsumerReplicaID
	byTopic := map[string]int{}
	for _, tp := range tps {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.Topic] = i
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = tp.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.CurrentLeaderEpoch, p.Timestamp = tp.Partition, -1, replica.LatestTimestamp
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	resp, err := b.peers.send(ctx, leader, laneLag, req)
	if err != nil {
		return nil, err
	}
	out := map[replica.TopicPartition]int64{}
	for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			if kerr.ErrorForCode(p.ErrorCode) == nil && p.Offset >= 0 {
				out[replica.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.Offset
			}
		}
	}
	return out, nil
}
