package bench

// The replication benchmark: the data path of a three-node combined
// cluster when every partition has three replicas, Gregor against Apache
// Kafka, each round on fresh clusters started one after the other (gregor,
// kafka, gregor, ...). Every topic has replication factor 3 and
// min.insync.replicas 2. It measures produce throughput (bench/loadgen, as
// the single-node benchmark runs it) on 1, 6 and 64 partitions with
// acks=1 and acks=all, the brokers' CPU per GB produced and a follower's
// CPU per GB it replicated, produce latency at half the round's measured
// acks=all maximum, end-to-end latency, the time from kill -9 of a
// partition's leader to the first acknowledged write on its new leader,
// how long the killed broker takes, once restarted on its data, to be
// back in the ISR of every partition it holds, and the catching up of a
// broker that was stopped while a backlog was written, with a producer
// loading the leaders throughout.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ReplicationConfig is one run of the replication benchmark.
type ReplicationConfig struct {
	Root    string
	Targets []string // "gregor" and/or "kafka", in alternation order
	Rounds  int
	// Records is how many records each throughput workload produces.
	Records int
	// HalfTime is how long the produce-latency workload runs at half the
	// round's acks=all, 6-partition records/s.
	HalfTime time.Duration
	// E2ERate records/s for E2ETime make the latency workload.
	E2ERate int
	E2ETime time.Duration
	// LeaderKills is how many partition leaders each round kills.
	LeaderKills int
	// WriteRate records/s are written to the killed leader's topic from
	// before the kill until the broker is back (or RejoinLimit passed).
	WriteRate int
	// Down is how long after the failover (the first acknowledgement
	// after the kill) the broker is restarted.
	Down time.Duration
	// RejoinLimit bounds the wait, from the restart, for the broker to be
	// back in every ISR.
	RejoinLimit time.Duration
	// CatchupBytes of payload are written while one broker is stopped;
	// 0 skips the catch-up workload.
	CatchupBytes int64
	// CatchupRate records/s load the leaders for CatchupBefore before the
	// stopped broker's restart, and on until it is back in every ISR.
	CatchupRate   int
	CatchupBefore time.Duration
	// CatchupLimit bounds the backlog's writing, and the wait, from the
	// restart, for the broker to be back in every ISR.
	CatchupLimit time.Duration
	Log          *slog.Logger
}

// The workload every replicated topic has, as the issue fixes it.
const (
	replPartitions = 6
	replFactor     = 3
	replMinISR     = 2
	// replFailoverLimit bounds the wait for the first acknowledgement
	// after a kill.
	replFailoverLimit = time.Minute
)

// replThroughputPartitions and replThroughputAcks make the throughput
// workloads of a round, run in this order (partitions outer).
var (
	replThroughputPartitions = []int{1, replPartitions, 64}
	replThroughputAcks       = []string{"1", "all"}
)

// Replication figure names, in report order. Units are part of the name.
const (
	figRProduceRecords = "produce 1 KiB lz4 acks=all, 6 partitions RF 3, franz-go records/s"
	figRProduceMB      = "produce 1 KiB lz4 acks=all, 6 partitions RF 3, franz-go MB/s"
	figRCPUAll         = "CPU of the three brokers per GB of payload produced, %s (CPU s/GB)"
	figRCPUFollower    = "follower fetch: CPU of a follower broker per GB of payload it replicated, acks=all, 6 partitions RF 3 all led by one broker (CPU s/GB)"
	figRCPULeader      = "follower fetch run: CPU of its leader broker per GB of payload produced (CPU s/GB)"
	figRHalf           = "produce latency (send to acknowledgement) at half the round's acks=all 6-partition records/s, acks=all, linger 0, 6 partitions RF 3, franz-go"
	figRE2E            = "end-to-end latency at %d records/s, acks=all, 6 partitions RF 3, franz-go (ms)"
	figRFailMetadata   = "failover: kill -9 of a partition's leader to a surviving broker's Metadata naming a new leader (ms)"
	figRFailAck        = "failover: kill -9 of a partition's leader to the first acknowledged acks=all write of a record sent after the kill (ms)"
	figRRestart        = "rejoin, part: restart of the killed broker to its answering ApiVersions (s)"
	figRRejoin         = "rejoin: restart of the killed broker to its return to the ISR of every partition it holds (s)"
	figRCatchRejoin    = "catch-up: restart of a broker %s of payload behind to its return to the ISR of every partition it holds (s)"
	figRCatchAnswer    = "catch-up, part: restart to its answering ApiVersions (s)"
	figRCatchMB        = "catch-up: log the restarted broker fetched per second, from its ApiVersions answer to its return to every ISR (MiB/s)"
	figRCatchLatency   = "catch-up: produce latency of the %d records/s acks=all load, %s (ms)"
)

