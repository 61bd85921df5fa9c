package storage

// Moving a partition's log to another log dir of this node
// (AlterReplicaLogDirs; Kafka's future replica and ReplicaAlterLogDirsThread).
//
// Kafka creates <topic>-<partition>.<uuid>-future in the destination and
// replicates into it from the current log like a follower, then swaps.
// Gregor copies files instead, which is the same on one node:
//
//  1. Copy passes, without the log's lock: the segments' bytes are copied
//     into <dest>/<topic>-<partition>.<uuid>-future while appends go on.
//     A segment truncated meanwhile is copied again (segment.truncations);
//     one deleted meanwhile is dropped. Passes repeat until little is left.
//  2. The swap, under the log's cleanMu, mu and flushMu (no cleaning,
//     append, roll, truncation, deletion or flush runs): a last pass
//     copies what is left, then the indexes and the other files
//     (partition.metadata, the leader-epoch checkpoint, producer
//     snapshots); everything is synced.
//  3. The commit, by renames, each made durable before the next:
//     a marker <dest>/<topic>-<partition>.move-incoming holding the log's
//     start offset, high watermark and recovery point; the future dir
//     renamed to <dest>/<topic>-<partition>; the source dir renamed to
//     <src>/<topic>-<partition>.<uuid>-delete. The move is committed when
//     that last rename is durable.
//  4. The log object is pointed at its new files (the replica layer keeps
//     the same *Log), the manager's maps move it, a checkpoint of the
//     destination dir records its offsets and removes the marker, and the
//     old dir is removed after file.delete.delay.ms.
//
// A crash at any point leaves one authoritative copy, which OpenManager
// finds (settleMoves): a future dir is removed (the source is whole); a
// partition with a marker whose source dir still holds it did not commit,
// and the copy with the marker is removed; a partition with a marker and
// no other copy is the moved log, its offsets taken from the marker when
// the dir's checkpoints lack them.
//
// Deviations from Kafka: a move interrupted by a restart is abandoned, not
// resumed (Kafka reloads its future logs); the future replica's offset lag
// counts from the first segment not wholly copied; a failed copy abandons
// the move without taking the destination dir offline (a failed fsync or
// rename at the commit does take its dir offline, as in Kafka). A partition
// whose log is not open here yet is refused (REPLICA_NOT_AVAILABLE), where
// Kafka remembers the dir for when the log is created.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/vfs"
)

const (
	futureDirSuffix  = "-future"
	moveMarkerSuffix = ".move-incoming"
	// moveCatchUpBytes: copy passes stop once this little is left; the
	// rest is copied under the log's lock.
	moveCatchUpBytes = 4 << 20
	// moveMaxPasses bounds the passes against a log that grows faster
	// than it is copied: the swap then copies the rest under the lock.
	moveMaxPasses = 20
	moveChunk     = 1 << 20
)

// logMove is one partition's move in flight. Its goroutine (runMove) owns
// copies; the manager's mu guards its place in Manager.moves.
type logMove struct {
	tp     TopicPartition
	log    *Log
	dest   *logDir
	id     string
	future string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// Progress for DescribeDirs.
	copiedBytes atomic.Int64
	offsetLag   atomic.Int64

	copies map[*segment]*segmentCopy
}

// segmentCopy is the future dir's copy of one segment's .log.
type segmentCopy struct {
	f     vfs.File
	bytes int64
	// truncations is the segment's count when the copy was valid; -1
	// forces a copy from the start.
	truncations int64
}

