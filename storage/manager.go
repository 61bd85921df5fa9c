package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ManagerOptions opens the log manager over log.dirs.
type ManagerOptions struct {
	FS     vfs.FS
	Dirs   []string
	Logger *slog.Logger
	Now    func() time.Time
	// ExpiryNow is the clock that decides when data is old enough to
	// delete: retention.ms, producer.id.expiration.ms and the cleaner's
	// delete.retention.ms and max.compaction.lag.ms. Nil means Now.
	// cmd/gregor gives one that a forward step of the wall clock cannot
	// push ahead (a wrong NTP answer, a mistyped date, a VM restored from
	// an old snapshot), so such a step never deletes acknowledged records
	// before their time; Now still stamps LogAppendTime and ages segments.
	ExpiryNow func() time.Time
	// FlushSchedulerInterval, CheckpointInterval: how often background work
	// runs (log.flush.scheduler.interval.ms, log.flush.offset.checkpoint.interval.ms).
	// A FlushSchedulerInterval of 0 disables flush.ms checks, as Kafka's
	// default (Long.MAX_VALUE) does; a CheckpointInterval of 0 means
	// Kafka's default, 60 s.
	FlushSchedulerInterval time.Duration
	CheckpointInterval     time.Duration
	// ProducerIDExpirationMs is producer.id.expiration.ms (0: one day);
	// ProducerIDExpirationCheckInterval is
	// producer.id.expiration.check.interval.ms (0: ten minutes).
	ProducerIDExpirationMs            int64
	ProducerIDExpirationCheckInterval time.Duration
	// RetentionCheckInterval is log.retention.check.interval.ms (0: five
	// minutes): how often idle segments are rolled by segment.ms and
	// segments past retention.ms or retention.bytes are deleted.
	RetentionCheckInterval time.Duration
	// MaxOpenSegments bounds the segments whose files are open at once
	// across all logs (three descriptors each, and two memory maps on the
	// real filesystem); the least recently used are closed first. Kafka
	// has no such setting (it keeps every segment's .log open). 0 derives
	// it from the descriptor limit: an eighth of RLIMIT_NOFILE, in segments,
	// between 32 and 16384.
	MaxOpenSegments int
	// SegmentIdleTimeout closes the files of segments unused for that long
	// (0: DefaultSegmentIdleTimeout), so idle partitions hold no
	// descriptors. Run applies it.
	SegmentIdleTimeout time.Duration
	// Cleaner configures the log cleaner (the zero value: no cleaner).
	Cleaner CleanerOptions
	// Parallelism is how many logs OpenLogs opens, and Close closes, at
	// once (0: DefaultParallelism). Opening and closing wait mostly on
	// fsyncs, which the filesystem commits together when they come
	// together.
	Parallelism int
	// AllDirsOffline is called once, on the manager's failure goroutine,
	// when an I/O error takes the last online log dir offline
	// (dirfailure.go). Kafka halts the broker then.
	AllDirsOffline func(err error)
}

// DefaultParallelism is ManagerOptions.Parallelism's default.
const DefaultParallelism = 16

// DirDescription is one log dir for DescribeLogDirs.
type DirDescription struct {
	Path       string
	Err        error
	TotalBytes int64
	FreeBytes  int64
	Partitions []PartitionDescription
}

// PartitionDescription is one partition's log in a dir.
type PartitionDescription struct {
	TopicPartition TopicPartition
	Size           int64
	OffsetLag      int64
	IsFuture       bool
}

// logDir is one entry of log.dirs.
type logDir struct {
	path string
	// health says whether the dir is online; an offline dir's logs are
	// not opened (dirfailure.go).
	health *dirHealth
	// cleanShutdown and prevBrokerEpoch come from the marker found at open.
	cleanShutdown   bool
	prevBrokerEpoch int64
	// checkpointed offsets read at open: kept for partitions not opened
	// yet so that writing the checkpoints does not forget them.
	recoveryPoints map[TopicPartition]int64
	logStarts      map[TopicPartition]int64
	highWatermarks map[TopicPartition]int64
	// cleanerOffsets are the first dirty offsets of compacted logs
	// (cleaner-offset-checkpoint), kept for every partition in the dir.
	cleanerOffsets map[TopicPartition]int64
	// states are the logs as the last clean shutdown described them
	// (logstate.go), read at open when the marker was there; each is
	// taken by the first open of its log.
	states map[TopicPartition]*logState
	// onDisk are the partition dirs found at open or created since.
	onDisk map[TopicPartition]bool
	// incoming are the logs moved in whose markers wait for a checkpoint
	// of the dir (logmove.go).
	incoming []TopicPartition
}

