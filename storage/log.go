package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return tp.Topic + "-" + strconv.Itoa(int(tp.Partition)) }

// AppendOrigin says who appends: a client through Produce, a follower
// replicating, or a coordinator writing its own records.
type AppendOrigin int8

const (
	AppendClient AppendOrigin = iota
	AppendReplication
	AppendCoordinator
)

// LogOptions opens one partition's log.
type LogOptions struct {
	FS             vfs.FS
	Dir            string // <log.dir>/<topic>-<partition>
	TopicPartition TopicPartition
	TopicID        [16]byte
	Config         config.Topic
	RecoveryPoint  int64 // from recovery-point-offset-checkpoint; 0 if unknown
	LogStartOffset int64 // from log-start-offset-checkpoint; 0 if unknown
	HighWatermark  int64 // from replication-offset-checkpoint
	Logger         *slog.Logger
	Now            func() time.Time
	// ExpiryNow decides what is old enough to delete (ManagerOptions);
	// nil means Now.
	ExpiryNow func() time.Time
	// CleanShutdown says the log dir had Kafka's clean-shutdown marker:
	// segments are then trusted (checked, not rescanned). After an unclean
	// shutdown every segment from the recovery point on is rescanned.
	CleanShutdown bool
	// ProducerIDExpirationMs is producer.id.expiration.ms (0: Kafka's
	// default, one day).
	ProducerIDExpirationMs int64
	// segments bounds the open segments; the manager shares one among its
	// logs. Nil gives the log its own, with the default bound.
	segments *segmentCache
	// scratch lends appends their working memory; the manager shares one
	// among its logs. Nil gives the log its own.
	scratch *scratchPool
	// dirDurable: the manager created Dir and synced the log dir already
	// (once for a batch of new partitions).
	dirDurable bool
	// dirHealth is the log dir's online state (dirfailure.go): a failure
	// of this log takes the dir offline, and the dir's failure this log.
	// Nil for a log opened alone.
	dirHealth *dirHealth
	// state is the log as the last clean shutdown described it in the
	// log dir's state file (logstate.go), used when CleanShutdown is set.
	state *logState
	// sharedConfig, when set, is Config as a value the log keeps instead
	// of a copy of its own (LogRequest.Config).
	sharedConfig *config.Topic
}

// AppendResult describes a successful append (or an idempotent duplicate,
// answered with the offsets the original append got).
type AppendResult struct {
	FirstOffset    int64
	LastOffset     int64
	LogAppendTime  int64 // -1 unless message.timestamp.type=LogAppendTime
	LogStartOffset int64
	Duplicate      bool
}

// ErrUnexpectedAppendOffset refuses a replicated append whose offsets do
// not continue the log (Kafka's UnexpectedAppendOffsetException): the
// follower must truncate first.
var ErrUnexpectedAppendOffset = errors.New("replicated batch offsets do not continue the log")

// Log is one partition's log. Append, Read and the offset queries are safe
// for concurrent use.
//
// Locking (always taken in this order):
//   - cleanMu is held by the log cleaner for one cleaning round (compact.go);
//     Close sets stopCleaning and then waits for it, so that no cleaning
//     outlives the log. The cleaner takes mu under it only to swap.
//   - mu serialises every change: Append, roll, TruncateTo,
//     DeleteRecordsBefore, SetConfig, producer expiry, Close. It owns
//     producers and each segment's appender-owned fields.
//   - flushMu serialises fsyncs (Flush, the flush after a roll, Close); it
//     does not block appends. TruncateTo holds it too, so that a flush
//     that listed its segments before a truncation cannot move the
//     recovery point over what the truncation removed.
//   - segMu guards the segments slice: readers hold it shared while they use
//     a segment, writers exclusively only while they swap the slice.
//   - hwMu orders high watermark updates against the log end and log
//     start moving under them (AdvanceHighWatermark, truncation, log start
//     advances); it is held for a few loads and stores, never across I/O.
//   - a segment's fmu guards whether its files are open (a pin keeps them
//     open, segmentcache.go), then the manager-wide segment cache's mu. A
//     pin is released before the cache closes other segments, so no fmu is
//     held while another is taken.
//   - each index and the epoch cache have their own lock, taken last.
//
// The whole node's lock order is LOCKS.md at the repository root.
//
// Offsets readers need (log end, log start, high watermark, recovery point)
// are atomics: the appender stores the log end offset only after the bytes
// and the segment's size are published.
//
// Goroutines: the roll path starts one flush goroutine per roll (tracked by
// bg, awaited by Close); segment deletion runs on timers (file.delete.delay.ms),
// stopped and run at once by Close.
type Log struct {
	fsys       vfs.FS
	dir        string
	tp         TopicPartition
	topicID    [16]byte
	baseLogger *slog.Logger // shared: logger adds the partition per message
	now        func() time.Time
	// expiryNow decides what is old enough to delete (ManagerOptions).
	expiryNow func() time.Time
	expiryMs  int64
	segCache  *segmentCache

	cfg atomic.Pointer[config.Topic]

	mu        sync.Mutex
	producers *producerState
	// scratch lends each append its working memory (scratch.go).
	scratch   *scratchPool
	closed    bool
	deletions []*pendingDeletion

	flushMu sync.Mutex
	hwMu    sync.Mutex

	segMu    sync.RWMutex
	segments []*segment // ascending base offset; the last one is active

	epochs *epochCache

	logEndOffset   atomic.Int64
	logStartOffset atomic.Int64
	highWatermark  atomic.Int64
	recoveryPoint  atomic.Int64
	// tiered and highestRemote: see tiered.go (set by the remote log
	// manager).
	tiered        atomic.Bool
	highestRemote atomic.Int64
	lastFlushMs   atomic.Int64
	dirDirty      atomic.Bool // a segment was created since the last dir fsync
	// metadataUnsynced: partition.metadata was written and not synced;
	// the first flush syncs it, before any recovery point covers data.
	metadataUnsynced atomic.Bool
	failure          atomic.Pointer[error]
	// dirHealth is the log dir's; a move to another dir changes it.
	dirHealth atomic.Pointer[dirHealth]

	// firstUnstable is the first offset of the oldest open transaction
	// (MaxInt64: none), stored by the appender; unreplicated are the
	// transactions whose marker is not below the high watermark yet,
	// guarded by txnMu, a leaf. Both feed LastStableOffset.
	firstUnstable atomic.Int64
	txnMu         sync.Mutex
	unreplicated  []completedTxn
	// txnsHeld says a transaction may hold the LSO back (firstUnstable
	// or unreplicated is set): without one, appends and fetches skip
	// txnMu. Stored under txnMu.
	txnsHeld atomic.Bool
	// abortedEnd is at least the offset of the last abort marker in the
	// transaction indexes (-1: none): a read_committed fetch from above
	// it has no aborted transaction to report and looks no further.
	// Stored by the appender before the log end passes a new marker.
	abortedEnd atomic.Int64

	// cleanMu, stopCleaning: see the lock order. cleanerHorizonMs is the
	// earliest delete horizon of the tombstones and markers the last
	// cleaning kept (MaxInt64: none known).
	cleanMu          sync.Mutex
	stopCleaning     atomic.Bool
	cleanerHorizonMs atomic.Int64

	bg sync.WaitGroup
}

// pendingDeletion is a segment renamed to *.deleted (and closed), whose
// files are removed after file.delete.delay.ms.
type pendingDeletion struct {
	seg   *segment
	timer *time.Timer
	once  sync.Once
	// done: the files are removed; the log may forget the deletion.
	done atomic.Bool
}

func (d *pendingDeletion) run(logger *slog.Logger) {
	d.once.Do(func() {
		if err := d.seg.removeDeleted(); err != nil {
			logger.Warn("removing deleted segment", "segment", d.seg.baseOffset, "err", err)
		}
		d.done.Store(true)
	})
}

