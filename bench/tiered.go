package bench

// The tiered-storage benchmark (KIP-405), with the remote storage in a
// local directory: on one fresh combined node per target and round (Kafka
// 4.3.1 with its LocalTieredStorage from kafka-storage's test jar, Gregor
// with the same server properties, which it maps to its directory
// backend), it times how fast the remote log manager copies rolled
// segments once a producer stops, reads a topic whose segments left the
// local disk from offset 0 (a cold read from the store) beside the same
// amount read from a topic without tiered storage, and measures the
// produce latency at a fixed rate on a tiered topic, whose segments the
// copier copies while the producer writes, against a plain one.
//
// The load (bench/loadgen) runs pinned to a core of its own; ListOffsets
// -4 (earliest local) and -5 (latest tiered, v9) are polled from this
// process.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TieredConfig is what `make bench-tiered` runs.
type TieredConfig struct {
	Root    string
	Targets []string
	Rounds  int
	// Records is how many 1 KiB records the tiered topic and the plain
	// topic each hold (262,144: 256 MiB of payload).
	Records int
	// LatencyRate records/s for LatencyTime on each latency topic.
	LatencyRate int
	LatencyTime time.Duration
	// BrokerCPU and LoadCPU pin the node and the load (loadgen) to cores
	// of their own when set.
	BrokerCPU, LoadCPU string
}

// The topics' and the node's tiered settings.
const (
	tieredSegBytes         = 1048576 // Kafka 4's smallest segment.bytes
	tieredLocalRetentionMs = 1000
	tieredTaskIntervalMs   = 1000
	// tieredPoll is how often ListOffsets -4 and -5 are asked for.
	tieredPoll = 50 * time.Millisecond
	// tieredWait bounds the wait for the copier and the local deletion.
	tieredWait = 5 * time.Minute
)

// TieredRun is what a tiered benchmark run measured.
type TieredRun struct {
	Config TieredConfig
	runInfo
	Payload  string
	Commands []string
	// Notes are per target, one line a round: the offsets and segment
	// counts behind the copy figures.
	Notes map[string][]string
	// Jar is the LocalTieredStorage jar Kafka loads.
	Jar string
}

func mib(records int) int { return records * 1024 / (1 << 20) }

func figTProduce(records int, tiered bool) string {
	kind := "plain"
	if tiered {
		kind = "tiered"
	}
	return fmt.Sprintf("produce %d MiB to the %s topic (loadgen, acks=all, no compression), MB/s", mib(records), kind)
}

const (
	figTBacklog    = "copy: rolled segments not yet copied when producing ended (MiB)"
	figTCopySecs   = "copy: end of producing to ListOffsets -5 at the last rolled segment's end (s)"
	figTCopyRate   = "copy: MiB/s copied from the end of producing to then"
	figTLocalGone  = "end of producing to ListOffsets -4 at the active segment: every rolled segment deleted locally (s)"
	figTColdFirst  = "cold read: time to first record (ms)"
	figTLocalFirst = "local read: time to first record (ms)"
	figTReadRatio  = "cold read MB/s / local read MB/s"
	figTLatCopied  = "MiB copied to the store during the tiered topic's latency run"
	figTLatRatio   = "produce latency p99, tiered topic / plain topic with 1 MiB segments"
)

func figTColdRate(records int) string {
	return fmt.Sprintf("cold read of %d MiB from offset 0 (tiered topic, all but the active segment only in the store), MB/s", mib(records))
}

func figTLocalRate(records int) string {
	return fmt.Sprintf("local read of %d MiB from offset 0 (topic without tiered storage), MB/s", mib(records))
}

// latencyTopic is a topic the produce-latency workload runs on.
type latencyTopic struct {
	name  string
	label string
	// segBytes is its segment.bytes (0: the broker's default, 1 GiB).
	segBytes int
	tiered   bool
}

// latencyTopics are the produce-latency workload's topics, in the order
// it runs on them: a plain topic with the default segments (no rolls), a
// plain one with the tiered topic's 1 MiB segments (rolls alone), the
// tiered one (rolls, copies and local deletion).
var latencyTopics = []latencyTopic{
	{name: "bench-latency-plain-1g", label: "plain topic, 1 GiB segments", segBytes: 0},
	{name: "bench-latency-plain", label: "plain topic, 1 MiB segments", segBytes: tieredSegBytes},
	{name: "bench-latency-tiered", label: "tiered topic, 1 MiB segments, copier working", segBytes: tieredSegBytes, tiered: true},
}