// Err is the error that took the dir offline, nil while it is online.
func (d *logDir) Err() error { return d.health.err() }

// Manager owns every partition log under log.dirs, their checkpoints and
// the background flush/roll/checkpoint work.
//
// Locking: mu guards logs, logDirOf, opening, closed and every logDir's
// maps; it may be held while calling into a Log (lock order Manager.mu →
// Log.mu), never the other way round, and never across opening a log
// (OpenLogs registers the partition in opening, opens it without mu, and
// whoever else asks for it meanwhile waits for that open). checkpointMu
// serialises checkpoint writes and is taken before mu (LOCKS.md has the
// whole node's order). Run's goroutine is the caller's; it copies the log
// list under mu and works on the copy. OpenLogs and Close run their opens
// and closes on up to Parallelism goroutines of their own, which end
// before they return.
type Manager struct {
	fsys   vfs.FS
	logger *slog.Logger
	now    func() time.Time
	opts   ManagerOptions

	mu       sync.Mutex
	dirs     []*logDir
	logs     map[TopicPartition]*Log
	logDirOf map[TopicPartition]*logDir
	// opening are the logs OpenLogs is opening, without mu.
	opening map[TopicPartition]*pendingOpen
	closed  bool
	// opens counts the OpenLogs calls in flight (Add under mu while not
	// closed): Close waits for them before it closes the logs.
	opens sync.WaitGroup

	// segments is shared by every log: it bounds their open files.
	segments *segmentCache
	// scratch lends every log's appends their working memory.
	scratch *scratchPool

	checkpointMu sync.Mutex
	brokerEpoch  atomic.Int64
	cleaner      *cleanerState
	// deletions are partition dirs renamed to -delete and waiting for
	// file.delete.delay.ms; guarded by mu.
	deletions []*dirDeletion

	// failedDirs wakes the failure goroutine (dirfailure.go), which runs
	// from OpenManager until Close closes stopFailures.
	failedDirs   chan *logDir
	stopFailures chan struct{}
	failuresDone chan struct{}

	// moves are the log moves in flight (logmove.go), guarded by mu;
	// moveWG counts their goroutines (Add under mu while not closed).
	moves  map[TopicPartition]*logMove
	moveWG sync.WaitGroup
	// moveHook, set by tests before any move, is called at named points
	// of each move (logmove.go).
	moveHook func(point string)
}

// dirDeletion removes one renamed partition dir, once.
type dirDeletion struct {
	once  sync.Once
	timer *time.Timer
	run   func()
}

