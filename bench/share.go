package bench

// The share-group benchmark (KIP-932): on one fresh combined node per
// target and round, kafka-share-consumer-perf-test (Kafka 4.3.1's
// ShareConsumerPerformance, the same jar for both targets) reads what
// loadgen produced with 1 and 4 share consumers from topics of 1 and 16
// partitions; loadgen's share-ack mode times the flush of each poll's
// acceptance (ShareAcknowledge with the share state persisted), and its
// share-lock-expiry mode how long records held by a member that stopped
// polling take to reach another member once their lock expired.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ShareConfig is what `make bench-share` runs.
type ShareConfig struct {
	Root    string
	Targets []string
	Rounds  int
	// Records is how many 1 KiB records each topic holds and each
	// perf-test run reads.
	Records int
	// AckRecords is how many records the acknowledgement-latency
	// workload reads, MaxPoll records a poll.
	AckRecords, MaxPoll int
	// LockSamples measurements of expired-lock redelivery per round, with
	// the brokers' record lock duration set to Lock.
	LockSamples int
	Lock        time.Duration
	// BrokerCPU and LoadCPU pin the node and the load (perf test,
	// loadgen) to cores of their own when set.
	BrokerCPU, LoadCPU string
}

// ShareRun is what a share benchmark run measured.
type ShareRun struct {
	Config ShareConfig
	runInfo
	Payload  string
	Commands []string
}

// The consumer counts and topic sizes of the throughput figures.
var (
	shareConsumers  = []int{1, 4}
	sharePartitions = []int{1, 16}
)

func figShareThroughput(consumers, partitions int, unit string) string {
	return fmt.Sprintf("share consume, %d consumer(s), %d partition(s) %s", consumers, partitions, unit)
}

const (
	figShareAckP50  = "share acknowledgement flush p50 (ms)"
	figShareAckP99  = "share acknowledgement flush p99 (ms)"
	figShareAckRate = "share consume with a flushed acknowledgement per poll, records/s"
	figShareLockP50 = "expired lock to another member, beyond the lock, p50 (ms)"
	figShareLockMax = "expired lock to another member, beyond the lock, max (ms)"
)

// ShareFigures are the figures of the report, in its order.
func ShareFigures() []string {
	var fs []string
	for _, c := range shareConsumers {
		for _, p := range sharePartitions {
			fs = append(fs, figShareThroughput(c, p, "records/s"), figShareThroughput(c, p, "MB/s"))
		}
	}
	return append(fs, figShareAckRate, figShareAckP50, figShareAckP99, figShareLockP50, figShareLockMax)
}

// ExecuteShare runs the share benchmark. It returns what it measured
// even when ctx ends early.
func ExecuteShare(ctx context.Context, cfg ShareConfig, log *slog.Logger) (*ShareRun, error) {
	lb, err := prepareLoadBench(ctx, cfg.Root, "share", cfg.Targets)
	if err != nil {
		return nil, err
	}
	run := &ShareRun{Config: cfg, runInfo: newRunInfo(), Payload: lb.payloadDesc}
	run.describeSingleNodes(cfg.Targets)
	var commands commandLog
	err = run.alternate(ctx, log, "share bench", cfg.Targets, cfg.Rounds, func(round int, t string) Round {
		sr := &shareRound{cfg: cfg, run: run, lb: lb, commands: &commands, rd: Round{Target: t, Round: round, Figures: map[string]float64{}}}
		sr.execute(ctx, filepath.Join(lb.workDir, fmt.Sprintf("%s-round%d", t, round)))
		return sr.rd
	})
	run.Commands = commands.lines
	return run, err
}

// shareRound is one target's round: one fresh node, every workload.
type shareRound struct {
	cfg      ShareConfig
	run      *ShareRun
	lb       loadBench
	commands *commandLog
	rd       Round
}

