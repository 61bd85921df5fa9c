package bench

// The cluster benchmark: the metadata path of a three-node combined
// cluster (every node broker and controller), Gregor against Apache Kafka,
// each round on fresh clusters started one after the other (gregor, kafka,
// gregor, ...). It times start-up to the first acknowledged produce, how
// long a created topic takes to show on every broker, how many metadata
// commits (topic config changes) the quorum takes per second, and how long
// the cluster is without an active controller after the active one is
// killed with SIGKILL.
//
// Every request is sent by this process, straight to the broker chosen
// (a kgo client seeded with that broker alone, its requests issued on that
// seed), so that client routing and metadata caching never hide which
// broker answered.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClusterConfig is one run of the cluster benchmark.
type ClusterConfig struct {
	Root    string
	Targets []string // "gregor" and/or "kafka", in alternation order
	Rounds  int
	// Creations is how many topics each round creates one after the other
	// to time their visibility.
	Creations int
	// Clients config-changing clients run concurrently for CommitTime;
	// then one client alone for SeqCommitTime.
	Clients       int
	CommitTime    time.Duration
	SeqCommitTime time.Duration
	// Failovers is how many times each round kills the active controller.
	Failovers int
	Log       *slog.Logger
}

// Cluster figure names, in report order. Units are part of the name.
const (
	figCStartup      = "start-up: first process launched to first acknowledged produce (s)"
	figCReady        = "start-up, part: launched to every broker answering and listing all three (s)"
	figCRSS          = "RSS of the three nodes after start-up, summed (MiB)"
	figCCreateP50    = "CreateTopics answer, 3 partitions RF 1 (ms) p50"
	figCCreateP99    = "CreateTopics answer, 3 partitions RF 1 (ms) p99"
	figCVisibleP50   = "CreateTopics answer to topic listed with leaders on every broker (ms) p50"
	figCVisibleP99   = "CreateTopics answer to topic listed with leaders on every broker (ms) p99"
	figCCommits      = "topic config commits/s, %d concurrent clients"
	figCSeqP50       = "topic config commit latency, 1 client (ms) p50"
	figCSeqP99       = "topic config commit latency, 1 client (ms) p99"
	figCFailQuorum   = "failover: kill -9 of the active controller to DescribeQuorum naming a new leader (ms)"
	figCFailCreate   = "failover: kill -9 of the active controller to the first CreateTopics success (ms)"
	clusterPoll      = 20 * time.Millisecond // failover polling
	visibilityPoll   = 5 * time.Millisecond
	metadataTopic    = "__cluster_metadata"
	clusterReadyWait = 3 * time.Minute
)

func clusterFigures(clients int) []string {
	return []string{figCStartup, figCReady, figCRSS, figCCreateP50, figCCreateP99, figCVisibleP50, figCVisibleP99,
		fmt.Sprintf(figCCommits, clients), figCSeqP50, figCSeqP99, figCFailQuorum, figCFailCreate}
}

// ClusterRun is what a cluster benchmark run measured.
type ClusterRun struct {
	Config ClusterConfig
	runInfo
	// Failovers lists every kill, per target, as a line for the report.
	Failovers map[string][]string
}

// runInfo is what a cluster-wide benchmark run records besides its
// figures, for the report's header.
type runInfo struct {
	Rounds  []Round
	Started time.Time
	Elapsed time.Duration
	LoadAvg [2]string
	// RoundLoads is /proc/loadavg as each target's round started ("round
	// 1 gregor: 1.07 2.24 2.42"): the cluster's own processes count too.
	RoundLoads []string
	// Describe is each target's cluster description; Properties is node
	// 1's server.properties of the first cluster started (both targets get
	// the same file, ports aside).
	Describe   map[string]string
	Properties string
}

func newRunInfo() runInfo {
	return runInfo{Started: time.Now(), LoadAvg: [2]string{loadAvg(), ""}, Describe: map[string]string{}}
}