// replProduceName names a throughput workload (without its unit).
func replProduceName(acks string, partitions int) string {
	unit := "partitions"
	if partitions == 1 {
		unit = "partition"
	}
	return fmt.Sprintf("produce 1 KiB lz4 acks=%s, %d %s RF 3, franz-go", acks, partitions, unit)
}

// cpuAllFigure is the three brokers' CPU per GB of the acks=all
// throughput workload on partitions partitions.
func cpuAllFigure(partitions int) string {
	return fmt.Sprintf(figRCPUAll, strings.TrimPrefix(strings.TrimSuffix(replProduceName("all", partitions), ", franz-go"), "produce 1 KiB lz4 "))
}

func e2eFigure(rate int) string { return fmt.Sprintf(figRE2E, rate) }

func catchRejoinFigure(catchupBytes int64) string {
	return fmt.Sprintf(figRCatchRejoin, fmtSize(catchupBytes))
}

// catchLatencyFigure names the catch-up load's latency before (when is
// "before the restart") or during the catch-up, without its quantile.
func catchLatencyFigure(rate int, when string) string {
	return fmt.Sprintf(figRCatchLatency, rate, when)
}

const (
	catchBefore = "before the restart"
	catchDuring = "during the catch-up (restart to return)"
)

var latencyQuantiles = []string{"p50", "p99", "p99.9"}

func replicationFigures(cfg ReplicationConfig) []string {
	var figs []string
	for _, parts := range replThroughputPartitions {
		for _, acks := range replThroughputAcks {
			figs = append(figs, replProduceName(acks, parts)+" records/s", replProduceName(acks, parts)+" MB/s")
		}
	}
	for _, parts := range replThroughputPartitions {
		figs = append(figs, cpuAllFigure(parts))
	}
	figs = append(figs, figRCPUFollower, figRCPULeader, figRHalf+": records/s asked", figRHalf+": records/s sent")
	for _, q := range latencyQuantiles {
		figs = append(figs, figRHalf+" (ms) "+q)
	}
	e2e := e2eFigure(cfg.E2ERate)
	figs = append(figs, e2e+" p50", e2e+" p99", e2e+" p99.9", figRFailMetadata, figRFailAck, figRRestart, figRRejoin)
	if cfg.CatchupBytes > 0 {
		figs = append(figs, catchRejoinFigure(cfg.CatchupBytes), figRCatchAnswer, figRCatchMB)
		for _, when := range []string{catchBefore, catchDuring} {
			for _, q := range latencyQuantiles {
				figs = append(figs, catchLatencyFigure(cfg.CatchupRate, when)+" "+q)
			}
		}
	}
	return figs
}

// ReplicationRun is what a replication benchmark run measured.
type ReplicationRun struct {
	Config ReplicationConfig
	runInfo
	Payload string
	// DiskFree is the free space, at the start, of the file system the
	// clusters' directories are on ("" if unknown).
	DiskFree string
	// Commands are the load generator's command lines of the first
	// round, "workload\n    command line".
	Commands []string
	// Kills lists every leader kill, per target, as a line for the report.
	Kills map[string][]string
	// Details lists, per target, what each round's CPU, half-rate latency
	// and catch-up workloads saw beside their figures, a line each.
	Details map[string][]string
	// Restarts counts, per target, the killed brokers restarted, and
	// NotRejoined those of them not back in every ISR within RejoinLimit.
	Restarts    map[string]int
	NotRejoined map[string]int
}

