package storage

// The log cleaner: log.cleaner.threads goroutines that each pick the
// filthiest compacted log (the largest share of dirty bytes, above its
// min.cleanable.dirty.ratio, or any dirty log past max.compaction.lag.ms)
// and clean it (compact.go), sleeping log.cleaner.backoff.ms when no log
// needs it. Where each log's dirty section starts is kept in every log
// dir's cleaner-offset-checkpoint, as Kafka keeps it.
//
// Keys honoured: log.cleaner.enable, log.cleaner.threads,
// log.cleaner.dedupe.buffer.size (shared by the threads),
// log.cleaner.io.buffer.load.factor, log.cleaner.io.max.bytes.per.second
// (shared by the threads, reads and writes together),
// log.cleaner.backoff.ms; per topic: cleanup.policy, min.cleanable.dirty.ratio,
// min.compaction.lag.ms, max.compaction.lag.ms, delete.retention.ms,
// segment.bytes and segment.index.bytes (the size of cleaned segments).
// log.cleaner.io.buffer.size is accepted and unused: the cleaner reads in
// 1 MiB chunks (growing for larger batches).
//
// Goroutines: Manager.Run runs runCleaners, which keeps as many threads as
// the options (SetCleanerOptions changes them at run time) ask for, and
// waits for them when Run's context ends. A thread owns its offset map and
// buffers. cleanerState.mu guards which logs are being cleaned; it is
// taken before Manager.mu, never after it, and never across a cleaning.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// CleanerOptions configures the log cleaner (Kafka's CleanerConfig).
type CleanerOptions struct {
	Enable              bool
	Threads             int
	DedupeBufferSize    int64
	IOBufferLoadFactor  float64
	IOMaxBytesPerSecond float64
	Backoff             time.Duration
}

// DefaultCleanerOptions are Kafka 4.3's defaults.
func DefaultCleanerOptions() CleanerOptions {
	return CleanerOptions{
		Enable:              true,
		Threads:             1,
		DedupeBufferSize:    128 << 20,
		IOBufferLoadFactor:  0.9,
		IOMaxBytesPerSecond: math.MaxFloat64,
		Backoff:             15 * time.Second,
	}
}

// CleanerOffsetCheckpointFile is the per-dir file of first dirty offsets.
const CleanerOffsetCheckpointFile = "cleaner-offset-checkpoint"

// cleanerState is the manager's cleaner: its current options (changed at
// run time by SetCleanerOptions, as Kafka reconfigures its cleaner from
// dynamic broker configs), which logs are being cleaned, and the throttle
// the threads share.
type cleanerState struct {
	opts     atomic.Pointer[CleanerOptions]
	throttle *throttler

	mu         sync.Mutex
	inProgress map[*Log]bool
	// uncleanable are the logs a cleaning failed on (not aborted): they
	// are skipped until they are opened again, as Kafka marks a partition
	// uncleanable, instead of failing again and again.
	uncleanable map[*Log]bool
	// wake is closed (and replaced) when the options change: sleeping
	// threads and the supervisor look again.
	wake chan struct{}
	// rounds counts finished cleaning rounds (tests wait on it).
	rounds int64
	// idle counts the times a thread found nothing to clean and went to
	// sleep (tests wait on it).
	idle int64
	cond *sync.Cond
}

func newCleanerState(opts CleanerOptions) *cleanerState {
	c := &cleanerState{inProgress: map[*Log]bool{}, uncleanable: map[*Log]bool{}, throttle: newThrottler(opts.IOMaxBytesPerSecond), wake: make(chan struct{})}
	c.opts.Store(&opts)
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *cleanerState) wakeChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wake
}

// SetCleanerOptions changes the cleaner's options: threads are started or
// stopped, a thread whose offset map budget changed builds a new one at
// its next round, and the throttle takes the new rate at once.
func (m *Manager) SetCleanerOptions(opts CleanerOptions) {
	old := m.cleaner.opts.Load()
	if *old == opts {
		return
	}
	m.cleaner.opts.Store(&opts)
	m.cleaner.throttle.setRate(opts.IOMaxBytesPerSecond)
	m.logger.Info("log cleaner reconfigured", "threads", opts.Threads, "dedupe_buffer_size", opts.DedupeBufferSize,
		"io_max_bytes_per_second", opts.IOMaxBytesPerSecond, "backoff", opts.Backoff)
	m.cleaner.mu.Lock()
	close(m.cleaner.wake)
	m.cleaner.wake = make(chan struct{})
	m.cleaner.mu.Unlock()
}