// OpenLog opens (creating if needed) and recovers a partition's log.
func OpenLog(opts LogOptions) (*Log, error) {
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
	if opts.ProducerIDExpirationMs <= 0 {
		opts.ProducerIDExpirationMs = DefaultProducerIDExpirationMs
	}
	if opts.segments == nil {
		opts.segments = newSegmentCache(0)
	}
	if opts.scratch == nil {
		opts.scratch = newScratchPool()
	}
	l := &Log{
		fsys:       opts.FS,
		dir:        opts.Dir,
		tp:         opts.TopicPartition,
		topicID:    opts.TopicID,
		baseLogger: opts.Logger,
		now:        opts.Now,
		expiryNow:  opts.ExpiryNow,
		expiryMs:   opts.ProducerIDExpirationMs,
		segCache:   opts.segments,
		scratch:    opts.scratch,
	}
	l.dirHealth.Store(opts.dirHealth)
	cfg := opts.sharedConfig
	if cfg == nil {
		own := opts.Config
		cfg = &own
	}
	l.cfg.Store(cfg)
	l.cleanerHorizonMs.Store(math.MaxInt64)
	l.firstUnstable.Store(math.MaxInt64)
	l.abortedEnd.Store(-1)
	l.highestRemote.Store(-1)
	// Until the replica layer says otherwise, a tiered topic's log keeps
	// what is not copied yet.
	l.tiered.Store(cfg.RemoteStorageEnable)
	// The partition dir is an entry in the log dir: durable only once the
	// log dir is synced. It must be before the log takes data: a flush
	// syncs the partition dir, not its entry in the log dir.
	if !opts.dirDurable {
		if err := vfs.MkdirAllDurable(l.fsys, l.dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating log dir %s: %w", l.dir, err)
		}
	}
	if opts.state != nil && opts.CleanShutdown {
		loaded, err := l.loadState(opts, opts.state)
		if err != nil {
			l.closeSegments()
			return nil, fmt.Errorf("loading log %s from the log state: %w", l.dir, err)
		}
		if loaded {
			return l, nil
		}
		l.logger().Info("the log state file does not describe the log as its checkpoints do; loading it from its directory")
	}
	if err := l.checkPartitionMetadata(opts.RecoveryPoint); err != nil {
		return nil, err
	}
	l.producers = newProducerState(l.fsys, l.dir)
	epochs, err := openEpochCache(l.fsys, l.dir)
	if errors.Is(err, errCorruptEpochCheckpoint) {
		// Kafka fails the log dir here. The batches carry their leader
		// epochs: recovering every segment rebuilds the checkpoint.
		l.logger().Warn("the leader-epoch checkpoint is corrupt; recovering the whole log to rebuild it", "err", err)
		opts.CleanShutdown = false
		opts.RecoveryPoint = 0
	} else if err != nil {
		return nil, err
	}
	l.epochs = epochs
	err = l.load(opts)
	l.producers.listed = nil // later loads list the directory again
	if err != nil {
		l.closeSegments()
		return nil, fmt.Errorf("loading log %s: %w", l.dir, err)
	}
	return l, nil
}

// checkPartitionMetadata compares partition.metadata's topic ID with the
// one given, writing the file when it is missing (Kafka refuses a log whose
// topic ID differs: the topic was deleted and recreated).
//
// A new file is written without an fsync (a new partition costs no fsync
// of its own): the log's first flush syncs it and then the partition dir
// before the recovery point claims any batch, so the file is durable
// before any data is. A crash before that may leave it empty or partial:
// with the recovery point still 0 (nothing of this log was ever flushed),
// such a file is written again from the topic ID the metadata image gives.
// Kafka also writes the file without waiting for its flush (a scheduled
// flush-metadata-file task).
func (l *Log) checkPartitionMetadata(recoveryPoint int64) error {
	name := filepath.Join(l.dir, PartitionMetadataFile)
	data, err := vfs.ReadFile(l.fsys, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return l.writePartitionMetadata(name)
	case err != nil:
		return fmt.Errorf("reading %s: %w", name, err)
	}
	id, err := decodePartitionMetadata(data)
	if err != nil {
		if recoveryPoint == 0 && l.topicID != ([16]byte{}) {
			l.logger().Warn("rewriting a partition.metadata a crash left unreadable before the log's first flush", "err", err)
			return l.writePartitionMetadata(name)
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	if l.topicID == ([16]byte{}) {
		l.topicID = id
		return nil
	}
	if id != l.topicID {
		return fmt.Errorf("%s holds topic ID %s, expected %s: %w", name, protocol.UUID(id).String(), protocol.UUID(l.topicID).String(), kerr.InconsistentTopicID)
	}
	return nil
}

// writePartitionMetadata writes the file, unsynced (checkPartitionMetadata).
func (l *Log) writePartitionMetadata(name string) error {
	if l.topicID == ([16]byte{}) {
		return nil
	}
	f, err := l.fsys.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.Write(encodePartitionMetadata(l.topicID))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	l.metadataUnsynced.Store(true)
	return nil
}

// syncPartitionMetadata syncs a partition.metadata written since the
// last flush (the flush syncs the dir after it).
func (l *Log) syncPartitionMetadata() error {
	if !l.metadataUnsynced.Load() {
		return nil
	}
	name := filepath.Join(l.dir, PartitionMetadataFile)
	f, err := l.fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("syncing %s: %w", name, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing %s: %w", name, err)
	}
	l.metadataUnsynced.Store(false)
	l.dirDirty.Store(true)
	return nil
}

// logger is the log's logger, naming the partition. It is made per
// message: a logger kept per log cost each partition 255 bytes of heap
// for messages that are rare.
func (l *Log) logger() *slog.Logger { return l.baseLogger.With("partition", l.tp.String()) }

// TopicID is the partition's topic ID (from partition.metadata when it was
// not given).
func (l *Log) TopicID() [16]byte { return l.topicID }

// load finds the segments, recovers what needs it and rebuilds the
// in-memory state (log end, epoch cache, producer state).
func (l *Log) load(opts LogOptions) error {
	cfg := l.config()
	bases, swapped, err := l.scanDir()
	if err != nil {
		return err
	}
	nowMs := l.now().UnixMilli()
	indexBytes := int64(cfg.SegmentIndexBytes)
	recoverFrom := opts.RecoveryPoint
	if opts.CleanShutdown {
		recoverFrom = 1<<63 - 1
	}
	recovering := false
	// txnsReady: the producer state stands at the first recovered
	// segment's base, and recovery replays each batch into it to rebuild
	// the transaction indexes.
	txnsReady := false
	for i, base := range bases {
		active := i == len(bases)-1
		size := int64(0)
		if active {
			size = indexBytes
		}
		nextBase := int64(1<<63 - 1)
		if !active {
			nextBase = bases[i+1]
		}
		if !recovering && nextBase > recoverFrom {
			recovering = true
		}
		var seg *segment
		if recovering || swapped[base] {
			seg, err = openSegmentToRecover(l.fsys, l.dir, base, indexBytes, nowMs, l.segCache)
		} else {
			seg, err = openSegment(l.fsys, l.dir, base, size, nowMs, l.segCache)
		}
		if err != nil {
			return err
		}
		l.segments = append(l.segments, seg)
		if prev := i - 1; prev >= 0 && l.segments[prev].nextOffset > base {
			// Overlapping segments: the older one ran past this base.
			return fmt.Errorf("segment %d overlaps the previous one ending at %d", base, l.segments[prev].nextOffset)
		}
		if !recovering && !swapped[base] {
			bad, err := seg.loadTrusted(int64(cfg.IndexIntervalBytes))
			if err != nil {
				return err
			}
			if !bad {
				continue
			}
			l.logger().Warn("segment failed its sanity check, recovering", "segment", base)
			recovering = true
		}
		if !txnsReady {
			// Kafka's recoverSegment rebuilds the producer state up to
			// the segment first, for the same reason: a transaction
			// the segment's markers end may have begun before it.
			logStart := max(opts.LogStartOffset, bases[0])
			if err := l.producersAt(l.segments[:i], logStart, base, nowMs); err != nil {
				return err
			}
			txnsReady = true
		}
		var txnErr error
		sc := l.scratch.get()
		cut, err := seg.recover(int64(cfg.IndexIntervalBytes), func(batch []byte, h protocol.BatchHeader) {
			if latest, ok := l.epochs.latest(); h.PartitionLeaderEpoch >= 0 && (!ok || h.PartitionLeaderEpoch > latest.Epoch) {
				l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
			}
			if txnErr == nil {
				txnErr = l.recoverTxnIndex(seg, batch, h, &sc.pending)
			}
		})
		l.scratch.put(sc)
		if err == nil {
			err = txnErr
		}
		if err != nil {
			return err
		}
		if cut > 0 {
			l.logger().Warn("truncated a torn or corrupt tail", "segment", base, "bytes", cut)
			// Everything after a corrupt batch is unreachable.
			for _, later := range bases[i+1:] {
				if err := removeSegmentFiles(l.fsys, l.dir, later); err != nil {
					return err
				}
			}
			break
		}
	}
	if len(l.segments) == 0 {
		start := max(opts.LogStartOffset, 0)
		seg, err := newSegment(l.fsys, l.dir, start, indexBytes, nowMs, l.segCache)
		if err != nil {
			return err
		}
		l.segments = append(l.segments, seg)
	}
	active := l.active()
	if err := active.becomeActive(indexBytes); err != nil {
		return err
	}
	active.rollJitterMs = jitter(cfg)
	for _, s := range l.segments[:len(l.segments)-1] {
		if err := s.trimIndexes(); err != nil {
			return err
		}
	}
	leo := active.nextOffset
	start := l.logStartFor(opts, l.segments[0].baseOffset)
	if start > leo {
		// The log start moved past data lost in a crash: start over there.
		l.logger().Warn("log start offset is beyond the recovered log end, emptying the log", "logStart", start, "logEnd", leo)
		if err := l.replaceAllSegments(start, nowMs); err != nil {
			return err
		}
	}
	return l.settle(opts, start, nowMs, false)
}

// logStartFor is the log start of a log whose first local segment starts
// at firstBase.
func (l *Log) logStartFor(opts LogOptions, firstBase int64) int64 {
	start := max(opts.LogStartOffset, firstBase)
	if l.config().RemoteStorageEnable && opts.LogStartOffset >= 0 && opts.LogStartOffset < start {
		// The older offsets are in remote storage: the checkpoint's log
		// start stands below the local one (Kafka's UnifiedLog with
		// remote storage enabled).
		start = opts.LogStartOffset
	}
	return start
}

// settle publishes a loaded log's offsets and brings the epoch cache and
// the producer state to them (producersLoaded: the producer state stands
// at the log end already, taken from the log state file).
func (l *Log) settle(opts LogOptions, start, nowMs int64, producersLoaded bool) error {
	leo := l.active().nextOffset
	l.logEndOffset.Store(leo)
	l.logStartOffset.Store(start)
	// A cut is written at once. Epochs the recovery assigned are not:
	// they belong to batches above the recovery point, and the flush that
	// moves the recovery point past them saves them first (saveUnsaved);
	// a crash before it recovers and assigns them again. (Writing them
	// here cost two fsyncs per partition at every start after kill -9.)
	endCut := l.epochs.truncateFromEnd(leo)
	startCut := l.epochs.truncateFromStart(start)
	if endCut || startCut {
		if err := l.epochs.write(); err != nil {
			return err
		}
	}
	if !producersLoaded {
		if err := l.rebuildProducerState(start, leo, nowMs); err != nil {
			return err
		}
	} else {
		if leo > l.producers.mapEndOffset {
			l.producers.mapEndOffset = leo
		}
		l.syncTxnState()
	}
	l.refreshAbortedEnd()
	// Segment files may be new (a fresh log, indexes rebuilt, a torn
	// tail's later segments removed): the next flush syncs the directory.
	l.dirDirty.Store(true)
	l.highWatermark.Store(min(max(opts.HighWatermark, start), leo))
	// After a recovery the recovery point stays where the checkpoint had
	// it (or the log end, if that is lower), as in Kafka's LogLoader: the
	// recovered bytes may live only in the page cache (the process died,
	// the machine did not), and the flush that later advances the recovery
	// point makes them durable before it claims them. Flushing them here
	// instead would fsync every recovered log before the broker serves: a
	// node with a hundred partitions spent most of a 15 s start-up after
	// kill -9 on a busy disk in those fsyncs. A second crash before the
	// flush recovers the same segments again.
	l.recoveryPoint.Store(min(max(opts.RecoveryPoint, start), leo))
	l.lastFlushMs.Store(nowMs)
	return nil
}

// scanDir removes leftovers (deleted segments, temporary files, a
// cleaning's output that was never swapped in, indexes without a log),
// completes the swaps of cleaned segments a crash interrupted, and returns
// the segments' base offsets in order, with the ones swapped in (their
// indexes are to be rebuilt).
func (l *Log) scanDir() ([]int64, map[int64]bool, error) {
	bases, swapped, snapshots, err := l.scanDirFiles()
	if err == nil {
		// The producer state's first loads take the listing's snapshots.
		if snapshots == nil {
			snapshots = []int64{}
		}
		l.producers.listed = snapshots
	}
	return bases, swapped, err
}

// scanDirFiles is scanDir, also returning the producer snapshots' offsets
// (ascending).
func (l *Log) scanDirFiles() ([]int64, map[int64]bool, []int64, error) {
	ents, err := l.fsys.ReadDir(l.dir)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("listing %s: %w", l.dir, err)
	}
	var swaps []int64
	swapLogs := map[int64]bool{}
	for _, ent := range ents {
		if name := ent.Name(); !ent.IsDir() && strings.HasSuffix(name, logSuffix+swapSuffix) {
			if base, err := strconv.ParseInt(strings.TrimSuffix(name, logSuffix+swapSuffix), 10, 64); err == nil && base >= 0 {
				swaps = append(swaps, base)
				swapLogs[base] = true
			}
		}
	}
	for _, ent := range ents {
		name := ent.Name()
		if ent.IsDir() {
			continue
		}
		leftover := strings.HasSuffix(name, deletedSuffix) || strings.HasSuffix(name, ".tmp") || strings.HasSuffix(name, cleanedSuffix)
		if strings.HasSuffix(name, swapSuffix) {
			// An index's swap file belongs to a swap only when its log's
			// swap file was made durable (swapCleaned renames it last).
			base, err := strconv.ParseInt(name[:max(strings.IndexByte(name, '.'), 0)], 10, 64)
			leftover = err != nil || !swapLogs[base]
		}
		if leftover {
			if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, nil, nil, fmt.Errorf("removing leftover %s: %w", name, err)
			}
		}
	}
	sort.Slice(swaps, func(i, j int) bool { return swaps[i] < swaps[j] })
	swapped, err := l.completeSwaps(swaps)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(swaps) > 0 {
		if ents, err = l.fsys.ReadDir(l.dir); err != nil {
			return nil, nil, nil, fmt.Errorf("listing %s: %w", l.dir, err)
		}
	}
	logs := map[int64]bool{}
	var indexes []string
	var snapshots []int64
	for _, ent := range ents {
		name := ent.Name()
		if ent.IsDir() {
			continue
		}
		switch {
		case strings.HasSuffix(name, logSuffix):
			base, err := strconv.ParseInt(strings.TrimSuffix(name, logSuffix), 10, 64)
			if err == nil && base >= 0 {
				logs[base] = true
			}
		case strings.HasSuffix(name, indexSuffix), strings.HasSuffix(name, timeIndexSuffix), strings.HasSuffix(name, txnIndexSuffix):
			indexes = append(indexes, name)
		case strings.HasSuffix(name, snapshotSuffix):
			if off, err := strconv.ParseInt(strings.TrimSuffix(name, snapshotSuffix), 10, 64); err == nil {
				snapshots = append(snapshots, off)
			}
		}
	}
	for _, name := range indexes {
		stem := name[:strings.IndexByte(name, '.')]
		base, err := strconv.ParseInt(stem, 10, 64)
		if err == nil && !logs[base] {
			if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, nil, nil, fmt.Errorf("removing orphan index %s: %w", name, err)
			}
		}
	}
	bases := make([]int64, 0, len(logs))
	for b := range logs {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	slices.Sort(snapshots)
	return bases, swapped, snapshots, nil
}