// ExecuteReplication runs the replication benchmark. It returns what it
// measured even when ctx ends early.
func ExecuteReplication(ctx context.Context, cfg ReplicationConfig) (*ReplicationRun, error) {
	lb, err := prepareLoadBench(ctx, cfg.Root, "replication", cfg.Targets)
	if err != nil {
		return nil, err
	}
	payloads, err := readPayloadLines(lb.payloadFile)
	if err != nil {
		return nil, err
	}
	run := &ReplicationRun{Config: cfg, runInfo: newRunInfo(), Payload: lb.payloadDesc, DiskFree: diskFree(lb.workDir),
		Kills: map[string][]string{}, Details: map[string][]string{}, Restarts: map[string]int{}, NotRejoined: map[string]int{}}
	var commands commandLog
	err = run.alternate(ctx, cfg.Log, "replication bench", cfg.Targets, cfg.Rounds, func(round int, t string) Round {
		rr := &replRound{cfg: cfg, run: run, commands: &commands, loadgen: lb.loadgen, payloadFile: lb.payloadFile, payloads: payloads,
			rd: Round{Target: t, Round: round, Figures: map[string]float64{}}}
		rr.execute(ctx, lb.tools, filepath.Join(lb.workDir, fmt.Sprintf("%s-round%d", t, round)))
		return rr.rd
	})
	run.Commands = commands.lines
	return run, err
}

// readPayloadLines reads loadgen's payload file: one payload a line.
func readPayloadLines(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading payloads: %w", err)
	}
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no payloads in %s", path)
	}
	return out, nil
}

// replRound is one target's round: one fresh cluster, every workload.
type replRound struct {
	cfg         ReplicationConfig
	run         *ReplicationRun
	commands    *commandLog
	loadgen     string
	payloadFile string
	payloads    [][]byte
	rd          Round
	// maxAll is the round's acks=all, 6-partition records/s (0 if that
	// workload failed): the half-rate latency workload runs at half of it.
	maxAll float64
	brokerClients
}

func (rr *replRound) fail(format string, args ...any) {
	rr.rd.Errors = append(rr.rd.Errors, oneLine(fmt.Sprintf(format, args...)))
}

func (rr *replRound) execute(ctx context.Context, tools *integration.Tools, dir string) {
	c, err := integration.StartCluster(ctx, tools, rr.rd.Target, integration.Combined3, dir, clusterReadyWait)
	if err != nil {
		rr.fail("cluster did not start: %v", err)
		return
	}
	rr.brokerClients = newBrokerClients(c)
	defer func() {
		rr.close()
		if err := c.Stop(); err != nil {
			rr.fail("stopping the cluster: %v", err)
		}
		// The logs go, node.log and the properties stay: a round's
		// backlog is several GiB on each node.
		for _, n := range c.Nodes {
			if err := os.RemoveAll(n.LogDir); err != nil {
				rr.fail("removing node %d's log directory: %v", n.ID, err)
			}
		}
	}()
	rr.run.noteCluster(rr.rd.Target, c)

	rr.throughputs(ctx)
	rr.followerCPU(ctx)
	rr.halfRateLatency(ctx)
	rr.endToEnd(ctx)
	rr.leaderKills(ctx)
	rr.catchUp(ctx)
	if err := c.Alive(); err != nil {
		rr.fail("at the end of the round: %v", err)
	}
}

// detail adds a line to the report's per-round details of the target.
func (rr *replRound) detail(format string, args ...any) {
	line := fmt.Sprintf("round %d: ", rr.rd.Round) + fmt.Sprintf(format, args...)
	rr.run.Details[rr.rd.Target] = append(rr.run.Details[rr.rd.Target], line)
}