// alternate runs one(round, target) for every round and, within it, every
// target in order, and keeps each Round; it stops early when ctx ends.
// what names the benchmark in log lines.
func (ri *runInfo) alternate(ctx context.Context, log *slog.Logger, what string, targets []string, rounds int, one func(round int, target string) Round) error {
	defer func() { ri.Elapsed, ri.LoadAvg[1] = time.Since(ri.Started), loadAvg() }()
	for round := 1; round <= rounds; round++ {
		for _, t := range targets {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			load := loadAvg()
			ri.RoundLoads = append(ri.RoundLoads, fmt.Sprintf("round %d %s: %s", round, t, load))
			log.Info(what+" round", "round", round, "target", t, "load", load)
			rd := one(round, t)
			for _, e := range rd.Errors {
				log.Warn(what+" error", "round", round, "target", t, "err", e)
			}
			log.Info(what+" round done", "round", round, "target", t, "figures", rd.Figures)
			ri.Rounds = append(ri.Rounds, rd)
		}
	}
	return nil
}

// describeSingleNodes describes the single nodes integration.StartNode
// starts for each of targets.
func (ri *runInfo) describeSingleNodes(targets []string) {
	for _, t := range targets {
		if t == "kafka" {
			ri.Describe[t] = "Apache Kafka " + integration.KafkaVersion + " (kafka_2.13 from Maven Central), `-Xms1G -Xmx1G` and kafka-server-start.sh's G1 flags"
		} else {
			ri.Describe[t] = "`./cmd/gregor` built from this commit"
		}
	}
}

// noteCluster records c's description and, for the first cluster, node
// 1's properties.
func (ri *runInfo) noteCluster(target string, c *integration.Cluster) {
	ri.Describe[target] = c.Describe
	if ri.Properties == "" {
		if b, err := os.ReadFile(filepath.Join(c.Nodes[0].Dir, "server.properties")); err == nil {
			ri.Properties = string(b)
		}
	}
}

// prepareClusterBench empties the benchmark's work directory
// (bench/.work/<name>) and fetches Kafka when it is a target.
func prepareClusterBench(ctx context.Context, root, name string, targets []string) (*integration.Tools, string, error) {
	tools := integration.NewTools(root)
	workDir := filepath.Join(root, "bench", ".work", name)
	_ = os.RemoveAll(workDir)
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, "", err
	}
	if slices.Contains(targets, "kafka") {
		if _, err := tools.MavenLibs(ctx, integration.SetKafka); err != nil {
			return nil, "", err
		}
	}
	return tools, workDir, nil
}

// loadBench is what a benchmark that runs bench/loadgen prepares: the
// tools, its work directory, the load generator built and the payload
// file written (with its description for the report).
type loadBench struct {
	tools                    *integration.Tools
	workDir                  string
	loadgen                  string
	payloadFile, payloadDesc string
}

// prepareLoadBench is prepareClusterBench, then the load generator and
// its payloads.
func prepareLoadBench(ctx context.Context, root, name string, targets []string) (loadBench, error) {
	tools, workDir, err := prepareClusterBench(ctx, root, name, targets)
	if err != nil {
		return loadBench{}, err
	}
	lb := loadBench{tools: tools, workDir: workDir, payloadFile: filepath.Join(workDir, "payloads.txt")}
	if lb.loadgen, err = buildLoadgen(ctx, tools); err != nil {
		return loadBench{}, err
	}
	if lb.payloadDesc, err = writePayloads(ctx, lb.loadgen, lb.payloadFile); err != nil {
		return loadBench{}, err
	}
	return lb, nil
}

// ExecuteCluster runs the cluster benchmark. It returns what it measured
// even when ctx ends early.
func ExecuteCluster(ctx context.Context, cfg ClusterConfig) (*ClusterRun, error) {
	tools, workDir, err := prepareClusterBench(ctx, cfg.Root, "cluster", cfg.Targets)
	if err != nil {
		return nil, err
	}
	run := &ClusterRun{Config: cfg, runInfo: newRunInfo(), Failovers: map[string][]string{}}
	err = run.alternate(ctx, cfg.Log, "cluster bench", cfg.Targets, cfg.Rounds, func(round int, t string) Round {
		cr := &clusterRound{cfg: cfg, run: run, rd: Round{Target: t, Round: round, Figures: map[string]float64{}}}
		cr.execute(ctx, tools, filepath.Join(workDir, fmt.Sprintf("%s-round%d", t, round)))
		return cr.rd
	})
	return run, err
}

// clusterRound is one target's round: one fresh cluster, every workload.
type clusterRound struct {
	cfg ClusterConfig
	run *ClusterRun
	rd  Round
	brokerClients
}

// brokerClients talks to each broker of a cluster directly: one client per
// broker id, seeded with that broker alone, made on first use and closed
// by close. Used from the round's goroutine; goroutines that poll in
// parallel get their clients made first (prepareClients).
type brokerClients struct {
	c       *integration.Cluster
	clients map[int]*kgo.Client
}

