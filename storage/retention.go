package storage

import (
	"errors"
	"fmt"
)

// Time- and size-based retention (cleanup.policy=delete), as Kafka's
// UnifiedLog.deleteOldSegments does it: the oldest segments go first and
// the pass stops at the first segment retention keeps, so what remains is
// always a contiguous tail. A segment is deletable only when everything in
// it is below the high watermark (a consumer may still need what is above),
// and the empty active segment never is. When every segment is deletable,
// the active one is rolled first so the log keeps an (empty) segment at its
// end, and the log start offset moves to the log end.
//
// retention.ms compares each segment's largest record timestamp (not the
// file's time) with the clock; a segment without timestamps uses its
// creation time. retention.bytes deletes the oldest segments while what
// remains would still be at least retention.bytes. Both apply, time first.
//
// A tiered log (tiered.go) is kept by local.retention.ms and
// local.retention.bytes instead (-2: as retention.*), deletes only
// segments already in remote storage, and leaves the log start where it
// is: the remote log manager's retention moves it.

// RetentionResult says what one retention pass deleted.
type RetentionResult struct {
	Segments       int   // segments deleted
	Bytes          int64 // their size
	LogStartOffset int64 // the log start offset afterwards
}

// DeleteRetainedSegments runs one retention pass. Compact-only topics and
// closed or failed logs are left alone.
func (l *Log) DeleteRetainedSegments() (RetentionResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	res := RetentionResult{LogStartOffset: l.logStartOffset.Load()}
	if l.closed {
		return res, nil
	}
	if err := l.Err(); err != nil {
		return res, err
	}
	cfg := l.config()
	if !cfg.Delete {
		return res, nil
	}
	nowMs := l.expiryNow().UnixMilli()
	hw := l.highWatermark.Load()
	segs := l.segments
	// upper is the offset after segment i's last batch.
	upper := func(i int) int64 {
		if i+1 < len(segs) {
			return segs[i+1].baseOffset
		}
		return l.logEndOffset.Load()
	}
	retentionMs, retentionBytes := cfg.RetentionMs, cfg.RetentionBytes
	// With remote.log.copy.disable the log is kept as an untiered one
	// (local.retention.* must equal retention.* then), its log start
	// moving with local deletions, as Kafka's
	// remoteLogEnabledAndRemoteCopyEnabled.
	tiered := l.tiered.Load() && !cfg.RemoteLogCopyDisable
	if tiered {
		retentionMs, retentionBytes = localRetention(cfg.LocalRetentionMs, cfg.LocalRetentionBytes, retentionMs, retentionBytes)
	}
	copied := l.highestRemote.Load()
	deletable := func(i int) bool {
		if i == len(segs)-1 && segs[i].size.Load() == 0 {
			return false
		}
		if tiered && upper(i)-1 > copied && upper(i) > l.logStartOffset.Load() {
			// Not all of it is in remote storage yet.
			return false
		}
		return upper(i) <= hw
	}
	if tiered {
		// An active segment past local retention is rolled, so that it is
		// copied and then deleted (Kafka's deletableSegments rolls it).
		last := len(segs) - 1
		act := segs[last]
		breached := retentionMs >= 0 && nowMs-act.largestTimestamp() > retentionMs
		if !breached && retentionBytes >= 0 {
			var total int64
			for _, s := range segs {
				total += s.size.Load()
			}
			breached = total-act.size.Load() < retentionBytes && total > retentionBytes
		}
		if breached && act.size.Load() > 0 && upper(last) <= hw && act.nextOffset <= l.LastStableOffset() {
			if err := l.roll(l.logEndOffset.Load(), l.now().UnixMilli()); err != nil {
				if !errors.As(err, new(*rollUndoneError)) {
					err = l.fail(err)
				}
				return res, fmt.Errorf("rolling %s past local retention: %w", l.tp, err)
			}
			l.logger().Info("rolled the active segment past local retention, to copy it", "base_offset", act.baseOffset)
			segs = l.segments
		}
	}
	n := 0
	if retentionMs >= 0 {
		for n < len(segs) && deletable(n) && nowMs-segs[n].largestTimestamp() > retentionMs {
			n++
		}
	}
	if retentionBytes >= 0 {
		var total int64
		for _, s := range segs[n:] {
			total += s.size.Load()
		}
		excess := total - retentionBytes
		for n < len(segs) && deletable(n) && excess-segs[n].size.Load() >= 0 {
			excess -= segs[n].size.Load()
			n++
		}
	}
	if n == 0 {
		return res, nil
	}
	for _, s := range segs[:n] {
		res.Bytes += s.size.Load()
	}
	res.Segments = n
	newStart := upper(n - 1)
	if tiered {
		// Local retention: the segments are in remote storage, the log
		// start stays.
		l.logger().Info("deleting local segments past local retention", "segments", n,
			"bytes", res.Bytes, "local_log_start_offset", newStart, "local_retention_ms", retentionMs, "local_retention_bytes", retentionBytes)
		if err := l.deleteSegments(n, nowMs); err != nil {
			return res, fmt.Errorf("local retention of %s: %w", l.tp, l.fail(err))
		}
		if err := l.producers.deleteSnapshotsBefore(l.segments[0].baseOffset); err != nil {
			return res, fmt.Errorf("local retention of %s: %w", l.tp, l.fail(err))
		}
		return res, nil
	}
	if newStart <= l.logStartOffset.Load() {
		// DeleteRecords deletes the segments wholly below the log start,
		// so this does not happen; nothing to do if it did.
		return RetentionResult{LogStartOffset: res.LogStartOffset}, nil
	}
	l.logger().Info("deleting segments past retention", "segments", n,
		"bytes", res.Bytes, "log_start_offset", newStart, "retention_ms", cfg.RetentionMs, "retention_bytes", cfg.RetentionBytes)
	if err := l.advanceLogStart(newStart); err != nil {
		return res, fmt.Errorf("retention of %s: %w", l.tp, err)
	}
	res.LogStartOffset = l.logStartOffset.Load()
	return res, nil
}

// largestTimestamp is the largest record timestamp in s, or its creation
// time when its batches carry none. Opening a log sets maxTimestamp for
// every segment (loadTrusted reads the time index and the tail, recovery
// scans the batches), so a restart does not make old segments look new.
func (s *segment) largestTimestamp() int64 {
	if ts := s.maxTimestamp.Load(); ts >= 0 {
		return ts
	}
	return s.createdMs
}
