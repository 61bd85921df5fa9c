package bench

// The connections benchmark (make bench-connections): one fresh combined
// node per target and round, gregor and kafka alternated. Each round opens
// -connections TCP connections to the node, each answered one ApiVersions
// (v0) before the next is counted, from -dialers goroutines at once (a
// storm); then measures the node's RSS and descriptors with all of them
// idle; then sends one Metadata (v12, no topics) on every connection at
// once and waits for every answer (an active round), and measures again.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConnConfig is one run of the connections benchmark.
type ConnConfig struct {
	Root        string
	Targets     []string
	Rounds      int
	Connections int
	Dialers     int
	// The client phases (clients.go): idempotent producers on a topic of
	// ProducerPartitions partitions, and Members classic group members in
	// Groups groups; a phase with no clients is skipped.
	Producers          int
	ProducerPartitions int
	Members            int
	Groups             int
	// StormConnections is the rate storm's connections against the
	// limits (storm.go); 0 skips the storm phases.
	StormConnections int
	// ProfileDir, when set, gets gregor's heap profiles with the storm's
	// connections idle and with the group members heartbeating, and a CPU
	// profile of 10 s of the heartbeat window.
	ProfileDir string
}

// ConnRun is the connections benchmark's result.
type ConnRun struct {
	Config ConnConfig
	runInfo
	Notes map[string][]string
}

const (
	figConnOpen       = "open every connection, each answered ApiVersions (s)"
	figConnIdleRSS    = "RSS per idle connection (KiB)"
	figConnIdleHeap   = "Go heap in use per idle connection (KiB, gregor)"
	figConnIdleStack  = "goroutine stacks in use per idle connection (KiB, gregor)"
	figConnFDs        = "open descriptors per connection"
	figConnActive     = "one Metadata on every connection at once, all answered (s)"
	figConnActiveRSS  = "RSS per connection after the active round (KiB)"
	figConnActiveHeap = "Go heap in use per connection after the active round (KiB, gregor)"
)

// ConnFigures are the figures in report order.
func ConnFigures() []string {
	return []string{figConnOpen, figConnIdleRSS, figConnIdleHeap, figConnIdleStack, figConnFDs, figConnActive, figConnActiveRSS, figConnActiveHeap}
}

// ExecuteConnections runs every round, the targets alternated.
func ExecuteConnections(ctx context.Context, cfg ConnConfig, log *slog.Logger) (*ConnRun, error) {
	run := &ConnRun{Config: cfg, Notes: map[string][]string{}}
	err := alternateNodeRounds(ctx, nodeRounds{root: cfg.Root, name: "connections", targets: cfg.Targets, rounds: cfg.Rounds, log: log},
		&run.runInfo, run.Notes, func(target, gregorBin, dir string, tools *integration.Tools, figs map[string]float64) (string, error) {
			return connRound(ctx, cfg, tools, target, gregorBin, dir, figs, run)
		})
	return run, err
}

// benchConn is one open connection.
type benchConn struct {
	c  net.Conn
	br *bufio.Reader
}