// OpenManager opens every log dir: reads its checkpoints and clean-shutdown
// marker (removing the marker, which Close writes again) and lists the
// partitions on disk. A dir that fails is reported offline by DescribeDirs;
// OpenManager fails only when no dir is usable.
func OpenManager(opts ManagerOptions) (*Manager, error) {
	if opts.FS == nil {
		opts.FS = vfs.OSFS{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ExpiryNow == nil {
		opts.ExpiryNow = opts.Now
	}
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = 60 * time.Second
	}
	if opts.ProducerIDExpirationMs <= 0 {
		opts.ProducerIDExpirationMs = DefaultProducerIDExpirationMs
	}
	if opts.ProducerIDExpirationCheckInterval <= 0 {
		opts.ProducerIDExpirationCheckInterval = 10 * time.Minute
	}
	if opts.RetentionCheckInterval <= 0 {
		opts.RetentionCheckInterval = 5 * time.Minute
	}
	if opts.SegmentIdleTimeout <= 0 {
		opts.SegmentIdleTimeout = DefaultSegmentIdleTimeout
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = DefaultParallelism
	}
	if len(opts.Dirs) == 0 {
		return nil, errors.New("storage: no log dirs")
	}
	m := &Manager{
		fsys:     opts.FS,
		logger:   opts.Logger,
		now:      opts.Now,
		opts:     opts,
		logs:     map[TopicPartition]*Log{},
		logDirOf: map[TopicPartition]*logDir{},
		opening:  map[TopicPartition]*pendingOpen{},
		moves:    map[TopicPartition]*logMove{},
		segments: newSegmentCache(opts.MaxOpenSegments),
		scratch:  newScratchPool(),
		cleaner:  newCleanerState(opts.Cleaner),
	}
	m.brokerEpoch.Store(-1)
	online := 0
	for _, path := range opts.Dirs {
		d := m.openDir(path)
		if err := d.Err(); err != nil {
			m.logger.Error("log dir is offline", "dir", path, "err", err)
		} else {
			online++
		}
		m.dirs = append(m.dirs, d)
	}
	if online == 0 {
		return nil, fmt.Errorf("storage: every log dir is offline: %w", m.dirs[0].Err())
	}
	m.settleMoves()
	m.failedDirs = make(chan *logDir, len(m.dirs))
	m.stopFailures, m.failuresDone = make(chan struct{}), make(chan struct{})
	for _, d := range m.dirs {
		d.health.failed = func() { m.noteDirFailure(d) }
	}
	go func() {
		defer close(m.failuresDone)
		m.handleDirFailures(m.stopFailures)
	}()
	return m, nil
}

func (m *Manager) openDir(path string) *logDir {
	d := &logDir{
		path:            path,
		health:          &dirHealth{path: path},
		prevBrokerEpoch: -1,
		onDisk:          map[TopicPartition]bool{},
	}
	if err := vfs.MkdirAllDurable(m.fsys, path, 0o755); err != nil {
		return d.offline(fmt.Errorf("creating log dir %s: %w", path, err))
	}
	marker := filepath.Join(path, CleanShutdownFile)
	if data, err := vfs.ReadFile(m.fsys, marker); err == nil {
		d.cleanShutdown = true
		if epoch, err := decodeCleanShutdown(data); err == nil {
			d.prevBrokerEpoch = epoch
		}
		// The state file goes first, and the sync below makes both
		// removals durable: a file from this shutdown can never be taken
		// for the next one's.
		d.states = m.readLogStates(path)
		if err := m.fsys.Remove(marker); err != nil {
			return d.offline(fmt.Errorf("removing %s: %w", marker, err))
		}
		if err := m.fsys.SyncDir(path); err != nil {
			return d.offline(fmt.Errorf("syncing %s: %w", path, err))
		}
	}
	var err error
	if d.recoveryPoints, err = readOffsetCheckpoint(m.fsys, filepath.Join(path, RecoveryPointCheckpointFile)); err != nil {
		return d.offline(err)
	}
	if d.logStarts, err = readOffsetCheckpoint(m.fsys, filepath.Join(path, LogStartOffsetCheckpointFile)); err != nil {
		return d.offline(err)
	}
	if d.highWatermarks, err = readOffsetCheckpoint(m.fsys, filepath.Join(path, ReplicationCheckpointFile)); err != nil {
		return d.offline(err)
	}
	if d.cleanerOffsets, err = readOffsetCheckpoint(m.fsys, filepath.Join(path, CleanerOffsetCheckpointFile)); err != nil {
		return d.offline(err)
	}
	ents, err := m.fsys.ReadDir(path)
	if err != nil {
		return d.offline(fmt.Errorf("listing %s: %w", path, err))
	}
	for _, ent := range ents {
		name := ent.Name()
		if !ent.IsDir() {
			if tp, ok := parseMoveMarker(name); ok {
				d.incoming = append(d.incoming, tp)
			}
			continue
		}
		if strings.HasSuffix(name, deleteDirSuffix) || strings.HasSuffix(name, futureDirSuffix) {
			// A deletion interrupted by a stop, or a log move (which is
			// not resumed): finish it, or drop the copy.
			if err := m.fsys.RemoveAll(filepath.Join(path, name)); err != nil {
				m.logger.Warn("removing deleted partition dir", "dir", name, "err", err)
			}
			continue
		}
		if tp, ok := parsePartitionDir(name); ok {
			d.onDisk[tp] = true
		}
	}
	return d
}

// readLogStates reads a log dir's state file after a clean shutdown and
// removes it: it describes the logs only until they change. A missing or
// unreadable file leaves every log to be loaded from its directory.
func (m *Manager) readLogStates(path string) map[TopicPartition]*logState {
	name := filepath.Join(path, LogStateFile)
	data, err := vfs.ReadFile(m.fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var states map[TopicPartition]*logState
	if err == nil {
		states, err = decodeLogStates(data)
	}
	if err != nil {
		m.logger.Warn("ignoring the log state file; every log is loaded from its directory", "file", name, "err", err)
	}
	if err := m.fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.logger.Warn("removing the log state file", "file", name, "err", err)
	}
	return states
}

// offline marks a dir that failed to open; OpenManager reports it (the
// failure callback is not set yet).
func (d *logDir) offline(err error) *logDir {
	d.health.fail(err)
	return d
}

const deleteDirSuffix = "-delete"

// MetadataLogDirName is the controller's raft log dir, which lives in a
// log dir like a partition but belongs to the controller: the manager never
// opens, lists or deletes it.
const MetadataLogDirName = "__cluster_metadata-0"

// parsePartitionDir parses <topic>-<partition>; future and stray replica
// dirs (with a '.' suffix) and the metadata log are not partitions.
func parsePartitionDir(name string) (TopicPartition, bool) {
	if name == MetadataLogDirName {
		return TopicPartition{}, false
	}
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || strings.ContainsRune(name[i:], '.') {
		return TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

// SetBrokerEpoch records the broker epoch written into the clean-shutdown
// marker at Close (Kafka passes it to the controller on the next start).
func (m *Manager) SetBrokerEpoch(epoch int64) { m.brokerEpoch.Store(epoch) }

// PreviousBrokerEpoch is the broker epoch from the clean-shutdown marker
// found at open; ok is false after an unclean shutdown.
func (m *Manager) PreviousBrokerEpoch() (epoch int64, ok bool) {
	for _, d := range m.dirs {
		if d.Err() == nil && !d.cleanShutdown {
			return -1, false
		}
	}
	epoch = -1
	for _, d := range m.dirs {
		if d.Err() == nil {
			epoch = max(epoch, d.prevBrokerEpoch)
		}
	}
	return epoch, true
}

// GetOrCreate opens the partition's existing log (recovering it) or creates
// a new one, in the dir with the fewest partitions.
func (m *Manager) GetOrCreate(tp TopicPartition, topicID [16]byte, cfg config.Topic) (*Log, error) {
	res := m.OpenLogs([]LogRequest{{TopicPartition: tp, TopicID: topicID, Config: &cfg}})[0]
	return res.Log, res.Err
}

// LogRequest names a log for OpenLogs.
type LogRequest struct {
	TopicPartition TopicPartition
	TopicID        [16]byte
	// Config is the topic's configuration, which the log keeps, unchanged
	// by anyone after: one value the topic's logs share (a copy in each
	// is ~240 bytes of heap a partition).
	Config *config.Topic
}

// LogResult is OpenLogs' answer to one LogRequest.
type LogResult struct {
	Log *Log
	Err error
}

// pendingOpen is a log being opened by one OpenLogs call; others asking for
// the same partition wait for done, then read log and err.
type pendingOpen struct {
	done chan struct{}
	log  *Log
	err  error
}

// openJob is one log an OpenLogs call opens itself.
type openJob struct {
	index   int
	req     LogRequest
	dir     *logDir
	existed bool // the partition was on disk already
	made    bool // its dir has been created and the log dir synced
	pending *pendingOpen
	log     *Log
	err     error
}

// OpenLogs is GetOrCreate for many partitions: out[i] answers reqs[i].
// Logs already open are returned as they are; a partition that another
// call is opening is waited for, not opened twice. The new partitions'
// dirs are created first and each log dir is synced once for all of them;
// then the logs are opened (recovered where needed) on up to Parallelism
// goroutines, without mu.
func (m *Manager) OpenLogs(reqs []LogRequest) []LogResult {
	out := make([]LogResult, len(reqs))
	var jobs []*openJob
	waits := map[int]*pendingOpen{}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		for i := range out {
			out[i].Err = fmt.Errorf("log manager is closed: %w", kerr.NotLeaderForPartition)
		}
		return out
	}
	m.opens.Add(1)
	defer m.opens.Done()
	for i, r := range reqs {
		tp := r.TopicPartition
		if l, ok := m.logs[tp]; ok {
			out[i].Log = l
			continue
		}
		if p, ok := m.opening[tp]; ok {
			waits[i] = p
			continue
		}
		if d := m.offlineDirHolding(tp); d != nil {
			// Kafka does not recreate a partition of an offline dir
			// elsewhere: its data is still there.
			out[i].Err = fmt.Errorf("%s is in an offline log dir: %w", tp, d.Err())
			continue
		}
		j := &openJob{index: i, req: r, dir: m.dirHolding(tp), pending: &pendingOpen{done: make(chan struct{})}}
		j.existed = j.dir != nil
		if j.dir == nil {
			if j.dir = m.leastLoadedDir(); j.dir == nil {
				out[i].Err = fmt.Errorf("no online log dir for %s: %w", tp, kerr.KafkaStorageError)
				continue
			}
			// Counted at once, so that the rest of the batch spreads
			// over the dirs.
			j.dir.onDisk[tp] = true
		}
		m.opening[tp] = j.pending
		jobs = append(jobs, j)
	}
	m.mu.Unlock()

	m.makeDirs(jobs)
	forEachParallel(m.opts.Parallelism, len(jobs), func(k int) {
		if j := jobs[k]; j.err == nil {
			j.log, j.err = m.openLog(j)
		}
	})

	m.mu.Lock()
	for _, j := range jobs {
		tp := j.req.TopicPartition
		if j.err == nil {
			m.logs[tp] = j.log
			m.logDirOf[tp] = j.dir
		} else if !j.existed && !j.made {
			delete(j.dir.onDisk, tp)
		}
		delete(m.opening, tp)
		j.pending.log, j.pending.err = j.log, j.err
		close(j.pending.done)
		out[j.index] = LogResult{Log: j.log, Err: j.err}
	}
	m.mu.Unlock()
	for i, p := range waits {
		<-p.done
		out[i] = LogResult{Log: p.log, Err: p.err}
	}
	return out
}

// makeDirs creates the dirs of the jobs' new partitions, then syncs each
// log dir that got one, once: a partition dir must be durable before its
// log takes data (a flush syncs the partition dir, not its entry in the log
// dir), and a crash before the sync loses only empty partitions, which the
// metadata image recreates at the next start.
func (m *Manager) makeDirs(jobs []*openJob) {
	made := map[*logDir][]*openJob{}
	for _, j := range jobs {
		if j.existed {
			continue
		}
		dir := filepath.Join(j.dir.path, j.req.TopicPartition.String())
		if err := m.fsys.MkdirAll(dir, 0o755); err != nil {
			j.err = fmt.Errorf("creating %s: %w: %w", dir, kerr.KafkaStorageError, err)
			continue
		}
		made[j.dir] = append(made[j.dir], j)
	}
	for d, js := range made {
		err := m.fsys.SyncDir(d.path)
		for _, j := range js {
			if err != nil {
				// The dir may not survive a crash: it is not counted
				// as on disk, so that a retry creates and syncs again.
				j.err = fmt.Errorf("syncing %s: %w: %w", d.path, kerr.KafkaStorageError, err)
				continue
			}
			j.made = true
		}
	}
}

// openLog opens one job's log; its dir exists and is durable.
func (m *Manager) openLog(j *openJob) (*Log, error) {
	tp, d := j.req.TopicPartition, j.dir
	m.mu.Lock()
	opts := LogOptions{
		FS:                     m.fsys,
		Dir:                    filepath.Join(d.path, tp.String()),
		TopicPartition:         tp,
		TopicID:                j.req.TopicID,
		Config:                 *j.req.Config,
		sharedConfig:           j.req.Config,
		RecoveryPoint:          d.recoveryPoints[tp],
		LogStartOffset:         d.logStarts[tp],
		HighWatermark:          d.highWatermarks[tp],
		Logger:                 m.logger,
		Now:                    m.now,
		ExpiryNow:              m.opts.ExpiryNow,
		CleanShutdown:          j.existed && d.cleanShutdown,
		ProducerIDExpirationMs: m.opts.ProducerIDExpirationMs,
		segments:               m.segments,
		scratch:                m.scratch,
		dirDurable:             true,
		dirHealth:              d.health,
	}
	if j.existed {
		opts.state = d.states[tp]
	}
	delete(d.states, tp)
	m.mu.Unlock()
	l, err := OpenLog(opts)
	if err != nil {
		if errors.As(err, new(*kerr.Error)) {
			return nil, err
		}
		return nil, fmt.Errorf("opening log of %s: %w: %w", tp, kerr.KafkaStorageError, err)
	}
	return l, nil
}

// forEachParallel calls fn(0) ... fn(n-1) on up to workers goroutines and
// returns when every call has.
func forEachParallel(workers, n int, fn func(i int)) {
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

// dirHolding finds the online dir that has tp on disk; the caller holds mu.
func (m *Manager) dirHolding(tp TopicPartition) *logDir {
	for _, d := range m.dirs {
		if d.Err() == nil && d.onDisk[tp] {
			return d
		}
	}
	return nil
}

// offlineDirHolding finds the offline dir that has tp on disk (only dirs
// that went offline after opening know their partitions); the caller holds
// mu.
func (m *Manager) offlineDirHolding(tp TopicPartition) *logDir {
	for _, d := range m.dirs {
		if d.Err() != nil && d.onDisk[tp] {
			return d
		}
	}
	return nil
}

// leastLoadedDir is the online dir with the fewest partitions (Kafka's
// nextLogDirs); the caller holds mu.
func (m *Manager) leastLoadedDir() *logDir {
	var best *logDir
	for _, d := range m.dirs {
		if d.Err() != nil {
			continue
		}
		if best == nil || len(d.onDisk) < len(best.onDisk) {
			best = d
		}
	}
	return best
}

func (m *Manager) Get(tp TopicPartition) (*Log, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.logs[tp]
	return l, ok
}

// Delete removes a partition's log: the log is closed, its dir renamed to
// <topic>-<partition>.<uuid>-delete and removed after file.delete.delay.ms.
func (m *Manager) Delete(tp TopicPartition) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	// A log being opened is deleted once it is open.
	for p := m.opening[tp]; p != nil; p = m.opening[tp] {
		m.mu.Unlock()
		<-p.done
		m.mu.Lock()
	}
	d := m.dirHolding(tp)
	if d == nil {
		return nil
	}
	delayMs := config.DefaultTopic().FileDeleteDelayMs
	if mv := m.moves[tp]; mv != nil {
		mv.cancel() // its swap sees the log closed
	}
	if l, ok := m.logs[tp]; ok {
		delayMs = l.Config().FileDeleteDelayMs
		if err := l.Close(); err != nil {
			m.logger.Warn("closing deleted log", "partition", tp.String(), "err", err)
		}
		delete(m.logs, tp)
		delete(m.logDirOf, tp)
		// A move may have committed before the close: the log is where
		// its files are.
		if moved := m.dirOfPath(filepath.Dir(l.Dir())); moved != nil && moved != d {
			delete(d.onDisk, tp)
			d = moved
		}
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("naming deleted dir of %s: %w", tp, err)
	}
	from := filepath.Join(d.path, tp.String())
	to := filepath.Join(d.path, tp.String()+"."+hex.EncodeToString(id[:])+deleteDirSuffix)
	if err := m.fsys.Rename(from, to); err != nil {
		return fmt.Errorf("renaming %s for deletion: %w: %w", from, kerr.KafkaStorageError, err)
	}
	if err := m.fsys.SyncDir(d.path); err != nil {
		return fmt.Errorf("syncing %s: %w: %w", d.path, kerr.KafkaStorageError, err)
	}
	delete(d.onDisk, tp)
	delete(d.recoveryPoints, tp)
	delete(d.logStarts, tp)
	delete(d.highWatermarks, tp)
	delete(d.cleanerOffsets, tp)
	m.scheduleDirRemovalLocked(to, delayMs)
	return nil
}

// scheduleDirRemovalLocked removes a partition dir renamed to -delete
// after delayMs (file.delete.delay.ms), or at Close; the caller holds mu.
func (m *Manager) scheduleDirRemovalLocked(dir string, delayMs int64) {
	del := &dirDeletion{}
	del.run = func() {
		del.once.Do(func() {
			if err := m.fsys.RemoveAll(dir); err != nil {
				m.logger.Warn("removing deleted partition dir", "dir", dir, "err", err)
			}
		})
	}
	del.timer = time.AfterFunc(time.Duration(delayMs)*time.Millisecond, del.run)
	m.deletions = append(m.deletions, del)
}

// OnDisk lists the partitions that have a log on disk (to find stray logs).
func (m *Manager) OnDisk() []TopicPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []TopicPartition
	for _, d := range m.dirs {
		for tp := range d.onDisk {
			out = append(out, tp)
		}
	}
	sortTopicPartitions(out)
	return out
}

func sortTopicPartitions(tps []TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

// DescribeDirs reports every log dir with its usage and open logs.
func (m *Manager) DescribeDirs() []DirDescription {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]DirDescription, 0, len(m.dirs))
	for _, d := range m.dirs {
		desc := DirDescription{Path: d.path, Err: d.Err()}
		if desc.Err == nil {
			total, free, err := m.fsys.DiskUsage(d.path)
			if err != nil {
				desc.TotalBytes, desc.FreeBytes = -1, -1
			} else {
				desc.TotalBytes, desc.FreeBytes = total, free
			}
		}
		for tp, l := range m.logs {
			if m.logDirOf[tp] != d {
				continue
			}
			if err := l.Err(); err != nil && desc.Err == nil {
				desc.Err = err
			}
			desc.Partitions = append(desc.Partitions, PartitionDescription{TopicPartition: tp, Size: l.Size()})
		}
		desc.Partitions = append(desc.Partitions, m.futureDescriptions(d)...)
		sort.Slice(desc.Partitions, func(i, j int) bool {
			a, b := desc.Partitions[i].TopicPartition, desc.Partitions[j].TopicPartition
			if a.Topic != b.Topic {
				return a.Topic < b.Topic
			}
			return a.Partition < b.Partition
		})
		out = append(out, desc)
	}
	return out
}