func removeSegmentFiles(fsys vfs.FS, dir string, base int64) error {
	return removeSegmentFilesNamed(fsys, dir, base, "")
}

// replaceAllSegments drops every segment and starts an empty one at base.
// The caller holds mu (or is still loading).
func (l *Log) replaceAllSegments(base, nowMs int64) error {
	old := l.segments
	for _, s := range old {
		if err := s.close(); err != nil {
			return err
		}
		if err := removeSegmentFiles(l.fsys, l.dir, s.baseOffset); err != nil {
			return err
		}
	}
	cfg := l.config()
	if err := removeSegmentFiles(l.fsys, l.dir, base); err != nil {
		return err
	}
	seg, err := newSegment(l.fsys, l.dir, base, int64(cfg.SegmentIndexBytes), nowMs, l.segCache)
	if err != nil {
		return err
	}
	seg.rollJitterMs = jitter(cfg)
	l.segMu.Lock()
	l.segments = []*segment{seg}
	l.segMu.Unlock()
	l.dirDirty.Store(true)
	return nil
}

// rebuildProducerState loads the newest snapshot at or below the log end
// and replays the batches after it.
func (l *Log) rebuildProducerState(logStart, leo, nowMs int64) error {
	if err := l.producersAt(l.segments, logStart, leo, nowMs); err != nil {
		return err
	}
	if leo > l.producers.mapEndOffset {
		l.producers.mapEndOffset = leo
	}
	l.syncTxnState()
	return nil
}

// producersAt loads the newest producer snapshot at or below offset and
// replays the batches of segs after it (segs end at or below offset).
func (l *Log) producersAt(segs []*segment, logStart, offset, nowMs int64) error {
	if err := l.producers.loadLatestSnapshot(logStart, offset, nowMs, l.expiryMs); err != nil {
		return err
	}
	from := max(l.producers.mapEndOffset, logStart)
	sc := l.scratch.get()
	defer l.scratch.put(sc)
	for _, s := range segs {
		if s.nextOffset <= from {
			continue
		}
		err := s.replay(from, func(_ int64, h protocol.BatchHeader) bool {
			if h.LastOffset() >= from {
				l.producers.replay(h, &sc.pending)
			}
			return true
		})
		if err != nil {
			return fmt.Errorf("rebuilding producer state: %w", err)
		}
	}
	return nil
}

// syncTxnState publishes the producer state's open and newly ended
// transactions for LastStableOffset; the caller holds mu (or is loading).
func (l *Log) syncTxnState() {
	first, ok := l.producers.firstUnstableOffset()
	if !ok && len(l.producers.completed) == 0 && !l.txnsHeld.Load() {
		return // no transaction, before or now: the common append
	}
	if !ok {
		first = math.MaxInt64
	}
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	for _, c := range l.producers.completed {
		// A replay after truncation ends some transactions again.
		known := false
		for _, u := range l.unreplicated {
			known = known || u.markerOffset == c.markerOffset
		}
		if !known {
			l.unreplicated = append(l.unreplicated, c)
		}
	}
	l.producers.completed = l.producers.completed[:0]
	l.firstUnstable.Store(first)
	l.txnsHeld.Store(first != math.MaxInt64 || len(l.unreplicated) > 0)
}

// LastStableOffset is where read_committed consumers stop (Kafka's LSO):
// the first offset of the oldest transaction that is open, or ended by a
// marker not yet below the high watermark; the high watermark when there
// is none; never below the log start.
func (l *Log) LastStableOffset() int64 {
	if !l.txnsHeld.Load() {
		return max(l.highWatermark.Load(), l.logStartOffset.Load())
	}
	l.txnMu.Lock()
	defer l.txnMu.Unlock()
	hw := l.highWatermark.Load()
	lso := min(hw, l.firstUnstable.Load())
	kept := l.unreplicated[:0]
	for _, u := range l.unreplicated {
		if u.markerOffset >= hw {
			kept = append(kept, u)
			lso = min(lso, u.firstOffset)
		}
	}
	l.unreplicated = kept
	l.txnsHeld.Store(l.firstUnstable.Load() != math.MaxInt64 || len(kept) > 0)
	return max(lso, l.logStartOffset.Load())
}