// MoveLog starts moving tp's log to destDir, one of log.dirs
// (AlterReplicaLogDirs). It returns once the move is under way; a move of
// tp to another dir is abandoned first. Moving a log to the dir it is in
// cancels any move of it and does nothing else. Errors wrap
// LOG_DIR_NOT_FOUND (destDir is not a log dir), KAFKA_STORAGE_ERROR (it,
// or the log, is offline), REPLICA_NOT_AVAILABLE (no log of tp is open)
// or INVALID_TOPIC_EXCEPTION (the future dir's name would be too long).
func (m *Manager) MoveLog(tp TopicPartition, destDir string) error {
	destDir = filepath.Clean(destDir)
	if len(tp.String())+1+32+len(futureDirSuffix) > 255 {
		return fmt.Errorf("the future dir of %s would be longer than 255 bytes: %w", tp, kerr.InvalidTopicException)
	}
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return fmt.Errorf("log manager is closed: %w", kerr.NotLeaderForPartition)
		}
		var dest *logDir
		for _, d := range m.dirs {
			if d.path == destDir {
				dest = d
			}
		}
		if dest == nil {
			m.mu.Unlock()
			return fmt.Errorf("%s is not one of log.dirs: %w", destDir, kerr.LogDirNotFound)
		}
		if err := dest.Err(); err != nil {
			m.mu.Unlock()
			return err
		}
		l, ok := m.logs[tp]
		if !ok {
			m.mu.Unlock()
			return fmt.Errorf("no log of %s is open here: %w", tp, kerr.ReplicaNotAvailable)
		}
		if err := l.Err(); err != nil {
			m.mu.Unlock()
			return err
		}
		if old := m.moves[tp]; old != nil {
			if old.dest == dest {
				m.mu.Unlock()
				return nil
			}
			// One move at a time per log: the old one ends first.
			old.cancel()
			m.mu.Unlock()
			<-old.done
			continue
		}
		if m.logDirOf[tp] == dest {
			m.mu.Unlock()
			return nil
		}
		var raw [16]byte
		if _, err := rand.Read(raw[:]); err != nil {
			m.mu.Unlock()
			return fmt.Errorf("naming the future dir of %s: %w", tp, err)
		}
		id := hex.EncodeToString(raw[:])
		ctx, cancel := context.WithCancel(context.Background())
		mv := &logMove{
			tp: tp, log: l, dest: dest, id: id,
			future: filepath.Join(dest.path, tp.String()+"."+id+futureDirSuffix),
			ctx:    ctx, cancel: cancel, done: make(chan struct{}),
			copies: map[*segment]*segmentCopy{},
		}
		mv.offsetLag.Store(l.LogEndOffset())
		m.moves[tp] = mv
		m.moveWG.Add(1)
		m.mu.Unlock()
		m.logger.Info("moving a log to another log dir", "partition", tp.String(), "from", filepath.Dir(l.Dir()), "to", dest.path)
		go m.runMove(mv)
		return nil
	}
}

// runMove is a move's goroutine: copy, swap, then the manager's share.
func (m *Manager) runMove(mv *logMove) {
	defer m.moveWG.Done()
	defer close(mv.done)
	defer mv.cancel()
	oldPath, err := m.copyAndSwap(mv)
	for _, c := range mv.copies {
		c.f.Close()
	}
	if err == nil {
		m.movePoint("relocated")
	}
	m.mu.Lock()
	if m.moves[mv.tp] == mv {
		delete(m.moves, mv.tp)
	}
	if err == nil {
		from := m.dirOfPath(filepath.Dir(strings.TrimSuffix(oldPath, "."+mv.id+deleteDirSuffix)))
		var cleanerOffset int64
		hasCleanerOffset := false
		if from != nil {
			cleanerOffset, hasCleanerOffset = from.cleanerOffsets[mv.tp]
			delete(from.onDisk, mv.tp)
			delete(from.recoveryPoints, mv.tp)
			delete(from.logStarts, mv.tp)
			delete(from.highWatermarks, mv.tp)
			delete(from.cleanerOffsets, mv.tp)
		}
		// Deleted meanwhile (Delete closed the log after the swap and
		// removed it from its new dir): nothing more to record.
		if m.logs[mv.tp] == mv.log {
			mv.dest.onDisk[mv.tp] = true
			m.logDirOf[mv.tp] = mv.dest
			mv.dest.incoming = append(mv.dest.incoming, mv.tp)
			// Written with the dir's next cleaner checkpoint; lost in a
			// crash before it, the log is only cleaned from its start.
			if hasCleanerOffset {
				mv.dest.cleanerOffsets[mv.tp] = cleanerOffset
			}
		}
		delay := mv.log.Config().FileDeleteDelayMs
		m.scheduleDirRemovalLocked(oldPath, delay)
	}
	m.mu.Unlock()
	if err != nil {
		if rerr := m.fsys.RemoveAll(mv.future); rerr != nil {
			m.logger.Warn("removing an abandoned future dir", "dir", mv.future, "err", rerr)
		}
		if mv.ctx.Err() == nil {
			m.logger.Warn("moving a log to another log dir failed; it stays where it was", "partition", mv.tp.String(), "to", mv.dest.path, "err", err)
		}
		return
	}
	// The destination's checkpoints take the log's offsets, and the
	// marker goes with them.
	if err := m.Checkpoint(); err != nil {
		m.logger.Warn("writing checkpoints after a log move", "err", err)
	}
	m.movePoint("checkpointed")
	m.logger.Info("moved a log to another log dir", "partition", mv.tp.String(), "to", mv.dest.path)
}

