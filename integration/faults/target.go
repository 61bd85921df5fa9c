package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/integration"
)

// Targets are the clusters the suite runs against: three combined nodes
// of Apache Kafka (which proves the suite) or of Gregor.
var Targets = []string{"gregor-cluster", "kafka-cluster"}

// The suite's topic: Kafka's durable shape.
const (
	TopicPartitions   = 6
	ReplicationFactor = 3
	MinInsyncReplicas = 2
)

// clusterProperties make failures noticed within seconds rather than
// Kafka's defaults (9 s fencing, 30 s ISR lag), so that a run of a minute
// sees several of them; both implementations read the same keys.
var clusterProperties = []string{
	"broker.session.timeout.ms=4000",
	"broker.heartbeat.interval.ms=500",
	"replica.lag.time.max.ms=5000",
	"unclean.leader.election.enable=false",
	"offsets.topic.num.partitions=6",
	// Retention and producer expiry run every second, so that a node
	// whose clock steps (the clock nemesis) acts on it within the fault.
	"log.retention.check.interval.ms=1000",
	"producer.id.expiration.check.interval.ms=1000",
}

// StartCluster starts target (one of Targets) laid out as layout in dir,
// on loopback or, when net is not nil, with each node in its own
// namespace of net.
func StartCluster(ctx context.Context, tools *integration.Tools, target string, layout integration.ClusterLayout, dir string, net *Network) (*integration.Cluster, error) {
	return startCluster(ctx, tools, target, layout, dir, net, nil, nil)
}

// LoopbackCluster is a cluster of StartLoopbackCluster, with its nodes'
// HTTP listeners.
type LoopbackCluster struct {
	*integration.Cluster
	// HTTP is node id's HTTP listener (/metrics, /debug/...).
	HTTP   map[int]string
	claims map[int]*integration.Loopback
}

// Stop stops the cluster, then gives its addresses back.
func (c *LoopbackCluster) Stop() error {
	err := c.Cluster.Stop()
	c.release()
	return err
}

func (c *LoopbackCluster) release() {
	for _, l := range c.claims {
		l.Release()
	}
}

// StartLoopbackCluster starts target as StartCluster does without a
// Network, each node on a loopback address claimed here with its HTTP
// listener (GREGOR_PPROF_ADDR; Kafka has none) on integration.DebugPort
// of that address; props are more server.properties lines, after the
// suite's own.
func StartLoopbackCluster(ctx context.Context, tools *integration.Tools, target string, layout integration.ClusterLayout, dir string, props []string) (*LoopbackCluster, error) {
	lc := &LoopbackCluster{HTTP: map[int]string{}, claims: map[int]*integration.Loopback{}}
	for _, id := range Layouts[layout] {
		l, err := integration.ClaimLoopback()
		if err != nil {
			lc.release()
			return nil, fmt.Errorf("node %d: %w", id, err)
		}
		lc.claims[id] = l
		lc.HTTP[id] = l.Addr(integration.DebugPort)
	}
	cl, err := startCluster(ctx, tools, target, layout, dir, nil, lc.claims, props)
	if err != nil {
		lc.release()
		return nil, err
	}
	lc.Cluster = cl
	return lc, nil
}

// startCluster is StartCluster; without net, node id listens on
// hosts[id] (when set), its HTTP listener on integration.DebugPort
// there, and props are added to the suite's properties.
func startCluster(ctx context.Context, tools *integration.Tools, target string, layout integration.ClusterLayout, dir string, net *Network,
	hosts map[int]*integration.Loopback, props []string) (*integration.Cluster, error) {
	flavor, ok := strings.CutSuffix(target, "-cluster")
	if !ok || (flavor != "kafka" && flavor != "gregor") {
		return nil, fmt.Errorf("unknown fault target %q (want one of %s)", target, strings.Join(Targets, ", "))
	}
	opts := integration.ClusterOptions{Properties: append(slices.Clone(clusterProperties), props...), Hosts: map[int]string{}, Wrap: map[int][]string{}}
	ids, ok := Layouts[layout]
	if !ok {
		return nil, fmt.Errorf("no node ids known for layout %s", layout)
	}
	for _, id := range ids {
		// env execs the node, so its pid stays the node's; Kafka ignores
		// the variables. Gregor reads its storage faults from the file
		// (cmd/gregor/testfaults.go): the disk nemeses write it.
		env := []string{"env", testFaultsEnv + "=" + FaultFile(dir, id)}
		switch {
		case net != nil:
			opts.Hosts[id] = net.Host(id)
			env = append(net.Wrap(id), append(env, fmt.Sprintf("GREGOR_PPROF_ADDR=%s:%d", net.Host(id), DebugPort))...)
		case hosts[id] != nil:
			opts.Hosts[id] = hosts[id].IP
			env = append(env, "GREGOR_PPROF_ADDR="+hosts[id].Addr(integration.DebugPort))
		}
		opts.Wrap[id] = env
	}
	return integration.StartClusterWith(ctx, tools, flavor, layout, dir, 3*time.Minute, opts)
}