// Checkpoint writes every online dir's recovery-point, log-start and
// replication (high watermark) checkpoints.
func (m *Manager) Checkpoint() error {
	return m.checkpoint(RecoveryPointCheckpointFile, LogStartOffsetCheckpointFile, ReplicationCheckpointFile)
}

// CheckpointLogStartOffsets writes every online dir's
// log-start-offset-checkpoint now. DeleteRecords calls it before it
// answers: a log start moved into a segment is known only from this file,
// and Kafka, which writes it every log.flush.start.offset.checkpoint.interval.ms,
// brings deleted records back after a crash in that window.
func (m *Manager) CheckpointLogStartOffsets() error {
	return m.checkpoint(LogStartOffsetCheckpointFile)
}

func (m *Manager) checkpoint(files ...string) error {
	m.checkpointMu.Lock()
	defer m.checkpointMu.Unlock()
	type dirOffsets struct {
		d                      *logDir
		recovery, starts, hwms map[TopicPartition]int64
		markers                []TopicPartition
	}
	m.mu.Lock()
	var work []dirOffsets
	for _, d := range m.dirs {
		if d.Err() != nil {
			continue
		}
		w := dirOffsets{d: d, recovery: map[TopicPartition]int64{}, starts: map[TopicPartition]int64{}, hwms: map[TopicPartition]int64{},
			markers: append([]TopicPartition(nil), d.incoming...)}
		// Partitions not opened yet keep their checkpointed offsets.
		for tp := range d.onDisk {
			if v, ok := d.recoveryPoints[tp]; ok {
				w.recovery[tp] = v
			}
			if v, ok := d.logStarts[tp]; ok {
				w.starts[tp] = v
			}
			if v, ok := d.highWatermarks[tp]; ok {
				w.hwms[tp] = v
			}
		}
		for tp, l := range m.logs {
			if m.logDirOf[tp] != d || l.Err() != nil {
				continue
			}
			w.recovery[tp] = l.RecoveryPoint()
			w.starts[tp] = l.LogStartOffset()
			w.hwms[tp] = l.HighWatermark()
		}
		work = append(work, w)
	}
	m.mu.Unlock()
	var errs []error
	for _, w := range work {
		written := true
		byName := map[string]map[TopicPartition]int64{
			RecoveryPointCheckpointFile:  w.recovery,
			LogStartOffsetCheckpointFile: w.starts,
			ReplicationCheckpointFile:    w.hwms,
		}
		for _, name := range files {
			offsets := byName[name]
			if err := writeOffsetCheckpoint(m.fsys, filepath.Join(w.d.path, name), offsets); err != nil {
				written = false
				errs = append(errs, err)
				// The old checkpoint stays whole (written aside, then
				// renamed): a full disk only delays the next one. Any
				// other failure takes the dir offline, as in Kafka.
				if !isNoSpace(err) {
					w.d.health.fail(err)
				}
			}
		}
		// A moved log's marker holds its offsets until all three files
		// do.
		if written && len(files) == 3 {
			m.removeMarkers(w.d, w.markers)
		}
	}
	return errors.Join(errs...)
}