// runCleaners keeps log.cleaner.threads threads running until ctx ends,
// then waits for them.
func (m *Manager) runCleaners(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	running := map[int]bool{}
	exited := make(chan int)
	for {
		opts := m.cleaner.opts.Load()
		want := 0
		if opts.Enable {
			want = opts.Threads
		}
		for id := range want {
			if !running[id] {
				running[id] = true
				wg.Go(func() {
					m.runCleaner(ctx, id)
					select {
					case exited <- id:
					case <-ctx.Done():
					}
				})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-m.cleaner.wakeChan():
		case id := <-exited:
			delete(running, id)
		}
	}
}

// runCleaner is cleaner thread id: it runs until ctx ends or the options
// no longer have that many threads.
func (m *Manager) runCleaner(ctx context.Context, id int) {
	var cl *cleaner
	var budget int64
	var loadFactor float64
	for ctx.Err() == nil {
		opts := *m.cleaner.opts.Load()
		if !opts.Enable || id >= opts.Threads {
			return
		}
		perThread := opts.DedupeBufferSize / int64(max(opts.Threads, 1))
		if cl == nil || perThread != budget || opts.IOBufferLoadFactor != loadFactor {
			budget, loadFactor = perThread, opts.IOBufferLoadFactor
			cl = &cleaner{offsets: newOffsetMap(perThread, opts.IOBufferLoadFactor), throttle: m.cleaner.throttle, now: m.opts.ExpiryNow}
			if !cl.offsets.usable() {
				m.logger.Error("log cleaner thread cannot run: its offset map holds no key; raise log.cleaner.dedupe.buffer.size or lower log.cleaner.threads",
					"thread", id, "dedupe_buffer_size", opts.DedupeBufferSize, "threads", opts.Threads)
				select {
				case <-ctx.Done():
				case <-m.cleaner.wakeChan():
				}
				cl = nil
				continue
			}
		}
		wake := m.cleaner.wakeChan()
		if !m.cleanFilthiest(cl, id) {
			m.cleaner.mu.Lock()
			m.cleaner.idle++
			m.cleaner.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-wake:
			case <-time.After(opts.Backoff):
			}
		}
	}
}

// cleanFilthiest cleans the log that most needs it and reports whether
// there was one.
func (m *Manager) cleanFilthiest(cl *cleaner, id int) bool {
	c, ok := m.grabFilthiest()
	if !ok {
		return false
	}
	l := c.log
	defer func() {
		m.cleaner.mu.Lock()
		delete(m.cleaner.inProgress, l)
		m.cleaner.rounds++
		m.cleaner.cond.Broadcast()
		m.cleaner.mu.Unlock()
	}()
	end, stats, err := cl.clean(c)
	switch {
	case errors.Is(err, errCleaningAborted):
		l.logger().Info("log cleaning aborted: the log changed under it", "cause", err)
		return true
	case err != nil:
		// An I/O error has taken the log offline already; anything else
		// (a corrupt batch) would fail the next round the same way.
		l.logger().Error("log cleaning failed; the partition is uncleanable until it is reopened", "err", err)
		m.cleaner.mu.Lock()
		m.cleaner.uncleanable[l] = true
		m.cleaner.mu.Unlock()
		return true
	}
	m.setCleanerCheckpoint(l, end)
	mb := func(n int64) float64 { return float64(n) / (1 << 20) }
	secs := max(stats.Elapsed.Seconds(), 1e-9)
	reduction := 0.0
	if stats.BytesRead > 0 {
		reduction = 100 * (1 - float64(stats.BytesWritten)/float64(stats.BytesRead))
	}
	l.logger().Info("log cleaner cleaned log",
		"thread", id, "dirty_section_start", c.firstDirty, "dirty_section_end", end,
		"processed_mb", mb(stats.BytesRead), "seconds", stats.Elapsed.Seconds(), "mb_per_sec", mb(stats.BytesRead)/secs,
		"indexed_mb", mb(stats.MapBytesRead), "index_seconds", stats.MapElapsed.Seconds(),
		"buffer_utilization_pct", 100*stats.MapUtilization,
		"start_size_mb", mb(stats.BytesRead), "start_messages", stats.MessagesRead,
		"end_size_mb", mb(stats.BytesWritten), "end_messages", stats.MessagesWritten,
		"size_reduction_pct", reduction)
	if stats.InvalidMessages > 0 {
		l.logger().Warn("log cleaner found records without a key", "count", stats.InvalidMessages)
	}
	return true
}