// replicatedTopic is a topic of the benchmark's shape with the given
// number of partitions, placed by the controller.
func replicatedTopic(topic string, partitions int) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, int32(partitions), replFactor
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name, c.Value = "min.insync.replicas", kmsg.StringPtr(strconv.Itoa(replMinISR))
	t.Configs = append(t.Configs, c)
	return t
}

// createReplicated creates topic with the given number of partitions
// (createReady).
func (rr *replRound) createReplicated(ctx context.Context, topic string, partitions int) error {
	return rr.createReady(ctx, replicatedTopic(topic, partitions))
}

// createReady creates t through the first broker and waits until every
// broker lists each of its partitions with a leader and all three
// replicas in the ISR.
func (rr *replRound) createReady(ctx context.Context, t kmsg.CreateTopicsRequestTopic) error {
	partitions := int(t.NumPartitions)
	if partitions < 0 {
		partitions = len(t.ReplicaAssignment)
	}
	ids := rr.brokerIDs()
	if err := rr.createTopic(ctx, ids[0], t, 30*time.Second, false); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := pollUntil(ctx, func() error {
		for _, id := range ids {
			resp, err := rr.metadata(ctx, id, t.Topic)
			if err != nil {
				return err
			}
			if err := fullISR(resp, t.Topic, partitions); err != nil {
				return fmt.Errorf("broker %d: %w", id, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s never had a full ISR on every broker: %w", t.Topic, err)
	}
	return nil
}

// fullISR says why topic, in a Metadata answer, is not yet its partitions
// all listed, led and with all their replicas in the ISR; nil when it is.
func fullISR(resp *kmsg.MetadataResponse, topic string, partitions int) error {
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if t.ErrorCode != 0 || len(t.Partitions) != partitions {
			return fmt.Errorf("%s: error code %d, %d partitions", topic, t.ErrorCode, len(t.Partitions))
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 || len(p.ISR) != len(p.Replicas) || len(p.Replicas) != replFactor {
				return fmt.Errorf("%s-%d: leader %d, replicas %v, ISR %v", topic, p.Partition, p.Leader, p.Replicas, p.ISR)
			}
		}
		return nil
	}
	return fmt.Errorf("%s not listed", topic)
}

// firstAddr is the first broker's client address: the load generator's
// bootstrap (it finds the other brokers from there).
func (rr *replRound) firstAddr() string { return rr.c.Node(rr.brokerIDs()[0]).Addr() }

// endToEnd has bench/loadgen produce at E2ERate for E2ETime to a
// replicated topic and time each record from Produce to a consumer.
func (rr *replRound) endToEnd(ctx context.Context) {
	topic := fmt.Sprintf("bench-repl-e2e-%d", rr.rd.Round)
	if err := rr.createReplicated(ctx, topic, replPartitions); err != nil {
		rr.fail("end-to-end latency: %v", err)
		return
	}
	name := e2eFigure(rr.cfg.E2ERate)
	c := integration.Cmd{Name: rr.loadgen, Args: []string{"e2e", "-bootstrap", rr.firstAddr(), "-topic", topic,
		"-partitions", strconv.Itoa(replPartitions), "-rate", strconv.Itoa(rr.cfg.E2ERate), "-duration", rr.cfg.E2ETime.String(),
		"-payloads", rr.payloadFile}, Timeout: rr.cfg.E2ETime + 2*time.Minute}
	rr.commands.note(strings.TrimSuffix(name, " (ms)"), c)
	lat, err := runJSON[latencyResult](ctx, c)
	if err != nil {
		rr.fail("end-to-end latency: %v", oneLine(err.Error()))
		return
	}
	rr.rd.Figures[name+" p50"] = lat.P50Ms
	rr.rd.Figures[name+" p99"] = lat.P99Ms
	rr.rd.Figures[name+" p99.9"] = lat.P999Ms
}

// leaderKills kills LeaderKills partition leaders, one after the other,
// each on a fresh topic, and keeps the round's median of each figure.
func (rr *replRound) leaderKills(ctx context.Context) {
	var metaMs, ackMs, restartS, rejoinS []float64
	allRejoined := true
	for k := 1; k <= rr.cfg.LeaderKills; k++ {
		o, err := rr.killLeader(ctx, k)
		if o.line != "" {
			rr.run.Kills[rr.rd.Target] = append(rr.run.Kills[rr.rd.Target], o.line)
		}
		if o.metadata > 0 {
			metaMs = append(metaMs, ms(o.metadata))
		}
		if o.ack > 0 {
			ackMs = append(ackMs, ms(o.ack))
		}
		if o.restarted {
			rr.run.Restarts[rr.rd.Target]++
			restartS = append(restartS, o.answered.Seconds())
			if o.rejoined > 0 {
				rejoinS = append(rejoinS, o.rejoined.Seconds())
			} else {
				rr.run.NotRejoined[rr.rd.Target]++
				allRejoined = false
			}
		}
		if err != nil {
			rr.fail("leader kill %d: %v", k, err)
			break
		}
	}
	put := func(fig string, vs []float64) {
		if len(vs) > 0 {
			rr.rd.Figures[fig] = median(vs)
		}
	}
	put(figRFailMetadata, metaMs)
	put(figRFailAck, ackMs)
	put(figRRestart, restartS)
	// A round that had a broker stay out of an ISR has no rejoin figure:
	// a median over the kills that did rejoin would hide it.
	if allRejoined {
		put(figRRejoin, rejoinS)
	}
}

// killOutcome is what one leader kill measured; a zero duration was not
// measured.
type killOutcome struct {
	line      string
	metadata  time.Duration // kill to a survivor's Metadata naming a new leader
	ack       time.Duration // kill to the first ack of a record sent after it
	restarted bool
	answered  time.Duration // restart to ApiVersions answered
	rejoined  time.Duration // restart to back in every ISR; 0 if it was not
}

// killLeader creates a fresh replicated topic, starts writing to it, kills
// the leader of one partition (a broker other than the active
// controller, so that no controller failover is timed with it), times the
// failover, lets writes go on for Down after it, restarts the
// broker on its data and times its return to every ISR; it then waits for
// the node to be back in the quorum before the next kill.
func (rr *replRound) killLeader(ctx context.Context, k int) (killOutcome, error) {
	var o killOutcome
	topic := fmt.Sprintf("bench-repl-failover-%d-%d", rr.rd.Round, k)
	if err := rr.createReplicated(ctx, topic, replPartitions); err != nil {
		return o, err
	}
	if err := rr.prepareClients(); err != nil {
		return o, err
	}
	ids := rr.brokerIDs()
	controller, _, _, _, err := rr.quorumLeader(ctx, ids[0])
	if err != nil {
		return o, fmt.Errorf("finding the active controller: %w", err)
	}
	resp, err := rr.metadata(ctx, ids[0], topic)
	if err != nil {
		return o, err
	}
	victim, led := pickVictim(resp, topic, int32(controller), k)
	if victim < 0 {
		return o, fmt.Errorf("no partition of %s is led by a broker other than the active controller %d", topic, controller)
	}
	partition := led[0]
	var survivors []int
	for _, id := range ids {
		if id != int(victim) {
			survivors = append(survivors, id)
		}
	}
	via := survivors[0]

	var seeds []string
	for _, id := range ids {
		seeds = append(seeds, rr.c.Node(id).Addr())
	}
	w, err := startAckWriter(ctx, seeds, topic, replPartitions, rr.cfg.WriteRate, rr.payloads)
	if err != nil {
		return o, err
	}
	writerClosed := false
	closeWriter := func() error {
		if writerClosed {
			return nil
		}
		writerClosed = true
		return w.close(30 * time.Second)
	}
	defer func() { _ = closeWriter() }()
	if err := w.waitEveryPartition(ctx, 30*time.Second); err != nil {
		return o, err
	}

	killed := time.Now()
	if err := rr.c.Kill(int(victim)); err != nil {
		return o, fmt.Errorf("killing broker %d: %w", victim, err)
	}
	o.line = fmt.Sprintf("round %d, kill %d: broker %d (leader of partitions %s of %s; the active controller is %d) killed",
		rr.rd.Round, k, victim, joinInts(led), topic, controller)

	// A survivor's Metadata is polled beside the writer's acks.
	var metaAt time.Time
	var newLeader int32 = -1
	var metaErr error
	var wg sync.WaitGroup
	wg.Add(1)
	pctx, cancel := context.WithTimeout(ctx, replFailoverLimit)
	go func() {
		defer wg.Done()
		metaAt, metaErr = pollUntil(pctx, func() error {
			resp, err := rr.metadata(pctx, via, topic)
			if err != nil {
				return err
			}
			l := leaderOf(resp, topic, partition)
			if l < 0 || l == victim {
				return fmt.Errorf("leader %d", l)
			}
			newLeader = l
			return nil
		})
	}()
	ackAt, ackErr := w.waitAckAfter(pctx, partition, killed)
	wg.Wait()
	cancel()
	if metaErr != nil {
		o.line += fmt.Sprintf("; broker %d's Metadata named no new leader for partition %d", via, partition)
	} else {
		o.metadata = metaAt.Sub(killed)
		o.line += fmt.Sprintf("; broker %d's Metadata named broker %d leader of partition %d after %.0f ms", via, newLeader, partition, ms(o.metadata))
	}
	if ackErr != nil {
		o.line += "; no record sent after the kill was acknowledged"
		return o, fmt.Errorf("no acknowledgement on partition %d after the kill of broker %d: %w", partition, victim, ackErr)
	}
	o.ack = ackAt.Sub(killed)
	o.line += fmt.Sprintf("; first acknowledgement of a record sent after the kill after %.0f ms", ms(o.ack))
	if len(led) > 1 {
		if all, ok := lastFirstAck(w.snapshot(), led, killed); ok {
			o.line += fmt.Sprintf(" (on every partition it led: %.0f ms)", ms(all.Sub(killed)))
		}
	}
	if metaErr != nil {
		return o, fmt.Errorf("broker %d never named a new leader for partition %d: %w", via, partition, metaErr)
	}

	// Down counts from the failover, so that both targets' brokers come
	// back to the same amount of writes, however long their failover took.
	select {
	case <-time.After(time.Until(ackAt.Add(rr.cfg.Down))):
	case <-ctx.Done():
		return o, ctx.Err()
	}
	restarted := time.Now()
	o.line += fmt.Sprintf("; %.1f MiB acknowledged while it was down", float64(ackedBytes(w.snapshot(), killed, restarted))/(1<<20))
	if err := rr.c.Restart(ctx, int(victim)); err != nil {
		return o, fmt.Errorf("restarting broker %d: %w", victim, err)
	}
	o.restarted = true
	o.answered = time.Since(restarted)
	rr.forget(int(victim))
	o.line += fmt.Sprintf("; restarted %.1f s after the kill, answering ApiVersions %.2f s later", restarted.Sub(killed).Seconds(), o.answered.Seconds())

	rctx, rcancel := context.WithTimeout(ctx, rr.cfg.RejoinLimit)
	var missing, held int
	rejoinedAt, rejoinErr := pollUntil(rctx, func() error {
		resp, err := rr.metadata(rctx, via)
		if err != nil {
			return err
		}
		if missing, held = outOfISR(resp, victim); missing > 0 {
			return fmt.Errorf("out of the ISR of %d of the %d partitions it holds", missing, held)
		}
		return nil
	})
	rcancel()
	if rejoinErr != nil {
		o.line += fmt.Sprintf("; **did not rejoin**: after %s still out of the ISR of %d of the %d partitions it holds", rr.cfg.RejoinLimit, missing, held)
	} else {
		o.rejoined = rejoinedAt.Sub(restarted)
		o.line += fmt.Sprintf("; back in the ISR of all %d partitions it holds %.2f s after the restart", held, o.rejoined.Seconds())
	}
	if err := closeWriter(); err != nil {
		return o, fmt.Errorf("writes to %s: %w", topic, err)
	}
	if rejoinErr != nil {
		// Reported through NotRejoined and the line; the round goes on,
		// each kill on a fresh topic, once the node is back in the quorum.
		rr.fail("leader kill %d: broker %d did not rejoin the ISR of %d of %d partitions within %s", k, victim, missing, held, rr.cfg.RejoinLimit)
	}
	return o, rr.waitRejoined(ctx, int(victim), via)
}

// pickVictim picks, among the brokers other than controller that lead a
// partition of topic, the k-th in turn (k counts from 1), and returns it
// with the partitions it leads in ascending order; -1 when none does.
func pickVictim(resp *kmsg.MetadataResponse, topic string, controller int32, k int) (int32, []int32) {
	leads := map[int32][]int32{}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		for _, p := range t.Partitions {
			if p.Leader >= 0 && p.Leader != controller {
				leads[p.Leader] = append(leads[p.Leader], p.Partition)
			}
		}
	}
	if len(leads) == 0 {
		return -1, nil
	}
	var brokers []int32
	for b := range leads {
		brokers = append(brokers, b)
	}
	slices.Sort(brokers)
	victim := brokers[(k-1)%len(brokers)]
	led := leads[victim]
	slices.Sort(led)
	return victim, led
}

// leaderOf is partition's leader in a Metadata answer, -1 if none is
// listed.
func leaderOf(resp *kmsg.MetadataResponse, topic string, partition int32) int32 {
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition == partition && p.ErrorCode == 0 {
				return p.Leader
			}
		}
	}
	return -1
}

