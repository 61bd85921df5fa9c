package bench

// The partition-scale benchmark (make bench-scale): one fresh combined
// node per target and round, gregor and kafka alternated, with thousands
// of partitions. Each round measures, in order:
//
//   - create: a burst of concurrent CreateTopics (-topics of -per-topic
//     partitions, one replica) until all are answered, and until every
//     partition has acknowledged one record (acks=all);
//   - Metadata for all topics (v12, the median of 5) and the size of its
//     answer; DescribeTopicPartitions paged through every partition;
//   - memory and descriptors per idle partition: RSS and open descriptors
//     of the process after -idle without traffic, less those of the fresh
//     node before the burst, over the partition count (and gregor's Go heap
//     in use, from its /metrics);
//   - SIGTERM to exit; a restart on the same data until every partition
//     has a leader in Metadata and until every partition acknowledged a
//     record; then, with that record unflushed, SIGKILL and the same
//     restart (a recovery).
//
// The clients never wait on their own backoffs: the produce clients retry
// every 20 ms and refresh metadata at most every 20 ms.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ScaleConfig is one run of the scale benchmark.
type ScaleConfig struct {
	Root     string
	Targets  []string
	Rounds   int
	Topics   int
	PerTopic int
	// Idle is how long the node sits without traffic before its memory
	// and descriptors are read (gregor closes a segment's files after
	// 30 s idle).
	Idle  time.Duration
	Limit time.Duration
	// ProfileDir, when set, gets gregor's profiles: CPU over the create
	// burst and over each restart, the heap after the idle wait.
	ProfileDir string
	// ReplicationFactor of the topics created (0: 1), and their configs.
	ReplicationFactor int
	TopicConfigs      map[string]string
}

// Partitions is the partition count of one round.
func (c ScaleConfig) Partitions() int { return c.Topics * c.PerTopic }

// ScaleRun is the scale benchmark's result.
type ScaleRun struct {
	Config ScaleConfig
	runInfo
	// Notes per target, one line a round: sizes and counts behind the
	// figures.
	Notes map[string][]string
}

const (
	figScaleCreate        = "CreateTopics burst answered (s)"
	figScaleAllAccepting  = "burst to every partition acknowledging a record (s)"
	figScaleMetadata      = "Metadata, all topics (ms)"
	figScaleMetadataBytes = "Metadata answer (MiB)"
	figScaleDescribe      = "DescribeTopicPartitions, every page (s)"
	figScaleRSS           = "RSS per idle partition (KiB)"
	figScaleHeap          = "Go heap in use per idle partition (KiB, gregor)"
	figScaleFDs           = "open descriptors per idle partition"
	figScaleStop          = "SIGTERM to exit (s)"
	figScaleRestartLed    = "clean restart: launch to every partition led in Metadata (s)"
	figScaleRestartAll    = "clean restart: launch to every partition acknowledging (s)"
	figScaleKillLed       = "after kill -9: launch to every partition led in Metadata (s)"
	figScaleKillAll       = "after kill -9: launch to every partition acknowledging (s)"
)

// ScaleFigures are the figures in report order.
func ScaleFigures() []string {
	return []string{figScaleCreate, figScaleAllAccepting, figScaleMetadata, figScaleMetadataBytes, figScaleDescribe,
		figScaleRSS, figScaleHeap, figScaleFDs, figScaleStop, figScaleRestartLed, figScaleRestartAll, figScaleKillLed, figScaleKillAll}
}

// scaleNode is one started node: how to reach it and how to start it again
// on the same data.
type scaleNode struct {
	bootstrap string
	metrics   string // gregor's HTTP listener; "" for kafka
	proc      *integration.Proc
	launch    func() (*integration.Proc, error)
}

// ExecuteScale runs every round, the targets alternated.
func ExecuteScale(ctx context.Context, cfg ScaleConfig, log *slog.Logger) (*ScaleRun, error) {
	run := &ScaleRun{Config: cfg, Notes: map[string][]string{}}
	err := alternateNodeRounds(ctx, nodeRounds{root: cfg.Root, name: "scale", targets: cfg.Targets, rounds: cfg.Rounds, log: log},
		&run.runInfo, run.Notes, func(target, gregorBin, dir string, tools *integration.Tools, figs map[string]float64) (string, error) {
			return scaleRound(ctx, cfg, tools, target, gregorBin, dir, figs, run)
		})
	return run, err
}