func jitter(cfg config.Topic) int64 {
	if cfg.SegmentJitterMs <= 0 || cfg.SegmentMs <= 0 {
		return 0
	}
	return rand.Int64N(min(cfg.SegmentJitterMs, cfg.SegmentMs))
}

func (l *Log) config() config.Topic { return *l.cfg.Load() }

// active is the last segment; the caller holds mu or segMu.
func (l *Log) active() *segment { return l.segments[len(l.segments)-1] }

// fail takes the log offline after an I/O error that may have left memory
// and disk out of step, and with it the whole log dir, as Kafka does
// (dirfailure.go).
func (l *Log) fail(err error) error {
	werr := fmt.Errorf("log %s is offline: %w: %w", l.tp, kerr.KafkaStorageError, err)
	if l.failure.CompareAndSwap(nil, &werr) {
		l.logger().Error("log taken offline after an I/O error", "err", err)
		if h := l.dirHealth.Load(); h != nil {
			h.fail(fmt.Errorf("%s: %w", l.tp, err))
		}
	}
	return werr
}

// Err is the I/O error that took the log, or its log dir, offline; nil
// while both are healthy.
func (l *Log) Err() error {
	if p := l.failure.Load(); p != nil {
		return *p
	}
	return l.dirHealth.Load().err()
}

// refuseNoSpace answers a write that failed for want of space and was
// undone, leaving the log as it was: the append is refused, the dir stays
// online (Gregor's departure from Kafka, dirfailure.go). Any other failure
// takes the log and its dir offline.
func (l *Log) refuseNoSpace(err error) error {
	if isNoSpace(err) {
		return storageError("appending to "+l.tp.String()+" (disk full)", err)
	}
	return l.fail(err)
}

// readFailed answers a failed read: an I/O error takes the log and its
// dir offline, as in Kafka; anything else (a segment closed under the
// reader) fails only this read.
func (l *Log) readFailed(what string, err error) error {
	if isIOFailure(err) {
		return l.fail(fmt.Errorf("%s: %w", what, err))
	}
	return storageError(what, err)
}

func storageError(what string, err error) error {
	return fmt.Errorf("%s: %w: %w", what, kerr.KafkaStorageError, err)
}

func (l *Log) errorResult() AppendResult {
	return AppendResult{FirstOffset: -1, LastOffset: -1, LogAppendTime: -1, LogStartOffset: l.logStartOffset.Load()}
}

// Append validates batches (a produce request's records field, one or more
// v2 record batches), assigns offsets, stamps the leader epoch and, when
// configured, LogAppendTime, and writes them. Errors are *kerr.Error values
// (possibly wrapped) such as CORRUPT_MESSAGE, INVALID_RECORD,
// MESSAGE_TOO_LARGE, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
// INVALID_TIMESTAMP; per-record problems come with RecordErrors.
//
// Append stamps offsets and epochs into batches in place: the caller hands
// the buffer over. Replicated batches (AppendReplication) keep their
// offsets and epochs and are only CRC-checked; they must continue the log.
func (l *Log) Append(batches []byte, leaderEpoch int32, origin AppendOrigin) (AppendResult, []protocol.RecordError, error) {
	return l.append(batchSource{rest: batches}, leaderEpoch, origin, 0)
}

// AppendVerified is Append for a client's batches that StartTxnVerification
// and the transaction coordinator verified: guard is what
// StartTxnVerification returned (0: none).
func (l *Log) AppendVerified(batches []byte, leaderEpoch int32, origin AppendOrigin, guard uint64) (AppendResult, []protocol.RecordError, error) {
	return l.append(batchSource{rest: batches}, leaderEpoch, origin, guard)
}

// AppendBatch is Append for one batch that the caller has already split off
// and parsed (protocol.ParseProduceBatch, or protocol.NextBatch): its header
// goes through validation, offset assignment, the producer-state checks and
// indexing without being parsed again. b.Bytes is handed over as with
// Append.
func (l *Log) AppendBatch(b protocol.Batch, leaderEpoch int32, origin AppendOrigin) (AppendResult, []protocol.RecordError, error) {
	return l.append(batchSource{parsed: b, single: true}, leaderEpoch, origin, 0)
}

// AppendBatchVerified is AppendBatch with a verification guard, as
// AppendVerified.
func (l *Log) AppendBatchVerified(b protocol.Batch, leaderEpoch int32, origin AppendOrigin, guard uint64) (AppendResult, []protocol.RecordError, error) {
	return l.append(batchSource{parsed: b, single: true}, leaderEpoch, origin, guard)
}

// batchSource yields the batches of one append: split one at a time from
// the bytes given to Append, or the single batch given to AppendBatch.
type batchSource struct {
	rest   []byte
	parsed protocol.Batch
	single bool
}

// whole is every byte of the append, what one write stores when no batch
// was rewritten.
func (s *batchSource) whole() []byte {
	if s.single {
		return s.parsed.Bytes
	}
	return s.rest
}

func (s *batchSource) done() bool {
	if s.single {
		return len(s.parsed.Bytes) == 0
	}
	return len(s.rest) == 0
}

// next returns the next batch with its header; index counts the batches
// already taken, for error messages.
func (s *batchSource) next(index int) (protocol.Batch, error) {
	if s.single {
		b := s.parsed
		s.parsed = protocol.Batch{}
		if b.Header.Magic != 2 || b.Header.TotalSize() != int64(len(b.Bytes)) || len(b.Bytes) < protocol.BatchHeaderSize {
			return b, fmt.Errorf("batch %d of the append: its header does not describe its %d bytes: %w", index, len(b.Bytes), kerr.CorruptMessage)
		}
		return b, nil
	}
	batch, tail, h, err := protocol.NextBatch(s.rest)
	if err != nil {
		return protocol.Batch{}, fmt.Errorf("batch %d of the append: %v: %w", index, err, kerr.CorruptMessage)
	}
	s.rest = tail
	return protocol.Batch{Bytes: batch, Header: h}, nil
}