// figTLatency names a produce-latency quantile (p50, p99, p99.9) on one
// of latencyTopics.
func figTLatency(rate int, lt latencyTopic, q string) string {
	return fmt.Sprintf("produce latency at %s records/s (%.1f MiB/s), %s, %s (ms)", thousands(rate), float64(rate)/1024, lt.label, q)
}

var tieredQuantiles = []string{"p50", "p99", "p99.9"}

// TieredFigures are the figures of the report, in its order.
func TieredFigures(cfg TieredConfig) []string {
	fs := []string{figTProduce(cfg.Records, false), figTProduce(cfg.Records, true), figTBacklog, figTCopySecs, figTCopyRate, figTLocalGone,
		figTColdRate(cfg.Records), figTColdFirst, figTLocalRate(cfg.Records), figTLocalFirst, figTReadRatio}
	for _, lt := range latencyTopics {
		for _, q := range tieredQuantiles {
			fs = append(fs, figTLatency(cfg.LatencyRate, lt, q))
		}
	}
	return append(fs, figTLatCopied, figTLatRatio)
}

// TieredNodeProperties are the server properties both targets get on top
// of the harness's (as integration's tiered scenarios set them): tiered
// storage on, Kafka's LocalTieredStorage (from jar) keeping the remote
// segments in dir, and the copier's task every second.
func TieredNodeProperties(jar, dir string) map[string]string {
	return map[string]string{
		"remote.log.storage.system.enable":      "true",
		"remote.log.storage.manager.class.name": "org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
		"remote.log.storage.manager.class.path": jar,
		"rsm.config.dir":                        dir,
		// Kafka's topic-based metadata manager reaches the broker through
		// this listener; __remote_log_metadata must fit on one node.
		"remote.log.metadata.manager.listener.name":                "PLAINTEXT",
		"rlmm.config.remote.log.metadata.topic.replication.factor": "1",
		"rlmm.config.remote.log.metadata.topic.num.partitions":     "1",
		"remote.log.manager.task.interval.ms":                      strconv.Itoa(tieredTaskIntervalMs),
	}
}

// ExecuteTiered runs the tiered benchmark. It returns what it measured
// even when ctx ends early.
func ExecuteTiered(ctx context.Context, cfg TieredConfig, log *slog.Logger) (*TieredRun, error) {
	lb, err := prepareLoadBench(ctx, cfg.Root, "tiered", cfg.Targets)
	if err != nil {
		return nil, err
	}
	jar, err := lb.tools.LocalTieredStorageJar(ctx)
	if err != nil {
		return nil, err
	}
	run := &TieredRun{Config: cfg, runInfo: newRunInfo(), Payload: lb.payloadDesc, Notes: map[string][]string{}, Jar: jar}
	run.describeSingleNodes(cfg.Targets)
	var commands commandLog
	syscall.Sync()
	err = run.alternate(ctx, log, "tiered bench", cfg.Targets, cfg.Rounds, func(round int, t string) Round {
		tr := &tieredRound{cfg: cfg, run: run, lb: lb, jar: jar, log: log, commands: &commands,
			rd: Round{Target: t, Round: round, Figures: map[string]float64{}}}
		tr.execute(ctx, filepath.Join(lb.workDir, fmt.Sprintf("%s-round%d", t, round)))
		if tr.note != "" {
			run.Notes[t] = append(run.Notes[t], fmt.Sprintf("round %d: %s", round, tr.note))
		}
		return tr.rd
	})
	run.Commands = commands.lines
	return run, err
}

// tieredRound is one target's round: one fresh node, every workload.
type tieredRound struct {
	cfg      TieredConfig
	run      *TieredRun
	lb       loadBench
	jar      string
	log      *slog.Logger
	commands *commandLog
	rd       Round
	n        *integration.SingleNode
	note     string
}

func (tr *tieredRound) fail(format string, args ...any) {
	tr.rd.Errors = append(tr.rd.Errors, oneLine(fmt.Sprintf(format, args...)))
}