// outOfISR counts, in a Metadata answer of every topic, the partitions
// that have broker among their replicas (held) and those of them whose
// ISR lacks it (missing).
func outOfISR(resp *kmsg.MetadataResponse, broker int32) (missing, held int) {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if !slices.Contains(p.Replicas, broker) {
				continue
			}
			held++
			if !slices.Contains(p.ISR, broker) {
				missing++
			}
		}
	}
	return missing, held
}

func joinInts(vs []int32) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(int(v))
	}
	return strings.Join(s, ", ")
}

// ackRecord is one record the writer sent and the broker acknowledged.
type ackRecord struct {
	partition   int32
	bytes       int
	sent, acked time.Time
}

// firstAckAfter is the earliest acknowledgement on partition of a record
// sent after t.
func firstAckAfter(acks []ackRecord, partition int32, t time.Time) (time.Time, bool) {
	var first time.Time
	for _, a := range acks {
		if a.partition == partition && a.sent.After(t) && (first.IsZero() || a.acked.Before(first)) {
			first = a.acked
		}
	}
	return first, !first.IsZero()
}

// lastFirstAck is the latest, over partitions, of firstAckAfter: when
// every one of them had taken a write sent after t. ok is false while one
// has not.
func lastFirstAck(acks []ackRecord, partitions []int32, t time.Time) (time.Time, bool) {
	var last time.Time
	for _, p := range partitions {
		at, ok := firstAckAfter(acks, p, t)
		if !ok {
			return time.Time{}, false
		}
		if at.After(last) {
			last = at
		}
	}
	return last, true
}