// openLogs copies the open logs so background work runs without mu.
func (m *Manager) openLogs() []*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Log, 0, len(m.logs))
	for _, l := range m.logs {
		out = append(out, l)
	}
	return out
}

// CloseIdleSegments closes the files of segments unused for longer than
// idle (Run does it every half SegmentIdleTimeout) and returns how many.
func (m *Manager) CloseIdleSegments(idle time.Duration) int {
	return m.segments.closeIdle(time.Now().Add(-idle))
}

// OpenSegments is the number of segments whose files are open.
func (m *Manager) OpenSegments() int { return m.segments.openCount() }

// Run does the background work until ctx ends: flush.ms checks every
// FlushSchedulerInterval, checkpoints every CheckpointInterval, producer
// expiry, segment.ms rolls of idle segments and retention every
// RetentionCheckInterval, the closing of idle segments' files, and the log
// cleaner's threads (cleaner.go), which it waits for before it returns.
func (m *Manager) Run(ctx context.Context) {
	cleaners := make(chan struct{})
	go func() {
		defer close(cleaners)
		m.runCleaners(ctx)
	}()
	defer func() { <-cleaners }()
	idleFiles := time.NewTicker(m.opts.SegmentIdleTimeout / 2)
	defer idleFiles.Stop()
	checkpoint := time.NewTicker(m.opts.CheckpointInterval)
	defer checkpoint.Stop()
	expiry := time.NewTicker(m.opts.ProducerIDExpirationCheckInterval)
	defer expiry.Stop()
	retention := time.NewTicker(m.opts.RetentionCheckInterval)
	defer retention.Stop()
	var flushC <-chan time.Time
	if m.opts.FlushSchedulerInterval > 0 {
		flush := time.NewTicker(m.opts.FlushSchedulerInterval)
		defer flush.Stop()
		flushC = flush.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-flushC:
			for _, l := range m.openLogs() {
				if err := l.MaybeFlush(); err != nil {
					m.logger.Error("scheduled flush failed", "partition", l.tp.String(), "err", err)
				}
			}
		case <-checkpoint.C:
			if err := m.Checkpoint(); err != nil {
				m.logger.Error("writing checkpoints", "err", err)
			}
		case <-expiry.C:
			for _, l := range m.openLogs() {
				l.RemoveExpiredProducers()
			}
		case <-idleFiles.C:
			m.CloseIdleSegments(m.opts.SegmentIdleTimeout)
		case <-retention.C:
			for _, l := range m.openLogs() {
				if err := l.MaybeRoll(); err != nil {
					m.logger.Error("time-based roll failed", "partition", l.tp.String(), "err", err)
				}
				if _, err := l.DeleteRetainedSegments(); err != nil {
					m.logger.Error("retention failed", "partition", l.tp.String(), "err", err)
				}
			}
		}
	}
}