// failWithLog is fail, with the node's log lines that tell (warnings and
// errors, else the last ones) in the benchmark's own log.
func (tr *tieredRound) failWithLog(format string, args ...any) {
	tr.fail(format, args...)
	tr.log.Error("tiered bench step failed", "target", tr.rd.Target, "round", tr.rd.Round, "err", fmt.Sprintf(format, args...),
		"node log", tr.n.LogFile, "excerpt", logExcerpt(tr.n.Log(), 20))
}

// logExcerpt is the last n lines of a node's log that warn or err, or its
// last n lines when none does.
func logExcerpt(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	var bad []string
	for _, l := range lines {
		if strings.Contains(l, "WARN") || strings.Contains(l, "ERROR") || strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			bad = append(bad, l)
		}
	}
	if len(bad) == 0 {
		bad = lines
	}
	if len(bad) > n {
		bad = bad[len(bad)-n:]
	}
	return strings.Join(bad, "\n")
}

// The round's read topics.
const (
	tTopicTiered = "bench-tiered"
	tTopicPlain  = "bench-plain"
)

// tieredTopic is a one-partition topic with segBytes segments (0: the
// default) and, when tiered, remote storage and the short local
// retention.
func tieredTopic(name string, segBytes int, tiered bool) kmsg.CreateTopicsRequestTopic {
	t := rf1(name, 1)
	cfg := map[string]string{}
	if segBytes > 0 {
		cfg["segment.bytes"] = strconv.Itoa(segBytes)
	}
	if tiered {
		cfg["remote.storage.enable"] = "true"
		cfg["local.retention.ms"] = strconv.Itoa(tieredLocalRetentionMs)
	}
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(cfg[k])
		t.Configs = append(t.Configs, c)
	}
	return t
}

func (tr *tieredRound) execute(ctx context.Context, dir string) {
	remote := filepath.Join(dir, "remote-storage")
	if err := os.MkdirAll(remote, 0o755); err != nil {
		tr.fail("%v", err)
		return
	}
	spec := integration.NodeSpec{Properties: TieredNodeProperties(tr.jar, remote), ReadyWait: 3 * time.Minute, CPUList: tr.cfg.BrokerCPU}
	n, err := integration.StartNode(ctx, tr.lb.tools, tr.rd.Target, dir, spec)
	if err != nil {
		tr.fail("node did not start: %v", err)
		return
	}
	tr.n = n
	defer func() {
		if err := n.Stop(); err != nil {
			tr.fail("stopping the node: %v", err)
		}
		// The node's data went with Stop; the store goes too, and what
		// is left dirty is written out before the next round starts.
		_ = os.RemoveAll(remote)
		syscall.Sync()
	}()
	if tr.run.Properties == "" {
		if b, err := os.ReadFile(n.PropsFile); err == nil {
			tr.run.Properties = string(b)
		}
	}
	addr := n.Addr("PLAINTEXT")
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		tr.fail("admin client: %v", err)
		return
	}
	defer admin.Close()
	b := admin.SeedBrokers()[0]
	topics := []kmsg.CreateTopicsRequestTopic{tieredTopic(tTopicPlain, tieredSegBytes, false), tieredTopic(tTopicTiered, tieredSegBytes, true)}
	for _, lt := range latencyTopics {
		topics = append(topics, tieredTopic(lt.name, lt.segBytes, lt.tiered))
	}
	for _, t := range topics {
		if err := createTopicOn(ctx, b, 1, t, 30*time.Second, false); err != nil {
			tr.failWithLog("%v", err)
			return
		}
	}
	if !tr.produceBoth(ctx, b, addr) {
		return
	}
	tr.reads(ctx, b, addr)
	tr.latency(ctx, b, addr)
	if err := n.Alive(); err != nil {
		tr.failWithLog("at the end of its workloads: %v", err)
	}
}

// produced is loadgen produce's answer.
type produced struct {
	MBPerSec       float64 `json:"mb_per_sec"`
	EndedUnixNanos int64   `json:"ended_unix_nanos"`
}