// ackedBytes is the payload acknowledged between from and to.
func ackedBytes(acks []ackRecord, from, to time.Time) int {
	n := 0
	for _, a := range acks {
		if a.acked.After(from) && !a.acked.After(to) {
			n += a.bytes
		}
	}
	return n
}

// ackWriter produces to every partition of a topic in turn at a fixed
// rate, with acks=all and the idempotent producer, and keeps when each
// record was sent and acknowledged. Its loop goroutine owns the pacing;
// the client's callbacks, on franz-go's goroutines, append under mu, which
// guards acks, failed and firstErr.
type ackWriter struct {
	cl         *kgo.Client
	partitions int32
	stop       context.CancelFunc
	done       chan struct{}

	mu       sync.Mutex
	acks     []ackRecord
	failed   int
	firstErr error
}

// startAckWriter starts writing rate records/s to topic's partitions.
// Retries are unbounded (the producer keeps trying through a failover),
// 20 ms apart, and metadata may be refreshed every 20 ms, so that the
// client finds a new leader about as soon as a broker names it; linger
// is 0, so a record goes out as soon as it is produced.
func startAckWriter(ctx context.Context, seeds []string, topic string, partitions int32, rate int, payloads [][]byte) (*ackWriter, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1_000_000),
		kgo.RetryBackoffFn(func(int) time.Duration { return clusterPoll }), kgo.MetadataMinAge(clusterPoll),
		kgo.DialTimeout(time.Second))
	if err != nil {
		return nil, fmt.Errorf("writer for %s: %w", topic, err)
	}
	wctx, stop := context.WithCancel(ctx)
	w := &ackWriter{cl: cl, partitions: partitions, stop: stop, done: make(chan struct{})}
	go w.loop(wctx, partitions, rate, payloads)
	return w, nil
}