// movePoint calls the tests' hook at a named point of a move.
func (m *Manager) movePoint(point string) {
	if m.moveHook != nil {
		m.moveHook(point)
	}
}

// dirOfPath is the log dir at path; the caller holds mu.
func (m *Manager) dirOfPath(path string) *logDir {
	for _, d := range m.dirs {
		if d.path == path {
			return d
		}
	}
	return nil
}

// copyAndSwap runs the copy passes and the swap; on success it returns the
// path the source dir was renamed to.
func (m *Manager) copyAndSwap(mv *logMove) (string, error) {
	if err := m.fsys.MkdirAll(mv.future, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", mv.future, err)
	}
	for pass := 0; pass < moveMaxPasses; pass++ {
		left, err := m.copyPass(mv, false)
		if err != nil {
			return "", err
		}
		m.movePoint("pass")
		if left <= moveCatchUpBytes {
			break
		}
	}
	return m.swap(mv)
}

// copyPass copies what the segments gained since the last pass and drops
// the copies of segments that are gone; it returns the bytes left to copy
// at its start. locked: the caller holds the log's mu (the swap), so
// nothing changes under the pass and it is not cancelled midway.
func (m *Manager) copyPass(mv *logMove, locked bool) (left int64, err error) {
	l := mv.log
	leo := l.LogEndOffset()
	l.segMu.RLock()
	segs := append([]*segment(nil), l.segments...)
	l.segMu.RUnlock()
	live := make(map[*segment]bool, len(segs))
	for _, s := range segs {
		live[s] = true
	}
	// Copies of segments gone first: a cleaned segment replaces one
	// with the same base offset, so its copy has the same name.
	for s, c := range mv.copies {
		if !live[s] {
			c.f.Close()
			name := c.f.Name()
			delete(mv.copies, s)
			if err := m.fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return 0, fmt.Errorf("removing %s: %w", name, err)
			}
		}
	}
	reached := int64(-1)
	var copied int64
	for _, s := range segs {
		c := mv.copies[s]
		if c == nil {
			name := segmentFileName(mv.future, s.baseOffset, logSuffix)
			f, err := m.fsys.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
			if err != nil {
				return 0, fmt.Errorf("creating %s: %w", name, err)
			}
			c = &segmentCopy{f: f, truncations: s.truncations.Load()}
			mv.copies[s] = c
		}
		size := s.size.Load()
		left += max(size-c.bytes, 0)
		if err := m.copySegment(mv, s, c, locked); err != nil {
			return 0, err
		}
		copied += c.bytes
		if reached < 0 && c.bytes < s.size.Load() {
			reached = s.baseOffset
		}
	}
	if reached < 0 {
		reached = leo
	}
	mv.copiedBytes.Store(copied)
	mv.offsetLag.Store(max(leo-reached, 0))
	return left, nil
}

// copySegment brings one segment's copy up to the segment's size.
func (m *Manager) copySegment(mv *logMove, s *segment, c *segmentCopy, locked bool) error {
	gen := s.truncations.Load()
	if gen != c.truncations {
		// Truncated since it was copied: start again.
		if err := c.f.Truncate(0); err != nil {
			return fmt.Errorf("truncating %s: %w", c.f.Name(), err)
		}
		c.bytes, c.truncations = 0, gen
	}
	if gen%2 == 1 {
		return nil // being truncated now: the next pass copies it
	}
	size := s.size.Load()
	if c.bytes >= size {
		return nil
	}
	if err := s.pin(); err != nil {
		if errors.Is(err, errSegmentClosed) {
			return nil // deleted meanwhile: the next pass drops its copy
		}
		return err
	}
	defer s.unpin()
	buf := make([]byte, min(moveChunk, size-c.bytes))
	for pos := c.bytes; pos < size; {
		if !locked && mv.ctx.Err() != nil {
			return mv.ctx.Err()
		}
		n := min(int64(len(buf)), size-pos)
		if _, err := s.log.ReadAt(buf[:n], pos); err != nil {
			return fmt.Errorf("reading %s: %w", s.log.Name(), err)
		}
		if _, err := c.f.WriteAt(buf[:n], pos); err != nil {
			return fmt.Errorf("writing %s: %w", c.f.Name(), err)
		}
		pos += n
	}
	if s.truncations.Load() != gen {
		c.truncations = -1 // the bytes may have changed under the copy
		return nil
	}
	c.bytes = size
	return nil
}