func (sr *shareRound) fail(format string, args ...any) {
	sr.rd.Errors = append(sr.rd.Errors, oneLine(fmt.Sprintf(format, args...)))
}

// ShareNodeProperties are the server properties both targets get on top
// of the harness's: a record lock short enough to measure its expiry.
func ShareNodeProperties(lock time.Duration) map[string]string {
	ms := strconv.FormatInt(lock.Milliseconds(), 10)
	return map[string]string{
		"group.share.min.record.lock.duration.ms": "1000",
		"group.share.record.lock.duration.ms":     ms,
	}
}

func (sr *shareRound) execute(ctx context.Context, dir string) {
	spec := integration.NodeSpec{Properties: ShareNodeProperties(sr.cfg.Lock), ReadyWait: 2 * time.Minute, CPUList: sr.cfg.BrokerCPU}
	n, err := integration.StartNode(ctx, sr.lb.tools, sr.rd.Target, dir, spec)
	if err != nil {
		sr.fail("node did not start: %v", err)
		return
	}
	defer func() {
		if err := n.Stop(); err != nil {
			sr.fail("stopping the node: %v", err)
		}
	}()
	if sr.run.Properties == "" {
		if b, err := os.ReadFile(n.PropsFile); err == nil {
			sr.run.Properties = string(b)
		}
	}
	addr := n.Addr("PLAINTEXT")
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		sr.fail("admin client: %v", err)
		return
	}
	defer admin.Close()
	records := strconv.Itoa(sr.cfg.Records)
	topics := map[int]string{}
	for _, p := range sharePartitions {
		topic := fmt.Sprintf("bench-share-%d", p)
		topics[p] = topic
		if err := createTopicOn(ctx, admin.SeedBrokers()[0], 1, rf1(topic, int32(p)), 30*time.Second, false); err != nil {
			sr.fail("%v", err)
			return
		}
		c := sr.loadgen(fmt.Sprintf("produce %d records to %d partition(s)", sr.cfg.Records, p), 5*time.Minute, "produce", addr,
			"-topic", topic, "-partitions", strconv.Itoa(p), "-records", records, "-acks", "1", "-payloads", sr.lb.payloadFile, "-create=false")
		if _, err := integration.Run(ctx, c); err != nil {
			sr.fail("producing to %s: %v", topic, oneLine(err.Error()))
			return
		}
	}
	for _, consumers := range shareConsumers {
		for _, p := range sharePartitions {
			sr.perfTest(ctx, admin, addr, topics[p], consumers, p)
		}
	}
	ack, err := runJSON[struct {
		RecordsPerSec float64 `json:"records_per_sec"`
		P50Ms         float64 `json:"p50_ms"`
		P99Ms         float64 `json:"p99_ms"`
	}](ctx, sr.loadgen("share acknowledgement latency", 5*time.Minute, "share-ack", addr, "-topic", topics[16],
		"-group", "bench-share-ack", "-records", strconv.Itoa(sr.cfg.AckRecords), "-max-records", strconv.Itoa(sr.cfg.MaxPoll)))
	if err != nil {
		sr.fail("share-ack: %v", oneLine(err.Error()))
	} else {
		sr.rd.Figures[figShareAckRate], sr.rd.Figures[figShareAckP50], sr.rd.Figures[figShareAckP99] = ack.RecordsPerSec, ack.P50Ms, ack.P99Ms
	}
	lock, err := runJSON[struct {
		P50Ms float64 `json:"p50_ms"`
		MaxMs float64 `json:"max_ms"`
	}](ctx, sr.loadgen("expired-lock redelivery", 10*time.Minute, "share-lock-expiry", addr, "-topic", "bench-share-lock",
		"-samples", strconv.Itoa(sr.cfg.LockSamples), "-lock", sr.cfg.Lock.String()))
	if err != nil {
		sr.fail("share-lock-expiry: %v", oneLine(err.Error()))
	} else {
		sr.rd.Figures[figShareLockP50], sr.rd.Figures[figShareLockMax] = lock.P50Ms, lock.MaxMs
	}
	if err := n.Alive(); err != nil {
		sr.fail("at the end of its workloads: %v", err)
	}
}