// produceBoth fills the plain topic, then the tiered one, and follows the
// tiered topic's copy and local deletion until every segment rolled
// before producing ended is in the store and gone from the disk. It
// reports whether the round can go on.
func (tr *tieredRound) produceBoth(ctx context.Context, b *kgo.Broker, addr string) bool {
	records := strconv.Itoa(tr.cfg.Records)
	produce := func(topic string) (produced, error) {
		c := tr.loadgen(fmt.Sprintf("produce %d MiB of 1 KiB records, acks=all, no compression, to one partition", mib(tr.cfg.Records)),
			5*time.Minute, "produce", addr, "-topic", topic, "-partitions", "1", "-records", records, "-acks", "all",
			"-compression", "none", "-payloads", tr.lb.payloadFile, "-create=false")
		return runJSON[produced](ctx, c)
	}
	plain, err := produce(tTopicPlain)
	if err != nil {
		tr.failWithLog("producing to %s: %v", tTopicPlain, oneLine(err.Error()))
		return false
	}
	tr.rd.Figures[figTProduce(tr.cfg.Records, false)] = plain.MBPerSec
	syscall.Sync()
	poll := startOffsetPoller(ctx, b, tTopicTiered)
	defer poll.stop()
	res, err := produce(tTopicTiered)
	if err != nil {
		tr.failWithLog("producing to %s: %v", tTopicTiered, oneLine(err.Error()))
		return false
	}
	ended := time.Unix(0, res.EndedUnixNanos)
	tr.rd.Figures[figTProduce(tr.cfg.Records, true)] = res.MBPerSec
	// The segments on disk once producing ended: the last is the active
	// one, whose base offset ends what the copier can copy.
	partDir := filepath.Join(tr.n.LogDir, tTopicTiered+"-0")
	segs, err := segmentSizes(partDir)
	if err != nil || len(segs) == 0 {
		tr.failWithLog("listing %s: %v (%d segments)", partDir, err, len(segs))
		return false
	}
	active := segs[len(segs)-1].Base
	perRecord := bytesPerRecord(segs)
	if perRecord == 0 {
		tr.fail("%s holds %d segment(s) when producing ended: too few rolled segments to size a record", partDir, len(segs))
		return false
	}
	// Copied by the end of producing: the last -5 answered before it.
	atEnd := poll.before(ended)
	copied, err := poll.waitFor(ctx, tieredWait, func(s offsetSample) bool { return !s.at.Before(ended) && s.tiered >= active-1 })
	if err != nil {
		last := poll.last()
		tr.failWithLog("the copier did not reach the active segment's base %d within %s of the end of producing (ListOffsets -5 %d, -4 %d): %v",
			active, tieredWait, last.tiered, last.local, err)
		return false
	}
	backlog := float64(active-1-atEnd.tiered) * perRecord / (1 << 20)
	secs := copied.at.Sub(ended).Seconds()
	tr.rd.Figures[figTBacklog] = backlog
	tr.rd.Figures[figTCopySecs] = secs
	if backlog > 0 && secs > 0 {
		tr.rd.Figures[figTCopyRate] = backlog / secs
	}
	gone, err := poll.waitFor(ctx, tieredWait, func(s offsetSample) bool { return !s.at.Before(ended) && s.local >= active })
	if err != nil {
		last := poll.last()
		tr.failWithLog("the rolled segments were not deleted locally within %s of the end of producing (ListOffsets -4 %d, want at least the active segment's base %d; -5 %d): %v",
			tieredWait, last.local, active, last.tiered, err)
		return false
	}
	tr.rd.Figures[figTLocalGone] = gone.at.Sub(ended).Seconds()
	tr.note = fmt.Sprintf("when producing ended: %d segments on disk, the active one at offset %d, ListOffsets -5 %d, -4 %d; %.0f bytes a record in the segments; -5 reached %d after %.2f s, -4 reached %d after %.2f s",
		len(segs), active, atEnd.tiered, atEnd.local, perRecord, copied.tiered, secs, gone.local, gone.at.Sub(ended).Seconds())
	return true
}

// reads reads the tiered topic and then the plain one from offset 0.
func (tr *tieredRound) reads(ctx context.Context, b *kgo.Broker, addr string) {
	syscall.Sync()
	// Nothing before the active segment may be left on the local disk.
	if local, err := listOffset(ctx, b, tTopicTiered, -4); err != nil || local == 0 {
		tr.failWithLog("before the cold read: ListOffsets -4 of %s is %d (%v)", tTopicTiered, local, err)
		return
	}
	cold, err := tr.consume(ctx, addr, tTopicTiered, "cold read, from offset 0, of the tiered topic")
	if err != nil {
		tr.failWithLog("cold read: %v", oneLine(err.Error()))
	} else {
		tr.rd.Figures[figTColdRate(tr.cfg.Records)] = cold.MBPerSec
		tr.rd.Figures[figTColdFirst] = cold.FirstRecordMs
	}
	local, err := tr.consume(ctx, addr, tTopicPlain, "local read, from offset 0, of the plain topic")
	if err != nil {
		tr.failWithLog("local read: %v", oneLine(err.Error()))
		return
	}
	tr.rd.Figures[figTLocalRate(tr.cfg.Records)] = local.MBPerSec
	tr.rd.Figures[figTLocalFirst] = local.FirstRecordMs
	if cold.MBPerSec > 0 && local.MBPerSec > 0 {
		tr.rd.Figures[figTReadRatio] = cold.MBPerSec / local.MBPerSec
	}
}