// swap copies the rest under the log's locks and commits the move (steps
// 2-4 of the file comment, less the manager's maps). It returns the path
// the source dir now has.
func (m *Manager) swap(mv *logMove) (string, error) {
	l := mv.log
	// A cleaning round writes its output into the log's dir across its
	// I/O (compact.go): none may run across the swap.
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return "", fmt.Errorf("log %s closed during its move", l.tp)
	}
	if err := l.Err(); err != nil {
		return "", err
	}
	if err := mv.dest.Err(); err != nil {
		return "", err
	}
	if err := mv.ctx.Err(); err != nil {
		return "", err
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	src := l.dir
	srcDir := filepath.Dir(src)
	if srcDir == mv.dest.path {
		return "", fmt.Errorf("log %s is in %s already", l.tp, srcDir)
	}
	if _, err := m.copyPass(mv, true); err != nil {
		return "", err
	}
	if err := m.copyRest(mv, src); err != nil {
		return "", err
	}
	for _, c := range mv.copies {
		if err := c.f.Sync(); err != nil {
			return "", fmt.Errorf("syncing %s: %w", c.f.Name(), err)
		}
	}
	if err := m.fsys.SyncDir(mv.future); err != nil {
		return "", fmt.Errorf("syncing %s: %w", mv.future, err)
	}
	m.movePoint("copied")
	// A marker left in the source dir by an earlier move into it would
	// make the source look uncommitted at the next start.
	stale := filepath.Join(srcDir, l.tp.String()+moveMarkerSuffix)
	if err := m.fsys.Remove(stale); err == nil {
		if err := m.fsys.SyncDir(srcDir); err != nil {
			return "", fmt.Errorf("syncing %s: %w", srcDir, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("removing %s: %w", stale, err)
	}
	marker := filepath.Join(mv.dest.path, l.tp.String()+moveMarkerSuffix)
	offsets := fmt.Sprintf("%d %d %d\n", l.logStartOffset.Load(), l.highWatermark.Load(), l.recoveryPoint.Load())
	if err := vfs.WriteFileAtomic(m.fsys, marker, []byte(offsets)); err != nil {
		return "", fmt.Errorf("writing %s: %w", marker, err)
	}
	m.movePoint("marked")
	live := filepath.Join(mv.dest.path, l.tp.String())
	if err := m.fsys.Rename(mv.future, live); err != nil {
		return "", fmt.Errorf("renaming %s to %s: %w", mv.future, live, err)
	}
	m.movePoint("renamed")
	if err := m.fsys.SyncDir(mv.dest.path); err != nil {
		// The log stays in the source, which a restart prefers to the
		// marked copy; the destination cannot be trusted.
		mv.dest.health.fail(fmt.Errorf("syncing %s: %w", mv.dest.path, err))
		return "", mv.dest.Err()
	}
	m.movePoint("linked")
	old := src + "." + mv.id + deleteDirSuffix
	if err := m.fsys.Rename(src, old); err != nil {
		// The source fails: the log goes offline with it (both copies
		// are whole and the same, whichever a restart keeps).
		return "", l.fail(fmt.Errorf("renaming %s to %s: %w", src, old, err))
	}
	m.movePoint("unlinked")
	if err := m.fsys.SyncDir(srcDir); err != nil {
		return "", l.fail(fmt.Errorf("syncing %s: %w", srcDir, err))
	}
	m.movePoint("committed")
	l.relocateLocked(live, mv.dest.health)
	return old, nil
}

// copyRest copies the files of src other than the segments' .log files,
// which the passes copied: the live segments' indexes (their entries, at
// the capacity the log uses; a transaction index's entries) and every
// other file whole, each synced.
// Debris (deleted segments, temporary and compaction files) stays behind.
// The caller holds the log's mu: the segment list is stable.
func (m *Manager) copyRest(mv *logMove, src string) error {
	l := mv.log
	indexes := map[string]*indexFile{}
	txnIndexes := map[string]*txnIndex{}
	for _, s := range l.segments {
		indexes[filepath.Base(s.offsets.indexFile.file.String())] = s.offsets.indexFile
		indexes[filepath.Base(s.times.indexFile.file.String())] = s.times.indexFile
		txnIndexes[segmentFileName("", s.baseOffset, txnIndexSuffix)] = s.txns
	}
	ents, err := m.fsys.ReadDir(src)
	if err != nil {
		return fmt.Errorf("listing %s: %w", src, err)
	}
	for _, ent := range ents {
		name := ent.Name()
		switch {
		case ent.IsDir() || strings.HasSuffix(name, logSuffix) || notCopied(name):
		case strings.HasSuffix(name, indexSuffix), strings.HasSuffix(name, timeIndexSuffix):
			x := indexes[name]
			if x == nil {
				continue // an index without a live segment
			}
			x.mu.RLock()
			used, capacity := int64(x.entries*x.entrySize), int64(x.maxEntries*x.entrySize)
			x.mu.RUnlock()
			if err := m.copyFile(filepath.Join(src, name), filepath.Join(mv.future, name), used, capacity); err != nil {
				return err
			}
		case strings.HasSuffix(name, txnIndexSuffix):
			// Its whole entries: not a torn one a crash left after them.
			x := txnIndexes[name]
			if x == nil {
				continue
			}
			used := x.bytes()
			if err := m.copyFile(filepath.Join(src, name), filepath.Join(mv.future, name), used, used); err != nil {
				return err
			}
		default:
			if err := m.copyFile(filepath.Join(src, name), filepath.Join(mv.future, name), -1, -1); err != nil {
				return err
			}
		}
	}
	return nil
}

// notCopied reports the files a move leaves behind: deleted segments,
// temporary files and compaction's.
func notCopied(name string) bool {
	for _, suffix := range []string{deletedSuffix, ".tmp", cleanedSuffix, swapSuffix} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// copyFile copies the first n bytes of from (all of it when n < 0) to a
// new file to, extends it to size (when size > n) and syncs it.
func (m *Manager) copyFile(from, to string, n, size int64) (err error) {
	in, err := m.fsys.OpenFile(from, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", from, err)
	}
	defer in.Close()
	out, err := m.fsys.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("creating %s: %w", to, err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("closing %s: %w", to, cerr)
		}
	}()
	var r io.Reader = in
	if n >= 0 {
		r = io.LimitReader(in, n)
	}
	if _, err := io.Copy(out, r); err != nil {
		return fmt.Errorf("copying %s to %s: %w", from, to, err)
	}
	if size > n && n >= 0 {
		if err := out.Truncate(size); err != nil {
			return fmt.Errorf("extending %s: %w", to, err)
		}
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", to, err)
	}
	return nil
}

// relocateLocked points the log at dir, where its files now are, and at
// that dir's health. The caller holds mu and flushMu; segment files are
// reopened from dir on their next use.
func (l *Log) relocateLocked(dir string, health *dirHealth) {
	l.segMu.Lock()
	for _, s := range l.segments {
		if err := s.relocate(dir); err != nil {
			l.logger().Warn("closing a moved segment's old files", "segment", s.baseOffset, "err", err)
		}
	}
	l.segMu.Unlock()
	l.dir = dir
	l.producers.dir = dir
	l.epochs.writeMu.Lock()
	l.epochs.dir = dir
	l.epochs.writeMu.Unlock()
	l.dirHealth.Store(health)
}

// relocate closes the segment's files and names them in dir. Nobody holds
// a pin: the caller holds the log's mu, flushMu and segMu.
func (s *segment) relocate(dir string) error {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	var err error
	if s.log != nil {
		s.cache.inUse(s) // out of the idle list
		err = s.closeFilesLocked()
		s.cache.closed()
	}
	s.dir = dir
	for _, x := range []*indexFile{s.offsets.indexFile, s.times.indexFile} {
		x.mu.Lock()
		x.file.dir = dir
		x.mu.Unlock()
	}
	s.txns.relocate(dir)
	return err
}

// parseMoveMarker parses <topic>-<partition>.move-incoming.
func parseMoveMarker(name string) (TopicPartition, bool) {
	if !strings.HasSuffix(name, moveMarkerSuffix) {
		return TopicPartition{}, false
	}
	return parsePartitionDir(strings.TrimSuffix(name, moveMarkerSuffix))
}

// settleMoves finishes, at open, what moves interrupted by a stop left
// (see the file comment). The caller is OpenManager, alone.
func (m *Manager) settleMoves() {
	for _, d := range m.dirs {
		if d.Err() != nil {
			continue
		}
		var keep []TopicPartition
		for _, tp := range d.incoming {
			marker := filepath.Join(d.path, tp.String()+moveMarkerSuffix)
			if d.onDisk[tp] && m.otherDirHolding(d, tp) == nil {
				// The moved log: its offsets until a checkpoint has them.
				m.seedFromMarker(d, tp, marker)
				keep = append(keep, tp)
				continue
			}
			if d.onDisk[tp] {
				// Not committed: the source is the log.
				copyDir := filepath.Join(d.path, tp.String())
				m.logger.Warn("removing the copy of an unfinished log move", "dir", copyDir)
				if err := m.fsys.RemoveAll(copyDir); err != nil {
					m.logger.Warn("removing the copy of an unfinished log move", "dir", copyDir, "err", err)
					keep = append(keep, tp) // the marker keeps it out of the way next time too
					continue
				}
				delete(d.onDisk, tp)
			}
			if err := m.fsys.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
				m.logger.Warn("removing a log move marker", "file", marker, "err", err)
			}
		}
		d.incoming = keep
	}
}

// otherDirHolding is an online dir other than d with tp on disk.
func (m *Manager) otherDirHolding(d *logDir, tp TopicPartition) *logDir {
	for _, o := range m.dirs {
		if o != d && o.Err() == nil && o.onDisk[tp] {
			return o
		}
	}
	return nil
}

// seedFromMarker takes a moved log's offsets from its marker where the
// dir's checkpoints do not have them.
func (m *Manager) seedFromMarker(d *logDir, tp TopicPartition, marker string) {
	data, err := vfs.ReadFile(m.fsys, marker)
	if err != nil {
		m.logger.Warn("reading a log move marker", "file", marker, "err", err)
		return
	}
	f := strings.Fields(string(data))
	if len(f) != 3 {
		m.logger.Warn("bad log move marker", "file", marker)
		return
	}
	var v [3]int64
	for i := range f {
		if v[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			m.logger.Warn("bad log move marker", "file", marker, "err", err)
			return
		}
	}
	for i, offsets := range []map[TopicPartition]int64{d.logStarts, d.highWatermarks, d.recoveryPoints} {
		if _, ok := offsets[tp]; !ok {
			offsets[tp] = v[i]
		}
	}
}

// removeMarkers removes the markers of moved logs once a checkpoint of d
// holds their offsets.
func (m *Manager) removeMarkers(d *logDir, tps []TopicPartition) {
	if len(tps) == 0 {
		return
	}
	// Not synced: a marker that a crash brings back is settled again at
	// open (its log has no other copy), and a move out of the dir removes
	// it durably before anything depends on its absence.
	for _, tp := range tps {
		marker := filepath.Join(d.path, tp.String()+moveMarkerSuffix)
		if err := m.fsys.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
			m.logger.Warn("removing a log move marker", "file", marker, "err", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	done := map[TopicPartition]bool{}
	for _, tp := range tps {
		done[tp] = true
	}
	keep := d.incoming[:0]
	for _, tp := range d.incoming {
		if !done[tp] {
			keep = append(keep, tp)
		}
	}
	d.incoming = keep
}

// futureDescriptions reports the moves into d for DescribeDirs; the caller
// holds mu.
func (m *Manager) futureDescriptions(d *logDir) []PartitionDescription {
	var out []PartitionDescription
	for tp, mv := range m.moves {
		if mv.dest == d {
			out = append(out, PartitionDescription{TopicPartition: tp, Size: mv.copiedBytes.Load(), OffsetLag: mv.offsetLag.Load(), IsFuture: true})
		}
	}
	return out
}