func newBrokerClients(c *integration.Cluster) brokerClients {
	return brokerClients{c: c, clients: map[int]*kgo.Client{}}
}

func (bc *brokerClients) close() {
	for _, cl := range bc.clients {
		cl.Close()
	}
}

// forget drops broker id's client: after a restart its connection is gone,
// and the next client dials the new process.
func (bc *brokerClients) forget(id int) {
	if cl := bc.clients[id]; cl != nil {
		cl.Close()
		delete(bc.clients, id)
	}
}

func (cr *clusterRound) fail(format string, args ...any) {
	cr.rd.Errors = append(cr.rd.Errors, oneLine(fmt.Sprintf(format, args...)))
}

func (cr *clusterRound) execute(ctx context.Context, tools *integration.Tools, dir string) {
	c, err := integration.StartCluster(ctx, tools, cr.rd.Target, integration.Combined3, dir, clusterReadyWait)
	if err != nil {
		cr.fail("cluster did not start: %v", err)
		return
	}
	ready := time.Now()
	cr.brokerClients = newBrokerClients(c)
	defer func() {
		cr.close()
		if err := c.Stop(); err != nil {
			cr.fail("stopping the cluster: %v", err)
		}
	}()
	cr.run.noteCluster(cr.rd.Target, c)
	cr.rd.Figures[figCReady] = ready.Sub(c.Launched).Seconds()
	if acked, err := cr.firstProduce(ctx); err != nil {
		cr.fail("start-up: %v", err)
	} else {
		cr.rd.Figures[figCStartup] = acked.Sub(c.Launched).Seconds()
	}
	var rss float64
	for _, n := range c.Nodes {
		if v, err := rssMiB(n.Pid()); err == nil {
			rss += v
		}
	}
	cr.rd.Figures[figCRSS] = rss

	cr.visibility(ctx)
	cr.commits(ctx)
	cr.failovers(ctx)
	if err := c.Alive(); err != nil {
		cr.fail("at the end of the round: %v", err)
	}
}

// client is the client that talks to broker id alone.
func (bc *brokerClients) client(id int) (*kgo.Client, error) {
	if cl := bc.clients[id]; cl != nil {
		return cl, nil
	}
	n := bc.c.Node(id)
	if n == nil {
		return nil, fmt.Errorf("no node %d", id)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.DialTimeout(time.Second))
	if err != nil {
		return nil, fmt.Errorf("client for broker %d: %w", id, err)
	}
	bc.clients[id] = cl
	return cl, nil
}

// broker is broker id as its own client's seed: requests issued on it
// go to that broker alone.
func (bc *brokerClients) broker(id int) (*kgo.Broker, error) {
	cl, err := bc.client(id)
	if err != nil {
		return nil, err
	}
	return cl.SeedBrokers()[0], nil
}

// request sends req to broker id and waits at most timeout for the answer.
func (bc *brokerClients) request(ctx context.Context, id int, req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	b, err := bc.broker(id)
	if err != nil {
		return nil, err
	}
	return requestOn(ctx, b, req, timeout)
}

func requestOn(ctx context.Context, b *kgo.Broker, req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return b.Request(rctx, req)
}

func (bc *brokerClients) brokerIDs() []int {
	var ids []int
	for _, b := range bc.c.Brokers() {
		ids = append(ids, b.ID)
	}
	return ids
}

// prepareClients makes every broker's client before goroutines share the
// map (client itself is not safe for concurrent use).
func (bc *brokerClients) prepareClients() error {
	for _, id := range bc.brokerIDs() {
		if _, err := bc.client(id); err != nil {
			return err
		}
	}
	return nil
}

// rf1 is a topic of the given partitions, replication factor 1, default
// configs.
func rf1(topic string, partitions int32) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, partitions, 1
	return t
}

func createTopicRequest(t kmsg.CreateTopicsRequestTopic, timeout time.Duration) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(timeout / time.Millisecond)
	req.Topics = append(req.Topics, t)
	return req
}

// createTopic asks broker id to create topic t; an error from the answer
// is the topic's error code. alreadyOK counts TOPIC_ALREADY_EXISTS as
// success (an earlier attempt that timed out may have been committed).
func (bc *brokerClients) createTopic(ctx context.Context, id int, t kmsg.CreateTopicsRequestTopic, timeout time.Duration, alreadyOK bool) error {
	b, err := bc.broker(id)
	if err != nil {
		return err
	}
	return createTopicOn(ctx, b, id, t, timeout, alreadyOK)
}