func (l *Log) append(src batchSource, leaderEpoch int32, origin AppendOrigin, guard uint64) (AppendResult, []protocol.RecordError, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.Err(); err != nil {
		return l.errorResult(), nil, err
	}
	if l.closed {
		return l.errorResult(), nil, fmt.Errorf("log %s is closed: %w", l.tp, kerr.NotLeaderForPartition)
	}
	if src.done() {
		return l.errorResult(), nil, nil
	}
	whole := src.whole()
	cfg := l.config()
	now := l.now().UnixMilli()
	sc := l.scratch.get()
	metas, stored, markers := sc.metas[:0], sc.stored[:0], sc.markers[:0]
	defer func() {
		sc.metas, sc.stored, sc.markers = metas, stored, markers
		l.scratch.put(sc)
	}()
	rewritten := false
	next := l.logEndOffset.Load()
	var maxTs int64 = -1
	for !src.done() {
		b, err := src.next(len(metas))
		if err != nil {
			return l.errorResult(), nil, err
		}
		if origin == AppendReplication {
			if !protocol.CheckBatchCRC(b.Bytes) {
				return l.errorResult(), nil, fmt.Errorf("replicated batch at offset %d fails its CRC: %w", b.Header.BaseOffset, kerr.CorruptMessage)
			}
			if b.Header.BaseOffset < next || b.Header.LastOffset() < b.Header.BaseOffset {
				return l.errorResult(), nil, fmt.Errorf("replicated batch %d-%d, log end %d: %w", b.Header.BaseOffset, b.Header.LastOffset(), next, ErrUnexpectedAppendOffset)
			}
		} else {
			out, info, recErrs, err := protocol.ValidateParsedBatch(b, l.validateOptions(cfg, now, origin))
			if err != nil {
				return l.errorResult(), recErrs, err
			}
			if info.Rewritten || len(out) != len(b.Bytes) || &out[0] != &b.Bytes[0] {
				rewritten = true
			}
			// Validation hands back the header of what it returns, so
			// the batch is not parsed again. Base offset and leader
			// epoch lie outside the CRC; validation already stamped
			// LogAppendTime with this same clock reading, so the CRC it
			// checked or set stays right and is not computed again.
			b = protocol.Batch{Bytes: out, Header: info.Header}
			b.SetBaseOffset(next)
			b.SetPartitionLeaderEpoch(leaderEpoch)
			if cfg.LogAppendTime && !(b.Header.LogAppendTime() && b.Header.MaxTimestamp == now) {
				b.SetLogAppendTime(now)
			}
		}
		h := b.Header
		stored = append(stored, b.Bytes)
		metas = append(metas, appendedBatch{
			size: h.TotalSize(), baseOffset: h.BaseOffset, lastOffset: h.LastOffset(),
			maxTimestamp: h.MaxTimestamp, leaderEpoch: h.PartitionLeaderEpoch,
		})
		maxTs = max(maxTs, h.MaxTimestamp)
		next = h.LastOffset() + 1
		if !h.HasProducerID() {
			continue
		}
		markerEpoch := int32(-1)
		if h.IsControl() {
			// One read of the control record serves the transaction index
			// (its type) and the producer state's coordinator fencing (its
			// epoch); a follower copies what its leader wrote.
			typ, epoch, err := endTxnMarker(b.Bytes)
			if err != nil && origin != AppendReplication {
				return l.errorResult(), nil, err
			}
			markerEpoch = epoch
			markers = append(markers, txnMarker{producerID: h.ProducerID, offset: h.BaseOffset, abort: typ == protocol.ControlAbort})
		}
		if origin == AppendClient {
			if dup, ok := l.producers.checkDuplicate(h); ok {
				return AppendResult{
					FirstOffset:    dup.firstOffset(),
					LastOffset:     dup.lastOffset,
					LogAppendTime:  dup.timestamp,
					LogStartOffset: l.logStartOffset.Load(),
					Duplicate:      true,
				}, nil, nil
			}
		}
		if err := sc.pending.add(l.producers, h, origin, guard, markerEpoch); err != nil {
			return l.errorResult(), nil, err
		}
	}

	data := whole
	if rewritten {
		total := 0
		for _, b := range stored {
			total += len(b)
		}
		data = make([]byte, 0, total)
		for _, b := range stored {
			data = append(data, b...)
		}
	}
	if int64(len(data)) > int64(cfg.SegmentBytes) {
		return l.errorResult(), nil, fmt.Errorf("append of %d bytes exceeds segment.bytes %d: %w", len(data), cfg.SegmentBytes, kerr.RecordListTooLarge)
	}
	first := metas[0].baseOffset
	seg := l.active()
	if seg.shouldRoll(cfg, int64(len(data)), next-1, maxTs, now) {
		if err := l.roll(max(first, l.logEndOffset.Load()), now); err != nil {
			var undone *rollUndoneError
			if errors.As(err, &undone) {
				return l.errorResult(), nil, l.refuseNoSpace(undone.err)
			}
			return l.errorResult(), nil, l.fail(err)
		}
		seg = l.active()
	}
	written, cutBack, err := seg.append(data, metas, int64(cfg.IndexIntervalBytes))
	if seg.indexCreated {
		// A new segment's index file was created: the next flush syncs
		// its directory entry.
		seg.indexCreated = false
		l.dirDirty.Store(true)
	}
	if !written {
		if !cutBack {
			return l.errorResult(), nil, l.fail(err)
		}
		// The write failed and was cut back: the log is as it was.
		return l.errorResult(), nil, l.refuseNoSpace(err)
	}
	ended := len(l.producers.completed)
	sc.pending.commit(l.producers, next)
	if len(markers) > 0 {
		// Before the log end passes the markers: a read_committed
		// fetch that can see past an aborted transaction finds it.
		if ierr := l.indexAborts(seg, markers, l.producers.completed[ended:]); ierr != nil && err == nil {
			err = ierr
		}
	}
	l.syncTxnState()
	// New epochs are assigned before the log end moves over their batches:
	// a flush that reads the new log end then finds them unsaved and
	// writes them before it claims the batches (epochcache.go).
	for _, m := range metas {
		if m.leaderEpoch >= 0 {
			l.epochs.assign(m.leaderEpoch, m.baseOffset)
		}
	}
	l.logEndOffset.Store(next)
	res := AppendResult{FirstOffset: first, LastOffset: next - 1, LogAppendTime: -1, LogStartOffset: l.logStartOffset.Load()}
	if cfg.LogAppendTime && origin != AppendReplication {
		res.LogAppendTime = now
	}
	if err != nil {
		// The batches are in the log but an index write failed.
		return res, nil, l.fail(err)
	}
	// flush.messages: Kafka counts the messages above the recovery point.
	if cfg.FlushMessages > 0 && next-l.recoveryPoint.Load() >= cfg.FlushMessages {
		if err := l.flushUpTo(next); err != nil {
			return res, nil, err
		}
	}
	return res, nil, nil
}

func (l *Log) validateOptions(cfg config.Topic, nowMs int64, origin AppendOrigin) protocol.ValidateOptions {
	return protocol.ValidateOptions{
		SegmentBytes:         cfg.SegmentBytes,
		Topic:                l.tp.Topic,
		Partition:            l.tp.Partition,
		NowMs:                nowMs,
		LogAppendTime:        cfg.LogAppendTime,
		TimestampBeforeMaxMs: cfg.MessageTimestampBeforeMaxMs,
		TimestampAfterMaxMs:  cfg.MessageTimestampAfterMaxMs,
		Compacted:            cfg.Compact,
		MaxBatchBytes:        cfg.MaxMessageBytes,
		TargetCodec:          targetCodec(cfg.CompressionType),
		FromClient:           origin == AppendClient,
	}
}

// targetCodec maps compression.type to the codec the broker stores; -1
// keeps the producer's.
func targetCodec(compressionType string) protocol.Codec {
	switch compressionType {
	case "uncompressed", "none":
		return protocol.CodecNone
	case "gzip":
		return protocol.CodecGzip
	case "snappy":
		return protocol.CodecSnappy
	case "lz4":
		return protocol.CodecLZ4
	case "zstd":
		return protocol.CodecZstd
	}
	return protocol.TargetCodecProducer
}

// roll closes the active segment for appends and starts a new one at
// newBase; the old one is flushed in the background (Kafka's flush on
// roll), which advances the recovery point. The caller holds mu.
func (l *Log) roll(newBase, nowMs int64) error {
	cfg := l.config()
	old := l.active()
	// An empty active segment is replaced rather than kept.
	replace := old.size.Load() == 0
	if replace && old.baseOffset == newBase {
		return nil
	}
	if !replace {
		if err := old.onBecomeInactive(); err != nil {
			if !isNoSpace(err) {
				return err
			}
			// No room to create an index the segment never needed
			// before: it stays active, its indexes preallocated again.
			if aerr := old.becomeActive(int64(cfg.SegmentIndexBytes)); aerr != nil {
				return errors.Join(err, aerr)
			}
			return &rollUndoneError{err: err}
		}
	}
	if err := removeSegmentFiles(l.fsys, l.dir, newBase); err != nil {
		return err
	}
	seg, err := newSegment(l.fsys, l.dir, newBase, int64(cfg.SegmentIndexBytes), nowMs, l.segCache)
	if err != nil {
		if !isNoSpace(err) {
			return err
		}
		// No room for the new segment: the old one stays active, its
		// indexes preallocated again. The new one's files, if any, are
		// removed by the next roll (or are an empty segment at the log
		// end after a restart).
		if !replace {
			if aerr := old.becomeActive(int64(cfg.SegmentIndexBytes)); aerr != nil {
				return errors.Join(err, aerr)
			}
		}
		return &rollUndoneError{err: err}
	}
	seg.rollJitterMs = jitter(cfg)
	l.segMu.Lock()
	if replace {
		l.segments[len(l.segments)-1] = seg
	} else {
		l.segments = append(l.segments, seg)
	}
	l.segMu.Unlock()
	l.dirDirty.Store(true)
	if replace {
		if err := old.close(); err != nil {
			return err
		}
		if err := removeSegmentFiles(l.fsys, l.dir, old.baseOffset); err != nil {
			return err
		}
	}
	if l.producers.mapEndOffset < newBase {
		l.producers.mapEndOffset = newBase
	}
	if err := l.producers.takeSnapshot(); err != nil {
		if !isNoSpace(err) {
			return err
		}
		// A snapshot only shortens recovery (an older one and the log
		// rebuild the state), and a failed one leaves no partial file
		// under its name: the next roll or close takes it.
		l.logger().Warn("no room for the producer snapshot of a roll", "err", err)
	}
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		if err := l.flushUpTo(newBase); err != nil {
			l.logger().Error("flushing rolled segment", "err", err)
		}
	}()
	return nil
}

// rollUndoneError is a roll that failed for want of space and left the
// log as it was.
type rollUndoneError struct{ err error }

func (e *rollUndoneError) Error() string { return "rolling a segment: " + e.err.Error() }
func (e *rollUndoneError) Unwrap() error { return e.err }

// MaybeRoll rolls the active segment when segment.ms (with its jitter) has
// passed, so that an idle partition's segment becomes eligible for
// retention. The manager calls it periodically.
//
// A compacted log is left alone. Kafka rolls by segment.ms only on an
// append, whose records go to the new segment, so a compacted log's last
// record stays in the active segment, which the cleaner never cleans. An
// idle roll would let the cleaner remove that record (a tombstone, once
// delete.retention.ms has passed), and a client that takes the end offset
// and waits to read the record at end offset - 1 before it trusts what it
// read (Karapace's schema reader does) would wait for ever.
func (l *Log) MaybeRoll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.Err() != nil {
		return l.Err()
	}
	cfg := l.config()
	if cfg.Compact {
		return nil
	}
	now := l.now().UnixMilli()
	seg := l.active()
	if seg.size.Load() == 0 {
		return nil
	}
	age := now - seg.createdMs
	if seg.firstBatchTs >= 0 {
		age = now - seg.firstBatchTs
	}
	if age <= cfg.SegmentMs-seg.rollJitterMs {
		return nil
	}
	if err := l.roll(l.logEndOffset.Load(), now); err != nil {
		if errors.As(err, new(*rollUndoneError)) {
			return err // tried again at the next check
		}
		return l.fail(err)
	}
	return nil
}

