package storage

// The log cleaner: log.cleaner.threads goroutines that each pick the
// filthiest compacted log (the largest share of dirty bytes, above its
// min.cleanable.dirty.ratio, or any dirty log past max.compaction.lag.ms)
// and clean it (clean.go), sleeping log.cleaner.backoff.ms when no log
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
// Goroutines: Manager.Run starts the threads and waits for them when its
// context ends. A thread owns its offset map and buffers. cleanerState.mu
// guards which logs are being cleaned; it is taken before Manager.mu
// never after it, and never across a cleaning.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
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

// cleanerState is the manager's cleaner: which logs are being cleaned and
// the throttle the threads share.
type cleanerState struct {
	mu         sync.Mutex
	inProgress map[*Log]bool
	throttle   *throttler
	// rounds counts finished cleaning rounds (tests wait on it).
	rounds int64
	cond   *sync.Cond
}

func newCleanerState(opts CleanerOptions) *cleanerState {
	c := &cleanerState{inProgress: map[*Log]bool{}, throttle: newThrottler(opts.IOMaxBytesPerSecond)}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// runCleaner is one cleaner thread: it runs until ctx ends.
func (m *Manager) runCleaner(ctx context.Context, id int) {
	opts := m.opts.Cleaner
	cl := &cleaner{
		offsets:  newOffsetMap(opts.DedupeBufferSize/int64(max(opts.Threads, 1)), opts.IOBufferLoadFactor),
		throttle: m.cleaner.throttle,
		now:      m.now,
	}
	if !cl.offsets.usable() {
		m.logger.Error("log cleaner cannot run: its offset map holds no key; raise log.cleaner.dedupe.buffer.size or lower log.cleaner.threads",
			"dedupe_buffer_size", opts.DedupeBufferSize, "threads", opts.Threads)
		return
	}
	for {
		if !m.cleanFilthiest(cl, id) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(opts.Backoff):
			}
		}
		if ctx.Err() != nil {
			return
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
		l.logger.Info("log cleaning aborted: the log changed under it", "cause", err)
		return true
	case err != nil:
		// Kafka marks the partition uncleanable; an I/O error has taken
		// the log offline already.
		l.logger.Error("log cleaning failed", "err", err)
		return true
	}
	m.setCleanerCheckpoint(l, end)
	mb := func(n int64) float64 { return float64(n) / (1 << 20) }
	secs := max(stats.Elapsed.Seconds(), 1e-9)
	reduction := 0.0
	if stats.BytesRead > 0 {
		reduction = 100 * (1 - float64(stats.BytesWritten)/float64(stats.BytesRead))
	}
	l.logger.Info("log cleaner cleaned log",
		"thread", id, "dirty_section_start", c.firstDirty, "dirty_section_end", end,
		"processed_mb", mb(stats.BytesRead), "seconds", stats.Elapsed.Seconds(), "mb_per_sec", mb(stats.BytesRead)/secs,
		"indexed_mb", mb(stats.MapBytesRead), "index_seconds", stats.MapElapsed.Seconds(),
		"buffer_utilization_pct", 100*stats.MapUtilization,
		"start_size_mb", mb(stats.BytesRead), "start_messages", stats.MessagesRead,
		"end_size_mb", mb(stats.BytesWritten), "end_messages", stats.MessagesWritten,
		"size_reduction_pct", reduction)
	if stats.InvalidMessages > 0 {
		l.logger.Warn("log cleaner found records without a key", "count", stats.InvalidMessages)
	}
	return true
}

// grabFilthiest picks the compacted log with the largest dirty ratio that
// needs cleaning and marks it in progress.
func (m *Manager) grabFilthiest() (cleanable, bool) {
	nowMs := m.now().UnixMilli()
	m.cleaner.mu.Lock()
	defer m.cleaner.mu.Unlock()
	var best cleanable
	found := false
	for _, l := range m.openLogs() {
		cfg := l.Config()
		if !cfg.Compact || m.cleaner.inProgress[l] {
			continue
		}
		checkpoint, checkpointed := m.cleanerCheckpoint(l)
		c, ok := l.cleanableRange(checkpoint, checkpointed, nowMs)
		if !ok {
			continue
		}
		if c.resetCheckpoint {
			if !cfg.Delete {
				l.logger.Warn("resetting the first dirty offset to the log start offset: the checkpointed offset is out of range",
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
	if d == nil || d.err != nil || m.logs[l.tp] != l {
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

// WaitCleaned waits until the cleaner has finished n more rounds than
// before the call, or ctx ends (tests).
func (m *Manager) WaitCleaned(ctx context.Context, n int64) error {
	m.cleaner.mu.Lock()
	target := m.cleaner.rounds + n
	m.cleaner.mu.Unlock()
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
	rate float64 // bytes per second; +Inf or MaxFloat64: no limit

	mu          sync.Mutex
	periodStart time.Time
	bytes       float64
}

func newThrottler(rate float64) *throttler {
	return &throttler{rate: rate, periodStart: time.Now()}
}

const throttlePeriod = 100 * time.Millisecond

func (t *throttler) wait(n int) {
	if t == nil || t.rate <= 0 || t.rate >= math.MaxFloat64 {
		return
	}
	t.mu.Lock()
	t.bytes += float64(n)
	elapsed := time.Since(t.periodStart)
	if elapsed < throttlePeriod {
		t.mu.Unlock()
		return
	}
	sleep := time.Duration(t.bytes/t.rate*float64(time.Second)) - elapsed
	t.bytes = 0
	t.mu.Unlock()
	if sleep > 0 {
		time.Sleep(sleep)
	}
	t.mu.Lock()
	t.periodStart = time.Now()
	t.mu.Unlock()
}