// grabFilthiest picks the compacted log with the largest dirty ratio that
// needs cleaning and marks it in progress.
func (m *Manager) grabFilthiest() (cleanable, bool) {
	nowMs := m.opts.ExpiryNow().UnixMilli()
	m.cleaner.mu.Lock()
	defer m.cleaner.mu.Unlock()
	var best cleanable
	found := false
	logs := m.openLogs()
	if len(m.cleaner.uncleanable) > 0 {
		open := make(map[*Log]bool, len(logs))
		for _, l := range logs {
			open[l] = true
		}
		for l := range m.cleaner.uncleanable {
			if !open[l] {
				delete(m.cleaner.uncleanable, l) // deleted or closed
			}
		}
	}
	for _, l := range logs {
		cfg := l.Config()
		if !cfg.Compact || m.cleaner.inProgress[l] || m.cleaner.uncleanable[l] {
			continue
		}
		checkpoint, checkpointed := m.cleanerCheckpoint(l)
		c, ok := l.cleanableRange(checkpoint, checkpointed, nowMs)
		if !ok {
			continue
		}
		if c.resetCheckpoint {
			if !cfg.Delete {
				l.logger().Warn("resetting the first dirty offset to the log start offset: the checkpointed offset is out of range",
					"checkpoint", checkpoint, "log_start_offset", c.firstDirty)
			}
			m.setCleanerCheckpoint(l, c.firstDirty)
		}
		if c.cleanBytes+c.cleanableBytes == 0 {
			continue
		}
		due := (c.needNow && c.cleanableBytes > 0) || c.ratio() > cfg.MinCleanableRatio || c.horizonDue
		if !due {
			continue
		}
		if !found || c.ratio() > best.ratio() {
			best, found = c, true
		}
	}
	if found {
		m.cleaner.inProgress[best.log] = true
	}
	return best, found
}

// cleanerCheckpoint is l's first dirty offset from its dir's checkpoint.
func (m *Manager) cleanerCheckpoint(l *Log) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.logDirOf[l.tp]
	if d == nil || m.logs[l.tp] != l {
		return 0, false
	}
	off, ok := d.cleanerOffsets[l.tp]
	return off, ok
}

// setCleanerCheckpoint records l's first dirty offset and writes its dir's
// cleaner-offset-checkpoint. A failed write is logged: the next round
// cleans from the older offset, which is safe.
func (m *Manager) setCleanerCheckpoint(l *Log, offset int64) {
	m.checkpointMu.Lock()
	defer m.checkpointMu.Unlock()
	m.mu.Lock()
	d := m.logDirOf[l.tp]
	if d == nil || d.Err() != nil || m.logs[l.tp] != l {
		m.mu.Unlock()
		return
	}
	d.cleanerOffsets[l.tp] = offset
	offsets := make(map[TopicPartition]int64, len(d.cleanerOffsets))
	for tp, off := range d.cleanerOffsets {
		offsets[tp] = off
	}
	path := d.path
	m.mu.Unlock()
	if err := writeOffsetCheckpoint(m.fsys, filepath.Join(path, CleanerOffsetCheckpointFile), offsets); err != nil {
		m.logger.Error("writing the cleaner offset checkpoint", "dir", path, "err", err)
	}
}

// CleanerRounds is how many cleaning rounds the cleaner has finished.
func (m *Manager) CleanerRounds() int64 {
	m.cleaner.mu.Lock()
	defer m.cleaner.mu.Unlock()
	return m.cleaner.rounds
}

// WaitCleaned waits until the cleaner has finished target rounds in all,
// or ctx ends (tests). A caller takes CleanerRounds before it causes the
// cleaning it waits for: counting from the wait's own start would miss a
// round that finished in between.
func (m *Manager) WaitCleaned(ctx context.Context, target int64) error {
	stop := context.AfterFunc(ctx, func() {
		m.cleaner.mu.Lock()
		m.cleaner.cond.Broadcast()
		m.cleaner.mu.Unlock()
	})
	defer stop()
	m.cleaner.mu.Lock()
	defer m.cleaner.mu.Unlock()
	for m.cleaner.rounds < target {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waiting for the log cleaner: %w", err)
		}
		m.cleaner.cond.Wait()
	}
	return nil
}

// throttler keeps the cleaner's I/O under log.cleaner.io.max.bytes.per.second
// (Kafka's Throttler): bytes are counted over periods of 100 ms, and a
// thread that finds the rate above the limit sleeps until it is back.
type throttler struct {
	now   func() time.Time
	sleep func(time.Duration)

	mu          sync.Mutex
	rate        float64 // bytes per second; MaxFloat64 or more: no limit
	periodStart time.Time
	bytes       float64
}

func newThrottler(rate float64) *throttler {
	return &throttler{rate: rate, now: time.Now, sleep: time.Sleep, periodStart: time.Now()}
}

const throttlePeriod = 100 * time.Millisecond

func (t *throttler) setRate(rate float64) {
	t.mu.Lock()
	t.rate = rate
	t.mu.Unlock()
}

func (t *throttler) wait(n int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	if t.rate <= 0 || t.rate >= math.MaxFloat64 {
		t.mu.Unlock()
		return
	}
	t.bytes += float64(n)
	elapsed := t.now().Sub(t.periodStart)
	if elapsed < throttlePeriod {
		t.mu.Unlock()
		return
	}
	sleep := time.Duration(t.bytes/t.rate*float64(time.Second)) - elapsed
	t.bytes = 0
	t.mu.Unlock()
	if sleep > 0 {
		t.sleep(sleep)
	}
	t.mu.Lock()
	t.periodStart = t.now()
	t.mu.Unlock()
}