type consumed struct {
	MBPerSec      float64 `json:"mb_per_sec"`
	FirstRecordMs float64 `json:"first_record_ms"`
}

func (tr *tieredRound) consume(ctx context.Context, addr, topic, workload string) (consumed, error) {
	c := tr.loadgen(workload, 11*time.Minute, "consume", addr, "-topic", topic, "-records", strconv.Itoa(tr.cfg.Records), "-timeout", "10m")
	return runJSON[consumed](ctx, c)
}

// latency produces at the fixed rate to each of latencyTopics in turn,
// and notes how much the copier copied during the tiered topic's run.
func (tr *tieredRound) latency(ctx context.Context, b *kgo.Broker, addr string) {
	p99 := map[string]float64{}
	for _, lt := range latencyTopics {
		syscall.Sync()
		before, err := listOffset(ctx, b, lt.name, -5)
		if err != nil {
			tr.failWithLog("ListOffsets -5 of %s: %v", lt.name, err)
			return
		}
		c := tr.loadgen(fmt.Sprintf("produce latency at %s records/s, 1 KiB, no compression, acks=all, linger 0", thousands(tr.cfg.LatencyRate)),
			tr.cfg.LatencyTime+3*time.Minute, "produce-latency", addr, "-topic", lt.name, "-partitions", "1",
			"-rate", strconv.Itoa(tr.cfg.LatencyRate), "-duration", tr.cfg.LatencyTime.String(), "-compression", "none",
			"-payloads", tr.lb.payloadFile, "-create=false", "-timeout", (tr.cfg.LatencyTime + 2*time.Minute).String())
		lat, err := runJSON[struct {
			Records     int     `json:"records"`
			P50Ms       float64 `json:"p50_ms"`
			P99Ms       float64 `json:"p99_ms"`
			P999Ms      float64 `json:"p999_ms"`
			SentSeconds float64 `json:"sent_seconds"`
		}](ctx, c)
		if err != nil {
			tr.failWithLog("produce latency on %s: %v", lt.name, oneLine(err.Error()))
			return
		}
		for j, v := range []float64{lat.P50Ms, lat.P99Ms, lat.P999Ms} {
			tr.rd.Figures[figTLatency(tr.cfg.LatencyRate, lt, tieredQuantiles[j])] = v
		}
		p99[lt.name] = lat.P99Ms
		want := tr.cfg.LatencyTime.Seconds()
		if lat.SentSeconds > want*1.1+0.5 {
			tr.fail("produce latency on %s: sending %d records took %.1f s, not %.0f s: the load generator did not keep the rate", lt.name, lat.Records, lat.SentSeconds, want)
		}
		if lt.tiered {
			after, err := listOffset(ctx, b, lt.name, -5)
			if err != nil {
				tr.failWithLog("ListOffsets -5 of %s: %v", lt.name, err)
				return
			}
			segs, _ := segmentSizes(filepath.Join(tr.n.LogDir, lt.name+"-0"))
			perRecord := bytesPerRecord(segs)
			if perRecord == 0 {
				perRecord = 1024 + 10 // a record of 1 KiB in a batch of many
			}
			tr.rd.Figures[figTLatCopied] = float64(after-before) * perRecord / (1 << 20)
		}
	}
	plain, tiered := p99[latencyTopics[1].name], p99[latencyTopics[2].name]
	if plain > 0 && tiered > 0 {
		tr.rd.Figures[figTLatRatio] = tiered / plain
	}
}