// testFaultsEnv names Gregor's storage fault hook's file
// (cmd/gregor/testfaults.go).
const testFaultsEnv = "GREGOR_TEST_FAULTS_FILE"

// FaultFile is where node id of the cluster in dir reads its storage
// faults from.
func FaultFile(clusterDir string, id int) string {
	return filepath.Join(clusterDir, fmt.Sprintf("node-%d.faults", id))
}

// CreateTopic creates the suite's topic and waits until every partition
// has a leader and all three replicas in sync.
func CreateTopic(ctx context.Context, target string, adm *kadm.Client, topic string) error {
	return CreateTopicWith(ctx, target, adm, topic, nil)
}

// CreateTopicWith is CreateTopic with more topic configs (configs' keys
// beside min.insync.replicas).
func CreateTopicWith(ctx context.Context, target string, adm *kadm.Client, topic string, configs map[string]string) error {
	cfg := map[string]*string{"min.insync.replicas": kadm.StringPtr(fmt.Sprint(MinInsyncReplicas))}
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	resp, err := adm.CreateTopic(ctx, TopicPartitions, ReplicationFactor, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		msg := fmt.Sprintf("creating topic %s (%d partitions, replication factor %d, min.insync.replicas=%d, %v) on %s",
			topic, TopicPartitions, ReplicationFactor, MinInsyncReplicas, configs, target)
		return fmt.Errorf("%s: %w (%s)", msg, err, resp.ErrMessage)
	}
	return WaitInSync(ctx, adm, topic, time.Minute)
}

// Partition is one partition's replica state from Metadata.
type Partition struct {
	ID       int32
	Leader   int32 // -1 when none
	Replicas []int32
	ISR      []int32
}