// Close flushes every log, writes the checkpoints and the clean-shutdown
// marker, and closes the files. Call it after Run has returned. Logs are
// flushed and closed Parallelism at a time; the marker is written only
// once every log is closed. A dir in which a log failed gets no marker, so
// its logs are recovered next time.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	for _, mv := range m.moves {
		mv.cancel()
	}
	m.mu.Unlock()
	// Moves in flight are abandoned (a restart removes their copies).
	m.moveWG.Wait()
	close(m.stopFailures)
	<-m.failuresDone
	// Opens in flight finish and register their logs, which are closed
	// below with the others.
	m.opens.Wait()
	m.mu.Lock()
	type openLog struct {
		tp  TopicPartition
		log *Log
		dir *logDir
	}
	logs := make([]openLog, 0, len(m.logs))
	for tp, l := range m.logs {
		logs = append(logs, openLog{tp: tp, log: l, dir: m.logDirOf[tp]})
	}
	deletions := m.deletions
	m.deletions = nil
	m.mu.Unlock()
	// Nothing reads a deleted partition after shutdown: remove them now.
	for _, del := range deletions {
		del.timer.Stop()
		del.run()
	}

	// Every log is closed with nothing synced, and then each dir's
	// filesystem is synced once: a few fsyncs per partition become one
	// syncfs(2) per log dir. Only then do the recovery points move to the
	// log ends, for the checkpoint below.
	started := time.Now()
	closeErrs := make([]error, len(logs))
	states := make([]*logState, len(logs))
	forEachParallel(m.opts.Parallelism, len(logs), func(i int) {
		l := logs[i].log
		st, err := l.closeForSyncFS()
		if err != nil || l.Err() != nil {
			closeErrs[i] = fmt.Errorf("closing %s: %w", logs[i].tp, errors.Join(err, l.Err()))
		}
		states[i] = st
	})
	var errs []error
	failedDirs := map[*logDir]bool{}
	dirStates := map[*logDir][]*logState{}
	for i, err := range closeErrs {
		if err != nil {
			errs = append(errs, err)
			failedDirs[logs[i].dir] = true
		} else if states[i] != nil && logs[i].dir != nil {
			dirStates[logs[i].dir] = append(dirStates[logs[i].dir], states[i])
		}
	}
	for _, d := range m.dirs {
		if d.Err() != nil || failedDirs[d] {
			continue
		}
		// Written before the sync, which makes it durable with the rest;
		// trusted only beside the marker written after it.
		name := filepath.Join(d.path, LogStateFile)
		if err := vfs.WriteFileUnsynced(m.fsys, name, encodeLogStates(dirStates[d])); err != nil {
			errs = append(errs, fmt.Errorf("writing %s: %w", name, err))
			failedDirs[d] = true
			continue
		}
		if err := m.fsys.SyncFS(d.path); err != nil {
			errs = append(errs, fmt.Errorf("syncing the filesystem of %s: %w", d.path, err))
			failedDirs[d] = true
		}
	}
	for _, ol := range logs {
		if ol.dir != nil && !failedDirs[ol.dir] && ol.dir.Err() == nil {
			ol.log.markSynced()
		}
	}
	m.logger.Info("flushed and closed the logs", "logs", len(logs), "took", time.Since(started).Round(time.Millisecond))
	if err := m.Checkpoint(); err != nil {
		errs = append(errs, err)
		return errors.Join(errs...)
	}
	for _, d := range m.dirs {
		if d.Err() != nil || failedDirs[d] {
			continue
		}
		marker := filepath.Join(d.path, CleanShutdownFile)
		if err := vfs.WriteFileAtomic(m.fsys, marker, encodeCleanShutdown(m.brokerEpoch.Load())); err != nil {
			errs = append(errs, fmt.Errorf("writing %s: %w", marker, err))
		}
	}
	return errors.Join(errs...)
}
