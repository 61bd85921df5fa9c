package storage

// Log dir failure: Kafka's LogDirFailureChannel and
// ReplicaManager.handleLogDirFailure, for one node.
//
// An I/O error in any log of a dir, or in writing the dir's checkpoints,
// takes the whole dir offline: every log in it answers KAFKA_STORAGE_ERROR
// from then on (produce, fetch, list offsets, through Log.Err), its
// checkpoints and clean-shutdown marker are no longer written, DescribeDirs
// reports it with the error, and its partitions are not recreated in
// another dir. The logs of other dirs keep serving. When the last dir goes
// offline the manager calls ManagerOptions.AllDirsOffline: Kafka halts the
// broker then, and the binary stops (cmd/gregor).
//
// The failure is shared state, not a message: the dir's dirHealth is
// pointed to by each of its logs, so the moment one log fails every other
// log of the dir refuses work, without a lock. The rest of the handling
// (closing the dir's logs, counting the dirs still online) needs
// Manager.mu, which a failing log cannot take (it may hold Log.mu, lower in
// the lock order): it runs on the manager's failure goroutine, woken
// through a channel that never blocks the sender.
//
// Departure from Kafka: a full disk (ENOSPC, EDQUOT) on a write that is
// undone cleanly does not take the dir offline. Kafka treats it as any
// IOException; Gregor refuses the append (or skips the checkpoint) with
// KAFKA_STORAGE_ERROR, leaves the log as it was, and takes the next append
// once space is freed. Writes whose failure cannot be undone (an fsync: the
// kernel may have dropped the dirty pages; a partial write that cannot be
// cut back) still take the dir offline.

import (
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
)

// dirHealth is one log dir's online state, shared by the manager and the
// dir's logs.
type dirHealth struct {
	path string
	// failure is the error that took the dir offline, wrapped as
	// KAFKA_STORAGE_ERROR; nil while online.
	failure atomic.Pointer[error]
	// failed is called once, by whoever takes the dir offline, perhaps
	// under a Log's locks: it must neither block nor lock.
	failed func()
}

// fail takes the dir offline; only the first failure counts.
func (h *dirHealth) fail(cause error) {
	werr := fmt.Errorf("log dir %s is offline: %w: %w", h.path, kerr.KafkaStorageError, cause)
	if h.failure.CompareAndSwap(nil, &werr) && h.failed != nil {
		h.failed()
	}
}

// err is the error the dir went offline with, nil while it is online.
func (h *dirHealth) err() error {
	if h == nil {
		return nil
	}
	if p := h.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// isNoSpace reports a full disk or an exhausted quota.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// isIOFailure reports an error from a file operation itself (not from a
// file closed under a reader, nor from what the bytes mean): the kind of
// error that takes a dir offline when a read meets it.
func isIOFailure(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && !errors.Is(err, fs.ErrClosed) && !errors.Is(err, errSegmentClosed)
}

// noteDirFailure wakes the failure goroutine for d; called through
// dirHealth.failed. The channel holds one slot per dir and a dir fails
// once, so the send never blocks.
func (m *Manager) noteDirFailure(d *logDir) {
	m.logger.Error("log dir is offline after an I/O error: its partitions answer KAFKA_STORAGE_ERROR", "dir", d.path, "err", d.health.err())
	m.failedDirs <- d
}

// handleDirFailures runs on the manager's failure goroutine until stop is
// closed: it closes the logs of each dir that went offline (freeing their
// files, ending their background flushes) and calls AllDirsOffline when no
// dir is left.
func (m *Manager) handleDirFailures(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case d := <-m.failedDirs:
			m.takeDirOffline(d)
		}
	}
}

func (m *Manager) takeDirOffline(d *logDir) {
	m.mu.Lock()
	var logs []*Log
	for tp, l := range m.logs {
		if m.logDirOf[tp] == d {
			logs = append(logs, l)
		}
	}
	online := 0
	for _, o := range m.dirs {
		if o.Err() == nil {
			online++
		}
	}
	m.mu.Unlock()
	// Closed but kept in the map: they answer KAFKA_STORAGE_ERROR, and
	// OpenLogs does not recreate them elsewhere.
	for _, l := range logs {
		if err := l.Close(); err != nil {
			m.logger.Debug("closing a log of an offline dir", "partition", l.tp.String(), "err", err)
		}
	}
	m.logger.Warn("log dir taken offline", "dir", d.path, "partitions", len(logs), "onlineDirs", online)
	if online == 0 && m.opts.AllDirsOffline != nil {
		m.opts.AllDirsOffline(fmt.Errorf("every log dir is offline, the last one %s: %w", d.path, d.Err()))
	}
}