// nodeRounds is a benchmark of rounds on one fresh node each: gregor built
// once from the tree, the targets alternated every round.
type nodeRounds struct {
	root, name string
	targets    []string
	rounds     int
	log        *slog.Logger
}

// alternateNodeRounds runs round for every round and target in turn, each
// in a directory of its own (removed afterwards: thousands of partitions'
// files), filling info and notes. The run's directory is its own: another
// run at the same time must not remove what this one uses.
func alternateNodeRounds(ctx context.Context, b nodeRounds, info *runInfo, notes map[string][]string,
	round func(target, gregorBin, dir string, tools *integration.Tools, figs map[string]float64) (string, error)) error {
	info.Started = time.Now()
	info.LoadAvg[0] = loadAvg()
	info.Describe = map[string]string{}
	defer func() {
		info.Elapsed = time.Since(info.Started)
		info.LoadAvg[1] = loadAvg()
	}()
	tools := integration.NewTools(b.root)
	if err := os.MkdirAll(filepath.Join(b.root, "bench", ".work"), 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp(filepath.Join(b.root, "bench", ".work"), b.name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	gregorBin := filepath.Join(work, "gregor")
	if slices.Contains(b.targets, "gregor") {
		if _, err := integration.Run(ctx, integration.Cmd{Name: "go", Args: []string{"build", "-o", gregorBin, "./cmd/gregor"}, Dir: b.root, Timeout: 5 * time.Minute}); err != nil {
			return fmt.Errorf("building gregor: %w", err)
		}
	}
	for r := 1; r <= b.rounds; r++ {
		for _, target := range b.targets {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			info.RoundLoads = append(info.RoundLoads, fmt.Sprintf("round %d %s: %s", r, target, loadAvg()))
			dir := filepath.Join(work, fmt.Sprintf("%s-%d", target, r))
			res := Round{Target: target, Round: r, Figures: map[string]float64{}}
			note, err := round(target, gregorBin, dir, tools, res.Figures)
			if err != nil {
				res.Errors = append(res.Errors, err.Error())
				b.log.Error(b.name+" round", "target", target, "round", r, "err", err)
			}
			if note != "" {
				notes[target] = append(notes[target], fmt.Sprintf("round %d: %s", r, note))
			}
			b.log.Info(b.name+" round", "target", target, "round", r, "figures", res.Figures)
			info.Rounds = append(info.Rounds, res)
			_ = os.RemoveAll(dir)
		}
	}
	return nil
}

// startScaleNode starts one fresh node of target in dir; overrides are
// key=value settings on top of the harness's (--override, which both
// gregor and kafka.Kafka take).
func startScaleNode(ctx context.Context, tools *integration.Tools, target, gregorBin, dir string, overrides ...string) (*scaleNode, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	host, err := integration.ClaimLoopback()
	if err != nil {
		return nil, "", err
	}
	n := &scaleNode{bootstrap: host.Addr(integration.ClientPort)}
	var cmd integration.Cmd
	var describe string
	switch target {
	case "gregor":
		data := filepath.Join(dir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, "", err
		}
		n.metrics = host.Addr(integration.DebugPort)
		cmd = integration.Cmd{Name: gregorBin, Args: append(integration.GregorArgs(data, host.IP), "--override", "gregor.http.listener="+n.metrics), Dir: dir}
		describe = "gregor built from this tree, `integration.GregorArgs` (embedded defaults, the harness's listeners), its HTTP listener on for /metrics"
	case "kafka":
		cmd, err = tools.KafkaBrokerCmd(ctx, dir, host.IP)
		if err != nil {
			return nil, "", err
		}
		describe = "Apache Kafka " + integration.KafkaVersion + " (KRaft combined mode, the harness's server.properties, -Xmx1G as kafka-server-start.sh)"
	default:
		return nil, "", fmt.Errorf("unknown target %q", target)
	}
	for _, kv := range overrides {
		cmd.Args = append(cmd.Args, "--override", kv)
	}
	launches := 0
	n.launch = func() (*integration.Proc, error) {
		launches++
		return integration.Start(cmd, filepath.Join(dir, fmt.Sprintf("broker-%d.log", launches)))
	}
	n.proc, err = n.launch()
	if err != nil {
		return nil, "", err
	}
	return n, describe, nil
}

// scaleRound is one target's round; it fills figs as it goes.
func scaleRound(ctx context.Context, cfg ScaleConfig, tools *integration.Tools, target, gregorBin, dir string, figs map[string]float64, run *ScaleRun) (string, error) {
	n, describe, err := startScaleNode(ctx, tools, target, gregorBin, dir)
	if err != nil {
		return "", err
	}
	if run.Describe[target] == "" {
		run.Describe[target] = describe
	}
	defer func() { _ = n.proc.Stop(10 * time.Second) }()
	if err := integration.WaitReady(ctx, n.bootstrap, n.proc.Done()); err != nil {
		return "", err
	}
	names := make([]string, cfg.Topics)
	for i := range names {
		names[i] = fmt.Sprintf("scale-%d", i)
	}
	rssBefore, _ := rssMiB(n.proc.Pid())
	fdsBefore := openFDs(n.proc.Pid())
	forceGC(ctx, n.metrics)
	heapBefore, _ := heapInUse(ctx, n.metrics)

	profile := func(name string) func() {
		return cpuProfile(ctx, cfg.ProfileDir, n.metrics, fmt.Sprintf("%s-%s", filepath.Base(dir), name))
	}
	start := time.Now()
	profiled := profile("create")
	if err := createBurst(ctx, cfg, n.bootstrap, names); err != nil {
		return "", err
	}
	figs[figScaleCreate] = time.Since(start).Seconds()
	if err := produceEvery(ctx, cfg, n.bootstrap, names, "one record"); err != nil {
		return "", fmt.Errorf("producing to every partition: %w", err)
	}
	figs[figScaleAllAccepting] = time.Since(start).Seconds()
	profiled()

	mdTook, mdBytes, err := metadataAll(ctx, n.bootstrap, cfg.Partitions())
	if err != nil {
		return "", err
	}
	figs[figScaleMetadata] = float64(mdTook.Microseconds()) / 1000
	figs[figScaleMetadataBytes] = float64(mdBytes) / (1 << 20)
	descTook, pages, err := describeAll(ctx, n.bootstrap, names, cfg.Partitions())
	if err != nil {
		return "", err
	}
	figs[figScaleDescribe] = descTook.Seconds()

	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(cfg.Idle):
	}
	parts := float64(cfg.Partitions())
	if n.metrics != "" {
		// A heap profile with gc=1 collects first: the heap in use is
		// then what is live, not garbage awaiting a collection.
		forceGC(ctx, n.metrics)
	}
	rssAfter, _ := rssMiB(n.proc.Pid())
	fdsAfter := openFDs(n.proc.Pid())
	figs[figScaleRSS] = (rssAfter - rssBefore) * 1024 / parts
	figs[figScaleFDs] = float64(fdsAfter-fdsBefore) / parts
	heapAfter, herr := heapInUse(ctx, n.metrics)
	saveProfile(ctx, cfg.ProfileDir, n.metrics, "heap?gc=1", filepath.Base(dir)+"-idle-heap")
	if n.metrics != "" && herr == nil {
		figs[figScaleHeap] = (heapAfter - heapBefore) / 1024 / parts
	}
	note := fmt.Sprintf("Metadata answer %d bytes; DescribeTopicPartitions %d pages; RSS %.0f → %.0f MiB, descriptors %d → %d",
		mdBytes, pages, rssBefore, rssAfter, fdsBefore, fdsAfter)
	if n.metrics != "" && herr == nil {
		note += fmt.Sprintf(", Go heap in use %.0f → %.0f MiB", heapBefore/(1<<20), heapAfter/(1<<20))
	}

	stopped := time.Now()
	if err := syscall.Kill(n.proc.Pid(), syscall.SIGTERM); err != nil {
		return note, err
	}
	select {
	case <-n.proc.Done():
	case <-time.After(cfg.Limit):
		return note, fmt.Errorf("no exit %s after SIGTERM", cfg.Limit)
	}
	figs[figScaleStop] = time.Since(stopped).Seconds()

	for _, restart := range []struct {
		led, all, payload, name string
		kill                    bool
	}{
		{figScaleRestartLed, figScaleRestartAll, "after a clean restart", "restart", true},
		{figScaleKillLed, figScaleKillAll, "after kill -9", "kill9-restart", false},
	} {
		launched := time.Now()
		if n.proc, err = n.launch(); err != nil {
			return note, err
		}
		profiled := func() {}
		if cfg.ProfileDir != "" && n.metrics != "" {
			for !reachable(n.metrics) && time.Since(launched) < cfg.Limit {
				time.Sleep(time.Millisecond)
			}
			profiled = profile(restart.name)
		}
		led := make(chan time.Duration, 1)
		go func() { led <- waitAllLed(ctx, cfg, n.bootstrap, names, launched) }()
		if err := produceEvery(ctx, cfg, n.bootstrap, names, restart.payload); err != nil {
			return note, fmt.Errorf("producing to every partition %s: %w", restart.payload, err)
		}
		figs[restart.all] = time.Since(launched).Seconds()
		if d := <-led; d >= 0 {
			figs[restart.led] = d.Seconds()
		}
		profiled()
		if restart.kill {
			// The record just acknowledged is not flushed: the next
			// start recovers every partition's active segment.
			_ = syscall.Kill(n.proc.Pid(), syscall.SIGKILL)
			<-n.proc.Done()
		}
	}
	return note, nil
}

// createBurst sends one CreateTopics per name at once on one client, as an
// application creating topics concurrently would.
func createBurst(ctx context.Context, cfg ScaleConfig, bootstrap string, names []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, cfg.Limit)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, name := range names {
		wg.Go(func() {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.TimeoutMillis = int32(cfg.Limit.Milliseconds())
			t := kmsg.NewCreateTopicsRequestTopic()
			t.Topic, t.NumPartitions, t.ReplicationFactor = name, int32(cfg.PerTopic), int16(max(cfg.ReplicationFactor, 1))
			for k, v := range cfg.TopicConfigs {
				c := kmsg.NewCreateTopicsRequestTopicConfig()
				c.Name, c.Value = k, kmsg.StringPtr(v)
				t.Configs = append(t.Configs, c)
			}
			req.Topics = append(req.Topics, t)
			resp, err := req.RequestWith(ctx, cl)
			if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode != 0 {
				err = fmt.Errorf("error code %d", resp.Topics[0].ErrorCode)
			}
			if err != nil {
				errs[i] = fmt.Errorf("creating %s: %w", name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// scaleClient is a client that does not wait on its own backoffs.
func scaleClient(bootstrap string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.MetadataMinAge(20 * time.Millisecond),
	}, opts...)...)
}

// produceEvery sends one record to every partition (acks=all) and waits
// for every acknowledgement.
func produceEvery(ctx context.Context, cfg ScaleConfig, bootstrap string, names []string, value string) error {
	cl, err := scaleClient(bootstrap,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(cfg.Partitions()+1),
		kgo.UnknownTopicRetries(-1),
		kgo.RecordDeliveryTimeout(cfg.Limit),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, cfg.Limit)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, name := range names {
		for p := range cfg.PerTopic {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Topic: name, Partition: int32(p), Value: []byte(value)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s-%d: %w", r.Topic, r.Partition, err))
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d records failed, first: %w", len(errs), cfg.Partitions(), errs[0])
	}
	return nil
}

// metadataAll times Metadata v12 for all topics (the median of 5, after
// one untimed) and returns the answer's encoded size.
func metadataAll(ctx context.Context, bootstrap string, partitions int) (time.Duration, int, error) {
	cl, err := scaleClient(bootstrap)
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	var times []time.Duration
	size := 0
	for i := range 6 {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		req.Topics = nil // all topics
		start := time.Now()
		resp, err := req.RequestWith(ctx, cl)
		took := time.Since(start)
		if err != nil {
			return 0, 0, fmt.Errorf("Metadata for all topics: %w", err)
		}
		n := 0
		for _, t := range resp.Topics {
			n += len(t.Partitions)
		}
		if n < partitions {
			return 0, 0, fmt.Errorf("Metadata for all topics named %d partitions, want at least %d", n, partitions)
		}
		size = len(resp.AppendTo(nil))
		if i > 0 {
			times = append(times, took)
		}
	}
	slices.Sort(times)
	return times[len(times)/2], size, nil
}

// describeAll pages DescribeTopicPartitions through every partition of
// names (the tools' default page of 2,000 partitions).
func describeAll(ctx context.Context, bootstrap string, names []string, partitions int) (time.Duration, int, error) {
	cl, err := scaleClient(bootstrap)
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	start := time.Now()
	seen, pages := 0, 0
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		for _, n := range names {
			t := kmsg.NewDescribeTopicPartitionsRequestTopic()
			t.Topic = n
			req.Topics = append(req.Topics, t)
		}
		req.ResponsePartitionLimit = 2000
		req.Cursor = cursor
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, pages, fmt.Errorf("DescribeTopicPartitions page %d: %w", pages+1, err)
		}
		pages++
		for _, t := range resp.Topics {
			if t.ErrorCode != 0 {
				return 0, pages, fmt.Errorf("DescribeTopicPartitions: %v error code %d", t.Topic, t.ErrorCode)
			}
			seen += len(t.Partitions)
		}
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	if seen != partitions {
		return 0, pages, fmt.Errorf("DescribeTopicPartitions paged through %d partitions, want %d", seen, partitions)
	}
	return time.Since(start), pages, nil
}

// waitAllLed polls Metadata for names until every partition has a leader
// the answer lists; -1 when the limit passes first.
func waitAllLed(ctx context.Context, cfg ScaleConfig, bootstrap string, names []string, launched time.Time) time.Duration {
	for time.Since(launched) < cfg.Limit && ctx.Err() == nil {
		if allLed(ctx, bootstrap, names, cfg.PerTopic) {
			return time.Since(launched)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return -1
}

func allLed(ctx context.Context, bootstrap string, names []string, perTopic int) bool {
	conn, err := net.DialTimeout("tcp", bootstrap, time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	cl, err := scaleClient(bootstrap)
	if err != nil {
		return false
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	for _, n := range names {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, t)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil || len(resp.Topics) != len(names) {
		return false
	}
	live := map[int32]bool{}
	for _, b := range resp.Brokers {
		live[b.NodeID] = true
	}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 || len(t.Partitions) != perTopic {
			return false
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || !live[p.Leader] {
				return false
			}
		}
	}
	return true
}

// openFDs counts the process's open descriptors (-1 when unreadable).
func openFDs(pid int) int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(entries)
}

// heapInUse reads go_memstats_heap_inuse_bytes from a gregor node's
// /metrics, after a GC-free wait; an error without a metrics address.
func heapInUse(ctx context.Context, addr string) (float64, error) {
	return goGauge(ctx, addr, "go_memstats_heap_inuse_bytes")
}

// goGauge reads one unlabelled gauge from a gregor node's /metrics; an
// error without a metrics address.
func goGauge(ctx context.Context, addr, name string) (float64, error) {
	if addr == "" {
		return 0, errors.New("no metrics listener")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no %s in /metrics", name)
}

// cpuProfile starts a 10 s CPU profile of the gregor node behind addr,
// saved as dir/name.pprof, and returns a function that waits for it
// (nothing without a dir or an address).
func cpuProfile(ctx context.Context, dir, addr, name string) (wait func()) {
	if dir == "" || addr == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		saveProfile(ctx, dir, addr, "profile?seconds=10", name)
	}()
	time.Sleep(20 * time.Millisecond) // the profile starts before the phase
	return func() { <-done }
}

// saveProfile saves /debug/pprof/<what> of the node behind addr as
// dir/name.pprof; failures are only printed (a profile is a by-product).
func saveProfile(ctx context.Context, dir, addr, what, name string) {
	if dir == "" || addr == "" {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/"+what, nil)
	if err != nil {
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(os.Stderr, "profile %s: %v\n", name, err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintf(os.Stderr, "profile %s: status %d, %v\n", name, resp.StatusCode, err)
		return
	}
	err = os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".pprof"), body, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "profile %s: %v\n", name, err)
	}
}

// reachable: something accepts connections on addr.
func reachable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// forceGC has the gregor node behind addr collect its garbage (a heap
// profile with gc=1, thrown away).
func forceGC(ctx context.Context, addr string) {
	if addr == "" {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
