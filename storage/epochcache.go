package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"

	"github.com/gregorbroker/gregor/vfs"
)

// epochCache is Kafka's LeaderEpochFileCache: for each leader epoch, the
// first offset written in it, kept in leader-epoch-checkpoint. Entries have
// strictly increasing epochs and start offsets.
//
// The appender changes it (under Log.mu); OffsetForLeaderEpoch and
// ListOffsets read it, so mu guards entries.
//
// An append's new epoch is not written at once (two fsyncs on the produce
// path of every partition's first batch): it is marked unsaved, and the
// log's next flush writes the file before it moves the recovery point
// past the batch. Until then recovery finds the epoch again: after an
// unclean shutdown it rescans every batch from the recovery point and
// reassigns the epochs in their headers (Kafka 3.7+ likewise writes
// new epochs without an fsync and flushes them with the log, KAFKA-15046).
// Truncations, which drop entries the batches cannot restore, are written
// at once.
//
// writeMu serialises writes of the file and is taken before mu: each
// write snapshots the entries under it, so a slower writer never puts an
// older snapshot over a newer one.
type epochCache struct {
	fsys vfs.FS
	// dir is the log's dir; the checkpoint's path is joined when it is
	// read or written, not kept (a string per partition).
	dir string

	writeMu sync.Mutex

	mu      sync.RWMutex
	entries []EpochEntry
	// unsaved: an assignment is not in the file yet (guarded by mu).
	unsaved bool
}

func (c *epochCache) path() string { return filepath.Join(c.dir, LeaderEpochCheckpointFile) }

// errCorruptEpochCheckpoint: the leader-epoch checkpoint cannot be
// decoded (a crash during a clean shutdown, whose writes are made durable
// together at its end, can leave it so).
var errCorruptEpochCheckpoint = errors.New("corrupt leader-epoch checkpoint")

func openEpochCache(fsys vfs.FS, dir string) (*epochCache, error) {
	c := &epochCache{fsys: fsys, dir: dir}
	data, err := vfs.ReadFile(fsys, c.path())
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", c.path(), err)
	}
	entries, err := decodeEpochCheckpoint(data)
	if err != nil {
		// The cache is empty and the caller rebuilds it from the log.
		return c, fmt.Errorf("parsing %s: %w: %w", c.path(), errCorruptEpochCheckpoint, err)
	}
	c.entries = entries
	return c, nil
}

// assign records that epoch starts at startOffset, dropping entries it
// contradicts (an epoch not above, or a start offset not below, the new
// one). It reports whether the cache changed; a change is unsaved until
// the caller persists it (write, or saveUnsaved at the next flush).
func (c *epochCache) assign(epoch int32, startOffset int64) bool {
	if epoch < 0 || startOffset < 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if last.Epoch == epoch && startOffset >= last.StartOffset {
			return false
		}
	}
	n := len(c.entries)
	for n > 0 && (c.entries[n-1].Epoch >= epoch || c.entries[n-1].StartOffset >= startOffset) {
		n--
	}
	c.entries = append(c.entries[:n], EpochEntry{Epoch: epoch, StartOffset: startOffset})
	c.unsaved = true
	return true
}

func (c *epochCache) latest() (EpochEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// endOffsetFor answers OffsetsForLeaderEpoch: the largest epoch <= the
// requested one and the start offset of the epoch after it (or the log end
// offset for the latest epoch); (-1, -1) when unknown.
func (c *epochCache) endOffsetFor(epoch int32, logEndOffset int64) (int32, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.entries)
	if epoch == -1 || n == 0 {
		return -1, -1
	}
	if c.entries[n-1].Epoch == epoch {
		return epoch, logEndOffset
	}
	higher := -1
	for i, e := range c.entries {
		if e.Epoch > epoch {
			higher = i
			break
		}
	}
	if higher < 0 {
		return -1, -1
	}
	if higher == 0 {
		return epoch, c.entries[0].StartOffset
	}
	return c.entries[higher-1].Epoch, c.entries[higher].StartOffset
}

// epochForOffset is the epoch of the entry with the largest start offset
// <= offset.
func (c *epochCache) epochForOffset(offset int64) (int32, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	epoch, found := int32(-1), false
	for _, e := range c.entries {
		if e.StartOffset > offset {
			break
		}
		epoch, found = e.Epoch, true
	}
	return epoch, found
}

// truncateFromEnd drops entries starting at or after endOffset.
func (c *epochCache) truncateFromEnd(endOffset int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= endOffset {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// truncateFromStart drops entries wholly before startOffset; the last one
// at or before it now starts at startOffset.
func (c *epochCache) truncateFromStart(startOffset int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i < len(c.entries) && c.entries[i].StartOffset <= startOffset {
		i++
	}
	if i == 0 {
		return false
	}
	first := EpochEntry{Epoch: c.entries[i-1].Epoch, StartOffset: startOffset}
	changed := i > 1 || c.entries[0] != first
	c.entries = append([]EpochEntry{first}, c.entries[i:]...)
	return changed
}

// snapshot copies the entries.
func (c *epochCache) snapshot() []EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]EpochEntry(nil), c.entries...)
}

// takeSnapshot copies the entries for a write, which will save them.
func (c *epochCache) takeSnapshot() []EpochEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unsaved = false
	return append([]EpochEntry(nil), c.entries...)
}

// write persists the cache atomically and durably.
func (c *epochCache) write() error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if err := vfs.WriteFileAtomic(c.fsys, c.path(), encodeEpochCheckpoint(c.takeSnapshot())); err != nil {
		c.markUnsaved()
		return fmt.Errorf("writing %s: %w", c.path(), err)
	}
	return nil
}

// saveUnsaved writes the file when an assignment is not in it yet, with
// its content synced but not its directory entry: the flush calling it
// syncs the log's directory once for everything it made. It reports
// whether it wrote.
func (c *epochCache) saveUnsaved() (bool, error) {
	return c.saveUnsavedWith(vfs.WriteFileSynced)
}

// saveUnsavedWith is saveUnsaved writing with write.
func (c *epochCache) saveUnsavedWith(write func(vfs.FS, string, []byte) error) (bool, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.RLock()
	unsaved := c.unsaved
	c.mu.RUnlock()
	if !unsaved {
		return false, nil
	}
	if err := write(c.fsys, c.path(), encodeEpochCheckpoint(c.takeSnapshot())); err != nil {
		c.markUnsaved()
		return false, fmt.Errorf("writing %s: %w", c.path(), err)
	}
	return true, nil
}

func (c *epochCache) markUnsaved() {
	c.mu.Lock()
	c.unsaved = true
	c.mu.Unlock()
}