// Flush fsyncs the log up to its end and advances the recovery point.
func (l *Log) Flush() error {
	return l.flushUpTo(l.logEndOffset.Load())
}

// flushUpTo fsyncs every segment that may hold data below offset and moves
// the recovery point there. A failed fsync takes the log offline: after it
// the kernel may have dropped the dirty pages.
func (l *Log) flushUpTo(offset int64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if err := l.Err(); err != nil {
		return err
	}
	// Never claim more than exists now: a roll's flush may start after a
	// truncation lowered the log end below the offset it was asked for.
	offset = min(offset, l.logEndOffset.Load())
	rp := l.recoveryPoint.Load()
	if offset <= rp {
		return nil
	}
	l.segMu.RLock()
	var toSync []*segment
	for i, s := range l.segments {
		if s.baseOffset >= offset {
			break
		}
		if i+1 < len(l.segments) && l.segments[i+1].baseOffset <= rp {
			continue
		}
		toSync = append(toSync, s)
	}
	l.segMu.RUnlock()
	for _, s := range toSync {
		if err := s.sync(); err != nil {
			if s.deleted.Load() || errors.Is(err, errSegmentClosed) {
				continue // removed or closed meanwhile: nothing left to make durable
			}
			return l.fail(err)
		}
	}
	// Epochs assigned by the appends being claimed are written now, before
	// the recovery point passes their batches (epochcache.go).
	if wrote, err := l.epochs.saveUnsaved(); err != nil {
		if isNoSpace(err) {
			// Written aside and renamed: the old checkpoint is whole,
			// and the recovery point stays until a flush saves it.
			return storageError("saving the leader epochs of "+l.tp.String(), err)
		}
		return l.fail(err)
	} else if wrote {
		l.dirDirty.Store(true)
	}
	if err := l.syncPartitionMetadata(); err != nil {
		return l.fail(err)
	}
	// New files (segments, the epoch checkpoint, partition.metadata) are
	// durable only once their directory entries are.
	if l.dirDirty.Swap(false) {
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return l.fail(fmt.Errorf("syncing %s: %w", l.dir, err))
		}
	}
	for {
		cur := l.recoveryPoint.Load()
		if offset <= cur || l.recoveryPoint.CompareAndSwap(cur, offset) {
			break
		}
	}
	l.lastFlushMs.Store(l.now().UnixMilli())
	return nil
}

// MaybeFlush flushes when flush.ms has passed since the last flush and
// there is unflushed data (the manager's flush scheduler).
func (l *Log) MaybeFlush() error {
	cfg := l.config()
	if l.logEndOffset.Load() <= l.recoveryPoint.Load() {
		return nil
	}
	if l.now().UnixMilli()-l.lastFlushMs.Load() < cfg.FlushMs {
		return nil
	}
	return l.Flush()
}

// Read returns the batches starting with the one containing offset, up to
// maxBytes (but at least the first batch when minOneBatch, KIP-74), and never
// a batch whose base offset is >= maxOffset (the high watermark or LSO).
// offset outside [LogStartOffset, LogEndOffset] is OFFSET_OUT_OF_RANGE. At
// the log end the range is empty.
//
// A non-empty range holds its segment file open, even after the segment is
// deleted or the log closed, until the caller calls its Release: once the
// bytes are sent or copied, or when the response is dropped. A range never
// released keeps a closed segment's descriptor open for good.
func (l *Log) Read(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (vfs.FileRange, error) {
	if err := l.Err(); err != nil {
		return vfs.FileRange{}, err
	}
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	r, _, err := l.readLocked(offset, maxBytes, maxOffset, minOneBatch)
	return r, err
}

// ReadWithAborted is Read for a read_committed fetch: it also appends to
// aborted the aborted transactions that overlap the batches returned,
// from offset to the end of the last batch (Kafka's
// addAbortedTransactions), which the consumer needs to drop their
// records. An empty read reports none. A log in which no transaction
// aborted at or after offset answers as Read does, with nothing more
// to do.
func (l *Log) ReadWithAborted(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool, aborted []AbortedTransaction) (vfs.FileRange, []AbortedTransaction, error) {
	if err := l.Err(); err != nil {
		return vfs.FileRange{}, aborted, err
	}
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	r, next, err := l.readLocked(offset, maxBytes, maxOffset, minOneBatch)
	if err != nil || r.Size == 0 {
		return r, aborted, err
	}
	return r, l.appendAbortedLocked(aborted, offset, next), nil
}

// readLocked is Read under segMu; next is the offset after the last
// batch of the range.
func (l *Log) readLocked(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (vfs.FileRange, int64, error) {
	if len(l.segments) == 0 {
		return vfs.FileRange{}, 0, fmt.Errorf("log %s is closed: %w", l.tp, kerr.NotLeaderForPartition)
	}
	start, end := l.logStartOffset.Load(), l.logEndOffset.Load()
	if offset < start || offset > end {
		return vfs.FileRange{}, 0, fmt.Errorf("offset %d is outside [%d, %d] of %s: %w", offset, start, end, l.tp, kerr.OffsetOutOfRange)
	}
	if offset < l.segments[0].baseOffset {
		return vfs.FileRange{}, 0, l.errTiered(offset)
	}
	if offset == end || offset >= maxOffset {
		return vfs.FileRange{}, 0, nil
	}
	i := l.floorSegment(offset)
	for ; i < len(l.segments); i++ {
		r, next, found, err := l.segments[i].read(offset, maxBytes, maxOffset, minOneBatch)
		if err != nil && (!found || r.Size == 0) {
			return vfs.FileRange{}, 0, l.readFailed("reading "+l.tp.String(), err)
		}
		if found {
			return r, next, nil
		}
	}
	return vfs.FileRange{}, 0, nil
}

// AbortedTransactions lists the aborted transactions that overlap
// [fetchOffset, upperBound), appended to dst (Kafka's
// collectAbortedTransactions): the transaction indexes are searched from
// the segment holding fetchOffset on, up to the first entry whose last
// stable offset reaches upperBound.
func (l *Log) AbortedTransactions(fetchOffset, upperBound int64, dst []AbortedTransaction) []AbortedTransaction {
	if l.abortedEnd.Load() < fetchOffset {
		return dst
	}
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	return l.appendAbortedLocked(dst, fetchOffset, upperBound)
}

// appendAbortedLocked is AbortedTransactions under segMu.
func (l *Log) appendAbortedLocked(dst []AbortedTransaction, fetchOffset, upperBound int64) []AbortedTransaction {
	if l.abortedEnd.Load() < fetchOffset {
		// No marker at or after fetchOffset: nothing can overlap.
		return dst
	}
	l.eachAbortedLocked(fetchOffset, upperBound, func(a abortedTxn) {
		dst = append(dst, AbortedTransaction{ProducerID: a.producerID, FirstOffset: a.firstOffset})
	})
	return dst
}

// eachAbortedLocked calls fn for each aborted transaction overlapping
// [fetchOffset, upperBound), in marker order; the caller holds segMu.
func (l *Log) eachAbortedLocked(fetchOffset, upperBound int64, fn func(abortedTxn)) {
	for i := l.floorSegment(fetchOffset); i < len(l.segments); i++ {
		if l.segments[i].txns.collect(fetchOffset, upperBound, fn) {
			return
		}
	}
}

// refreshAbortedEnd recomputes abortedEnd from the segments (after
// truncation or cleaning removed entries); the caller holds mu or is
// loading.
func (l *Log) refreshAbortedEnd() {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	end := int64(-1)
	for _, s := range l.segments {
		end = max(end, s.txns.lastMarker())
	}
	l.abortedEnd.Store(end)
}

// floorSegment is the index of the segment holding offset (the last one
// whose base offset is <= offset); the caller holds segMu.
func (l *Log) floorSegment(offset int64) int {
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset > offset }) - 1
	return max(i, 0)
}

func (l *Log) LogStartOffset() int64 { return l.logStartOffset.Load() }
func (l *Log) LogEndOffset() int64   { return l.logEndOffset.Load() }
func (l *Log) HighWatermark() int64  { return l.highWatermark.Load() }
func (l *Log) RecoveryPoint() int64  { return l.recoveryPoint.Load() }

// Dir is the partition dir; a move to another log dir changes it (under
// mu).
func (l *Log) Dir() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dir
}

// TopicPartition names the log's partition.
func (l *Log) TopicPartition() TopicPartition { return l.tp }

// AdvanceHighWatermark moves the high watermark forward to hw, clamped to
// [log start, log end] as Kafka does, and reports whether it moved. It
// never moves it back: a caller that computed hw before another caller's
// newer value landed leaves the newer one in place (the replica layer
// decides what the high watermark should be; the log only keeps it
// monotonic). Only truncation lowers it.
func (l *Log) AdvanceHighWatermark(hw int64) (moved bool) {
	l.hwMu.Lock()
	hw = min(max(hw, l.logStartOffset.Load()), l.logEndOffset.Load())
	if hw <= l.highWatermark.Load() {
		l.hwMu.Unlock()
		return false
	}
	l.highWatermark.Store(hw)
	l.hwMu.Unlock()
	if l.txnsHeld.Load() {
		// The transactions whose markers the high watermark passed stop
		// holding the LSO back and are forgotten here (Kafka's
		// onHighWatermarkUpdated), not only when a read asks for the
		// LSO: a follower, which never does, kept every transaction its
		// partitions ever completed (0.19 MiB a minute in the soak).
		// Outside hwMu: txnMu is a leaf.
		l.LastStableOffset()
	}
	return true
}