// createTopicOn is createTopic on b, which is broker id.
func createTopicOn(ctx context.Context, b *kgo.Broker, id int, t kmsg.CreateTopicsRequestTopic, timeout time.Duration, alreadyOK bool) error {
	topic := t.Topic
	resp, err := requestOn(ctx, b, createTopicRequest(t, timeout), timeout+time.Second)
	if err != nil {
		return fmt.Errorf("CreateTopics %s through broker %d: %w", topic, id, err)
	}
	r := resp.(*kmsg.CreateTopicsResponse)
	if len(r.Topics) != 1 {
		return fmt.Errorf("CreateTopics %s through broker %d: %d topics in the answer", topic, id, len(r.Topics))
	}
	code := r.Topics[0].ErrorCode
	if code == 0 || alreadyOK && code == kerr.TopicAlreadyExists.Code {
		return nil
	}
	return fmt.Errorf("CreateTopics %s through broker %d: %w", topic, id, kerr.ErrorForCode(code))
}

// metadata is broker id's Metadata answer for topics (every topic when
// none is named), with auto-creation off.
func (bc *brokerClients) metadata(ctx context.Context, id int, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	req.AllowAutoTopicCreation = false
	resp, err := bc.request(ctx, id, req, 2*time.Second)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// listsWithLeaders reports whether broker id's Metadata lists topic with
// the given number of partitions, each with a leader.
func (bc *brokerClients) listsWithLeaders(ctx context.Context, id int, topic string, partitions int) (bool, error) {
	resp, err := bc.metadata(ctx, id, topic)
	if err != nil {
		return false, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic || t.ErrorCode != 0 || len(t.Partitions) != partitions {
			continue
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 {
				return false, nil
			}
		}
		return true, nil
	}
	return false, nil
}

// visibleEverywhere polls every broker at once until each lists topic with
// a leader for every partition, and returns when the last one did.
func (cr *clusterRound) visibleEverywhere(ctx context.Context, topic string, partitions int, limit time.Duration) (time.Time, error) {
	if err := cr.prepareClients(); err != nil {
		return time.Time{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	ids := cr.brokerIDs()
	seen := make([]time.Time, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last error
			for {
				ok, err := cr.listsWithLeaders(ctx, id, topic, partitions)
				if ok {
					seen[i] = time.Now()
					return
				}
				if err != nil {
					last = err
				}
				select {
				case <-ctx.Done():
					errs[i] = fmt.Errorf("broker %d never listed %s with leaders (last error: %v)", id, topic, last)
					return
				case <-time.After(visibilityPoll):
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return time.Time{}, err
	}
	return slices.MaxFunc(seen, func(a, b time.Time) int { return a.Compare(b) }), nil
}

// firstProduce creates a one-partition topic through the first broker,
// right after the cluster answered, and produces one record (acks=all,
// idempotent: franz-go's defaults) until it is acknowledged.
func (cr *clusterRound) firstProduce(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	const topic = "bench-first"
	first := cr.brokerIDs()[0]
	for {
		err := cr.createTopic(ctx, first, rf1(topic, 1), 10*time.Second, true)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return time.Time{}, err
		}
		time.Sleep(10 * time.Millisecond)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(cr.c.Bootstrap(), ",")...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }),
		kgo.MetadataMinAge(10*time.Millisecond), kgo.DialTimeout(time.Second))
	if err != nil {
		return time.Time{}, err
	}
	defer cl.Close()
	for {
		err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr()
		if err == nil {
			return time.Now(), nil
		}
		if ctx.Err() != nil {
			return time.Time{}, fmt.Errorf("no produce acknowledged: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// visibility creates topics one after the other through the first broker
// and times each answer and how long after it every broker listed the
// topic with leaders.
func (cr *clusterRound) visibility(ctx context.Context) {
	first := cr.brokerIDs()[0]
	var answer, visible []float64
	for i := range cr.cfg.Creations {
		topic := fmt.Sprintf("bench-visible-%d", i)
		t0 := time.Now()
		if err := cr.createTopic(ctx, first, rf1(topic, 3), 30*time.Second, false); err != nil {
			cr.fail("visibility: %v", err)
			return
		}
		t1 := time.Now()
		last, err := cr.visibleEverywhere(ctx, topic, 3, time.Minute)
		if err != nil {
			cr.fail("visibility: %v", err)
			return
		}
		answer = append(answer, ms(t1.Sub(t0)))
		visible = append(visible, ms(last.Sub(t1)))
	}
	cr.rd.Figures[figCCreateP50], cr.rd.Figures[figCCreateP99] = median(answer), percentile(answer, 99)
	cr.rd.Figures[figCVisibleP50], cr.rd.Figures[figCVisibleP99] = median(visible), percentile(visible, 99)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile is the nearest-rank p-th percentile of vs (with 20 samples,
// p99 is the largest).
func percentile(vs []float64, p float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func alterConfigRequest(topic, key, value string) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeTopic
	res.ResourceName = topic
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = key, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	return req
}

// alterConfig sets topic's retention.ms through broker id and waits for
// the answer.
func (cr *clusterRound) alterConfig(ctx context.Context, id int, topic string, retentionMs int64) error {
	b, err := cr.broker(id)
	if err != nil {
		return err
	}
	return alterConfigOn(ctx, b, topic, retentionMs)
}

func alterConfigOn(ctx context.Context, b *kgo.Broker, topic string, retentionMs int64) error {
	resp, err := requestOn(ctx, b, alterConfigRequest(topic, "retention.ms", fmt.Sprint(retentionMs)), 30*time.Second)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.IncrementalAlterConfigsResponse)
	if len(r.Resources) != 1 {
		return fmt.Errorf("IncrementalAlterConfigs: %d resources in the answer", len(r.Resources))
	}
	return kerr.ErrorForCode(r.Resources[0].ErrorCode)
}

// commits changes one topic's retention.ms as fast as the quorum takes it:
// Clients clients at once, spread over the brokers, each waiting for its
// answer; then one client alone, timing each change.
func (cr *clusterRound) commits(ctx context.Context) {
	const topic = "bench-configs"
	ids := cr.brokerIDs()
	if err := cr.createTopic(ctx, ids[0], rf1(topic, 1), 30*time.Second, false); err != nil {
		cr.fail("commits: %v", err)
		return
	}
	if _, err := cr.visibleEverywhere(ctx, topic, 1, time.Minute); err != nil {
		cr.fail("commits: %v", err)
		return
	}
	// Every value differs from the one before, so each request is a
	// change that must be committed.
	var next atomic.Int64
	next.Store(7 * 24 * 3600 * 1000)
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	deadline := start.Add(cr.cfg.CommitTime)
	var wg sync.WaitGroup
	for i := range cr.cfg.Clients {
		// One client per goroutine: several clients per broker, as
		// separate applications would be.
		n := cr.c.Node(ids[i%len(ids)])
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.DialTimeout(time.Second))
		if err != nil {
			cr.fail("commits: %v", err)
			return
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if err := alterConfigOn(ctx, cl.SeedBrokers()[0], topic, next.Add(1)); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if f := failed.Load(); f > 0 {
		cr.fail("commits: %d of %d config changes failed (first: %v)", f, f+ok.Load(), firstErr.Load())
	}
	cr.rd.Figures[fmt.Sprintf(figCCommits, cr.cfg.Clients)] = float64(ok.Load()) / elapsed.Seconds()

	var lat []float64
	seqEnd := time.Now().Add(cr.cfg.SeqCommitTime)
	for time.Now().Before(seqEnd) && ctx.Err() == nil {
		t0 := time.Now()
		if err := cr.alterConfig(ctx, ids[0], topic, next.Add(1)); err != nil {
			cr.fail("sequential commits: %v", err)
			return
		}
		lat = append(lat, ms(time.Since(t0)))
	}
	cr.rd.Figures[figCSeqP50], cr.rd.Figures[figCSeqP99] = median(lat), percentile(lat, 99)
}

// quorumLeader asks broker id for the quorum's leader and epoch, and the
// voters' log end offsets with the high watermark.
func (bc *brokerClients) quorumLeader(ctx context.Context, id int) (leader, epoch int32, hw int64, voterLEOs map[int32]int64, err error) {
	b, err := bc.broker(id)
	if err != nil {
		return 0, 0, 0, nil, err
	}
	return quorumLeaderOn(ctx, b)
}

func quorumLeaderOn(ctx context.Context, b *kgo.Broker) (leader, epoch int32, hw int64, voterLEOs map[int32]int64, err error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = metadataTopic
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := requestOn(ctx, b, req, 10*time.Second)
	if err != nil {
		return 0, 0, 0, nil, err
	}
	r := resp.(*kmsg.DescribeQuorumResponse)
	if r.ErrorCode != 0 {
		return 0, 0, 0, nil, fmt.Errorf("DescribeQuorum: %w", kerr.ErrorForCode(r.ErrorCode))
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return 0, 0, 0, nil, errors.New("DescribeQuorum: no partition in the answer")
	}
	p := r.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return 0, 0, 0, nil, fmt.Errorf("DescribeQuorum: %w", kerr.ErrorForCode(p.ErrorCode))
	}
	voterLEOs = map[int32]int64{}
	for _, v := range p.CurrentVoters {
		voterLEOs[v.ReplicaID] = v.LogEndOffset
	}
	return p.LeaderID, p.LeaderEpoch, p.HighWatermark, voterLEOs, nil
}

// failovers kills the active controller Failovers times, timing how long
// until a surviving broker's DescribeQuorum names a new leader at a higher
// epoch and until a CreateTopics through a surviving broker succeeds,
// polling every 20 ms; the killed node is restarted, and has caught up,
// before the next kill.
func (cr *clusterRound) failovers(ctx context.Context) {
	if err := cr.prepareClients(); err != nil {
		cr.fail("failover: %v", err)
		return
	}
	var quorumMs, createMs []float64
	for k := range cr.cfg.Failovers {
		ids := cr.brokerIDs()
		leader, epoch, _, _, err := cr.quorumLeader(ctx, ids[0])
		if err != nil {
			cr.fail("failover %d: finding the active controller: %v", k+1, err)
			return
		}
		var survivors []int
		for _, id := range ids {
			if id != int(leader) {
				survivors = append(survivors, id)
			}
		}
		if len(survivors) != len(ids)-1 {
			cr.fail("failover %d: the active controller %d is not one of the brokers %v", k+1, leader, ids)
			return
		}
		// The pollers' connections are open before the kill.
		for _, id := range survivors {
			if _, err := cr.listsWithLeaders(ctx, id, "bench-first", 1); err != nil {
				cr.fail("failover %d: warming broker %d: %v", k+1, id, err)
				return
			}
		}
		quorumVia, createVia := survivors[0], survivors[len(survivors)-1]
		topic := fmt.Sprintf("bench-failover-%d-%d", cr.rd.Round, k)

		killed := time.Now()
		if err := cr.c.Kill(int(leader)); err != nil {
			cr.fail("failover %d: killing node %d: %v", k+1, leader, err)
			return
		}
		var quorumAt, createAt time.Time
		var newLeader, newEpoch int32
		var quorumErr, createErr error
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		var wg sync.WaitGroup
		wg.Add(2)
		var mu sync.Mutex // guards newLeader, newEpoch
		go func() {
			defer wg.Done()
			quorumAt, quorumErr = cr.firstSuccess(pctx, quorumVia, func(ctx context.Context, b *kgo.Broker) error {
				l, e, _, _, err := quorumLeaderOn(ctx, b)
				if err != nil {
					return err
				}
				if l == leader || l < 0 || e <= epoch {
					return fmt.Errorf("leader %d at epoch %d", l, e)
				}
				mu.Lock()
				newLeader, newEpoch = l, e
				mu.Unlock()
				return nil
			})
		}()
		go func() {
			defer wg.Done()
			createAt, createErr = cr.firstSuccess(pctx, createVia, func(ctx context.Context, b *kgo.Broker) error {
				return createTopicOn(ctx, b, createVia, rf1(topic, 1), 5*time.Second, true)
			})
		}()
		wg.Wait()
		cancel()
		line := fmt.Sprintf("round %d, kill %d: node %d (leader at epoch %d) killed; ", cr.rd.Round, k+1, leader, epoch)
		if quorumErr != nil {
			cr.fail("failover %d: no new leader through broker %d: %v", k+1, quorumVia, quorumErr)
			line += "no new leader; "
		} else {
			quorumMs = append(quorumMs, ms(quorumAt.Sub(killed)))
			line += fmt.Sprintf("broker %d named leader %d at epoch %d after %.0f ms; ", quorumVia, newLeader, newEpoch, ms(quorumAt.Sub(killed)))
		}
		if createErr != nil {
			cr.fail("failover %d: no CreateTopics success through broker %d: %v", k+1, createVia, createErr)
			line += "no CreateTopics success"
		} else {
			createMs = append(createMs, ms(createAt.Sub(killed)))
			line += fmt.Sprintf("CreateTopics through broker %d succeeded after %.0f ms", createVia, ms(createAt.Sub(killed)))
		}
		cr.run.Failovers[cr.rd.Target] = append(cr.run.Failovers[cr.rd.Target], line)
		if err := cr.rejoin(ctx, int(leader), survivors[0]); err != nil {
			cr.fail("failover %d: %v", k+1, err)
			break
		}
	}
	if len(quorumMs) > 0 {
		cr.rd.Figures[figCFailQuorum] = median(quorumMs)
	}
	if len(createMs) > 0 {
		cr.rd.Figures[figCFailCreate] = median(createMs)
	}
}

// maxAttemptsInFlight bounds firstSuccess's concurrent attempts.
const maxAttemptsInFlight = 64

// firstSuccess starts an attempt of try on broker id every 20 ms, each on
// a connection of its own (a broker answers a connection's requests in
// order, so one parked request would hold back the rest), without waiting
// for earlier ones to end, until one succeeds; it returns when the first
// success was answered. A request that the broker parks until a controller
// answers thus counts from when it is answered, and one sent later that is
// answered sooner counts from then.
func (cr *clusterRound) firstSuccess(ctx context.Context, id int, try func(ctx context.Context, b *kgo.Broker) error) (time.Time, error) {
	addr := cr.c.Node(id).Addr()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // runs after cancel, below
	defer cancel()
	won := make(chan time.Time, 1)
	var lastErr atomic.Value
	inFlight := make(chan struct{}, maxAttemptsInFlight)
	tick := time.NewTicker(clusterPoll)
	defer tick.Stop()
	for {
		select {
		case inFlight <- struct{}{}:
			wg.Add(1)
			go func() {
				defer func() { <-inFlight; wg.Done() }()
				cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(time.Second))
				if err != nil {
					lastErr.Store(err.Error())
					return
				}
				defer cl.Close()
				if err := try(ctx, cl.SeedBrokers()[0]); err != nil {
					lastErr.Store(err.Error())
					return
				}
				select {
				case won <- time.Now():
				default: // another attempt won first
				}
			}()
		default: // at the bound: wait for the next tick
		}
		select {
		case at := <-won:
			return at, nil
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%w (last: %v)", ctx.Err(), lastErr.Load())
		case <-tick.C:
		}
	}
}

// pollUntil calls try until it returns nil, 20 ms after each failure, and
// returns when it succeeded.
func pollUntil(ctx context.Context, try func() error) (time.Time, error) {
	for {
		err := try()
		if err == nil {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(clusterPoll):
		}
	}
}

// rejoin restarts node id and waits until it is back in the cluster
// (waitRejoined).
func (cr *clusterRound) rejoin(ctx context.Context, id, via int) error {
	if err := cr.c.Restart(ctx, id); err != nil {
		return fmt.Errorf("restarting node %d: %w", id, err)
	}
	cr.forget(id)
	return cr.waitRejoined(ctx, id, via)
}

// waitRejoined waits, after node id was restarted, until the quorum's
// leader (asked through broker via) reports every voter at or past the
// high watermark it had when the node came back, and every broker lists
// all brokers; then lets the cluster settle.
func (bc *brokerClients) waitRejoined(ctx context.Context, id, via int) error {
	if err := bc.prepareClients(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var target int64 = -1
	_, err := pollUntil(ctx, func() error {
		_, _, hw, leos, err := bc.quorumLeader(ctx, via)
		if err != nil {
			return err
		}
		if target < 0 {
			target = hw
		}
		for v, leo := range leos {
			if leo < target {
				return fmt.Errorf("voter %d at %d, behind %d", v, leo, target)
			}
		}
		if len(leos) != len(bc.c.Controllers()) {
			return fmt.Errorf("%d voters", len(leos))
		}
		for _, b := range bc.brokerIDs() {
			resp, err := bc.request(ctx, b, kmsg.NewPtrMetadataRequest(), 2*time.Second)
			if err != nil {
				return err
			}
			if n := len(resp.(*kmsg.MetadataResponse).Brokers); n != len(bc.brokerIDs()) {
				return fmt.Errorf("broker %d lists %d brokers", b, n)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("node %d did not rejoin: %w", id, err)
	}
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
	}
	return nil
}