func (tr *tieredRound) loadgen(workload string, timeout time.Duration, mode, addr string, args ...string) integration.Cmd {
	c := taskset(tr.cfg.LoadCPU, integration.Cmd{Name: tr.lb.loadgen, Args: append([]string{mode, "-bootstrap", addr}, args...), Timeout: timeout})
	tr.commands.note(workload, c)
	return c
}

// segment is a segment file on disk: its base offset and size.
type segment = integration.SegmentFile

// segmentSizes lists the segment files (*.log) of a partition directory,
// in offset order.
func segmentSizes(dir string) ([]segment, error) { return integration.SegmentFiles(dir) }

// bytesPerRecord is the rolled segments' bytes per offset (every segment
// but the last, which is sized by the next one's base), 0 when there are
// fewer than two segments.
func bytesPerRecord(segs []segment) float64 {
	var bytes, offsets int64
	for i := 0; i+1 < len(segs); i++ {
		bytes += segs[i].Size
		offsets += segs[i+1].Base - segs[i].Base
	}
	if offsets == 0 {
		return 0
	}
	return float64(bytes) / float64(offsets)
}

// listOffset asks b (ListOffsets v9) for partition 0 of topic at the
// special timestamp ts: -1 latest, -2 earliest, -4 earliest local, -5
// latest tiered.
func listOffset(ctx context.Context, b *kgo.Broker, topic string, ts int64) (int64, error) {
	req := integration.ListOffsetsRequest(topic, ts)
	resp, err := requestOn(ctx, b, req, 10*time.Second)
	if err != nil {
		return 0, fmt.Errorf("ListOffsets %d: %w", ts, err)
	}
	r := resp.(*kmsg.ListOffsetsResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("ListOffsets %d: %d topics in the answer", ts, len(r.Topics))
	}
	p := r.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return 0, fmt.Errorf("ListOffsets %d: %w", ts, err)
	}
	return p.Offset, nil
}

// offsetSample is one poll: ListOffsets -5 and -4 and when -5's answer
// came.
type offsetSample struct {
	at            time.Time
	tiered, local int64
}

// offsetPoller asks for a topic's -5 and -4 every tieredPoll and keeps
// every answer.
type offsetPoller struct {
	mu      sync.Mutex
	samples []offsetSample
	err     error
	cancel  context.CancelFunc
	done    chan struct{}
}

func startOffsetPoller(ctx context.Context, b *kgo.Broker, topic string) *offsetPoller {
	ctx, cancel := context.WithCancel(ctx)
	p := &offsetPoller{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(tieredPoll)
		defer tick.Stop()
		for {
			tiered, err := listOffset(ctx, b, topic, -5)
			at := time.Now()
			var local int64
			if err == nil {
				local, err = listOffset(ctx, b, topic, -4)
			}
			p.mu.Lock()
			if err != nil {
				if ctx.Err() == nil {
					p.err = err
				}
			} else {
				p.samples = append(p.samples, offsetSample{at, tiered, local})
			}
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

func (p *offsetPoller) stop() {
	p.cancel()
	<-p.done
}

// before is the last sample taken before t (tiered and local -1 when
// there is none).
func (p *offsetPoller) before(t time.Time) offsetSample {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := offsetSample{tiered: -1, local: -1}
	for _, x := range p.samples {
		if x.at.After(t) {
			break
		}
		s = x
	}
	return s
}

func (p *offsetPoller) last() offsetSample {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.samples) == 0 {
		return offsetSample{tiered: -1, local: -1}
	}
	return p.samples[len(p.samples)-1]
}

// waitFor returns the first sample that satisfies ok, waiting for it up
// to limit; the last error of a poll when it never comes.
func (p *offsetPoller) waitFor(ctx context.Context, limit time.Duration, ok func(offsetSample) bool) (offsetSample, error) {
	deadline := time.Now().Add(limit)
	seen := 0
	for {
		p.mu.Lock()
		for ; seen < len(p.samples); seen++ {
			if ok(p.samples[seen]) {
				s := p.samples[seen]
				p.mu.Unlock()
				return s, nil
			}
		}
		err := p.err
		p.mu.Unlock()
		if time.Now().After(deadline) {
			return offsetSample{}, errors.Join(errors.New("timed out"), err)
		}
		select {
		case <-ctx.Done():
			return offsetSample{}, ctx.Err()
		case <-p.done:
			return offsetSample{}, errors.Join(errors.New("the poller stopped"), err)
		case <-time.After(tieredPoll / 2):
		}
	}
}