// Size is the total bytes of the log's segments.
func (l *Log) Size() int64 {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	var n int64
	for _, s := range l.segments {
		n += s.size.Load()
	}
	return n
}

// NumSegments is the number of segments (metrics, tests).
func (l *Log) NumSegments() int {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	return len(l.segments)
}

// Config is the log's current configuration.
func (l *Log) Config() config.Topic { return l.config() }

// SetConfig applies a changed topic configuration; it takes effect for the
// next append and roll. The log keeps cfg, which nobody may change after
// (the topic's logs share one).
func (l *Log) SetConfig(cfg *config.Topic) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg.Store(cfg)
}

// OffsetForTimestamp finds the first offset whose timestamp is >= ts, with
// that record's timestamp and its batch's leader epoch (-1 if none), as
// ListOffsets with a timestamp answers. found is false when no record has
// such a timestamp.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, leaderEpoch int32, found bool, err error) {
	if err := l.Err(); err != nil {
		return -1, -1, -1, false, err
	}
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	start := l.logStartOffset.Load()
	for _, s := range l.segments {
		if s.maxTimestamp.Load() < ts {
			continue
		}
		offset, timestamp, leaderEpoch, found, err = s.findByTimestamp(ts, start)
		if err != nil {
			return -1, -1, -1, false, l.readFailed("searching "+l.tp.String()+" by timestamp", err)
		}
		if found {
			return offset, timestamp, leaderEpoch, true, nil
		}
	}
	return -1, -1, -1, false, nil
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp (ListOffsets -3): the first record holding it, with
// its batch's leader epoch. (-1, -1, -1) for an empty log.
func (l *Log) MaxTimestamp() (offset, timestamp int64, leaderEpoch int32) {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	var best *segment
	for _, s := range l.segments {
		if ts := s.maxTimestamp.Load(); ts >= 0 && (best == nil || ts > best.maxTimestamp.Load()) {
			best = s
		}
	}
	if best == nil {
		return -1, -1, -1
	}
	offset, timestamp, leaderEpoch, found, err := best.findByTimestamp(best.maxTimestamp.Load(), l.logStartOffset.Load())
	if err != nil || !found {
		return -1, -1, -1
	}
	return offset, timestamp, leaderEpoch
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch from the leader epoch cache.
func (l *Log) EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64) {
	return l.epochs.endOffsetFor(epoch, l.logEndOffset.Load())
}

// AssignLeaderEpoch records that epoch starts at the log end offset, as a
// new leader does before it takes writes (Kafka's makeLeader): a follower
// that fetches with an older epoch is then told where that epoch ended
// even before the new leader appends anything. It returns that start
// offset. The cache file is written by the next flush, not at once (Kafka
// stopped syncing it here too, KAFKA-15046): an entry lost in a crash
// names an epoch with no records in this log, which the node leads no
// more after the restart.
func (l *Log) AssignLeaderEpoch(epoch int32) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	leo := l.logEndOffset.Load()
	if err := l.Err(); err != nil {
		return leo, err
	}
	if latest, ok := l.epochs.latest(); ok && latest.Epoch >= epoch {
		if latest.Epoch == epoch {
			return latest.StartOffset, nil
		}
		return leo, nil
	}
	l.epochs.assign(epoch, leo)
	return leo, nil
}

// LatestEpoch is the newest leader epoch in the log's epoch cache.
func (l *Log) LatestEpoch() (int32, bool) {
	e, ok := l.epochs.latest()
	return e.Epoch, ok
}

// EpochForOffset is the leader epoch the batch at offset was written in.
func (l *Log) EpochForOffset(offset int64) (int32, bool) { return l.epochs.epochForOffset(offset) }

// TruncateTo removes everything from offset on (a follower diverged from
// its leader). The batch containing offset goes too, so the log end can end
// below offset when offset is not a batch boundary.
func (l *Log) TruncateTo(offset int64) error { return l.truncate(offset, false) }

// TruncateFullyAndStartAt empties the log and starts it again at offset,
// which may lie beyond the log end: a follower that fell behind its
// leader's log start starts over from there (Kafka's
// truncateFullyAndStartAt).
func (l *Log) TruncateFullyAndStartAt(offset int64) error { return l.truncate(offset, true) }

func (l *Log) truncate(offset int64, fully bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.Err(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("cannot truncate %s to negative offset %d: %w", l.tp, offset, kerr.OffsetOutOfRange)
	}
	if leo := l.logEndOffset.Load(); !fully && offset >= leo {
		// No record goes, but an epoch may start at the log end: a node
		// made leader assigns its epoch there (AssignLeaderEpoch) and may
		// lose the leadership before it appends anything. Its next leader
		// never had that epoch, so it goes too, as in Kafka's truncateTo;
		// kept, the follower would fetch with it again and be told again
		// to truncate here. Written at once like any truncation: the
		// batches that follow cannot drop it again in a recovery.
		if l.epochs.truncateFromEnd(leo) {
			if err := l.epochs.write(); err != nil {
				return l.fail(err)
			}
		}
		return nil
	}
	// No flush may run across the truncation (see the lock order).
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	cfg := l.config()
	nowMs := l.now().UnixMilli()
	if fully || offset < l.logStartOffset.Load() {
		// Kafka's truncateFullyAndStartAt.
		if err := l.deleteSegments(len(l.segments), nowMs); err != nil {
			return l.fail(err)
		}
		if err := l.replaceAllSegments(offset, nowMs); err != nil {
			return l.fail(err)
		}
		l.logStartOffset.Store(offset)
		// Nothing of the old epochs is left (Kafka clears the cache).
		if l.epochs.truncateFromEnd(0) {
			if err := l.epochs.write(); err != nil {
				return l.fail(err)
			}
		}
	} else {
		// Segments wholly at or above offset go; the one holding it is cut.
		keep := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset >= offset })
		if keep == 0 {
			keep = 1 // the first segment always stays (offset >= its base)
		}
		if keep < len(l.segments) {
			if err := l.deleteTail(keep); err != nil {
				return l.fail(err)
			}
		}
		seg := l.active()
		// Readers are kept out while the file shrinks under them.
		l.segMu.Lock()
		err := seg.truncateTo(offset, int64(cfg.IndexIntervalBytes))
		l.segMu.Unlock()
		if err != nil {
			return l.fail(err)
		}
		if err := seg.becomeActive(int64(cfg.SegmentIndexBytes)); err != nil {
			return l.fail(err)
		}
	}
	leo := l.active().nextOffset
	l.hwMu.Lock()
	l.logEndOffset.Store(leo)
	if l.highWatermark.Load() > leo || fully {
		l.highWatermark.Store(leo)
	}
	l.hwMu.Unlock()
	if l.recoveryPoint.Load() > leo || fully {
		l.recoveryPoint.Store(leo)
	}
	if l.epochs.truncateFromEnd(leo) {
		if err := l.epochs.write(); err != nil {
			return l.fail(err)
		}
	}
	// Transactions whose marker the truncation removed are open again:
	// the rebuild finds them.
	l.txnMu.Lock()
	kept := l.unreplicated[:0]
	for _, u := range l.unreplicated {
		if u.markerOffset < leo {
			kept = append(kept, u)
		}
	}
	l.unreplicated = kept
	l.txnsHeld.Store(l.firstUnstable.Load() != math.MaxInt64 || len(kept) > 0)
	l.txnMu.Unlock()
	if err := l.rebuildProducerState(l.logStartOffset.Load(), leo, nowMs); err != nil {
		return l.fail(err)
	}
	l.refreshAbortedEnd()
	return nil
}

// deleteTail drops the segments from index keep on (truncation); the
// caller holds mu.
func (l *Log) deleteTail(keep int) error {
	l.segMu.Lock()
	gone := append([]*segment(nil), l.segments[keep:]...)
	l.segments = l.segments[:keep]
	l.segMu.Unlock()
	return l.scheduleDeletion(gone)
}

// deleteSegments drops the first n segments (log start moved past them);
// the caller holds mu and keeps at least one segment afterwards or
// replaces them all.
func (l *Log) deleteSegments(n int, nowMs int64) error {
	l.segMu.Lock()
	gone := append([]*segment(nil), l.segments[:n]...)
	l.segments = append([]*segment(nil), l.segments[n:]...)
	l.segMu.Unlock()
	return l.scheduleDeletion(gone)
}

// scheduleDeletion renames segments to *.deleted, closes them and removes
// the files after file.delete.delay.ms, as Kafka does. Nothing reads them
// through the segment any more (they left the segments slice), and a fetch
// that holds a FileRange of one keeps its own reference to the file.
func (l *Log) scheduleDeletion(segs []*segment) error {
	for _, s := range segs {
		s.deleted.Store(true)
		if err := s.renameDeleted(); err != nil {
			return err
		}
	}
	l.scheduleRemoval(segs)
	if len(segs) > 0 {
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return fmt.Errorf("syncing %s: %w", l.dir, err)
		}
	}
	return nil
}