// perfTest runs kafka-share-consumer-perf-test with consumers share
// consumers of a new group (share.auto.offset.reset=earliest) over topic
// and keeps its records/s and MB/s.
func (sr *shareRound) perfTest(ctx context.Context, admin *kgo.Client, addr, topic string, consumers, partitions int) {
	group := fmt.Sprintf("bench-share-perf-%d-%d", consumers, partitions)
	if err := integration.SetGroupConfigs(ctx, admin, group, map[string]string{"share.auto.offset.reset": "earliest"}); err != nil {
		sr.fail("%v", err)
		return
	}
	c, err := sr.lb.tools.JavaCmd(ctx, integration.SetKafka, "org.apache.kafka.tools.ShareConsumerPerformance", "--bootstrap-server", addr,
		"--topic", topic, "--group", group, "--num-records", strconv.Itoa(sr.cfg.Records), "--threads", strconv.Itoa(consumers), "--timeout", "60000")
	if err != nil {
		sr.fail("%v", err)
		return
	}
	c.Timeout = 10 * time.Minute
	c = taskset(sr.cfg.LoadCPU, c)
	name := figShareThroughput(consumers, partitions, "")
	sr.commands.note(strings.TrimSpace(name), c)
	out, err := integration.Run(ctx, c)
	if err != nil {
		sr.fail("%s: %v", name, oneLine(err.Error()))
		return
	}
	figs, err := parseSharePerf(out.Stdout)
	if err != nil {
		sr.fail("%s: %v", name, err)
		return
	}
	// The tool stops once it has at least the records asked for; its
	// last poll may take it past (the topic holds loadgen's warm-up
	// record too).
	if int(figs["data.consumed.in.nMsg"]) < sr.cfg.Records {
		sr.fail("%s: consumed %v records, want %d", name, figs["data.consumed.in.nMsg"], sr.cfg.Records)
		return
	}
	sr.rd.Figures[figShareThroughput(consumers, partitions, "records/s")] = figs["nMsg.sec"]
	sr.rd.Figures[figShareThroughput(consumers, partitions, "MB/s")] = figs["MB.sec"]
}

// parseSharePerf reads ShareConsumerPerformance's output: a header line
// of comma-separated names (start.time, end.time, data.consumed.in.MB,
// MB.sec, nMsg.sec, data.consumed.in.nMsg, fetch.time.ms) and one line
// of figures under it.
func parseSharePerf(stdout string) (map[string]float64, error) {
	var header []string
	for _, line := range strings.Split(stdout, "\n") {
		fields := strings.Split(strings.TrimSpace(line), ", ")
		switch {
		case header == nil && strings.Contains(line, "nMsg.sec"):
			header = fields
		case header != nil && len(fields) == len(header):
			figs := map[string]float64{}
			for i, h := range header {
				if v, err := strconv.ParseFloat(strings.TrimSpace(fields[i]), 64); err == nil {
					figs[strings.TrimSpace(h)] = v
				}
			}
			if _, ok := figs["nMsg.sec"]; !ok {
				return nil, fmt.Errorf("no nMsg.sec in %q", line)
			}
			return figs, nil
		}
	}
	return nil, fmt.Errorf("no figures in the perf test's output: %q", tailOf(stdout, 300))
}

func tailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func (sr *shareRound) loadgen(workload string, timeout time.Duration, mode, addr string, args ...string) integration.Cmd {
	c := taskset(sr.cfg.LoadCPU, integration.Cmd{Name: sr.lb.loadgen, Args: append([]string{mode, "-bootstrap", addr}, args...), Timeout: timeout})
	sr.commands.note(workload, c)
	return c
}