func connRound(ctx context.Context, cfg ConnConfig, tools *integration.Tools, target, gregorBin, dir string, figs map[string]float64, run *ConnRun) (string, error) {
	n, describe, err := startScaleNode(ctx, tools, target, gregorBin, dir)
	if err != nil {
		return "", err
	}
	if run.Describe[target] == "" {
		run.Describe[target] = describe
	}
	defer func() { _ = n.proc.Stop(60 * time.Second) }()
	if err := integration.WaitReady(ctx, n.bootstrap, n.proc.Done()); err != nil {
		return "", err
	}
	conns := make([]*benchConn, cfg.Connections)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.c.Close()
			}
		}
	}()
	pid := n.proc.Pid()
	forceGC(ctx, n.metrics)
	rss0, _ := rssMiB(pid)
	fds0 := openFDs(pid)
	heap0, _ := heapInUse(ctx, n.metrics)
	stack0, _ := goGauge(ctx, n.metrics, "go_memstats_stack_inuse_bytes")

	start := time.Now()
	var next sync.Mutex
	i := 0
	errs := make(chan error, cfg.Dialers)
	var wg sync.WaitGroup
	for range cfg.Dialers {
		wg.Go(func() {
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= cfg.Connections {
					return
				}
				c, err := net.DialTimeout("tcp", n.bootstrap, 30*time.Second)
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", k, err)
					return
				}
				bc := newBenchConn(c)
				conns[k] = bc
				if err := bc.roundTrip(kmsg.NewPtrApiVersionsRequest(), 0, int32(k)); err != nil {
					errs <- fmt.Errorf("connection %d: ApiVersions: %w", k, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return "", err
	}
	figs[figConnOpen] = time.Since(start).Seconds()
	time.Sleep(2 * time.Second)
	per := float64(cfg.Connections)
	forceGC(ctx, n.metrics)
	rss1, _ := rssMiB(pid)
	fds1 := openFDs(pid)
	heap1, herr := heapInUse(ctx, n.metrics)
	saveProfile(ctx, cfg.ProfileDir, n.metrics, "heap?gc=1", filepath.Base(dir)+"-idle-connections-heap")
	figs[figConnIdleRSS] = (rss1 - rss0) * 1024 / per
	figs[figConnFDs] = float64(fds1-fds0) / per
	if n.metrics != "" && herr == nil {
		figs[figConnIdleHeap] = (heap1 - heap0) / 1024 / per
	}
	if stack1, err := goGauge(ctx, n.metrics, "go_memstats_stack_inuse_bytes"); err == nil {
		figs[figConnIdleStack] = (stack1 - stack0) / 1024 / per
	}

	start = time.Now()
	errs = make(chan error, cfg.Dialers)
	var nextActive sync.Mutex
	j := 0
	for range cfg.Dialers {
		wg.Go(func() {
			for {
				nextActive.Lock()
				k := j
				j++
				nextActive.Unlock()
				if k >= cfg.Connections {
					return
				}
				req := kmsg.NewPtrMetadataRequest()
				req.Topics = []kmsg.MetadataRequestTopic{}
				if err := conns[k].roundTrip(req, 12, int32(k)); err != nil {
					errs <- fmt.Errorf("connection %d: Metadata: %w", k, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return "", err
	}
	figs[figConnActive] = time.Since(start).Seconds()
	time.Sleep(2 * time.Second)
	forceGC(ctx, n.metrics)
	rss2, _ := rssMiB(pid)
	heap2, herr2 := heapInUse(ctx, n.metrics)
	figs[figConnActiveRSS] = (rss2 - rss0) * 1024 / per
	if n.metrics != "" && herr2 == nil {
		figs[figConnActiveHeap] = (heap2 - heap0) / 1024 / per
	}
	note := fmt.Sprintf("RSS %.0f → %.0f (idle) → %.0f MiB (after the active round), descriptors %d → %d", rss0, rss1, rss2, fds0, fds1)
	if n.metrics != "" && herr == nil && herr2 == nil {
		note += fmt.Sprintf(", Go heap in use %.0f → %.0f → %.0f MiB", heap0/(1<<20), heap1/(1<<20), heap2/(1<<20))
	}
	for i, c := range conns {
		c.c.Close()
		conns[i] = nil
	}
	// The client phases get a fresh node: the storm's memory is not all
	// given back to the system at once, and would blur their baselines.
	if err := n.proc.Stop(60 * time.Second); err != nil {
		return note, fmt.Errorf("stopping the storm's node: %w", err)
	}
	if cfg.Producers > 0 || cfg.Members > 0 {
		cn, _, err := startScaleNode(ctx, tools, target, gregorBin, filepath.Join(dir, "clients"))
		if err != nil {
			return note, err
		}
		defer func() { _ = cn.proc.Stop(60 * time.Second) }()
		if err := integration.WaitReady(ctx, cn.bootstrap, cn.proc.Done()); err != nil {
			return note, err
		}
		clientNote, err := clientPhases(ctx, cfg, cn, filepath.Join(dir, "clients"), figs)
		if clientNote != "" {
			note += "; " + clientNote
		}
		if err != nil {
			return note, err
		}
		if err := cn.proc.Stop(60 * time.Second); err != nil {
			return note, fmt.Errorf("stopping the client phases' node: %w", err)
		}
	}
	if cfg.StormConnections > 0 {
		stormNote, err := stormPhases(ctx, cfg, tools, target, gregorBin, dir, figs)
		if stormNote != "" {
			note += "; " + stormNote
		}
		return note, err
	}
	return note, nil
}

func newBenchConn(c net.Conn) *benchConn { return &benchConn{c: c, br: bufio.NewReaderSize(c, 512)} }

// clientPhases runs the client phases on n, then stops it (a clean
// shutdown) for the producer snapshots' size.
func clientPhases(ctx context.Context, cfg ConnConfig, n *scaleNode, dir string, figs map[string]float64) (string, error) {
	var notes []string
	if cfg.Producers > 0 {
		producers, note, err := idempotentProducers(ctx, cfg, n, figs)
		for _, c := range producers {
			if c != nil {
				c.c.Close()
			}
		}
		if err != nil {
			return strings.Join(notes, "; "), err
		}
		notes = append(notes, note)
	}
	if cfg.Members > 0 {
		note, err := manyGroupMembers(ctx, cfg, n, figs, filepath.Base(filepath.Dir(dir))+"-group-members-heap")
		if err != nil {
			return strings.Join(notes, "; "), err
		}
		notes = append(notes, note)
	}
	if cfg.Producers > 0 {
		if err := n.proc.Stop(60 * time.Second); err != nil {
			return strings.Join(notes, "; "), fmt.Errorf("stopping the node: %w", err)
		}
		bytes, files, err := snapshotBytes(dir, idemTopic)
		if err != nil {
			return strings.Join(notes, "; "), err
		}
		if files == 0 {
			return strings.Join(notes, "; "), fmt.Errorf("no producer snapshot of %s after a clean shutdown", idemTopic)
		}
		figs[figIdemSnapshot] = float64(bytes) / float64(cfg.Producers)
		notes = append(notes, fmt.Sprintf("%d producer snapshots of %s, %s bytes", files, idemTopic, thousands(int(bytes))))
	}
	return strings.Join(notes, "; "), nil
}

// roundTrip sends req at version with a v1 request header (v2 for a
// flexible version) and reads its answer's frame.
func (bc *benchConn) roundTrip(req kmsg.Request, version int16, correlation int32) error {
	_, err := bc.exchange(req, version, correlation)
	return err
}

// RenderConnections writes the connections section of RESULTS.md.
func RenderConnections(run *ConnRun, m Machine, commit, command string) []byte {
	var b bytes.Buffer
	cfg := run.Config
	b.WriteString(connBegin + "\n\n")
	fmt.Fprintf(&b, "## Connections: %s concurrent connections on one node\n\n", thousands(cfg.Connections))
	fmt.Fprintf(&b, "Written by `make bench-connections` (`%s`). Do not edit by hand.\n\n", command)
	if cfg.Rounds < 3 {
		fmt.Fprintf(&b, "**A trial, not the full benchmark:** %d round(s).\n\n", cfg.Rounds)
	}
	fmt.Fprintf(&b, "- date: %s, took %s\n", run.Started.UTC().Format("2006-01-02 15:04 UTC"), run.Elapsed.Round(1e9))
	fmt.Fprintf(&b, "- commit: %s\n", commit)
	fmt.Fprintf(&b, "- machine: %d cores (%s), %.1f GiB memory, Linux %s; load average %s at the start, %s at the end (the machine is shared with other work)\n",
		m.Cores, m.CPUModel, m.MemGiB, m.Kernel, run.LoadAvg[0], run.LoadAvg[1])
	if len(run.RoundLoads) > 0 {
		fmt.Fprintf(&b, "- load average as each target's round started: %s\n", strings.Join(run.RoundLoads, "; "))
	}
	fmt.Fprintf(&b, "- targets, alternated in this order every round: %s; %d round(s), each on one fresh combined node (new directory, new ports), not pinned; both with their defaults for connections (no max.connections, no connection_creation_rate) except in the storms against the limits\n", strings.Join(cfg.Targets, ", "), cfg.Rounds)
	for _, t := range cfg.Targets {
		if d := run.Describe[t]; d != "" {
			fmt.Fprintf(&b, "- %s: %s\n", t, d)
		}
	}
	fmt.Fprintf(&b, "- storm: %s TCP connections from this process over loopback, %d dialers at once, each connection counted once the node answered its ApiVersions v0; then 2 s idle and RSS (VmRSS) and /proc/<pid>/fd, less the fresh node's before the storm, over the connection count (gregor: also go_memstats_heap_inuse_bytes right after a collection, and go_memstats_stack_inuse_bytes: the goroutine stacks, which are not in the heap figure; RSS keeps stack memory freed until the runtime returns it to the system)\n", thousands(cfg.Connections), cfg.Dialers)
	b.WriteString("- active round: one Metadata v12 (no topics) on every connection, the same dialers each taking the next connection, until every answer is read; then 2 s and the same readings\n")
	if cfg.Producers > 0 {
		fmt.Fprintf(&b, "- idempotent producers (on a second fresh node, after the storm's): %s connections from %d dialers, each an idempotent producer: InitProducerId v4, then one Produce v9 (acks=all) of one record, sequence 0, to its partition of `%s` (%d partitions); the clock runs from the first connection to the last answer; memory per producer as above, from before the first to 2 s after the last answer and the producers' connections closed (what the node keeps of an idempotent producer, its producer state, outlives the connection); then, after the group phase, the node is stopped with SIGTERM and the producer snapshots (`*.snapshot`) of `%s`'s partition directories summed, over the producer count\n",
			thousands(cfg.Producers), cfg.Dialers, idemTopic, cfg.ProducerPartitions, idemTopic)
	}
	if cfg.Members > 0 {
		fmt.Fprintf(&b, "- group members: %s classic consumer group members in %s groups (%d each), each on its own connection, %d at a time connecting and joining: JoinGroup v9 (the first answered MEMBER_ID_REQUIRED, then again with the id; session 45 s, rebalance timeout 300 s, protocol type consumer, one `range` protocol subscribing to nothing), SyncGroup v5 (the leader assigning every member an empty assignment), then Heartbeat v4 every %s (the Java consumer's default interval); a member answered REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION joins again. Stable: every member synced, all of a group's in one generation, timed from the first connection; then %s of steady heartbeats, whose node CPU (utime+stime of /proc/<pid>/stat) over the heartbeats answered is the CPU per heartbeat; memory per member as above\n",
			thousands(cfg.Members), thousands(cfg.Groups), cfg.Members/max(cfg.Groups, 1), cfg.Dialers, heartbeatEvery, heartbeatWindow)
	}
	if cfg.StormConnections > 0 {
		fmt.Fprintf(&b, "- storms against the connection limits (on a third fresh node started with max.connection.creation.rate=%d and max.connections=%d, after %s without connections so that the readiness probe's no longer count): %s connections from %d dialers at once, each dialled, answered one ApiVersions v0 and closed, timed until the last answer; the node may take a burst of the rate times the quota window's span (quota.window.num 11 of 1 s: 10 s) at once, the rest at the rate, which the figure after the burst (the connections answered after the first %s over the time from that one's answer to the last) shows. Then, %s later, %s connections opened and held, %d more dialled with an ApiVersions sent on each, their answers counted for 2 s, %d of the held ones closed, and the time until every waiting one is answered\n",
			StormRate, StormMax, "12 s", thousands(cfg.StormConnections), cfg.Dialers, thousands(StormRate*10), "12 s", thousands(StormMax), stormWaiting, stormWaiting)
	}
	b.WriteString("- RSS is what each process holds of the machine's memory, but it counts a JVM's objects only where they land on pages not touched before: Kafka's heap (-Xms1G) is reserved at start and its young generation touched by then, so its RSS per connection is a lower bound of what a connection costs it; Gregor's Go heap grows with what it allocates\n\n")
	vals, errs := gather(run.Rounds)
	writeMedians(&b, "Connection medians", ConnFigures(), cfg.Targets, vals, goHeapOnly(figConnIdleHeap, figConnIdleStack, figConnActiveHeap))
	if cfg.Producers > 0 || cfg.Members > 0 {
		writeMedians(&b, "Client medians", clientFigures(), cfg.Targets, vals, goHeapOnly(figIdemHeap, figGroupHeap))
	}
	b.WriteString("\nLower is better for every figure above. Ratios are per round, then the median.\n")
	if cfg.StormConnections > 0 {
		writeMedians(&b, "Storm medians", stormFigures(), cfg.Targets, vals, nil)
		fmt.Fprintf(&b, "\nThe storm's figures say whether each node keeps to its limits: connections a second after the burst near the configured %d, none answered past max.connections before a connection closes, the waiting ones answered soon after.\n", StormRate)
	}
	writePerTarget(&b, "What the figures came from", cfg.Targets, run.Notes)
	writePerTarget(&b, "Connections bench failures", cfg.Targets, errs)
	b.WriteString("\n" + connEnd + "\n")
	return b.Bytes()
}

const (
	connBegin = "<!-- connections bench: begin (written by make bench-connections; the other writers keep it) -->"
	connEnd   = "<!-- connections bench: end -->"
)

// ConnectionsSection is the part `make bench-connections` writes.
func ConnectionsSection() Section { return Section{connBegin, connEnd} }