// Partitions asks the cluster for the topic's partitions, in id order.
func Partitions(ctx context.Context, adm *kadm.Client, topic string) ([]Partition, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("metadata of %s: %v", topic, td.Err)
	}
	var out []Partition
	for _, p := range td.Partitions.Sorted() {
		out = append(out, Partition{ID: p.Partition, Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("metadata of %s lists no partitions", topic)
	}
	return out, nil
}

// WaitInSync waits up to wait for every partition of topic to have a
// leader and all its replicas in the ISR.
func WaitInSync(ctx context.Context, adm *kadm.Client, topic string, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var last string
	for {
		mctx, mcancel := context.WithTimeout(ctx, 5*time.Second)
		ps, err := Partitions(mctx, adm, topic)
		mcancel()
		if err == nil {
			last = ""
			for _, p := range ps {
				if p.Leader < 0 || len(p.ISR) < len(p.Replicas) {
					last += fmt.Sprintf(" p%d leader %d isr %v of %v;", p.ID, p.Leader, p.ISR, p.Replicas)
				}
			}
			if last == "" {
				return nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not fully in sync after %s:%s", topic, wait, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// RecordFinalRead reads every partition of topic from offset 0 to its end
// offset (the high watermark) with read_uncommitted and records the read
// as one FinalRead op.
func RecordFinalRead(ctx context.Context, h *History, log *slog.Logger, seeds []string, adm *kadm.Client, topic string) error {
	return recordRead(h, FinalRead, func() ([]Record, error) { return readAll(ctx, log, seeds, adm, topic, false) })
}

// RecordRetainedRead is RecordFinalRead of a topic whose retention
// deletes records meanwhile: each partition is read from its log start
// (offset 0 is gone) and is done at its end offset or once its log start
// reaches it. Record a LogStart observation after it (ObserveLogStart):
// what is missing below it may have been deleted before it was read.
func RecordRetainedRead(ctx context.Context, h *History, log *slog.Logger, seeds []string, adm *kadm.Client, topic string) error {
	return recordRead(h, FinalRead, func() ([]Record, error) { return readAll(ctx, log, seeds, adm, topic, true) })
}

// RecordCompactRead reads every partition of the compacted topic from
// offset 0 to its end offset and records the read, keys included, as one
// CompactRead op.
func RecordCompactRead(ctx context.Context, h *History, log *slog.Logger, seeds []string, adm *kadm.Client, topic string) error {
	return recordRead(h, CompactRead, func() ([]Record, error) { return readAll(ctx, log, seeds, adm, topic, false) })
}

// ObserveLogStart asks for topic's log start offsets and records the
// request as a LogStart op of process (invoked, then ok with Offsets, or
// fail); seq numbers the process's observations.
func ObserveLogStart(ctx context.Context, h *History, adm *kadm.Client, topic, process string, seq int64) error {
	inv := h.Add(Op{Process: process, Type: Invoke, F: LogStart, Seq: seq, Value: topic})
	starts, err := logStarts(ctx, adm, topic)
	done := inv
	if err != nil {
		done.Type, done.Error = Fail, err.Error()
		h.Add(done)
		return err
	}
	done.Type, done.Offsets = OK, starts
	h.Add(done)
	return nil
}

// logStarts is topic's log start offsets, by partition.
func logStarts(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	listed, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("log start offsets of %s: %w", topic, err)
	}
	starts := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { starts[o.Partition] = o.Offset })
	return starts, nil
}

// recordRead records read as one op of f, of process "final".
func recordRead(h *History, f Func, read func() ([]Record, error)) error {
	inv := h.Add(Op{Process: "final", Type: Invoke, F: f})
	recs, err := read()
	done := inv
	if err != nil {
		done.Type, done.Error = Fail, err.Error()
		h.Add(done)
		return err
	}
	done.Type, done.Records = OK, recs
	h.Add(done)
	return nil
}

// readAll reads topic from its start to its end offsets; with retained,
// a partition is also done once its log start reaches its end.
func readAll(ctx context.Context, log *slog.Logger, seeds []string, adm *kadm.Client, topic string, retained bool) ([]Record, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var ends kadm.ListedOffsets
	for {
		var err error
		if ends, err = adm.ListEndOffsets(ctx, topic); err == nil && ends.Error() == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("end offsets of %s: %v %v", topic, err, ends.Error())
		}
		time.Sleep(500 * time.Millisecond)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	var floor func(context.Context) (map[int32]int64, error)
	if retained {
		floor = func(ctx context.Context) (map[int32]int64, error) { return logStarts(ctx, adm, topic) }
	}
	return readPartitions(ctx, log, "final read", seeds, topic, want, floor, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
}

// readPartitions reads topic's partitions from offset 0 to their end
// offsets in want with a client made with opts, and returns the records
// below those ends in partition and offset order, control records left
// out. The client must hand over a record at each partition's last
// offset (with read_committed, that takes KeepControlRecords: a
// transaction's marker is often a partition's last record). floor, when
// set, gives the partitions' log starts: a partition whose log start
// reaches its end offset while it is read is done (retention deleted
// the rest; the client resumes at the log start when it falls below it).
func readPartitions(ctx context.Context, log *slog.Logger, what string, seeds []string, topic string, want map[int32]int64,
	floor func(context.Context) (map[int32]int64, error), opts ...kgo.Opt) ([]Record, error) {
	from := map[int32]kgo.Offset{}
	for p, end := range want {
		if end > 0 {
			from[p] = kgo.NewOffset().At(0)
		}
	}
	if len(from) == 0 {
		return nil, nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from})}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("%s client: %w", what, err)
	}
	defer cl.Close()
	poll := cl.PollFetches
	if floor != nil {
		// Short polls: a partition may have nothing left to give.
		poll = func(ctx context.Context) kgo.Fetches {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			return cl.PollFetches(pctx)
		}
	}
	var out []Record
	next := map[int32]int64{}
	for {
		remaining := 0
		for p, end := range want {
			if next[p] < end {
				remaining++
			}
		}
		if remaining == 0 {
			sort.SliceStable(out, func(i, j int) bool {
				if out[i].Partition != out[j].Partition {
					return out[i].Partition < out[j].Partition
				}
				return out[i].Offset < out[j].Offset
			})
			return out, nil
		}
		fetches := poll(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s of %s: %d partitions short of their end offsets %v (read up to %v): %w", what, topic, remaining, want, next, ctx.Err())
		}
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				log.Warn(what+" fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset < want[r.Partition] && !r.Attrs.IsControl() {
				out = append(out, Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value), Key: string(r.Key)})
			}
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
		})
		if floor != nil && fetches.NumRecords() == 0 {
			starts, err := floor(ctx)
			if err != nil {
				log.Warn(what+": log start offsets", "err", err)
			}
			for p, s := range starts {
				next[p] = max(next[p], s)
			}
		}
	}
}

// FetchCommitted records the group's committed offsets for topic as one
// Committed op.
func FetchCommitted(ctx context.Context, h *History, adm *kadm.Client, group, topic string) error {
	inv := h.Add(Op{Process: "final", Type: Invoke, F: Committed})
	var resp kadm.OffsetResponses
	var err error
	for range 20 {
		if resp, err = adm.FetchOffsets(ctx, group); err == nil && resp.Error() == nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	done := inv
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		done.Type, done.Error = Fail, err.Error()
		h.Add(done)
		return fmt.Errorf("committed offsets of %s: %w", group, err)
	}
	done.Type, done.Offsets = OK, map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			done.Offsets[o.Partition] = o.At
		}
	})
	h.Add(done)
	return nil
}