func (w *ackWriter) loop(ctx context.Context, partitions int32, rate int, payloads [][]byte) {
	defer close(w.done)
	interval := time.Second / time.Duration(rate)
	next := time.Now()
	for i := 0; ctx.Err() == nil; i++ {
		if d := time.Until(next); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return
			}
		}
		next = next.Add(interval)
		p := payloads[i%len(payloads)]
		r := &kgo.Record{Partition: int32(i) % partitions, Value: p}
		sent := time.Now()
		w.cl.Produce(context.WithoutCancel(ctx), r, func(r *kgo.Record, err error) {
			acked := time.Now()
			w.mu.Lock()
			defer w.mu.Unlock()
			if err != nil {
				w.failed++
				if w.firstErr == nil {
					w.firstErr = err
				}
				return
			}
			w.acks = append(w.acks, ackRecord{partition: r.Partition, bytes: len(r.Value), sent: sent, acked: acked})
		})
	}
}

func (w *ackWriter) snapshot() []ackRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.acks)
}

// waitFor polls the acknowledgements every 10 ms until done says yes, or
// limit passes.
func (w *ackWriter) waitFor(ctx context.Context, limit time.Duration, done func([]ackRecord) bool) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		if done(w.snapshot()) {
			return nil
		}
		select {
		case <-ctx.Done():
			w.mu.Lock()
			defer w.mu.Unlock()
			return fmt.Errorf("%w (%d acknowledged, %d failed, first failure: %v)", ctx.Err(), len(w.acks), w.failed, w.firstErr)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitEveryPartition waits until every partition took a write: the
// producer id, metadata and connections are in place before a kill.
func (w *ackWriter) waitEveryPartition(ctx context.Context, limit time.Duration) error {
	err := w.waitFor(ctx, limit, func(acks []ackRecord) bool {
		seen := map[int32]bool{}
		for _, a := range acks {
			seen[a.partition] = true
		}
		return len(seen) == int(w.partitions)
	})
	if err != nil {
		return fmt.Errorf("warming the writer up: %w", err)
	}
	return nil
}

// waitAckAfter waits for the first acknowledgement on partition of a
// record sent after t, and returns when it came.
func (w *ackWriter) waitAckAfter(ctx context.Context, partition int32, t time.Time) (time.Time, error) {
	var at time.Time
	err := w.waitFor(ctx, replFailoverLimit, func(acks []ackRecord) bool {
		var ok bool
		at, ok = firstAckAfter(acks, partition, t)
		return ok
	})
	return at, err
}

// close stops writing, waits up to limit for what was produced to be
// acknowledged, and reports any write that failed.
func (w *ackWriter) close(limit time.Duration) error {
	w.stop()
	<-w.done
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	flushErr := w.cl.Flush(ctx)
	w.cl.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed > 0 {
		return fmt.Errorf("%d of %d acks=all writes failed (first: %v)", w.failed, w.failed+len(w.acks), w.firstErr)
	}
	if flushErr != nil {
		return fmt.Errorf("flushing the writes: %w", flushErr)
	}
	return nil
}