// scheduleRemoval closes segments already renamed to *.deleted and removes
// their files after file.delete.delay.ms; the caller holds mu.
func (l *Log) scheduleRemoval(segs []*segment) {
	delay := time.Duration(l.config().FileDeleteDelayMs) * time.Millisecond
	// The deletions done are forgotten here, under mu, each time more
	// come: the list holds the pending ones and the last few done, not
	// every segment the log ever deleted (their segments, indexes and
	// names, which retention made a steady leak).
	l.deletions = slices.DeleteFunc(l.deletions, func(d *pendingDeletion) bool { return d.done.Load() })
	for _, s := range segs {
		if err := s.close(); err != nil {
			l.logger().Warn("closing deleted segment", "segment", s.baseOffset, "err", err)
		}
		d := &pendingDeletion{seg: s}
		l.deletions = append(l.deletions, d)
		d.timer = time.AfterFunc(delay, func() { d.run(l.logger()) })
	}
}

// DeleteRecordsBefore advances the log start offset to offset (DeleteRecords)
// and deletes the segments wholly below it. offset may not pass the high
// watermark (OFFSET_OUT_OF_RANGE). It returns the new log start offset.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.Err(); err != nil {
		return l.logStartOffset.Load(), err
	}
	hw := l.highWatermark.Load()
	if offset < 0 || offset > hw {
		return l.logStartOffset.Load(), fmt.Errorf("cannot move the log start offset of %s to %d beyond the high watermark %d: %w", l.tp, offset, hw, kerr.OffsetOutOfRange)
	}
	if offset <= l.logStartOffset.Load() {
		return l.logStartOffset.Load(), nil
	}
	return offset, l.advanceLogStart(offset)
}

// advanceLogStart moves the log start offset and drops what lies wholly
// below it; the caller holds mu.
func (l *Log) advanceLogStart(offset int64) error {
	nowMs := l.now().UnixMilli()
	l.hwMu.Lock()
	l.logStartOffset.Store(offset)
	if l.highWatermark.Load() < offset {
		l.highWatermark.Store(offset)
	}
	l.hwMu.Unlock()
	if l.epochs.truncateFromStart(offset) {
		if err := l.epochs.write(); err != nil {
			return l.fail(err)
		}
	}
	// Segments whose successor starts at or below the new start hold
	// nothing readable. The active one is rolled first when it is wholly
	// below (all records deleted).
	if act := l.active(); act.size.Load() > 0 && act.nextOffset <= offset {
		if err := l.roll(max(offset, l.logEndOffset.Load()), nowMs); err != nil {
			return l.fail(err)
		}
	}
	n := 0
	for n+1 < len(l.segments) && l.segments[n+1].baseOffset <= offset {
		n++
	}
	if n > 0 {
		if err := l.deleteSegments(n, nowMs); err != nil {
			return l.fail(err)
		}
	}
	if err := l.producers.deleteSnapshotsBefore(l.segments[0].baseOffset); err != nil {
		return l.fail(err)
	}
	return nil
}

// RemoveExpiredProducers forgets producers idle for producer.id.expiration.ms
// (Kafka checks every producer.id.expiration.check.interval.ms).
func (l *Log) RemoveExpiredProducers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.producers.removeExpired(l.expiryNow().UnixMilli(), l.expiryMs)
}

// ProducerCount is the number of producers with state in this log.
// ProducerInfo describes one active producer of the partition
// (DescribeProducers).
type ProducerInfo struct {
	ProducerID            int64
	ProducerEpoch         int16
	LastSequence          int32
	LastTimestamp         int64
	CoordinatorEpoch      int32
	CurrentTxnStartOffset int64
}

// ActiveProducers lists the producers the partition tracks, by id.
func (l *Log) ActiveProducers() []ProducerInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]ProducerInfo, 0, len(l.producers.producers))
	for id, e := range l.producers.producers {
		out = append(out, ProducerInfo{
			ProducerID:            id,
			ProducerEpoch:         e.epoch,
			LastSequence:          e.lastSeq(),
			LastTimestamp:         e.lastTimestamp,
			CoordinatorEpoch:      e.coordinatorEpoch,
			CurrentTxnStartOffset: e.currentTxnFirstOffset,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

func (l *Log) ProducerCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.producers.producers)
}

// Close takes a producer snapshot, flushes, trims the active segment's
// indexes and closes the files. Segments awaiting deletion are removed now.
func (l *Log) Close() error {
	_, err := l.close(false)
	return err
}

// closeForSyncFS is Close with nothing synced: the producer snapshot and
// the leader-epoch checkpoint are written without an fsync, and neither
// the segments nor the dir are synced. The caller syncs the filesystem
// (vfs.FS.SyncFS) and then calls markSynced. A clean shutdown of many
// partitions makes one syncfs(2) instead of several fsyncs per partition.
// It returns the log's state for the log state file (logstate.go), nil
// when the log must be loaded from its directory next time.
func (l *Log) closeForSyncFS() (*logState, error) { return l.close(true) }

// markSynced advances the recovery point to the log end of a log closed
// with closeForSyncFS, once its filesystem is synced.
func (l *Log) markSynced() {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.metadataUnsynced.Store(false)
	leo := l.logEndOffset.Load()
	for {
		cur := l.recoveryPoint.Load()
		if leo <= cur || l.recoveryPoint.CompareAndSwap(cur, leo) {
			break
		}
	}
}

func (l *Log) close(deferSync bool) (*logState, error) {
	// A cleaning in progress sees the flag and stops; wait for it.
	l.stopCleaning.Store(true)
	l.cleanMu.Lock()
	//lint:ignore SA2001 an empty critical section: waiting for the cleaner is the point
	l.cleanMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, nil
	}
	l.closed = true
	var errs []error
	healthy := l.Err() == nil
	snapshotWritten := false
	if healthy {
		// The snapshot's name is made durable with the flush's sync of
		// the dir below, or by its own when the flush has nothing to do.
		write := vfs.WriteFileSynced
		if deferSync {
			write = vfs.WriteFileUnsynced
		}
		wrote, err := l.producers.writeSnapshot(write)
		if err != nil {
			errs = append(errs, err)
		}
		if wrote {
			snapshotWritten = true
			l.dirDirty.Store(true)
		}
		if err := l.active().onBecomeInactive(); err != nil {
			errs = append(errs, err)
		}
	}
	deletions := l.deletions
	l.deletions = nil
	l.mu.Unlock()
	l.bg.Wait()
	if healthy && deferSync {
		if _, err := l.epochs.saveUnsavedWith(vfs.WriteFileUnsynced); err != nil {
			errs = append(errs, l.fail(err))
		}
	} else if healthy {
		if err := l.Flush(); err != nil {
			errs = append(errs, err)
		} else if snapshotWritten && l.dirDirty.Swap(false) {
			if err := l.fsys.SyncDir(l.dir); err != nil {
				errs = append(errs, l.fail(fmt.Errorf("syncing %s: %w", l.dir, err)))
			}
		}
	}
	for _, d := range deletions {
		d.timer.Stop()
		d.run(l.logger())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var state *logState
	if deferSync && healthy && len(errs) == 0 && l.Err() == nil {
		if st, ok := l.restartState(); ok {
			state = st
		}
	}
	if err := l.closeSegments(); err != nil {
		errs = append(errs, err)
		state = nil
	}
	return state, errors.Join(errs...)
}

func (l *Log) closeSegments() error {
	l.segMu.Lock()
	defer l.segMu.Unlock()
	var errs []error
	for _, s := range l.segments {
		if err := s.close(); err != nil {
			errs = append(errs, err)
		}
	}
	l.segments = nil
	return errors.Join(errs...)
}

// StartTxnVerification begins verifying pid's next transactional batch on
// this partition (KIP-890 part 1): it returns the guard that the append of
// that batch must carry (AppendVerified), once the transaction
// coordinator has confirmed that the partition is in pid's transaction. A
// marker for pid in between (an abort, say by timeout) ends the
// verification, so a late produce cannot open a transaction nobody will
// end. 0 means pid has a transaction open here: nothing to verify.
func (l *Log) StartTxnVerification(pid int64, epoch int16) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.producers.startVerification(pid, epoch)
}

// endTxnMarker reads a control batch's record: its type (-1 when the
// batch has none, as one the cleaner emptied), and for a transaction
// marker the coordinator epoch it carries (-1 otherwise).
func endTxnMarker(batch []byte) (protocol.ControlRecordType, int32, error) {
	typ, epoch := protocol.ControlRecordType(-1), int32(-1)
	err := protocol.ForEachRecord(batch, nil, func(r *protocol.Record) error {
		t, err := protocol.ParseControlRecordKey(r.Key)
		if err != nil {
			return err
		}
		typ = t
		if t == protocol.ControlCommit || t == protocol.ControlAbort {
			if epoch, err = protocol.ParseEndTxnMarkerValue(r.Value); err != nil {
				return err
			}
		}
		return io.EOF
	})
	if err != nil && err != io.EOF {
		return typ, -1, fmt.Errorf("reading a transaction marker: %w", err)
	}
	return typ, epoch, nil
}

// TxnVerificationHolds reports whether guard (from StartTxnVerification)
// still admits pid's next transactional batch: no marker for pid was
// written since. The caller asks again when it does not (a marker of the
// previous transaction landed while the coordinator was consulted).
func (l *Log) TxnVerificationHolds(pid int64, guard uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.producers.verified(pid, guard)
}
